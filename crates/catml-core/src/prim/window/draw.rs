//! Drawing windows for the drawing rules of convolutions and pooling ([`crate::ir::draw`]):
//! operands are pooled values reshaped to (N, C, spatial..); kernels, strides, paddings,
//! dilations and groups are drawn so that every window fits the padded input.

use crate::ir::{Draw, DrawError, Drawn, Interval};
use crate::prim::{Conv1dAttrs, Conv2dAttrs, ConvSpec, Pool2dAttrs};
use crate::tensor::TensorType;

/// One spatial axis of a window: kernel, stride, padding [lo, hi], dilation.
struct AxisDraw {
    kernel: usize,
    stride: usize,
    pad: [usize; 2],
    dilation: usize,
}

/// A window over an axis of `size`; padding below the kernel when `max_pool`, dilation 1
/// unless `dilate`. Kernel and dilation shrink until the extent fits the padded size.
fn axis_draw(d: &mut dyn Draw, size: usize, dilate: bool, max_pool: bool) -> AxisDraw {
    let mut kernel = d.int(1, 3);
    let mut dilation = if dilate { d.int(1, 2) } else { 1 };
    let stride = d.int(1, 3);
    let mut pad = [d.int(0, 2), d.int(0, 2)];
    while dilation * (kernel - 1) + 1 > size + pad[0] + pad[1] {
        if dilation > 1 {
            dilation -= 1;
        } else {
            kernel -= 1;
        }
    }
    if max_pool {
        pad = pad.map(|p| p.min(kernel - 1));
    }
    AxisDraw {
        kernel,
        stride,
        pad,
        dilation,
    }
}

/// A convolution of a pooled value with `rank` spatial dims: x, the weight's type and the
/// attributes (groups divide C, O = groups or 2 groups).
pub(crate) fn conv_setup(
    d: &mut dyn Draw,
    rank: usize,
) -> Result<(Drawn, TensorType, ConvSpec), DrawError> {
    let x = d.pick();
    let x = d.moderate(x, 2.0)?;
    let x = d.shaped(x, rank + 2)?;
    let n = d.ty(x.var).dims().to_vec();
    let divisors: Vec<usize> = (1..=n[1]).filter(|g| n[1] % g == 0).collect();
    let groups = divisors[d.below(divisors.len())];
    let o = groups * d.int(1, 2);
    let axes: Vec<AxisDraw> = (2..2 + rank)
        .map(|i| axis_draw(d, n[i], true, false))
        .collect();
    let mut wdims = vec![o, n[1] / groups];
    wdims.extend(axes.iter().map(|a| a.kernel));
    let wty = TensorType::new(d.ty(x.var).dtype, wdims);
    let spec = if rank == 1 {
        ConvSpec::from(Conv1dAttrs {
            stride: axes[0].stride,
            padding: axes[0].pad,
            dilation: axes[0].dilation,
            groups,
        })
    } else {
        ConvSpec::from(Conv2dAttrs {
            stride: [axes[0].stride, axes[1].stride],
            padding: [axes[0].pad, axes[1].pad],
            dilation: [axes[0].dilation, axes[1].dilation],
            groups,
        })
    };
    Ok((x, wty, spec))
}

/// The convolution's output type for x and w.
pub(crate) fn conv_out(spec: &ConvSpec, x: &TensorType, w: &TensorType) -> TensorType {
    let g = spec.geom(x.dims(), w.dims());
    TensorType::new(x.dtype, spec.out_dims(&g))
}

/// A pooling window over x (N, C, H, W).
pub(crate) fn pool_attrs(d: &mut dyn Draw, x: Drawn, max_pool: bool) -> Pool2dAttrs {
    let n = d.ty(x.var).dims().to_vec();
    let h = axis_draw(d, n[2], false, max_pool);
    let w = axis_draw(d, n[3], false, max_pool);
    Pool2dAttrs::new([h.kernel, w.kernel])
        .stride([h.stride, w.stride])
        .padding([h.pad, w.pad])
}

/// A pooled value as (N, C, H, W), moderated to `cap`.
pub(crate) fn nchw(d: &mut dyn Draw, cap: f64) -> Result<Drawn, DrawError> {
    let x = d.pick();
    let x = d.moderate(x, cap)?;
    d.shaped(x, 4)
}

/// The pooled dims (N, C, Ho, Wo) of x under `a`.
pub(crate) fn pooled_dims(a: &Pool2dAttrs, x: &TensorType) -> Vec<usize> {
    let g = a.geom(x.dims());
    vec![g.n, g.c, g.h.out(), g.w.out()]
}

/// [k min(lo, 0), k max(hi, 0)]: a sum of at most k terms from `r` (fewer in the padding).
pub(crate) fn sum_of(r: Interval, k: usize) -> Interval {
    let k = k as f64;
    Interval::new(k * r.lo.min(0.0), k * r.hi.max(0.0))
}
