//! A tiny decoder-only transformer (2 layers, 2 heads, causal attention, pre-layer-norm,
//! embeddings by `take`) learns to reverse a sequence: the input is 8 tokens over a vocabulary
//! of 10, a separator, then the reversed tokens; the loss is the cross-entropy of the 8 reversed
//! tokens, each predicted from everything before it. Held-out token accuracy (teacher forced)
//! must reach 95%.
//!
//! `cargo run --release -p catml --example tiny_transformer`

use std::process::ExitCode;
use std::time::Instant;

#[path = "common/mod.rs"]
mod common;

use catml::ir::Program;
use catml::nn::{
    param, seeded, ChaCha8Rng, Embedding, Init, LayerNorm, Linear, MultiHeadAttention,
};
use catml::optim::{Adam, Optimiser};
use catml::tensor::{DType, Params, Tensor, TensorType};
use catml::trace::{trace_named, Value};
use common::{argmax_rows, below, run, LossGrad, DT};

const SEED: u64 = 3;
const LEN: usize = 8;
const VOCAB: usize = 10;
const SEP: i64 = VOCAB as i64;
/// Tokens read: LEN inputs, the separator, the first LEN - 1 reversed tokens.
const T: usize = 2 * LEN;
const D: usize = 32;
const HEADS: usize = 2;
const LAYERS: usize = 2;
pub const BATCH: usize = 64;
const STEPS: usize = 400;
const TEST: usize = 500;
const LR: f64 = 3e-3;
const BAR: f64 = 0.95;

/// `n` sequences: the (n, T) tokens read and the (n LEN) reversed tokens to predict.
pub fn sample(rng: &mut ChaCha8Rng, n: usize) -> Vec<(&'static str, Tensor)> {
    let (mut tokens, mut targets) = (Vec::new(), Vec::new());
    for _ in 0..n {
        let s: Vec<i64> = (0..LEN).map(|_| below(rng, VOCAB) as i64).collect();
        let rev: Vec<i64> = s.iter().rev().copied().collect();
        tokens.extend(&s);
        tokens.push(SEP);
        tokens.extend(&rev[..LEN - 1]);
        targets.extend(rev);
    }
    vec![
        ("tokens", Tensor::i64([n, T], tokens).unwrap()),
        ("targets", Tensor::i64([n * LEN], targets).unwrap()),
    ]
}

/// One pre-norm block on (B, T, D): causal self-attention, then a 4x MLP on the (B T, D) rows.
fn block(x: &Value, l: usize, rng: &mut ChaCha8Rng) -> Value {
    let name = |part: &str| format!("l{l}.{part}");
    let h = LayerNorm::new().apply(x, rng, &name("ln1"));
    let a = MultiHeadAttention::new(HEADS, D)
        .causal()
        .apply(&h, rng, &name("att"));
    let x = x + &a;
    let batch = x.ty().unwrap().dims()[0];
    let h = LayerNorm::new().apply(&x, rng, &name("ln2"));
    let h = h.reshape([batch * T, D]);
    let h = Linear::new(4 * D).apply(&h, rng, &name("up")).relu();
    let h = Linear::new(D).apply(&h, rng, &name("down"));
    &x + &h.reshape([batch, T, D])
}

/// The (B LEN, VOCAB) logits of the reversed tokens for (B, T) tokens.
fn logits(tokens: &Value, rng: &mut ChaCha8Rng) -> Value {
    let batch = tokens.ty().unwrap().dims()[0];
    let embed = Embedding {
        init: Init::Normal { std: 0.1 },
        ..Embedding::new(VOCAB + 1, D)
    };
    let x = embed.apply(tokens, rng, "embed");
    let pos = param(
        "pos",
        &TensorType::new(DT, [T, D]),
        Init::Normal { std: 0.1 },
        rng,
    );
    let mut x = &x + &pos.broadcast_in_dim([batch, T, D], &[1, 2]);
    for l in 0..LAYERS {
        x = block(&x, l, rng);
    }
    let x = LayerNorm::new().apply(&x, rng, "ln_f");
    let logits = Linear::new(VOCAB).apply(&x.reshape([batch * T, D]), rng, "head");
    // Positions LEN .. 2 LEN - 1 (the separator onwards) predict the reversed tokens.
    let logits = logits
        .reshape([batch, T, VOCAB])
        .gather(1, &(LEN..T).collect::<Vec<_>>());
    logits.reshape([batch * LEN, VOCAB])
}

/// The logits and mean cross-entropy programs at batch size `batch`, with the initial
/// parameters (drawn from `SEED`).
pub fn build(batch: usize) -> (Program, Program, Params) {
    let tokens = ("tokens", TensorType::new(DType::I64, [batch, T]));
    let targets = ("targets", TensorType::new(DType::I64, [batch * LEN]));
    let forward = trace_named(std::slice::from_ref(&tokens), |v| {
        logits(&v[0], &mut seeded(SEED))
    })
    .unwrap();
    let loss = trace_named(&[tokens, targets], |v| {
        logits(&v[0], &mut seeded(SEED)).cross_entropy(&v[1])
    })
    .unwrap();
    (forward.program, loss.program, loss.params)
}

fn main() -> ExitCode {
    let t0 = Instant::now();
    let mut rng = seeded(SEED);
    let test = sample(&mut rng, TEST);
    let (_, loss, mut params) = build(BATCH);
    let step = LossGrad::new(loss);
    let (forward, _, _) = build(TEST);
    let mut opt = Optimiser::new(Adam::new(LR))
        .unwrap()
        .with_clip(1.0)
        .unwrap();
    let accuracy = |params: &Params| {
        let pred = argmax_rows(&run(&forward, params, &test)[0], VOCAB);
        let want = test[1].1.as_i64().unwrap().data().to_vec();
        let right = pred
            .iter()
            .zip(&want)
            .filter(|(p, w)| **p as i64 == **w)
            .count();
        right as f64 / want.len() as f64
    };

    let mut recent = 0.0;
    for s in 1..=STEPS {
        let (l, g) = step.call(&params, &sample(&mut rng, BATCH));
        recent += l;
        opt.step(&mut params, &g).unwrap();
        if s % 100 == 0 {
            println!(
                "step {s:4}: mean train loss {:.4}, held-out token accuracy {:.4} ({:.1}s)",
                recent / 100.0,
                accuracy(&params),
                t0.elapsed().as_secs_f64()
            );
            recent = 0.0;
        }
    }
    // Causality: changing the last token read moves no logits but the last position's.
    let mut changed = test.clone();
    let mut toks = changed[0].1.as_i64().unwrap().data().to_vec();
    for row in toks.chunks_mut(T) {
        row[T - 1] = (row[T - 1] + 1) % VOCAB as i64;
    }
    changed[0].1 = Tensor::i64([TEST, T], toks).unwrap();
    let (a, b) = (
        run(&forward, &params, &test),
        run(&forward, &params, &changed),
    );
    let (a, b) = (a[0].to_f64_vec(), b[0].to_f64_vec());
    let causal = (0..TEST * LEN)
        .filter(|r| r % LEN != LEN - 1)
        .all(|r| a[r * VOCAB..(r + 1) * VOCAB] == b[r * VOCAB..(r + 1) * VOCAB]);
    println!("earlier logits unchanged by a later token: {causal}");
    let acc = accuracy(&params);
    let ok = acc >= BAR && causal;
    println!(
        "final held-out token accuracy {:.2}% (bar {:.0}%): {}",
        100.0 * acc,
        100.0 * BAR,
        if ok { "pass" } else { "FAIL" }
    );
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
