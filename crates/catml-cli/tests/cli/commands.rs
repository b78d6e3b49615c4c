//! The `catml` binary: results on stdout as JSON or a listing; every failure is exactly one
//! line on stderr, nothing on stdout, exit code 1.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use catml::interp;
use catml::ir::{json, listing, Program};
use catml::tensor::Tensor;
use serde_json::{json, Value};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn module() -> PathBuf {
    root().join("modules/tied_residual.json")
}

fn inputs() -> PathBuf {
    root().join("modules/tied_residual.inputs.json")
}

fn rejection(name: &str) -> PathBuf {
    root().join("crates/catml/tests/modules").join(name)
}

/// A file under the target's scratch directory holding `text`.
fn scratch(name: &str, text: &str) -> PathBuf {
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("cli-{name}"));
    std::fs::write(&path, text).unwrap();
    path
}

fn catml(args: &[&dyn AsRef<std::ffi::OsStr>]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_catml"));
    c.args(args.iter().map(|a| a.as_ref()));
    c
}

/// Runs and expects success; returns stdout.
fn ok(args: &[&dyn AsRef<std::ffi::OsStr>]) -> String {
    let out = catml(args).output().unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(out.status.success(), "failed: {stderr}");
    assert_eq!(stderr, "", "stderr on success");
    String::from_utf8(out.stdout).unwrap()
}

fn ok_json(args: &[&dyn AsRef<std::ffi::OsStr>]) -> Value {
    serde_json::from_str(&ok(args)).unwrap()
}

/// Runs and expects failure: exit code 1, nothing on stdout, the error on the first line of
/// stderr and at most two indented hint lines after it. Returns the error without the
/// `catml: ` prefix, and the hints.
fn fails_with_hints(args: &[&dyn AsRef<std::ffi::OsStr>]) -> (String, Vec<String>) {
    let out = catml(args).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "exit code");
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "",
        "stdout on failure"
    );
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.ends_with('\n'));
    let mut lines = stderr.lines();
    let first = lines
        .next()
        .and_then(|l| l.strip_prefix("catml: "))
        .unwrap_or_else(|| panic!("no `catml: ` prefix: {stderr:?}"))
        .to_string();
    let hints: Vec<String> = lines
        .map(|l| {
            l.strip_prefix("  ")
                .unwrap_or_else(|| panic!("hint not indented: {stderr:?}"))
                .to_string()
        })
        .collect();
    assert!(hints.len() <= 2, "at most two hint lines: {stderr:?}");
    (first, hints)
}

/// Runs and expects failure in exactly one line; returns it without the `catml: ` prefix.
fn fails(args: &[&dyn AsRef<std::ffi::OsStr>]) -> String {
    let (line, hints) = fails_with_hints(args);
    assert_eq!(hints, Vec::<String>::new(), "one line on stderr: {line}");
    line
}

fn library_module() -> Program {
    json::from_str(
        &std::fs::read_to_string(module()).unwrap(),
        catml::prim::builtins(),
    )
    .unwrap()
}

fn library_eval() -> Vec<Tensor> {
    let p = library_module();
    let named = serde_json::from_str(&std::fs::read_to_string(inputs()).unwrap()).unwrap();
    interp::eval_named(&p, &named).unwrap()
}

#[test]
fn check_summarises_the_module() {
    let v = ok_json(&[&"check", &module()]);
    assert_eq!(v["valid"], true);
    assert_eq!(v["nodes"], 7);
    assert_eq!(v["parameters"], json!(["W", "b"]));
    assert_eq!(
        v["inputs"][0],
        json!({"name": "X", "dtype": "f64", "shape": [2, 3], "kind": "data"})
    );
    assert_eq!(v["inputs"][1]["kind"], "parameter");
    assert_eq!(
        v["outputs"],
        json!([{"name": "Y", "dtype": "f64", "shape": [2, 3]}])
    );
}

#[test]
fn print_writes_the_listing_and_the_json() {
    let p = library_module();
    assert_eq!(ok(&[&"print", &module()]), listing::print(&p));
    assert_eq!(ok(&[&"print", &"--json", &module()]), json::to_string(&p));
    let grad = ok(&[&"print", &"--grad", &module()]);
    let vjp = listing::parse(&grad, catml::prim::builtins()).unwrap();
    assert_eq!(vjp.n_inputs(), 4, "X, W, b and the seed of Y");
}

