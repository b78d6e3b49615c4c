//! Value methods for the statistics primitives: means, the position of a maximum and batch
//! normalisation. Each is one [`Value::apply`] of the primitive the `Ops` method of the same
//! name makes.

use std::panic::Location;
use std::sync::Arc;

use super::value::{apply_at, Value};
use crate::prim::{Argmax, BatchNorm, BatchNormMode, BatchNormOutput, Mean};

impl Value {
    /// The mean over `axes` (every axis if `None`); the axes disappear from the shape.
    #[track_caller]
    pub fn mean(&self, axes: Option<&[usize]>) -> Value {
        let prim = Arc::new(Mean::new(axes.map(<[usize]>::to_vec)));
        self.unary_at(Location::caller(), prim)
    }

    /// The first position of the maximum along `axis`, as i64 (the axis is removed). It
    /// carries no derivative: gradients do not flow through it.
    #[track_caller]
    pub fn argmax(&self, axis: usize) -> Value {
        self.unary_at(Location::caller(), Arc::new(Argmax { axis }))
    }

    /// Batch normalisation of x (N, C, ...) with the batch's own statistics: the normalised
    /// values, the batch mean (C) and the biased batch variance (C). A layer updates its
    /// running statistics from the last two.
    #[track_caller]
    pub fn batch_norm_train(&self, scale: &Value, bias: &Value, epsilon: f64) -> [Value; 3] {
        let at = Location::caller();
        [
            BatchNormOutput::Y,
            BatchNormOutput::Mean,
            BatchNormOutput::Var,
        ]
        .map(|output| {
            let p = BatchNorm::new(epsilon, BatchNormMode::Training, output);
            apply_at(at, Arc::new(p), &[self, scale, bias])
        })
    }

    /// Batch normalisation of x (N, C, ...) with given per-channel statistics (C).
    #[track_caller]
    pub fn batch_norm_infer(&self, [scale, bias, mean, var]: [&Value; 4], epsilon: f64) -> Value {
        let p = BatchNorm::new(epsilon, BatchNormMode::Inference, BatchNormOutput::Y);
        apply_at(
            Location::caller(),
            Arc::new(p),
            &[self, scale, bias, mean, var],
        )
    }
}
