//! Integer data through the exact data-movement mappings at import (`ops/int_data.rs`), and an
//! integer base to a float exponent: values worked out by hand; data beyond 2^52 is refused.

use crate::common::*;
use crate::import_recurrent::{ints_init, str_attr};
use catml_core::interp::eval;
use catml_core::tensor::{DType, Tensor};
use catml_onnx::proto::{AttributeProto, NodeProto, TensorProto};
use catml_onnx::{import, OnnxError, Shapes};

fn with(mut n: NodeProto, attrs: Vec<AttributeProto>) -> NodeProto {
    n.attribute = attrs;
    n
}

/// Imports one node whose operands are all initializers and evaluates its output.
fn fold(
    n: NodeProto,
    inits: Vec<TensorProto>,
    out_elem: i32,
    opset: i64,
) -> Result<Tensor, OnnxError> {
    let mut m = model(vec![n], vec![], vec![value_info("Y", out_elem, &[])], inits);
    m.opset_import[0].version = opset;
    let im = import(&m, &Shapes::new(), None)?;
    assert_eq!(im.program.inputs().len(), 0, "everything folds");
    Ok(eval(&im.program, &[]).expect("evaluates").remove(0))
}

fn ints(t: &Tensor) -> Vec<i64> {
    t.to_f64_vec().iter().map(|&v| v as i64).collect()
}

fn u64_init(name: &str, dims: &[i64], v: &[u64]) -> TensorProto {
    TensorProto {
        name: name.to_string(),
        dims: dims.to_vec(),
        data_type: 13,
        uint64_data: v.to_vec(),
        ..Default::default()
    }
}

#[test]
fn integer_data_moves_exactly_and_keeps_its_type() {
    // Clip of int8 data by int8 bounds.
    let y = fold(
        node("Clip", &["x", "lo", "hi"], &["Y"]),
        vec![
            ints_init("x", 3, &[4], &[-5, 0, 7, -128]),
            ints_init("lo", 3, &[], &[-2]),
            ints_init("hi", 3, &[], &[3]),
        ],
        3,
        13,
    )
    .unwrap();
    assert_eq!(y.dtype(), DType::I8);
    assert_eq!(ints(&y), [-2, 0, 3, -2]);
    // CumSum of int32 wraps past 2^31 - 1 as int32 arithmetic does.
    let y = fold(
        node("CumSum", &["x", "axis"], &["Y"]),
        vec![
            ints_init("x", 6, &[3], &[2147483647, 1, 5]),
            ints_init("axis", 7, &[], &[0]),
        ],
        6,
        14,
    )
    .unwrap();
    assert_eq!(y.dtype(), DType::I32);
    assert_eq!(ints(&y), [2147483647, -2147483648, -2147483643]);
    // CumProd, exclusive and reversed.
    let y = fold(
        with(
            node("CumProd", &["x", "axis"], &["Y"]),
            vec![int_attr("exclusive", 1), int_attr("reverse", 1)],
        ),
        vec![
            ints_init("x", 7, &[4], &[2, -3, 5, 7]),
            ints_init("axis", 7, &[], &[0]),
        ],
        7,
        26,
    )
    .unwrap();
    assert_eq!(ints(&y), [-105, 35, 7, 1]);
    // Reflect padding of int64 data.
    let y = fold(
        with(
            node("Pad", &["x", "pads"], &["Y"]),
            vec![str_attr("mode", "reflect")],
        ),
        vec![
            ints_init("x", 7, &[3], &[1, 2, 3]),
            ints_init("pads", 7, &[2], &[2, 1]),
        ],
        7,
        18,
    )
    .unwrap();
    assert_eq!(ints(&y), [3, 2, 1, 2, 3, 2]);
    // TopK of uint64 values: the largest two, ties to the lower index.
    let mut m = model(
        vec![with(
            node("TopK", &["x", "k"], &["Y", "I"]),
            vec![int_attr("axis", 0)],
        )],
        vec![],
        vec![value_info("Y", 13, &[]), value_info("I", 7, &[])],
        vec![
            u64_init("x", &[4], &[7, 1 << 40, 9, 1 << 40]),
            ints_init("k", 7, &[1], &[3]),
        ],
    );
    m.opset_import[0].version = 11;
    let im = import(&m, &Shapes::new(), None).unwrap();
    let got = eval(&im.program, &[]).unwrap();
    assert_eq!(got[0].dtype(), DType::U64);
    assert_eq!(ints(&got[0]), [1 << 40, 1 << 40, 9]);
    assert_eq!(got[1].as_i64().unwrap().data(), &[1, 3, 2]);
}

