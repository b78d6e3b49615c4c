//! The fixed index selection of a convolution: spatial rank, stride, padding per side, dilation
//! and groups, shared by `conv1d`/`conv2d` and their two transposes. Type checks live here so
//! the three primitives reject bad attributes and shapes with the same messages.

use serde_json::Value;

use super::conv_kernel::ConvGeom;
use crate::ir::{AttrReader, Attrs, TypeError};
use crate::prim::window::geometry::{
    axis_names, check_axis, narrow, padding_json, read_list, read_padding, widen, Axis,
};
use crate::tensor::TensorType;

/// Attributes of a 2-D convolution over NCHW input, per axis (H, W).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Conv2dAttrs {
    pub stride: [usize; 2],
    /// [[top, bottom], [left, right]]: zeros added before and after each axis.
    pub padding: [[usize; 2]; 2],
    pub dilation: [usize; 2],
    /// Channels split into this many independent groups; C and O must be divisible by it.
    pub groups: usize,
}

impl Default for Conv2dAttrs {
    fn default() -> Conv2dAttrs {
        Conv2dAttrs {
            stride: [1, 1],
            padding: [[0, 0], [0, 0]],
            dilation: [1, 1],
            groups: 1,
        }
    }
}

impl Conv2dAttrs {
    pub fn stride(mut self, stride: [usize; 2]) -> Self {
        self.stride = stride;
        self
    }
    pub fn padding(mut self, padding: [[usize; 2]; 2]) -> Self {
        self.padding = padding;
        self
    }
    /// The same padding p on every side.
    pub fn pad(self, p: usize) -> Self {
        self.padding([[p, p], [p, p]])
    }
    pub fn dilation(mut self, dilation: [usize; 2]) -> Self {
        self.dilation = dilation;
        self
    }
    pub fn groups(mut self, groups: usize) -> Self {
        self.groups = groups;
        self
    }
}

/// Attributes of a 1-D convolution over NCW input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Conv1dAttrs {
    pub stride: usize,
    /// [left, right].
    pub padding: [usize; 2],
    pub dilation: usize,
    pub groups: usize,
}

impl Default for Conv1dAttrs {
    fn default() -> Conv1dAttrs {
        Conv1dAttrs {
            stride: 1,
            padding: [0, 0],
            dilation: 1,
            groups: 1,
        }
    }
}

/// A convolution's attributes with its spatial rank (1: NCW, 2: NCHW). Rank 1 is held as rank 2
/// with a trivial H axis (stride 1, no padding, dilation 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConvSpec {
    pub rank: usize,
    pub attrs: Conv2dAttrs,
}

impl From<Conv2dAttrs> for ConvSpec {
    fn from(attrs: Conv2dAttrs) -> ConvSpec {
        ConvSpec { rank: 2, attrs }
    }
}

impl From<Conv1dAttrs> for ConvSpec {
    fn from(a: Conv1dAttrs) -> ConvSpec {
        ConvSpec {
            rank: 1,
            attrs: Conv2dAttrs {
                stride: [1, a.stride],
                padding: [[0, 0], a.padding],
                dilation: [1, a.dilation],
                groups: a.groups,
            },
        }
    }
}

