//! The memory budget on the command line: a program whose planned peak exceeds it is refused
//! in one line before anything is allocated, and a failed allocation is an error naming the
//! node, not an abort.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use catml::interp;

fn scratch(name: &str, text: &str) -> PathBuf {
    // Tests run in parallel and share these files: write aside, then rename, so that no test
    // reads a file another is halfway through writing.
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("memory-{name}"));
    let aside = path.with_extension(format!("{:?}", std::thread::current().id()));
    std::fs::write(&aside, text).unwrap();
    std::fs::rename(&aside, &path).unwrap();
    path
}

/// A module without inputs whose values are f64[n] broadcasts of one constant: `a` and `b`,
/// then `c = a + b`, all three outputs (so that `c` is not written in a dying operand's
/// buffer), so the peak (a, b and c alive at `c`) is 3 · 8n bytes.
fn three_values(n: u64) -> PathBuf {
    let text = format!(
        r#"{{"format": "lensir-module/1", "inputs": [],
 "nodes": [{{"name": "k", "op": "constant", "attrs": {{"value": {{"shape": [], "data": [1.0]}}}}}},
           {{"name": "a", "op": "broadcast", "operands": ["k"], "attrs": {{"shape": [{n}], "dims": []}}}},
           {{"name": "b", "op": "broadcast", "operands": ["k"], "attrs": {{"shape": [{n}], "dims": []}}}},
           {{"name": "c", "op": "add", "operands": ["a", "b"]}}],
 "outputs": ["c", "a", "b"]}}"#
    );
    scratch(&format!("three-{n}.json"), &text)
}

fn no_inputs() -> PathBuf {
    scratch("no-inputs.json", "{}")
}

/// `catml ARGS` with its address space limited to `limit_kib` (so that an allocation the test
/// does not expect fails at once instead of using the machine's memory).
fn catml_limited(limit_kib: u64, args: &[&str]) -> Output {
    let mut script = format!("ulimit -v {limit_kib}; exec \"$0\"");
    for i in 1..=args.len() {
        script.push_str(&format!(" \"${i}\""));
    }
    Command::new("sh")
        .arg("-c")
        .arg(script)
        .arg(env!("CARGO_BIN_EXE_catml"))
        .args(args)
        .output()
        .unwrap()
}

/// Exit 1, nothing on stdout, one line on stderr: that line without `catml: `.
fn one_line_failure(out: &Output) -> String {
    let stderr = String::from_utf8(out.stderr.clone()).unwrap();
    assert_eq!(out.status.code(), Some(1), "exit code; stderr: {stderr}");
    assert!(out.stdout.is_empty(), "stdout on failure");
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr:?}");
    stderr
        .trim_end()
        .strip_prefix("catml: ")
        .unwrap()
        .to_string()
}

const GIB: u64 = 1 << 30;

#[test]
fn a_24_gib_peak_is_refused_before_running_with_both_figures() {
    let module = three_values(GIB); // three values of 8 GiB each
    let (m, i) = (module.to_str().unwrap(), no_inputs());
    let i = i.to_str().unwrap();
    // Under a 1 GiB address space: any attempt to allocate the values would fail differently.
    let start = Instant::now();
    let out = catml_limited(1 << 20, &["eval", m, "--inputs", i, "--max-memory", "16G"]);
    let line = one_line_failure(&out);
    // Generous for a loaded machine: the refusal itself is a walk over four nodes.
    assert!(start.elapsed() < Duration::from_secs(60));
    assert!(
        line.ends_with(
            "program needs 24.0 GiB at its peak (node 3 `c`, add), over the memory budget of \
             16.0 GiB; raise it with --max-memory"
        ),
        "{line}"
    );
    // The default budget, where this machine's is under 24 GiB (it is a fraction of what is
    // available, so a larger machine would rightly run the program).
    if interp::default_memory_budget() < 24 * GIB {
        let out = catml_limited(1 << 20, &["eval", m, "--inputs", i]);
        let line = one_line_failure(&out);
        assert!(
            line.contains("program needs 24.0 GiB at its peak"),
            "{line}"
        );
        assert!(line.contains(", over the memory budget of "), "{line}");
    }
}

#[test]
fn grad_and_jvp_check_the_budget_too() {
    let module = three_values(1 << 20); // 8 MiB each
    let (m, i) = (module.to_str().unwrap(), no_inputs());
    let i = i.to_str().unwrap();
    let tangents = scratch("no-tangents.json", "{}");
    let t = tangents.to_str().unwrap();
    for args in [
        vec!["grad", m, "--inputs", i, "--max-memory", "1M"],
        vec![
            "jvp",
            m,
            "--inputs",
            i,
            "--tangents",
            t,
            "--max-memory",
            "1M",
        ],
    ] {
        let line = one_line_failure(&catml_limited(4 << 20, &args));
        assert!(line.contains("over the memory budget of 1.0 MiB"), "{line}");
    }
    // Within the budget the same module runs.
    let out = catml_limited(4 << 20, &["eval", m, "--inputs", i, "--max-memory", "1G"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn bad_sizes_are_one_line_errors() {
    let module = three_values(4);
    let (m, i) = (module.to_str().unwrap(), no_inputs());
    let i = i.to_str().unwrap();
    for bad in ["8X", "lots", "0"] {
        let out = catml_limited(4 << 20, &["eval", m, "--inputs", i, "--max-memory", bad]);
        let stderr = String::from_utf8(out.stderr.clone()).unwrap();
        assert_eq!(out.status.code(), Some(1));
        assert!(out.stdout.is_empty());
        let first = stderr.lines().next().unwrap();
        assert!(
            first.contains(&format!("`{bad}` is not a size")),
            "{stderr}"
        );
    }
}

#[test]
fn a_failed_allocation_names_the_node() {
    // The plan (24 GiB) is within the budget given, but the process may hold only 2 GiB: the
    // first 8 GiB buffer cannot be had.
    let module = three_values(GIB);
    let (m, i) = (module.to_str().unwrap(), no_inputs());
    let out = catml_limited(
        2 << 20,
        &[
            "eval",
            m,
            "--inputs",
            i.to_str().unwrap(),
            "--max-memory",
            "64G",
        ],
    );
    let line = one_line_failure(&out);
    assert!(
        line.ends_with("node 1 `a` (broadcast): could not allocate 8589934592 bytes"),
        "{line}"
    );
}

#[test]
fn train_takes_the_budget() {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("memory-train");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let text = std::fs::read_to_string(examples.join("triangle.toml"))
        .unwrap()
        .replace("\"triangle/out/", "\"out/")
        .replace(
            "\"triangle/",
            &format!("\"{}/", examples.join("triangle").display()),
        );
    let spec = dir.join("spec.toml");
    std::fs::write(&spec, text).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_catml"))
        .args(["train", "--quiet", "--max-memory", "1K"])
        .arg(&spec)
        .output()
        .unwrap();
    let line = one_line_failure(&out);
    assert!(line.contains("over the memory budget of 1.0 KiB"), "{line}");
    assert!(line.ends_with("; raise it with --max-memory"), "{line}");
    let written = std::fs::read_dir(dir.join("out")).map_or(0, |d| d.count());
    assert_eq!(written, 0, "no output file");
}
