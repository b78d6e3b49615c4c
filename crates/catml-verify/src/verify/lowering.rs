//! Kernels against lowerings, forward and reverse: the paired refinement of docs/rewrites.md made
//! executable, node by node.
//!
//! For every node of generated programs whose primitive returns `Some` from `lower`, the
//! one-node program N = prim(x) and its lowering L (the same inputs, `prim.lower(x)`) are
//! compared at the node's actual operands (so inside the admissible domain), with random
//! tangents and seeds:
//! - where both are rational, eval, JVP and VJP programs agree exactly over rationals;
//! - in f64 and f32, eval, JVP and VJP agree within ‖N - L‖∞ <= 2^8 u max(1, ‖N‖∞).
//!
//! Composites registered later are picked up here as soon as the generator has a row for them;
//! registered primitives without a row are listed as `uncovered_primitives`.

use std::collections::BTreeMap;

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::generate::{generate, random_inputs, random_tensor, uncovered, GenConfig};
use super::numeric::{flat, max_abs, Derivatives};
use super::rewrites::with_all_values;
use super::{Ctx, FamilyReport, Tally};
use crate::interp;
use crate::ir::{Builder, InputKind, Node, Program, Var};
use crate::tensor::{rational_from_f64, DType, RArray, Tensor, TensorType};

pub(crate) fn run(ctx: &Ctx) -> FamilyReport {
    let programs = ctx.level.pick(12, 2010, 10050);
    let mut t = ctx.tally(
        "composite kernels against their lowerings into the core fragment: eval, JVP and VJP, exactly over rationals where possible and in f64 and f32",
        "no reference figure: the paired refinement of docs/rewrites.md, kernel against lowering, forward and reverse",
        programs,
    );
    let mut lowered: BTreeMap<String, u64> = BTreeMap::new();
    let mut rng = ctx.rng();
    for k in 0..programs {
        let seed = rng.random::<u64>();
        let cfg = GenConfig {
            dtype: if k % 2 == 0 { DType::F64 } else { DType::F32 },
            n_nodes: rng.random_range(2..=20),
            ..GenConfig::default()
        };
        match generate(&cfg, seed) {
            Ok(p) => check_program(&mut t, &p, seed, k, &mut lowered),
            Err(e) => t.fail(format!("program {k}: {e}")),
        }
        t.case();
    }
    t.figure("programs", programs);
    t.figure("lowered_instances", &lowered);
    t.figure("uncovered_primitives", uncovered(crate::prim::builtins()));
    t.figure("tolerance", "2^8 u max(1, |N|_inf)");
    t.finish()
}

/// The one-node program and its lowering at these operand types.
fn pair(node: &Node, types: &[TensorType]) -> Option<Result<(Program, Program), String>> {
    let inputs = |b: &mut Builder| -> Vec<Var> {
        types
            .iter()
            .enumerate()
            .map(|(i, ty)| {
                b.input(&format!("x{i}"), ty.clone(), InputKind::Data)
                    .expect("fresh")
            })
            .collect()
    };
    let mut b = Builder::new();
    let xs = inputs(&mut b);
    let lowered = node.prim.lower(&mut b, &xs)?;
    Some((|| {
        let y = lowered.map_err(|e| format!("lowering: {e}"))?;
        let l = b.finish(&[y]).map_err(|e| e.to_string())?;
        let mut b = Builder::new();
        let xs = inputs(&mut b);
        let y = b.apply(node.prim.clone(), &xs).map_err(|e| e.to_string())?;
        let n = b.finish(&[y]).map_err(|e| e.to_string())?;
        Ok((n, l))
    })())
}

fn rational(ts: &[Tensor]) -> Vec<RArray> {
    ts.iter()
        .map(|t| {
            let data = t
                .to_f64_vec()
                .iter()
                .map(|&v| rational_from_f64(v).expect("finite"))
                .collect();
            RArray::new(t.shape().clone(), data).expect("numel")
        })
        .collect()
}

