//! `--params FILE.safetensors` on eval, grad, jvp and cost: a checkpoint written by
//! `catml train` supplies the trained parameters of the module it was trained with, found by
//! their names and types; a plain store supplies parameters by name.

use std::path::{Path, PathBuf};
use std::process::Command;

use catml::tensor::{Params, Tensor};
use serde_json::{json, Value};

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

fn catml(args: &[&dyn AsRef<std::ffi::OsStr>]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_catml"))
        .args(args.iter().map(|a| a.as_ref()))
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

fn ok(args: &[&dyn AsRef<std::ffi::OsStr>]) -> Value {
    let (code, stdout, stderr) = catml(args);
    assert_eq!(code, 0, "{stderr}");
    serde_json::from_str(&stdout).unwrap()
}

/// The one error line, without the prefix.
fn fails(args: &[&dyn AsRef<std::ffi::OsStr>]) -> String {
    let (code, stdout, stderr) = catml(args);
    assert_eq!((code, stdout.as_str()), (1, ""), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    stderr
        .trim_end()
        .strip_prefix("catml: ")
        .unwrap()
        .to_string()
}

/// Trains the example spec for two epochs in `dir`; returns the checkpoint's path.
fn trained_checkpoint(dir: &Path) -> PathBuf {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).unwrap();
    let text = std::fs::read_to_string(examples().join("triangle.toml")).unwrap();
    let data = examples().join("triangle");
    let text = text
        .replace("epochs = 25", "epochs = 2")
        .replace("\"triangle/out/", "\"out/")
        .replace("\"triangle/", &format!("\"{}/", data.display()));
    let spec = dir.join("spec.toml");
    std::fs::write(&spec, text).unwrap();
    let (code, _, stderr) = catml(&[&"train", &"--quiet", &spec]);
    assert_eq!(code, 0, "{stderr}");
    dir.join("out/checkpoint.safetensors")
}

/// The first 32 rows of the held-out data's evidence columns, as f32[32, 8].
fn evidence() -> Vec<f32> {
    let csv = std::fs::read_to_string(examples().join("triangle/test.csv")).unwrap();
    csv.lines()
        .skip(1)
        .take(32)
        .flat_map(|l| {
            l.split(',')
                .take(8)
                .map(|c| c.parse::<f32>().unwrap())
                .collect::<Vec<_>>()
        })
        .collect()
}

fn f32s(v: &Value) -> Vec<f32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap() as f32)
        .collect()
}

/// out = W2 tanh(W1 x + b1) + b2 per row, in f64, from the checkpoint's tensors.
fn mlp(ckpt: &Params, arrow: &str, x: &[f32], rows: usize) -> Vec<f64> {
    let get = |n: &str| {
        ckpt.get(&format!("param/{arrow}.{n}"))
            .unwrap()
            .to_f64_vec()
    };
    let (w1, b1, w2, b2) = (get("W1"), get("b1"), get("W2"), get("b2"));
    let (hidden, inputs, outs) = (b1.len(), w1.len() / b1.len(), b2.len());
    let mut out = Vec::new();
    for r in 0..rows {
        let xr = &x[r * inputs..(r + 1) * inputs];
        let h: Vec<f64> = (0..hidden)
            .map(|j| {
                let z: f64 = (0..inputs).map(|k| w1[j * inputs + k] * xr[k] as f64).sum();
                (z + b1[j]).tanh()
            })
            .collect();
        for o in 0..outs {
            out.push((0..hidden).map(|j| w2[o * hidden + j] * h[j]).sum::<f64>() + b2[o]);
        }
    }
    out
}

