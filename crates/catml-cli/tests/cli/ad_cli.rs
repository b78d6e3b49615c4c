//! The `catml` binary's derivative commands on the tied residual block (docs/examples.md): `grad`
//! against the closed forms X̄ = G + Ā Wᵀ, W̄ = Hᵀ G + Xᵀ Ā, b̄ = Σ_r G + Σ_r Ā
//! (H̄ = G Wᵀ, Ā = H̄ ⊙ (1 - H ⊙ H)); `jvp` against `grad --cotangents` by the adjoint identity;
//! and the printed VJP program (listing and JSON) read back and evaluated.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use catml::interp::eval;
use catml::ir::{json, listing};
use catml::prim::builtins;
use catml::tensor::Tensor;
use serde_json::Value;

fn modules() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../modules")
}

fn module() -> PathBuf {
    modules().join("tied_residual.json")
}

fn inputs_file() -> PathBuf {
    modules().join("tied_residual.inputs.json")
}

/// Runs `catml ARGS`, requiring success, and returns its stdout.
fn catml(args: &[&std::ffi::OsStr]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_catml"))
        .args(args)
        .output()
        .expect("the catml binary runs");
    assert!(
        out.status.success(),
        "catml {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 output")
}

fn catml_json(args: &[&std::ffi::OsStr]) -> Value {
    serde_json::from_str(&catml(args)).expect("JSON output")
}

/// A tensor from the CLI's JSON, where outputs and tangents also carry their `name`.
fn tensor(v: &Value) -> Tensor {
    let mut v = v.clone();
    if let Some(o) = v.as_object_mut() {
        o.remove("name");
    }
    serde_json::from_value(v).expect("a tensor")
}

/// A scratch file unique to this test process (the test removes it when done).
fn scratch(name: &str, contents: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("catml-ad-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, contents).unwrap();
    path
}

fn inputs() -> BTreeMap<String, Tensor> {
    serde_json::from_str(&std::fs::read_to_string(inputs_file()).unwrap()).unwrap()
}

/// Row-major matrix product of (m, k) and (k, n).
fn mm(a: &[f64], b: &[f64], m: usize, k: usize, n: usize) -> Vec<f64> {
    let mut c = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            c[i * n + j] = (0..k).map(|t| a[i * k + t] * b[t * n + j]).sum();
        }
    }
    c
}

fn tr(a: &[f64], m: usize, n: usize) -> Vec<f64> {
    (0..n * m).map(|idx| a[(idx % m) * n + idx / m]).collect()
}

fn add(a: &[f64], b: &[f64]) -> Vec<f64> {
    a.iter().zip(b).map(|(x, y)| x + y).collect()
}

fn col_sums(a: &[f64], rows: usize, cols: usize) -> Vec<f64> {
    (0..cols)
        .map(|j| (0..rows).map(|i| a[i * cols + j]).sum())
        .collect()
}

/// (X̄, W̄, b̄) by the closed forms for seed G at (B, d) = (2, 3).
fn closed_form(g: &[f64]) -> [Vec<f64>; 3] {
    let (rows, d) = (2, 3);
    let named = inputs();
    let (x, w, b) = (
        named["X"].to_f64_vec(),
        named["W"].to_f64_vec(),
        named["b"].to_f64_vec(),
    );
    let bb: Vec<f64> = b.repeat(rows);
    let h: Vec<f64> = add(&mm(&x, &w, rows, d, d), &bb)
        .iter()
        .map(|a| a.tanh())
        .collect();
    let wt = tr(&w, d, d);
    let h_bar = mm(g, &wt, rows, d, d);
    let a_bar: Vec<f64> = h_bar
        .iter()
        .zip(&h)
        .map(|(hb, h)| hb * (1.0 - h * h))
        .collect();
    let x_bar = add(g, &mm(&a_bar, &wt, rows, d, d));
    let w_bar = add(
        &mm(&tr(&h, rows, d), g, d, rows, d),
        &mm(&tr(&x, rows, d), &a_bar, d, rows, d),
    );
    let b_bar = add(&col_sums(g, rows, d), &col_sums(&a_bar, rows, d));
    [x_bar, w_bar, b_bar]
}

fn max_abs(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f64::max)
}

fn assert_gradients(gradients: &Value, g: &[f64]) {
    for (name, want) in ["X", "W", "b"].iter().zip(closed_form(g)) {
        let got = tensor(&gradients[name]).to_f64_vec();
        let err = max_abs(&got, &want);
        assert!(err <= 1e-14, "gradient of {name}: error {err}");
    }
}

