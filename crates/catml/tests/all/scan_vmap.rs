//! vmap through scan: per-example gradients of a GRU run by scan against the loop (bitwise), a
//! carry made batched by the body and one left shared, vmap of vmap, and vmap with grad and jvp
//! in both orders.

use catml::ad;
use catml::interp;
use catml::ir::{Builder, InputKind, Program};
use catml::nn::{seeded, Gru, Linear};
use catml::prim::scan::{scan, Scan};
use catml::prim::Ops;
use catml::tensor::{DType, Tensor, TensorType};
use catml::trace::trace_named;
use catml::transform::{vmap, Axis};
use catml::verify::generate::random_tensor;
use catml::verify::vmap::{against_loop, slice_at};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

const T: usize = 4;
const HIDDEN: usize = 3;

/// One example's loss mean((W h_T + b - target)^2) + 1e-3 sum(h) of a GRU (run as one scan)
/// over (T, 1, 2) inputs, and its parameters in input order.
fn gru_loss(dt: DType) -> (Program, Vec<Tensor>) {
    let xs = ("xs", TensorType::new(dt, [T, 1, 2]));
    let h0 = ("h0", TensorType::new(dt, [1, HIDDEN]));
    let target = ("target", TensorType::new(dt, [1, 1]));
    let traced = trace_named(&[xs, h0, target], |v| {
        let mut rng = seeded(3);
        let h = Gru::new(HIDDEN).apply(&v[0], &v[1], &mut rng, "rec");
        let all = h.all.sum_all().scale(1e-3);
        &Linear::new(1).apply(&h.last, &mut rng, "out").mse(&v[2]) + &all
    })
    .unwrap();
    let p = traced.program;
    assert!(p.nodes().iter().any(|n| n.prim.name() == "scan"));
    let params = p
        .inputs()
        .iter()
        .filter(|i| i.kind == InputKind::Param)
        .map(|i| traced.params.get(&i.name).unwrap().clone())
        .collect();
    (p, params)
}

fn draw(ty: &TensorType, seed: u64) -> Tensor {
    random_tensor(ty, &mut ChaCha8Rng::seed_from_u64(seed), 1.0)
}

/// `n` examples of `p`'s data inputs (the first three), each followed by `params`.
fn examples(p: &Program, params: &[Tensor], n: usize, seed: u64) -> Vec<Vec<Tensor>> {
    (0..n)
        .map(|e| {
            let mut inputs: Vec<Tensor> = (0..3)
                .map(|k| draw(&p.inputs()[k].ty, seed + 10 * e as u64 + k as u64))
                .collect();
            inputs.extend(params.iter().cloned());
            inputs
        })
        .collect()
}

#[test]
fn per_example_gradients_of_a_scanned_gru_equal_a_loop_bitwise() {
    for dt in [DType::F32, DType::F64] {
        let (p, params) = gru_loss(dt);
        let g = ad::grad(&p).unwrap().program;
        let ex = examples(&p, &params, 3, 40);
        let out_axes = vec![Some(0); g.outputs().len()];
        // Every data input batched; then h0 shared, so the carry becomes batched only through
        // the body reading x.
        for batched in [[true, true, true], [true, false, true]] {
            let mut in_axes: Vec<Axis> = batched.iter().map(|&b| b.then_some(0)).collect();
            in_axes.resize(g.n_inputs(), None);
            let err = against_loop(&g, &in_axes, &out_axes, &ex).unwrap();
            assert_eq!(
                err, 0.0,
                "{dt}, {batched:?}: differs from the loop by {err:e}"
            );
        }
        // Batched along xs' time axis and h0's last axis.
        let mut in_axes: Vec<Axis> = vec![Some(1), Some(2), Some(0)];
        in_axes.resize(g.n_inputs(), None);
        let out_axes: Vec<Axis> = (0..g.outputs().len()).map(|k| Some(k % 2)).collect();
        let out_axes: Vec<Axis> = out_axes
            .iter()
            .zip(g.output_types())
            .map(|(a, t)| a.map(|a| a.min(t.rank())))
            .collect();
        assert_eq!(against_loop(&g, &in_axes, &out_axes, &ex).unwrap(), 0.0);
    }
}

