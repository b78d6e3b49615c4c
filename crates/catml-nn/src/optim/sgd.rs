//! Stochastic gradient descent with momentum, Nesterov momentum and (coupled, L2) weight decay,
//! following PyTorch's `torch.optim.SGD` with zero dampening:
//!
//! ```text
//! g ← ∇ + λ p                       (weight decay λ)
//! b ← g               on the first step,  b ← μ b + g  after   (momentum μ > 0)
//! d ← g + μ b         (Nesterov),          d ← b       otherwise (d ← g without momentum)
//! p ← p − η d
//! ```

use super::update::{buffer, tensor_like};
use super::OptimError;
use crate::tensor::{Params, Tensor};

/// SGD's hyperparameters (the learning rate is the base rate before any schedule).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sgd {
    pub lr: f64,
    pub momentum: f64,
    pub nesterov: bool,
    pub weight_decay: f64,
}

impl Sgd {
    /// Plain SGD with learning rate `lr`.
    pub fn new(lr: f64) -> Sgd {
        Sgd {
            lr,
            momentum: 0.0,
            nesterov: false,
            weight_decay: 0.0,
        }
    }

    pub fn momentum(mut self, momentum: f64) -> Sgd {
        self.momentum = momentum;
        self
    }

    pub fn nesterov(mut self, nesterov: bool) -> Sgd {
        self.nesterov = nesterov;
        self
    }

    pub fn weight_decay(mut self, weight_decay: f64) -> Sgd {
        self.weight_decay = weight_decay;
        self
    }

    pub(crate) fn validate(&self) -> Result<(), OptimError> {
        super::optimiser::non_negative("lr", self.lr)?;
        super::optimiser::non_negative("weight_decay", self.weight_decay)?;
        if !(0.0..1.0).contains(&self.momentum) {
            return Err(OptimError::Config {
                field: "momentum",
                value: self.momentum,
                reason: "must be in [0, 1)",
            });
        }
        if self.nesterov && self.momentum == 0.0 {
            return Err(OptimError::Config {
                field: "momentum",
                value: self.momentum,
                reason: "nesterov needs a positive momentum",
            });
        }
        Ok(())
    }

    /// Updates one parameter with learning rate `lr`, reading and writing its momentum buffer
    /// `momentum/<name>` in `state`.
    pub(crate) fn update(
        &self,
        lr: f64,
        name: &str,
        p: &Tensor,
        g: &Tensor,
        state: &mut Params,
    ) -> Result<Tensor, OptimError> {
        let key = format!("momentum/{name}");
        let mut pv = p.to_f64_vec();
        let mut gv = g.to_f64_vec();
        if self.weight_decay != 0.0 {
            for (g, p) in gv.iter_mut().zip(&pv) {
                *g += self.weight_decay * p;
            }
        }
        if self.momentum != 0.0 {
            let b = match buffer(state, &key, p)? {
                None => gv.clone(),
                Some(mut b) => {
                    for (b, g) in b.iter_mut().zip(&gv) {
                        *b = self.momentum * *b + g;
                    }
                    b
                }
            };
            if self.nesterov {
                for (g, b) in gv.iter_mut().zip(&b) {
                    *g += self.momentum * b;
                }
            } else {
                gv.clone_from(&b);
            }
            state.insert(key, tensor_like(p, b));
        }
        for (p, d) in pv.iter_mut().zip(&gv) {
            *p -= lr * d;
        }
        Ok(tensor_like(p, pv))
    }
}