fn scratch(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn eval_grad_jvp_and_cost_take_the_parameters_of_a_trained_checkpoint() {
    let dir = std::env::temp_dir().join(format!("catml-cli-params-{}", std::process::id()));
    let ckpt_path = trained_checkpoint(&dir);
    let ckpt = Params::load(&ckpt_path).unwrap();
    let x = evidence();
    let inputs = scratch(
        &dir,
        "in.json",
        &json!({"x": {"dtype": "f32", "shape": [32, 8], "data": x}}).to_string(),
    );
    let f = examples().join("triangle/f.json");
    let h = examples().join("triangle/h.json");

    // f (E -> S) and h (E -> D) differ only in their output layer's shape: each finds its own.
    for (module, arrow, width) in [(&f, "f", 3), (&h, "h", 4)] {
        let v = ok(&[
            &"eval",
            module,
            &"--inputs",
            &inputs,
            &"--params",
            &ckpt_path,
        ]);
        let out = &v["outputs"][0];
        assert_eq!(out["shape"], json!([32, width]));
        let expected = mlp(&ckpt, arrow, &x, 32);
        let got = f32s(&out["data"]);
        for (g, e) in got.iter().zip(&expected) {
            assert!((*g as f64 - e).abs() < 1e-4, "{arrow}: {g} against {e}");
        }
    }
    // The trained parameters are not the initial ones: a fresh initialisation differs.
    assert_ne!(ckpt.get("param/f.W1"), ckpt.get("param/h.W1"));

    // grad: the gradients of the trained parameters, summarised by tag without repeating them.
    let v = ok(&[&"grad", &f, &"--inputs", &inputs, &"--params", &ckpt_path]);
    let names: Vec<&String> = v["gradients"].as_object().unwrap().keys().collect();
    assert_eq!(names, ["W1", "W2", "b1", "b2", "x"]);
    assert_eq!(
        v["gradients_by_tag"]["untagged"]["parameters"],
        json!(["W1", "b1", "W2", "b2"])
    );
    assert_eq!(
        v["gradients_by_tag"]["untagged"]["elements"],
        16 * 8 + 16 + 3 * 16 + 3
    );
    // With unit seeds, d sum(out) / d b2 = 32 for every output unit.
    assert_eq!(f32s(&v["gradients"]["b2"]["data"]), [32.0; 3]);

    let tangents = scratch(&dir, "tan.json", "{}");
    let v = ok(&[
        &"jvp",
        &f,
        &"--inputs",
        &inputs,
        &"--tangents",
        &tangents,
        &"--params",
        &ckpt_path,
    ]);
    assert_eq!(v["tangents"][0]["shape"], json!([32, 3]));
    let v = ok(&[&"cost", &f, &"--params", &ckpt_path]);
    assert!(v["flops"].as_u64().unwrap() > 0);

    // --arrow chooses explicitly; the wrong arrow is refused with the types that differ.
    let by_name = ok(&[
        &"eval",
        &f,
        &"--inputs",
        &inputs,
        &"--params",
        &ckpt_path,
        &"--arrow",
        &"f",
    ]);
    let found = ok(&[&"eval", &f, &"--inputs", &inputs, &"--params", &ckpt_path]);
    assert_eq!(by_name, found);
    assert_eq!(
        fails(&[
            &"eval",
            &f,
            &"--inputs",
            &inputs,
            &"--params",
            &ckpt_path,
            &"--arrow",
            &"h"
        ]),
        format!(
            "{}: `h.W2` has type f32[4, 16], but parameter `W2` is f32[3, 16]",
            ckpt_path.display()
        )
    );
    assert_eq!(
        fails(&[
            &"eval",
            &f,
            &"--inputs",
            &inputs,
            &"--params",
            &ckpt_path,
            &"--arrow",
            &"ff"
        ]),
        format!(
            "{}: the checkpoint has no arrow `ff` (did you mean `f`?) (it has f, g, h)",
            ckpt_path.display()
        )
    );
    // g (S -> D) has other shapes: no arrow but g itself fits it.
    let g_inputs = scratch(
        &dir,
        "g-in.json",
        &json!({"x": {"dtype": "f32", "shape": [32, 3], "data": vec![0.25; 96]}}).to_string(),
    );
    let g = examples().join("triangle/g.json");
    let v = ok(&[&"eval", &g, &"--inputs", &g_inputs, &"--params", &ckpt_path]);
    assert_eq!(v["outputs"][0]["shape"], json!([32, 4]));

    // An input given in both places is an error.
    let w1 = ckpt.get("param/f.W1").unwrap();
    let both = scratch(
        &dir,
        "both.json",
        &json!({"x": {"dtype": "f32", "shape": [32, 8], "data": x}, "W1": w1}).to_string(),
    );
    assert_eq!(
        fails(&[&"eval", &f, &"--inputs", &both, &"--params", &ckpt_path]),
        format!(
            "input `W1` is given both in {} and in {}; give each input once",
            both.display(),
            ckpt_path.display()
        )
    );
}

#[test]
fn a_plain_store_supplies_parameters_by_name() {
    let dir = std::env::temp_dir().join(format!("catml-cli-store-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let module = root.join("modules/tied_residual.json");
    let all: serde_json::Map<String, Value> = serde_json::from_str(
        &std::fs::read_to_string(root.join("modules/tied_residual.inputs.json")).unwrap(),
    )
    .unwrap();
    let tensor = |n: &str| -> Tensor { serde_json::from_value(all[n].clone()).unwrap() };
    let mut store = Params::new();
    store.insert("W", tensor("W"));
    store.insert("b", tensor("b"));
    let store_path = dir.join("wb.safetensors");
    store.save(&store_path).unwrap();
    let x_only = scratch(&dir, "x.json", &json!({"X": all["X"]}).to_string());
    let full = root.join("modules/tied_residual.inputs.json");
    assert_eq!(
        ok(&[
            &"eval",
            &module,
            &"--inputs",
            &x_only,
            &"--params",
            &store_path
        ]),
        ok(&[&"eval", &module, &"--inputs", &full])
    );
    // A name the module does not have is refused, with the nearest parameter.
    let mut typo = Params::new();
    typo.insert("bb", tensor("b"));
    let typo_path = dir.join("typo.safetensors");
    typo.save(&typo_path).unwrap();
    assert_eq!(
        fails(&[
            &"eval",
            &module,
            &"--inputs",
            &x_only,
            &"--params",
            &typo_path
        ]),
        format!(
            "{}: `bb` is not a parameter of the module (did you mean `b`?)",
            typo_path.display()
        )
    );
    assert_eq!(
        fails(&[
            &"eval",
            &module,
            &"--inputs",
            &x_only,
            &"--params",
            &store_path,
            &"--arrow",
            &"f"
        ]),
        format!(
            "{}: not a training checkpoint, so it has no arrows to choose from",
            store_path.display()
        )
    );
}
