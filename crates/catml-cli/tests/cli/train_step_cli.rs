//! `catml export SPEC.toml --train-step OUT.onnx`: the spec's whole training step as one model
//! whose import evaluates as the library's step program; mistakes are one line and write
//! nothing.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use catml::tensor::Tensor;
use catml::train::{prepare, spec::Spec, TrainStep};

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/train_step")
        .join(name)
}

fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("train-step-cli");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    let _ = std::fs::remove_file(&path);
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
fn the_exported_step_imports_as_the_step_program() {
    let spec = example("sgd_f64.toml");
    let out = scratch("sgd_f64.onnx");
    let (code, stdout, stderr) = catml(&[
        "export",
        spec.to_str().unwrap(),
        "--train-step",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{stderr}");
    let summary: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let names = |k: &str| -> Vec<String> {
        summary[k]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_string())
            .collect()
    };
    let (inputs, outputs) = (names("inputs"), names("outputs"));
    for n in ["momentum/f.W1", "step", "data:E", "weight:triangle"] {
        assert!(inputs.iter().any(|i| i == n), "{n} not in {inputs:?}");
    }
    for n in [
        "new:f.W1",
        "new:momentum/f.W1",
        "loss",
        "loss:triangle",
        "lr",
    ] {
        assert!(outputs.iter().any(|o| o == n), "{n} not in {outputs:?}");
    }

    // The model, imported again, computes the library's step on the trainer's first batch
    // from the initializers (the spec's starting parameters) and zero buffers.
    let (step, start) = TrainStep::of_spec(&spec).unwrap();
    let imported = catml_onnx::read_file(&out, &catml_onnx::Shapes::new()).unwrap();
    assert_eq!(imported.params, start);
    let text = std::fs::read_to_string(&spec).unwrap();
    let run = prepare(&Spec::parse(&text).unwrap(), spec.parent().unwrap()).unwrap();
    let batch = &run.trainer.next_epoch_batches()[0];
    let state = step.initial_state();
    let feeds: BTreeMap<String, Tensor> = step
        .program()
        .inputs()
        .iter()
        .zip(step.inputs(&start, &state, batch).unwrap())
        .map(|(i, t)| (i.name.clone(), t))
        .collect();
    let got = catml::interp::eval_named(&imported.program, &feeds).unwrap();
    let want =
        catml::interp::eval(step.program(), &step.inputs(&start, &state, batch).unwrap()).unwrap();
    assert_eq!(imported.outputs, step.output_names());
    for ((name, g), w) in imported.outputs.iter().zip(&got).zip(&want) {
        let (g, w) = (g.to_f64_vec(), w.to_f64_vec());
        let err = g
            .iter()
            .zip(&w)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max);
        let scale = w.iter().map(|b| b.abs()).fold(1.0, f64::max);
        assert!(err <= 1e-12 * scale, "{name}: {err:e}");
    }
}

#[test]
fn train_step_mistakes_are_one_line_and_write_nothing() {
    let spec = example("adamw_f32.toml");
    let out = scratch("refused.onnx");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["no-such-spec.toml"], "no-such-spec.toml"),
        (vec![spec.to_str().unwrap(), "--opset", "9"], "opset 9"),
        (vec![spec.to_str().unwrap(), "--grad"], "--grad"),
    ];
    for (args, says) in cases {
        let mut all = vec!["export"];
        all.extend(&args);
        all.extend(["--train-step", out.to_str().unwrap()]);
        let (code, stdout, stderr) = catml(&all);
        assert_eq!(code, 1, "{args:?}: {stderr}");
        assert!(stdout.is_empty());
        assert!(
            stderr.starts_with("catml: ") && stderr.contains(says),
            "{stderr}"
        );
        assert!(stderr.lines().count() <= 3, "{stderr}");
        assert!(!out.exists(), "{args:?} wrote {}", out.display());
    }
    let bad_dir = scratch("missing-dir").join("step.onnx");
    let (code, _, stderr) = catml(&[
        "export",
        spec.to_str().unwrap(),
        "--train-step",
        bad_dir.to_str().unwrap(),
    ]);
    assert_eq!(code, 1);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(!bad_dir.exists());
}
