//! The elementwise loop every optimiser shares: read a parameter, its gradient and its state
//! buffers in f64, write them back in the parameter's dtype.

use super::OptimError;
use crate::tensor::{Params, Tensor};

/// Checks that `grads` has exactly the float parameters' names, with their types.
pub(crate) fn check_grads(params: &Params, grads: &Params) -> Result<(), OptimError> {
    if let Some(extra) = grads.names().find(|n| !params.contains(n)) {
        return Err(OptimError::UnknownGradient {
            name: extra.to_string(),
        });
    }
    for (name, p) in params.iter() {
        if !p.dtype().is_float() {
            return Err(OptimError::NotFloat {
                name: name.to_string(),
                dtype: p.dtype(),
            });
        }
        let g = grads.get(name).ok_or_else(|| OptimError::MissingGradient {
            name: name.to_string(),
        })?;
        if g.ty() != p.ty() {
            return Err(OptimError::GradientType {
                name: name.to_string(),
                expected: p.ty(),
                found: g.ty(),
            });
        }
    }
    Ok(())
}

/// The state buffer `key` for parameter `p`, or `None` if absent; a present buffer of the wrong
/// type is an error.
pub(crate) fn buffer(
    state: &Params,
    key: &str,
    p: &Tensor,
) -> Result<Option<Vec<f64>>, OptimError> {
    match state.get(key) {
        None => Ok(None),
        Some(t) if t.ty() == p.ty() => Ok(Some(t.to_f64_vec())),
        Some(t) => Err(OptimError::State {
            name: key.to_string(),
            expected: p.ty().to_string(),
            found: t.ty().to_string(),
        }),
    }
}

/// A tensor of `like`'s dtype and shape holding `data`.
pub(crate) fn tensor_like(like: &Tensor, data: Vec<f64>) -> Tensor {
    Tensor::from_f64s(like.dtype(), like.shape().clone(), data).expect("same element count")
}
