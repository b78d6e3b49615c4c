//! Export refuses what it cannot write, naming the node, the opset or the path, and writes
//! nothing then; the derivative programs carry the contract's names.

use catml_core::ir::{Builder, InputKind, Program};
use catml_core::prim::{CustomPrimitive, Ops};
use catml_core::tensor::{DType, Params, Tensor, TensorType};
use catml_onnx::{export, export_jvp, export_vjp, write_model, ExportError, ExportOptions};

fn names(e: &catml_onnx::Exported) -> (Vec<String>, Vec<String>) {
    let g = e.model.graph.as_ref().unwrap();
    (
        g.input.iter().map(|i| i.name.clone()).collect(),
        g.output.iter().map(|o| o.name.clone()).collect(),
    )
}

/// y = tanh(x W), output twice; x data, W a parameter.
fn dense() -> Program {
    let mut b = Builder::new();
    let x = b
        .input("x", TensorType::new(DType::F32, [2, 3]), InputKind::Data)
        .unwrap();
    let w = b
        .input("W", TensorType::new(DType::F32, [3, 2]), InputKind::Param)
        .unwrap();
    let h = b.matmul(x, w).unwrap();
    let y = b.tanh(h).unwrap();
    b.finish(&[y, y]).unwrap()
}

#[test]
fn a_primitive_without_operator_or_lowering_is_an_error_naming_its_node() {
    let cube = CustomPrimitive::new(
        "cube",
        |t| Ok(t[0].clone()),
        |x| Ok(x[0].map_f64(|v| v * v * v)),
    )
    .into_prim();
    let mut b = Builder::new();
    let x = b
        .input("x", TensorType::new(DType::F64, [2]), InputKind::Data)
        .unwrap();
    let e = b.exp(x).unwrap();
    let y = b.apply(cube, &[e]).unwrap();
    let p = b.finish(&[y]).unwrap();
    let err = export(&p, &Params::new(), &ExportOptions::default()).unwrap_err();
    match &err {
        ExportError::Unexportable { index, op, .. } => {
            assert_eq!((*index, op.as_str()), (1, "cube"));
        }
        other => panic!("{other}"),
    }
    assert!(err.to_string().contains("node 1"), "{err}");
}

#[test]
fn an_opset_outside_the_supported_range_is_refused() {
    for opset in [7, 17, 24, -1] {
        let err = export(&dense(), &Params::new(), &ExportOptions { opset }).unwrap_err();
        assert_eq!(err, ExportError::Opset { opset });
    }
    assert!(export(&dense(), &Params::new(), &ExportOptions { opset: 18 }).is_ok());
}

#[test]
fn a_parameter_value_of_another_type_is_refused() {
    let mut params = Params::new();
    params.insert("W", Tensor::f32([2, 3], vec![0.0; 6]).unwrap());
    let err = export(&dense(), &params, &ExportOptions::default()).unwrap_err();
    assert!(
        matches!(err, ExportError::Param { ref name, .. } if name == "W"),
        "{err}"
    );
}

#[test]
fn parameters_become_initializers_and_stay_graph_inputs() {
    let mut params = Params::new();
    params.insert("W", Tensor::f32([3, 2], vec![0.5; 6]).unwrap());
    let e = export(&dense(), &params, &ExportOptions::default()).unwrap();
    let g = e.model.graph.as_ref().unwrap();
    assert_eq!(g.initializer.len(), 1);
    assert_eq!(g.initializer[0].name, "W");
    assert_eq!(
        names(&e),
        (
            vec!["x".into(), "W".into()],
            vec!["t.1".into(), "t.1.1".into()]
        )
    );
}

#[test]
fn derivative_programs_follow_the_naming_contract() {
    let p = dense();
    let o = ExportOptions::default();
    let v = export_vjp(&p, &Params::new(), &o).unwrap();
    assert_eq!(
        names(&v),
        (
            vec!["x".into(), "W".into(), "seed.0".into(), "seed.1".into()],
            vec![
                "t.1".into(),
                "t.1.1".into(),
                "grad.x".into(),
                "grad.W".into()
            ]
        )
    );
    let j = export_jvp(&p, &Params::new(), &o).unwrap();
    assert_eq!(
        names(&j),
        (
            vec![
                "x".into(),
                "W".into(),
                "tangent.x".into(),
                "tangent.W".into()
            ],
            vec![
                "t.1".into(),
                "t.1.1".into(),
                "tangent.0".into(),
                "tangent.1".into()
            ]
        )
    );
}

#[test]
fn an_input_named_like_a_seed_clashes() {
    let mut b = Builder::new();
    let x = b
        .input("seed.0", TensorType::new(DType::F64, [2]), InputKind::Data)
        .unwrap();
    let y = b.exp(x).unwrap();
    let p = b.finish(&[y]).unwrap();
    let err = export_vjp(&p, &Params::new(), &ExportOptions::default()).unwrap_err();
    assert!(
        matches!(err, ExportError::NameClash { ref name, .. } if name == "seed.0"),
        "{err}"
    );
}

#[test]
fn an_unwritable_path_is_an_error_and_leaves_nothing() {
    let e = export(&dense(), &Params::new(), &ExportOptions::default()).unwrap();
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("export-errors");
    std::fs::create_dir_all(&dir).unwrap();
    let missing = dir.join("no-such-dir").join("m.onnx");
    let err = write_model(&e.model, &missing).unwrap_err();
    assert!(matches!(err, ExportError::Write { .. }), "{err}");
    assert!(!missing.exists());
    // A directory in the way: the rename fails and no temporary file stays behind.
    let blocked = dir.join("blocked.onnx");
    std::fs::create_dir_all(&blocked).unwrap();
    std::fs::write(blocked.join("keep"), b"x").unwrap();
    assert!(write_model(&e.model, &blocked).is_err());
    let left: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    let ok = dir.join("ok.onnx");
    write_model(&e.model, &ok).unwrap();
    assert!(std::fs::metadata(&ok).unwrap().len() > 0);
}
