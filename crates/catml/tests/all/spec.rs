//! Training runs from TOML specs: a run end to end, and one exact message per kind of mistake.

use std::path::PathBuf;

use catml::ir::{json, Builder, InputKind, Program};
use catml::prim::Ops;
use catml::tensor::{DType, TensorType};
use catml::train::spec::Spec;
use catml::train::{from_json_lines, prepare, run_spec, RunOptions};

const B: usize = 4;

fn mlp(n_in: usize, n_out: usize) -> Program {
    let ty = |d: &[usize]| TensorType::new(DType::F32, d.to_vec());
    let mut b = Builder::new();
    let x = b.input("x", ty(&[B, n_in]), InputKind::Data).unwrap();
    let w1 = b.input("W1", ty(&[3, n_in]), InputKind::Param).unwrap();
    let b1 = b.input("b1", ty(&[3]), InputKind::Param).unwrap();
    let w2 = b.input("W2", ty(&[n_out, 3]), InputKind::Param).unwrap();
    let b2 = b.input("b2", ty(&[n_out]), InputKind::Param).unwrap();
    let h = b.linear(x, w1, b1).unwrap();
    let h = b.tanh(h).unwrap();
    let y = b.linear(h, w2, b2).unwrap();
    b.finish(&[y]).unwrap()
}

const SPEC: &str = r#"
seed = 5
epochs = 3
batch_size = 4

[data]
train = "data/train.csv"
held_out = "data/test.csv"

[objects.E]
shape = [2]
columns = ["e0", "e1"]

[objects.S]
shape = [1]
columns = ["s"]

[objects.D]
shape = [2]
labels = "d"

[arrows.f]
module = "f.json"
source = "E"
target = "S"

[arrows.g]
module = "g.json"
source = "S"
target = "D"

[arrows.h]
module = "h.json"
source = "E"
target = "D"

[[supervised]]
name = "syndrome"
path = ["f"]

[[supervised]]
name = "diagnosis"
path = ["h"]
loss = "cross_entropy"

[[equations]]
name = "triangle"
left = ["h"]
right = ["f", "g"]
weight = 0.5

[[equations]]
name = "loop"
left = ["f"]
right = ["f"]

[[evaluate]]
name = "composite"
path = ["f", "g"]

[optimiser]
kind = "adamw"
lr = 0.05
weight_decay = 0.001
clip_norm = 10.0
schedule = { kind = "cosine", warmup = 2, floor = 0.1 }

[output]
checkpoint = "out/ckpt.safetensors"
metrics = "out/metrics.jsonl"
plot = "out/loss.svg"
"#;

