//! `catml train`: a run from the example's files, and a spec mistake as one line on stderr.

use std::path::{Path, PathBuf};
use std::process::Command;

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

/// The example spec with its data and modules named by absolute path, edited by `edit`.
fn spec_in(dir: &Path, edit: impl Fn(String) -> String) -> PathBuf {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).unwrap();
    let text = std::fs::read_to_string(examples().join("triangle.toml")).unwrap();
    let data = examples().join("triangle");
    let text = text
        .replace("\"triangle/out/", "\"out/")
        .replace("\"triangle/", &format!("\"{}/", data.display()));
    let path = dir.join("spec.toml");
    std::fs::write(&path, edit(text)).unwrap();
    path
}

fn catml(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_catml"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn train_runs_the_example_spec_and_writes_its_outputs() {
    let dir = std::env::temp_dir().join(format!("catml-cli-train-{}", std::process::id()));
    let spec = spec_in(&dir, |t| t.replace("epochs = 25", "epochs = 2"));
    let (code, stdout, stderr) = catml(&["train", spec.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    // stderr is not a terminal here: one line per epoch, then where the outputs went.
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 3, "{stderr}");
    for (k, line) in lines[..2].iter().enumerate() {
        assert!(
            line.starts_with(&format!("epoch {}/2  loss ", k + 1)),
            "{line}"
        );
        assert!(line.contains("held-out loss") && line.contains("accuracy diagnosis_g"));
    }
    let out = dir.join("out");
    assert_eq!(
        lines[2],
        format!(
            "wrote checkpoint {}, metrics {}, plot {}",
            out.join("checkpoint.safetensors").display(),
            out.join("metrics.jsonl").display(),
            out.join("loss.svg").display()
        )
    );
    let last: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(last["epoch"], 2);
    assert_eq!(last["step"], 100);
    assert_eq!(last["eval_on"], "held_out");
    let acc = last["eval"]["accuracy"].as_object().unwrap();
    let names: Vec<&String> = acc.keys().collect();
    assert_eq!(names, ["diagnosis_g", "diagnosis_h", "g_after_f"]);
    for file in ["checkpoint.safetensors", "metrics.jsonl", "loss.svg"] {
        assert!(dir.join("out").join(file).is_file(), "{file}");
    }
    let metrics = std::fs::read_to_string(dir.join("out/metrics.jsonl")).unwrap();
    assert_eq!(metrics.lines().count(), 2);
}

#[test]
fn quiet_training_prints_nothing_on_stderr() {
    let dir = std::env::temp_dir().join(format!("catml-cli-quiet-{}", std::process::id()));
    let spec = spec_in(&dir, |t| t.replace("epochs = 25", "epochs = 2"));
    let (code, stdout, stderr) = catml(&["train", "--quiet", spec.to_str().unwrap()]);
    assert_eq!((code, stderr.as_str()), (0, ""));
    assert!(stdout.contains("\"epoch\": 2"));
}

#[test]
fn a_spec_mistake_is_one_line_on_stderr() {
    let dir = std::env::temp_dir().join(format!("catml-cli-mistake-{}", std::process::id()));
    let spec = spec_in(&dir, |t| t.replace("left = [\"h\"]", "left = [\"q\"]"));
    let (code, stdout, stderr) = catml(&["train", spec.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert_eq!(stdout, "");
    assert_eq!(
        stderr,
        format!(
            "catml: {}: equations[0].left: unknown arrow \"q\"\n",
            spec.display()
        )
    );
    assert!(!dir.join("out").exists());
}
