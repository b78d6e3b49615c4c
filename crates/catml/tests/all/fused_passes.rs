//! An `Executable` runs chains of elementwise nodes as one pass each (docs/memory.md, "Fused
//! elementwise passes"): every value is the interpreter's, bit for bit; errors and reports
//! name the nodes the interpreter names; and the pass never raises the planned peak.

use catml::interp::{self, EvalError, EvalOptions, EvalPlan, Executable};
use catml::ir::{Builder, InputKind, Program};
use catml::prim::Ops;
use catml::tensor::{DType, Tensor, TensorType};

/// Deterministic values in (0, 2) of several magnitudes, with `zeros` of them exactly 0.
fn values(dtype: DType, n: usize, seed: usize, zeros: usize) -> Tensor {
    let data = (0..n)
        .map(|i| match i < zeros {
            true => 0.0,
            false => ((i * 37 + seed * 11) % 101) as f64 / 50.5 + 1e-3 * (i % 7) as f64,
        })
        .collect();
    Tensor::from_f64s(dtype, vec![n], data).unwrap()
}

/// The benchmarks' Adam step (`workloads::adam_step_program`) on values with three zeros in
/// the gradient.
fn adam_step(dtype: DType, n: usize) -> (Program, Vec<Tensor>) {
    let inputs = vec![
        values(dtype, n, 1, 0),
        values(dtype, n, 2, 3),
        values(dtype, n, 3, 0),
        values(dtype, n, 4, 0),
    ];
    (crate::workloads::adam_step_program(dtype, n), inputs)
}

#[test]
fn fused_chains_give_the_interpreter_s_values_bit_for_bit() {
    // One element, part of a block, several blocks, and enough for the pass to be split
    // across threads with a ragged end.
    for n in [1, 6, 1000, 100_003] {
        for dtype in [DType::F32, DType::F64] {
            let (p, inputs) = adam_step(dtype, n);
            let want = interp::eval(&p, &inputs).unwrap();
            let exe = crate::support::on_tensors(p).unwrap();
            assert!(
                exe.plan().fused_passes() >= 3,
                "{dtype} {n}: m', v' and p' chains"
            );
            for _ in 0..2 {
                assert_eq!(
                    exe.run(&inputs, EvalOptions::default()).unwrap(),
                    want,
                    "{dtype} {n}"
                );
            }
        }
    }
}

#[test]
fn a_fused_pass_never_raises_the_planned_peak() {
    let (p, _) = adam_step(DType::F64, 1000);
    let plain = EvalPlan::new(&p).unwrap();
    let exe = crate::support::on_tensors(p).unwrap();
    assert!(exe.plan().fused_passes() > 0);
    assert!(exe.plan().peak().bytes <= plain.peak().bytes);
}

#[test]
fn an_executable_takes_a_plan_of_its_program_only() {
    let (p, inputs) = adam_step(DType::F64, 100);
    let (other, _) = adam_step(DType::F64, 200);
    let plain = EvalPlan::new(&p).unwrap();
    let fused = plain.clone().fusing_passes(&p);
    let err = Executable::with_plan(other.clone(), fused.clone()).unwrap_err();
    assert_eq!(err, EvalError::ForeignPlan);
    // The same counts, but another size: the plan's peak is not the program's.
    let args = vec![values(DType::F64, 200, 0, 0); 4];
    let err = interp::eval_planned(&other, &plain, &args, EvalOptions::default()).unwrap_err();
    assert_eq!(err, EvalError::ForeignPlan);
    let want = interp::eval(&p, &inputs).unwrap();
    for plan in [plain, fused] {
        let exe = Executable::with_plan(p.clone(), plan).unwrap();
        assert_eq!(exe.run(&inputs, EvalOptions::default()).unwrap(), want);
    }
}

