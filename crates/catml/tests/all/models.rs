//! Shortened runs of the trained-model examples: a few Adam steps each; the loss falls and
//! held-out accuracy (or error) clears a bar.
//!
//! Each example carries its own copy of `examples/common`, so the file is loaded more than once.
#![allow(clippy::duplicate_mod)]

use catml::nn::seeded;
use catml::optim::{Adam, Optimiser};
use catml::tensor::{Params, Tensor};

#[path = "../../examples/digits_cnn.rs"]
#[allow(dead_code)]
mod digits_cnn;
#[path = "../../examples/gru_adding.rs"]
#[allow(dead_code)]
mod gru_adding;
#[path = "../../examples/tiny_transformer.rs"]
#[allow(dead_code)]
mod tiny_transformer;

#[path = "../../examples/common/mod.rs"]
mod common;

/// `steps` Adam steps on the batches `next` draws: the mean loss of the first and last
/// quarter, and the trained parameters.
fn train(
    loss: catml::ir::Program,
    mut params: Params,
    lr: f64,
    steps: usize,
    mut next: impl FnMut(usize) -> Vec<(&'static str, Tensor)>,
) -> (f64, f64, Params) {
    let step = common::LossGrad::new(loss);
    let mut opt = Optimiser::new(Adam::new(lr))
        .unwrap()
        .with_clip(1.0)
        .unwrap();
    let mut losses = Vec::new();
    for s in 0..steps {
        let (l, g) = step.call(&params, &next(s));
        assert!(l.is_finite());
        losses.push(l);
        opt.step(&mut params, &g).unwrap();
    }
    let q = (steps / 4).max(1);
    let mean = |xs: &[f64]| xs.iter().sum::<f64>() / xs.len() as f64;
    (mean(&losses[..q]), mean(&losses[steps - q..]), params)
}

/// The fraction of rows of (rows, classes) logits whose largest entry is the label.
fn accuracy(logits: &Tensor, labels: &[i64], classes: usize) -> f64 {
    let pred = common::argmax_rows(logits, classes);
    let right = pred
        .iter()
        .zip(labels)
        .filter(|(p, l)| **p as i64 == **l)
        .count();
    right as f64 / labels.len() as f64
}

#[test]
fn digits_cnn_learns() {
    let (xs, ys) = digits_cnn::load();
    assert_eq!((xs.len(), ys.len()), (1797, 1797));
    // The example's split: the last 20% of a seeded shuffle is held out.
    let order = common::permutation(&mut seeded(digits_cnn::SEED), xs.len());
    let (train_idx, held) = order.split_at(xs.len() * 4 / 5);
    let b = digits_cnn::BATCH;
    let (_, loss, params) = digits_cnn::build(b);
    let batches = train_idx.len() / b;
    let (first, last, params) = train(loss, params, 3e-3, 150, |s| {
        let k = s % batches;
        digits_cnn::batch_tensors(&xs, &ys, &train_idx[k * b..(k + 1) * b])
    });
    assert!(last < 0.7 * first, "loss {first} -> {last}");
    let (forward, _, _) = digits_cnn::build(held.len());
    let data = digits_cnn::batch_tensors(&xs, &ys, held);
    let logits = &common::run(&forward, &params, &data)[0];
    let labels: Vec<i64> = held.iter().map(|&i| ys[i]).collect();
    let acc = accuracy(logits, &labels, 10);
    assert!(acc > 0.9, "held-out accuracy {acc} after 150 steps");
}

#[test]
fn gru_adding_learns() {
    let (_, loss, params) = gru_adding::build(32);
    let mut rng = seeded(1);
    let (first, last, params) = train(loss, params, 1e-2, 400, |_| {
        gru_adding::sample(&mut rng, 32)
    });
    assert!(last < first, "loss {first} -> {last}");
    // Always answering 1.0 scores about 1/6; the bar is the example's, ten times lower.
    let test = gru_adding::sample(&mut seeded(2), 200);
    let (forward, _, _) = gru_adding::build(200);
    let y = common::run(&forward, &params, &test)[0].to_f64_vec();
    let t = test[1].1.to_f64_vec();
    let mse = y
        .iter()
        .zip(&t)
        .map(|(a, b)| (a - b) * (a - b))
        .sum::<f64>()
        / t.len() as f64;
    assert!(mse < 1.0 / 60.0, "test MSE {mse} after 400 steps");
}

#[test]
fn tiny_transformer_learns() {
    let (_, loss, params) = tiny_transformer::build(32);
    let mut rng = seeded(1);
    let (first, last, params) = train(loss, params, 3e-3, 60, |_| {
        tiny_transformer::sample(&mut rng, 32)
    });
    assert!(last < 0.8 * first, "loss {first} -> {last}");
    // Chance is 1 in 10; the example's bar is 0.95.
    let test = tiny_transformer::sample(&mut seeded(2), 100);
    let (forward, _, _) = tiny_transformer::build(100);
    let logits = &common::run(&forward, &params, &test)[0];
    let acc = accuracy(logits, test[1].1.as_i64().unwrap().data(), 10);
    assert!(acc > 0.9, "held-out token accuracy {acc} after 60 steps");
}
