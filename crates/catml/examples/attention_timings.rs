//! Prints CatML's attention timings as JSON lines for `peers/bench_attention.py`:
//! {"workload": "attention", "size": "8x128x128/4", "dtype": "f32", "mode": ..., "seconds": ..,
//! "flops": ..}
//! `flops` is one call's count by the cost interpreter (`interp::cost`) of the program timed: the
//! block, or the reverse program for `value_and_grad`.
//! Each figure is the median over samples of the mean time per call within a sample.
//! `--quick` takes fewer, shorter samples.

use std::time::{Duration, Instant};

use catml::tensor::DType;

#[path = "../benches/support/attention_block.rs"]
mod attention_block;

/// Median seconds per call of `f`, over `samples` samples of about `target` each.
fn time(mut f: impl FnMut(), samples: usize, target: Duration) -> f64 {
    f();
    let start = Instant::now();
    f();
    let once = start.elapsed().max(Duration::from_micros(1));
    let reps = ((target.as_secs_f64() / once.as_secs_f64()).ceil() as usize).max(1);
    let mut per_call: Vec<f64> = (0..samples)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..reps {
                f();
            }
            t.elapsed().as_secs_f64() / reps as f64
        })
        .collect();
    per_call.sort_by(f64::total_cmp);
    per_call[samples / 2]
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let (samples, target) = if quick {
        (5, Duration::from_millis(50))
    } else {
        (15, Duration::from_millis(100))
    };
    let size = format!(
        "{}x{}x{}/{}",
        attention_block::BATCH,
        attention_block::SEQ,
        attention_block::WIDTH,
        attention_block::HEADS
    );
    let w = attention_block::Workload::new(DType::F32);
    for (mode, compiled) in ["forward", "value_and_grad"].into_iter().zip(&w.compiled) {
        let flops = catml::interp::cost(compiled.program()).flops;
        let seconds = match mode {
            "forward" => time(
                || {
                    std::hint::black_box(w.forward());
                },
                samples,
                target,
            ),
            _ => time(
                || {
                    std::hint::black_box(w.value_and_grad());
                },
                samples,
                target,
            ),
        };
        println!(
            "{}",
            serde_json::json!({
                "workload": "attention",
                "size": size,
                "dtype": "f32",
                "mode": mode,
                "seconds": seconds,
                "flops": flops,
            })
        );
    }
}
