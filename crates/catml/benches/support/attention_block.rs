//! The attention workload shared by `benches/attention.rs` and `examples/attention_timings.rs`
//! (its programs, of any size, also serve the tests of permutes read in place):
//! one self-attention block (batch 8, sequence 128, width 128, 4 heads, no mask) with affine
//! projections; `forward` evaluates it, `value_and_grad` evaluates the reverse program of the
//! sum of its output (the value and the gradient with respect to every input). Both programs are
//! compiled once into an `Executable`, as a caller evaluating them many times would (the
//! tracing API's `value_and_grad` does the same).

use catml::ad::vjp;
use catml::interp::{EvalOptions, Executable};
use catml::ir::{Builder, InputKind, Program};
use catml::prim::attention::{multi_head_attention, AttentionSpec, AttentionWeights};
use catml::prim::{AttentionMask, Ops};
use catml::tensor::{DType, Tensor, TensorType};
use rand::{RngExt, SeedableRng};

pub const BATCH: usize = 8;
pub const SEQ: usize = 128;
pub const WIDTH: usize = 128;
pub const HEADS: usize = 4;

pub struct Workload {
    pub inputs: Vec<Tensor>,
    /// The inputs followed by the seed 1 of the scalar loss.
    pub backward_inputs: Vec<Tensor>,
    /// The block and the reverse program of the sum of its output, compiled.
    pub compiled: [Executable; 2],
}

impl Workload {
    pub fn new(dtype: DType) -> Workload {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0);
        let draw = |ty: &TensorType, scale: f64| {
            let data = (0..ty.numel())
                .map(|_| scale * (2.0 * rng.random::<f64>() - 1.0))
                .collect();
            Tensor::from_f64s(ty.dtype, ty.shape.dims().to_vec(), data).unwrap()
        };
        let sizes = [BATCH, SEQ, WIDTH, HEADS];
        let [(forward, inputs), (backward, backward_inputs)] =
            programs(dtype, sizes, AttentionMask::none(), draw);
        let compiled = [forward, backward].map(|p| Executable::new(p).expect("plans"));
        Workload {
            compiled,
            inputs,
            backward_inputs,
        }
    }

    pub fn forward(&self) -> Vec<Tensor> {
        self.compiled[0]
            .run(&self.inputs, EvalOptions::default())
            .unwrap()
    }

    pub fn value_and_grad(&self) -> Vec<Tensor> {
        self.compiled[1]
            .run(&self.backward_inputs, EvalOptions::default())
            .unwrap()
    }
}

/// A self-attention block of `[batch, sequence, width, heads]` with affine projections and
/// `mask`, and the reverse program of the sum of its output, each with its inputs: x, then
/// the weight and bias of q, k, v and o, each drawn by `draw(type, scale)` (scale 1 for x,
/// 1/√width for the rest), and for the reverse program the seed 1 last.
pub fn programs(
    dtype: DType,
    [batch, seq, width, heads]: [usize; 4],
    mask: AttentionMask,
    mut draw: impl FnMut(&TensorType, f64) -> Tensor,
) -> [(Program, Vec<Tensor>); 2] {
    let mut b = Builder::new();
    let mut inputs = Vec::new();
    let mut add = |b: &mut Builder, name: &str, dims: &[usize], scale: f64, kind| {
        let ty = TensorType::new(dtype, dims.to_vec());
        inputs.push(draw(&ty, scale));
        b.input(name, ty, kind).unwrap()
    };
    let x = add(&mut b, "x", &[batch, seq, width], 1.0, InputKind::Data);
    let s = 1.0 / (width as f64).sqrt();
    let mut w = Vec::new();
    for name in ["q", "k", "v", "o"] {
        let param = InputKind::Param;
        w.push(add(&mut b, &format!("W{name}"), &[width, width], s, param));
        w.push(add(&mut b, &format!("b{name}"), &[width], s, param));
    }
    let weights = AttentionWeights::from_array(w.try_into().expect("eight weights"));
    let spec = AttentionSpec {
        heads,
        mask,
        recompute_weights: false,
    };
    let y = multi_head_attention(&mut b, x, x, &weights, &spec).unwrap();
    let mut lb = b.clone();
    let forward = b.finish(&[y]).unwrap();
    let l = lb.sum(y, None).unwrap();
    let backward = vjp(&lb.finish(&[l]).unwrap()).unwrap().program;
    let mut seeded = inputs.clone();
    seeded.push(Tensor::scalar(dtype, 1.0));
    [(forward, inputs), (backward, seeded)]
}
