//! One method per composite primitive (convolution, pooling, softmax, normalisation,
//! attention, losses, embeddings), as `ops.rs` has for the core ones. Each is one
//! [`Value::apply`] of the primitive the `Ops` builder method of the same name makes.

use std::panic::Location;
use std::sync::Arc;

use super::value::{apply_at, Value};
use crate::prim::{
    AttentionMask, AvgPool2d, BatchMatMul, Conv, Conv1dAttrs, Conv2dAttrs, CrossEntropy, LayerNorm,
    LogSoftmax, MaxPool2d, Mse, OneHot, Pool2dAttrs, ReduceMax, Sdpa, Softmax, SumPool2d, Take,
};
use crate::tensor::DType;

impl Value {
    /// 1-D convolution of x (N, C, W) with w (O, C/groups, K), plus an optional bias (O).
    #[track_caller]
    pub fn conv1d(&self, w: &Value, bias: Option<&Value>, attrs: Conv1dAttrs) -> Value {
        let operands: Vec<&Value> = [self, w].into_iter().chain(bias).collect();
        apply_at(Location::caller(), Arc::new(Conv::conv1d(attrs)), &operands)
    }

    /// 2-D convolution of x (N, C, H, W) with w (O, C/groups, kH, kW), plus an optional bias
    /// (O).
    #[track_caller]
    pub fn conv2d(&self, w: &Value, bias: Option<&Value>, attrs: Conv2dAttrs) -> Value {
        let operands: Vec<&Value> = [self, w].into_iter().chain(bias).collect();
        apply_at(Location::caller(), Arc::new(Conv::conv2d(attrs)), &operands)
    }

    /// The sum over each window of x (N, C, H, W).
    #[track_caller]
    pub fn sum_pool2d(&self, attrs: Pool2dAttrs) -> Value {
        self.unary_at(Location::caller(), Arc::new(SumPool2d { attrs }))
    }

    /// The mean over each window of x (N, C, H, W); padding counts as zeros.
    #[track_caller]
    pub fn avg_pool2d(&self, attrs: Pool2dAttrs) -> Value {
        self.unary_at(Location::caller(), Arc::new(AvgPool2d { attrs }))
    }

    /// The maximum over each window of x (N, C, H, W); ties send the derivative to the first
    /// maximal element in row-major window order (a labelled convention).
    #[track_caller]
    pub fn max_pool2d(&self, attrs: Pool2dAttrs) -> Value {
        self.unary_at(Location::caller(), Arc::new(MaxPool2d { attrs }))
    }

    /// The maximum over `axes` (every axis if `None`); ties share the derivative equally.
    #[track_caller]
    pub fn reduce_max(&self, axes: Option<&[usize]>) -> Value {
        let prim = Arc::new(ReduceMax::new(axes.map(<[usize]>::to_vec)));
        self.unary_at(Location::caller(), prim)
    }

    /// e^x / sum_axis e^x, shifted by a stop-gradient maximum for stability.
    #[track_caller]
    pub fn softmax(&self, axis: usize) -> Value {
        self.unary_at(Location::caller(), Arc::new(Softmax { axis }))
    }

    /// x - log sum_axis e^x, shifted by a stop-gradient maximum for stability.
    #[track_caller]
    pub fn log_softmax(&self, axis: usize) -> Value {
        self.unary_at(Location::caller(), Arc::new(LogSoftmax { axis }))
    }

    /// Mean-variance normalisation over `axes` with a fixed eps > 0, then gamma x̂ + beta if
    /// `affine` is given (gamma and beta have the sizes of `axes`, in axis order).
    #[track_caller]
    pub fn layer_norm(&self, axes: &[usize], eps: f64, affine: Option<(&Value, &Value)>) -> Value {
        let location = Location::caller();
        match affine {
            None => self.unary_at(
                location,
                Arc::new(LayerNorm::new(axes.to_vec(), eps, false)),
            ),
            Some((g, b)) => {
                let prim = Arc::new(LayerNorm::new(axes.to_vec(), eps, true));
                apply_at(location, prim, &[self, g, b])
            }
        }
    }

    /// One matrix product per index of the shared leading axes, optionally transposing the
    /// last two axes of either operand.
    #[track_caller]
    pub fn batch_matmul(&self, y: &Value, transpose_a: bool, transpose_b: bool) -> Value {
        let prim = Arc::new(BatchMatMul::new(transpose_a, transpose_b));
        apply_at(Location::caller(), prim, &[self, y])
    }

    /// Scaled dot-product attention of (B, H, T, d) queries (this value), keys and values,
    /// over each query row's allowed keys.
    #[track_caller]
    pub fn sdpa(&self, k: &Value, v: &Value, mask: AttentionMask) -> Value {
        apply_at(Location::caller(), Arc::new(Sdpa::new(mask)), &[self, k, v])
    }

    /// The mean cross-entropy of (B, C) logits (this value) against i64 labels (B).
    #[track_caller]
    pub fn cross_entropy(&self, labels: &Value) -> Value {
        apply_at(Location::caller(), Arc::new(CrossEntropy), &[self, labels])
    }

    /// The mean squared difference from `y`, of the same type.
    #[track_caller]
    pub fn mse(&self, y: &Value) -> Value {
        apply_at(Location::caller(), Arc::new(Mse), &[self, y])
    }

    /// The rows of this (V, D) table at runtime i64 `indices` (...): a (..., D) value,
    /// differentiable in the table, not in the indices.
    #[track_caller]
    pub fn take(&self, indices: &Value) -> Value {
        apply_at(Location::caller(), Arc::new(Take), &[self, indices])
    }

    /// One-hot rows of `classes` entries, in `dtype`, for these i64 indices.
    #[track_caller]
    pub fn one_hot(&self, classes: usize, dtype: DType) -> Value {
        self.unary_at(Location::caller(), Arc::new(OneHot { classes, dtype }))
    }
}
