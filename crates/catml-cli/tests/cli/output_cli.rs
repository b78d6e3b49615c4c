//! What eval, grad and jvp print: one tensor per line by default (golden files, compared with
//! the numbers' last digits left to the platform), `--pretty` for one number per line, no
//! gradient printed twice, and non-finite numbers as the strings "nan", "inf" and "-inf".
//!
//! `UPDATE_EXPECT=1 cargo test -p catml-cli --test cli output_cli` rewrites the golden files.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn module() -> PathBuf {
    root().join("modules/tied_residual.json")
}

fn inputs() -> PathBuf {
    root().join("modules/tied_residual.inputs.json")
}

fn scratch(name: &str, text: &str) -> PathBuf {
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("output-{name}"));
    std::fs::write(&path, text).unwrap();
    path
}

fn run(args: &[&dyn AsRef<std::ffi::OsStr>]) -> (i32, String, String) {
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

fn ok(args: &[&dyn AsRef<std::ffi::OsStr>]) -> String {
    let (code, stdout, stderr) = run(args);
    assert_eq!((code, stderr.as_str()), (0, ""));
    stdout
}

fn fails(args: &[&dyn AsRef<std::ffi::OsStr>]) -> String {
    let (code, stdout, stderr) = run(args);
    assert_eq!((code, stdout.as_str()), (1, ""), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    stderr
        .trim_end()
        .strip_prefix("catml: ")
        .unwrap()
        .to_string()
}

/// The text with every number outside a string replaced by `#`: the layout a golden file pins.
fn skeleton(text: &str) -> String {
    let mut out = String::new();
    let (mut in_string, mut escaped, mut in_number) = (false, false, false);
    for c in text.chars() {
        if in_string {
            out.push(c);
            in_string = escaped || c != '"';
            escaped = !escaped && c == '\\';
            continue;
        }
        if c.is_ascii_digit() || (in_number && "+-.eE".contains(c)) || (c == '-' && !in_number) {
            if !in_number {
                out.push('#');
            }
            in_number = true;
            continue;
        }
        in_number = false;
        in_string = c == '"';
        out.push(c);
    }
    out
}

/// Every number in `a` within 1e-12 (relative) of the one at the same place in `b`.
fn close(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
            (x - y).abs() <= 1e-12 * x.abs().max(y.abs()).max(1.0)
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| close(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| close(v, w)))
        }
        _ => a == b,
    }
}

