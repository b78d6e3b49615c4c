//! Convolution layers over NCW and NCHW input, with weights in the (O, C/groups, k..) layout of
//! the `conv` primitive: `<tag>.W` and, unless turned off, `<tag>.b` (O).

use std::sync::Arc;

use rand::Rng;

use super::{param, Init};
use crate::prim::{Conv, Conv1dAttrs, Conv2dAttrs};
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
        let filters = Filters {
            out_channels: self.out_channels,
            groups: self.attrs.groups,
            field: &self.kernel,
            weight_init: self.weight_init,
            bias_init: self.bias.then_some(self.bias_init),
        };
        filters.apply(x, rng, tag, Conv::conv2d(self.attrs))
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
        let filters = Filters {
            out_channels: self.out_channels,
            groups: self.attrs.groups,
            field: &[self.kernel],
            weight_init: self.weight_init,
            bias_init: self.bias.then_some(self.bias_init),
        };
        filters.apply(x, rng, tag, Conv::conv1d(self.attrs))
    }
}

/// What the convolution layers share: their parameters.
struct Filters<'a> {
    out_channels: usize,
    groups: usize,
    /// The kernel's spatial sizes.
    field: &'a [usize],
    weight_init: Init,
    bias_init: Option<Init>,
}

impl Filters<'_> {
    /// Draws `<tag>.W` (O, C/groups, field..) and `<tag>.b` (O), then applies `conv` to x and
    /// them under `tag`. C is x's axis 1; a C the groups do not divide is left for the primitive's
    /// type rule to reject.
    #[track_caller]
    fn apply<R: Rng + ?Sized>(&self, x: &Value, rng: &mut R, tag: &str, conv: Conv) -> Value {
        let xt = match x.ty() {
            Ok(t) => t,
            Err(e) => return Value::failed(e),
        };
        let channels = xt.dims().get(1).copied().unwrap_or(0);
        let per_group = channels / self.groups.max(1);
        let o = self.out_channels;
        let wdims: Vec<usize> = [o, per_group]
            .into_iter()
            .chain(self.field.iter().copied())
            .collect();
        let w = param(
            &format!("{tag}.W"),
            &TensorType::new(xt.dtype, wdims),
            self.weight_init,
            rng,
        );
        let b = match self.bias_init {
            Some(init) => Some(param(
                &format!("{tag}.b"),
                &TensorType::new(xt.dtype, [o]),
                init,
                rng,
            )),
            None => None,
        };
        let _tag = tag_scope(tag);
        let operands: Vec<&Value> = [x, &w].into_iter().chain(b.as_ref()).collect();
        Value::apply(Arc::new(conv), &operands)
    }
}
