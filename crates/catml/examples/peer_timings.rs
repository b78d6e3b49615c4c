//! Times the peer workloads (see peers/README.md) and prints one JSON line per measurement:
//! `{"workload", "size", "dtype", "mode", "seconds"}`, seconds per call being the median of
//! repeated samples after a warm-up, each measurement taking about one second (`--quick`: a
//! fifth of that, with fewer samples).
//!
//! `cargo run --release -q -p catml --example peer_timings [-- --quick]`

#[path = "../benches/workloads/mod.rs"]
mod workloads;

use std::time::Instant;

/// Median seconds per call of `f`, with `samples` samples filling about `budget` seconds.
fn measure(mut f: impl FnMut(), budget: f64, samples: usize) -> f64 {
    for _ in 0..3 {
        f();
    }
    let t0 = Instant::now();
    f();
    let once = t0.elapsed().as_secs_f64().max(1e-7);
    let inner = ((budget / samples as f64 / once).round() as usize).max(1);
    let mut times: Vec<f64> = (0..samples)
        .map(|_| {
            let t0 = Instant::now();
            for _ in 0..inner {
                f();
            }
            t0.elapsed().as_secs_f64() / inner as f64
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[samples / 2]
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let (budget, samples) = if quick { (0.2, 5) } else { (1.0, 15) };
    for w in workloads::all() {
        for mode in ["eval", "value_and_grad"] {
            let seconds = match mode {
                "eval" => measure(|| drop(std::hint::black_box(w.eval())), budget, samples),
                _ => measure(
                    || drop(std::hint::black_box(w.value_and_grad())),
                    budget,
                    samples,
                ),
            };
            println!(
                "{}",
                serde_json::json!({
                    "workload": w.workload,
                    "size": w.size,
                    "dtype": w.dtype_str(),
                    "mode": mode,
                    "seconds": seconds,
                })
            );
        }
    }
}
