//! A large value read next by an elementwise pass is checked by that pass as it reads it
//! (docs/memory.md, "The non-finite check"): every elementwise row and `tanh_pullback` that
//! the plan trusts with the check makes it, values are the interpreter's bit for bit, and a
//! value that is not finite is named as the interpreter names it, count and first element
//! included, even where its reader hides it (tanh of infinity is 1).

use catml::interp::{self, EvalError, EvalOptions, EvalPlan};
use catml::ir::{Builder, InputKind, Program, Var};
use catml::prim::{Ops, BINARY_ROWS, UNARY_ROWS};
use catml::tensor::{DType, Tensor, TensorType};

/// Rows and columns of the product: 4096 elements, enough for a pass to count as it writes.
const N: usize = 64;

/// p = a b, then y = `read(p, c)`, for (N, N) inputs a, b and c.
fn product_read_by(dtype: DType, read: impl Fn(&mut Builder, Var, Var) -> Var) -> Program {
    let mut b = Builder::new();
    let ty = TensorType::new(dtype, [N, N]);
    let [x, w, c] = ["a", "b", "c"].map(|n| b.input(n, ty.clone(), InputKind::Data).unwrap());
    let p = b.matmul(x, w).unwrap();
    let y = read(&mut b, p, c);
    b.finish(&[y]).unwrap()
}

/// Values in [0.1, 0.6), varied by `seed`.
fn inputs(dtype: DType) -> Vec<Tensor> {
    (0..3)
        .map(|seed| {
            let data = (0..N * N)
                .map(|i| 0.1 + ((i * 37 + seed * 11) % 101) as f64 / 202.0)
                .collect();
            Tensor::from_f64s(dtype, vec![N, N], data).unwrap()
        })
        .collect()
}

/// Evaluates `p` by the plan that checks in readers, which must check one value there, and
/// by the interpreter: the same values, or the same error.
fn agrees(p: &Program, inputs: &[Tensor], what: &str) {
    let plan = EvalPlan::new(p).unwrap().checking_in_readers(p);
    assert_eq!(
        plan.checks_in_readers(),
        1,
        "{what}: the product is checked by its reader"
    );
    let want = interp::eval(p, inputs);
    let got = interp::eval_planned(p, &plan, inputs, EvalOptions::default());
    assert_eq!(got, want, "{what}");
    let exe = crate::support::on_tensors(p.clone()).unwrap();
    assert_eq!(
        exe.run(inputs, EvalOptions::default()),
        want,
        "{what}, executable"
    );
}

#[test]
fn every_elementwise_reader_checks_the_product_it_reads() {
    for dtype in [DType::F32, DType::F64] {
        let x = inputs(dtype);
        for row in UNARY_ROWS {
            let attrs = (row.sample_attrs)(&mut || 0.5);
            let p = product_read_by(dtype, |b, p, _| b.unary_row(row.name, &attrs, p).unwrap());
            agrees(&p, &x, &format!("{} {dtype}", row.name));
        }
        for row in BINARY_ROWS.iter().filter(|r| r.kernel.is_some()) {
            for first in [true, false] {
                let p = product_read_by(dtype, |b, p, c| {
                    let (l, r) = if first { (p, c) } else { (c, p) };
                    b.binary_row(row.name, l, r).unwrap()
                });
                agrees(
                    &p,
                    &x,
                    &format!("{} {dtype}, product first: {first}", row.name),
                );
            }
        }
        let p = product_read_by(dtype, |b, p, c| b.tanh_pullback(c, p).unwrap());
        agrees(&p, &x, &format!("tanh_pullback {dtype}"));
    }
}

/// Inputs whose product overflows in row 3 from column 10 on: a[3, 5] is near the dtype's
/// largest finite value, and b's row 5 is 2 from column 10 on.
fn overflowing(dtype: DType) -> Vec<Tensor> {
    let mut x: Vec<Vec<f64>> = inputs(dtype).iter().map(Tensor::to_f64_vec).collect();
    x[0][3 * N + 5] = if dtype == DType::F64 { 1.7e308 } else { 3e38 };
    for j in 10..N {
        x[1][5 * N + j] = 2.0;
    }
    let x = x
        .into_iter()
        .map(|d| Tensor::from_f64s(dtype, vec![N, N], d).unwrap());
    x.collect()
}

#[test]
fn a_product_that_overflows_is_named_though_its_reader_hides_it() {
    for dtype in [DType::F32, DType::F64] {
        let p = product_read_by(dtype, |b, p, _| b.tanh(p).unwrap());
        let x = overflowing(dtype);
        let want = EvalError::NonFinite {
            index: 0,
            name: p.nodes()[0].name.clone(),
            op: "matmul".into(),
            count: N - 10,
            first: 3 * N + 10,
        };
        assert_eq!(interp::eval(&p, &x), Err(want.clone()), "{dtype}");
        agrees(&p, &x, &format!("tanh {dtype}"));
    }
}

#[test]
fn a_reader_that_overflows_is_named_after_the_product_it_checked() {
    // exp(p) overflows where p > 89 (f32) or 710 (f64); p itself is finite.
    for (dtype, big) in [(DType::F32, 100.0), (DType::F64, 800.0)] {
        let p = product_read_by(dtype, |b, p, _| b.exp(p).unwrap());
        let mut x: Vec<Vec<f64>> = inputs(dtype).iter().map(Tensor::to_f64_vec).collect();
        x[0][7 * N] = big / 0.1;
        x[1][..N].fill(0.1);
        let x: Vec<Tensor> = x
            .into_iter()
            .map(|d| Tensor::from_f64s(dtype, vec![N, N], d).unwrap())
            .collect();
        let err = interp::eval(&p, &x).unwrap_err();
        assert!(
            matches!(err, EvalError::NonFinite { index: 1, count: N, first, .. } if first == 7 * N),
            "{dtype}: {err}"
        );
        agrees(&p, &x, &format!("exp {dtype}"));
    }
}
