//! An `Executable` folds a sum into the product that feeds it (docs/memory.md, "Folded
//! sums"): the product accumulates into the other operand, in any order of summation, so the
//! result is held to the budget of a sum of k + 1 terms (docs/budgets.md), and errors name the
//! node the interpreter names.

use catml::interp::{self, EvalError, EvalOptions};
use catml::ir::{Builder, InputKind, Program, Var};
use catml::prim::Ops;
use catml::tensor::{DType, Tensor, TensorType};

const U32: f64 = 1.0 / (1u64 << 24) as f64;
const ETA32: f64 = 1.401298464324817e-45;

/// Deterministic values in [-1, 1) with a spread of magnitudes.
fn values(dtype: DType, dims: &[usize], seed: usize) -> Tensor {
    let n: usize = dims.iter().product();
    let data = (0..n)
        .map(|i| (((i * 37 + seed * 11) % 101) as f64 / 50.5 - 1.0) * (1.0 + (i % 7) as f64))
        .collect();
    Tensor::from_f64s(dtype, dims.to_vec(), data).unwrap()
}

/// s = A B + C with A (m, k), B (k, n), C (m, n).
fn product_plus(dtype: DType, m: usize, k: usize, n: usize) -> (Program, Vec<Tensor>) {
    let ty = |dims: &[usize]| TensorType::new(dtype, dims.to_vec());
    let mut b = Builder::new();
    let a = b.input("A", ty(&[m, k]), InputKind::Data).unwrap();
    let w = b.input("B", ty(&[k, n]), InputKind::Param).unwrap();
    let c = b.input("C", ty(&[m, n]), InputKind::Data).unwrap();
    let ab = b.matmul(a, w).unwrap();
    let s = b.add(ab, c).unwrap();
    let p = b.finish(&[s]).unwrap();
    let inputs = vec![
        values(dtype, &[m, k], 1),
        values(dtype, &[k, n], 2),
        values(dtype, &[m, n], 3),
    ];
    (p, inputs)
}

/// (C + A B in f64 from the same values, |C| + |A| |B|) per element.
fn reference(inputs: &[Tensor], m: usize, k: usize, n: usize) -> (Vec<f64>, Vec<f64>) {
    let [a, b, c] = [0, 1, 2].map(|i| inputs[i].to_f64_vec());
    let (mut y, mut s) = (c.clone(), c.iter().map(|v| v.abs()).collect::<Vec<_>>());
    for i in 0..m {
        for t in 0..k {
            for j in 0..n {
                y[i * n + j] += a[i * k + t] * b[t * n + j];
                s[i * n + j] += (a[i * k + t] * b[t * n + j]).abs();
            }
        }
    }
    (y, s)
}

#[test]
fn a_sum_fed_by_a_product_is_folded_within_the_budget_of_k_plus_one_terms() {
    // k = 600 is more than one of the GEMM's depth blocks, so partial sums meet C in an
    // order of their own.
    let (m, k, n) = (32, 600, 24);
    let (p, inputs) = product_plus(DType::F32, m, k, n);
    let exe = crate::support::on_tensors(p.clone()).unwrap();
    assert_eq!(exe.plan().folded_sums(), 1);
    let got = exe.run(&inputs, EvalOptions::default()).unwrap()[0].to_f64_vec();
    let (y, s) = reference(&inputs, m, k, n);
    let terms = (k + 1) as f64;
    let gamma = terms * U32 / (1.0 - terms * U32);
    for e in 0..m * n {
        let bound = gamma * s[e] + terms * ETA32;
        assert!(
            (got[e] - y[e]).abs() <= bound,
            "element {e}: {} against {}, bound {bound}",
            got[e],
            y[e]
        );
    }
    // C is the caller's: the product added into a copy.
    assert_eq!(inputs[2], values(DType::F32, &[m, n], 3));
    // In f64 the folded result agrees with the interpreter's to f64 rounding.
    let (p64, in64) = product_plus(DType::F64, m, k, n);
    let want = interp::eval(&p64, &in64).unwrap()[0].to_f64_vec();
    let got = crate::support::on_tensors(p64).unwrap();
    let got = got.run(&in64, EvalOptions::default()).unwrap()[0].to_f64_vec();
    let gamma64 = 2.0 * terms * f64::EPSILON;
    for e in 0..m * n {
        assert!(
            (got[e] - want[e]).abs() <= gamma64 * s[e],
            "f64 element {e}"
        );
    }
}

/// The tied block A = X W + b, H = tanh A, Y = X + H W + b, and its derivative program.
fn tied_block_vjp(dtype: DType) -> (Program, Vec<Tensor>) {
    let p = crate::workloads::tied_residual_program(16, 40, dtype);
    let v = catml::ad::vjp(&p).unwrap().program;
    let scale = |t: Tensor, f: f64| t.map_f64(|e| e * f);
    let inputs = vec![
        values(dtype, &[16, 40], 4),
        scale(values(dtype, &[40, 40], 5), 0.05),
        values(dtype, &[40], 6),
        Tensor::full(&TensorType::new(dtype, vec![16, 40]), 1.0),
    ];
    (v, inputs)
}

