//! The training loop: data binding, evaluation means, outputs, and bit-identical resume.

use std::path::PathBuf;

use catml::diagram::{Arrow, Diagram, Distance, Equation, Path, Supervised};
use catml::ir::{Builder, InputKind, Program};
use catml::optim::{Adam, Optimiser, Schedule};
use catml::prim::Ops;
use catml::tensor::{DType, Params, TensorType};
use catml::train::{
    from_json_lines, initialise, Columns, Dataset, Outputs, Progress, Table, Trainer,
};
use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha8Rng;

const B: usize = 8;

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("catml-train-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// tanh(x W1ᵀ + b1) W2ᵀ + b2 on f32 batches of B.
fn mlp(n_in: usize, hidden: usize, n_out: usize) -> Program {
    let ty = |d: &[usize]| TensorType::new(DType::F32, d.to_vec());
    let mut b = Builder::new();
    let x = b.input("x", ty(&[B, n_in]), InputKind::Data).unwrap();
    let w1 = b
        .input("W1", ty(&[hidden, n_in]), InputKind::Param)
        .unwrap();
    let b1 = b.input("b1", ty(&[hidden]), InputKind::Param).unwrap();
    let w2 = b
        .input("W2", ty(&[n_out, hidden]), InputKind::Param)
        .unwrap();
    let b2 = b.input("b2", ty(&[n_out]), InputKind::Param).unwrap();
    let h = b.linear(x, w1, b1).unwrap();
    let h = b.tanh(h).unwrap();
    let y = b.linear(h, w2, b2).unwrap();
    b.finish(&[y]).unwrap()
}

/// E (2 values) -> S (1 value) -> D (3 classes), and E -> D directly.
fn triangle(seed: u64, with_equation: bool) -> Diagram {
    let mut d = Diagram::new();
    d.object("E", TensorType::new(DType::F32, [2])).unwrap();
    d.object("S", TensorType::new(DType::F32, [1])).unwrap();
    d.object("D", TensorType::new(DType::F32, [3])).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    for (name, src, dst, p) in [
        ("f", "E", "S", mlp(2, 4, 1)),
        ("g", "S", "D", mlp(1, 4, 3)),
        ("h", "E", "D", mlp(2, 4, 3)),
    ] {
        let params = initialise(&p, &mut rng);
        d.arrow(Arrow::new(name, src, dst, p, params).unwrap())
            .unwrap();
    }
    d.supervised(Supervised::new("syndrome", Path::of(["f"])))
        .unwrap();
    d.supervised(Supervised::new("g_fit", Path::of(["g"])).loss(Distance::CrossEntropy))
        .unwrap();
    d.supervised(Supervised::new("h_fit", Path::of(["h"])).loss(Distance::CrossEntropy))
        .unwrap();
    if with_equation {
        d.equation(Equation::new("triangle", Path::of(["h"]), Path::of(["f", "g"])).weight(0.5))
            .unwrap();
    }
    d
}

/// Rows (e0, e1, s, d): s = e0 - e1, d = class of s; every third row lacks s, every fourth d.
fn table(n: usize, offset: usize) -> Table {
    let rows = (0..n)
        .map(|i| {
            let k = (i + offset) as f64;
            let (e0, e1) = ((k * 0.37).sin(), (k * 0.11).cos());
            let s = e0 - e1;
            let d = if s < -0.5 {
                0.0
            } else if s < 0.5 {
                1.0
            } else {
                2.0
            };
            vec![
                Some(e0),
                Some(e1),
                (i % 3 != 0).then_some(s),
                (i % 4 != 0).then_some(d),
            ]
        })
        .collect();
    Table::new(
        "synthetic",
        ["e0", "e1", "s", "d"].map(String::from).to_vec(),
        rows,
    )
}

fn bindings() -> Vec<(String, Columns)> {
    vec![
        ("E".into(), Columns::Values(vec!["e0".into(), "e1".into()])),
        ("S".into(), Columns::Values(vec!["s".into()])),
        (
            "D".into(),
            Columns::Labels {
                column: "d".into(),
                classes: 3,
            },
        ),
    ]
}

fn trainer(seed: u64) -> Trainer {
    let d = triangle(seed, true);
    let train = Dataset::new(&table(45, 0), &bindings(), &d).unwrap();
    let held = Dataset::new(&table(20, 1000), &bindings(), &d).unwrap();
    let opt = Optimiser::new(Adam::adamw(0.02, 0.01))
        .unwrap()
        .with_schedule(Schedule::Cosine {
            warmup: 3,
            total: 40,
            floor: 0.1,
        })
        .unwrap()
        .with_clip(5.0)
        .unwrap();
    let params = d.params();
    let mut t = Trainer::new(d, params, opt, train, seed)
        .unwrap()
        .with_held_out(held)
        .unwrap();
    t.probe("composite", &Path::of(["f", "g"])).unwrap();
    t
}

fn assert_bitwise_equal(a: &Params, b: &Params) {
    assert_eq!(a.names().collect::<Vec<_>>(), b.names().collect::<Vec<_>>());
    for ((n, x), (_, y)) in a.iter().zip(b.iter()) {
        let (x, y) = (x.to_f64_vec(), y.to_f64_vec());
        assert!(
            x.iter().zip(&y).all(|(p, q)| p.to_bits() == q.to_bits()),
            "{n} differs: {x:?} vs {y:?}"
        );
    }
}

#[test]
fn resuming_from_a_checkpoint_continues_bit_for_bit() {
    let dir = scratch("resume");
    let mut straight = trainer(7);
    straight.run(5, &Outputs::default(), false).unwrap();

    let ckpt = dir.join("k.safetensors");
    let mut first = trainer(7);
    first.run(2, &Outputs::default(), false).unwrap();
    first.save_checkpoint(&ckpt).unwrap();
    drop(first);
    let mut resumed = trainer(7);
    resumed.resume(&ckpt).unwrap();
    assert_eq!(resumed.epochs_done(), 2);
    resumed.run(5, &Outputs::default(), false).unwrap();

    assert_eq!(resumed.epochs_done(), 5);
    assert_bitwise_equal(resumed.params(), straight.params());
    assert_bitwise_equal(&resumed.optimiser().state(), &straight.optimiser().state());
    assert_eq!(resumed.history(), straight.history());
    assert_eq!(straight.optimiser().steps(), 5 * 6);
    // A different seed shuffles differently and ends elsewhere.
    let mut other = trainer(8);
    other.run(5, &Outputs::default(), false).unwrap();
    assert_ne!(other.history()[4].loss, straight.history()[4].loss);
}

#[test]
fn training_reduces_the_loss_and_writes_its_outputs() {
    let dir = scratch("outputs");
    let outputs = Outputs {
        checkpoint: Some(dir.join("ckpt.safetensors")),
        metrics: Some(dir.join("metrics.jsonl")),
        plot: Some(dir.join("loss.svg")),
        ..Outputs::default()
    };
    let mut t = trainer(3);
    let before = t.evaluate(&Dataset::new(&table(20, 1000), &bindings(), t.diagram()).unwrap());
    t.run(12, &outputs, false).unwrap();
    let history =
        from_json_lines(&std::fs::read_to_string(dir.join("metrics.jsonl")).unwrap()).unwrap();
    assert_eq!(history.len(), 12);
    assert_eq!(history, t.history());
    let last = &history[11];
    assert_eq!(
        (last.epoch, last.step, last.eval_on.as_str()),
        (12, 72, "held_out")
    );
    assert!(last.eval.loss < before.unwrap().loss);
    assert!(last.loss < history[0].loss);
    let keys: Vec<&String> = last.eval.terms.keys().collect();
    assert_eq!(keys, ["g_fit", "h_fit", "syndrome", "triangle"]);
    assert_eq!(last.eval.defects.keys().collect::<Vec<_>>(), ["triangle"]);
    assert_eq!(last.eval.defects["triangle"], last.eval.terms["triangle"]);
    let acc: Vec<&String> = last.eval.accuracy.keys().collect();
    assert_eq!(acc, ["composite", "g_fit", "h_fit"]);
    assert!(last
        .eval
        .accuracy
        .values()
        .all(|&a| (0.0..=1.0).contains(&a)));
    // The weighted total is the sum of its weighted terms.
    let total = last.eval.terms["syndrome"]
        + last.eval.terms["g_fit"]
        + last.eval.terms["h_fit"]
        + 0.5 * last.eval.terms["triangle"];
    assert!((total - last.eval.loss).abs() < 1e-9);
    let svg = std::fs::read_to_string(dir.join("loss.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("held-out loss"));
    let first_line = std::fs::read_to_string(dir.join("metrics.jsonl")).unwrap();
    assert!(first_line.starts_with("{\"epoch\":1,\"step\":6,"));
    // Only the three outputs: no temporary files left behind.
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["ckpt.safetensors", "loss.svg", "metrics.jsonl"]);
}

#[test]
fn evaluation_terms_are_means_over_the_rows_that_have_the_data() {
    // One linear arrow E -> S with W = 1, b = 0: the syndrome term is ½ (e0 - s)² averaged over
    // the rows that have s; 20 rows with s missing on every third.
    let mut d = Diagram::new();
    d.object("E", TensorType::new(DType::F64, [1])).unwrap();
    d.object("S", TensorType::new(DType::F64, [1])).unwrap();
    let mut b = Builder::new();
    let ty = |v: &[usize]| TensorType::new(DType::F64, v.to_vec());
    let x = b.input("x", ty(&[B, 1]), InputKind::Data).unwrap();
    let w = b.input("W", ty(&[1, 1]), InputKind::Param).unwrap();
    let c = b.input("b", ty(&[1]), InputKind::Param).unwrap();
    let y = b.linear(x, w, c).unwrap();
    let mut p = Params::new();
    p.insert("W", catml::tensor::Tensor::f64([1, 1], vec![1.0]).unwrap());
    p.insert("b", catml::tensor::Tensor::f64([1], vec![0.0]).unwrap());
    d.arrow(Arrow::new("f", "E", "S", b.finish(&[y]).unwrap(), p).unwrap())
        .unwrap();
    d.supervised(Supervised::new("fit", Path::of(["f"])))
        .unwrap();
    let tab = table(20, 0);
    let data = Dataset::new(
        &tab,
        &[
            ("E".into(), Columns::Values(vec!["e0".into()])),
            ("S".into(), Columns::Values(vec!["s".into()])),
        ],
        &d,
    )
    .unwrap();
    let rows: Vec<(f64, f64)> = (0..20)
        .filter_map(|i| Some((tab.row(i)[0]?, tab.row(i)[2]?)))
        .collect();
    assert_eq!(rows.len(), 13);
    let expected = rows.iter().map(|(e, s)| 0.5 * (e - s).powi(2)).sum::<f64>() / 13.0;
    let opt = Optimiser::new(Adam::new(0.1)).unwrap();
    let params = d.params();
    let mut t = Trainer::new(d, params, opt, data.clone(), 0).unwrap();
    t.probe("through_f", &Path::of(["f"])).unwrap();
    let e = t.evaluate(&data).unwrap();
    assert!(
        (e.terms["fit"] - expected).abs() < 1e-12,
        "{e:?} vs {expected}"
    );
    // A probe on a path to values reports the same mean error.
    assert!((e.error["through_f"] - expected).abs() < 1e-12);
    assert!(e.accuracy.is_empty());
    assert_eq!(t.steps_per_epoch(), 3);
}

#[test]
fn tables_and_bindings_report_their_mistakes() {
    let csv = "a,b,label\n1,2,0\n3,,1\n4,x,2\n";
    let e = Table::from_csv("data.csv", csv.as_bytes()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "data.csv: line 4, column \"b\": expected a number or an empty cell, found \"x\""
    );
    let t = Table::from_csv("data.csv", "a,b,label\n1,2,0\n3,,1\n4,5,7\n".as_bytes()).unwrap();
    assert_eq!(t.n_rows(), 3);
    assert_eq!(t.row(1), &[Some(3.0), None, Some(1.0)]);
    let d = triangle(0, false);
    let bind = |object: &str, columns: Columns| {
        Dataset::new(&t, &[(object.to_string(), columns)], &d)
            .unwrap_err()
            .to_string()
    };
    assert_eq!(
        bind(
            "D",
            Columns::Labels {
                column: "label".into(),
                classes: 3
            }
        ),
        "data.csv: line 4, column \"label\": label 7 is not a class in 0..3"
    );
    assert_eq!(
        bind("E", Columns::Values(vec!["a".into(), "q".into()])),
        "object \"E\": unknown column \"q\" (the data has a, b, label)"
    );
    assert_eq!(
        bind("E", Columns::Values(vec!["a".into()])),
        "object \"E\": 1 columns given but one example has 2 values (f32[2])"
    );
    assert_eq!(
        bind(
            "S",
            Columns::Labels {
                column: "label".into(),
                classes: 3
            }
        ),
        "object \"S\": labels with 3 classes need type [3], found f32[1]"
    );
    assert_eq!(
        bind("Q", Columns::Values(vec![])),
        "data binds unknown object \"Q\""
    );
    // A term whose objects have no columns cannot train.
    let only_e = Dataset::new(&table(10, 0), &bindings()[..1], &d).unwrap();
    let params = d.params();
    let opt = Optimiser::new(Adam::new(0.1)).unwrap();
    assert_eq!(
        Trainer::new(d, params, opt, only_e, 0)
            .unwrap_err()
            .to_string(),
        "supervised \"syndrome\" reads object \"S\", which has no data columns"
    );
}

#[test]
fn checkpoints_from_another_diagram_are_refused() {
    let dir = scratch("refuse");
    let mut t = trainer(1);
    t.epoch(&Progress::hidden()).unwrap();
    let path = dir.join("c.safetensors");
    t.save_checkpoint(&path).unwrap();
    // The same arrows with a different hidden width.
    let mut d = Diagram::new();
    d.object("E", TensorType::new(DType::F32, [2])).unwrap();
    d.object("S", TensorType::new(DType::F32, [1])).unwrap();
    let p = mlp(2, 5, 1);
    let params = initialise(&p, &mut ChaCha8Rng::seed_from_u64(0));
    d.arrow(Arrow::new("f", "E", "S", p, params).unwrap())
        .unwrap();
    d.supervised(Supervised::new("syndrome", Path::of(["f"])))
        .unwrap();
    let data = Dataset::new(&table(10, 0), &bindings()[..2], &d).unwrap();
    let params = d.params();
    let mut other =
        Trainer::new(d, params, Optimiser::new(Adam::new(0.1)).unwrap(), data, 0).unwrap();
    let e = other.resume(&path).unwrap_err().to_string();
    assert_eq!(
        e,
        format!(
            "checkpoint {}: parameter `f.W1` has type f32[4, 2], expected f32[5, 2]",
            path.display()
        )
    );
    let e = other.resume(&dir.join("missing.safetensors")).unwrap_err();
    assert!(e.to_string().starts_with("checkpoint "), "{e}");
}

#[test]
fn outputs_that_cannot_be_written_leave_no_file() {
    let dir = scratch("unwritable");
    let mut t = trainer(2);
    let outputs = Outputs {
        metrics: Some(dir.join("no-such-dir").join("m.jsonl")),
        ..Outputs::default()
    };
    let e = t.run(1, &outputs, false).unwrap_err().to_string();
    assert!(e.contains("no-such-dir/m.jsonl"), "{e}");
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
}