#[test]
fn shape_gives_the_output_type() {
    let v = ok_json(&[&"shape", &module()]);
    assert_eq!(
        v,
        json!({"outputs": [{"name": "Y", "dtype": "f64", "shape": [2, 3]}]})
    );
}

#[test]
fn params_counts_12() {
    let v = ok_json(&[&"params", &module()]);
    assert_eq!(v["total"], 12);
    assert_eq!(v["by_tag"], json!({"untagged": 12}));
    assert_eq!(
        v["params"],
        json!([
            {"name": "W", "elements": 9, "tag": null},
            {"name": "b", "elements": 3, "tag": null}
        ])
    );
}

#[test]
fn cost_matches_the_library() {
    let v = ok_json(&[&"cost", &module()]);
    let c = interp::cost(&library_module());
    assert_eq!(v["flops"], c.flops);
    assert_eq!(v["peak_live_bytes"], c.peak_live_bytes);
    // Two 2x3 by 3x3 products (36 each), three adds and a tanh of 6 elements each.
    assert_eq!(c.flops, 2 * 36 + 4 * 6);
}

/// A chain of `n` tanh nodes over an f64[64] input, summed, as a listing file.
fn tanh_chain_module(n: usize) -> PathBuf {
    use catml::ir::{Builder, InputKind};
    use catml::prim::Ops;
    use catml::tensor::{DType, TensorType};
    let mut b = Builder::new();
    let mut h = b
        .input("x", TensorType::new(DType::F64, [64]), InputKind::Data)
        .unwrap();
    for _ in 0..n {
        h = b.tanh(h).unwrap();
    }
    let l = b.sum(h, None).unwrap();
    let p = b.finish(&[l]).unwrap();
    scratch(&format!("tanh-chain-{n}.catml"), &listing::print(&p))
}

#[test]
fn cost_with_a_checkpoint_policy_reports_the_peak_with_and_without_it() {
    let m = tanh_chain_module(16);
    let p = listing::parse(
        &std::fs::read_to_string(&m).unwrap(),
        catml::prim::builtins(),
    )
    .unwrap();
    let policy = catml::ad::CheckpointPolicy::SqrtSegments;
    let plain = interp::cost(&catml::ad::vjp(&p).unwrap().program);
    let kept = catml::ad::vjp_with(&p, &policy).unwrap();
    let v = ok_json(&[&"cost", &m, &"--grad", &"--checkpoint", &"sqrt"]);
    assert_eq!(
        v["peak_live_bytes"],
        interp::cost(&kept.program).peak_live_bytes
    );
    assert_eq!(v["residual_bytes"], kept.residual_bytes());
    assert_eq!(v["checkpoint"]["policy"], "sqrt");
    assert_eq!(
        v["checkpoint"]["peak_live_bytes_without"],
        plain.peak_live_bytes
    );
    assert_eq!(v["checkpoint"]["flops_without"], plain.flops);
    assert!(v["peak_live_bytes"].as_u64().unwrap() < plain.peak_live_bytes);
    // Without --checkpoint, --grad reports the plain VJP program.
    let v = ok_json(&[&"cost", &m, &"--grad"]);
    assert_eq!(v["peak_live_bytes"], plain.peak_live_bytes);
}

#[test]
fn cost_rejects_a_checkpoint_policy_it_does_not_know_or_without_grad() {
    let m = tanh_chain_module(2);
    let e = fails(&[&"cost", &m, &"--grad", &"--checkpoint", &"everything"]);
    assert!(
        e.starts_with("--checkpoint: unknown checkpoint policy `everything`"),
        "{e}"
    );
    let (e, _) = fails_with_hints(&[&"cost", &m, &"--checkpoint", &"sqrt"]);
    assert!(e.contains("--grad"), "{e}");
}

#[test]
fn eval_matches_the_library() {
    let v = ok_json(&[&"eval", &module(), &"--inputs", &inputs()]);
    let outputs = v["outputs"].as_array().unwrap();
    assert_eq!(outputs.len(), 1);
    assert_eq!(outputs[0]["name"], "Y");
    assert_eq!(outputs[0]["shape"], json!([2, 3]));
    let mut named = outputs[0].clone();
    named.as_object_mut().unwrap().remove("name");
    let y: Tensor = serde_json::from_value(named).unwrap();
    assert_eq!(vec![y], library_eval());
}

