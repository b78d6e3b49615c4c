//! Batch normalisation over the channel axis 1 of x (N, C, ...), with `<tag>.scale` (ones) and
//! `<tag>.bias` (zeros) of shape (C): 2C parameters.
//!
//! In training mode a batch is normalised with its own mean and biased variance (over every
//! axis but 1); [`BatchNorm::train`] also returns the running statistics updated functionally,
//! running' = (1 - momentum) running + momentum batch (momentum 0.1 by default, as PyTorch,
//! with the biased variance, as flax). In evaluation mode the running statistics held by the
//! layer normalise every batch alike.

use rand::Rng;

use super::{param, Init, Mode};
use crate::tensor::{DType, Tensor, TensorType};
use crate::trace::{tag_scope, Value};

/// Running per-channel statistics (C): the mean and the biased variance.
#[derive(Debug, Clone, PartialEq)]
pub struct RunningStats {
    pub mean: Tensor,
    pub var: Tensor,
}

impl RunningStats {
    /// The initial statistics: mean 0, variance 1.
    pub fn initial(channels: usize, dtype: DType) -> RunningStats {
        let ty = TensorType::new(dtype, [channels]);
        RunningStats {
            mean: Tensor::zeros(&ty),
            var: Tensor::full(&ty, 1.0),
        }
    }
}

/// Batch normalisation of x (N, C, ...) over every axis but 1.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchNorm {
    /// Added to the variance; must be > 0.
    pub epsilon: f64,
    /// The weight of a batch in the running statistics' update.
    pub momentum: f64,
    pub mode: Mode,
    /// The statistics evaluation mode uses (initial ones when `None`).
    pub running: Option<RunningStats>,
}

impl BatchNorm {
    /// Training mode, epsilon 1e-5, momentum 0.1, initial running statistics.
    pub fn new() -> BatchNorm {
        BatchNorm {
            epsilon: crate::prim::BATCH_NORM_EPSILON,
            momentum: 0.1,
            mode: Mode::Train,
            running: None,
        }
    }

    /// The same layer in evaluation mode.
    pub fn eval(self) -> BatchNorm {
        BatchNorm {
            mode: Mode::Eval,
            ..self
        }
    }

    /// The same layer in training mode.
    pub fn training(self) -> BatchNorm {
        BatchNorm {
            mode: Mode::Train,
            ..self
        }
    }

    /// The same layer holding these running statistics.
    pub fn with_running(self, running: RunningStats) -> BatchNorm {
        BatchNorm {
            running: Some(running),
            ..self
        }
    }

    fn params<R: Rng + ?Sized>(&self, xt: &TensorType, rng: &mut R, tag: &str) -> [Value; 2] {
        let ty = TensorType::new(xt.dtype, [xt.dims().get(1).copied().unwrap_or(1)]);
        [
            param(&format!("{tag}.scale"), &ty, Init::Constant(1.0), rng),
            param(&format!("{tag}.bias"), &ty, Init::Zeros, rng),
        ]
    }

    /// The normalised batch with its own statistics, and the running statistics (`mean`,
    /// `var`, values of shape (C)) updated by this batch: (y, mean', var').
    #[track_caller]
    pub fn train<R: Rng + ?Sized>(
        &self,
        x: &Value,
        [mean, var]: [&Value; 2],
        rng: &mut R,
        tag: &str,
    ) -> [Value; 3] {
        let xt = match x.ty() {
            Ok(t) => t,
            Err(e) => return [(); 3].map(|_| Value::failed(e.clone())),
        };
        let [scale, bias] = self.params(&xt, rng, tag);
        let _tag = tag_scope(tag);
        let [y, batch_mean, batch_var] = x.batch_norm_train(&scale, &bias, self.epsilon);
        let m = self.momentum;
        let mix = |old: &Value, new: &Value| old * (1.0 - m) + new * m;
        [y, mix(mean, &batch_mean), mix(var, &batch_var)]
    }

    /// The layer in its mode: batch statistics (training) or the running ones (evaluation).
    #[track_caller]
    pub fn apply<R: Rng + ?Sized>(&self, x: &Value, rng: &mut R, tag: &str) -> Value {
        let xt = match x.ty() {
            Ok(t) => t,
            Err(e) => return Value::failed(e),
        };
        let [scale, bias] = self.params(&xt, rng, tag);
        let _tag = tag_scope(tag);
        match self.mode {
            Mode::Train => {
                let [y, _, _] = x.batch_norm_train(&scale, &bias, self.epsilon);
                y
            }
            Mode::Eval => {
                let channels = xt.dims().get(1).copied().unwrap_or(1);
                let stats = self
                    .running
                    .clone()
                    .unwrap_or_else(|| RunningStats::initial(channels, xt.dtype));
                let mean = Value::constant(stats.mean);
                let var = Value::constant(stats.var);
                x.batch_norm_infer([&scale, &bias, &mean, &var], self.epsilon)
            }
        }
    }
}

impl Default for BatchNorm {
    fn default() -> BatchNorm {
        BatchNorm::new()
    }
}
