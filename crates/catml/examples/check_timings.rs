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

use catml::interp::EvalOptions;

// Shared with `permute_timings`, which reports the fastest batch too.
#[allow(dead_code)]
#[path = "../benches/support/turns.rs"]
mod turns;

fn main() {
    let rounds = turns::rounds_arg(60);
    let [on, off] = [true, false].map(|check_non_finite| EvalOptions {
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
            // Each setting writes over its own previous results, reusing their buffers.
            let (mut out_a, mut out_b) = (Vec::new(), Vec::new());
            let mut run_checked = || {
                exe.run_into(inputs, on, &mut out_a).expect("runs");
            };
            let mut run_unchecked = || {
                exe.run_into(inputs, off, &mut out_b).expect("runs");
            };
            let [checked, unchecked] =
                turns::take_turns(rounds, [&mut run_checked, &mut run_unchecked]);
            let line = serde_json::json!({
                "workload": w.workload,
                "size": w.size,
                "dtype": w.dtype_str(),
                "mode": mode,
                "checked_total_ms": checked.total_ms,
                "unchecked_total_ms": unchecked.total_ms,
                "checked_median_ms": checked.median_ms,
                "unchecked_median_ms": unchecked.median_ms,
                "cost": checked.total_ms / unchecked.total_ms - 1.0,
            });
            println!("{line}");
        }
    }
}
