//! Exact evaluation of the composites that are rational maps (batched products, row selection
//! by indices, one-hot rows, the softmax pullback): over small integers, where f64 makes no
//! rounding error, the rational interpreter must give the f64 kernel's values exactly.

use catml::interp::{self, RationalError};
use catml::ir::{Builder, InputKind, KernelError, Program, Var};
use catml::prim::Ops;
use catml::tensor::{rational_from_f64, DType, RArray, Rational, Tensor, TensorType};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn to_rational(t: &Tensor) -> RArray {
    let data = t
        .to_f64_vec()
        .iter()
        .map(|&v| rational_from_f64(v).unwrap())
        .collect();
    RArray::new(t.dims().to_vec(), data).unwrap()
}

/// Small integers as f64 (or i64 when `index_below` is given, then in 0..index_below).
fn integers(rng: &mut ChaCha8Rng, ty: &TensorType, index_below: Option<i64>) -> Tensor {
    match index_below {
        Some(n) => {
            let data = (0..ty.numel()).map(|_| rng.random_range(0..n)).collect();
            Tensor::i64(ty.dims().to_vec(), data).unwrap()
        }
        None => {
            let data = (0..ty.numel())
                .map(|_| rng.random_range(-4i32..=4) as f64)
                .collect();
            Tensor::from_f64s(ty.dtype, ty.shape.clone(), data).unwrap()
        }
    }
}

/// A one-node program over inputs of `types`, with integer inputs; asserts rational == f64.
fn exact_equals_f64(
    seed: u64,
    types: &[(TensorType, Option<i64>)],
    node: impl FnOnce(&mut Builder, &[Var]) -> Var,
) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut b = Builder::new();
    let vars: Vec<Var> = types
        .iter()
        .enumerate()
        .map(|(i, (t, _))| {
            b.input(&format!("x{i}"), t.clone(), InputKind::Data)
                .unwrap()
        })
        .collect();
    let y = node(&mut b, &vars);
    let p: Program = b.finish(&[y]).unwrap();
    let inputs: Vec<Tensor> = types
        .iter()
        .map(|(t, idx)| integers(&mut rng, t, *idx))
        .collect();
    let y = interp::eval(&p, &inputs).unwrap().remove(0);
    let exact: Vec<RArray> = inputs.iter().map(to_rational).collect();
    let r = interp::eval_rational(&p, &exact).unwrap().remove(0);
    assert_eq!(r, to_rational(&y), "{}", p.nodes()[0].prim.name());
}

fn f64t(dims: &[usize]) -> TensorType {
    TensorType::new(DType::F64, dims.to_vec())
}

fn i64t(dims: &[usize]) -> TensorType {
    TensorType::new(DType::I64, dims.to_vec())
}

#[test]
fn batched_products_are_exact_with_every_transpose() {
    for (seed, (ta, tb)) in [(false, false), (true, false), (false, true), (true, true)]
        .into_iter()
        .enumerate()
    {
        let a = if ta { [2, 3, 4, 5] } else { [2, 3, 5, 4] };
        let bd = if tb { [2, 3, 6, 4] } else { [2, 3, 4, 6] };
        let types = [(f64t(&a), None), (f64t(&bd), None)];
        exact_equals_f64(seed as u64, &types, |b, v| {
            b.batch_matmul(v[0], v[1], ta, tb).unwrap()
        });
    }
}

#[test]
fn index_primitives_are_exact() {
    let types = [(f64t(&[5, 3]), None), (i64t(&[2, 4]), Some(5))];
    exact_equals_f64(10, &types, |b, v| b.take(v[0], v[1]).unwrap());
    let types = [(f64t(&[2, 4, 3]), None), (i64t(&[2, 4]), Some(5))];
    exact_equals_f64(11, &types, |b, v| b.scatter_rows(v[0], v[1], 5).unwrap());
    let types = [(i64t(&[3, 2]), Some(4))];
    exact_equals_f64(12, &types, |b, v| b.one_hot(v[0], 4, DType::F64).unwrap());
}

#[test]
fn the_softmax_pullback_is_exact_along_every_axis() {
    for axis in 0..3 {
        let types = [(f64t(&[2, 3, 4]), None), (f64t(&[2, 3, 4]), None)];
        exact_equals_f64(20 + axis as u64, &types, |b, v| {
            b.softmax_pullback(v[0], v[1], axis, 0.5).unwrap()
        });
    }
}

#[test]
fn a_fractional_index_is_a_domain_error() {
    let mut b = Builder::new();
    let t = b.input("t", f64t(&[3, 2]), InputKind::Data).unwrap();
    let i = b.input("i", i64t(&[2]), InputKind::Data).unwrap();
    let y = b.take(t, i).unwrap();
    let p = b.finish(&[y]).unwrap();
    let table = to_rational(&Tensor::full(&f64t(&[3, 2]), 1.0));
    let half = Rational::new(1.into(), 2.into());
    let idx = RArray::new(vec![2], vec![Rational::from_integer(0.into()), half]).unwrap();
    match interp::eval_rational(&p, &[table, idx]) {
        Err(RationalError::Kernel {
            source: KernelError::Domain(m),
            ..
        }) => assert!(m.contains("position 1"), "{m}"),
        other => panic!("expected a domain error, found {other:?}"),
    }
}
