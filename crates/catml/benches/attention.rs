//! Criterion timings of one attention block (see `support/attention_block.rs`), f32.

use catml::tensor::DType;
use criterion::{criterion_group, criterion_main, Criterion};

#[path = "support/attention_block.rs"]
mod attention_block;

fn attention(c: &mut Criterion) {
    let w = attention_block::Workload::new(DType::F32);
    let mut g = c.benchmark_group("attention_8x128x128_4_f32");
    g.sample_size(20);
    g.bench_function("forward", |b| b.iter(|| w.forward()));
    g.bench_function("value_and_grad", |b| b.iter(|| w.value_and_grad()));
    g.finish();
}

criterion_group!(benches, attention);
criterion_main!(benches);