#[test]
fn eval_reads_a_listing_too() {
    let path = scratch("tied.listing", &listing::print(&library_module()));
    let from_listing = ok(&[&"eval", &path, &"--inputs", &inputs()]);
    assert_eq!(
        from_listing,
        ok(&[&"eval", &module(), &"--inputs", &inputs()])
    );
}

#[test]
fn grad_outputs_and_gradient_names() {
    let v = ok_json(&[&"grad", &module(), &"--inputs", &inputs()]);
    let eval = ok_json(&[&"eval", &module(), &"--inputs", &inputs()]);
    assert_eq!(v["outputs"], eval["outputs"]);
    let mut names: Vec<&String> = v["gradients"].as_object().unwrap().keys().collect();
    names.sort();
    assert_eq!(names, ["W", "X", "b"]);
    assert_eq!(v["gradients"]["b"]["shape"], json!([3]));
}

#[test]
fn unreadable_module_fails_in_one_line() {
    let missing = root().join("modules/no_such_module.json");
    assert_eq!(
        fails(&[&"check", &missing]),
        format!(
            "cannot read {}: No such file or directory (os error 2)",
            missing.display()
        )
    );
}

/// The extension picks the reader: `.catml` is a listing, `.json` LensIR JSON; other files are
/// recognised by their text.
#[test]
fn the_extension_picks_the_module_reader() {
    let text = listing::print(&library_module());
    let expected = ok(&[&"check", &module()]);
    for name in ["tied.catml", "tied.txt"] {
        assert_eq!(ok(&[&"check", &scratch(name, &text)]), expected, "{name}");
    }
    let misnamed = scratch("tied-listing.json", &text);
    assert_eq!(
        fails(&[&"check", &misnamed]),
        format!(
            "{}: module: expected value at line 1 column 1",
            misnamed.display()
        )
    );
    let empty = scratch("empty.catml", "  \n");
    assert_eq!(
        fails(&[&"check", &empty]),
        format!("{}: the file is empty", empty.display())
    );
}

#[test]
fn invalid_modules_fail_with_their_golden_message() {
    let mut cases: Vec<(PathBuf, String)> = [
        "several_errors",
        "malformed_json",
        "misspelt_primitive",
        "misspelt_field",
    ]
    .iter()
    .map(|name| {
        let expected = std::fs::read_to_string(rejection(&format!("{name}.expected"))).unwrap();
        (
            rejection(&format!("{name}.json")),
            expected.trim_end().to_string(),
        )
    })
    .collect();
    // File tests are listings; their `; error:` lines are the errors, the first one printed.
    for name in ["add_shape_mismatch", "unknown_primitive"] {
        let path = file_test(&format!("types/{name}.catml"));
        cases.push((path.clone(), first_error_of(&path)));
    }
    let suggests = file_test("listing/unknown_primitive_suggests.catml");
    cases.push((suggests.clone(), first_error_of(&suggests)));
    for (path, expected) in cases {
        for command in ["check", "print", "shape", "params", "cost"] {
            assert_eq!(
                fails(&[&command, &path]),
                format!("{}: {expected}", path.display()),
                "{command} {}",
                path.display()
            );
        }
    }
}

fn file_test(name: &str) -> PathBuf {
    root().join("crates/catml/tests/files").join(name)
}

/// The error `catml` prints for a file test: its first `; error:` line (and how many more).
fn first_error_of(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    let errors: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("; error: "))
        .collect();
    match errors.len() {
        0 => panic!("{}: no `; error:` line", path.display()),
        1 => errors[0].to_string(),
        n => format!("{} (and {} more)", errors[0], n - 1),
    }
}

#[test]
fn malformed_inputs_name_the_json_path() {
    let bad = scratch(
        "bad-inputs.json",
        r#"{"X": {"shape": [2, 3], "data": [1, 2, 3, 4, 5, "six"]}}"#,
    );
    assert_eq!(
        fails(&[&"eval", &module(), &"--inputs", &bad]),
        format!(
            "{}: X: data[5]: \"six\" is not a number (the only strings are \"nan\", \"inf\" and \
             \"-inf\") at line 1 column 56",
            bad.display()
        )
    );
    let short = scratch(
        "short-inputs.json",
        r#"{"X": {"shape": [2, 3], "data": [1]}}"#,
    );
    assert_eq!(
        fails(&[&"eval", &module(), &"--inputs", &short]),
        format!(
            "{}: X: data has 1 elements but shape [2, 3] needs 6 at line 1 column 37",
            short.display()
        )
    );
}

