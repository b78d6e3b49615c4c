//! Fused elementwise passes (docs/memory.md, "Fused elementwise passes") on one Adam step over
//! 2^20 parameters, in f32 and f64, eval and value-and-grad: an `Executable` with the plan's
//! chains fused and one without (`Executable::with_plan`), each call writing its results over
//! the last's. `cargo bench -p catml --bench fused`.

use criterion::{criterion_group, criterion_main, Criterion};

use catml::interp::{EvalOptions, EvalPlan, Executable};
use catml::tensor::DType;

// Shared with the other benches, which use the parts this one does not.
#[allow(dead_code)]
mod workloads;

fn bench(c: &mut Criterion) {
    let options = EvalOptions::default();
    for dtype in [DType::F32, DType::F64] {
        let w = workloads::adam_step(dtype, 1 << 20);
        let mut g = c.benchmark_group(format!("adam_step/{}/{}", w.size, w.dtype_str()));
        g.sample_size(30);
        for (mode, p, args) in [
            ("eval", &w.program, &w.inputs),
            ("value_and_grad", &w.vjp, &w.vjp_args),
        ] {
            let plain = EvalPlan::new(p).unwrap();
            let fused = plain.clone().fusing_passes(p);
            assert!(fused.fused_passes() > 0, "{mode}: chains to fuse");
            for (label, plan) in [("unfused", plain), ("fused", fused)] {
                let exe = Executable::with_plan(p.clone(), plan).unwrap();
                let mut results = Vec::new();
                g.bench_function(format!("{mode} {label}"), |b| {
                    b.iter(|| exe.run_into(args, options, &mut results).unwrap())
                });
            }
        }
        g.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
