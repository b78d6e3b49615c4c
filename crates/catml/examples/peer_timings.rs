//! Times the peer workloads (see peers/README.md) and prints one JSON line per measurement:
//! `{"workload", "size", "dtype", "mode", "seconds", "flops"}` (flops of one call, by the cost
//! interpreter), seconds per call being the median of
//! repeated samples after a warm-up, each measurement taking about one second (`--quick`: a
//! fifth of that, with fewer samples). Each call writes its results over the previous call's
//! (`Executable::run_into`), so their buffers are reused.
//!
//! `cargo run --release -q -p catml --example peer_timings [-- --quick] [--only WORKLOAD]
//! [--size SIZE] [--dtype f32|f64] [--mode eval|value_and_grad] [--cpu] [--unchecked]
//! [--interpreted]`; `--unchecked` turns
//! the non-finite check off, to measure what it costs; `--interpreted` times the interpreter
//! (`interp::eval_with_options`, planning every call) instead of the compiled `Executable`.

// Shared with the benches, which use the parts this example does not.
#[allow(dead_code)]
#[path = "../benches/workloads/mod.rs"]
mod workloads;

use std::time::Instant;

use catml::interp::EvalOptions;

/// CPU seconds used so far by this process, all threads (from /proc/self/stat, in clock ticks
/// of 10 ms: meaningful over a whole measurement, not one call). `None` off Linux.
fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0)
}

/// Median seconds per call of `f`, with `samples` samples filling about `budget` seconds, and
/// the process CPU seconds per call over all samples.
fn measure(mut f: impl FnMut(), budget: f64, samples: usize) -> (f64, Option<f64>) {
    for _ in 0..3 {
        f();
    }
    let t0 = Instant::now();
    f();
    let once = t0.elapsed().as_secs_f64().max(1e-7);
    let inner = ((budget / samples as f64 / once).round() as usize).max(1);
    let cpu0 = cpu_seconds();
    let mut times: Vec<f64> = (0..samples)
        .map(|_| {
            let t0 = Instant::now();
            for _ in 0..inner {
                f();
            }
            t0.elapsed().as_secs_f64() / inner as f64
        })
        .collect();
    let calls = (samples * inner) as f64;
    let cpu = cpu0.zip(cpu_seconds()).map(|(a, b)| (b - a) / calls);
    times.sort_by(f64::total_cmp);
    (times[samples / 2], cpu)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let option = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1).cloned())
    };
    let (only, size, dtype) = (option("--only"), option("--size"), option("--dtype"));
    let only_mode = option("--mode");
    // Also report CPU time per call: under load, wall time says little about the work done.
    let show_cpu = args.iter().any(|a| a == "--cpu");
    let options = EvalOptions {
        check_non_finite: !args.iter().any(|a| a == "--unchecked"),
        ..EvalOptions::default()
    };
    let interpreted = args.iter().any(|a| a == "--interpreted");
    let (budget, samples) = if quick { (0.2, 5) } else { (1.0, 15) };
    for w in workloads::all() {
        let skip = only.as_ref().is_some_and(|o| *o != w.workload)
            || size.as_ref().is_some_and(|s| *s != w.size)
            || dtype.as_ref().is_some_and(|d| d != w.dtype_str());
        if skip {
            continue;
        }
        for mode in ["eval", "value_and_grad"] {
            if only_mode.as_ref().is_some_and(|m| m != mode) {
                continue;
            }
            let program = if mode == "eval" { &w.program } else { &w.vjp };
            let flops = catml::interp::cost(program).flops;
            // Each call's results replace the previous call's, whose buffers it reuses, as a
            // jitted JAX function's outputs replace the last ones in its allocator.
            let mut results = Vec::new();
            let call = |results: &mut Vec<_>| match (mode, interpreted) {
                ("eval", false) => w.eval_into(options, results),
                ("eval", true) => *results = w.eval_interpreted(options),
                (_, false) => w.value_and_grad_into(options, results),
                (_, true) => *results = w.value_and_grad_interpreted(options),
            };
            let step = || {
                call(&mut results);
                std::hint::black_box(&results);
            };
            let (seconds, cpu) = measure(step, budget, samples);
            let mut record = serde_json::json!({
                "workload": w.workload,
                "size": w.size,
                "dtype": w.dtype_str(),
                "mode": mode,
                "seconds": seconds,
                "flops": flops,
            });
            if show_cpu {
                record["cpu_seconds"] = cpu.into();
            }
            println!("{record}");
        }
    }
}