#[test]
fn values_a_pass_no_longer_holds_are_still_read_by_their_other_readers() {
    // t = exp(x) is read by the chain and by an output, so the chain starts after it; u =
    // t · x is read by a later product only: two passes, one ending where the other reads.
    let ty = TensorType::new(DType::F64, [5000]);
    let mut b = Builder::new();
    let x = b.input("x", ty.clone(), InputKind::Data).unwrap();
    let t = b.exp(x).unwrap();
    let u = b.mul(t, x).unwrap();
    let w = b.tanh(u).unwrap();
    let y = b.sub(w, t).unwrap();
    let z = b.mul(y, y).unwrap();
    let q = b.neg(z).unwrap();
    let p = b.finish(&[q, t]).unwrap();
    let x = values(DType::F64, 5000, 9, 0);
    let want = interp::eval(&p, std::slice::from_ref(&x)).unwrap();
    let exe = crate::support::on_tensors(p).unwrap();
    assert_eq!(exe.plan().fused_passes(), 1, "u, w, y, z and q in one pass");
    assert_eq!(exe.run(&[x], EvalOptions::default()).unwrap(), want);
}

/// The interpreter's error for `inputs`, which the executable must give too, call after call.
fn fails_as_the_interpreter(p: Program, inputs: &[Tensor]) -> EvalError {
    let want = interp::eval(&p, inputs).unwrap_err();
    let exe = crate::support::on_tensors(p).unwrap();
    assert!(exe.plan().fused_passes() > 0);
    for _ in 0..2 {
        assert_eq!(exe.run(inputs, EvalOptions::default()).unwrap_err(), want);
    }
    want
}

