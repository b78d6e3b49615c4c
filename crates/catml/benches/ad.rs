//! Eval and value-and-grad (eval of the VJP program with all-ones seeds) of the peer workloads:
//! the tied residual block at (2, 3) and (256, 512) and the 784-512-512-10 tanh MLP at batch
//! 256, in f32 and f64, each by the compiled `Executable` (each call's results written over
//! the last's) and by the interpreter (planning every call). `cargo bench -p catml --bench ad`.

use criterion::{criterion_group, criterion_main, Criterion};

// The Adam step serves the fused-pass bench.
#[allow(dead_code)]
mod workloads;

fn bench(c: &mut Criterion) {
    for w in workloads::all() {
        let mut g = c.benchmark_group(format!("{}/{}/{}", w.workload, w.size, w.dtype_str()));
        if w.size != "2x3" {
            g.sample_size(20);
        }
        let options = catml::interp::EvalOptions::default();
        let mut results = Vec::new();
        g.bench_function("eval", |b| b.iter(|| w.eval_into(options, &mut results)));
        g.bench_function("value_and_grad", |b| {
            b.iter(|| w.value_and_grad_into(options, &mut results))
        });
        g.bench_function("eval interpreted", |b| {
            b.iter(|| w.eval_interpreted(options))
        });
        g.bench_function("value_and_grad interpreted", |b| {
            b.iter(|| w.value_and_grad_interpreted(options))
        });
        g.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