/// A scan with two carries: a counter a' = a + k that reads only a shared const, and
/// c' = tanh(c * a + x_t); ys (c', a' * x_t). Returns (a_T, every c, ys).
fn two_carries(reverse: bool, stack: bool) -> Program {
    let row = TensorType::new(DType::F64, [2]);
    let mut body = Builder::new();
    let a = body.input("a", row.clone(), InputKind::Data).unwrap();
    let c = body.input("c", row.clone(), InputKind::Data).unwrap();
    let x = body.input("x", row.clone(), InputKind::Data).unwrap();
    let k = body.input("k", row.clone(), InputKind::Data).unwrap();
    let a2 = body.add(a, k).unwrap();
    let ca = body.mul(c, a).unwrap();
    let pre = body.add(ca, x).unwrap();
    let c2 = body.tanh(pre).unwrap();
    let y = body.mul(a2, x).unwrap();
    let body = body.finish(&[a2, c2, c2, y]).unwrap();
    let mut b = Builder::new();
    let a0 = b.input("a0", row.clone(), InputKind::Data).unwrap();
    let c0 = b.input("c0", row.clone(), InputKind::Data).unwrap();
    let xs = b
        .input("xs", TensorType::new(DType::F64, [T, 2]), InputKind::Data)
        .unwrap();
    let k = b.input("k", row, InputKind::Param).unwrap();
    let s = Scan::new(body, T, 2, 1, 1)
        .unwrap()
        .reversed(reverse)
        .stacking_carries(stack);
    let r = scan(&mut b, s, &[a0, c0], &[xs], &[k]).unwrap();
    let mut outs = vec![r.final_carries[0], r.final_carries[1], r.ys[0], r.ys[1]];
    outs.push(r.value);
    b.finish(&outs).unwrap()
}

#[test]
fn a_carry_the_batch_does_not_reach_stays_shared_and_the_others_batch() {
    for reverse in [false, true] {
        for stack in [true, false] {
            let p = two_carries(reverse, stack);
            let ex: Vec<Vec<Tensor>> = (0..3)
                .map(|e| {
                    p.inputs()
                        .iter()
                        .enumerate()
                        .map(|(k, i)| draw(&i.ty, 60 + 7 * e + k as u64))
                        .collect()
                })
                .collect();
            let outs = vec![Some(0); p.outputs().len()];
            for in_axes in [
                vec![None, None, Some(1), None],
                vec![None, Some(0), None, None],
                vec![Some(1), None, None, None],
                vec![None, None, None, Some(0)],
                vec![Some(0), Some(1), Some(0), Some(1)],
            ] {
                let err = against_loop(&p, &in_axes, &outs, &ex).unwrap();
                assert_eq!(err, 0.0, "reverse {reverse}, stack {stack}, {in_axes:?}");
            }
            // Only xs batched: the counter a is not batched inside the batched scan.
            let q = vmap(&p, 3, &[None, None, Some(0), None], &outs).unwrap();
            let inner = q.nodes().iter().find(|n| n.prim.name() == "scan").unwrap();
            let body = inner.prim.body().unwrap();
            assert_eq!(body.inputs()[0].ty.dims(), [2], "the counter stays shared");
            assert_eq!(body.inputs()[1].ty.dims(), [3, 2], "c is batched");
        }
    }
}

#[test]
fn vmap_of_vmap_through_a_scan_equals_a_double_loop() {
    let (p, params) = gru_loss(DType::F64);
    let n = p.n_inputs();
    let mut inner_axes: Vec<Axis> = vec![Some(0), None, Some(0)];
    inner_axes.resize(n, None);
    let inner = vmap(&p, 2, &inner_axes, &[Some(0)]).unwrap();
    let mut outer_axes: Vec<Axis> = vec![Some(2), Some(0), None];
    outer_axes.resize(n, None);
    let outer = vmap(&inner, 3, &outer_axes, &[Some(1)]).unwrap();
    let xs = draw(&TensorType::new(DType::F64, [2, T, 3, 1, 2]), 80);
    let h0s = draw(&TensorType::new(DType::F64, [3, 1, HIDDEN]), 81);
    let targets = draw(&TensorType::new(DType::F64, [2, 1, 1]), 82);
    let mut args = vec![xs.clone(), h0s.clone(), targets.clone()];
    args.extend(params.iter().cloned());
    let got = interp::eval(&outer, &args).unwrap();
    assert_eq!(got[0].dims(), [2, 3]);
    for i in 0..2 {
        for j in 0..3 {
            let mut one = vec![
                slice_at(&slice_at(&xs, 0, i), 1, j),
                slice_at(&h0s, 0, j),
                slice_at(&targets, 0, i),
            ];
            one.extend(params.iter().cloned());
            let want = interp::eval(&p, &one).unwrap();
            assert_eq!(slice_at(&slice_at(&got[0], 0, i), 0, j), want[0]);
        }
    }
}

