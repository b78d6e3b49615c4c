//! Times per-example gradients of the digits CNN (batch 32, f32) by `vmap(grad)` and prints one
//! JSON line for `peers/bench_per_example.py`:
//!
//! {"workload": "digits_cnn", "size": "batch 32", "dtype": "f32", "mode": "per_example_grad", "seconds": ..}
//!
//! Each measurement is the median of 15 samples; a sample loops the call so that all samples
//! take about 1.5 s, as the peers' timings do. `cpu_seconds` is the process CPU time (all
//! threads) per call over the whole measurement, or null where /proc is unavailable.

use std::time::Instant;

use catml::interp::eval;

#[path = "../benches/support/per_example_workload.rs"]
mod per_example_workload;

const SAMPLES: usize = 15;
const BUDGET_SECONDS: f64 = 1.5;

/// User + system CPU seconds of this process (all threads) from /proc/self/stat, if readable.
/// On a shared machine this moves much less than wall time.
fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0) // USER_HZ is 100 on Linux
}

/// Median wall seconds per call, and CPU seconds per call over every call made.
fn measure(mut call: impl FnMut()) -> (f64, Option<f64>) {
    let cpu0 = cpu_seconds();
    for _ in 0..3 {
        call();
    }
    let t0 = Instant::now();
    call();
    let once = t0.elapsed().as_secs_f64().max(1e-7);
    let inner = ((BUDGET_SECONDS / SAMPLES as f64 / once).round() as usize).max(1);
    let mut times: Vec<f64> = (0..SAMPLES)
        .map(|_| {
            let t0 = Instant::now();
            for _ in 0..inner {
                call();
            }
            t0.elapsed().as_secs_f64() / inner as f64
        })
        .collect();
    let calls = (4 + SAMPLES * inner) as f64;
    let cpu = cpu0.zip(cpu_seconds()).map(|(a, b)| (b - a) / calls);
    times.sort_by(f64::total_cmp);
    (times[SAMPLES / 2], cpu)
}

fn main() {
    let (program, values) = per_example_workload::per_example_gradients();
    let (seconds, cpu_seconds) = measure(|| {
        eval(&program, &values).unwrap();
    });
    println!(
        "{}",
        serde_json::json!({
            "workload": "digits_cnn",
            "size": "batch 32",
            "dtype": "f32",
            "mode": "per_example_grad",
            "seconds": seconds,
            "cpu_seconds": cpu_seconds,
        })
    );
}
