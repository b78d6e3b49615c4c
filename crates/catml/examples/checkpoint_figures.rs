//! Memory and time of the gradient program under each checkpoint policy, for a 32-layer ReLU
//! MLP (width 64, batch 1024, f32) and the tiny transformer (batch 64): `peak_live_bytes` and
//! residual bytes from the cost interpreter, flops, and the median evaluation time of the
//! gradient program, printed as the rows of a Markdown table.
//!
//! `cargo run --release -p catml --example checkpoint_figures`

use std::time::Instant;

use catml::ad::{self, CheckpointPolicy, Vjp};
use catml::interp::{cost, eval};
use catml::ir::Program;
use catml::nn::seeded;
use catml::tensor::Tensor;

#[path = "tiny_transformer.rs"]
#[allow(dead_code)]
mod tiny_transformer;

#[path = "../benches/support/checkpoint_workload.rs"]
mod checkpoint_workload;

use checkpoint_workload::{arguments, mlp, mlp_data};

const SAMPLES: usize = 11;

/// The median wall time of evaluating `p` at `args`, in milliseconds.
fn median_ms(p: &Program, args: &[Tensor]) -> f64 {
    eval(p, args).expect("evaluation"); // warm-up
    let mut times: Vec<f64> = (0..SAMPLES)
        .map(|_| {
            let t = Instant::now();
            eval(p, args).expect("evaluation");
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[SAMPLES / 2]
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1 << 20) as f64
}

/// One row per policy (the first without one), memory and time relative to the first.
fn rows(model: &str, loss: &Program, args: &[Tensor], names: &[&str]) {
    let policies = [
        None,
        Some(CheckpointPolicy::NothingSaveable),
        Some(CheckpointPolicy::Dots),
        Some(CheckpointPolicy::save_only_these_names(
            names.iter().copied(),
        )),
        Some(CheckpointPolicy::SqrtSegments),
    ];
    let mut base: Option<(u64, f64)> = None;
    for policy in &policies {
        let v: Vjp = match policy {
            None => ad::grad(loss),
            Some(p) => ad::grad_with(loss, p),
        }
        .expect("gradient program");
        let c = cost(&v.program);
        let ms = median_ms(&v.program, args);
        let (peak0, ms0) = *base.get_or_insert((c.peak_live_bytes, ms));
        let label = policy
            .as_ref()
            .map_or("none".to_string(), |p| p.to_string());
        println!(
            "| {model} | {label} | {:.2} | {:.2} | {:.2}x | {:.3} | {:.1} | {:.2}x |",
            mib(c.peak_live_bytes),
            mib(v.residual_bytes() as u64),
            peak0 as f64 / c.peak_live_bytes as f64,
            c.flops as f64 / 1e9,
            ms,
            ms / ms0,
        );
    }
}

fn main() {
    println!(
        "| model | policy | peak live MiB | residual MiB | memory drop | GFLOP | ms (median of {SAMPLES}) | time |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- |");
    let (width, batch) = (64, 1024);
    let (loss, params) = mlp(32, width, batch);
    let args = arguments(&loss, &params, &mlp_data(width, batch));
    let every_fourth: Vec<String> = (3..32).step_by(4).map(|l| format!("l{l}")).collect();
    let names: Vec<&str> = every_fourth.iter().map(String::as_str).collect();
    rows("MLP 32x64, batch 1024", &loss, &args, &names);

    let batch = tiny_transformer::BATCH;
    let (_, loss, params) = tiny_transformer::build(batch);
    let data: Vec<Tensor> = tiny_transformer::sample(&mut seeded(5), batch)
        .into_iter()
        .map(|(_, t)| t)
        .collect();
    let args = arguments(&loss, &params, &data);
    rows(
        &format!("tiny transformer, batch {batch}"),
        &loss,
        &args,
        &["l0.att", "l1.att"],
    );
}
