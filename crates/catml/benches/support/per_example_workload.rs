//! Per-example gradients of the digits CNN (`examples/digits_cnn.rs`'s network: conv 1->16 3x3,
//! relu, max pool 2, conv 16->32 3x3, relu, max pool 2, linear -> 10; mean cross-entropy; f32),
//! shared by `benches/per_example.rs` and `examples/per_example_timings.rs`: the gradient
//! program of one example's loss, batched over 32 examples by `vmap` (images and labels
//! batched, parameters shared), with fixed inputs.

use catml::ad::grad;
use catml::ir::{InputKind, Program};
use catml::nn::{flatten, seeded, Conv2d, Linear, Pool2d, Sequential};
use catml::tensor::{DType, Tensor, TensorType};
use catml::trace::{trace_named, Value};
use catml::transform::vmap;

pub const BATCH: usize = 32;

/// The network of `examples/digits_cnn.rs`.
fn net() -> Sequential {
    Sequential::new()
        .push("conv1", Conv2d::new(16, [3, 3]).pad(1))
        .push("relu1", |x: &Value| x.relu())
        .push("pool1", Pool2d::max([2, 2]))
        .push("conv2", Conv2d::new(32, [3, 3]).pad(1))
        .push("relu2", |x: &Value| x.relu())
        .push("pool2", Pool2d::max([2, 2]))
        .push("flatten", flatten)
        .push("out", Linear::new(10))
}

/// The batched per-example gradient program (outputs: each example's loss, then each
/// parameter's per-example gradient) and its inputs: 32 images, 32 labels, the parameters.
pub fn per_example_gradients() -> (Program, Vec<Tensor>) {
    let inputs = [
        ("x", TensorType::new(DType::F32, [1, 1, 8, 8])),
        ("labels", TensorType::new(DType::I64, [1])),
    ];
    let net = net();
    let loss = trace_named(&inputs, |v| {
        net.apply(&v[0], &mut seeded(7), "").cross_entropy(&v[1])
    })
    .unwrap();
    let g = grad(&loss.program).unwrap().program;
    let mut in_axes = vec![Some(0), Some(0)];
    in_axes.resize(g.n_inputs(), None);
    let out_axes = vec![Some(0); g.outputs().len()];
    let q = vmap(&g, BATCH, &in_axes, &out_axes).unwrap();
    let pixels = (0..BATCH * 64)
        .map(|j| ((j * 31) % 17) as f32 / 17.0)
        .collect();
    let mut values = vec![
        Tensor::f32([BATCH, 1, 1, 8, 8], pixels).unwrap(),
        Tensor::i64([BATCH, 1], (0..BATCH as i64).map(|i| i % 10).collect()).unwrap(),
    ];
    for input in q.inputs().iter().filter(|i| i.kind == InputKind::Param) {
        values.push(loss.params.get(&input.name).unwrap().clone());
    }
    (q, values)
}
