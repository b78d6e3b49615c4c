//! conv2d at batch 32, 3x32x32 input, 16 filters 3x3, padding 1, f32: forward, and value and
//! gradient of L = Σ y with respect to x, w and b (the VJP program, evaluated).

use catml::ad::vjp;
use catml::interp::eval;
use catml::ir::{Builder, InputKind, Program};
use catml::prim::{Conv2dAttrs, Ops};
use catml::tensor::{DType, Tensor, TensorType};
use criterion::{criterion_group, criterion_main, Criterion};

fn input(name: &str, dims: &[usize], b: &mut Builder, kind: InputKind) -> catml::ir::Var {
    b.input(name, TensorType::new(DType::F32, dims.to_vec()), kind)
        .unwrap()
}

/// The forward program and the value-and-gradient program.
fn programs() -> (Program, Program) {
    let mut b = Builder::new();
    let x = input("x", &[32, 3, 32, 32], &mut b, InputKind::Data);
    let w = input("w", &[16, 3, 3, 3], &mut b, InputKind::Param);
    let bias = input("b", &[16], &mut b, InputKind::Param);
    let y = b
        .conv2d(x, w, Some(bias), Conv2dAttrs::default().pad(1))
        .unwrap();
    let forward = b.clone().finish(&[y]).unwrap();
    let l = b.sum(y, None).unwrap();
    let loss = b.finish(&[l]).unwrap();
    (forward, vjp(&loss).unwrap().program)
}

fn values(p: &Program) -> Vec<Tensor> {
    p.inputs()
        .iter()
        .enumerate()
        .map(|(k, i)| {
            let n = i.ty.numel();
            let data = (0..n)
                .map(|j| ((j * 31 + k * 7) % 17) as f64 / 17.0 - 0.5)
                .collect();
            Tensor::from_f64s(DType::F32, i.ty.shape.clone(), data).unwrap()
        })
        .collect()
}

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
