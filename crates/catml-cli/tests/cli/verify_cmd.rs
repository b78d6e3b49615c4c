//! `catml verify` writes one results file per seed and reports failures by its exit code.

use std::path::PathBuf;
use std::process::Command;

fn dir() -> PathBuf {
    let d = std::env::temp_dir().join(format!("catml-verify-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn verify(seed: u64, output: &std::path::Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_catml"))
        .args(["verify", "--smoke", "--seed", &seed.to_string(), "--output"])
        .arg(output)
        .output()
        .unwrap()
}

fn without_timings(path: &std::path::Path) -> serde_json::Value {
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    v.as_object_mut().unwrap().remove("wall_time_s");
    for f in v["families"].as_array_mut().unwrap() {
        f.as_object_mut().unwrap().remove("wall_time_s");
    }
    v
}

#[test]
fn writes_the_results_file_and_summarises() {
    let d = dir();
    let (a, b) = (d.join("a.json"), d.join("b.json"));
    let out = verify(3, &a);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        stdout.contains("rational_oracle") && stdout.contains("total"),
        "{stdout}"
    );
    let v = without_timings(&a);
    assert_eq!(v["seed"], 3);
    assert_eq!(v["level"], "smoke");
    assert_eq!(v["passed"], true);
    assert_eq!(v["families"].as_array().unwrap().len(), 14);
    assert!(v["rustc"].as_str().unwrap().starts_with("rustc "));
    assert!(verify(3, &b).status.success());
    assert_eq!(without_timings(&a), without_timings(&b));
    // Only the results file is left behind: the write goes through a temporary and a rename.
    let mut names: Vec<String> = std::fs::read_dir(&d)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["a.json", "b.json"]);
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn an_unwritable_output_is_one_line_and_exit_1() {
    let out = verify(3, std::path::Path::new("/nonexistent-dir/results.json"));
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8(out.stderr).unwrap();
    let last = stderr.lines().last().unwrap();
    assert!(
        last.starts_with("catml: ") && last.contains("/nonexistent-dir"),
        "{stderr}"
    );
}
