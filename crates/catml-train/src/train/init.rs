//! Seeded initial values for a program's parameters: Glorot-uniform weights
//! U(−a, a), a = √(6 / (fan_in + fan_out)) with fan_out = dim 0 and fan_in the product of the
//! other dims, for parameters of rank ≥ 2; zeros for biases (rank ≤ 1).

use rand_chacha::rand_core::Rng;
use rand_chacha::ChaCha8Rng;

use crate::ir::Program;
use crate::tensor::{Params, Tensor};

/// A uniform draw from [0, 1) with 53 random bits.
fn unit(rng: &mut ChaCha8Rng) -> f64 {
    (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// Initial values for every parameter input of `program`, named as its inputs, drawn in input
/// order from `rng`.
pub fn initialise(program: &Program, rng: &mut ChaCha8Rng) -> Params {
    program
        .param_indices()
        .into_iter()
        .map(|i| {
            let input = &program.inputs()[i];
            let ty = &input.ty;
            let data = if ty.rank() >= 2 {
                let fan_out = ty.dims()[0];
                let fan_in = ty.numel() / fan_out;
                let a = (6.0 / (fan_in + fan_out) as f64).sqrt();
                (0..ty.numel())
                    .map(|_| a * (2.0 * unit(rng) - 1.0))
                    .collect()
            } else {
                vec![0.0; ty.numel()]
            };
            let t = Tensor::from_f64s(ty.dtype, ty.shape.clone(), data).expect("numel values");
            (input.name.clone(), t)
        })
        .collect()
}
