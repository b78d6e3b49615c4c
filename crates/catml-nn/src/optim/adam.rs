//! Adam and AdamW (Kingma & Ba; Loshchilov & Hutter), as in PyTorch's `torch.optim.Adam` and
//! `AdamW`. At step t = 1, 2, ...:
//!
//! ```text
//! Adam:   g ← ∇ + λ p                      (weight decay enters the gradient: L2)
//! AdamW:  p ← p (1 − η λ)                  (decoupled: decay acts on the weights directly)
//! m ← β1 m + (1 − β1) g,     v ← β2 v + (1 − β2) g²
//! m̂ ← m / (1 − β1^t),        v̂ ← v / (1 − β2^t)
//! p ← p − η m̂ / (√v̂ + ε)
//! ```
//!
//! With L2 the decay is rescaled by 1/√v̂ like any gradient; decoupled decay is not.

use super::update::{buffer, tensor_like};
use super::OptimError;
use crate::tensor::{Params, Tensor};

/// Adam's hyperparameters; `decoupled` makes it AdamW.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Adam {
    pub lr: f64,
    pub beta1: f64,
    pub beta2: f64,
    pub eps: f64,
    pub weight_decay: f64,
    pub decoupled: bool,
}

impl Adam {
    /// Adam with β1 = 0.9, β2 = 0.999, ε = 1e-8 and no weight decay.
    pub fn new(lr: f64) -> Adam {
        Adam {
            lr,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay: 0.0,
            decoupled: false,
        }
    }

    /// AdamW: Adam with decoupled weight decay `weight_decay`.
    pub fn adamw(lr: f64, weight_decay: f64) -> Adam {
        Adam {
            weight_decay,
            decoupled: true,
            ..Adam::new(lr)
        }
    }

    pub fn betas(mut self, beta1: f64, beta2: f64) -> Adam {
        self.beta1 = beta1;
        self.beta2 = beta2;
        self
    }

    pub fn eps(mut self, eps: f64) -> Adam {
        self.eps = eps;
        self
    }

    /// L2 weight decay (Adam) or decoupled decay (AdamW), whichever this is.
    pub fn weight_decay(mut self, weight_decay: f64) -> Adam {
        self.weight_decay = weight_decay;
        self
    }

    pub(crate) fn validate(&self) -> Result<(), OptimError> {
        use super::optimiser::non_negative;
        non_negative("lr", self.lr)?;
        non_negative("weight_decay", self.weight_decay)?;
        for (field, value) in [("beta1", self.beta1), ("beta2", self.beta2)] {
            if !(0.0..1.0).contains(&value) {
                return Err(OptimError::Config {
                    field,
                    value,
                    reason: "must be in [0, 1)",
                });
            }
        }
        if self.eps.is_nan() || self.eps <= 0.0 {
            return Err(OptimError::Config {
                field: "eps",
                value: self.eps,
                reason: "must be positive",
            });
        }
        Ok(())
    }

    /// Updates one parameter at step `t` (1-based), with moments `m/<name>` and `v/<name>`.
    pub(crate) fn update(
        &self,
        lr: f64,
        t: u64,
        name: &str,
        p: &Tensor,
        g: &Tensor,
        state: &mut Params,
    ) -> Result<Tensor, OptimError> {
        let (mk, vk) = (format!("m/{name}"), format!("v/{name}"));
        let mut pv = p.to_f64_vec();
        let mut gv = g.to_f64_vec();
        let n = pv.len();
        let mut m = buffer(state, &mk, p)?.unwrap_or_else(|| vec![0.0; n]);
        let mut v = buffer(state, &vk, p)?.unwrap_or_else(|| vec![0.0; n]);
        if self.weight_decay != 0.0 {
            if self.decoupled {
                let keep = 1.0 - lr * self.weight_decay;
                pv.iter_mut().for_each(|p| *p *= keep);
            } else {
                for (g, p) in gv.iter_mut().zip(&pv) {
                    *g += self.weight_decay * p;
                }
            }
        }
        let t = i32::try_from(t).unwrap_or(i32::MAX);
        let c1 = 1.0 - self.beta1.powi(t);
        let c2 = 1.0 - self.beta2.powi(t);
        for i in 0..n {
            let g = gv[i];
            m[i] = self.beta1 * m[i] + (1.0 - self.beta1) * g;
            v[i] = self.beta2 * v[i] + (1.0 - self.beta2) * g * g;
            let m_hat = m[i] / c1;
            let v_hat = v[i] / c2;
            pv[i] -= lr * m_hat / (v_hat.sqrt() + self.eps);
        }
        state.insert(mk, tensor_like(p, m));
        state.insert(vk, tensor_like(p, v));
        Ok(tensor_like(p, pv))
    }
}
