//! A small CNN on the 8x8 UCI optical digits (1,797 images, `examples/data/digits.csv.gz`):
//! conv 1->16 3x3, relu, max pool 2, conv 16->32 3x3, relu, max pool 2, linear -> 10, trained
//! with cross-entropy and Adam on seeded minibatches. The model is a `nn::Sequential`, traced
//! once, differentiated once (`ad::vjp`), and the VJP program is evaluated per minibatch. The last
//! 20% of a seeded shuffle is held out; the run fails below 97% held-out accuracy.
//!
//! `cargo run --release -p catml --example digits_cnn [-- --export DIR]`
//!
//! With `--export DIR` it also writes the trained logits program as an ONNX model
//! (`DIR/digits_cnn.onnx`, the parameters as initializers) and the held-out images, labels,
//! logits and accuracy (`DIR/digits_heldout.json`), which
//! `crates/catml-onnx/scripts/serve_digits.py DIR` serves with onnxruntime.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

#[path = "common/mod.rs"]
mod common;

use catml::ir::Program;
use catml::nn::{flatten, seeded, Conv2d, Linear, Pool2d, Sequential};
use catml::optim::{Adam, Optimiser};
use catml::tensor::{DType, Params, Tensor, TensorType};
use catml::trace::{trace_named, Value};
use common::{argmax_rows, permutation, run, LossGrad, DT};

pub const SEED: u64 = 7;
pub const BATCH: usize = 32;
const EPOCHS: usize = 15;
const LR: f64 = 3e-3;
const BAR: f64 = 0.97;

/// Pixels scaled to [0, 1] and labels.
pub fn load() -> (Vec<[f32; 64]>, Vec<i64>) {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/data/digits.csv.gz");
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(path).expect("digits.csv.gz"))
        .read_to_string(&mut text)
        .expect("gzip");
    let (mut xs, mut ys) = (Vec::new(), Vec::new());
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let v: Vec<f32> = line.split(',').map(|s| s.trim().parse().unwrap()).collect();
        let mut x = [0f32; 64];
        for (d, s) in x.iter_mut().zip(&v[..64]) {
            *d = s / 16.0;
        }
        xs.push(x);
        ys.push(v[64] as i64);
    }
    (xs, ys)
}

/// The network, layer by layer (`nn`): each layer's parameters are `<name>.W` and `<name>.b`.
pub fn net() -> Sequential {
    Sequential::new()
        .push("conv1", Conv2d::new(16, [3, 3]).pad(1))
        .push("relu1", |x: &Value| x.relu())
        .push("pool1", Pool2d::max([2, 2])) // (B, 16, 4, 4)
        .push("conv2", Conv2d::new(32, [3, 3]).pad(1))
        .push("relu2", |x: &Value| x.relu())
        .push("pool2", Pool2d::max([2, 2])) // (B, 32, 2, 2)
        .push("flatten", flatten)
        .push("out", Linear::new(10))
}

/// The logits program and the mean cross-entropy program at batch size `batch`, traced from
/// [`net`], with the initial parameters (drawn from `SEED`, the same in both).
pub fn build(batch: usize) -> (Program, Program, Params) {
    let x = ("x", TensorType::new(DT, [batch, 1, 8, 8]));
    let labels = ("labels", TensorType::new(DType::I64, [batch]));
    let net = net();
    let logits = |x: &Value| net.apply(x, &mut seeded(SEED), "");
    let forward = trace_named(std::slice::from_ref(&x), |v| logits(&v[0])).unwrap();
    let loss = trace_named(&[x, labels], |v| logits(&v[0]).cross_entropy(&v[1])).unwrap();
    (forward.program, loss.program, loss.params)
}

pub fn batch_tensors(xs: &[[f32; 64]], ys: &[i64], idx: &[usize]) -> Vec<(&'static str, Tensor)> {
    let x: Vec<f32> = idx.iter().flat_map(|&i| xs[i]).collect();
    let y: Vec<i64> = idx.iter().map(|&i| ys[i]).collect();
    vec![
        ("x", Tensor::f32([idx.len(), 1, 8, 8], x).unwrap()),
        ("labels", Tensor::i64([idx.len()], y).unwrap()),
    ]
}

