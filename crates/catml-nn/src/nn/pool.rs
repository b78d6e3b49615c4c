//! Pooling layers over NCHW input (no parameters).

use crate::prim::Pool2dAttrs;
use crate::trace::{tag_scope, Value};

/// What a pooling window computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolKind {
    /// The sum of the window.
    Sum,
    /// The mean of the window (padding counts as zeros).
    Avg,
    /// The maximum of the window (ties: the first maximal element, a labelled convention).
    Max,
}

/// A 2-D pooling layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pool2d {
    pub kind: PoolKind,
    /// Kernel, stride and padding.
    pub attrs: Pool2dAttrs,
}

impl Pool2d {
    /// Max pooling over non-overlapping `kernel` windows.
    pub fn max(kernel: [usize; 2]) -> Pool2d {
        Pool2d {
            kind: PoolKind::Max,
            attrs: Pool2dAttrs::new(kernel),
        }
    }

    /// Average pooling over non-overlapping `kernel` windows.
    pub fn avg(kernel: [usize; 2]) -> Pool2d {
        Pool2d {
            kind: PoolKind::Avg,
            attrs: Pool2dAttrs::new(kernel),
        }
    }

    /// Sum pooling over non-overlapping `kernel` windows.
    pub fn sum(kernel: [usize; 2]) -> Pool2d {
        Pool2d {
            kind: PoolKind::Sum,
            attrs: Pool2dAttrs::new(kernel),
        }
    }

    /// The same layer with this stride.
    pub fn stride(self, stride: [usize; 2]) -> Pool2d {
        Pool2d {
            attrs: self.attrs.stride(stride),
            ..self
        }
    }

    /// The same layer with padding `p` on every side.
    pub fn pad(self, p: usize) -> Pool2d {
        Pool2d {
            attrs: self.attrs.pad(p),
            ..self
        }
    }

    /// Applies the pooling under `tag`.
    #[track_caller]
    pub fn apply(&self, x: &Value, tag: &str) -> Value {
        let _tag = tag_scope(tag);
        match self.kind {
            PoolKind::Sum => x.sum_pool2d(self.attrs),
            PoolKind::Avg => x.avg_pool2d(self.attrs),
            PoolKind::Max => x.max_pool2d(self.attrs),
        }
    }
}
