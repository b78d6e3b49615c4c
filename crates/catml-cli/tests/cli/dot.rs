//! `catml dot`: golden DOT text for the tied residual block, with and without `--grad`, and a
//! render through Graphviz when `dot` is installed.
//!
//! `UPDATE_EXPECT=1 cargo test -p catml-cli --test cli dot` rewrites the golden files.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn catml(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_catml"))
        .args(args)
        .current_dir(repo_root())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "catml {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Compares `actual` with the golden file, or rewrites it under `UPDATE_EXPECT=1`.
fn check_golden(name: &str, actual: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name);
    if std::env::var_os("UPDATE_EXPECT").is_some() {
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (run with UPDATE_EXPECT=1 to create it)",
            path.display()
        )
    });
    assert!(
        expected == actual,
        "{} differs from the output (UPDATE_EXPECT=1 to bless):\n{actual}",
        path.display()
    );
}

/// The `dot` executable on PATH, if Graphviz is installed.
fn graphviz() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("dot"))
        .find(|p| p.is_file())
}

/// Renders with Graphviz when it is installed; a failing render fails the test.
fn check_renders(text: &str) {
    let Some(dot) = graphviz() else { return };
    let mut child = Command::new(&dot)
        .arg("-Tsvg")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{} -Tsvg failed: {}",
        dot.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let svg = String::from_utf8_lossy(&out.stdout);
    assert!(svg.contains("<svg"), "no svg in the output of dot");
}

#[test]
fn tied_residual_dot_matches_its_golden_file() {
    let text = catml(&["dot", "modules/tied_residual.json"]);
    check_golden("tied_residual.dot", &text);
    check_renders(&text);
}

#[test]
fn tied_residual_dot_with_grad_draws_both_programs() {
    let text = catml(&["dot", "--grad", "modules/tied_residual.json"]);
    assert!(text.contains("label=\"forward\""));
    assert!(text.contains("label=\"reverse (vjp)\""));
    check_golden("tied_residual.grad.dot", &text);
    check_renders(&text);
}

#[test]
fn dot_of_a_missing_module_fails_with_one_line() {
    let out = Command::new(env!("CARGO_BIN_EXE_catml"))
        .args(["dot", "no/such/module.json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.lines().count(), 1);
    assert!(
        err.starts_with("catml: cannot read no/such/module.json"),
        "{err}"
    );
}
