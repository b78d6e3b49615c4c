//! Convolution layers over NCW and NCHW input, with weights in the (O, C/groups, k..) layout of
//! the `conv` primitive: `<tag>.W` and, unless turned off, `<tag>.b` (O).

use rand::Rng;

use super::{param, Init};
use crate::prim::{Conv1dAttrs, Conv2dAttrs};
use crate::tensor::TensorType;
use crate::trace::{tag_scope, Value};

/// A 2-D convolution layer: y = conv2d(x, W) + b for x of shape (N, C, H, W).
/// Parameters: O · (C / groups) · kH · kW + O (no bias term without a bias).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Conv2d {
    /// Output channels O.
    pub out_channels: usize,
    /// (kH, kW).
    pub kernel: [usize; 2],
    /// Stride, padding, dilation and groups.
    pub attrs: Conv2dAttrs,
    /// Whether the layer adds a bias `<tag>.b`.
    pub bias: bool,
    /// How W starts (Glorot by default).
    pub weight_init: Init,
    /// How b starts (zeros by default).
    pub bias_init: Init,
}

impl Conv2d {
    /// `out_channels` filters of size `kernel`, stride 1, no padding, one group, with a bias.
    pub fn new(out_channels: usize, kernel: [usize; 2]) -> Conv2d {
        Conv2d {
            out_channels,
            kernel,
            attrs: Conv2dAttrs::default(),
            bias: true,
            weight_init: Init::Glorot,
            bias_init: Init::Zeros,
        }
    }

    /// The same layer with these attributes.
    pub fn attrs(self, attrs: Conv2dAttrs) -> Conv2d {
        Conv2d { attrs, ..self }
    }

    /// The same layer with padding `p` on every side.
    pub fn pad(self, p: usize) -> Conv2d {
        self.attrs(self.attrs.pad(p))
    }

    /// The same layer without a bias.
    pub fn no_bias(self) -> Conv2d {
        Conv2d {
            bias: false,
            ..self
        }
    }

    /// Applies the layer under `tag`, drawing `<tag>.W` then `<tag>.b` from `rng`.
    #[track_caller]
    pub fn apply<R: Rng + ?Sized>(&self, x: &Value, rng: &mut R, tag: &str) -> Value {
        let (o, groups) = (self.out_channels, self.attrs.groups);
        let inits = (self.weight_init, self.bias.then_some(self.bias_init));
        let (w, b) = match conv_params(x, (o, groups), &self.kernel, inits, rng, tag) {
            Ok(wb) => wb,
            Err(e) => return e,
        };
        let _tag = tag_scope(tag);
        x.conv2d(&w, b.as_ref(), self.attrs)
    }
}

/// A 1-D convolution layer: y = conv1d(x, W) + b for x of shape (N, C, W).
/// Parameters: O · (C / groups) · K + O.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Conv1d {
    /// Output channels O.
    pub out_channels: usize,
    /// The kernel width K.
    pub kernel: usize,
    /// Stride, padding, dilation and groups.
    pub attrs: Conv1dAttrs,
    /// Whether the layer adds a bias `<tag>.b`.
    pub bias: bool,
    /// How W starts (Glorot by default).
    pub weight_init: Init,
    /// How b starts (zeros by default).
    pub bias_init: Init,
}

impl Conv1d {
    /// `out_channels` filters of width `kernel`, stride 1, no padding, one group, with a bias.
    pub fn new(out_channels: usize, kernel: usize) -> Conv1d {
        Conv1d {
            out_channels,
            kernel,
            attrs: Conv1dAttrs::default(),
            bias: true,
            weight_init: Init::Glorot,
            bias_init: Init::Zeros,
        }
    }

    /// The same layer with these attributes.
    pub fn attrs(self, attrs: Conv1dAttrs) -> Conv1d {
        Conv1d { attrs, ..self }
    }

    /// The same layer without a bias.
    pub fn no_bias(self) -> Conv1d {
        Conv1d {
            bias: false,
            ..self
        }
    }

    /// Applies the layer under `tag`, drawing `<tag>.W` then `<tag>.b` from `rng`.
    #[track_caller]
    pub fn apply<R: Rng + ?Sized>(&self, x: &Value, rng: &mut R, tag: &str) -> Value {
        let (o, groups) = (self.out_channels, self.attrs.groups);
        let inits = (self.weight_init, self.bias.then_some(self.bias_init));
        let (w, b) = match conv_params(x, (o, groups), &[self.kernel], inits, rng, tag) {
            Ok(wb) => wb,
            Err(e) => return e,
        };
        let _tag = tag_scope(tag);
        x.conv1d(&w, b.as_ref(), self.attrs)
    }
}

/// `<tag>.W` (O, C/groups, field..) and `<tag>.b` (O), or the failed value to return. C is
/// x's axis 1; a C the groups do not divide is left for the primitive's type rule to reject.
#[track_caller]
fn conv_params<R: Rng + ?Sized>(
    x: &Value,
    (o, groups): (usize, usize),
    field: &[usize],
    (weight_init, bias_init): (Init, Option<Init>),
    rng: &mut R,
    tag: &str,
) -> Result<(Value, Option<Value>), Value> {
    let xt = x.ty().map_err(Value::failed)?;
    let channels = xt.dims().get(1).copied().unwrap_or(0);
    let per_group = channels / groups.max(1);
    let wdims: Vec<usize> = [o, per_group]
        .into_iter()
        .chain(field.iter().copied())
        .collect();
    let w = param(
        &format!("{tag}.W"),
        &TensorType::new(xt.dtype, wdims),
        weight_init,
        rng,
    );
    let b = bias_init.map(|init| {
        param(
            &format!("{tag}.b"),
            &TensorType::new(xt.dtype, [o]),
            init,
            rng,
        )
    });
    Ok((w, b))
}
