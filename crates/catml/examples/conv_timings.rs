//! Times conv2d (batch 32, 3x32x32 input, 16 filters 3x3, padding 1, f32) forward and value and
//! gradient of L = Σ y, and prints one JSON line per measurement for `peers/bench_conv.py`:
//!
//! {"workload": "conv2d", "size": "32x3x32x32/16x3x3", "dtype": "f32", "mode": "forward", "seconds": ..,
//! "flops": ..}
//!
//! Each program is compiled once into an `Executable`, and each call writes its results over
//! the previous call's (`Executable::run_into`). Each measurement is the median of 15 samples; a
//! sample loops the call so that all samples take about 1.5 s, as the peers' timings do
//! (`--quick`: 5 samples in about 0.2 s). `cpu_seconds` is the process CPU time (all
//! threads) per call over the whole measurement, or null where /proc is unavailable. `flops`
//! is one call's count by the cost interpreter (`interp::cost`) of the program timed: the
//! forward program, or the VJP program for `value_and_grad`.

use std::time::Instant;

use catml::interp::{cost, EvalOptions, Executable};

#[path = "../benches/support/conv_workload.rs"]
mod conv_workload;

use conv_workload::{programs, values};

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

/// Median wall seconds per call over `samples` samples filling about `budget` seconds, and CPU
/// seconds per call over every call made.
fn measure(mut call: impl FnMut(), budget: f64, samples: usize) -> (f64, Option<f64>) {
    let cpu0 = cpu_seconds();
    for _ in 0..3 {
        call();
    }
    let t0 = Instant::now();
    call();
    let once = t0.elapsed().as_secs_f64().max(1e-7);
    let inner = ((budget / samples as f64 / once).round() as usize).max(1);
    let mut times: Vec<f64> = (0..samples)
        .map(|_| {
            let t0 = Instant::now();
            for _ in 0..inner {
                call();
            }
            t0.elapsed().as_secs_f64() / inner as f64
        })
        .collect();
    let calls = (4 + samples * inner) as f64;
    let cpu = cpu0.zip(cpu_seconds()).map(|(a, b)| (b - a) / calls);
    times.sort_by(f64::total_cmp);
    (times[samples / 2], cpu)
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let (budget, samples) = if quick { (0.2, 5) } else { (1.5, 15) };
    let (forward, grad) = programs();
    let (xf, xg) = (values(&forward), values(&grad));
    for (mode, p, x) in [("forward", forward, &xf), ("value_and_grad", grad, &xg)] {
        let flops = cost(&p).flops;
        let exe = Executable::new(p).unwrap();
        let mut results = Vec::new();
        let call = || {
            exe.run_into(x, EvalOptions::default(), &mut results)
                .unwrap()
        };
        let (seconds, cpu_seconds) = measure(call, budget, samples);
        println!(
            "{}",
            serde_json::json!({
                "workload": "conv2d",
                "size": "32x3x32x32/16x3x3",
                "dtype": "f32",
                "mode": mode,
                "seconds": seconds,
                "cpu_seconds": cpu_seconds,
                "flops": flops,
            })
        );
    }
}