fn accuracy(
    forward: &Program,
    params: &Params,
    xs: &[[f32; 64]],
    ys: &[i64],
    idx: &[usize],
) -> f64 {
    let logits = &run(forward, params, &batch_tensors(xs, ys, idx))[0];
    let pred = argmax_rows(logits, 10);
    let right = pred
        .iter()
        .zip(idx)
        .filter(|(p, &i)| **p as i64 == ys[i])
        .count();
    right as f64 / idx.len() as f64
}

/// Writes the logits program with trained parameters as ONNX, and the held-out set with
/// CatML's logits and accuracy as JSON.
fn export(
    dir: &Path,
    forward: &Program,
    params: &Params,
    data: &[(&str, Tensor)],
    accuracy: f64,
) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let model =
        catml::onnx::export(forward, params, &Default::default()).map_err(|e| e.to_string())?;
    catml::onnx::write_model(&model.model, &dir.join("digits_cnn.onnx"))
        .map_err(|e| e.to_string())?;
    let logits = &run(forward, params, data)[0];
    let held = serde_json::json!({
        "shape": data[0].1.shape().dims(),
        "x": data[0].1.to_f64_vec(),
        "labels": data[1].1.to_f64_vec(),
        "logits": logits.to_f64_vec(),
        "accuracy": accuracy,
    });
    let path = dir.join("digits_heldout.json");
    std::fs::write(&path, held.to_string()).map_err(|e| format!("{}: {e}", path.display()))
}

/// The directory after `--export`, if given.
fn export_dir() -> Option<PathBuf> {
    let args: Vec<String> = std::env::args().collect();
    let at = args.iter().position(|a| a == "--export")?;
    args.get(at + 1).map(PathBuf::from)
}

fn main() -> ExitCode {
    let t0 = Instant::now();
    let (xs, ys) = load();
    let mut rng = seeded(SEED);
    let order = permutation(&mut rng, xs.len());
    let split = xs.len() * 4 / 5;
    let (train, test) = order.split_at(split);
    println!(
        "digits: {} images, {} train, {} held out",
        xs.len(),
        train.len(),
        test.len()
    );

    let (_, loss, mut params) = build(BATCH);
    let step = LossGrad::new(loss);
    let (eval_forward, _, _) = build(test.len());
    let (train_forward, _, _) = build(train.len());
    let mut opt = Optimiser::new(Adam::new(LR)).unwrap();

    for epoch in 1..=EPOCHS {
        let perm = permutation(&mut rng, train.len());
        let mut total = 0.0;
        let batches = train.len() / BATCH;
        for k in 0..batches {
            let idx: Vec<usize> = perm[k * BATCH..(k + 1) * BATCH]
                .iter()
                .map(|&j| train[j])
                .collect();
            let (l, g) = step.call(&params, &batch_tensors(&xs, &ys, &idx));
            total += l;
            opt.step(&mut params, &g).unwrap();
        }
        println!(
            "epoch {epoch:2}: mean loss {:.4}, train accuracy {:.4}, held-out accuracy {:.4} ({:.1}s)",
            total / batches as f64,
            accuracy(&train_forward, &params, &xs, &ys, train),
            accuracy(&eval_forward, &params, &xs, &ys, test),
            t0.elapsed().as_secs_f64()
        );
    }
    let acc = accuracy(&eval_forward, &params, &xs, &ys, test);
    println!(
        "final held-out accuracy {:.2}% (bar {:.0}%): {}",
        100.0 * acc,
        100.0 * BAR,
        if acc >= BAR { "pass" } else { "FAIL" }
    );
    if let Some(dir) = export_dir() {
        let held = batch_tensors(&xs, &ys, test);
        if let Err(e) = export(&dir, &eval_forward, &params, &held, acc) {
            eprintln!("export: {e}");
            return ExitCode::FAILURE;
        }
        println!(
            "wrote {}/digits_cnn.onnx and digits_heldout.json",
            dir.display()
        );
    }
    if acc >= BAR {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
