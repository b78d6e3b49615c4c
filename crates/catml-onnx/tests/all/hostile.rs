//! Hostile and malformed models: one typed error each, no panic, no allocation past the limit.

use crate::common::*;
use catml_onnx::proto::TensorProto;
use catml_onnx::{decode_model, import, unsupported_nodes, Shapes};
use prost::Message;

fn err_of(m: &catml_onnx::proto::ModelProto) -> String {
    let bytes = m.encode_to_vec();
    let decoded = decode_model(&bytes).unwrap();
    let e = import(&decoded, &Shapes::new(), None)
        .unwrap_err()
        .to_string();
    assert!(!e.contains('\n'), "{e}");
    e
}

fn single(op: &str, init: TensorProto) -> catml_onnx::proto::ModelProto {
    model(
        vec![node(op, &["x", "w"], &["y"])],
        vec![value_info("x", 1, &[2])],
        vec![value_info("y", 1, &[2])],
        vec![init],
    )
}

#[test]
fn truncated_and_corrupt_bytes_are_decode_errors() {
    let bytes = dense_relu().encode_to_vec();
    for cut in [1, 7, bytes.len() / 2, bytes.len() - 1] {
        if let Err(e) = decode_model(&bytes[..cut]) {
            assert!(e.to_string().starts_with("not an ONNX model"), "{e}");
        }
    }
    assert!(decode_model(&[0xff; 64]).is_err());
    assert_eq!(
        decode_model(&[]).unwrap_err().to_string(),
        "model.graph: is missing"
    );
}

#[test]
fn raw_data_length_must_match_dims() {
    let w = TensorProto {
        name: "w".into(),
        dims: vec![2],
        data_type: 1,
        raw_data: vec![0; 7],
        ..Default::default()
    };
    assert_eq!(
        err_of(&single("Add", w)),
        "graph.initializer[0].raw_data: has 7 bytes but dims [2] of float need 8"
    );
}

#[test]
fn huge_dims_are_refused_before_allocation() {
    let w = TensorProto {
        name: "w".into(),
        dims: vec![1 << 40, 1 << 20],
        data_type: 1,
        ..Default::default()
    };
    let e = err_of(&single("Add", w));
    assert!(
        e.starts_with("graph.initializer[0].dims: [1099511627776, 1048576] would hold"),
        "{e}"
    );
    let neg = TensorProto {
        name: "w".into(),
        dims: vec![-3],
        data_type: 1,
        ..Default::default()
    };
    assert_eq!(
        err_of(&single("Add", neg)),
        "graph.initializer[0].dims[0]: -3 is negative"
    );
}

#[test]
fn external_data_to_a_missing_file_is_an_error() {
    let w = TensorProto {
        name: "w".into(),
        dims: vec![2],
        data_type: 1,
        data_location: 1,
        external_data: vec![catml_onnx::proto::StringStringEntryProto {
            key: "location".into(),
            value: "weights.bin".into(),
        }],
        ..Default::default()
    };
    let m = single("Add", w.clone());
    let dir = std::env::temp_dir().join("catml-onnx-no-such-dir");
    let e = import(&m, &Shapes::new(), Some(&dir))
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("graph.initializer[0].external_data: "), "{e}");
    assert!(e.contains("weights.bin"), "{e}");
    let mut escape = w;
    escape.external_data[0].value = "../../etc/passwd".into();
    let e = import(&single("Add", escape), &Shapes::new(), Some(&dir)).unwrap_err();
    assert!(
        e.to_string().contains("must be a relative path inside"),
        "{e}"
    );
}

#[test]
fn cycles_and_duplicate_names_are_errors() {
    let cyc = model(
        vec![node("Relu", &["b"], &["a"]), node("Relu", &["a"], &["b"])],
        vec![value_info("x", 1, &[2])],
        vec![value_info("b", 1, &[2])],
        vec![],
    );
    assert!(err_of(&cyc).starts_with("node 0 `Relu_a` (Relu): input `b` is not defined before"));
    let dup = model(
        vec![node("Relu", &["x"], &["a"]), node("Neg", &["x"], &["a"])],
        vec![value_info("x", 1, &[2])],
        vec![value_info("a", 1, &[2])],
        vec![],
    );
    assert_eq!(
        err_of(&dup),
        "node 1 `Neg_a` (Neg): output `a` is defined twice"
    );
}

#[test]
fn wrong_attribute_types_are_errors() {
    let mut n = node("Flatten", &["x"], &["y"]);
    n.attribute.push(catml_onnx::proto::AttributeProto {
        name: "axis".into(),
        r#type: 2,
        i: 0,
        ..Default::default()
    });
    n.attribute[0].r#type = 1; // FLOAT where INT is expected
    let m = model(
        vec![n],
        vec![value_info("x", 1, &[2, 3])],
        vec![value_info("y", 1, &[2, 3])],
        vec![],
    );
    assert_eq!(
        err_of(&m),
        "node 0 `Flatten_y` (Flatten): attribute `axis` has type FLOAT, expected INT"
    );
}

#[test]
fn subgraphs_and_unknown_operators_are_listed_at_once() {
    let mut iff = node("If", &["x"], &["a"]);
    iff.attribute.push(catml_onnx::proto::AttributeProto {
        name: "then_branch".into(),
        r#type: 5,
        g: Some(Default::default()),
        ..Default::default()
    });
    let m = model(
        vec![
            iff,
            node("FancyOp", &["x"], &["b"]),
            node("Add", &["a", "b"], &["y"]),
        ],
        vec![value_info("x", 1, &[2])],
        vec![value_info("y", 1, &[2])],
        vec![],
    );
    assert_eq!(
        err_of(&m),
        "node 0 `If_a` (If): unsupported: nested subgraphs (If, Loop, Scan)"
    );
    let all = unsupported_nodes(&m, &Shapes::new(), None).unwrap();
    let text: Vec<String> = all.iter().map(|e| e.to_string()).collect();
    assert_eq!(
        text,
        vec![
            "node 0 `If_a` (If): unsupported: nested subgraphs (If, Loop, Scan)",
            "node 1 `FancyOp_b` (FancyOp): unsupported: operator not implemented",
        ]
    );
}

#[test]
fn every_prefix_of_a_model_is_refused_without_panic() {
    let bytes = dense_relu().encode_to_vec();
    for cut in 0..bytes.len() {
        if let Ok(m) = decode_model(&bytes[..cut]) {
            let _ = import(&m, &Shapes::new(), None);
        }
    }
}

#[test]
fn fuzz_regressions_are_refused_without_panic() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/regressions");
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let bytes = std::fs::read(entry.path()).unwrap();
        if let Ok(m) = decode_model(&bytes) {
            let _ = import(&m, &Shapes::new(), None);
            let _ = unsupported_nodes(&m, &Shapes::new(), None);
        }
    }
}