#[test]
fn a_non_finite_value_inside_a_pass_names_its_node() {
    // exp overflows f32 in element 7000 of 40000 (the second thread's piece holds the
    // others): the error names exp, with the scan's count and first index.
    let n = 40_000;
    let ty = TensorType::new(DType::F32, [n]);
    let mut b = Builder::new();
    let x = b.input("x", ty.clone(), InputKind::Data).unwrap();
    let w = b.input("w", ty.clone(), InputKind::Data).unwrap();
    let e = b.exp(x).unwrap();
    let m = b.mul(e, w).unwrap();
    let s = b.add(m, w).unwrap();
    let p = b.finish(&[s]).unwrap();
    let data = (0..n)
        .map(|i| if i == 7000 || i == 30_000 { 100.0 } else { 0.5 })
        .collect();
    let x = Tensor::from_f64s(DType::F32, vec![n], data).unwrap();
    let err = fails_as_the_interpreter(p, &[x, values(DType::F32, n, 5, 0)]);
    assert!(
        matches!(
            err,
            EvalError::NonFinite {
                index: 0,
                count: 2,
                first: 7000,
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn an_infinite_broadcast_value_inside_a_pass_names_the_broadcast() {
    // tanh(x ⊙ broadcast(c)) with c = inf: the broadcast, which the pass writes once, is the
    // first node with non-finite values, all 40000 of them from index 0.
    let n = 40_000;
    let mut b = Builder::new();
    let x = b
        .input("x", TensorType::new(DType::F32, [n]), InputKind::Data)
        .unwrap();
    let c = b
        .input("c", TensorType::new(DType::F32, []), InputKind::Data)
        .unwrap();
    let cs = b.broadcast(c, [n], vec![]).unwrap();
    let m = b.mul(x, cs).unwrap();
    let t = b.tanh(m).unwrap();
    let p = b.finish(&[t]).unwrap();
    let c = Tensor::from_f64s(DType::F32, vec![], vec![f64::INFINITY]).unwrap();
    let err = fails_as_the_interpreter(p, &[values(DType::F32, n, 5, 0), c]);
    assert!(
        matches!(
            err,
            EvalError::NonFinite {
                index: 0,
                count: 40_000,
                first: 0,
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn a_domain_error_inside_a_pass_names_its_node_and_an_earlier_failure_comes_first() {
    let ty = TensorType::new(DType::F64, [300]);
    let mut b = Builder::new();
    let x = b.input("x", ty.clone(), InputKind::Data).unwrap();
    let y = b.input("y", ty.clone(), InputKind::Data).unwrap();
    let l = b.log(x).unwrap();
    // Read by an output, so it runs alone, between the pass's first node and its last.
    let r = b.reciprocal(y).unwrap();
    let m = b.mul(l, x).unwrap();
    let p = b.finish(&[m, r]).unwrap();
    let mut bad_x = values(DType::F64, 300, 1, 0).to_f64_vec();
    bad_x[123] = -1.0;
    let bad_x = Tensor::f64([300], bad_x).unwrap();
    let good_y = values(DType::F64, 300, 2, 0);
    let err = fails_as_the_interpreter(p.clone(), &[bad_x.clone(), good_y]);
    assert!(
        matches!(err, EvalError::Kernel { index: 0, .. }),
        "log: {err}"
    );
    // y holds a 0 too: the interpreter stops at log first, though the pass runs after
    // reciprocal fails.
    let err = fails_as_the_interpreter(p, &[bad_x, values(DType::F64, 300, 2, 1)]);
    assert!(
        matches!(err, EvalError::Kernel { index: 0, .. }),
        "log first: {err}"
    );
}

#[test]
fn unchecked_passes_let_non_finite_values_flow_as_the_interpreter_does() {
    let (p, mut inputs) = adam_step(DType::F32, 3000);
    // An infinite gradient makes m' / (sqrt(v') + 1e-8) = inf / inf a NaN, which flows into p'.
    let mut g = inputs[1].to_f64_vec();
    g[2500] = f64::INFINITY;
    inputs[1] = Tensor::from_f64s(DType::F32, vec![3000], g).unwrap();
    let unchecked = EvalOptions {
        check_non_finite: false,
        ..EvalOptions::default()
    };
    let bits = |ts: Vec<Tensor>| -> Vec<Vec<u64>> {
        ts.iter()
            .map(|t| t.to_f64_vec().iter().map(|v| v.to_bits()).collect())
            .collect()
    };
    let want = bits(interp::eval_with_options(&p, &inputs, unchecked).unwrap());
    let exe = crate::support::on_tensors(p).unwrap();
    assert_eq!(bits(exe.run(&inputs, unchecked).unwrap()), want);
}

#[test]
fn conventions_met_inside_a_pass_are_reported_as_the_interpreter_reports_them() {
    let (p, inputs) = adam_step(DType::F64, 5000);
    let (want, report) = interp::eval_with_report(&p, &inputs).unwrap();
    assert_eq!(report.conventions.len(), 1, "relu at the zeros of g");
    assert!(report.conventions[0].elements >= 3);
    let exe = crate::support::on_tensors(p).unwrap();
    let (got, got_report) = exe
        .run_with_report(&inputs, EvalOptions::default())
        .unwrap();
    assert_eq!(got, want);
    assert_eq!(got_report, report);
}

#[test]
fn broadcasts_into_a_chain_repeat_their_operand_in_the_pass() {
    // 300 x 7 x 50 elements, split across threads; operands broadcast along the last, the
    // middle, the first axis and a unit axis join the pass; one along the first and last axes
    // (not consecutive) runs alone. It comes first, and the link that fills the first pass
    // reads x itself, so that no value is held across a pass: fusing then raises no peak
    // (unfused, each link writes in its dying operand's buffer).
    let dims = [300, 7, 50];
    let n = 300 * 7 * 50;
    for dtype in [DType::F32, DType::F64] {
        let ty = |d: &[usize]| TensorType::new(dtype, d.to_vec());
        let mut b = Builder::new();
        let x = b.input("x", ty(&dims), InputKind::Data).unwrap();
        let shape: catml::tensor::Shape = dims.to_vec().into();
        let mut y = x;
        let operands: [Option<(&[usize], Vec<usize>)>; 6] = [
            Some((&[300, 50], vec![0, 2])),
            Some((&[50], vec![2])),
            Some((&[7], vec![1])),
            Some((&[300], vec![0])),
            None,
            Some((&[7, 1], vec![1, 2])),
        ];
        let mut inputs = vec![values(dtype, n, 0, 0).reshaped(dims.to_vec().into())];
        for (k, operand) in operands.iter().enumerate() {
            let bv = match operand {
                Some((d, into)) => {
                    let v = b.input(&format!("b{k}"), ty(d), InputKind::Param).unwrap();
                    let size = d.iter().product();
                    inputs.push(values(dtype, size, k + 1, 0).reshaped(d.to_vec().into()));
                    b.broadcast(v, shape.clone(), into.clone()).unwrap()
                }
                None => x,
            };
            y = match k % 2 {
                0 => b.add(y, bv).unwrap(),
                _ => b.mul(y, bv).unwrap(),
            };
        }
        let y = b.tanh(y).unwrap();
        let p = b.finish(&[y]).unwrap();
        let want = interp::eval(&p, &inputs).unwrap();
        let exe = crate::support::on_tensors(p).unwrap();
        // Eleven nodes join, and a pass holds at most eight: two passes.
        assert_eq!(exe.plan().fused_passes(), 2);
        assert_eq!(
            exe.run(&inputs, EvalOptions::default()).unwrap(),
            want,
            "{dtype}"
        );
    }
}

/// a = x w, a buffer of its own read by the chain alone, then e = exp(a) and y = e * x as one
/// pass. An executable writes y in a's buffer: after a call its pool holds nothing (a's
/// buffer became the result). Values are the interpreter's, bit for bit, and where exp
/// overflows, the error is the interpreter's (the call is made again on the plain plan).
#[test]
fn a_fused_pass_writes_its_root_in_its_dying_operand_s_buffer() {
    for n in [3, 400] {
        let ty = TensorType::new(DType::F64, [n, n]);
        let mut b = Builder::new();
        let x = b.input("x", ty.clone(), InputKind::Data).unwrap();
        let w = b.input("w", ty, InputKind::Param).unwrap();
        let a = b.matmul(x, w).unwrap();
        let e = b.exp(a).unwrap();
        let y = b.mul(e, x).unwrap();
        let p = b.finish(&[y]).unwrap();
        let exe = crate::support::on_tensors(p.clone()).unwrap();
        assert_eq!(exe.plan().fused_passes(), 1);
        assert_eq!(exe.plan().fused_in_place(), 1);
        let square = |scale: f64| {
            let data = (0..n * n).map(|i| scale * (1.0 + (i % 13) as f64 / 13.0));
            Tensor::f64([n, n], data.collect()).unwrap()
        };
        let inputs = [square(0.5), square(1.0 / n as f64)];
        let want = interp::eval(&p, &inputs).unwrap();
        assert_eq!(
            exe.run(&inputs, EvalOptions::default()).unwrap(),
            want,
            "{n}"
        );
        assert_eq!(exe.pooled_bytes(), 0, "{n}: a's buffer is the result's");

        // exp overflows past about 709.8: a's first row stays below (its elements are at most
        // 4 * 500 / n), its last rows go past it, after the pass has written the first blocks.
        let rows = (0..n * n)
            .map(|i| 500.0 * (i / n + 1) as f64 / n as f64 * (1.0 + (i % 7) as f64 / 7.0));
        let huge = [
            Tensor::f64([n, n], rows.collect()).unwrap(),
            square(1.0 / n as f64),
        ];
        let want = interp::eval(&p, &huge).unwrap_err();
        assert!(
            matches!(want, EvalError::NonFinite { index: 1, .. }),
            "{want}"
        );
        assert_eq!(exe.run(&huge, EvalOptions::default()).unwrap_err(), want);
        let unchecked = EvalOptions {
            check_non_finite: false,
            ..EvalOptions::default()
        };
        let want = interp::eval_with_options(&p, &huge, unchecked).unwrap();
        assert_eq!(exe.run(&huge, unchecked).unwrap(), want);
    }
}
