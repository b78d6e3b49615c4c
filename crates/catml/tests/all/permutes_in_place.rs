//! An `Executable` reads permutes in place and writes them in place (docs/memory.md, "Permutes
//! read in place"): every value is the interpreter's, bit for bit; errors name the nodes the
//! interpreter names; and a plan of another program is refused.

use catml::interp::{self, EvalError, EvalOptions, EvalPlan, Executable};
use catml::ir::{Builder, InputKind, Program};
use catml::prim::{AttentionMask, Ops};
use catml::tensor::{DType, Tensor, TensorType};

/// Deterministic values in (-1, 1) of `dims`.
fn values(dtype: DType, dims: &[usize], seed: usize) -> Tensor {
    let n: usize = dims.iter().product();
    let data = (0..n)
        .map(|i| ((i * 37 + seed * 11) % 101) as f64 / 50.5 - 1.0 + 1e-3 * (i % 7) as f64)
        .collect();
    Tensor::from_f64s(dtype, dims.to_vec(), data).unwrap()
}

/// A self-attention block of batch 2, sequence `t`, width 16 and 4 heads, and the reverse
/// program of the sum of its output, with their inputs (the seed 1 last for the reverse one).
fn attention(dtype: DType, t: usize, causal: bool) -> [(Program, Vec<Tensor>); 2] {
    let mask = match causal {
        true => AttentionMask::causal(),
        false => AttentionMask::none(),
    };
    let mut seed = 0;
    let draw = |ty: &TensorType, _scale| {
        seed += 1;
        values(dtype, ty.shape.dims(), seed - 1)
    };
    crate::attention_block::programs(dtype, [2, t, 16, 4], mask, draw)
}

#[test]
fn attention_reads_and_writes_its_head_permutes_in_place_bit_for_bit() {
    // Sequences short enough for the plain product loop and long enough for the crate's.
    for t in [3, 40] {
        for dtype in [DType::F32, DType::F64] {
            for causal in [false, true] {
                let programs = attention(dtype, t, causal);
                // Q, K and V read in place and Y written in place; the reverse program's four
                // more: its cotangent of Y read in place, those of Q, K and V written so.
                for ((p, inputs), in_place) in programs.into_iter().zip([4, 8]) {
                    let want = interp::eval(&p, &inputs).unwrap();
                    let exe = crate::support::on_tensors(p).unwrap();
                    assert_eq!(exe.plan().permutes_in_place(), in_place, "{dtype} {t}");
                    for _ in 0..2 {
                        let got = exe.run(&inputs, EvalOptions::default()).unwrap();
                        assert_eq!(got, want, "{dtype} t = {t}, causal {causal}");
                    }
                }
            }
        }
    }
}

/// x (3, 3, 4) permuted [1, 0, 2] (or negated, with `negate`) then times y, batched, the
/// product permuted [1, 0, 2] and exponentiated; with `through_exp`, x first goes through
/// `exp`, so that the permute reads a node's value.
fn permuted_product(negate: bool, through_exp: bool) -> Program {
    let mut b = Builder::new();
    let x = b.input(
        "x",
        TensorType::new(DType::F64, vec![3, 3, 4]),
        InputKind::Data,
    );
    let y = b.input(
        "y",
        TensorType::new(DType::F64, vec![3, 4, 5]),
        InputKind::Data,
    );
    let (x, y) = (x.unwrap(), y.unwrap());
    let x = match through_exp {
        true => b.exp(x).unwrap(),
        false => x,
    };
    let t = match negate {
        true => b.neg(x).unwrap(),
        false => b.permute(x, vec![1, 0, 2]).unwrap(),
    };
    let z = b.batch_matmul(t, y, false, false).unwrap();
    let out = b.permute(z, vec![1, 0, 2]).unwrap();
    let out = b.exp(out).unwrap();
    b.finish(&[out]).unwrap()
}

#[test]
fn a_plan_of_another_program_with_the_same_counts_is_refused() {
    let p = permuted_product(false, true);
    let plan = EvalPlan::new(&p).unwrap().permuting_in_place(&p);
    assert_eq!(plan.permutes_in_place(), 2);
    // The same counts, types and peak, but a negation where the permute was.
    let other = permuted_product(true, true);
    let inputs = [
        values(DType::F64, &[3, 3, 4], 1),
        values(DType::F64, &[3, 4, 5], 2),
    ];
    let err = interp::eval_planned(&other, &plan, &inputs, EvalOptions::default()).unwrap_err();
    assert_eq!(err, EvalError::ForeignPlan);
    let err = Executable::with_plan(other, plan.clone()).unwrap_err();
    assert_eq!(err, EvalError::ForeignPlan);
    let want = interp::eval(&p, &inputs).unwrap();
    let got = interp::eval_planned(&p, &plan, &inputs, EvalOptions::default()).unwrap();
    assert_eq!(got, want);
}