fn check_golden(name: &str, actual: &str) {
    let path = root().join("crates/catml-cli/tests/golden").join(name);
    if std::env::var_os("UPDATE_EXPECT").is_some() {
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap();
    assert_eq!(skeleton(actual), skeleton(&expected), "{name}: layout");
    let (a, e): (Value, Value) = (
        serde_json::from_str(actual).unwrap(),
        serde_json::from_str(&expected).unwrap(),
    );
    assert!(close(&a, &e), "{name}: values\n{actual}");
}

#[test]
fn eval_and_grad_print_one_tensor_per_line() {
    let eval = ok(&[&"eval", &module(), &"--inputs", &inputs()]);
    check_golden("tied_residual.eval.json", &eval);
    let grad = ok(&[&"grad", &module(), &"--inputs", &inputs()]);
    check_golden("tied_residual.grad.json", &grad);
    // Each tensor is one line: the gradient of W (nine numbers) is on a single line.
    let w_line = grad
        .lines()
        .find(|l| l.trim_start().starts_with("\"W\": {"))
        .unwrap();
    // Eight commas between nine numbers, two between the fields, one in the shape, one after.
    assert_eq!(w_line.matches(',').count(), 8 + 2 + 1 + 1, "{w_line}");
    assert!(grad.lines().count() < 40, "{grad}");
}

#[test]
fn pretty_is_the_same_json_one_value_per_line() {
    for command in ["eval", "grad"] {
        let compact = ok(&[&command, &module(), &"--inputs", &inputs()]);
        let pretty = ok(&[&command, &module(), &"--inputs", &inputs(), &"--pretty"]);
        assert!(pretty.lines().count() > compact.lines().count());
        let (a, b): (Value, Value) = (
            serde_json::from_str(&compact).unwrap(),
            serde_json::from_str(&pretty).unwrap(),
        );
        assert_eq!(a, b);
    }
}

/// gradients_by_tag summarises each tag (its parameters, their size and the gradient's norm)
/// instead of repeating the gradients.
#[test]
fn gradients_by_tag_summarises_without_repeating() {
    let v: Value =
        serde_json::from_str(&ok(&[&"grad", &module(), &"--inputs", &inputs()])).unwrap();
    let tag = &v["gradients_by_tag"]["untagged"];
    assert_eq!(tag["parameters"], serde_json::json!(["W", "b"]));
    assert_eq!(tag["elements"], 12);
    let sq: f64 = ["W", "b"]
        .iter()
        .flat_map(|n| v["gradients"][n]["data"].as_array().unwrap().clone())
        .map(|x| x.as_f64().unwrap().powi(2))
        .sum();
    assert!((tag["gradient_norm"].as_f64().unwrap() - sq.sqrt()).abs() < 1e-12);
    assert!(tag.get("W").is_none());
}

#[test]
fn non_finite_numbers_are_strings_in_and_out() {
    // A module whose output is its input passes the values through unchanged.
    let id = scratch(
        "id-module.json",
        r#"{"inputs": [{"name": "x", "shape": [3]}], "nodes": [], "outputs": ["x"]}"#,
    );
    let x = scratch(
        "inf-inputs.json",
        r#"{"x": {"shape": [3], "data": ["inf", -2.5, "-inf"]}}"#,
    );
    assert_eq!(
        ok(&[&"eval", &id, &"--inputs", &x]),
        "{\n  \"outputs\": [\n    {\"data\":[\"inf\",-2.5,\"-inf\"],\"dtype\":\"f64\",\"name\":\"x\",\"shape\":[3]}\n  ]\n}\n"
    );
    // A node that reads them reports its non-finite result by name.
    let m = scratch(
        "neg-module.json",
        r#"{"inputs": [{"name": "x", "shape": [3]}],
            "nodes": [{"name": "y", "op": "neg", "operands": ["x"]}], "outputs": ["y"]}"#,
    );
    assert_eq!(
        fails(&[&"eval", &m, &"--inputs", &x]),
        format!(
            "{}: node 0 `y` (neg) produced 2 non-finite values (first at element 0)",
            m.display()
        )
    );
    let nan = scratch(
        "nan-inputs.json",
        r#"{"x": {"shape": [3], "data": [1, NaN, 2]}}"#,
    );
    assert_eq!(
        fails(&[&"eval", &m, &"--inputs", &nan]),
        format!(
            "{}: x.data[1]: line 1 column 34: JSON has no NaN or infinity; write non-finite numbers \
             as the strings \"nan\", \"inf\" and \"-inf\"",
            nan.display()
        )
    );
    let bad = scratch(
        "bad-string.json",
        r#"{"x": {"shape": [3], "data": [1, "NaN", 2]}}"#,
    );
    assert_eq!(
        fails(&[&"eval", &m, &"--inputs", &bad]),
        format!(
            "{}: x: data[1]: \"NaN\" is not a number (the only strings are \"nan\", \"inf\" and \
             \"-inf\") at line 1 column 44",
            bad.display()
        )
    );
}

#[test]
fn a_misspelt_tensor_field_suggests_the_right_one() {
    let typo = scratch(
        "typo.json",
        r#"{"X": {"shpe": [2, 3], "data": [1, 2, 3, 4, 5, 6]}}"#,
    );
    assert_eq!(
        fails(&[&"eval", &module(), &"--inputs", &typo]),
        format!(
            "{}: X.shpe: unknown field `shpe`, expected one of `dtype`, `shape`, `data` at line \
             1 column 13 (did you mean `shape`?)",
            typo.display()
        )
    );
}

#[test]
fn an_empty_inputs_file_says_so() {
    let empty = scratch("empty.json", "\n");
    assert_eq!(
        fails(&[&"eval", &module(), &"--inputs", &empty]),
        format!(
            "{}: the file is empty; expected a JSON object mapping input names to tensors",
            empty.display()
        )
    );
}
