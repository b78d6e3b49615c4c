//! Per-example gradients of the digits CNN at batch 32 by `vmap(grad)`, f32.

use catml::interp::eval;
use criterion::{criterion_group, criterion_main, Criterion};

#[path = "support/per_example_workload.rs"]
mod per_example_workload;

fn per_example(c: &mut Criterion) {
    let (program, values) = per_example_workload::per_example_gradients();
    let mut group = c.benchmark_group("digits cnn per-example gradients, batch 32, f32");
    group.bench_function("vmap(grad)", |bench| {
        bench.iter(|| eval(&program, &values).unwrap())
    });
    group.finish();
}

criterion_group!(benches, per_example);
criterion_main!(benches);
