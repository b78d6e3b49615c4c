//! Storage dtypes through the importer: uint8 arithmetic wraps, float16 arithmetic rounds to
//! float16 after each node, Cast reaches the 8-bit floats (saturating by default), and every
//! output keeps its ONNX element type.

use crate::common::*;
use catml_core::interp::{eval_with_options, EvalOptions};
use catml_core::tensor::{DType, Tensor};
use catml_onnx::proto::{ModelProto, TensorProto};
use catml_onnx::{import, Shapes};

const FLOAT: i32 = 1;
const UINT8: i32 = 2;
const FLOAT16: i32 = 10;
const FLOAT8E4M3FN: i32 = 17;

fn binary(op: &str, elem: i32) -> ModelProto {
    model(
        vec![node(op, &["a", "b"], &["y"])],
        vec![value_info("a", elem, &[3]), value_info("b", elem, &[3])],
        vec![value_info("y", elem, &[3])],
        vec![],
    )
}

fn eval(m: &ModelProto, args: Vec<Tensor>) -> Tensor {
    let im = import(m, &Shapes::new(), None).unwrap();
    let opts = EvalOptions {
        check_non_finite: false,
        ..EvalOptions::default()
    };
    eval_with_options(&im.program, &args, opts)
        .unwrap()
        .remove(0)
}

fn typed(d: DType, v: &[f64]) -> Tensor {
    Tensor::f64([v.len()], v.to_vec())
        .unwrap()
        .convert(d)
        .unwrap()
}

#[test]
fn uint8_addition_wraps_modulo_256() {
    // Integer arithmetic folds at import: the operands are initializers.
    let init = |name: &str, v: [u8; 3]| TensorProto {
        name: name.to_string(),
        dims: vec![3],
        data_type: UINT8,
        raw_data: v.to_vec(),
        ..Default::default()
    };
    let m = model(
        vec![node("Add", &["a", "b"], &["y"])],
        vec![],
        vec![value_info("y", UINT8, &[3])],
        vec![init("a", [200, 1, 255]), init("b", [100, 2, 1])],
    );
    let y = eval(&m, vec![]);
    assert_eq!(y.dtype(), DType::U8);
    assert_eq!(y.to_f64_vec(), [44.0, 3.0, 0.0]);
}

#[test]
fn float16_multiplication_rounds_to_float16() {
    // 1.001 * 1.001 is 1.002 in f32; the nearest f16 values step by 2^-10 near 1.
    let x = typed(DType::F16, &[1.0 + 2f64.powi(-10), 300.0, 2.0]);
    let y = eval(&binary("Mul", FLOAT16), vec![x.clone(), x]);
    assert_eq!(y.dtype(), DType::F16);
    let exact = (1.0 + 2f64.powi(-10)).powi(2);
    let v = y.to_f64_vec();
    assert_eq!(
        v[0],
        1.0 + 2.0 * 2f64.powi(-10),
        "{exact} rounds to 1 + 2^-9"
    );
    assert_eq!(v[1], f64::INFINITY, "90000 is past the largest f16");
    assert_eq!(v[2], 4.0);
}

#[test]
fn cast_to_float8_saturates_unless_told_not_to() {
    let cast = |saturate: Option<i64>| {
        let mut n = node("Cast", &["x"], &["y"]);
        n.attribute.push(int_attr("to", FLOAT8E4M3FN as i64));
        if let Some(s) = saturate {
            n.attribute.push(int_attr("saturate", s));
        }
        let mut m = model(
            vec![n],
            vec![value_info("x", FLOAT, &[3])],
            vec![value_info("y", FLOAT8E4M3FN, &[3])],
            vec![],
        );
        m.opset_import[0].version = 19;
        m
    };
    let x = Tensor::f32([3], vec![0.3, 1e6, f32::NEG_INFINITY]).unwrap();
    let y = eval(&cast(None), vec![x.clone()]);
    assert_eq!(y.dtype(), DType::F8E4M3FN);
    assert_eq!(y.to_f64_vec(), [0.3125, 448.0, -448.0]);
    let y = eval(&cast(Some(0)), vec![x]).to_f64_vec();
    assert_eq!(y[0], 0.3125);
    assert!(
        y[1].is_nan() && y[2].is_nan(),
        "E4M3FN has no infinities: {y:?}"
    );
}
