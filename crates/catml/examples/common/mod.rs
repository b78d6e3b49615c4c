//! Shared by the trained-model examples: arguments by input name, one VJP program per loss
//! evaluated per minibatch, seeded shuffling.

#![allow(dead_code)]

use catml::ad::{vjp, Vjp};
use catml::interp::eval;
use catml::ir::{InputKind, Program};
use catml::nn::ChaCha8Rng;
use catml::tensor::{DType, Params, Tensor};
use rand::Rng;

/// The dtype of every model here.
pub const DT: DType = DType::F32;

/// The program's arguments: parameters by name, data inputs by name from `data`.
pub fn arguments(p: &Program, params: &Params, data: &[(&str, Tensor)]) -> Vec<Tensor> {
    p.inputs()
        .iter()
        .map(|i| match i.kind {
            InputKind::Param => params.get(&i.name).expect("parameter").clone(),
            _ => data
                .iter()
                .find(|(n, _)| *n == i.name)
                .unwrap_or_else(|| panic!("no data for input {}", i.name))
                .1
                .clone(),
        })
        .collect()
}

/// Evaluates a program at `params` and `data`.
pub fn run(p: &Program, params: &Params, data: &[(&str, Tensor)]) -> Vec<Tensor> {
    eval(p, &arguments(p, params, data)).expect("evaluation")
}

/// A scalar loss program and its VJP, taken once.
pub struct LossGrad {
    pub loss: Program,
    pub vjp: Vjp,
}

impl LossGrad {
    pub fn new(loss: Program) -> LossGrad {
        let vjp = vjp(&loss).expect("vjp");
        LossGrad { loss, vjp }
    }

    /// The loss and its gradient with respect to every parameter.
    pub fn call(&self, params: &Params, data: &[(&str, Tensor)]) -> (f64, Params) {
        let mut args = arguments(&self.loss, params, data);
        args.extend(
            self.loss
                .output_types()
                .iter()
                .map(|t| Tensor::full(t, 1.0)),
        );
        let out = eval(&self.vjp.program, &args).expect("evaluation");
        let mut grads = Params::new();
        for (i, input) in self.loss.inputs().iter().enumerate() {
            if input.kind == InputKind::Param {
                let k = self
                    .vjp
                    .layout
                    .gradient_output(i)
                    .expect("a gradient per parameter");
                grads.insert(input.name.clone(), out[k].clone());
            }
        }
        (out[0].to_f64_vec()[0], grads)
    }
}

/// u ~ U[0, 1) from one draw.
pub fn unit(rng: &mut ChaCha8Rng) -> f64 {
    (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// A uniform index below n.
pub fn below(rng: &mut ChaCha8Rng, n: usize) -> usize {
    (unit(rng) * n as f64) as usize % n
}

/// 0..n in a seeded random order (Fisher-Yates).
pub fn permutation(rng: &mut ChaCha8Rng, n: usize) -> Vec<usize> {
    let mut p: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        p.swap(i, below(rng, i + 1));
    }
    p
}

/// The index of the largest entry of each row of a (rows, cols) tensor, flattened.
pub fn argmax_rows(t: &Tensor, cols: usize) -> Vec<usize> {
    t.to_f64_vec()
        .chunks(cols)
        .map(|r| {
            (0..cols)
                .max_by(|&a, &b| r[a].partial_cmp(&r[b]).unwrap())
                .unwrap()
        })
        .collect()
}
