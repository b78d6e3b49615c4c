//! Times the attention workload's two programs (`benches/support/attention_block.rs`) on two
//! executables in turn, a batch of calls each, in one process: one whose plan copies the head
//! permutes, one that reads and writes them in place (`EvalPlan::permuting_in_place`,
//! docs/memory.md). Taking turns within one process keeps this machine's slow and fast phases
//! out of the comparison. Prints one JSON line per program and plan: milliseconds per call,
//! the fastest batch, the median batch and the total over all batches.
//!
//! `cargo run --release -p catml --example permute_timings [-- --rounds N]`

use std::time::Instant;

use catml::interp::{EvalOptions, EvalPlan, Executable};
use catml::tensor::DType;

#[allow(dead_code)]
#[path = "../benches/support/attention_block.rs"]
mod attention_block;

/// Calls per timed batch.
const BATCH: usize = 3;

fn main() {
    let rounds = std::env::args()
        .skip_while(|a| a != "--rounds")
        .nth(1)
        .map_or(200, |n| n.parse().expect("--rounds takes a count"));
    let w = attention_block::Workload::new(DType::F32);
    let programs = [
        ("forward", &w.inputs),
        ("value_and_grad", &w.backward_inputs),
    ];
    for (compiled, (mode, inputs)) in w.compiled.iter().zip(programs) {
        let p = compiled.program();
        let copied = EvalPlan::new(p)
            .expect("plans")
            .folding_sums(p)
            .fusing_passes(p);
        let in_place = copied.clone().permuting_in_place(p);
        let plans = [("copied", copied), ("in_place", in_place)];
        let exes = plans.map(|(name, plan)| {
            let exe = Executable::with_plan(p.clone(), plan).expect("its own plan");
            (name, exe)
        });
        let mut results = Vec::new();
        let mut times = [Vec::new(), Vec::new()];
        for round in 0..=rounds {
            for ((_, exe), t) in exes.iter().zip(&mut times) {
                let start = Instant::now();
                for _ in 0..BATCH {
                    exe.run_into(inputs, EvalOptions::default(), &mut results)
                        .expect("runs");
                }
                // Round 0 fills the buffer pools.
                if round > 0 {
                    t.push(start.elapsed().as_secs_f64() * 1e3 / BATCH as f64);
                }
            }
        }
        for ((plan, exe), mut t) in exes.iter().zip(times) {
            t.sort_by(f64::total_cmp);
            let line = serde_json::json!({
                "workload": "attention",
                "mode": mode,
                "plan": plan,
                "permutes_in_place": exe.plan().permutes_in_place(),
                "fastest_ms": t[0],
                "median_ms": t[t.len() / 2],
                "total_ms": t.iter().sum::<f64>(),
            });
            println!("{line}");
        }
    }
}
