//! `.onnx` models in the CLI: eval, grad and jvp by ONNX names, initializers from the model,
//! non-finite values as strings with `--allow-non-finite`, unsupported nodes listed at once.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Value};

fn model(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/onnx")
        .join(name)
}

fn scratch(name: &str, v: &Value) -> PathBuf {
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("onnx-{name}"));
    std::fs::write(&path, v.to_string()).unwrap();
    path
}

fn run(args: &[&std::ffi::OsStr]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_catml"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

fn ok(args: &[&std::ffi::OsStr]) -> Value {
    let (code, out, err) = run(args);
    assert_eq!(code, Some(0), "{err}");
    serde_json::from_str(&out).unwrap()
}

fn x_inputs(test: &str) -> PathBuf {
    scratch(
        &format!("{test}-x.json"),
        &json!({"x": {"dtype": "f32", "shape": [2, 2], "data": [1, 2, -1, 0.5]}}),
    )
}

#[test]
fn eval_binds_the_batch_and_reads_initializers_from_the_model() {
    let m = model("dense_relu.onnx");
    let x = x_inputs("eval");
    let v = ok(&[
        "eval".as_ref(),
        m.as_os_str(),
        "--inputs".as_ref(),
        x.as_os_str(),
    ]);
    let out = &v["outputs"][0];
    assert_eq!(out["name"], "y");
    assert_eq!(out["dtype"], "f32");
    assert_eq!(out["shape"], json!([2, 3]));
    let data: Vec<f64> = out["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_f64().unwrap())
        .collect();
    for (g, w) in data.iter().zip([5.1, 0.0, 0.0, 0.1, 1.2, 0.0]) {
        assert!((g - w).abs() < 1e-6, "{data:?}");
    }
}

#[test]
fn grad_keys_gradients_by_onnx_names() {
    let m = model("dense_relu.onnx");
    let x = x_inputs("grad");
    let cot = scratch(
        "cot.json",
        &json!([{"dtype": "f32", "shape": [2, 3], "data": [1, 1, 1, 1, 1, 1]}]),
    );
    let v = ok(&[
        "grad".as_ref(),
        m.as_os_str(),
        "--inputs".as_ref(),
        x.as_os_str(),
        "--cotangents".as_ref(),
        cot.as_os_str(),
    ]);
    let g = v["gradients"].as_object().unwrap();
    let mut keys: Vec<&str> = g.keys().map(String::as_str).collect();
    keys.sort();
    assert_eq!(keys, vec!["fc.W", "fc.b", "x"]);
    assert_eq!(g["fc.b"]["data"], json!([2.0, 1.0, 0.0]));
    // d(sum y)/dx = the active columns of W summed per row: row 0 has unit 0 active
    // (W[:, 0] = [1, 2]), row 1 units 0 and 1 ([1 - 1, 2 + 0]).
    assert_eq!(g["x"]["data"], json!([1.0, 2.0, 0.0, 2.0]));
}

#[test]
fn jvp_takes_tangents_by_tangent_input_name() {
    let m = model("dense_relu.onnx");
    let x = x_inputs("jvp");
    let t = scratch(
        "tan.json",
        &json!({"tangent.x": {"dtype": "f32", "shape": [2, 2], "data": [1, 0, 0, 0]}}),
    );
    let v = ok(&[
        "jvp".as_ref(),
        m.as_os_str(),
        "--inputs".as_ref(),
        x.as_os_str(),
        "--tangents".as_ref(),
        t.as_os_str(),
    ]);
    assert_eq!(v["tangents"][0]["name"], "tangent.y");
    assert_eq!(
        v["tangents"][0]["data"],
        json!([1.0, 0.0, 0.0, 0.0, 0.0, 0.0])
    );
}

#[test]
fn non_finite_values_need_the_flag_and_travel_as_strings() {
    let m = model("log.onnx");
    let x = scratch(
        "log.json",
        &json!({"x": {"shape": [2], "data": [1, "inf"]}}),
    );
    let (code, out, err) = run(&[
        "eval".as_ref(),
        m.as_os_str(),
        "--inputs".as_ref(),
        x.as_os_str(),
    ]);
    assert_eq!((code, out.as_str()), (Some(1), ""));
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("non-finite"), "{err}");
    let v = ok(&[
        "eval".as_ref(),
        m.as_os_str(),
        "--inputs".as_ref(),
        x.as_os_str(),
        "--allow-non-finite".as_ref(),
    ]);
    assert_eq!(v["outputs"][0]["data"], json!([0.0, "inf"]));
}

#[test]
fn check_lists_every_unsupported_node_on_one_line() {
    let m = model("unsupported.onnx");
    let (code, out, err) = run(&["check".as_ref(), m.as_os_str()]);
    assert_eq!((code, out.as_str()), (Some(1), ""));
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("2 unsupported nodes"), "{err}");
    assert!(
        err.contains("(FancyOp): unsupported: operator not implemented"),
        "{err}"
    );
    assert!(err.contains("(Unique): unsupported"), "{err}");
}

#[test]
fn check_and_params_read_onnx_models() {
    let m = model("dense_relu.onnx");
    let (code, _, err) = run(&["check".as_ref(), m.as_os_str()]);
    // The batch dimension is symbolic: check needs shapes it cannot guess.
    assert_eq!(code, Some(1));
    assert!(err.contains("dim 0 is symbolic"), "{err}");
    let v = ok(&[
        "check".as_ref(),
        m.as_os_str(),
        "--shape".as_ref(),
        "x=4x2".as_ref(),
    ]);
    assert_eq!(v["parameters"], json!(["fc.W", "fc.b"]));
    assert_eq!(v["outputs"][0]["shape"], json!([4, 3]));
    let v = ok(&[
        "params".as_ref(),
        m.as_os_str(),
        "--shape".as_ref(),
        "x=1x2".as_ref(),
    ]);
    assert_eq!(v["total"], 9);
}
