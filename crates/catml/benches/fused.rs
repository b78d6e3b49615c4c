//! Fused elementwise passes (docs/memory.md, "Fused elementwise passes") on one Adam step over
//! 2^20 parameters, in f32 and f64, eval and value-and-grad: the same plan without and with its
//! chains fused, both run by `eval_planned` (neither keeps buffers between calls, so only the
//! fusing differs), and the compiled `Executable`. `cargo bench -p catml --bench fused`.

use criterion::{criterion_group, criterion_main, Criterion};

use catml::interp::{eval_planned, EvalOptions, EvalPlan};
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
            g.bench_function(format!("{mode} unfused"), |b| {
                b.iter(|| eval_planned(p, &plain, args, options).unwrap())
            });
            g.bench_function(format!("{mode} fused"), |b| {
                b.iter(|| eval_planned(p, &fused, args, options).unwrap())
            });
        }
        let mut results = Vec::new();
        g.bench_function("eval executable", |b| {
            b.iter(|| w.eval_into(options, &mut results))
        });
        g.bench_function("value_and_grad executable", |b| {
            b.iter(|| w.value_and_grad_into(options, &mut results))
        });
        g.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
