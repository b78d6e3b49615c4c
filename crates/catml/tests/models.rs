//! Shortened runs of the trained-model examples: a few Adam steps each, and the loss falls.
//!
//! Each example carries its own copy of `examples/common`, so the file is loaded more than once.
#![allow(clippy::duplicate_mod)]

use catml::nn::seeded;
use catml::optim::{Adam, Optimiser};
use catml::tensor::{Params, Tensor};

#[path = "../examples/digits_cnn.rs"]
#[allow(dead_code)]
mod digits_cnn;
#[path = "../examples/gru_adding.rs"]
#[allow(dead_code)]
mod gru_adding;
#[path = "../examples/tiny_transformer.rs"]
#[allow(dead_code)]
mod tiny_transformer;

#[path = "../examples/common/mod.rs"]
mod common;

/// `steps` Adam steps on the batches `next` draws; the mean loss of the first and last quarter.
fn train(
    loss: catml::ir::Program,
    mut params: Params,
    lr: f64,
    steps: usize,
    mut next: impl FnMut(usize) -> Vec<(&'static str, Tensor)>,
) -> (f64, f64) {
    let step = common::LossGrad::new(loss);
    let mut opt = Optimiser::new(Adam::new(lr)).unwrap();
    let mut losses = Vec::new();
    for s in 0..steps {
        let (l, g) = step.call(&params, &next(s));
        assert!(l.is_finite());
        losses.push(l);
        opt.step(&mut params, &g).unwrap();
    }
    let q = (steps / 4).max(1);
    let mean = |xs: &[f64]| xs.iter().sum::<f64>() / xs.len() as f64;
    (mean(&losses[..q]), mean(&losses[steps - q..]))
}

#[test]
fn digits_cnn_loss_falls() {
    let (xs, ys) = digits_cnn::load();
    assert_eq!((xs.len(), ys.len()), (1797, 1797));
    let (_, loss, params) = digits_cnn::build(digits_cnn::BATCH);
    let b = digits_cnn::BATCH;
    let (first, last) = train(loss, params, 3e-3, 40, |s| {
        let idx: Vec<usize> = (s * b..(s + 1) * b).collect();
        digits_cnn::batch_tensors(&xs, &ys, &idx)
    });
    assert!(last < 0.7 * first, "loss {first} -> {last}");
}

#[test]
fn gru_adding_loss_falls() {
    let (_, loss, params) = gru_adding::build(16);
    let mut rng = seeded(1);
    let (first, last) = train(loss, params, 1e-2, 40, |_| gru_adding::sample(&mut rng, 16));
    assert!(last < first, "loss {first} -> {last}");
}

#[test]
fn tiny_transformer_loss_falls() {
    let (_, loss, params) = tiny_transformer::build(16);
    let mut rng = seeded(1);
    let (first, last) = train(loss, params, 3e-3, 40, |_| {
        tiny_transformer::sample(&mut rng, 16)
    });
    assert!(last < 0.8 * first, "loss {first} -> {last}");
}
