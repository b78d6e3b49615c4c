//! Single-operator models: comparisons, logic, Where, IsNaN/IsInf, ArgMax/ArgMin, Pow and
//! Cast import with ONNX semantics (values checked against hand-computed results).

use crate::common::*;
use catml_core::tensor::Tensor;
use catml_onnx::proto::{AttributeProto, ModelProto, NodeProto};
use catml_onnx::{import, Shapes};

const F32: i32 = 1;
const I64: i32 = 7;
const BOOL: i32 = 9;

/// One node reading graph inputs `x0, x1, ...` of the given types, writing `y` of `out_elem`.
fn one_node(
    op: &str,
    inputs: &[(i32, &[i64])],
    attrs: Vec<AttributeProto>,
    out_elem: i32,
) -> ModelProto {
    let names: Vec<String> = (0..inputs.len()).map(|i| format!("x{i}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let mut n: NodeProto = node(op, &refs, &["y"]);
    n.attribute = attrs;
    model(
        vec![n],
        inputs
            .iter()
            .zip(&names)
            .map(|((e, d), name)| value_info(name, *e, d))
            .collect(),
        vec![value_info("y", out_elem, &[])],
        vec![],
    )
}

fn b(dims: &[usize], v: &[bool]) -> Tensor {
    Tensor::bool(dims.to_vec(), v.to_vec()).unwrap()
}

fn bools(t: &Tensor) -> Vec<bool> {
    t.as_bool().unwrap().data().to_vec()
}

#[test]
fn comparisons_broadcast_and_give_bools() {
    let x = f(&[2, 2], &[1.0, 2.0, 3.0, f32::NAN]);
    let y = f(&[2], &[2.0, 2.0]);
    for (op, want) in [
        ("Equal", [false, true, false, false]),
        ("Less", [true, false, false, false]),
        ("LessOrEqual", [true, true, false, false]),
        ("Greater", [false, false, true, false]),
        ("GreaterOrEqual", [false, true, true, false]),
    ] {
        let m = one_node(op, &[(F32, &[2, 2]), (F32, &[2])], vec![], BOOL);
        let got = run(&m, vec![x.clone(), y.clone()]);
        assert_eq!(got.dims(), &[2, 2]);
        assert_eq!(bools(&got), want, "{op}");
    }
    // Equal on bools is not-xor.
    let m = one_node("Equal", &[(BOOL, &[3]), (BOOL, &[3])], vec![], BOOL);
    let got = run(
        &m,
        vec![b(&[3], &[true, false, true]), b(&[3], &[true, true, false])],
    );
    assert_eq!(bools(&got), [true, false, false]);
}

#[test]
fn logical_connectives_broadcast_bools() {
    let p = b(&[2, 2], &[true, true, false, false]);
    let q = b(&[2], &[true, false]);
    for (op, want) in [
        ("And", [true, false, false, false]),
        ("Or", [true, true, true, false]),
        ("Xor", [false, true, true, false]),
    ] {
        let m = one_node(op, &[(BOOL, &[2, 2]), (BOOL, &[2])], vec![], BOOL);
        assert_eq!(bools(&run(&m, vec![p.clone(), q.clone()])), want, "{op}");
    }
    let m = one_node("Not", &[(BOOL, &[2])], vec![], BOOL);
    assert_eq!(bools(&run(&m, vec![q])), [false, true]);
}

#[test]
fn where_selects_with_broadcasting() {
    let m = one_node(
        "Where",
        &[(BOOL, &[2]), (F32, &[2, 2]), (F32, &[1])],
        vec![],
        F32,
    );
    let got = run(
        &m,
        vec![
            b(&[2], &[true, false]),
            f(&[2, 2], &[1.0, 2.0, 3.0, 4.0]),
            f(&[1], &[-1.0]),
        ],
    );
    assert_eq!(got.to_f64_vec(), vec![1.0, -1.0, 3.0, -1.0]);
    // Bool branches.
    let m = one_node(
        "Where",
        &[(BOOL, &[3]), (BOOL, &[3]), (BOOL, &[3])],
        vec![],
        BOOL,
    );
    let got = run(
        &m,
        vec![
            b(&[3], &[true, false, false]),
            b(&[3], &[false, false, true]),
            b(&[3], &[true, false, true]),
        ],
    );
    assert_eq!(bools(&got), [false, false, true]);
}

#[test]
fn isnan_and_isinf_follow_the_detect_attributes() {
    let x = f(&[4], &[1.0, f32::NAN, f32::INFINITY, f32::NEG_INFINITY]);
    let m = one_node("IsNaN", &[(F32, &[4])], vec![], BOOL);
    assert_eq!(
        bools(&run(&m, vec![x.clone()])),
        [false, true, false, false]
    );
    let m = one_node("IsInf", &[(F32, &[4])], vec![], BOOL);
    assert_eq!(bools(&run(&m, vec![x.clone()])), [false, false, true, true]);
    let m = one_node(
        "IsInf",
        &[(F32, &[4])],
        vec![int_attr("detect_positive", 0)],
        BOOL,
    );
    assert_eq!(bools(&run(&m, vec![x])), [false, false, false, true]);
}

#[test]
fn argmax_and_argmin_take_keepdims_and_the_last_index() {
    let x = f(&[2, 3], &[1.0, 5.0, 5.0, 2.0, 0.0, 2.0]);
    let i64s = |t: Tensor| (t.dims().to_vec(), t.as_i64().unwrap().data().to_vec());
    let m = one_node("ArgMax", &[(F32, &[2, 3])], vec![int_attr("axis", -1)], I64);
    assert_eq!(i64s(run(&m, vec![x.clone()])), (vec![2, 1], vec![1, 0]));
    let m = one_node(
        "ArgMax",
        &[(F32, &[2, 3])],
        vec![
            int_attr("axis", 1),
            int_attr("keepdims", 0),
            int_attr("select_last_index", 1),
        ],
        I64,
    );
    assert_eq!(i64s(run(&m, vec![x.clone()])), (vec![2], vec![2, 2]));
    let m = one_node(
        "ArgMin",
        &[(F32, &[2, 3])],
        vec![int_attr("keepdims", 0)],
        I64,
    );
    assert_eq!(i64s(run(&m, vec![x.clone()])), (vec![3], vec![0, 1, 1]));
    let m = one_node(
        "ArgMin",
        &[(F32, &[2, 3])],
        vec![int_attr("axis", 1), int_attr("select_last_index", 1)],
        I64,
    );
    assert_eq!(i64s(run(&m, vec![x])), (vec![2, 1], vec![0, 1]));
}

#[test]
fn pow_handles_zero_and_negative_bases() {
    let m = one_node("Pow", &[(F32, &[5]), (F32, &[5])], vec![], F32);
    let x = f(&[5], &[2.0, 0.0, 0.0, -2.0, -2.0]);
    let y = f(&[5], &[0.5, 2.0, 0.0, 3.0, 2.0]);
    let got = run(&m, vec![x, y]).to_f64_vec();
    assert!((got[0] - 2f64.sqrt()).abs() < 1e-6);
    assert_eq!(&got[1..], &[0.0, 1.0, -8.0, 4.0]);
    // A negative base to a fractional power (NaN in ONNX) is outside pow's domain.
    let im = import(&m, &Shapes::new(), None).unwrap();
    let err = catml_core::interp::eval(
        &im.program,
        &[
            f(&[5], &[1.0, 1.0, 1.0, 1.0, -2.0]),
            f(&[5], &[1.0; 5].map(|v| v * 0.5)),
        ],
    )
    .unwrap_err();
    assert!(err.to_string().contains("pow"), "{err}");
}

#[test]
fn pow_by_a_constant_integer_is_powi() {
    let mut m = one_node("Pow", &[(F32, &[3])], vec![], F32);
    let g = m.graph.as_mut().unwrap();
    g.node[0].input.push("e".to_string());
    g.initializer.push(catml_onnx::proto::TensorProto {
        name: "e".to_string(),
        dims: vec![],
        data_type: I64,
        int64_data: vec![3],
        ..Default::default()
    });
    let got = run(&m, vec![f(&[3], &[-2.0, 0.0, 1.5])]).to_f64_vec();
    assert_eq!(got, vec![-8.0, 0.0, 3.375]);
}

#[test]
fn clip_takes_bounds_as_program_inputs() {
    let m = one_node("Clip", &[(F32, &[4]), (F32, &[]), (F32, &[])], vec![], F32);
    let x = f(&[4], &[-3.0, -0.5, 0.5, 3.0]);
    let got = run(&m, vec![x.clone(), f(&[], &[-1.0]), f(&[], &[1.0])]);
    assert_eq!(got.to_f64_vec(), vec![-1.0, -0.5, 0.5, 1.0]);
    // min > max gives max everywhere.
    let got = run(&m, vec![x, f(&[], &[2.0]), f(&[], &[1.0])]);
    assert_eq!(got.to_f64_vec(), vec![1.0; 4]);
}

#[test]
fn trilu_keeps_integer_triangles() {
    let m = one_node("Trilu", &[(I64, &[2, 3])], vec![int_attr("upper", 0)], I64);
    let x = Tensor::i64([2, 3], vec![1, 2, 3, 4, 5, 6]).unwrap();
    let got = run(&m, vec![x]);
    assert_eq!(got.as_i64().unwrap().data(), &[1, 0, 0, 4, 5, 0]);
}

#[test]
fn trigonometric_and_hyperbolic_functions_match_std() {
    let xs = [-0.5f32, 0.1, 0.7];
    type Reference = fn(f64) -> f64;
    let ops: [(&str, Reference); 8] = [
        ("Tan", f64::tan),
        ("Sinh", f64::sinh),
        ("Cosh", f64::cosh),
        ("Asin", f64::asin),
        ("Acos", f64::acos),
        ("Asinh", f64::asinh),
        ("Atanh", f64::atanh),
        ("Acosh", f64::acosh),
    ];
    for (op, g) in ops {
        let x: Vec<f32> = if op == "Acosh" {
            xs.iter().map(|v| v + 2.0).collect()
        } else {
            xs.to_vec()
        };
        let m = one_node(op, &[(F32, &[3])], vec![], F32);
        let got = run(&m, vec![f(&[3], &x)]).to_f64_vec();
        for (k, v) in x.iter().enumerate() {
            let want = g(*v as f64);
            assert!(
                (got[k] - want).abs() < 1e-5 * (1.0 + want.abs()),
                "{op}({v}) = {}",
                got[k]
            );
        }
    }
}

#[test]
fn float_mod_follows_the_fmod_attribute() {
    let x = f(&[4], &[5.5, -5.5, 5.5, -5.5]);
    let y = f(&[4], &[2.0, 2.0, -2.0, -2.0]);
    let m = one_node(
        "Mod",
        &[(F32, &[4]), (F32, &[4])],
        vec![int_attr("fmod", 1)],
        F32,
    );
    assert_eq!(
        run(&m, vec![x.clone(), y.clone()]).to_f64_vec(),
        vec![1.5, -1.5, 1.5, -1.5]
    );
    let m = one_node("Mod", &[(F32, &[4]), (F32, &[4])], vec![], F32);
    assert_eq!(run(&m, vec![x, y]).to_f64_vec(), vec![1.5, 0.5, -0.5, -1.5]);
}

/// A model whose integer input `t` is an initializer (known at import).
fn with_known_ints(mut m: ModelProto, input: &str, dims: &[i64], data: &[i64]) -> ModelProto {
    let g = m.graph.as_mut().unwrap();
    g.input.retain(|i| i.name != input);
    g.initializer.push(catml_onnx::proto::TensorProto {
        name: input.to_string(),
        dims: dims.to_vec(),
        data_type: I64,
        int64_data: data.to_vec(),
        ..Default::default()
    });
    m
}

fn string_attr(name: &str, v: &str) -> AttributeProto {
    AttributeProto {
        name: name.to_string(),
        r#type: catml_onnx::proto::attribute_proto::AttributeType::String as i32,
        s: v.as_bytes().to_vec(),
        ..Default::default()
    }
}

#[test]
fn gather_elements_picks_along_an_axis() {
    let m = one_node(
        "GatherElements",
        &[(F32, &[2, 2]), (I64, &[2, 2])],
        vec![int_attr("axis", 1)],
        F32,
    );
    let m = with_known_ints(m, "x1", &[2, 2], &[0, 0, 1, -2]);
    let got = run(&m, vec![f(&[2, 2], &[1.0, 2.0, 3.0, 4.0])]);
    assert_eq!(got.to_f64_vec(), vec![1.0, 1.0, 4.0, 3.0]);
}

#[test]
fn nll_loss_weights_ignores_and_reduces() {
    // input (N=2, C=3), target [2, ignored], weight [1, 2, 3].
    let x = f(&[2, 3], &[-1.0, -2.0, -3.0, -4.0, -5.0, -6.0]);
    let w = f(&[3], &[1.0, 2.0, 3.0]);
    for (reduction, want) in [
        ("none", vec![9.0, 0.0]),
        ("sum", vec![9.0]),
        ("mean", vec![3.0]),
    ] {
        let m = one_node(
            "NegativeLogLikelihoodLoss",
            &[(F32, &[2, 3]), (I64, &[2]), (F32, &[3])],
            vec![
                int_attr("ignore_index", -1),
                string_attr("reduction", reduction),
            ],
            F32,
        );
        let m = with_known_ints(m, "x1", &[2], &[2, -1]);
        assert_eq!(
            run(&m, vec![x.clone(), w.clone()]).to_f64_vec(),
            want,
            "{reduction}"
        );
    }
}

#[test]
fn softmax_cross_entropy_is_nll_of_log_softmax() {
    let m = one_node(
        "SoftmaxCrossEntropyLoss",
        &[(F32, &[2, 2]), (I64, &[2])],
        vec![],
        F32,
    );
    let m = with_known_ints(m, "x1", &[2], &[0, 1]);
    let got = run(&m, vec![f(&[2, 2], &[0.0, 0.0, 0.0, 2.0])]).to_f64_vec();
    // mean of ln 2 and ln(1 + e^-2).
    let want = (2f64.ln() + (1.0 + (-2f64).exp()).ln()) / 2.0;
    assert!((got[0] - want).abs() < 1e-6, "{got:?}");
}

#[test]
fn cumsum_takes_exclusive_and_reverse() {
    let x = f(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    for (ex, rev, want) in [
        (0, 0, [1.0, 3.0, 6.0, 4.0, 9.0, 15.0]),
        (1, 0, [0.0, 1.0, 3.0, 0.0, 4.0, 9.0]),
        (0, 1, [6.0, 5.0, 3.0, 15.0, 11.0, 6.0]),
        (1, 1, [5.0, 3.0, 0.0, 11.0, 6.0, 0.0]),
    ] {
        let m = one_node(
            "CumSum",
            &[(F32, &[2, 3]), (I64, &[])],
            vec![int_attr("exclusive", ex), int_attr("reverse", rev)],
            F32,
        );
        let m = with_known_ints(m, "x1", &[], &[-1]);
        assert_eq!(run(&m, vec![x.clone()]).to_f64_vec(), want, "{ex} {rev}");
    }
}

#[test]
fn resize_interpolates_with_known_sizes() {
    // (1, 1, 1, 2) -> width 4.
    let x = f(&[1, 1, 1, 2], &[0.0, 4.0]);
    let cases = [
        ("nearest", "asymmetric", vec![0.0, 0.0, 4.0, 4.0]),
        ("linear", "half_pixel", vec![0.0, 1.0, 3.0, 4.0]),
        (
            "linear",
            "align_corners",
            vec![0.0, 4.0 / 3.0, 8.0 / 3.0, 4.0],
        ),
    ];
    for (mode, ctm, want) in cases {
        let m = one_node(
            "Resize",
            &[(F32, &[1, 1, 1, 2]), (F32, &[]), (F32, &[]), (I64, &[4])],
            vec![
                string_attr("mode", mode),
                string_attr("coordinate_transformation_mode", ctm),
            ],
            F32,
        );
        let mut m = with_known_ints(m, "x3", &[4], &[1, 1, 1, 4]);
        let g = m.graph.as_mut().unwrap();
        g.input.retain(|i| i.name == "x0");
        g.node[0].input = vec!["x0".into(), String::new(), String::new(), "x3".into()];
        let got = run(&m, vec![x.clone()]).to_f64_vec();
        for (g, w) in got.iter().zip(&want) {
            assert!((g - w).abs() < 1e-6, "{mode} {ctm}: {got:?}");
        }
    }
}

#[test]
fn reduce_prod_hardmax_and_lp_normalization() {
    let x = f(&[2, 3], &[1.0, -2.0, 3.0, 0.0, 3.0, 4.0]);
    let m = one_node(
        "ReduceProd",
        &[(F32, &[2, 3])],
        vec![int_attr("keepdims", 0)],
        F32,
    );
    let y = f(&[2, 3], &[1.0, -2.0, 3.0, 1.0, 3.0, 4.0]);
    assert_eq!(run(&m, vec![y]).to_f64_vec(), vec![-72.0]);
    let m = one_node("Hardmax", &[(F32, &[2, 3])], vec![int_attr("axis", 0)], F32);
    assert_eq!(
        run(&m, vec![x.clone()]).to_f64_vec(),
        vec![1.0, 0.0, 0.0, 0.0, 1.0, 1.0]
    );
    let m = one_node(
        "LpNormalization",
        &[(F32, &[2, 3])],
        vec![int_attr("axis", 0)],
        F32,
    );
    let got = run(&m, vec![f(&[2, 3], &[3.0, 0.0, 1.0, 4.0, 0.0, 0.0])]).to_f64_vec();
    for (g, w) in got.iter().zip([0.6, 0.0, 1.0, 0.8, 0.0, 0.0]) {
        assert!((g - w).abs() < 1e-6, "{got:?}");
    }
}

#[test]
fn attention_is_causal_softmax_of_scaled_scores() {
    // One batch, one head, 2 queries and keys of size 1: with is_causal query 0 sees key 0
    // only; query 1 sees both, weights softmax(q1 k / sqrt(1)).
    let m = one_node(
        "Attention",
        &[
            (F32, &[1, 1, 2, 1]),
            (F32, &[1, 1, 2, 1]),
            (F32, &[1, 1, 2, 1]),
        ],
        vec![int_attr("is_causal", 1)],
        F32,
    );
    let mut m = m;
    m.opset_import[0].version = 23;
    let q = f(&[1, 1, 2, 1], &[1.0, 2.0]);
    let k = f(&[1, 1, 2, 1], &[0.5, -1.0]);
    let v = f(&[1, 1, 2, 1], &[10.0, 20.0]);
    let got = run(&m, vec![q, k, v]).to_f64_vec();
    // Scores q1 k0 = 2 · 0.5 and q1 k1 = 2 · (-1).
    let (s0, s1) = (1.0f64, -2.0f64);
    let w0 = s0.exp() / (s0.exp() + s1.exp());
    let want = [10.0, 10.0 * w0 + 20.0 * (1.0 - w0)];
    for (g, w) in got.iter().zip(want) {
        assert!((g - w).abs() < 1e-5, "{got:?}");
    }
}

#[test]
fn cumprod_one_hot_and_eye_like() {
    let x = f(&[3], &[2.0, 3.0, 4.0]);
    let axis = |m| with_known_ints(m, "x1", &[], &[0]);
    let m = axis(one_node("CumProd", &[(F32, &[3]), (I64, &[])], vec![], F32));
    assert_eq!(run(&m, vec![x.clone()]).to_f64_vec(), vec![2.0, 6.0, 24.0]);
    let m = axis(one_node(
        "CumProd",
        &[(F32, &[3]), (I64, &[])],
        vec![int_attr("exclusive", 1), int_attr("reverse", 1)],
        F32,
    ));
    assert_eq!(run(&m, vec![x]).to_f64_vec(), vec![12.0, 4.0, 1.0]);
    // OneHot: indices [1, -1] (depth 3), values (off, on) = (-1, 5), classes on axis 0.
    let m = one_node(
        "OneHot",
        &[(I64, &[2]), (I64, &[]), (F32, &[2])],
        vec![int_attr("axis", 0)],
        F32,
    );
    let m = with_known_ints(with_known_ints(m, "x0", &[2], &[1, -1]), "x1", &[], &[3]);
    let got = run(&m, vec![f(&[2], &[-1.0, 5.0])]);
    assert_eq!(got.dims(), &[3, 2]);
    assert_eq!(got.to_f64_vec(), vec![-1.0, -1.0, 5.0, -1.0, -1.0, 5.0]);
    let m = one_node("EyeLike", &[(F32, &[2, 3])], vec![int_attr("k", 1)], F32);
    let got = run(&m, vec![f(&[2, 3], &[0.0; 6])]);
    assert_eq!(got.to_f64_vec(), vec![0.0, 1.0, 0.0, 0.0, 0.0, 1.0]);
}

#[test]
fn lp_pool_is_the_p_norm_of_each_window() {
    let mut n = node("LpPool", &["x0"], &["y"]);
    n.attribute = vec![AttributeProto {
        name: "kernel_shape".to_string(),
        r#type: catml_onnx::proto::attribute_proto::AttributeType::Ints as i32,
        ints: vec![2],
        ..Default::default()
    }];
    let m = model(
        vec![n],
        vec![value_info("x0", F32, &[1, 1, 3])],
        vec![value_info("y", F32, &[])],
        vec![],
    );
    let got = run(&m, vec![f(&[1, 1, 3], &[3.0, -4.0, 0.0])]).to_f64_vec();
    assert_eq!(got, vec![5.0, 4.0]);
}

#[test]
fn einsum_contracts_transposes_and_takes_diagonals() {
    let eq = |e: &str| AttributeProto {
        name: "equation".to_string(),
        r#type: catml_onnx::proto::attribute_proto::AttributeType::String as i32,
        s: e.as_bytes().to_vec(),
        ..Default::default()
    };
    let a = f(&[2, 2], &[1.0, 2.0, 3.0, 4.0]);
    let b = f(&[2, 2], &[5.0, 6.0, 7.0, 8.0]);
    let two = [(F32, &[2i64, 2][..]), (F32, &[2, 2][..])];
    let m = one_node("Einsum", &two, vec![eq("ij,jk->ik")], F32);
    assert_eq!(
        run(&m, vec![a.clone(), b.clone()]).to_f64_vec(),
        vec![19.0, 22.0, 43.0, 50.0]
    );
    let m = one_node("Einsum", &two[..1], vec![eq("ij->ji")], F32);
    assert_eq!(
        run(&m, vec![a.clone()]).to_f64_vec(),
        vec![1.0, 3.0, 2.0, 4.0]
    );
    let m = one_node("Einsum", &two[..1], vec![eq("...ii->...i")], F32);
    assert_eq!(run(&m, vec![a.clone()]).to_f64_vec(), vec![1.0, 4.0]);
    // Implicit output: the repeated letters are summed (a full contraction here).
    let m = one_node("Einsum", &two, vec![eq("ij,ij")], F32);
    assert_eq!(run(&m, vec![a, b]).to_f64_vec(), vec![70.0]);
}

#[test]
fn conv_transpose_scatters_each_input_through_the_kernel() {
    // y[j] = sum_i x[i] w[j - 2 i]: x = [1, 2], w = [1, 10], stride 2.
    let mut n = node("ConvTranspose", &["x0", "x1"], &["y"]);
    n.attribute = vec![AttributeProto {
        name: "strides".to_string(),
        r#type: catml_onnx::proto::attribute_proto::AttributeType::Ints as i32,
        ints: vec![2],
        ..Default::default()
    }];
    let m = model(
        vec![n],
        vec![
            value_info("x0", F32, &[1, 1, 2]),
            value_info("x1", F32, &[1, 1, 2]),
        ],
        vec![value_info("y", F32, &[])],
        vec![],
    );
    let got = run(
        &m,
        vec![f(&[1, 1, 2], &[1.0, 2.0]), f(&[1, 1, 2], &[1.0, 10.0])],
    );
    assert_eq!(got.dims(), &[1, 1, 4]);
    assert_eq!(got.to_f64_vec(), vec![1.0, 10.0, 2.0, 20.0]);
}