/// A directory with the modules and data the spec names.
fn fixture(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("catml-spec-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("data")).unwrap();
    for (file, p) in [
        ("f.json", mlp(2, 1)),
        ("g.json", mlp(1, 2)),
        ("h.json", mlp(2, 2)),
    ] {
        std::fs::write(dir.join(file), json::to_string(&p)).unwrap();
    }
    let csv = |n: usize, offset: usize| {
        let mut s = String::from("e0,e1,s,d\n");
        for i in 0..n {
            let k = (i + offset) as f64;
            let (e0, e1) = ((k * 0.7).sin(), (k * 0.3).cos());
            let sv = e0 * e1;
            let s_cell = if i % 3 == 0 {
                String::new()
            } else {
                sv.to_string()
            };
            let d_cell = if i % 2 == 0 {
                String::new()
            } else {
                ((sv > 0.0) as u8).to_string()
            };
            s.push_str(&format!("{e0},{e1},{s_cell},{d_cell}\n"));
        }
        s
    };
    std::fs::write(dir.join("data/train.csv"), csv(14, 0)).unwrap();
    std::fs::write(dir.join("data/test.csv"), csv(6, 100)).unwrap();
    std::fs::write(dir.join("spec.toml"), SPEC).unwrap();
    dir
}

#[test]
fn a_spec_trains_and_writes_its_outputs() {
    let dir = fixture("run");
    let spec_path = dir.join("spec.toml");
    let last = run_spec(&spec_path, RunOptions::default()).unwrap();
    assert_eq!(
        (last.epoch, last.step, last.eval_on.as_str()),
        (3, 12, "held_out")
    );
    let keys: Vec<&String> = last.eval.defects.keys().collect();
    assert_eq!(keys, ["loop", "triangle"]);
    // A path equal to itself has no defect.
    assert_eq!(last.eval.defects["loop"], 0.0);
    let acc: Vec<&String> = last.eval.accuracy.keys().collect();
    assert_eq!(acc, ["composite", "diagnosis"]);
    let metrics = std::fs::read_to_string(dir.join("out/metrics.jsonl")).unwrap();
    let history = from_json_lines(&metrics).unwrap();
    assert_eq!(history.len(), 3);
    assert_eq!(history[2], last);
    assert!(std::fs::read_to_string(dir.join("out/loss.svg"))
        .unwrap()
        .starts_with("<svg"));

    // The same spec, run again with resume, finds 3 epochs done and stops at once.
    let resume = RunOptions {
        progress: false,
        resume: true,
    };
    assert_eq!(run_spec(&spec_path, resume).unwrap(), last);
    // With a schedule that does not depend on the epoch count, asking for 5 epochs continues
    // from the checkpoint and matches a straight 5-epoch run bit for bit.
    let fixed = SPEC.replace("floor = 0.1 }", "floor = 0.1, total = 20 }");
    std::fs::write(&spec_path, &fixed).unwrap();
    std::fs::remove_dir_all(dir.join("out")).unwrap();
    run_spec(&spec_path, RunOptions::default()).unwrap();
    std::fs::write(&spec_path, fixed.replace("epochs = 3", "epochs = 5")).unwrap();
    let continued = run_spec(&spec_path, resume).unwrap();
    std::fs::remove_dir_all(dir.join("out")).unwrap();
    let straight = run_spec(&spec_path, RunOptions::default()).unwrap();
    assert_eq!(continued, straight);
    assert_eq!(straight.epoch, 5);
}

/// The error of the fixture's spec with `from` replaced by `to`.
fn mistake(from: &str, to: &str) -> String {
    assert!(SPEC.contains(from), "{from}");
    static CASE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let text = SPEC.replacen(from, to, 1);
    // A directory per case: tests run at once.
    let case = CASE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = fixture(&format!("mistakes-{case}"));
    let message = match Spec::parse(&text) {
        Err(e) => e.to_string(),
        Ok(spec) => match prepare(&spec, &dir) {
            Ok(_) => panic!("no error with {to}"),
            Err(e) => e.to_string(),
        },
    };
    std::fs::remove_dir_all(&dir).unwrap();
    message
}

#[test]
fn every_mistake_is_one_line_naming_its_key() {
    let cases = [
        (
            "right = [\"f\", \"g\"]",
            "right = [\"f\", \"q\"]",
            "equations[0].right: unknown arrow \"q\"",
        ),
        (
            "left = [\"f\"]",
            "left = [\"q\"]",
            "equations[1].left: unknown arrow \"q\"",
        ),
        (
            "right = [\"f\", \"g\"]",
            "right = [\"g\", \"f\"]",
            "equations[0].right: arrow \"f\" starts at \"E\" but \"g\" ends at \"D\": the path does not compose",
        ),
        (
            "right = [\"f\", \"g\"]",
            "right = [\"f\"]",
            "equations[0]: the left path goes \"E\" -> \"D\" but the right path goes \"E\" -> \"S\": an equation's paths share both ends",
        ),
        (
            "right = [\"f\"]",
            "right = []",
            "equations[1]: the left path goes \"E\" -> \"S\" but the right path goes \"E\" -> \"E\": an equation's paths share both ends",
        ),
        (
            "weight = 0.5",
            "weight = -0.5",
            "equations[0].weight: weight must be finite and non-negative, found -0.5",
        ),
        (
            "name = \"loop\"",
            "name = \"triangle\"",
            "equations[1].name: duplicate term \"triangle\"",
        ),
        (
            "shape = [2]\nlabels",
            "shape = [2, 1]\nlabels",
            "objects.D.shape: labels need a shape [classes], found [2, 1]",
        ),
        (
            "path = [\"f\", \"g\"]",
            "path = [\"g\", \"g\"]",
            "evaluate[0].path: arrow \"g\" starts at \"S\" but \"g\" ends at \"D\": the path does not compose",
        ),
        (
            "source = \"S\"",
            "source = \"Q\"",
            "arrows.g.source: unknown object \"Q\"",
        ),
        (
            "target = \"S\"",
            "target = \"D\"",
            "arrows.f.module: target object \"D\" has batch type f32[4, 2], the program's output has f32[4, 1]",
        ),
        (
            "batch_size = 4",
            "batch_size = 8",
            "arrows.f.module: batch size 4 differs from batch_size 8",
        ),
        (
            "module = \"g.json\"",
            "module = \"missing.json\"",
            "arrows.g.module: ",
        ),
        (
            "columns = [\"e0\", \"e1\"]",
            "columns = [\"e0\", \"e9\"]",
            "objects.E.columns: unknown column \"e9\" (the data has e0, e1, s, d)",
        ),
        (
            "columns = [\"e0\", \"e1\"]",
            "columns = [\"e0\"]",
            "objects.E.columns: 1 columns given but one example has 2 values (f32[2])",
        ),
        (
            "labels = \"d\"",
            "labels = \"d\"\ncolumns = [\"d\"]",
            "objects.D: give columns or labels, not both",
        ),
        (
            "shape = [2]\nlabels",
            "shape = [2]\ndtype = \"f16\"\nlabels",
            "objects.D.dtype: expected \"f32\" or \"f64\", found \"f16\"",
        ),
        (
            "kind = \"adamw\"",
            "kind = \"adamw\"\nmomentum = 0.9",
            "optimiser.momentum: only sgd takes momentum",
        ),
        (
            "kind = \"adamw\"",
            "kind = \"rmsprop\"",
            "optimiser.kind: unknown variant `rmsprop`, expected one of `sgd`, `adam`, `adamw`",
        ),
        ("lr = 0.05", "lr = -1.0", "optimiser.lr: must be finite and non-negative, found -1"),
        (
            "warmup = 2,",
            "warmup = 2, every = 3,",
            "optimiser.schedule.every: a cosine schedule has no every",
        ),
        (
            "lr = 0.05",
            "lr = 0.05\nlrr = 1",
            "optimiser.lrr: unknown field `lrr`, expected one of `kind`, `lr`, `momentum`, `nesterov`, `betas`, `eps`, `weight_decay`, `clip_norm`, `schedule` (did you mean `lr`?)",
        ),
        ("epochs = 3", "epochs = \"three\"", "epochs: invalid type: string \"three\", expected usize"),
        ("epochs = 3", "epochs = 0", "epochs: must be positive, found 0"),
        ("seed = 5\n", "", "spec: missing field `seed`"),
        ("[data]", "[data\n", "line 6: unclosed table, expected `]`"),
        (
            "held_out = \"data/test.csv\"",
            "held_out = \"data/nope.csv\"",
            "data.held_out: ",
        ),
    ];
    for (from, to, expected) in cases {
        let found = mistake(from, to);
        assert!(!found.contains('\n'), "{found}");
        if expected.ends_with(": ") {
            assert!(found.starts_with(expected), "{found} vs {expected}");
        } else {
            assert_eq!(found, expected);
        }
    }
}

#[test]
fn a_term_on_an_object_without_data_is_named() {
    let text = SPEC.replace(
        "[objects.S]\nshape = [1]\ncolumns = [\"s\"]",
        "[objects.S]\nshape = [1]",
    );
    let spec = Spec::parse(&text).unwrap();
    let Err(e) = prepare(&spec, &fixture("nodata")) else {
        panic!("no error")
    };
    assert_eq!(
        e.to_string(),
        "supervised[0].path: object \"S\" has no columns or labels"
    );
}

#[test]
fn arrow_parameters_can_come_from_safetensors() {
    use catml::tensor::{Params, Tensor};
    let dir = fixture("params");
    let mut p = Params::new();
    p.insert("W1", Tensor::f32([3, 2], vec![0.5; 6]).unwrap());
    p.insert("b1", Tensor::f32([3], vec![0.25; 3]).unwrap());
    p.insert("W2", Tensor::f32([1, 3], vec![-1.0; 3]).unwrap());
    p.insert("b2", Tensor::f32([1], vec![2.0]).unwrap());
    p.save(&dir.join("f.safetensors")).unwrap();
    let with_file = SPEC.replace(
        "module = \"f.json\"",
        "module = \"f.json\"\nparams = \"f.safetensors\"",
    );
    let run = prepare(&Spec::parse(&with_file).unwrap(), &dir).unwrap();
    let params = run.trainer.params();
    assert_eq!(params.get("f.W1"), p.get("W1"));
    assert_eq!(params.get("f.b2"), p.get("b2"));
    // The other arrows are initialised from the seed: Glorot weights, zero biases.
    assert_eq!(params.get("g.b1").unwrap().to_f64_vec(), vec![0.0; 3]);
    assert!(params
        .get("g.W1")
        .unwrap()
        .to_f64_vec()
        .iter()
        .all(|&w| w != 0.0));

    p.insert("W2", Tensor::f32([2, 3], vec![0.0; 6]).unwrap());
    p.save(&dir.join("f.safetensors")).unwrap();
    let Err(e) = prepare(&Spec::parse(&with_file).unwrap(), &dir) else {
        panic!("no error")
    };
    assert_eq!(
        e.to_string(),
        "arrows.f.params: parameter `W2` has a value of type f32[2, 3], expected f32[1, 3]"
    );
}

/// `mse` is the `mse` primitive's mean over all elements; `squared_error` (the default) is
/// ½ Σ per row.
#[test]
fn mse_and_squared_error_are_distinct_distances() {
    use catml::train::spec::DistanceSpec;
    for (name, want) in [
        ("mse", DistanceSpec::Mse),
        ("squared_error", DistanceSpec::SquaredError),
    ] {
        let text = SPEC.replace(
            "name = \"loop\"",
            &format!("name = \"loop\"\ndistance = \"{name}\""),
        );
        let spec = Spec::parse(&text).unwrap();
        assert_eq!(spec.equations[1].distance, want, "{name}");
    }
    let spec = Spec::parse(SPEC).unwrap();
    assert_eq!(spec.equations[1].distance, DistanceSpec::SquaredError);
    assert_eq!(
        mistake("loss = \"cross_entropy\"", "loss = \"msee\""),
        "supervised[1].loss: unknown variant `msee`, expected one of `squared_error`, `mse`, \
         `cross_entropy` (did you mean `mse`?)"
    );
}

#[test]
fn a_misspelt_key_suggests_the_nearest_one() {
    assert_eq!(
        mistake("batch_size = 4", "batch_sise = 4"),
        "batch_sise: unknown field `batch_sise`, expected one of `seed`, `epochs`, `batch_size`, \
         `data`, `objects`, `arrows`, `equations`, `supervised`, `evaluate`, `optimiser`, \
         `output`, `distributed` (did you mean `batch_size`?)"
    );
}

#[test]
fn a_dtype_mismatch_points_to_the_dtype_key() {
    assert_eq!(
        mistake(
            "shape = [2]\ncolumns",
            "shape = [2]\ndtype = \"f64\"\ncolumns"
        ),
        "objects.E.dtype: dtype f64 differs from the other objects' f32: a diagram has one \
         dtype, so give every object the same `dtype` (default \"f32\")"
    );
    let all_f64 = SPEC.replace("shape = [", "dtype = \"f64\"\nshape = [");
    let dir = fixture("dtype");
    let err = prepare(&Spec::parse(&all_f64).unwrap(), &dir).unwrap_err();
    assert_eq!(
        err.to_string(),
        "arrows.f.module: the module's data input is f32[4, 2] but object \"E\" is f64: set \
         `dtype = \"f32\"` on the objects (default \"f32\")"
    );
}

#[test]
fn an_unbatched_module_is_named_with_the_type_to_declare() {
    let dir = fixture("unbatched");
    let mut b = Builder::new();
    let x = b
        .input("x", TensorType::new(DType::F32, [2]), InputKind::Data)
        .unwrap();
    let y = b.sum(x, Some(vec![0])).unwrap();
    let y = b.reshape(y, vec![1]).unwrap();
    std::fs::write(
        dir.join("f.json"),
        json::to_string(&b.finish(&[y]).unwrap()),
    )
    .unwrap();
    let err = prepare(&Spec::parse(SPEC).unwrap(), &dir).unwrap_err();
    assert_eq!(
        err.to_string(),
        "arrows.f.module: the module is unbatched: its data input f32[2] is one example of \
         object \"E\"; give it a leading batch dimension of batch_size 4: f32[4, 2]"
    );
}

/// A checkpoint records its spec and files: resuming under another seed, or with changed data,
/// is an error naming what changed, and the checkpoint is left as it was.
#[test]
fn resuming_under_a_changed_spec_names_what_changed() {
    let dir = fixture("provenance");
    let spec_path = dir.join("spec.toml");
    run_spec(&spec_path, RunOptions::default()).unwrap();
    let ckpt = dir.join("out/ckpt.safetensors");
    let before = std::fs::read(&ckpt).unwrap();
    let resume = RunOptions {
        progress: false,
        resume: true,
    };
    std::fs::write(&spec_path, SPEC.replace("seed = 5", "seed = 6")).unwrap();
    let err = run_spec(&spec_path, resume).unwrap_err().to_string();
    assert!(
        err.ends_with(
            "written under a different spec or files, so resuming would not continue the same \
             run: seed: 5, now 6"
        ),
        "{err}"
    );
    std::fs::write(&spec_path, SPEC).unwrap();
    let csv = std::fs::read_to_string(dir.join("data/train.csv")).unwrap();
    let extra_row = csv.lines().last().unwrap();
    std::fs::write(dir.join("data/train.csv"), format!("{csv}{extra_row}\n")).unwrap();
    let err = run_spec(&spec_path, resume).unwrap_err().to_string();
    assert!(
        err.ends_with("data.train: the file's contents changed"),
        "{err}"
    );
    assert_eq!(std::fs::read(&ckpt).unwrap(), before);
    // The outputs are not part of the run: the same run may write them elsewhere.
    std::fs::write(dir.join("data/train.csv"), csv).unwrap();
    std::fs::write(
        &spec_path,
        SPEC.replace(
            "metrics = \"out/metrics.jsonl\"",
            "metrics = \"out/m.jsonl\"",
        ),
    )
    .unwrap();
    assert_eq!(run_spec(&spec_path, resume).unwrap().epoch, 3);
}

/// The plot shows each term, each defect and each accuracy, not only the totals.
#[test]
fn the_plot_draws_terms_defects_and_accuracy() {
    let dir = fixture("plot");
    run_spec(&dir.join("spec.toml"), RunOptions::default()).unwrap();
    let svg = std::fs::read_to_string(dir.join("out/loss.svg")).unwrap();
    for label in [
        "train loss (running)",
        "held-out loss",
        "held-out term syndrome",
        "held-out term diagnosis",
        "held-out defect triangle",
        "held-out defect loop",
        "accuracy composite",
        "accuracy diagnosis",
    ] {
        assert!(svg.contains(label), "{label} missing from the plot");
    }
    assert!(
        !svg.contains("held-out term triangle"),
        "a defect drawn twice"
    );
    assert!(!svg.contains("log10"));
    let log = SPEC.replace(
        "plot = \"out/loss.svg\"",
        "plot = \"out/loss.svg\"\nplot_scale = \"log\"",
    );
    std::fs::write(dir.join("spec.toml"), log).unwrap();
    std::fs::remove_dir_all(dir.join("out")).unwrap();
    run_spec(&dir.join("spec.toml"), RunOptions::default()).unwrap();
    let svg = std::fs::read_to_string(dir.join("out/loss.svg")).unwrap();
    assert!(svg.contains("loss (log10 axis)"), "the log axis is drawn");
}
