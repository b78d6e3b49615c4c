//! conv2d at batch 32, 3x32x32 input, 16 filters 3x3, padding 1, f32: forward, and value and
//! gradient of L = Σ y with respect to x, w and b (the VJP program, evaluated).

use catml::interp::eval;
use criterion::{criterion_group, criterion_main, Criterion};

#[path = "support/conv_workload.rs"]
mod conv_workload;

use conv_workload::{programs, values};

fn conv2d(c: &mut Criterion) {
    let (forward, grad) = programs();
    let (xf, xg) = (values(&forward), values(&grad));
    let mut group = c.benchmark_group("conv2d 32x3x32x32/16x3x3 f32");
    group.bench_function("forward", |bench| {
        bench.iter(|| eval(&forward, &xf).unwrap())
    });
    group.bench_function("value_and_grad", |bench| {
        bench.iter(|| eval(&grad, &xg).unwrap())
    });
    group.finish();
}

criterion_group!(benches, conv2d);
criterion_main!(benches);
