//! Compile time: what a first call pays before it evaluates anything. For the 784-512-512-10
//! MLP's value-and-grad, in f32: tracing the program (the builder calls), the VJP transform,
//! the evaluation plan of the VJP program (liveness and peak bytes), and the executable made
//! of it (that plan with sums folded, passes fused, permutes in place and checks left to
//! readers, and its buffer pool), apart and together. `cargo bench -p catml --bench compile`.

use catml::ad;
use catml::interp::{EvalPlan, Executable};
use catml::ir::Program;
use catml::tensor::DType;
use criterion::{criterion_group, criterion_main, BatchSize, Criterion};

// Only the MLP's program is used here; the rest serves the other benches.
#[allow(dead_code)]
mod workloads;

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("compile/mlp/f32");
    let program = workloads::mlp_program(DType::F32);
    let vjp = ad::vjp(&program).expect("differentiable").program;
    g.bench_function("trace", |b| b.iter(|| workloads::mlp_program(DType::F32)));
    g.bench_function("vjp", |b| {
        b.iter(|| ad::vjp(&program).expect("differentiable"))
    });
    g.bench_function("plan", |b| b.iter(|| EvalPlan::new(&vjp).expect("plans")));
    g.bench_function("executable", |b| {
        let made = |v: Program| Executable::new(v).expect("plans");
        b.iter_batched(|| vjp.clone(), made, BatchSize::SmallInput)
    });
    g.bench_function("trace+vjp+plan", |b| {
        b.iter(|| {
            let p = workloads::mlp_program(DType::F32);
            let v = ad::vjp(&p).expect("differentiable").program;
            EvalPlan::new(&v).expect("plans")
        })
    });
    g.bench_function("trace+vjp+executable", |b| {
        b.iter(|| {
            let p = workloads::mlp_program(DType::F32);
            let v = ad::vjp(&p).expect("differentiable").program;
            Executable::new(v).expect("plans")
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
