//! The adding problem with T = 50: each step reads a value in [0, 1) and a marker, with
//! exactly two markers per sequence (one in each half); the target is the sum of the two marked
//! values. A GRU (hidden 32, `nn::Gru`, one scan node) reads the sequence and a linear
//! layer reads its last state; MSE loss, Adam. Always answering 1.0 scores MSE ≈ 1/6; the run
//! fails unless the test MSE is at least 10x lower.
//!
//! `cargo run --release -p catml --example gru_adding`

use std::process::ExitCode;
use std::time::Instant;

#[path = "common/mod.rs"]
mod common;

use catml::ir::Program;
use catml::nn::{seeded, ChaCha8Rng, Gru, Linear};
use catml::optim::{Adam, Optimiser};
use catml::tensor::{Params, Tensor, TensorType};
use catml::trace::{trace_named, Value};
use common::{below, run, unit, LossGrad, DT};

const SEED: u64 = 11;
const T: usize = 50;
const HIDDEN: usize = 32;
pub const BATCH: usize = 64;
const STEPS: usize = 1000;
const TEST: usize = 1000;
const LR: f64 = 3e-3;

/// `n` sequences as (T, n, 2) inputs, (n, 1) targets and zero (n, H) initial states.
pub fn sample(rng: &mut ChaCha8Rng, n: usize) -> Vec<(&'static str, Tensor)> {
    let mut xs = vec![0f32; T * n * 2];
    let mut ys = vec![0f32; n];
    for b in 0..n {
        let marks = [below(rng, T / 2), T / 2 + below(rng, T / 2)];
        for t in 0..T {
            let v = unit(rng) as f32;
            xs[(t * n + b) * 2] = v;
            if marks.contains(&t) {
                xs[(t * n + b) * 2 + 1] = 1.0;
                ys[b] += v;
            }
        }
    }
    vec![
        ("xs", Tensor::f32([T, n, 2], xs).unwrap()),
        ("target", Tensor::f32([n, 1], ys).unwrap()),
        (
            "h0",
            Tensor::f32([n, HIDDEN], vec![0.0; n * HIDDEN]).unwrap(),
        ),
    ]
}

/// The prediction (a linear read-out of the GRU's last state) for (T, B, 2) inputs.
fn predict(xs: &Value, h0: &Value, rng: &mut ChaCha8Rng) -> Value {
    let h = Gru::new(HIDDEN).apply(xs, h0, rng, "gru").last;
    Linear::new(1).apply(&h, rng, "out")
}

/// The prediction and MSE programs at batch size `batch`, with the initial parameters.
pub fn build(batch: usize) -> (Program, Program, Params) {
    let xs = ("xs", TensorType::new(DT, [T, batch, 2]));
    let target = ("target", TensorType::new(DT, [batch, 1]));
    let h0 = ("h0", TensorType::new(DT, [batch, HIDDEN]));
    let forward = trace_named(&[xs.clone(), h0.clone()], |v| {
        predict(&v[0], &v[1], &mut seeded(SEED))
    })
    .unwrap();
    let loss = trace_named(&[xs, h0, target], |v| {
        predict(&v[0], &v[1], &mut seeded(SEED)).mse(&v[2])
    })
    .unwrap();
    (forward.program, loss.program, loss.params)
}

fn mse(a: &Tensor, b: &Tensor) -> f64 {
    let (a, b) = (a.to_f64_vec(), b.to_f64_vec());
    a.iter()
        .zip(&b)
        .map(|(x, y)| (x - y) * (x - y))
        .sum::<f64>()
        / a.len() as f64
}

fn main() -> ExitCode {
    let t0 = Instant::now();
    let mut rng = seeded(SEED);
    let test = sample(&mut rng, TEST);
    let baseline = mse(&Tensor::full(&test[1].1.ty(), 1.0), &test[1].1);
    let (_, loss, mut params) = build(BATCH);
    let step = LossGrad::new(loss);
    let (forward, _, _) = build(TEST);
    let mut opt = Optimiser::new(Adam::new(LR))
        .unwrap()
        .with_clip(1.0)
        .unwrap();
    let test_mse = |params: &Params| mse(&run(&forward, params, &test)[0], &test[1].1);

    let mut recent = 0.0;
    for s in 1..=STEPS {
        let (l, g) = step.call(&params, &sample(&mut rng, BATCH));
        recent += l;
        opt.step(&mut params, &g).unwrap();
        if s % 250 == 0 {
            println!(
                "step {s:4}: mean train MSE {:.5}, test MSE {:.5} ({:.1}s)",
                recent / 250.0,
                test_mse(&params),
                t0.elapsed().as_secs_f64()
            );
            recent = 0.0;
        }
    }
    let m = test_mse(&params);
    let ok = m * 10.0 <= baseline;
    println!(
        "test MSE {m:.5} vs baseline (always 1.0) {baseline:.5}: {:.1}x better, bar 10x: {}",
        baseline / m,
        if ok { "pass" } else { "FAIL" }
    );
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
