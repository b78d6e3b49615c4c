use crate::ad;
use crate::interp::{cost, eval, eval_rational, shape};
use crate::ir::{Builder, InputKind, Program, TypeError, Var};
use crate::prim::Ops;
use crate::tensor::{DType, RArray, Rational, Tensor, TensorType};

fn ints(v: &[i64]) -> Tensor {
    Tensor::i64([v.len()], v.to_vec()).unwrap()
}

/// A program of two i64 vector inputs of length `n` and the outputs `f` builds.
fn program(n: usize, f: impl Fn(&mut Builder, Var, Var) -> Vec<Var>) -> Program {
    let mut b = Builder::new();
    let ty = TensorType::new(DType::I64, [n]);
    let x = b.input("x", ty.clone(), InputKind::Data).unwrap();
    let y = b.input("y", ty, InputKind::Data).unwrap();
    let outs = f(&mut b, x, y);
    b.finish(&outs).unwrap()
}

fn run(p: &Program, x: &[i64], y: &[i64]) -> Vec<Vec<i64>> {
    eval(p, &[ints(x), ints(y)])
        .unwrap()
        .iter()
        .map(|t| t.as_i64().expect("an i64 result").data().to_vec())
        .collect()
}

#[test]
fn add_sub_mul_wrap_modulo_2_64() {
    let p = program(3, |b, x, y| {
        vec![
            b.add(x, y).unwrap(),
            b.sub(x, y).unwrap(),
            b.mul(x, y).unwrap(),
        ]
    });
    let out = run(
        &p,
        &[i64::MAX, i64::MIN, 3_000_000_000],
        &[1, 1, 4_000_000_000],
    );
    assert_eq!(out[0], [i64::MIN, i64::MIN + 1, 7_000_000_000]);
    assert_eq!(out[1], [i64::MAX - 1, i64::MAX, -1_000_000_000]);
    // 12e18 - 2^64 = -6446744073709551616
    assert_eq!(out[2], [i64::MAX, i64::MIN, -6_446_744_073_709_551_616]);
}

#[test]
fn div_truncates_toward_zero() {
    let p = program(6, |b, x, y| vec![b.div(x, y).unwrap()]);
    let out = run(&p, &[7, -7, 7, -7, i64::MIN, 0], &[2, 2, -2, -2, -1, 5]);
    assert_eq!(out[0], [3, -3, -3, 3, i64::MIN, 0]);
}

#[test]
fn div_by_zero_is_a_domain_error_naming_the_node() {
    let p = program(3, |b, x, y| {
        b.set_name_prefix("ratio");
        vec![b.div(x, y).unwrap()]
    });
    let e = eval(&p, &[ints(&[1, 2, 3]), ints(&[1, 0, 1])])
        .unwrap_err()
        .to_string();
    assert!(e.contains("`ratio"), "{e}");
    assert!(e.contains("(div)"), "{e}");
    assert!(e.contains("operand 1 = 0 at element 1"), "{e}");
    assert!(e.contains("nonzero"), "{e}");
}

#[test]
fn neg_abs_sign_square_maximum_minimum() {
    let p = program(4, |b, x, y| {
        vec![
            b.neg(x).unwrap(),
            b.abs(x).unwrap(),
            b.sign(x).unwrap(),
            b.square(x).unwrap(),
            b.maximum(x, y).unwrap(),
            b.minimum(x, y).unwrap(),
        ]
    });
    let out = run(&p, &[i64::MIN, -5, 0, 1 << 32], &[0, -6, 0, 1]);
    assert_eq!(out[0], [i64::MIN, 5, 0, -(1 << 32)]);
    assert_eq!(out[1], [i64::MIN, 5, 0, 1 << 32]);
    assert_eq!(out[2], [-1, -1, 0, 1]);
    // (2^32)^2 = 2^64 wraps to 0
    assert_eq!(out[3], [0, 25, 0, 0]);
    assert_eq!(out[4], [0, -5, 0, 1 << 32]);
    assert_eq!(out[5], [i64::MIN, -6, 0, 1]);
}

#[test]
fn small_integers_agree_with_f64() {
    let xs: Vec<i64> = (-6..=6).collect();
    let ys: Vec<i64> = (-6..=6).map(|v| if v == 0 { 7 } else { v }).rev().collect();
    let p = program(xs.len(), |b, x, y| {
        vec![
            b.add(x, y).unwrap(),
            b.sub(x, y).unwrap(),
            b.mul(x, y).unwrap(),
            b.div(x, y).unwrap(),
            b.maximum(x, y).unwrap(),
            b.abs(x).unwrap(),
        ]
    });
    let out = run(&p, &xs, &ys);
    let pairs = xs.iter().zip(&ys).map(|(&a, &b)| (a as f64, b as f64));
    let f64s: [Vec<f64>; 6] = [
        pairs.clone().map(|(a, b)| a + b).collect(),
        pairs.clone().map(|(a, b)| a - b).collect(),
        pairs.clone().map(|(a, b)| a * b).collect(),
        pairs.clone().map(|(a, b)| (a / b).trunc()).collect(),
        pairs.clone().map(|(a, b)| a.max(b)).collect(),
        pairs.clone().map(|(a, _)| a.abs()).collect(),
    ];
    for (got, want) in out.iter().zip(&f64s) {
        let got: Vec<f64> = got.iter().map(|&v| v as f64).collect();
        assert_eq!(&got, want);
    }
}

