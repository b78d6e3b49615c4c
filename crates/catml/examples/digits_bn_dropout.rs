//! An MLP with batch normalisation and dropout on the 8x8 UCI digits: linear 64 -> 64,
//! BatchNorm, relu, Dropout(0.2), linear -> 10, trained with cross-entropy and Adam.
//!
//! Training mode: each minibatch is normalised with its own statistics, dropout draws its mask
//! from a key folded from the seed and the step number, and the running statistics are updated
//! functionally (a second traced program returns them). Evaluation mode: the running statistics
//! normalise and dropout is the identity. The run fails below 95% held-out accuracy.
//!
//! `cargo run --release -p catml --example digits_bn_dropout`
//!
//! The digits loader is `digits_cnn`'s, so `examples/common` is loaded twice.
#![allow(clippy::duplicate_mod)]

use std::process::ExitCode;
use std::time::Instant;

#[path = "common/mod.rs"]
mod common;
#[path = "digits_cnn.rs"]
#[allow(dead_code)]
mod digits;

use catml::ir::Program;
use catml::nn::{seeded, BatchNorm, Dropout, Linear, RunningStats};
use catml::optim::{Adam, Optimiser};
use catml::prim::random::threefry::{fold_in, key_from_seed, key_tensor};
use catml::tensor::{DType, Params, Tensor, TensorType};
use catml::trace::{trace_named, Value};
use common::{argmax_rows, permutation, run, LossGrad, DT};

const SEED: u64 = 11;
const BATCH: usize = 32;
const EPOCHS: usize = 12;
const LR: f64 = 2e-3;
const HIDDEN: usize = 64;
const RATE: f64 = 0.2;
const BAR: f64 = 0.95;

/// The hidden layer's pre-activations (B, HIDDEN).
fn hidden(x: &Value) -> Value {
    Linear::new(HIDDEN).apply(x, &mut seeded(SEED), "fc1")
}

/// Logits from normalised hidden values.
fn head(h: &Value, key: Option<&Value>) -> Value {
    let h = h.relu();
    let h = match key {
        Some(k) => Dropout::new(RATE).apply(&h, k, "drop"),
        None => h,
    };
    Linear::new(10).apply(&h, &mut seeded(SEED + 1), "out")
}

fn x_type(batch: usize) -> (&'static str, TensorType) {
    ("x", TensorType::new(DT, [batch, 64]))
}

/// Training mode at batch size `batch`: the loss program (x, labels, key) and the program of
/// the updated running statistics (x, mean, var) -> (mean', var'), with the initial parameters.
fn build_train(batch: usize) -> (Program, Program, Params) {
    let bn = BatchNorm::new();
    let labels = ("labels", TensorType::new(DType::I64, [batch]));
    let key = ("key", TensorType::new(DType::I64, [2]));
    let stat = TensorType::new(DT, [HIDDEN]);
    let loss = trace_named(&[x_type(batch), labels, key], |v| {
        let h = hidden(&v[0]);
        let h = bn.apply(&h, &mut seeded(0), "bn");
        head(&h, Some(&v[2])).cross_entropy(&v[1])
    })
    .unwrap();
    let stats = trace_named(
        &[x_type(batch), ("mean", stat.clone()), ("var", stat)],
        |v| {
            let h = hidden(&v[0]);
            let [_, m, s] = bn.train(&h, [&v[1], &v[2]], &mut seeded(0), "bn");
            vec![m, s]
        },
    )
    .unwrap();
    (loss.program, stats.program, loss.params)
}

/// Evaluation mode: logits from x with these running statistics.
fn build_eval(batch: usize, running: &RunningStats) -> Program {
    let bn = BatchNorm::new().with_running(running.clone()).eval();
    trace_named(&[x_type(batch)], |v| {
        let h = bn.apply(&hidden(&v[0]), &mut seeded(0), "bn");
        head(&h, None)
    })
    .unwrap()
    .program
}

fn inputs(xs: &[[f32; 64]], ys: &[i64], idx: &[usize]) -> Vec<(&'static str, Tensor)> {
    let x: Vec<f32> = idx.iter().flat_map(|&i| xs[i]).collect();
    let y: Vec<i64> = idx.iter().map(|&i| ys[i]).collect();
    vec![
        ("x", Tensor::f32([idx.len(), 64], x).unwrap()),
        ("labels", Tensor::i64([idx.len()], y).unwrap()),
    ]
}

fn accuracy(
    running: &RunningStats,
    params: &Params,
    xs: &[[f32; 64]],
    ys: &[i64],
    idx: &[usize],
) -> f64 {
    let forward = build_eval(idx.len(), running);
    let logits = &run(&forward, params, &inputs(xs, ys, idx))[0];
    let right = argmax_rows(logits, 10)
        .iter()
        .zip(idx)
        .filter(|(p, &i)| **p as i64 == ys[i])
        .count();
    right as f64 / idx.len() as f64
}

fn main() -> ExitCode {
    let t0 = Instant::now();
    let (xs, ys) = digits::load();
    let mut rng = seeded(SEED);
    let order = permutation(&mut rng, xs.len());
    let (train, test) = order.split_at(xs.len() * 4 / 5);

    let (loss, stats, mut params) = build_train(BATCH);
    let step = LossGrad::new(loss);
    let mut running = RunningStats::initial(HIDDEN, DT);
    let mut opt = Optimiser::new(Adam::new(LR)).unwrap();
    let root = key_from_seed(SEED);
    let mut steps = 0u64;
    for epoch in 1..=EPOCHS {
        let perm = permutation(&mut rng, train.len());
        let batches = train.len() / BATCH;
        let mut total = 0.0;
        for k in 0..batches {
            let idx: Vec<usize> = perm[k * BATCH..(k + 1) * BATCH]
                .iter()
                .map(|&j| train[j])
                .collect();
            let mut data = inputs(&xs, &ys, &idx);
            data.push(("key", key_tensor(fold_in(root, steps))));
            steps += 1;
            let (l, g) = step.call(&params, &data);
            total += l;
            // The running statistics see the batch at the parameters it was normalised with.
            data.push(("mean", running.mean.clone()));
            data.push(("var", running.var.clone()));
            let mut new = run(&stats, &params, &data).into_iter();
            running = RunningStats {
                mean: new.next().unwrap(),
                var: new.next().unwrap(),
            };
            opt.step(&mut params, &g).unwrap();
        }
        println!(
            "epoch {epoch:2}: mean loss {:.4}, held-out accuracy {:.4} ({:.1}s)",
            total / batches as f64,
            accuracy(&running, &params, &xs, &ys, test),
            t0.elapsed().as_secs_f64()
        );
    }
    let acc = accuracy(&running, &params, &xs, &ys, test);
    println!(
        "final held-out accuracy {:.2}% (bar {:.0}%): {}",
        100.0 * acc,
        100.0 * BAR,
        if acc >= BAR { "pass" } else { "FAIL" }
    );
    if acc >= BAR {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
