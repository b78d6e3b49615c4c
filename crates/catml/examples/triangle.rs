//! Compositionality as a training objective (the triangle objective, docs/examples.md):
//! evidence E -> syndrome S -> diagnosis D.
//!
//! A seeded synthetic data set where the syndrome depends on the evidence and the diagnosis on
//! the syndrome only; most rows are labelled partially, (E, S) or (E, D). Three small MLPs
//! f: E -> S, g: S -> D and h: E -> D are trained with supervision alone, then with the
//! triangle equation h ≈ g ∘ f added, over 5 seeds; the table reports held-out accuracy of h
//! and of g ∘ f and the commutation defect ½‖h(x) − g(f(x))‖² (mean ± spread over seeds).
//!
//! ```text
//! cargo run --release --example triangle                # train and print the table
//! cargo run --release --example triangle -- --write     # also (re)write examples/triangle/*
//! cargo run --release --example triangle -- --full 0.1 --lambda 0.3   # other regimes
//! catml train examples/triangle.toml                    # one configuration, from the files
//! ```

use std::path::PathBuf;

use catml::diagram::{Arrow, Diagram, Distance, Equation, Path, Supervised};
use catml::ir::{json, Builder, InputKind, Program};
use catml::optim::{Adam, Optimiser, Schedule};
use catml::prim::Ops;
use catml::tensor::{DType, TensorType};
use catml::train::{initialise, Columns, Dataset, Outputs, Table, Trainer};
use rand_chacha::rand_core::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const BATCH: usize = 32;
const HIDDEN: usize = 16;
const N_E: usize = 8;
const N_S: usize = 3;
const CLASSES: usize = 4;
const EPOCHS: usize = 25;
const DATA_SEED: u64 = 2024;

/// tanh(x W1ᵀ + b1) W2ᵀ + b2 on f32 batches.
fn mlp(n_in: usize, n_out: usize) -> Program {
    let ty = |d: &[usize]| TensorType::new(DType::F32, d.to_vec());
    let mut b = Builder::new();
    let x = b.input("x", ty(&[BATCH, n_in]), InputKind::Data).unwrap();
    let w1 = b
        .input("W1", ty(&[HIDDEN, n_in]), InputKind::Param)
        .unwrap();
    let b1 = b.input("b1", ty(&[HIDDEN]), InputKind::Param).unwrap();
    let w2 = b
        .input("W2", ty(&[n_out, HIDDEN]), InputKind::Param)
        .unwrap();
    let b2 = b.input("b2", ty(&[n_out]), InputKind::Param).unwrap();
    b.set_name_prefix("hidden");
    let h = b.linear(x, w1, b1).unwrap();
    b.set_name_prefix("act");
    let h = b.tanh(h).unwrap();
    b.set_name_prefix("out");
    let y = b.linear(h, w2, b2).unwrap();
    b.finish(&[y]).unwrap()
}

