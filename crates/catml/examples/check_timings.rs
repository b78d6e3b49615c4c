//! What the non-finite check costs (docs/memory.md, "The non-finite check"): times the peer
//! workloads' mid-size executables (`benches/workloads`) with the check on and off, taking
//! turns a batch of calls at a time in one process, so that this machine's slow and fast phases
//! fall on both. Prints one JSON line per workload and mode: the total milliseconds over all
//! batches of each, their medians, and the check's cost as a fraction of the unchecked total.
//!
//! `cargo run --release -p catml --example check_timings [-- --rounds N]`

// Shared with the benches, which use the parts this example does not.
#[allow(dead_code)]
#[path = "../benches/workloads/mod.rs"]
mod workloads;

use std::time::Instant;

use catml::interp::EvalOptions;

/// Calls per timed batch.
const BATCH: usize = 3;

fn main() {
    let rounds = std::env::args()
        .skip_while(|a| a != "--rounds")
        .nth(1)
        .map_or(60, |n| n.parse().expect("--rounds takes a count"));
    let checks = [true, false].map(|check_non_finite| EvalOptions {
        check_non_finite,
        ..EvalOptions::default()
    });
    for w in workloads::all() {
        if w.size == "2x3" || w.workload == "adam_step" {
            continue;
        }
        for (mode, exe, inputs) in [
            ("eval", &w.compiled[0], &w.inputs),
            ("value_and_grad", &w.compiled[1], &w.vjp_args),
        ] {
            let mut results = Vec::new();
            let mut times = [Vec::new(), Vec::new()];
            for round in 0..=rounds {
                for (options, t) in checks.iter().zip(&mut times) {
                    let start = Instant::now();
                    for _ in 0..BATCH {
                        exe.run_into(inputs, *options, &mut results).expect("runs");
                    }
                    // Round 0 fills the buffer pools.
                    if round > 0 {
                        t.push(start.elapsed().as_secs_f64() * 1e3 / BATCH as f64);
                    }
                }
            }
            let [checked, unchecked] = times.map(|mut t| {
                t.sort_by(f64::total_cmp);
                (t.iter().sum::<f64>(), t[t.len() / 2])
            });
            let line = serde_json::json!({
                "workload": w.workload,
                "size": w.size,
                "dtype": w.dtype_str(),
                "mode": mode,
                "checked_total_ms": checked.0,
                "unchecked_total_ms": unchecked.0,
                "checked_median_ms": checked.1,
                "unchecked_median_ms": unchecked.1,
                "cost": checked.0 / unchecked.0 - 1.0,
            });
            println!("{line}");
        }
    }
}