#[test]
fn the_tied_block_s_derivative_folds_its_four_sums_of_products() {
    // A = X W + b, H W + b, the gradient of X (seed + da Wᵀ) and of W (two products, the
    // second added into the first's buffer).
    for dtype in [DType::F32, DType::F64] {
        let (p, inputs) = tied_block_vjp(dtype);
        let exe = crate::support::on_tensors(p.clone()).unwrap();
        assert_eq!(exe.plan().folded_sums(), 4, "{dtype}");
        let want = interp::eval(&p, &inputs).unwrap();
        let seed = inputs[3].clone();
        for _ in 0..3 {
            let got = exe.run(&inputs, EvalOptions::default()).unwrap();
            for (g, w) in got.iter().zip(&want) {
                let scale = w.to_f64_vec().iter().fold(1.0f64, |m, v| m.max(v.abs()));
                let tol = if dtype == DType::F32 { 1e-5 } else { 1e-13 };
                assert!(g.max_abs_diff(w) <= tol * scale, "{dtype}");
            }
            exe.recycle(got);
        }
        assert_eq!(
            inputs[3], seed,
            "the seed, added into, is the caller's and untouched"
        );
    }
}

#[test]
fn a_non_finite_product_is_named_as_the_interpreter_names_it() {
    let (p, mut inputs) = product_plus(DType::F32, 4, 8, 3);
    inputs[0] = inputs[0].map_f64(|v| v * 1e30);
    inputs[1] = inputs[1].map_f64(|v| v * 1e30);
    let want = interp::eval(&p, &inputs).unwrap_err();
    let exe = crate::support::on_tensors(p).unwrap();
    let got = exe.run(&inputs, EvalOptions::default()).unwrap_err();
    assert!(
        matches!(&want, EvalError::NonFinite { op, .. } if op == "matmul"),
        "{want}"
    );
    assert_eq!(got, want);
    let unchecked = EvalOptions {
        check_non_finite: false,
        ..EvalOptions::default()
    };
    let out = exe.run(&inputs, unchecked).unwrap();
    assert!(out[0].to_f64_vec().iter().any(|v| !v.is_finite()));
}

#[test]
fn a_sum_is_not_folded_where_the_product_is_read_again_or_an_output() {
    let ty = TensorType::new(DType::F64, vec![3, 3]);
    let build = |keep_product: bool, read_again: bool| {
        let mut b = Builder::new();
        let a = b.input("a", ty.clone(), InputKind::Data).unwrap();
        let c = b.input("c", ty.clone(), InputKind::Data).unwrap();
        let ab = b.matmul(a, a).unwrap();
        let s = b.add(ab, c).unwrap();
        let mut outs: Vec<Var> = vec![s];
        if keep_product {
            outs.push(ab);
        }
        if read_again {
            outs.push(b.tanh(ab).unwrap());
        }
        b.finish(&outs).unwrap()
    };
    for (keep, again, folded) in [(false, false, 1), (true, false, 0), (false, true, 0)] {
        let exe = crate::support::on_tensors(build(keep, again)).unwrap();
        assert_eq!(exe.plan().folded_sums(), folded, "{keep} {again}");
    }
}

#[test]
fn a_product_counts_its_non_finite_values_as_a_scan_would() {
    // 256 x 64 x 64 is cut across the threads; one NaN in A spoils one row of C.
    let (m, k, n) = (256, 64, 64);
    let ty = |dims: &[usize]| TensorType::new(DType::F32, dims.to_vec());
    let mut b = Builder::new();
    let a = b.input("A", ty(&[m, k]), InputKind::Data).unwrap();
    let w = b.input("B", ty(&[k, n]), InputKind::Param).unwrap();
    let ab = b.matmul(a, w).unwrap();
    let p = b.finish(&[ab]).unwrap();
    let mut data = values(DType::F32, &[m, k], 1).to_f64_vec();
    data[100 * k + 3] = f64::NAN;
    let inputs = vec![
        Tensor::from_f64s(DType::F32, vec![m, k], data).unwrap(),
        values(DType::F32, &[k, n], 2),
    ];
    let want = EvalError::NonFinite {
        index: 0,
        name: p.nodes()[0].name.clone(),
        op: "matmul".to_string(),
        count: n,
        first: 100 * n,
    };
    assert_eq!(interp::eval(&p, &inputs).unwrap_err(), want);
    let exe = crate::support::on_tensors(p).unwrap();
    assert_eq!(exe.run(&inputs, EvalOptions::default()).unwrap_err(), want);
}

#[test]
fn a_folded_plan_of_another_program_is_refused() {
    // A B + C and A B - C have the same counts; the first's folded plan must not run the second.
    let (p, inputs) = product_plus(DType::F64, 4, 8, 3);
    let ty = |dims: &[usize]| TensorType::new(DType::F64, dims.to_vec());
    let mut b = Builder::new();
    let a = b.input("A", ty(&[4, 8]), InputKind::Data).unwrap();
    let w = b.input("B", ty(&[8, 3]), InputKind::Param).unwrap();
    let c = b.input("C", ty(&[4, 3]), InputKind::Data).unwrap();
    let ab = b.matmul(a, w).unwrap();
    let d = b.sub(ab, c).unwrap();
    let other = b.finish(&[d]).unwrap();
    let plan = interp::EvalPlan::new(&p).unwrap().folding_sums(&p);
    assert_eq!(plan.folded_sums(), 1);
    let options = EvalOptions::default();
    let got = interp::eval_planned(&other, &plan, &inputs, options).unwrap_err();
    assert_eq!(got, EvalError::ForeignPlan);
    let want = interp::eval(&p, &inputs).unwrap();
    let folded = interp::eval_planned(&p, &plan, &inputs, options).unwrap();
    assert!(folded[0].max_abs_diff(&want[0]) <= 1e-12);
}
