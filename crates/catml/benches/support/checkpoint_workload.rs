//! The checkpointing workloads: a deep ReLU MLP's mean squared error, with deterministic data
//! and its arguments in input order (shared by the `checkpoint_figures` example and the tests).

#![allow(dead_code)]

use catml::ir::{InputKind, Program};
use catml::nn::{seeded, Linear};
use catml::tensor::{DType, Params, Tensor, TensorType};
use catml::trace::trace_named;

/// The mean squared error of a `layers`-deep ReLU MLP of `width` units on `batch` rows of
/// f32 (inputs `x` and `y`, both (batch, width)), and its initial parameters.
pub fn mlp(layers: usize, width: usize, batch: usize) -> (Program, Params) {
    let ty = TensorType::new(DType::F32, [batch, width]);
    let t = trace_named(&[("x", ty.clone()), ("y", ty)], |v| {
        let rng = &mut seeded(7);
        let mut h = v[0].clone();
        for l in 0..layers {
            h = Linear::new(width).apply(&h, rng, &format!("l{l}")).relu();
        }
        h.mse(&v[1])
    })
    .unwrap();
    (t.program, t.params)
}

/// A smooth, sign-changing f32 tensor of this shape, different for each `salt`.
pub fn wave(dims: &[usize], salt: f32) -> Tensor {
    let n: usize = dims.iter().product();
    let data = (0..n).map(|i| (i as f32 * 0.37 + salt).sin()).collect();
    Tensor::f32(dims.to_vec(), data).unwrap()
}

/// The MLP's data inputs `x` and `y`.
pub fn mlp_data(width: usize, batch: usize) -> Vec<Tensor> {
    vec![wave(&[batch, width], 0.0), wave(&[batch, width], 1.0)]
}

/// The program's arguments: parameters from `params`, data inputs from `data` in order.
pub fn arguments(p: &Program, params: &Params, data: &[Tensor]) -> Vec<Tensor> {
    let mut data = data.iter();
    p.inputs()
        .iter()
        .map(|i| match i.kind {
            InputKind::Param => params.get(&i.name).expect("parameter").clone(),
            InputKind::Data => data.next().expect("data input").clone(),
        })
        .collect()
}
