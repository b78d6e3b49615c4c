//! Values of the bool primitives against hand-computed ones, and their typed errors.

use crate::interp::eval;
use crate::ir::{Builder, InputKind, TypeError};
use crate::prim::Ops;
use crate::tensor::{DType, Tensor, TensorType};

fn run(f: impl Fn(&mut Builder, &[crate::ir::Var]) -> crate::ir::Var, args: &[Tensor]) -> Tensor {
    let mut b = Builder::new();
    let vars: Vec<_> = args
        .iter()
        .enumerate()
        .map(|(i, t)| b.input(&format!("x{i}"), t.ty(), InputKind::Data).unwrap())
        .collect();
    let y = f(&mut b, &vars);
    let p = b.finish(&[y]).unwrap();
    eval(&p, args).unwrap().remove(0)
}

#[test]
fn comparisons_give_hand_computed_bools() {
    let x = Tensor::f64([4], vec![1.0, 2.0, 3.0, f64::NAN]).unwrap();
    let y = Tensor::f64([4], vec![2.0, 2.0, 2.0, f64::NAN]).unwrap();
    let args = [x, y];
    let b = |v: [bool; 4]| Tensor::bool([4], v.to_vec()).unwrap();
    assert_eq!(
        run(|b, v| b.less(v[0], v[1]).unwrap(), &args),
        b([true, false, false, false])
    );
    assert_eq!(
        run(|b, v| b.less_equal(v[0], v[1]).unwrap(), &args),
        b([true, true, false, false])
    );
    assert_eq!(
        run(|b, v| b.greater(v[0], v[1]).unwrap(), &args),
        b([false, false, true, false])
    );
    assert_eq!(
        run(|b, v| b.greater_equal(v[0], v[1]).unwrap(), &args),
        b([false, true, true, false])
    );
    assert_eq!(
        run(|b, v| b.equal(v[0], v[1]).unwrap(), &args),
        b([false, true, false, false])
    );
    let i = [
        Tensor::i64([3], vec![5, -1, 7]).unwrap(),
        Tensor::i64([3], vec![5, 0, 7]).unwrap(),
    ];
    assert_eq!(
        run(|b, v| b.equal(v[0], v[1]).unwrap(), &i),
        Tensor::bool([3], vec![true, false, true]).unwrap()
    );
}

#[test]
fn logic_and_where_give_hand_computed_values() {
    let c = Tensor::bool([4], vec![true, true, false, false]).unwrap();
    let d = Tensor::bool([4], vec![true, false, true, false]).unwrap();
    let cd = [c.clone(), d];
    let b = |v: [bool; 4]| Tensor::bool([4], v.to_vec()).unwrap();
    assert_eq!(
        run(|b, v| b.logical_and(v[0], v[1]).unwrap(), &cd),
        b([true, false, false, false])
    );
    assert_eq!(
        run(|b, v| b.logical_or(v[0], v[1]).unwrap(), &cd),
        b([true, true, true, false])
    );
    assert_eq!(
        run(|b, v| b.logical_xor(v[0], v[1]).unwrap(), &cd),
        b([false, true, true, false])
    );
    assert_eq!(
        run(|b, v| b.logical_not(v[0]).unwrap(), &cd),
        b([false, false, true, true])
    );
    let a = Tensor::f32([4], vec![1.0, 2.0, 3.0, 4.0]).unwrap();
    let z = Tensor::f32([4], vec![-1.0, -2.0, -3.0, -4.0]).unwrap();
    assert_eq!(
        run(|b, v| b.select(v[0], v[1], v[2]).unwrap(), &[c, a, z]),
        Tensor::f32([4], vec![1.0, 2.0, -3.0, -4.0]).unwrap()
    );
}

#[test]
fn convert_takes_bools_to_zero_one_and_numbers_to_nonzero() {
    let c = Tensor::bool([3], vec![true, false, true]).unwrap();
    assert_eq!(
        run(|b, v| b.convert(v[0], DType::F32).unwrap(), &[c]),
        Tensor::f32([3], vec![1.0, 0.0, 1.0]).unwrap()
    );
    let x = Tensor::f64([3], vec![0.0, -0.5, f64::NAN]).unwrap();
    assert_eq!(
        run(|b, v| b.convert(v[0], DType::Bool).unwrap(), &[x]),
        Tensor::bool([3], vec![false, true, true]).unwrap()
    );
}

#[test]
fn bools_stay_out_of_arithmetic_and_mismatches_are_typed_errors() {
    let mut b = Builder::new();
    let c = b
        .input("c", TensorType::new(DType::Bool, [2]), InputKind::Data)
        .unwrap();
    let x = b
        .input("x", TensorType::new(DType::F64, [2]), InputKind::Data)
        .unwrap();
    let i = b
        .input("i", TensorType::new(DType::I64, [2]), InputKind::Data)
        .unwrap();
    assert!(matches!(
        b.add(c, c),
        Err(TypeError::DType {
            index: 0,
            found: DType::Bool,
            ..
        })
    ));
    assert!(matches!(b.less(x, i), Err(TypeError::Mismatch { .. })));
    assert!(matches!(
        b.less(c, c),
        Err(TypeError::DType {
            found: DType::Bool,
            ..
        })
    ));
    assert!(matches!(
        b.logical_and(x, x),
        Err(TypeError::DType {
            found: DType::F64,
            ..
        })
    ));
    assert!(matches!(
        b.select(x, x, x),
        Err(TypeError::DType { index: 0, .. })
    ));
    let u = b.convert(x, DType::U8).unwrap();
    assert!(matches!(
        b.add(u, u),
        Err(TypeError::DType {
            index: 0,
            found: DType::U8,
            ..
        })
    ));
}

#[test]
fn where_routes_the_cotangent_by_the_mask() {
    let mut b = Builder::new();
    let x = b
        .input("x", TensorType::new(DType::F64, [3]), InputKind::Data)
        .unwrap();
    let zero = b.full_like(0.0, x).unwrap();
    let c = b.less(x, zero).unwrap();
    let nx = b.neg(x).unwrap();
    let y = b.select(c, nx, x).unwrap();
    let p = b.finish(&[y]).unwrap();
    let v = crate::ad::vjp(&p).unwrap();
    let args = vec![
        Tensor::f64([3], vec![-2.0, 3.0, -1.0]).unwrap(),
        Tensor::f64([3], vec![1.0, 10.0, 100.0]).unwrap(),
    ];
    let out = eval(&v.program, &args).unwrap();
    let g = v.layout.gradient(&out, 0).unwrap();
    assert_eq!(g, &Tensor::f64([3], vec![-1.0, 10.0, -100.0]).unwrap());
}