fn tensor_json(shape: &[usize]) -> Value {
    let n: usize = shape.iter().product();
    json!({"shape": shape, "data": vec![0.5; n]})
}

#[test]
fn missing_input_fails_naming_it() {
    let path = scratch(
        "missing-input.json",
        &json!({"X": tensor_json(&[2, 3]), "W": tensor_json(&[3, 3])}).to_string(),
    );
    assert_eq!(
        fails(&[&"eval", &module(), &"--inputs", &path]),
        format!("{}: missing input `b` (f64[3])", path.display())
    );
}

#[test]
fn wrong_shaped_input_fails_naming_it() {
    let path = scratch(
        "wrong-input.json",
        &json!({"X": tensor_json(&[3, 2]), "W": tensor_json(&[3, 3]), "b": tensor_json(&[3])})
            .to_string(),
    );
    assert_eq!(
        fails(&[&"eval", &module(), &"--inputs", &path]),
        format!(
            "{}: input `X` has type f64[3, 2], expected f64[2, 3]",
            path.display()
        )
    );
    let message = format!(
        "{}: input `X` has type f64[3, 2], expected f64[2, 3]",
        path.display()
    );
    assert_eq!(fails(&[&"grad", &module(), &"--inputs", &path]), message);
    let tangents = scratch("no-tangents.json", "{}");
    assert_eq!(
        fails(&[
            &"jvp",
            &module(),
            &"--inputs",
            &path,
            &"--tangents",
            &tangents
        ]),
        message
    );
}

#[test]
fn extra_input_fails_naming_it() {
    let path = scratch(
        "extra-input.json",
        &json!({"X": tensor_json(&[2, 3]), "W": tensor_json(&[3, 3]), "b": tensor_json(&[3]),
                "c": tensor_json(&[1])})
        .to_string(),
    );
    assert_eq!(
        fails(&[&"eval", &module(), &"--inputs", &path]),
        format!(
            "{}: unknown input `c`: the program has no such input",
            path.display()
        )
    );
    let typo = scratch(
        "typo-input.json",
        &json!({"X": tensor_json(&[2, 3]), "W": tensor_json(&[3, 3]), "bb": tensor_json(&[3])})
            .to_string(),
    );
    assert_eq!(
        fails(&[&"eval", &module(), &"--inputs", &typo]),
        format!(
            "{}: unknown input `bb`: the program has no such input (did you mean `b`?)",
            typo.display()
        )
    );
}

#[test]
fn a_domain_error_names_the_module_and_the_node() {
    let m = scratch(
        "log-module.json",
        r#"{"inputs": [{"name": "x", "shape": [2]}],
            "nodes": [{"name": "l", "op": "log", "operands": ["x"]}], "outputs": ["l"]}"#,
    );
    let x = scratch(
        "log-inputs.json",
        r#"{"x": {"shape": [2], "data": [1, 0]}}"#,
    );
    assert_eq!(
        fails(&[&"eval", &m, &"--inputs", &x]),
        format!(
            "{}: node 0 `l` (log): outside the admissible domain: log of 0 at element 1, expected a positive value",
            m.display()
        )
    );
}

#[test]
fn usage_errors_fail_in_one_line_with_clap_hints() {
    let (missing, hints) = fails_with_hints(&[]);
    assert!(
        missing.starts_with(
            "missing subcommand, expected one of: check, print, shape, params, cost, eval, grad"
        ),
        "{missing}"
    );
    assert_eq!(hints, ["usage: catml <COMMAND>; see `catml --help`"]);
    assert_eq!(
        fails_with_hints(&[&"frobnicate"]),
        (
            "unrecognized subcommand 'frobnicate'".to_string(),
            vec!["usage: catml [OPTIONS] <COMMAND>".to_string()]
        )
    );
    // clap's "did you mean" survives, as the first hint.
    assert_eq!(
        fails_with_hints(&[&"chek", &module()]),
        (
            "unrecognized subcommand 'chek'".to_string(),
            vec![
                "tip: a similar subcommand exists: 'check'".to_string(),
                "usage: catml [OPTIONS] <COMMAND>".to_string()
            ]
        )
    );
    assert_eq!(
        fails_with_hints(&[&"eval", &module(), &"--input", &inputs()]),
        (
            "unexpected argument '--input' found".to_string(),
            vec![
                "tip: a similar argument exists: '--inputs'".to_string(),
                "usage: catml eval --inputs <IN.json> <MODULE>".to_string()
            ]
        )
    );
    assert_eq!(
        fails_with_hints(&[&"check", &"--frobnicate", &module()]).0,
        "unexpected argument '--frobnicate' found"
    );
    assert_eq!(
        fails_with_hints(&[&"check"]),
        (
            "the following required arguments were not provided: <MODULE>".to_string(),
            vec!["usage: catml check <MODULE>".to_string()]
        )
    );
    assert_eq!(
        fails_with_hints(&[&"eval", &module()]).0,
        "the following required arguments were not provided: --inputs <IN.json>"
    );
    assert_eq!(
        fails_with_hints(&[&"print", &"--grad", &"--jvp", &module()]).0,
        "the argument '--grad' cannot be used with '--jvp'"
    );
}

