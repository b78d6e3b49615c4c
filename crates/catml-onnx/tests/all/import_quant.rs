//! Bitwise operators, quantization, Dropout in training, ReverseSequence, TensorScatter and
//! SwiGLU import with ONNX semantics (values checked against hand-computed results).

use crate::common::*;
use catml_core::interp::eval;
use catml_core::tensor::{DType, Tensor};
use catml_onnx::proto::{
    attribute_proto::AttributeType, AttributeProto, ModelProto, NodeProto, OperatorSetIdProto,
};
use catml_onnx::{elem, import_bound, Bound, Const, Shapes};

/// One node reading graph inputs `x0, x1, ...` (element type, dims), writing `y` (and `mask`
/// when `outputs` is 2), at `opset`.
fn one_node(
    op: &str,
    inputs: &[(i32, &[i64])],
    attrs: Vec<AttributeProto>,
    outputs: usize,
    opset: i64,
) -> ModelProto {
    let names: Vec<String> = (0..inputs.len()).map(|i| format!("x{i}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let outs = ["y", "mask"];
    let mut n: NodeProto = node(op, &refs, &outs[..outputs]);
    n.attribute = attrs;
    let mut m = model(
        vec![n],
        inputs
            .iter()
            .zip(&names)
            .map(|((e, d), name)| value_info(name, *e, d))
            .collect(),
        outs[..outputs]
            .iter()
            .map(|o| value_info(o, elem::FLOAT, &[]))
            .collect(),
        vec![],
    );
    m.opset_import = vec![OperatorSetIdProto {
        domain: String::new(),
        version: opset,
    }];
    m
}

fn string_attr(name: &str, v: &str) -> AttributeProto {
    AttributeProto {
        name: name.to_string(),
        r#type: AttributeType::String as i32,
        s: v.as_bytes().to_vec(),
        ..Default::default()
    }
}

/// Imports with the inputs `bound` (by position) known, evaluates on the rest.
fn run(m: &ModelProto, bound: &[(usize, Const)], args: Vec<Tensor>) -> Vec<Tensor> {
    let b: Bound = bound
        .iter()
        .map(|(i, c)| (format!("x{i}"), c.clone()))
        .collect();
    let im = import_bound(m, &Shapes::new(), &b, None).unwrap();
    eval(&im.program, &args).unwrap()
}

fn ints(t: &Tensor) -> Vec<i64> {
    t.convert(DType::I64)
        .unwrap()
        .as_i64()
        .unwrap()
        .data()
        .to_vec()
}

#[test]
fn bit_shifts_wrap_to_the_element_type() {
    let m = one_node(
        "BitShift",
        &[(elem::UINT8, &[3]), (elem::UINT8, &[3])],
        vec![string_attr("direction", "RIGHT")],
        1,
        11,
    );
    let a = Const::ints(elem::UINT8, vec![3], vec![200, 255, 16]);
    let s = Const::ints(elem::UINT8, vec![3], vec![3, 8, 0]);
    let y = run(&m, &[(0, a.clone()), (1, s.clone())], vec![]).remove(0);
    assert_eq!(y.dtype(), DType::U8);
    // 200 >> 3 = 25; a shift of the width gives 0.
    assert_eq!(ints(&y), [25, 0, 16]);
    let m = one_node(
        "BitShift",
        &[(elem::UINT8, &[3]), (elem::UINT8, &[3])],
        vec![string_attr("direction", "LEFT")],
        1,
        11,
    );
    let y = run(&m, &[(0, a), (1, s)], vec![]).remove(0);
    // 200 << 3 = 1600 = 64 mod 256.
    assert_eq!(ints(&y), [64, 0, 16]);
}

#[test]
fn bitwise_operators_broadcast_and_keep_the_type() {
    let a = Const::ints(elem::INT8, vec![2, 2], vec![12, -1, 0, 127]);
    let b = Const::ints(elem::INT8, vec![2], vec![10, -128]);
    for (op, want) in [
        ("BitwiseAnd", [8, -128, 0, 0]),
        ("BitwiseOr", [14, -1, 10, -1]),
        ("BitwiseXor", [6, 127, 10, -1]),
    ] {
        let m = one_node(
            op,
            &[(elem::INT8, &[2, 2]), (elem::INT8, &[2])],
            vec![],
            1,
            18,
        );
        let y = run(&m, &[(0, a.clone()), (1, b.clone())], vec![]).remove(0);
        assert_eq!(y.dtype(), DType::I8, "{op}");
        assert_eq!(ints(&y), want, "{op}");
    }
    let m = one_node("BitwiseNot", &[(elem::UINT16, &[2])], vec![], 1, 18);
    let x = Const::ints(elem::UINT16, vec![2], vec![0, 5]);
    assert_eq!(ints(&run(&m, &[(0, x)], vec![])[0]), [65535, 65530]);
}

#[test]
fn bitwise_operators_on_program_values_are_unsupported() {
    let m = one_node("BitwiseNot", &[(elem::INT32, &[2])], vec![], 1, 18);
    let e = import_bound(&m, &Shapes::new(), &Bound::new(), None).unwrap_err();
    assert!(e.is_unsupported(), "{e}");
    assert!(
        e.to_string().contains("must be known at import time"),
        "{e}"
    );
    assert!(e.to_string().contains("BitwiseNot"), "{e}");
}

#[test]
fn quantize_rounds_half_to_even_and_saturates() {
    let m = one_node(
        "QuantizeLinear",
        &[(elem::FLOAT, &[5]), (elem::FLOAT, &[]), (elem::UINT8, &[])],
        vec![],
        1,
        13,
    );
    let scale = Const::floats(elem::FLOAT, vec![], vec![1.0]);
    let zp = Const::ints(elem::UINT8, vec![], vec![128]);
    let x = f(&[5], &[2.5, 3.5, -0.5, 300.0, -200.0]);
    let y = run(&m, &[(1, scale), (2, zp)], vec![x]).remove(0);
    assert_eq!(y.dtype(), DType::U8);
    // round(2.5) = 2, round(3.5) = 4, round(-0.5) = 0; then + 128, clipped to 0..=255.
    assert_eq!(ints(&y), [130, 132, 128, 255, 0]);
}

#[test]
fn quantize_without_zero_point_follows_output_dtype() {
    let m = one_node(
        "QuantizeLinear",
        &[(elem::FLOAT, &[3]), (elem::FLOAT, &[])],
        vec![int_attr("output_dtype", i64::from(elem::INT16))],
        1,
        21,
    );
    let y = run(&m, &[], vec![f(&[3], &[1.0, -7.0, 1e6]), f(&[], &[2.0])]).remove(0);
    assert_eq!(y.dtype(), DType::I16);
    assert_eq!(ints(&y), [0, -4, 32767]);
}

#[test]
fn blocked_quantize_repeats_each_scale_over_its_block() {
    let m = one_node(
        "QuantizeLinear",
        &[(elem::FLOAT, &[1, 4]), (elem::FLOAT, &[1, 2])],
        vec![int_attr("axis", 1), int_attr("block_size", 2)],
        1,
        21,
    );
    let x = f(&[1, 4], &[1.5, 2.5, 15.0, 35.0]);
    let y = run(&m, &[], vec![x, f(&[1, 2], &[1.0, 10.0])]).remove(0);
    // 1.5 -> 2, 2.5 -> 2, 15 / 10 = 1.5 -> 2, 3.5 -> 4.
    assert_eq!(ints(&y), [2, 2, 2, 4]);
}

#[test]
fn dequantize_per_axis() {
    let m = one_node(
        "DequantizeLinear",
        &[
            (elem::UINT8, &[2, 2]),
            (elem::FLOAT, &[2]),
            (elem::UINT8, &[2]),
        ],
        vec![],
        1,
        13,
    );
    let x = Tensor::f32(vec![2, 2], vec![10.0, 20.0, 30.0, 40.0])
        .unwrap()
        .convert(DType::U8)
        .unwrap();
    let zp = Const::ints(elem::UINT8, vec![2], vec![10, 0]);
    let y = run(&m, &[(2, zp)], vec![x, f(&[2], &[0.5, 2.0])]).remove(0);
    assert_eq!(y.dtype(), DType::F32);
    assert_eq!(y.to_f64_vec(), [0.0, 40.0, 10.0, 80.0]);
}

#[test]
fn float6_quantization_is_unsupported_by_name() {
    let m = one_node(
        "QuantizeLinear",
        &[(elem::FLOAT, &[2]), (elem::FLOAT, &[])],
        vec![int_attr("output_dtype", 27)],
        1,
        21,
    );
    let e = import_bound(&m, &Shapes::new(), &Bound::new(), None).unwrap_err();
    assert!(e.is_unsupported(), "{e}");
    assert!(e.to_string().contains("float6e2m3"), "{e}");
}

#[test]
fn qlinear_matmul_requantizes_the_integer_product() {
    let m = one_node(
        "QLinearMatMul",
        &[
            (elem::UINT8, &[1, 2]),
            (elem::FLOAT, &[]),
            (elem::UINT8, &[]),
            (elem::UINT8, &[2, 1]),
            (elem::FLOAT, &[]),
            (elem::UINT8, &[]),
            (elem::FLOAT, &[]),
            (elem::UINT8, &[]),
        ],
        vec![],
        1,
        10,
    );
    let u8s = |dims: Vec<usize>, v: Vec<i64>| Const::ints(elem::UINT8, dims, v);
    let fl = |v: f64| Const::floats(elem::FLOAT, vec![], vec![v]);
    let bound = [
        (0, u8s(vec![1, 2], vec![3, 5])),
        (1, fl(0.5)),
        (2, u8s(vec![], vec![1])),
        (3, u8s(vec![2, 1], vec![2, 4])),
        (4, fl(0.25)),
        (5, u8s(vec![], vec![0])),
        (6, fl(0.5)),
        (7, u8s(vec![], vec![10])),
    ];
    // (3-1)·2 + (5-1)·4 = 20; 20 · 0.5 · 0.25 / 0.5 = 5; + 10.
    let y = run(&m, &bound, vec![]).remove(0);
    assert_eq!(y.dtype(), DType::U8);
    assert_eq!(ints(&y), [15]);
}

#[test]
fn qlinear_matmul_refuses_types_outside_its_schema() {
    for (code, name) in [(elem::INT4, "int4"), (elem::INT16, "int16")] {
        let m = one_node(
            "QLinearMatMul",
            &[
                (code, &[1, 2]),
                (elem::FLOAT, &[]),
                (code, &[]),
                (elem::UINT8, &[2, 1]),
                (elem::FLOAT, &[]),
                (elem::UINT8, &[]),
                (elem::FLOAT, &[]),
                (elem::UINT8, &[]),
            ],
            vec![],
            1,
            21,
        );
        let e = import_bound(&m, &Shapes::new(), &Bound::new(), None).unwrap_err();
        assert!(!e.is_unsupported(), "{e}");
        assert!(
            e.to_string().contains(&format!(
                "input a has element type {name}; QLinearMatMul takes"
            )),
            "{e}"
        );
    }
}

#[test]
fn dynamic_quantize_spans_zero_and_the_extremes() {
    let m = one_node(
        "DynamicQuantizeLinear",
        &[(elem::FLOAT, &[4])],
        vec![],
        1,
        11,
    );
    let m = {
        let mut m = m;
        let g = m.graph.as_mut().unwrap();
        g.node[0].output = vec!["y".into(), "s".into(), "z".into()];
        g.output = ["y", "s", "z"]
            .iter()
            .map(|o| value_info(o, elem::FLOAT, &[]))
            .collect();
        m
    };
    // Range [-51, 204]: scale 1, zero point 51; 1.5 -> 2 (ties to even) + 51.
    let out = run(&m, &[], vec![f(&[4], &[-51.0, 0.0, 1.5, 204.0])]);
    assert_eq!(ints(&out[0]), [0, 51, 53, 255]);
    assert_eq!(out[1].to_f64_vec(), [1.0]);
    assert_eq!(ints(&out[2]), [51]);
}

#[test]
fn reverse_sequence_reverses_each_prefix() {
    let m = one_node(
        "ReverseSequence",
        &[(elem::FLOAT, &[4, 2]), (elem::INT64, &[2])],
        vec![],
        1,
        10,
    );
    let x = f(&[4, 2], &[0., 1., 2., 3., 4., 5., 6., 7.]);
    let lens = Const::ints(elem::INT64, vec![2], vec![3, 1]);
    let y = run(&m, &[(1, lens)], vec![x]).remove(0);
    // Time runs down the rows; column 0 reverses its first 3 entries, column 1 its first 1.
    assert_eq!(y.to_f64_vec(), [4., 1., 2., 3., 0., 5., 6., 7.]);
}

#[test]
fn tensor_scatter_writes_circularly() {
    let m = one_node(
        "TensorScatter",
        &[
            (elem::FLOAT, &[1, 3, 1]),
            (elem::FLOAT, &[1, 2, 1]),
            (elem::INT64, &[1]),
        ],
        vec![string_attr("mode", "circular"), int_attr("axis", 1)],
        1,
        24,
    );
    let w = Const::ints(elem::INT64, vec![1], vec![2]);
    let y = run(
        &m,
        &[(2, w)],
        vec![f(&[1, 3, 1], &[1., 2., 3.]), f(&[1, 2, 1], &[7., 8.])],
    )
    .remove(0);
    assert_eq!(y.to_f64_vec(), [8., 2., 7.]);
}

#[test]
fn dropout_in_training_with_ratio_zero_keeps_everything() {
    let m = one_node(
        "Dropout",
        &[(elem::FLOAT, &[2]), (elem::FLOAT, &[]), (elem::BOOL, &[])],
        vec![],
        2,
        13,
    );
    let t = Const::ints(elem::BOOL, vec![], vec![1]);
    let zero = Const::floats(elem::FLOAT, vec![], vec![0.0]);
    let out = run(
        &m,
        &[(1, zero), (2, t.clone())],
        vec![f(&[2], &[1.5, -2.0])],
    );
    assert_eq!(out[0].to_f64_vec(), [1.5, -2.0]);
    assert_eq!(out[1].as_bool().unwrap().data(), [true, true]);
    let half = Const::floats(elem::FLOAT, vec![], vec![0.5]);
    let b: Bound = [("x1".to_string(), half), ("x2".to_string(), t)].into();
    let e = import_bound(&m, &Shapes::new(), &b, None).unwrap_err();
    assert!(
        e.is_unsupported() && e.to_string().contains("ratio 0.5"),
        "{e}"
    );
}

#[test]
fn swiglu_gates_with_a_scaled_sigmoid() {
    let m = one_node(
        "SwiGLU",
        &[(elem::FLOAT, &[2]), (elem::FLOAT, &[2])],
        vec![AttributeProto {
            name: "alpha".to_string(),
            r#type: AttributeType::Float as i32,
            f: 2.0,
            ..Default::default()
        }],
        1,
        24,
    );
    let y = run(&m, &[], vec![f(&[2], &[1.0, 0.0]), f(&[2], &[3.0, 5.0])]).remove(0);
    // 1 · sigmoid(2) · 3 and 0.
    let want = 3.0 / (1.0 + (-2.0f64).exp());
    let got = y.to_f64_vec();
    assert!((got[0] - want).abs() < 1e-6, "{got:?}");
    assert_eq!(got[1], 0.0);
}
