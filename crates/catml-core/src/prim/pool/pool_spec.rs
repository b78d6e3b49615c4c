//! The attributes and type checks shared by the 2-D pooling primitives over NCHW input:
//! kernel, stride and padding per side (no dilation). Pooling treats each (n, c) plane on its
//! own: it is the depthwise convolution with a fixed all-ones kernel (sum), scaled (average), or
//! its max analogue.

use serde_json::Value;

use crate::ir::{AttrReader, Attrs, Prim, Registry, TypeError};
use crate::prim::conv::conv_kernel::ConvGeom;
use crate::prim::window::geometry::{
    check_axis, padding_json, read_list, read_padding, widen, Axis,
};
use crate::tensor::TensorType;

/// Attributes of a 2-D pooling window, per axis (H, W).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pool2dAttrs {
    pub kernel: [usize; 2],
    pub stride: [usize; 2],
    /// [[top, bottom], [left, right]].
    pub padding: [[usize; 2]; 2],
}

impl Pool2dAttrs {
    /// Non-overlapping windows: stride equal to the kernel, no padding.
    pub fn new(kernel: [usize; 2]) -> Pool2dAttrs {
        Pool2dAttrs {
            kernel,
            stride: kernel,
            padding: [[0, 0], [0, 0]],
        }
    }
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

    pub fn to_attrs(&self) -> Attrs {
        crate::ir::attrs_of([
            ("kernel", self.kernel.to_vec().into()),
            ("stride", self.stride.to_vec().into()),
            ("padding", padding_json(&self.padding)),
        ])
    }

    /// Reads `kernel` (required), `stride` (default: the kernel) and `padding` (default: none).
    pub fn read<'a>(r: &mut AttrReader<'a>) -> Result<Pool2dAttrs, TypeError> {
        let kernel = widen(&read_list(r, "kernel", 2, None)?, 1);
        let stride = match r.get("stride") {
            None => kernel,
            Some(_) => widen(&read_list(r, "stride", 2, None)?, 1),
        };
        let padding = widen(&read_padding(r, 2)?, [0, 0]);
        Ok(Pool2dAttrs {
            kernel,
            stride,
            padding,
        })
    }

    /// The window geometry over x (N, C, H, W), as a depthwise convolution; unchecked.
    pub fn geom(&self, x: &[usize]) -> ConvGeom {
        let axis = |i: usize| Axis {
            size: x[2 + i],
            kernel: self.kernel[i],
            stride: self.stride[i],
            lo: self.padding[i][0],
            hi: self.padding[i][1],
            dilation: 1,
        };
        ConvGeom {
            n: x[0],
            c: x[1],
            o: x[1],
            groups: x[1],
            h: axis(0),
            w: axis(1),
        }
    }

    /// Checks operand `index` as the pooled input and returns its geometry.
    pub fn check(&self, x: &TensorType, index: usize) -> Result<ConvGeom, TypeError> {
        if !x.dtype.is_float() || x.rank() != 4 {
            return Err(TypeError::Operand {
                index,
                expected: "a float (N, C, H, W) input (rank 4)".to_string(),
                found: x.clone(),
            });
        }
        let g = self.geom(x.dims());
        check_axis(&g.h, "H")?;
        check_axis(&g.w, "W")?;
        Ok(g)
    }

    /// As [`check`](Self::check), and every window must hold at least one input element: the
    /// padding on each side is smaller than the kernel.
    pub fn check_max(&self, x: &TensorType, index: usize) -> Result<ConvGeom, TypeError> {
        let g = self.check(x, index)?;
        for (axis, name) in [(g.h, "H"), (g.w, "W")] {
            if axis.lo >= axis.kernel || axis.hi >= axis.kernel {
                return Err(TypeError::attr(
                    "padding",
                    format!(
                        "max pooling needs padding below the kernel size {} on each side of \
                         axis {name} so that every window holds input, found [{}, {}]",
                        axis.kernel, axis.lo, axis.hi
                    ),
                ));
            }
        }
        Ok(g)
    }

    /// The pooled type (N, C, Ho, Wo).
    pub fn out_type(x: &TensorType, g: &ConvGeom) -> TensorType {
        TensorType::new(x.dtype, [g.n, g.c, g.h.out(), g.w.out()])
    }

    /// Window size kH·kW, the divisor of average pooling.
    pub fn window(&self) -> usize {
        self.kernel[0] * self.kernel[1]
    }
}

/// Reads pooling attributes plus a required `input_size` [H, W] (for the transposes).
pub fn read_with_input_size<'a>(
    r: &mut AttrReader<'a>,
) -> Result<(Pool2dAttrs, [usize; 2]), TypeError> {
    let attrs = Pool2dAttrs::read(r)?;
    let size = widen(&read_list(r, "input_size", 2, None)?, 1);
    Ok((attrs, size))
}

/// Pooling attributes with `input_size`.
pub fn attrs_with_input_size(attrs: &Pool2dAttrs, size: [usize; 2]) -> Attrs {
    let mut a = attrs.to_attrs();
    a.insert("input_size".into(), Value::from(size.to_vec()));
    a
}

/// The input type (N, C, input_size) of a transpose whose cotangent operand is `u`, checked to
/// be the pooled type of that input.
pub fn check_transpose(
    attrs: &Pool2dAttrs,
    size: [usize; 2],
    u: &TensorType,
    index: usize,
) -> Result<(TensorType, ConvGeom), TypeError> {
    if !u.dtype.is_float() || u.rank() != 4 {
        return Err(TypeError::Operand {
            index,
            expected: "a float (N, C, Ho, Wo) cotangent (rank 4)".to_string(),
            found: u.clone(),
        });
    }
    let x = TensorType::new(u.dtype, [u.dims()[0], u.dims()[1], size[0], size[1]]);
    if x.shape.checked_numel().is_none() {
        return Err(TypeError::attr(
            "input_size",
            format!("invalid input shape {}", x.shape),
        ));
    }
    let g = attrs.check(&x, index)?;
    let out = Pool2dAttrs::out_type(&x, &g);
    if *u != out {
        return Err(TypeError::Operand {
            index,
            expected: format!("the pooled type {out} of input {x}"),
            found: u.clone(),
        });
    }
    Ok((x, g))
}

/// Registers a pooling primitive whose attributes are exactly [`Pool2dAttrs`].
pub(crate) fn register_pool(r: &mut Registry, name: &str, make: fn(Pool2dAttrs) -> Prim) {
    r.register(name, move |attrs: &Attrs| {
        let mut a = AttrReader::new(attrs);
        let attrs = Pool2dAttrs::read(&mut a)?;
        a.finish()?;
        Ok(make(attrs))
    });
    r.set_example(name, crate::ir::attrs_json(r#"{"kernel": [2, 2]}"#));
}