#[test]
fn grad_matches_the_closed_forms() {
    let out = catml_json(&[
        "grad".as_ref(),
        module().as_os_str(),
        "--inputs".as_ref(),
        inputs_file().as_os_str(),
    ]);
    // Default seeds are all ones (L = sum of Y).
    assert_gradients(&out["gradients"], &[1.0; 6]);
    // W and b are parameters; untagged, they group under "untagged", named, not repeated.
    let by_tag = &out["gradients_by_tag"]["untagged"];
    assert_eq!(by_tag["parameters"], serde_json::json!(["W", "b"]));
    assert_eq!(by_tag["elements"], 12);
    assert_eq!(out["conventions"], Value::Array(vec![]));
}

#[test]
fn grad_with_cotangents_matches_the_closed_forms_and_jvp_by_adjointness() {
    let g = [0.3, -1.2, 0.7, 2.0, -0.4, 0.9];
    let cot = scratch(
        "cotangents.json",
        &format!(r#"[{{"dtype": "f64", "shape": [2, 3], "data": {g:?}}}]"#),
    );
    let out = catml_json(&[
        "grad".as_ref(),
        module().as_os_str(),
        "--inputs".as_ref(),
        inputs_file().as_os_str(),
        "--cotangents".as_ref(),
        cot.as_os_str(),
    ]);
    assert_gradients(&out["gradients"], &g);

    // <G, J v> from `catml jvp` equals <Jᵀ G, v> from `catml grad`.
    let v = [
        ("X", vec![2, 3], vec![0.1, 0.2, -0.3, 0.4, -0.5, 0.6]),
        (
            "W",
            vec![3, 3],
            vec![1.0, -0.5, 0.25, 0.0, 0.75, -1.0, 0.5, 0.3, -0.2],
        ),
        ("b", vec![3], vec![-0.7, 0.1, 0.9]),
    ];
    let tangents: serde_json::Map<String, Value> = v
        .iter()
        .map(|(n, s, d)| {
            (
                format!("tangent.{n}"),
                serde_json::json!({"dtype": "f64", "shape": s, "data": d}),
            )
        })
        .collect();
    let tan = scratch("tangents.json", &Value::Object(tangents).to_string());
    let jvp = catml_json(&[
        "jvp".as_ref(),
        module().as_os_str(),
        "--inputs".as_ref(),
        inputs_file().as_os_str(),
        "--tangents".as_ref(),
        tan.as_os_str(),
    ]);
    for f in [&cot, &tan] {
        std::fs::remove_file(f).unwrap();
    }
    std::fs::remove_dir(cot.parent().unwrap()).unwrap();
    assert_eq!(jvp["outputs"], out["outputs"]);
    assert_eq!(jvp["tangents"][0]["name"], "tangent.Y");
    let jv = tensor(&jvp["tangents"][0]).to_f64_vec();
    let lhs: f64 = g.iter().zip(&jv).map(|(a, b)| a * b).sum();
    let rhs: f64 = v
        .iter()
        .map(|(n, _, d)| {
            let gr = tensor(&out["gradients"][n]).to_f64_vec();
            gr.iter().zip(d).map(|(a, b)| a * b).sum::<f64>()
        })
        .sum();
    assert!(
        (lhs - rhs).abs() <= 1e-13 * lhs.abs().max(1.0),
        "{lhs} vs {rhs}"
    );
}

#[test]
fn printed_vjp_programs_read_back_and_evaluate_to_the_same_gradients() {
    let listing_text = catml(&["print".as_ref(), "--grad".as_ref(), module().as_os_str()]);
    let json_text = catml(&[
        "print".as_ref(),
        "--grad".as_ref(),
        "--json".as_ref(),
        module().as_os_str(),
    ]);
    let from_listing = listing::parse(&listing_text, builtins()).expect("listing parses");
    let from_json = json::from_str(&json_text, builtins()).expect("JSON parses");
    assert_eq!(from_listing, from_json);

    // Inputs X, W, b, then the seed of Y; outputs Y, X̄, W̄, b̄.
    let named = inputs();
    let g = [1.5, -0.5, 0.25, 0.0, 2.0, -1.0];
    let mut args: Vec<Tensor> = ["X", "W", "b"].iter().map(|n| named[*n].clone()).collect();
    args.push(Tensor::f64([2, 3], g.to_vec()).unwrap());
    let names: Vec<&str> = from_json.inputs().iter().map(|i| i.name.as_str()).collect();
    assert_eq!(names, ["X", "W", "b", "seed.0"]);
    // Outputs are named after what they are.
    assert_eq!(
        from_json.output_names(),
        ["Y", "grad.X", "grad.W", "grad.b"]
    );
    assert!(
        listing_text.contains("outputs: Y, grad.X, grad.W, grad.b"),
        "{listing_text}"
    );
    let out = eval(&from_json, &args).unwrap();
    assert_eq!(out.len(), 4);
    for (got, want) in out[1..].iter().zip(closed_form(&g)) {
        assert!(max_abs(&got.to_f64_vec(), &want) <= 1e-14);
    }
    assert_eq!(eval(&from_listing, &args).unwrap(), out);
}