#[test]
fn non_finite_values_are_reported_where_the_interpreter_reports_them() {
    // A permute of an input is still copied and checked: an infinity in x is the permute's.
    let p = permuted_product(false, false);
    let exe = crate::support::on_tensors(p.clone()).unwrap();
    assert_eq!(
        exe.plan().permutes_in_place(),
        1,
        "only the result's permute"
    );
    let mut x = values(DType::F64, &[3, 3, 4], 1).to_f64_vec();
    x[4] = f64::INFINITY;
    let x = Tensor::f64([3, 3, 4], x).unwrap();
    let inputs = [x, values(DType::F64, &[3, 4, 5], 2)];
    let want = interp::eval(&p, &inputs).unwrap_err();
    assert!(
        matches!(&want, EvalError::NonFinite { op, .. } if op == "permute"),
        "{want}"
    );
    assert_eq!(exe.run(&inputs, EvalOptions::default()).unwrap_err(), want);
    // A product overflowing, written permuted: the error names the product and the element
    // in its own layout.
    let p = permuted_product(false, true);
    let exe = crate::support::on_tensors(p.clone()).unwrap();
    // exp(0) = 1 everywhere, and y's column 2 of batch 1 sums to 4e308 in each row: element
    // (1, i, 2) of the product, first at 17 in its own layout (7 in the permuted one).
    let x = Tensor::f64([3, 3, 4], vec![0.0; 36]).unwrap();
    let mut y = vec![1.0; 60];
    for k in 0..4 {
        y[20 + k * 5 + 2] = 1e308;
    }
    let inputs = [x, Tensor::f64([3, 4, 5], y).unwrap()];
    let want = interp::eval(&p, &inputs).unwrap_err();
    assert!(
        matches!(&want, EvalError::NonFinite { op, count: 3, first: 17, .. } if op == "batch_matmul"),
        "{want}"
    );
    let got = exe.run(&inputs, EvalOptions::default()).unwrap_err();
    assert_eq!(got, want);
}

/// A transpose feeding `matmul`, and a swap of the last two axes feeding `batch_matmul` (Q Kᵀ
/// written with an explicit permute), are read in place, not copied: the values are the
/// interpreter's bit for bit, where the products run as a plain loop and where they run packed.
#[test]
fn transposes_feeding_products_are_read_in_place_bit_for_bit() {
    for dtype in [DType::F32, DType::F64] {
        for (m, k, n) in [(2, 3, 4), (70, 90, 110)] {
            let ty = |d: &[usize]| TensorType::new(dtype, d.to_vec());
            let mut b = Builder::new();
            let a = b.input("a", ty(&[m, k]), InputKind::Data).unwrap();
            let w = b.input("w", ty(&[n, k]), InputKind::Param).unwrap();
            let q = b.input("q", ty(&[2, 3, m, k]), InputKind::Data).unwrap();
            let keys = b.input("keys", ty(&[2, 3, n, k]), InputKind::Data).unwrap();
            // Node results: a permute of a program input is copied, where the input is checked.
            let (w, keys) = (b.tanh(w).unwrap(), b.tanh(keys).unwrap());
            let wt = b.transpose(w).unwrap();
            let y = b.matmul(a, wt).unwrap();
            let kt = b.permute(keys, vec![0, 1, 3, 2]).unwrap();
            let scores = b.batch_matmul(q, kt, false, false).unwrap();
            let p = b.finish(&[y, scores]).unwrap();
            let inputs = [
                values(dtype, &[m, k], 0),
                values(dtype, &[n, k], 1),
                values(dtype, &[2, 3, m, k], 2),
                values(dtype, &[2, 3, n, k], 3),
            ];
            let exe = crate::support::on_tensors(p.clone()).unwrap();
            assert_eq!(exe.plan().permutes_in_place(), 2, "{dtype} {m}x{k}x{n}");
            assert_eq!(
                exe.run(&inputs, EvalOptions::default()).unwrap(),
                interp::eval(&p, &inputs).unwrap(),
                "{dtype} {m}x{k}x{n}"
            );
        }
    }
}
