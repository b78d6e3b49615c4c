//! The fully connected layer, as the tiny MLP uses it (docs/examples.md):
//! `linear(x, 4, rng, "lin1")` makes parameters `lin1.W` (4, in) and `lin1.b` (4,) and one
//! `linear` node tagged `lin1`.

use rand::Rng;

use super::{param, Init};
use crate::tensor::TensorType;
use crate::trace::{tag_scope, Value};

/// A fully connected layer: y = x W^T + b with W of shape (out, in), for x of shape (in) or
/// (batch, in). Weights start from `weight`, biases from `bias`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Linear {
    /// Output features: W is (out, in), b is (out).
    pub out: usize,
    /// How W starts.
    pub weight: Init,
    /// How b starts.
    pub bias: Init,
}

impl Linear {
    /// `out` features, Glorot weights, zero biases.
    pub fn new(out: usize) -> Linear {
        Linear {
            out,
            weight: Init::Glorot,
            bias: Init::Zeros,
        }
    }

    /// The same layer with weights drawn from `weight`.
    pub fn weight_init(self, weight: Init) -> Linear {
        Linear { weight, ..self }
    }

    /// The same layer with biases drawn from `bias`.
    pub fn bias_init(self, bias: Init) -> Linear {
        Linear { bias, ..self }
    }

    /// Applies the layer: parameters `<tag>.W` then `<tag>.b` (drawn in that order from
    /// `rng`), and one `linear` node tagged `tag`.
    #[track_caller]
    pub fn apply<R: Rng + ?Sized>(&self, x: &Value, rng: &mut R, tag: &str) -> Value {
        let xt = match x.ty() {
            Ok(t) => t,
            Err(e) => return Value::failed(e),
        };
        // The in-features are x's last axis; a scalar x is left for linear's type rule to
        // reject, with the caller's site.
        let inp = xt.dims().last().copied().unwrap_or(1);
        let w = param(
            &format!("{tag}.W"),
            &TensorType::new(xt.dtype, [self.out, inp]),
            self.weight,
            rng,
        );
        let b = param(
            &format!("{tag}.b"),
            &TensorType::new(xt.dtype, [self.out]),
            self.bias,
            rng,
        );
        let _tag = tag_scope(tag);
        x.linear(&w, &b)
    }
}

/// The fully connected layer under its other usual name (Keras, Flax).
pub type Dense = Linear;

/// The tiny MLP's layer: [`Linear::new(out)`](Linear::new) applied to `x` under `tag`.
///
/// ```
/// use catml_nn::nn::{linear, seeded};
/// use catml_core::trace::trace;
/// use catml_core::tensor::{DType, TensorType};
///
/// let mut rng = seeded(0);
/// let traced = trace(&[TensorType::new(DType::F32, [2])], |x| {
///     linear(&x[0], 4, &mut rng, "lin1")
/// })
/// .unwrap();
/// assert_eq!(traced.params.get("lin1.W").unwrap().dims(), &[4, 2]);
/// assert_eq!(traced.program.nodes()[0].tag.as_deref(), Some("lin1"));
/// ```
#[track_caller]
pub fn linear<R: Rng + ?Sized>(x: &Value, out: usize, rng: &mut R, tag: &str) -> Value {
    Linear::new(out).apply(x, rng, tag)
}
