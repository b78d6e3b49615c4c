//! vmap against loops: generated programs (every drawable primitive) batched by
//! `transform::vmap` with random axes, every input batched or shared, against evaluating the
//! original program once per example. The batched program must give each example's outputs
//! bit for bit, except where a batching rule reorders a sum (none does today: the figure
//! `max_abs_error` records the largest difference). The helpers that stack examples along an
//! axis and take them apart serve the tests too.

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::generate::{generate, random_inputs, GenConfig};
use super::{Ctx, FamilyReport, Tally};
use crate::interp;
use crate::ir::Program;
use crate::tensor::{Tensor, TensorType};
use crate::transform::{vmap, Axis};

pub(crate) fn run(ctx: &Ctx) -> FamilyReport {
    let n = ctx.level.pick(12, 400, 2000);
    let mut t = ctx.tally(
        "generated programs batched by vmap with random in and out axes, against a loop of evaluations: bitwise equal",
        "JAX's vmap semantics: a batched program applied to a batch equals the program applied to each example",
        n,
    );
    t.figure("programs", n);
    let mut rng = ctx.rng();
    for k in 0..n {
        let seed = rng.random::<u64>();
        let cfg = GenConfig {
            n_nodes: rng.random_range(1..=12),
            max_outputs: 2,
            ..GenConfig::default()
        };
        let what = format!("program {k} (seed {seed})");
        match generate(&cfg, seed) {
            Ok(p) => check_random_axes(&mut t, &p, &what, seed),
            Err(e) => t.fail(format!("{what}: {e}")),
        }
        t.case();
    }
    t.finish()
}

/// One batching of `p` with axes drawn from `seed`, checked against the loop.
fn check_random_axes(t: &mut Tally, p: &Program, what: &str, seed: u64) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x766d_6170);
    let size = rng.random_range(1..=3);
    let mut in_axes: Vec<Axis> = p
        .inputs()
        .iter()
        .map(|i| {
            rng.random_bool(0.6)
                .then(|| rng.random_range(0..=i.ty.rank()))
        })
        .collect();
    if in_axes.iter().all(Option::is_none) {
        in_axes[0] = Some(0);
    }
    let out_axes: Vec<Axis> = p
        .output_types()
        .iter()
        .map(|ty| Some(rng.random_range(0..=ty.rank())))
        .collect();
    let examples: Vec<Vec<Tensor>> = (0..size).map(|_| random_inputs(p, &mut rng)).collect();
    let what = format!("{what}, batch {size}, in {in_axes:?}, out {out_axes:?}");
    match against_loop(p, &in_axes, &out_axes, &examples) {
        Ok(err) => {
            t.max_error("max_abs_error", err);
            t.check(err == 0.0, || {
                format!("{what}: differs from the loop by {err:e}")
            });
        }
        Err(e) => t.fail(format!("{what}: {e}")),
    }
}

/// Batches `p` over `examples` (each a full input list; a shared input is read from the first
/// example) and returns the largest difference between the batched program's outputs and the
/// program evaluated on each example.
pub fn against_loop(
    p: &Program,
    in_axes: &[Axis],
    out_axes: &[Axis],
    examples: &[Vec<Tensor>],
) -> Result<f64, String> {
    let size = examples.len();
    let q = vmap(p, size, in_axes, out_axes).map_err(|e| e.to_string())?;
    let batched: Vec<Tensor> = in_axes
        .iter()
        .enumerate()
        .map(|(k, axis)| match axis {
            None => examples[0][k].clone(),
            Some(a) => {
                let parts: Vec<Tensor> = examples.iter().map(|e| e[k].clone()).collect();
                stack_at(&parts, *a)
            }
        })
        .collect();
    let got = interp::eval(&q, &batched).map_err(|e| format!("batched: {e}"))?;
    let mut worst: f64 = 0.0;
    for (i, example) in examples.iter().enumerate() {
        let inputs: Vec<Tensor> = in_axes
            .iter()
            .enumerate()
            .map(|(k, axis)| match axis {
                None => examples[0][k].clone(),
                Some(_) => example[k].clone(),
            })
            .collect();
        let want = interp::eval(p, &inputs).map_err(|e| format!("example {i}: {e}"))?;
        for (j, (w, g)) in want.iter().zip(&got).enumerate() {
            let g = match out_axes[j] {
                Some(a) => slice_at(g, a, i),
                None => g.clone(),
            };
            if g.ty() != w.ty() {
                return Err(format!(
                    "output {j}: type {} per example, expected {}",
                    g.ty(),
                    w.ty()
                ));
            }
            for (x, y) in w.to_f64_vec().iter().zip(g.to_f64_vec()) {
                if x.to_bits() != y.to_bits() {
                    // A difference in sign of zero still counts as a difference.
                    worst = worst.max((x - y).abs().max(f64::MIN_POSITIVE));
                }
            }
        }
    }
    Ok(worst)
}

/// Tensors of one type stacked along a new axis `axis`.
pub fn stack_at(parts: &[Tensor], axis: usize) -> Tensor {
    let ty = parts[0].ty();
    let dims = ty.dims();
    let outer: usize = dims[..axis].iter().product();
    let inner: usize = dims[axis..].iter().product();
    let values: Vec<Vec<f64>> = parts.iter().map(Tensor::to_f64_vec).collect();
    let mut data = Vec::with_capacity(outer * inner * parts.len());
    for o in 0..outer {
        for v in &values {
            data.extend_from_slice(&v[o * inner..(o + 1) * inner]);
        }
    }
    let mut shape = dims.to_vec();
    shape.insert(axis, parts.len());
    Tensor::from_f64s(ty.dtype, shape, data).expect("stacked length matches")
}

/// Element `i` along axis `axis`, that axis removed.
pub fn slice_at(t: &Tensor, axis: usize, i: usize) -> Tensor {
    let dims = t.dims();
    let outer: usize = dims[..axis].iter().product();
    let n = dims[axis];
    let inner: usize = dims[axis + 1..].iter().product();
    let v = t.to_f64_vec();
    let mut data = Vec::with_capacity(outer * inner);
    for o in 0..outer {
        let start = (o * n + i) * inner;
        data.extend_from_slice(&v[start..start + inner]);
    }
    let mut shape = dims.to_vec();
    shape.remove(axis);
    let ty = TensorType::new(t.dtype(), shape);
    Tensor::from_f64s(ty.dtype, ty.shape, data).expect("slice length matches")
}