#[test]
fn integer_data_beyond_the_exact_range_is_refused_naming_the_node() {
    let e = fold(
        node("Clip", &["x", "lo"], &["Y"]),
        vec![
            ints_init("x", 7, &[2], &[(1 << 53) + 1, 0]),
            ints_init("lo", 7, &[], &[0]),
        ],
        7,
        13,
    )
    .unwrap_err();
    assert!(e.is_unsupported(), "{e}");
    let s = e.to_string();
    assert!(
        s.contains("Clip") && s.contains("input 0") && s.contains("2^52"),
        "{s}"
    );
    // Products: 2^30 · 2^30 would round in f64 were it past 2^52.
    let e = fold(
        node("CumProd", &["x", "axis"], &["Y"]),
        vec![
            ints_init("x", 7, &[2], &[1 << 30, 1 << 30]),
            ints_init("axis", 7, &[], &[0]),
        ],
        7,
        14,
    )
    .unwrap_err();
    assert!(e.to_string().contains("product of magnitudes"), "{e}");
    // Sums likewise.
    let e = fold(
        node("CumSum", &["x", "axis"], &["Y"]),
        vec![
            ints_init("x", 7, &[2], &[1 << 51, 1 << 51 | 1]),
            ints_init("axis", 7, &[], &[0]),
        ],
        7,
        14,
    )
    .unwrap_err();
    assert!(e.to_string().contains("sum of magnitudes"), "{e}");
}

#[test]
fn an_integer_base_to_a_float_exponent_truncates_to_the_base_type() {
    let mut m = model(
        vec![node("Pow", &["x", "y"], &["Y"])],
        vec![value_info("y", 1, &[3])],
        vec![value_info("Y", 6, &[])],
        vec![ints_init("x", 6, &[3], &[2, 3, -8])],
    );
    m.opset_import[0].version = 15;
    let im = import(&m, &Shapes::new(), None).unwrap();
    let y = Tensor::f32(vec![3], vec![0.5, 2.0, 1.0]).unwrap();
    let got = eval(&im.program, &[y]).unwrap();
    assert_eq!(got[0].dtype(), DType::I32);
    // √2 truncates to 1; 3² = 9; (-8)¹ = -8.
    assert_eq!(ints(&got[0]), [1, 9, -8]);
}

#[test]
fn one_hot_of_indices_that_are_a_program_value_matches_by_value() {
    // Index -1 wraps to 2; 2.5 and 7 match no position (as the reference compares numbers).
    let mut n = node("OneHot", &["i", "depth", "values"], &["Y"]);
    n.attribute = vec![int_attr("axis", 1)];
    let mut m = model(
        vec![n],
        vec![value_info("i", 1, &[2, 2])],
        vec![value_info("Y", 1, &[])],
        vec![
            floats("depth", &[], &[3.0]),
            floats("values", &[2], &[0.0, 5.0]),
        ],
    );
    m.opset_import[0].version = 11;
    let im = import(&m, &Shapes::new(), None).unwrap();
    let args: Vec<Tensor> = im
        .program
        .inputs()
        .iter()
        .map(|i| match im.params.get(&i.name) {
            Some(t) => t.clone(),
            None => Tensor::f32(vec![2, 2], vec![1.0, -1.0, 2.5, 7.0]).unwrap(),
        })
        .collect();
    let got = eval(&im.program, &args).unwrap();
    assert_eq!(got[0].dims(), &[2, 3, 2]);
    assert_eq!(
        got[0].to_f64_vec(),
        [0.0, 0.0, 5.0, 0.0, 0.0, 5.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    );
}
