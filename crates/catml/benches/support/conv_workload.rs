//! The conv2d workload shared by `benches/conv.rs` and `examples/conv_timings.rs`: batch 32,
//! 3x32x32 input, 16 filters 3x3, padding 1, f32; the forward program and the VJP program of
//! L = Σ y (value and gradient with respect to x, w and b), with fixed inputs.

use catml::ad::vjp;
use catml::ir::{Builder, InputKind, Program};
use catml::prim::{Conv2dAttrs, Ops};
use catml::tensor::{DType, Tensor, TensorType};

/// The forward program and the value-and-gradient program.
pub fn programs() -> (Program, Program) {
    let mut b = Builder::new();
    let ty = |dims: &[usize]| TensorType::new(DType::F32, dims.to_vec());
    let x = b.input("x", ty(&[32, 3, 32, 32]), InputKind::Data).unwrap();
    let w = b.input("w", ty(&[16, 3, 3, 3]), InputKind::Param).unwrap();
    let bias = b.input("b", ty(&[16]), InputKind::Param).unwrap();
    let y = b
        .conv2d(x, w, Some(bias), Conv2dAttrs::default().pad(1))
        .unwrap();
    let forward = b.clone().finish(&[y]).unwrap();
    let l = b.sum(y, None).unwrap();
    let loss = b.finish(&[l]).unwrap();
    (forward, vjp(&loss).unwrap().program)
}

/// Deterministic inputs in [-0.5, 0.5) for every input of `p`.
pub fn values(p: &Program) -> Vec<Tensor> {
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
