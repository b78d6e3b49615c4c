//! Generator rows for the windowed primitives: convolutions, their transposes and pooling.
//!
//! Operands are pooled values reshaped to (N, C, spatial..); kernels, strides, paddings,
//! dilations and groups are drawn so that every window fits the padded input.

use std::sync::Arc;

use rand::RngExt;

use super::{Gen, GenError, Interval, Val};
use crate::prim::{self, Conv2dAttrs, ConvInputGrad, ConvSpec, ConvWeightGrad, Ops, Pool2dAttrs};
use crate::tensor::TensorType;

/// One spatial axis of a window: kernel, stride, padding [lo, hi], dilation.
struct AxisDraw {
    kernel: usize,
    stride: usize,
    pad: [usize; 2],
    dilation: usize,
}

impl Gen<'_> {
    /// `x` reshaped to `rank` dims: its numel's prime factors dealt to random dims.
    pub(super) fn shaped(&mut self, x: Val, rank: usize) -> Result<Val, GenError> {
        let mut dims = vec![1; rank];
        let mut n = self.ty(x).numel();
        let mut p = 2;
        while n > 1 {
            while n % p == 0 {
                let k = self.uniform(rank);
                dims[k] *= p;
                n /= p;
            }
            p += 1;
        }
        if *self.ty(x).dims() == dims[..] {
            return Ok(x);
        }
        self.same(x.range, |b| b.reshape(x.var, dims))
    }

    /// A window over an axis of `size`; padding below the kernel when `max_pool`, dilation 1
    /// unless `dilate`. Kernel and dilation shrink until the extent fits the padded size.
    fn axis_draw(&mut self, size: usize, dilate: bool, max_pool: bool) -> AxisDraw {
        let mut kernel = self.rng.random_range(1..=3);
        let mut dilation = if dilate {
            self.rng.random_range(1..=2)
        } else {
            1
        };
        let stride = self.rng.random_range(1..=3);
        let mut pad = [self.rng.random_range(0..=2), self.rng.random_range(0..=2)];
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
    fn conv_setup(&mut self, rank: usize) -> Result<(Val, TensorType, ConvSpec), GenError> {
        let x = self.pick();
        let x = self.moderate(x, 2.0)?;
        let x = self.shaped(x, rank + 2)?;
        let d = self.ty(x).dims().to_vec();
        let divisors: Vec<usize> = (1..=d[1]).filter(|g| d[1] % g == 0).collect();
        let groups = divisors[self.uniform(divisors.len())];
        let o = groups * self.rng.random_range(1..=2);
        let axes: Vec<AxisDraw> = (2..2 + rank)
            .map(|i| self.axis_draw(d[i], true, false))
            .collect();
        let mut wdims = vec![o, d[1] / groups];
        wdims.extend(axes.iter().map(|a| a.kernel));
        let wty = TensorType::new(self.ty(x).dtype, wdims);
        let spec = if rank == 1 {
            ConvSpec::from(prim::Conv1dAttrs {
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

    /// A pooling window over x (N, C, H, W).
    fn pool_attrs(&mut self, x: Val, max_pool: bool) -> Pool2dAttrs {
        let d = self.ty(x).dims().to_vec();
        let h = self.axis_draw(d[2], false, max_pool);
        let w = self.axis_draw(d[3], false, max_pool);
        Pool2dAttrs::new([h.kernel, w.kernel])
            .stride([h.stride, w.stride])
            .padding([h.pad, w.pad])
    }

    /// A pooled value as (N, C, H, W), moderated to `cap`.
    fn nchw(&mut self, cap: f64) -> Result<Val, GenError> {
        let x = self.pick();
        let x = self.moderate(x, cap)?;
        self.shaped(x, 4)
    }
}

/// The convolution's output type for x and w.
fn conv_out(spec: &ConvSpec, x: &TensorType, w: &TensorType) -> TensorType {
    let g = spec.geom(x.dims(), w.dims());
    TensorType::new(x.dtype, spec.out_dims(&g))
}

/// [k min(lo, 0), k max(hi, 0)]: a sum of at most k terms from `r` (fewer in the padding).
fn sum_of(r: Interval, k: usize) -> Interval {
    let k = k as f64;
    Interval::new(k * r.lo.min(0.0), k * r.hi.max(0.0))
}

fn gen_conv(g: &mut Gen, rank: usize) -> Result<Val, GenError> {
    let (x, wty, spec) = g.conv_setup(rank)?;
    let w = g.weight(&wty)?;
    let w = g.moderate(w, 2.0)?;
    let bias = if g.chance(0.5) {
        let b = g.weight(&TensorType::new(wty.dtype, [wty.dims()[0]]))?;
        Some(g.moderate(b, 2.0)?)
    } else {
        None
    };
    // |y| <= (C/groups) k_H k_W |x| |w| + |b|
    let k = wty.numel() / wty.dims()[0];
    let m = k as f64 * x.range.mag() * w.range.mag() + bias.map_or(0.0, |b| b.range.mag());
    let operands: Vec<_> = [x.var, w.var]
        .into_iter()
        .chain(bias.map(|b| b.var))
        .collect();
    let var = g.apply(Arc::new(prim::Conv { spec }), &operands)?;
    Ok(Val {
        var,
        range: Interval::symmetric(m),
    })
}

pub(super) fn gen_conv1d(g: &mut Gen) -> Result<Val, GenError> {
    gen_conv(g, 1)
}

pub(super) fn gen_conv2d(g: &mut Gen) -> Result<Val, GenError> {
    gen_conv(g, 2)
}

/// dx = conv_input_grad(u, w): each x element meets at most (O/groups) k_H k_W products.
fn gen_conv_input_grad(g: &mut Gen, rank: usize) -> Result<Val, GenError> {
    let (x, wty, spec) = g.conv_setup(rank)?;
    let uty = conv_out(&spec, &g.ty(x), &wty);
    let u = g.weight(&uty)?;
    let u = g.moderate(u, 2.0)?;
    let w = g.weight(&wty)?;
    let w = g.moderate(w, 2.0)?;
    let xd = g.ty(x).dims().to_vec();
    let size = [xd[xd.len() - 2], xd[xd.len() - 1]];
    let size = if rank == 1 { [1, size[1]] } else { size };
    let k = wty.numel() / xd[1];
    let var = g.apply(Arc::new(ConvInputGrad::new(spec, size)), &[u.var, w.var])?;
    Ok(Val {
        var,
        range: Interval::symmetric(k as f64 * u.range.mag() * w.range.mag()),
    })
}

pub(super) fn gen_conv1d_input_grad(g: &mut Gen) -> Result<Val, GenError> {
    gen_conv_input_grad(g, 1)
}

pub(super) fn gen_conv2d_input_grad(g: &mut Gen) -> Result<Val, GenError> {
    gen_conv_input_grad(g, 2)
}

/// dw = conv_weight_grad(x, u): each weight element sums N Ho Wo products.
fn gen_conv_weight_grad(g: &mut Gen, rank: usize) -> Result<Val, GenError> {
    let (x, wty, spec) = g.conv_setup(rank)?;
    let uty = conv_out(&spec, &g.ty(x), &wty);
    let u = g.weight(&uty)?;
    let u = g.moderate(u, 2.0)?;
    let wd = wty.dims();
    let size = [wd[wd.len() - 2], wd[wd.len() - 1]];
    let size = if rank == 1 { [1, size[1]] } else { size };
    let k = uty.numel() / uty.dims()[1];
    let var = g.apply(Arc::new(ConvWeightGrad::new(spec, size)), &[x.var, u.var])?;
    Ok(Val {
        var,
        range: Interval::symmetric(k as f64 * x.range.mag() * u.range.mag()),
    })
}

pub(super) fn gen_conv1d_weight_grad(g: &mut Gen) -> Result<Val, GenError> {
    gen_conv_weight_grad(g, 1)
}

pub(super) fn gen_conv2d_weight_grad(g: &mut Gen) -> Result<Val, GenError> {
    gen_conv_weight_grad(g, 2)
}

pub(super) fn gen_sum_pool2d(g: &mut Gen) -> Result<Val, GenError> {
    let x = g.nchw(8.0)?;
    let a = g.pool_attrs(x, false);
    g.same(sum_of(x.range, a.window()), |b| b.sum_pool2d(x.var, a))
}

/// The transpose of sum_pool2d: each input position lies in at most k_H k_W windows.
pub(super) fn gen_sum_pool2d_transpose(g: &mut Gen) -> Result<Val, GenError> {
    let x = g.nchw(8.0)?;
    let a = g.pool_attrs(x, false);
    let xty = g.ty(x);
    let uty = TensorType::new(xty.dtype, a_out(&a, &xty));
    let u = g.weight(&uty)?;
    let u = g.moderate(u, 8.0)?;
    let size = [xty.dims()[2], xty.dims()[3]];
    let var = g.apply(
        Arc::new(prim::SumPool2dTranspose {
            attrs: a,
            input_size: size,
        }),
        &[u.var],
    )?;
    Ok(Val {
        var,
        range: sum_of(u.range, a.window()),
    })
}

/// The pooled dims (N, C, Ho, Wo) of x under `a`.
fn a_out(a: &Pool2dAttrs, x: &TensorType) -> Vec<usize> {
    let g = a.geom(x.dims());
    vec![g.n, g.c, g.h.out(), g.w.out()]
}

/// Mean over kH kW positions, padding counted as zeros: within the hull of x's range and 0.
pub(super) fn gen_avg_pool2d(g: &mut Gen) -> Result<Val, GenError> {
    let x = g.nchw(64.0)?;
    let a = g.pool_attrs(x, false);
    let r = x.range.hull(Interval::new(0.0, 0.0));
    g.same(r, |b| b.avg_pool2d(x.var, a))
}

/// Every window holds an input element, so the maximum is one of x's elements.
pub(super) fn gen_max_pool2d(g: &mut Gen) -> Result<Val, GenError> {
    let x = g.nchw(64.0)?;
    let a = g.pool_attrs(x, true);
    g.same(x.range, |b| b.max_pool2d(x.var, a))
}

/// The argmax source of the max-pool helpers: a grid constant (1/256 steps in [-1, 1]), so
/// the lowering's running maximum m + relu(x - m) is exact and finds the kernel's argmax; a
/// near-tie within rounding would flip it.
fn argmax_source(g: &mut Gen, like: Val) -> Result<Val, GenError> {
    let ty = g.ty(like);
    g.constant_of(&ty)
}

/// v at each window's first maximum of x: one of v's elements.
pub(super) fn gen_max_pool2d_select(g: &mut Gen) -> Result<Val, GenError> {
    let v = g.nchw(64.0)?;
    let x = argmax_source(g, v)?;
    let a = g.pool_attrs(x, true);
    let var = g.apply(
        Arc::new(prim::MaxPool2dSelect { attrs: a }),
        &[x.var, v.var],
    )?;
    Ok(Val {
        var,
        range: v.range,
    })
}

/// u scattered to each window's first maximum of x: at most kH kW terms meet.
pub(super) fn gen_max_pool2d_scatter(g: &mut Gen) -> Result<Val, GenError> {
    let like = g.nchw(64.0)?;
    let x = argmax_source(g, like)?;
    let a = g.pool_attrs(x, true);
    let xty = g.ty(x);
    let u = g.weight(&TensorType::new(xty.dtype, a_out(&a, &xty)))?;
    let u = g.moderate(u, 8.0)?;
    let var = g.apply(
        Arc::new(prim::MaxPool2dScatter { attrs: a }),
        &[x.var, u.var],
    )?;
    Ok(Val {
        var,
        range: sum_of(u.range, a.window()),
    })
}
