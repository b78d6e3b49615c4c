//! `catml export`: a module, or its derivative program, as an ONNX model that `catml` itself
//! reads back; bad opsets and unwritable paths are one-line errors that write nothing.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Value};

fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("export-cli");
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

fn run(args: &[&str]) -> (Option<i32>, String, String) {
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

fn ok(args: &[&str]) -> Value {
    let (code, out, err) = run(args);
    assert_eq!(code, Some(0), "{err}");
    serde_json::from_str(&out).unwrap()
}

/// y = tanh(x W) + b as a listing, W and b parameters.
fn module(name: &str) -> PathBuf {
    let path = scratch(name);
    std::fs::write(
        &path,
        "program(\n  inputs:\n    x: f64[2, 3]\n    W: f64[3, 2] param\n    b: f64[2, 2] param\n  instructions:\n    0: h: f64[2, 2] = matmul(x, W)\n    1: t: f64[2, 2] = tanh(h)\n    2: y: f64[2, 2] = add(t, b)\n  outputs: y\n)\n",
    )
    .unwrap();
    path
}

fn inputs(name: &str, with_params: bool) -> PathBuf {
    let path = scratch(name);
    let mut v =
        json!({"x": {"dtype": "f64", "shape": [2, 3], "data": [0.1, -0.2, 0.3, 0.4, 0.5, -0.6]}});
    if with_params {
        v["W"] =
            json!({"dtype": "f64", "shape": [3, 2], "data": [1.0, 0.5, -0.5, 0.25, 2.0, -1.0]});
        v["b"] = json!({"dtype": "f64", "shape": [2, 2], "data": [0.0, 1.0, -1.0, 0.5]});
    }
    std::fs::write(&path, v.to_string()).unwrap();
    path
}

#[test]
fn an_exported_module_evaluates_as_the_module() {
    let m = module("dense.catml");
    let out = scratch("dense.onnx");
    let s = ok(&[
        "export",
        m.to_str().unwrap(),
        "--onnx",
        out.to_str().unwrap(),
    ]);
    assert_eq!(s["inputs"], json!(["x", "W", "b"]));
    assert_eq!(s["outputs"], json!(["y"]));
    assert_eq!(s["parameters_without_values"], json!(["W", "b"]));
    let all = inputs("dense-all.json", true);
    let want = ok(&[
        "eval",
        m.to_str().unwrap(),
        "--inputs",
        all.to_str().unwrap(),
    ]);
    // Parameters without values stay graph inputs of the model.
    let got = ok(&[
        "eval",
        out.to_str().unwrap(),
        "--inputs",
        all.to_str().unwrap(),
    ]);
    assert_eq!(got["outputs"][0]["data"], want["outputs"][0]["data"]);
}

#[test]
fn grad_and_jvp_models_carry_the_contract_names() {
    let m = module("dense-ad.catml");
    let g = scratch("dense-grad.onnx");
    let s = ok(&[
        "export",
        m.to_str().unwrap(),
        "--onnx",
        g.to_str().unwrap(),
        "--grad",
    ]);
    assert_eq!(s["inputs"], json!(["x", "W", "b", "seed.0"]));
    assert_eq!(s["outputs"], json!(["y", "grad.x", "grad.W", "grad.b"]));
    let j = scratch("dense-jvp.onnx");
    let s = ok(&[
        "export",
        m.to_str().unwrap(),
        "--onnx",
        j.to_str().unwrap(),
        "--jvp",
        "--opset",
        "18",
    ]);
    assert_eq!(s["opset"], 18);
    assert_eq!(
        s["inputs"],
        json!(["x", "W", "b", "tangent.x", "tangent.W", "tangent.b"])
    );
    assert_eq!(s["outputs"], json!(["y", "tangent.0"]));
}

#[test]
fn an_onnx_model_exports_with_its_own_initializers() {
    let m = module("dense-onnx.catml");
    let params = scratch("dense.safetensors");
    let mut store = catml::tensor::Params::new();
    store.insert(
        "W",
        catml::tensor::Tensor::f64([3, 2], vec![1.0, 0.5, -0.5, 0.25, 2.0, -1.0]).unwrap(),
    );
    store.insert(
        "b",
        catml::tensor::Tensor::f64([2, 2], vec![0.0, 1.0, -1.0, 0.5]).unwrap(),
    );
    store.save(&params).unwrap();
    let first = scratch("dense-p.onnx");
    let s = ok(&[
        "export",
        m.to_str().unwrap(),
        "--onnx",
        first.to_str().unwrap(),
        "--params",
        params.to_str().unwrap(),
    ]);
    assert_eq!(s["initializers"], json!(["W", "b"]));
    // Exported again from the model: the initializers come along by name.
    let second = scratch("dense-p2.onnx");
    let s = ok(&[
        "export",
        first.to_str().unwrap(),
        "--onnx",
        second.to_str().unwrap(),
    ]);
    assert_eq!(s["initializers"], json!(["W", "b"]));
    let x = inputs("dense-x.json", false);
    let all = inputs("dense-all2.json", true);
    let want = ok(&[
        "eval",
        m.to_str().unwrap(),
        "--inputs",
        all.to_str().unwrap(),
    ]);
    let got = ok(&[
        "eval",
        second.to_str().unwrap(),
        "--inputs",
        x.to_str().unwrap(),
    ]);
    assert_eq!(got["outputs"][0]["data"], want["outputs"][0]["data"]);
}

#[test]
fn a_bad_opset_or_an_unwritable_path_is_one_line_and_writes_nothing() {
    let m = module("dense-bad.catml");
    let out = scratch("bad-opset.onnx");
    let (code, stdout, stderr) = run(&[
        "export",
        m.to_str().unwrap(),
        "--onnx",
        out.to_str().unwrap(),
        "--opset",
        "9",
    ]);
    assert_eq!(code, Some(1));
    assert!(stdout.is_empty());
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("opset 9"), "{stderr}");
    assert!(!out.exists());
    let nowhere = scratch("missing-dir").join("sub").join("m.onnx");
    let (code, stdout, stderr) = run(&[
        "export",
        m.to_str().unwrap(),
        "--onnx",
        nowhere.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(1));
    assert!(stdout.is_empty());
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("cannot write"), "{stderr}");
    assert!(!nowhere.exists());
}