#[test]
fn mixed_i64_and_float_operands_are_refused() {
    let mut b = Builder::new();
    let x = b
        .input("x", TensorType::new(DType::I64, [2]), InputKind::Data)
        .unwrap();
    let y = b
        .input("y", TensorType::new(DType::F32, [2]), InputKind::Data)
        .unwrap();
    let e = b.add(x, y).unwrap_err();
    assert!(matches!(e, TypeError::Mismatch { .. }), "{e}");
    assert!(e.to_string().contains("i64"), "{e}");
    let e = b.add(y, x).unwrap_err();
    assert!(matches!(e, TypeError::Mismatch { .. }), "{e}");
}

#[test]
fn rows_without_an_integer_kernel_refuse_i64() {
    let mut b = Builder::new();
    let x = b
        .input("x", TensorType::new(DType::I64, [2]), InputKind::Data)
        .unwrap();
    let e = b.exp(x).unwrap_err().to_string();
    assert!(e.contains("f32 or f64") && e.contains("i64"), "{e}");
    let e = b.pow(x, x).unwrap_err().to_string();
    assert!(e.contains("f32 or f64"), "{e}");
    // bool is no number for arithmetic
    let c = b.equal(x, x).unwrap();
    let e = b.add(c, c).unwrap_err().to_string();
    assert!(e.contains("f32, f64 or i64"), "{e}");
}

#[test]
fn sum_and_broadcast_take_i64_and_sum_wraps() {
    let mut b = Builder::new();
    let x = b
        .input("x", TensorType::new(DType::I64, [3]), InputKind::Data)
        .unwrap();
    let s = b.sum(x, None).unwrap();
    let m = b.broadcast(x, vec![2, 3], vec![1]).unwrap();
    let p = b.finish(&[s, m]).unwrap();
    let out = eval(&p, &[ints(&[i64::MAX, 2, 5])]).unwrap();
    assert_eq!(out[0].as_i64().unwrap().data(), [i64::MIN + 6]);
    assert_eq!(
        out[1].as_i64().unwrap().data(),
        [i64::MAX, 2, 5, i64::MAX, 2, 5]
    );
}

#[test]
fn integer_results_have_no_derivative() {
    // f(x) = sum(x * convert(convert(x, i64) / 2, f64)): the integer path is constant.
    let mut b = Builder::new();
    let x = b
        .input("x", TensorType::new(DType::F64, [3]), InputKind::Data)
        .unwrap();
    let k = b.convert(x, DType::I64).unwrap();
    let two = b.full(2.0, &TensorType::new(DType::I64, [3])).unwrap();
    let q = b.div(k, two).unwrap();
    let a = b.abs(q).unwrap();
    let m = b.maximum(a, q).unwrap();
    let f = b.convert(m, DType::F64).unwrap();
    let y = b.mul(x, f).unwrap();
    let l = b.sum(y, None).unwrap();
    let p = b.finish(&[l, m]).unwrap();
    let g = ad::grad(&p).unwrap();
    let out = eval(
        &g.program,
        &[Tensor::f64([3], vec![5.0, -7.0, 2.0]).unwrap()],
    )
    .unwrap();
    // |trunc(x / 2)| = 2, 3, 1
    assert_eq!(
        g.layout.gradient(&out, 0).unwrap().to_f64_vec(),
        [2.0, 3.0, 1.0]
    );
    let v = ad::vjp(&p).unwrap();
    assert!(v.program.n_nodes() > 0);
    let j = ad::jvp(&p).unwrap();
    assert!(j.program.n_nodes() > 0);
}

#[test]
fn shape_and_cost_read_i64_nodes() {
    let p = program(4, |b, x, y| {
        let d = b.div(x, y).unwrap();
        vec![b.add(d, x).unwrap()]
    });
    let ty = TensorType::new(DType::I64, [4]);
    let s = shape(&p, &[ty.clone(), ty]).unwrap();
    assert_eq!(s[0].to_string(), "i64[4]");
    assert_eq!(cost(&p).flops, 8);
}

#[test]
fn rational_interpreter_wraps_and_truncates_integer_nodes() {
    let p = program(2, |b, x, y| {
        let d = b.div(x, y).unwrap();
        vec![d, b.add(x, x).unwrap()]
    });
    let r = |v: &[i64]| {
        RArray::new(
            [v.len()],
            v.iter()
                .map(|&a| Rational::from_integer(a.into()))
                .collect(),
        )
        .unwrap()
    };
    let out = eval_rational(&p, &[r(&[-7, i64::MAX]), r(&[2, 1])]).unwrap();
    assert_eq!(out[0], r(&[-3, i64::MAX]));
    assert_eq!(out[1], r(&[-14, -2]));
    let e = eval_rational(&p, &[r(&[1, 1]), r(&[0, 1])])
        .unwrap_err()
        .to_string();
    assert!(e.contains("(div)") && e.contains("nonzero"), "{e}");
}
