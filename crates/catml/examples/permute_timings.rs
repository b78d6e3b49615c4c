//! Times the attention workload's two programs (`benches/support/attention_block.rs`) on two
//! executables in turn, a batch of calls each, in one process: one whose plan copies the head
//! permutes, one that reads and writes them in place (`EvalPlan::permuting_in_place`,
//! docs/memory.md). Taking turns within one process keeps this machine's slow and fast phases
//! out of the comparison. Prints one JSON line per program and plan: milliseconds per call,
//! the fastest batch, the median batch and the total over all batches.
//!
//! `cargo run --release -p catml --example permute_timings [-- --rounds N]`

use catml::interp::{EvalOptions, EvalPlan, Executable};
use catml::tensor::DType;

#[allow(dead_code)]
#[path = "../benches/support/attention_block.rs"]
mod attention_block;
#[path = "../benches/support/turns.rs"]
mod turns;

fn main() {
    let rounds = turns::rounds_arg(200);
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
        // Each executable writes over its own previous results, reusing their buffers.
        let [(_, a), (_, b)] = &exes;
        let (mut out_a, mut out_b) = (Vec::new(), Vec::new());
        let mut run_a = || {
            a.run_into(inputs, EvalOptions::default(), &mut out_a)
                .expect("runs");
        };
        let mut run_b = || {
            b.run_into(inputs, EvalOptions::default(), &mut out_b)
                .expect("runs");
        };
        let times = turns::take_turns(rounds, [&mut run_a, &mut run_b]);
        for ((plan, exe), t) in exes.iter().zip(times) {
            let line = serde_json::json!({
                "workload": "attention",
                "mode": mode,
                "plan": plan,
                "permutes_in_place": exe.plan().permutes_in_place(),
                "fastest_ms": t.fastest_ms,
                "median_ms": t.median_ms,
                "total_ms": t.total_ms,
            });
            println!("{line}");
        }
    }
}