fn unit(rng: &mut ChaCha8Rng) -> f64 {
    (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
}

fn normal(rng: &mut ChaCha8Rng) -> f64 {
    let (u, v) = (unit(rng).max(1e-300), unit(rng));
    (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
}

/// Six decimals, so the CSV files hold exactly the in-memory values.
fn round6(x: f64) -> f64 {
    (x * 1e6).round() / 1e6
}

fn columns() -> Vec<String> {
    let mut c: Vec<String> = (0..N_E).map(|i| format!("e{i}")).collect();
    c.extend((0..N_S).map(|i| format!("s{i}")));
    c.push("diagnosis".into());
    c
}

/// Knobs of the experiment (`--rows N --full F --lambda L`).
struct Settings {
    /// Training rows.
    rows: usize,
    /// Fraction of training rows labelled with both S and D; the rest is split evenly between
    /// (E, S) only and (E, D) only.
    full: f64,
    /// Weight of the triangle equation in the second configuration.
    lambda: f64,
    write: bool,
}

impl Settings {
    fn from_args() -> Settings {
        let mut s = Settings {
            rows: 1600,
            full: 0.03,
            lambda: 1.0,
            write: false,
        };
        let args: Vec<String> = std::env::args().skip(1).collect();
        let mut i = 0;
        while i < args.len() {
            let value = || -> f64 {
                args.get(i + 1)
                    .and_then(|v| v.parse().ok())
                    .unwrap_or_else(|| panic!("{} needs a number", args[i]))
            };
            match args[i].as_str() {
                "--write" => {
                    s.write = true;
                    i += 1;
                    continue;
                }
                "--rows" => s.rows = value() as usize,
                "--full" => s.full = value(),
                "--lambda" => s.lambda = value(),
                other => panic!("unknown argument {other}: use --write, --rows, --full, --lambda"),
            }
            i += 2;
        }
        s
    }
}

/// S = tanh(A E) + noise, D = argmax(B S + c) (a fixed map of S only). Training rows: a
/// fraction `full` labelled with both, the rest half (E, S) only and half (E, D) only;
/// held-out rows are fully labelled.
fn synthesise(settings: &Settings) -> (Table, Table) {
    let mut rng = ChaCha8Rng::seed_from_u64(DATA_SEED);
    let a: Vec<f64> = (0..N_S * N_E).map(|_| normal(&mut rng) * 0.6).collect();
    let b: Vec<f64> = (0..CLASSES * N_S).map(|_| normal(&mut rng) * 2.0).collect();
    let c: Vec<f64> = (0..CLASSES).map(|_| normal(&mut rng) * 0.3).collect();
    let sample = |rng: &mut ChaCha8Rng, labels: (bool, bool)| {
        let e: Vec<f64> = (0..N_E).map(|_| round6(normal(rng))).collect();
        let s: Vec<f64> = (0..N_S)
            .map(|i| {
                let z: f64 = (0..N_E).map(|j| a[i * N_E + j] * e[j]).sum();
                round6(z.tanh() + 0.05 * normal(rng))
            })
            .collect();
        let scores: Vec<f64> = (0..CLASSES)
            .map(|k| c[k] + (0..N_S).map(|i| b[k * N_S + i] * s[i]).sum::<f64>())
            .collect();
        let d = (0..CLASSES)
            .max_by(|&x, &y| scores[x].total_cmp(&scores[y]))
            .unwrap();
        let mut row: Vec<Option<f64>> = e.into_iter().map(Some).collect();
        row.extend(s.into_iter().map(|v| labels.0.then_some(v)));
        row.push(labels.1.then_some(d as f64));
        row
    };
    let train = (0..settings.rows)
        .map(|_| {
            let u = unit(&mut rng);
            let labels = if u < settings.full {
                (true, true)
            } else if u < settings.full + (1.0 - settings.full) / 2.0 {
                (true, false)
            } else {
                (false, true)
            };
            sample(&mut rng, labels)
        })
        .collect();
    let test = (0..800).map(|_| sample(&mut rng, (true, true))).collect();
    (
        Table::new("train.csv", columns(), train),
        Table::new("test.csv", columns(), test),
    )
}

fn bindings() -> Vec<(String, Columns)> {
    vec![
        (
            "E".into(),
            Columns::Values((0..N_E).map(|i| format!("e{i}")).collect()),
        ),
        (
            "S".into(),
            Columns::Values((0..N_S).map(|i| format!("s{i}")).collect()),
        ),
        (
            "D".into(),
            Columns::Labels {
                column: "diagnosis".into(),
                classes: CLASSES,
            },
        ),
    ]
}

fn arrows() -> [(&'static str, &'static str, &'static str, Program); 3] {
    [
        ("f", "E", "S", mlp(N_E, N_S)),
        ("g", "S", "D", mlp(N_S, CLASSES)),
        ("h", "E", "D", mlp(N_E, CLASSES)),
    ]
}

/// The diagram; the triangle equation is always measured, and trained when `weight` > 0.
fn diagram(seed: u64, triangle_weight: f64) -> Diagram {
    let mut d = Diagram::new();
    d.object("E", TensorType::new(DType::F32, [N_E])).unwrap();
    d.object("S", TensorType::new(DType::F32, [N_S])).unwrap();
    d.object("D", TensorType::new(DType::F32, [CLASSES]))
        .unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(1);
    for (name, src, dst, p) in arrows() {
        let params = initialise(&p, &mut rng);
        d.arrow(Arrow::new(name, src, dst, p, params).unwrap())
            .unwrap();
    }
    d.supervised(Supervised::new("syndrome", Path::of(["f"])))
        .unwrap();
    d.supervised(Supervised::new("diagnosis_g", Path::of(["g"])).loss(Distance::CrossEntropy))
        .unwrap();
    d.supervised(Supervised::new("diagnosis_h", Path::of(["h"])).loss(Distance::CrossEntropy))
        .unwrap();
    d.equation(
        Equation::new("triangle", Path::of(["h"]), Path::of(["f", "g"])).weight(triangle_weight),
    )
    .unwrap();
    d
}

/// Held-out (accuracy of h, accuracy of g ∘ f, defect) after training one configuration.
fn train(seed: u64, triangle_weight: f64, train: &Table, test: &Table) -> [f64; 3] {
    let d = diagram(seed, triangle_weight);
    let train_rows = Dataset::new(train, &bindings(), &d).unwrap();
    let test_rows = Dataset::new(test, &bindings(), &d).unwrap();
    let steps = (EPOCHS * train_rows.n_rows().div_ceil(BATCH)) as u64;
    let opt = Optimiser::new(Adam::new(0.01))
        .unwrap()
        .with_schedule(Schedule::Cosine {
            warmup: 50,
            total: steps,
            floor: 0.05,
        })
        .unwrap();
    let params = d.params();
    let mut t = Trainer::new(d, params, opt, train_rows, seed)
        .unwrap()
        .with_held_out(test_rows)
        .unwrap();
    t.probe("g_after_f", &Path::of(["f", "g"])).unwrap();
    t.run(EPOCHS, &Outputs::default(), true).unwrap();
    let e = &t.history().last().unwrap().eval;
    [
        e.accuracy["diagnosis_h"],
        e.accuracy["g_after_f"],
        e.defects["triangle"],
    ]
}

fn mean_sd(xs: &[f64]) -> (f64, f64) {
    let m = xs.iter().sum::<f64>() / xs.len() as f64;
    let v = xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (xs.len() - 1) as f64;
    (m, v.sqrt())
}

/// Writes the modules and the data that `examples/triangle.toml` names.
fn write_files(train: &Table, test: &Table) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/triangle");
    std::fs::create_dir_all(&dir).unwrap();
    for (name, _, _, p) in arrows() {
        let path = dir.join(format!("{name}.json"));
        catml::tensor::write_atomic(&path, json::to_string(&p).as_bytes()).unwrap();
    }
    train.write_csv(&dir.join("train.csv")).unwrap();
    test.write_csv(&dir.join("test.csv")).unwrap();
    eprintln!("wrote modules and data under {}", dir.display());
}

fn main() {
    let settings = Settings::from_args();
    let (train_table, test_table) = synthesise(&settings);
    if settings.write {
        write_files(&train_table, &test_table);
    }
    let seeds = [0u64, 1, 2, 3, 4];
    let triangle = format!("supervised + triangle λ={}", settings.lambda);
    let configs = [
        ("supervised only", 0.0),
        (triangle.as_str(), settings.lambda),
    ];
    println!(
        "{} training rows ({:.0}% with both S and D), {EPOCHS} epochs; held-out {} rows; \
         mean ± sd over {} seeds",
        train_table.n_rows(),
        100.0 * settings.full,
        test_table.n_rows(),
        seeds.len()
    );
    println!(
        "{:<28} {:>17} {:>17} {:>21}",
        "configuration", "accuracy h", "accuracy g∘f", "defect ½‖h − g∘f‖²"
    );
    for (label, weight) in configs {
        let runs: Vec<[f64; 3]> = seeds
            .iter()
            .map(|&s| train(s, weight, &train_table, &test_table))
            .collect();
        let col = |k: usize| mean_sd(&runs.iter().map(|r| r[k]).collect::<Vec<_>>());
        let ((ah, sh), (ag, sg), (df, sd)) = (col(0), col(1), col(2));
        println!("{label:<28} {ah:>9.3} ± {sh:<5.3} {ag:>9.3} ± {sg:<5.3} {df:>11.4} ± {sd:.4}");
    }
}