fn close(a: &Tensor, b: &Tensor, tol: f64) {
    assert_eq!(a.ty(), b.ty());
    let d = a.max_abs_diff(b);
    assert!(d <= tol, "differ by {d:e}");
}

#[test]
fn vmap_of_grad_through_a_scan_equals_grad_of_vmap() {
    let (p, params) = gru_loss(DType::F64);
    const B: usize = 3;
    let n = p.n_inputs();
    let mut in_axes: Vec<Axis> = vec![Some(0), Some(0), Some(0)];
    in_axes.resize(n, None);
    let ex = examples(&p, &params, B, 90);
    let stack = |k: usize| {
        catml::verify::vmap::stack_at(&ex.iter().map(|e| e[k].clone()).collect::<Vec<_>>(), 0)
    };
    let mut args: Vec<Tensor> = (0..3).map(stack).collect();
    args.extend(params.iter().cloned());
    // vmap(grad): per-example gradients.
    let g = ad::grad(&p).unwrap();
    let vg = vmap(
        &g.program,
        B,
        &in_axes,
        &vec![Some(0); g.program.outputs().len()],
    )
    .unwrap();
    let per = interp::eval(&vg, &args).unwrap();
    // grad(vmap): the gradient of the summed batched loss.
    let vp = vmap(&p, B, &in_axes, &[Some(0)]).unwrap();
    let mut b = Builder::new();
    let ins: Vec<_> = vp
        .inputs()
        .iter()
        .map(|i| b.input(&i.name, i.ty.clone(), i.kind).unwrap())
        .collect();
    let outs = b.inline(&vp, &ins).unwrap();
    let total = b.sum(outs[0], None).unwrap();
    let summed = b.finish(&[total]).unwrap();
    let gv = ad::grad(&summed).unwrap();
    let whole = interp::eval(&gv.program, &args).unwrap();
    for k in 0..n {
        let (Some(a), Some(c)) = (gv.layout.gradient_output(k), g.layout.gradient_output(k)) else {
            continue;
        };
        if k < 3 {
            // A data input's gradient is each example's own.
            close(&whole[a], &per[c], 1e-13);
        } else {
            // A shared parameter's gradient is the sum over examples (up to the sum's order).
            let want: Vec<f64> = (0..whole[a].numel())
                .map(|e| {
                    (0..B)
                        .map(|i| slice_at(&per[c], 0, i).to_f64_vec()[e])
                        .sum()
                })
                .collect();
            let want = Tensor::from_f64s(DType::F64, whole[a].dims().to_vec(), want).unwrap();
            close(&whole[a], &want, 1e-12);
        }
    }
}

#[test]
fn jvp_of_vmap_through_a_scan_equals_vmap_of_jvp() {
    let (p, params) = gru_loss(DType::F64);
    const B: usize = 2;
    let n = p.n_inputs();
    let mut in_axes: Vec<Axis> = vec![Some(0), None, Some(0)];
    in_axes.resize(n, None);
    let j = ad::jvp(&p).unwrap().program;
    let mut j_axes = in_axes.clone();
    j_axes.extend(in_axes.iter().copied());
    let vj = vmap(&j, B, &j_axes, &[Some(0); 2]).unwrap();
    let jv = ad::jvp(&vmap(&p, B, &in_axes, &[Some(0)]).unwrap())
        .unwrap()
        .program;
    let args: Vec<Tensor> = vj
        .inputs()
        .iter()
        .enumerate()
        .map(
            |(k, i)| match k.checked_sub(3).filter(|&m| m < params.len()) {
                Some(m) => params[m].clone(),
                None => draw(&i.ty, 100 + k as u64),
            },
        )
        .collect();
    let a = interp::eval(&vj, &args).unwrap();
    let b = interp::eval(&jv, &args).unwrap();
    for (x, y) in a.iter().zip(&b) {
        close(x, y, 1e-13);
    }
}
