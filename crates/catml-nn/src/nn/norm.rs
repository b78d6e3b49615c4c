//! Layer normalisation over the trailing axes, as PyTorch's `LayerNorm(normalized_shape)`:
//! x̂ = (x - mean) / √(var + eps) over the last `axes` axes, then gamma x̂ + beta with
//! `<tag>.gamma` (ones) and `<tag>.beta` (zeros) of those axes' sizes.

use catml_core::prim::names;
use std::panic::Location;

use rand::Rng;

use super::{param, Init};
use crate::ir::TypeError;
use crate::tensor::TensorType;
use crate::trace::{tag_scope, OperandTypes, TraceError, Value};

/// Layer normalisation over the last `axes` axes. Parameters: 2 · (product of their sizes)
/// with the affine transform, none without.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LayerNorm {
    /// How many trailing axes are normalised together.
    pub axes: usize,
    /// Added to the variance; must be > 0.
    pub eps: f64,
    /// Whether gamma and beta follow the normalisation.
    pub affine: bool,
}

impl LayerNorm {
    /// Normalises the last axis with eps = 1e-5 and an affine transform.
    pub fn new() -> LayerNorm {
        LayerNorm {
            axes: 1,
            eps: 1e-5,
            affine: true,
        }
    }

    /// The same layer over the last `axes` axes.
    pub fn trailing(self, axes: usize) -> LayerNorm {
        LayerNorm { axes, ..self }
    }

    /// The same layer without gamma and beta.
    pub fn no_affine(self) -> LayerNorm {
        LayerNorm {
            affine: false,
            ..self
        }
    }

    /// Applies the layer under `tag`. The draws of gamma and beta use no randomness, but take
    /// `rng` like every layer so layers compose uniformly.
    #[track_caller]
    pub fn apply<R: Rng + ?Sized>(&self, x: &Value, rng: &mut R, tag: &str) -> Value {
        let xt = match x.ty() {
            Ok(t) => t,
            Err(e) => return Value::failed(e),
        };
        if self.axes == 0 || self.axes > xt.rank() {
            return Value::failed(TraceError::Type {
                location: Location::caller(),
                op: names::LAYER_NORM.to_string(),
                operands: OperandTypes(vec![xt.clone()]),
                source: TypeError::attr(
                    "axes",
                    format!(
                        "{} trailing axes of a rank-{} value: expected 1 to {}",
                        self.axes,
                        xt.rank(),
                        xt.rank()
                    ),
                ),
            });
        }
        let first = xt.rank() - self.axes;
        let axes: Vec<usize> = (first..xt.rank()).collect();
        // No closures around `param`: they would hide the caller's site from its errors.
        let affine = if self.affine {
            let ty = TensorType::new(xt.dtype, xt.dims()[first..].to_vec());
            let g = param(&format!("{tag}.gamma"), &ty, Init::Constant(1.0), rng);
            let b = param(&format!("{tag}.beta"), &ty, Init::Zeros, rng);
            Some((g, b))
        } else {
            None
        };
        let _tag = tag_scope(tag);
        x.layer_norm(&axes, self.eps, affine.as_ref().map(|(g, b)| (g, b)))
    }
}

impl Default for LayerNorm {
    fn default() -> LayerNorm {
        LayerNorm::new()
    }
}
