//! Composition of layers in order, each under its own tag, as PyTorch's `nn.Sequential`.

use rand::Rng;

use super::{
    BatchNorm, Conv1d, Conv2d, Embedding, Gru, LayerNorm, Linear, MultiHeadAttention, Pool2d, Rnn,
};
use crate::tensor::TensorType;
use crate::trace::{tag_scope, Value};

/// A layer: a function of one value that declares its parameters as `<tag>.<name>` (drawn
/// from `rng`) and tags its nodes `tag`. Functions of one value (`|x: &Value| x.relu()`,
/// [`flatten`]) are layers without parameters.
pub trait Layer {
    /// Applies the layer; errors name the caller (`#[track_caller]` through the trait).
    #[track_caller]
    fn forward(&self, x: &Value, rng: &mut dyn Rng, tag: &str) -> Value;
}

impl<F: Fn(&Value) -> Value> Layer for F {
    fn forward(&self, x: &Value, _rng: &mut dyn Rng, tag: &str) -> Value {
        let _tag = tag_scope(tag);
        self(x)
    }
}

/// Layers whose inherent `apply(x, rng, tag)` is their forward pass.
macro_rules! layer_by_apply {
    ($($t:ty),*) => {$(
        impl Layer for $t {
            #[track_caller]
            fn forward(&self, x: &Value, rng: &mut dyn Rng, tag: &str) -> Value {
                self.apply(x, rng, tag)
            }
        }
    )*};
}

layer_by_apply!(
    Linear,
    Conv1d,
    Conv2d,
    LayerNorm,
    BatchNorm,
    Embedding,
    MultiHeadAttention
);

impl Layer for Pool2d {
    #[track_caller]
    fn forward(&self, x: &Value, _rng: &mut dyn Rng, tag: &str) -> Value {
        self.apply(x, tag)
    }
}

/// Zeros (B, hidden) for inputs xs (T, B, D): the initial state of a recurrence used as a layer.
#[track_caller]
fn zero_state(xs: &Value, hidden: usize) -> Value {
    match xs.ty() {
        // A rank below 2 is left for the recurrence's shape check to reject.
        Ok(t) => {
            let batch = t.dims().get(1).copied().unwrap_or(1);
            Value::zeros(&TensorType::new(t.dtype, [batch, hidden]))
        }
        Err(e) => Value::failed(e),
    }
}

/// As a layer, a recurrence starts from zeros and gives every state (T, B, H), as PyTorch's
/// `nn.RNN` and `nn.GRU` do.
impl Layer for Rnn {
    #[track_caller]
    fn forward(&self, x: &Value, rng: &mut dyn Rng, tag: &str) -> Value {
        self.apply(x, &zero_state(x, self.hidden), rng, tag).all
    }
}

/// As for [`Rnn`]: zeros first, every state out.
impl Layer for Gru {
    #[track_caller]
    fn forward(&self, x: &Value, rng: &mut dyn Rng, tag: &str) -> Value {
        self.apply(x, &zero_state(x, self.hidden), rng, tag).all
    }
}

/// (N, d1, .., dk) -> (N, d1 ⋯ dk): the usual step from convolution to dense layers.
#[track_caller]
pub fn flatten(x: &Value) -> Value {
    match x.ty() {
        Ok(t) if t.rank() >= 1 => {
            let n = t.dims()[0];
            let rest = t.dims()[1..].iter().product::<usize>();
            x.reshape([n, rest])
        }
        // A scalar is left for reshape's type rule to reject with the caller's site.
        Ok(_) => x.reshape([0usize; 0]),
        Err(e) => Value::failed(e),
    }
}

/// Layers applied in order. Layer `name` runs under the tag `name`, or `<tag>.<name>` when
/// the sequence itself runs under a nonempty tag, so its parameters are `<name>.W` and so on.
///
/// ```
/// use catml_nn::nn::{flatten, seeded, Conv2d, Linear, Pool2d, Sequential};
/// use catml_core::interp::params;
/// use catml_core::tensor::{DType, TensorType};
/// use catml_core::trace::{trace, Value};
///
/// let net = Sequential::new()
///     .push("conv1", Conv2d::new(4, [3, 3]).pad(1))
///     .push("relu1", |x: &Value| x.relu())
///     .push("pool1", Pool2d::max([2, 2]))
///     .push("flatten", flatten)
///     .push("out", Linear::new(10));
/// let mut rng = seeded(0);
/// let x = TensorType::new(DType::F32, [2, 1, 8, 8]);
/// let traced = trace(&[x], |v| net.apply(&v[0], &mut rng, "")).unwrap();
/// let count = params(&traced.program);
/// assert_eq!(count.by_tag["conv1"], 4 * 9 + 4);
/// assert_eq!(count.by_tag["out"], 10 * 64 + 10);
/// ```
#[derive(Default)]
pub struct Sequential {
    layers: Vec<(String, Box<dyn Layer>)>,
}

impl Sequential {
    /// No layers: the identity.
    pub fn new() -> Sequential {
        Sequential::default()
    }

    /// The same sequence with `layer` appended under `name`.
    pub fn push(mut self, name: &str, layer: impl Layer + 'static) -> Sequential {
        self.layers.push((name.to_string(), Box::new(layer)));
        self
    }

    /// The layers' names in order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.layers.iter().map(|(n, _)| n.as_str())
    }

    /// Applies every layer in order (see [`Layer`]).
    #[track_caller]
    pub fn apply<R: Rng>(&self, x: &Value, rng: &mut R, tag: &str) -> Value {
        self.forward(x, rng, tag)
    }
}

impl Layer for Sequential {
    #[track_caller]
    fn forward(&self, x: &Value, rng: &mut dyn Rng, tag: &str) -> Value {
        let mut h = x.clone();
        for (name, layer) in &self.layers {
            let inner = if tag.is_empty() {
                name.clone()
            } else {
                format!("{tag}.{name}")
            };
            h = layer.forward(&h, rng, &inner);
        }
        h
    }
}

impl std::fmt::Debug for Sequential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.names()).finish()
    }
}