fn check_program(
    t: &mut Tally,
    p: &Program,
    seed: u64,
    k: usize,
    lowered: &mut BTreeMap<String, u64>,
) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let x = random_inputs(p, &mut rng);
    let values = match interp::eval(&with_all_values(p), &x) {
        Ok(v) => v,
        Err(e) => return t.fail(format!("program {k}: {e}")),
    };
    for node in p.nodes() {
        let args: Vec<Tensor> = node
            .operands
            .iter()
            .map(|o| values[o.index()].clone())
            .collect();
        let types: Vec<TensorType> = args.iter().map(Tensor::ty).collect();
        let Some(pair) = pair(node, &types) else {
            continue;
        };
        let name = node.prim.name().to_string();
        *lowered.entry(name.clone()).or_default() += 1;
        let at = || format!("program {k}: node `{}` ({name})", node.name);
        let (n, l) = match pair {
            Ok(pl) => pl,
            Err(e) => {
                t.fail(format!("{}: {e}", at()));
                continue;
            }
        };
        let (dn, dl) = match (Derivatives::new(&n), Derivatives::new(&l)) {
            (Ok(a), Ok(b)) => (a, b),
            (Err(e), _) | (_, Err(e)) => {
                t.fail(format!("{}: {e}", at()));
                continue;
            }
        };
        let v: Vec<Tensor> = types
            .iter()
            .map(|ty| random_tensor(ty, &mut rng, 1.0))
            .collect();
        let u: Vec<Tensor> = n
            .output_types()
            .iter()
            .map(|ty| random_tensor(ty, &mut rng, 1.0))
            .collect();
        compare_floats(t, &dn, &dl, &args, &v, &u, &at);
        compare_exact(t, &dn, &dl, &args, &v, &u, &at);
    }
}

fn compare_floats(
    t: &mut Tally,
    dn: &Derivatives,
    dl: &Derivatives,
    x: &[Tensor],
    v: &[Tensor],
    u: &[Tensor],
    at: &dyn Fn() -> String,
) {
    let unit = x
        .iter()
        .map(|t| t.dtype().unit_roundoff())
        .fold(0.0, f64::max);
    let close = |t: &mut Tally, what: &str, a: &[Tensor], b: &[Tensor]| {
        let (a, b) = (flat(a), flat(b));
        let diff = a
            .iter()
            .zip(&b)
            .map(|(p, q)| (p - q).abs())
            .fold(0.0, f64::max);
        let rel = diff / max_abs(&a).max(1.0);
        t.check_le(
            &format!("{what}_relative_difference_u"),
            rel / unit,
            256.0,
            || format!("{}: {what}", at()),
        );
    };
    match (dn.jvp_at(x, v), dl.jvp_at(x, v)) {
        (Ok((yn, jn)), Ok((yl, jl))) => {
            close(t, "eval", &yn, &yl);
            close(t, "jvp", &jn, &jl);
        }
        (Err(e), _) | (_, Err(e)) => t.fail(format!("{}: jvp: {e}", at())),
    }
    match (dn.vjp_at(x, u), dl.vjp_at(x, u)) {
        (Ok((_, gn)), Ok((_, gl))) => close(t, "vjp", &gn, &gl),
        (Err(e), _) | (_, Err(e)) => t.fail(format!("{}: vjp: {e}", at())),
    }
}

fn compare_exact(
    t: &mut Tally,
    dn: &Derivatives,
    dl: &Derivatives,
    x: &[Tensor],
    v: &[Tensor],
    u: &[Tensor],
    at: &dyn Fn() -> String,
) {
    let (rx, rv, ru) = (rational(x), rational(v), rational(u));
    let mut jargs = rx.clone();
    jargs.extend(rv);
    let mut vargs = rx;
    vargs.extend(ru);
    for (what, pn, pl, args) in [
        ("eval", &dn.program, &dl.program, &jargs[..x.len()]),
        ("jvp", &dn.jvp.program, &dl.jvp.program, &jargs[..]),
        ("vjp", &dn.vjp.program, &dl.vjp.program, &vargs[..]),
    ] {
        // Only where both sides have an exact evaluation.
        if let (Ok(a), Ok(b)) = (
            interp::eval_rational(pn, args),
            interp::eval_rational(pl, args),
        ) {
            t.count("exact_comparisons", 1);
            t.check(a == b, || {
                format!("{}: {what} differs over rationals", at())
            });
        }
    }
}