/// Every argument of every command says what it is.
#[test]
fn every_argument_has_help() {
    for command in [
        "check", "print", "shape", "params", "cost", "eval", "grad", "dot", "jvp", "train",
        "verify",
    ] {
        let help = ok(&[&command, &"--help"]);
        let arguments: Vec<&str> = help
            .lines()
            .skip_while(|l| !l.starts_with("Arguments:") && !l.starts_with("Options:"))
            .map(str::trim)
            .filter(|l| l.starts_with('<') || l.starts_with('-'))
            .collect();
        assert!(arguments.len() >= 2, "{command}: {help}");
        for line in arguments {
            // `<MODULE>  The module: ...` or `--inputs <IN.json>  JSON object ...`
            let parts: Vec<&str> = line.split("  ").filter(|w| !w.trim().is_empty()).collect();
            assert!(parts.len() >= 2, "{command}: no help for `{line}`");
        }
    }
    let eval = ok(&[&"eval", &"--help"]);
    assert!(eval.contains("<MODULE>  The module: LensIR JSON"), "{eval}");
    let inputs = eval
        .lines()
        .find(|l| l.trim_start().starts_with("--inputs <IN.json>"))
        .unwrap();
    assert!(inputs.contains("JSON object mapping input names to tensors"));
}

#[test]
fn help_and_version_succeed() {
    assert!(ok(&[&"--help"]).contains("Usage: catml"));
    assert_eq!(
        ok(&[&"--version"]),
        format!("catml {}\n", env!("CARGO_PKG_VERSION"))
    );
}

/// A stdout that refuses the output is reported like any other failure, not as a panic.
#[cfg(target_os = "linux")]
#[test]
fn unwritable_stdout_fails_in_one_line() {
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let out = catml(&[&"print", &module()])
        .stdout(Stdio::from(full))
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8(out.stderr).unwrap(),
        "catml: cannot write output: No space left on device (os error 28)\n"
    );
}

#[test]
fn jvp_tangents_are_named_as_the_jvp_program_names_them() {
    let x = json!({"dtype": "f64", "shape": [2, 3], "data": [1, 0, 0, 0, 0, 0]});
    let plain = scratch("plain-tangent.json", &json!({ "X": x }).to_string());
    assert_eq!(
        fails(&[
            &"jvp",
            &module(),
            &"--inputs",
            &inputs(),
            &"--tangents",
            &plain
        ]),
        format!(
            "{}: unknown tangent `X` (did you mean `tangent.X`?)",
            plain.display()
        )
    );
    let wrong = scratch(
        "wrong-tangent.json",
        &json!({"tangent.b": tensor_json(&[2])}).to_string(),
    );
    assert_eq!(
        fails(&[
            &"jvp",
            &module(),
            &"--inputs",
            &inputs(),
            &"--tangents",
            &wrong
        ]),
        format!(
            "{}: `tangent.b` has type f64[2], expected f64[3]",
            wrong.display()
        )
    );
    let named = scratch("named-tangent.json", &json!({ "tangent.X": x }).to_string());
    let v = ok_json(&[
        &"jvp",
        &module(),
        &"--inputs",
        &inputs(),
        &"--tangents",
        &named,
    ]);
    let names: Vec<&str> = v["tangents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    let outputs: Vec<String> = library_module()
        .output_names()
        .iter()
        .map(|o| format!("tangent.{o}"))
        .collect();
    assert_eq!(names, outputs);
    let printed = ok(&[&"print", &"--jvp", &module()]);
    assert!(printed.contains("tangent.X: f64[2, 3]"), "{printed}");
}