impl ConvSpec {
    /// `conv1d`, `conv2d`, or one of their transposes with `suffix`.
    pub fn op_name(&self, suffix: &str) -> &'static str {
        match (self.rank, suffix) {
            (1, "") => "conv1d",
            (1, "input_grad") => "conv1d_input_grad",
            (1, _) => "conv1d_weight_grad",
            (_, "") => "conv2d",
            (_, "input_grad") => "conv2d_input_grad",
            (_, _) => "conv2d_weight_grad",
        }
    }

    /// stride, padding, dilation and groups as LensIR attributes (per-axis lists of `rank`).
    pub fn to_attrs(&self) -> Attrs {
        let a = &self.attrs;
        crate::ir::attrs_of([
            ("stride", narrow(a.stride, self.rank).into()),
            ("padding", padding_json(&narrow(a.padding, self.rank))),
            ("dilation", narrow(a.dilation, self.rank).into()),
            ("groups", Value::from(a.groups)),
        ])
    }

    /// Reads the attributes; absent ones default to stride 1, no padding, dilation 1, 1 group.
    pub fn read<'a>(r: &mut AttrReader<'a>, rank: usize) -> Result<ConvSpec, TypeError> {
        let stride = widen(&read_list(r, "stride", rank, Some(1))?, 1);
        let padding = widen(&read_padding(r, rank)?, [0, 0]);
        let dilation = widen(&read_list(r, "dilation", rank, Some(1))?, 1);
        let groups = r.opt_usize("groups")?.unwrap_or(1);
        Ok(ConvSpec {
            rank,
            attrs: Conv2dAttrs {
                stride,
                padding,
                dilation,
                groups,
            },
        })
    }

    /// The (H, W) window axes for these input and kernel sizes.
    pub fn axes(&self, input: [usize; 2], kernel: [usize; 2]) -> [Axis; 2] {
        let a = &self.attrs;
        let axis = |i: usize| Axis {
            size: input[i],
            kernel: kernel[i],
            stride: a.stride[i],
            lo: a.padding[i][0],
            hi: a.padding[i][1],
            dilation: a.dilation[i],
        };
        [axis(0), axis(1)]
    }

    /// The geometry of x (N, C, spatial..) and w (O, C/G, kernel..), unchecked: for kernels,
    /// whose operands passed [`check`](Self::check).
    pub fn geom(&self, x: &[usize], w: &[usize]) -> ConvGeom {
        let [h, w_axis] = self.axes(widen(&x[2..], 1), widen(&w[2..], 1));
        ConvGeom {
            n: x[0],
            c: x[1],
            o: w[0],
            groups: self.attrs.groups,
            h,
            w: w_axis,
        }
    }

    /// The output dims (N, O, spatial..) of a checked geometry.
    pub fn out_dims(&self, g: &ConvGeom) -> Vec<usize> {
        let mut dims = vec![g.n, g.o];
        dims.extend(narrow([g.h.out(), g.w.out()], self.rank));
        dims
    }

    fn layout(&self) -> &'static str {
        if self.rank == 1 {
            "(N, C, W)"
        } else {
            "(N, C, H, W)"
        }
    }

    pub fn check_groups(&self) -> Result<(), TypeError> {
        if self.attrs.groups == 0 {
            return Err(TypeError::attr("groups", "must be positive, found 0"));
        }
        Ok(())
    }

    /// Checks x (operand `xi`) and w (operand `wi`) against the attributes.
    pub fn check(
        &self,
        x: &TensorType,
        w: &TensorType,
        (xi, wi): (usize, usize),
    ) -> Result<ConvGeom, TypeError> {
        let rank = self.rank + 2;
        self.check_groups()?;
        let g = self.attrs.groups;
        if !x.dtype.is_float() || x.rank() != rank {
            return Err(TypeError::Operand {
                index: xi,
                expected: format!("a float {} input (rank {rank})", self.layout()),
                found: x.clone(),
            });
        }
        if w.dtype != x.dtype || w.rank() != rank {
            return Err(TypeError::Operand {
                index: wi,
                expected: format!(
                    "a {} weight (O, C/groups, kernel..) of rank {rank}",
                    x.dtype
                ),
                found: w.clone(),
            });
        }
        let (c, o) = (x.dims()[1], w.dims()[0]);
        if c % g != 0 {
            return Err(TypeError::attr(
                "groups",
                format!("input channels {c} are not divisible by groups {g}"),
            ));
        }
        if o % g != 0 {
            return Err(TypeError::attr(
                "groups",
                format!("output channels {o} are not divisible by groups {g}"),
            ));
        }
        if w.dims()[1] != c / g {
            return Err(TypeError::Operand {
                index: wi,
                expected: format!(
                    "weight dim 1 = input channels / groups = {c} / {g} = {}",
                    c / g
                ),
                found: w.clone(),
            });
        }
        let geom = self.geom(x.dims(), w.dims());
        let names = axis_names(self.rank);
        let axes = [geom.h, geom.w];
        if self.rank == 1 && geom.h != Axis::TRIVIAL {
            return Err(TypeError::Invalid(format!(
                "a 1-D convolution has no H axis, found H attributes in {:?}",
                self.attrs
            )));
        }
        for (axis, name) in axes[2 - self.rank..].iter().zip(names) {
            check_axis(axis, name)?;
        }
        Ok(geom)
    }

    /// Checks an optional bias (operand 2) of shape (O).
    pub fn check_bias(&self, x: &TensorType, b: &TensorType, o: usize) -> Result<(), TypeError> {
        if *b != TensorType::new(x.dtype, [o]) {
            return Err(TypeError::Operand {
                index: 2,
                expected: format!("a bias {}[{o}] (one per output channel)", x.dtype),
                found: b.clone(),
            });
        }
        Ok(())
    }

    /// The axes summed to pull a cotangent back to the bias: batch and spatial.
    pub fn bias_axes(&self) -> Vec<usize> {
        let mut axes = vec![0];
        axes.extend(2..2 + self.rank);
        axes
    }
}
