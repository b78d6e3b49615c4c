//! Convolution and its transposes in the core fragment (docs/architectures.md): gather the finite
//! patches with a zero padding slice, reshape the weights, and contract with one matmul per group.
//!
//! - conv:        y[n, o, p] = Σ_{c, k} P_x[n, c, p, k] · w[o, c, k]                 (+ b[o])
//! - input grad:  x̄[n, c, i] = Σ_{o, k} P_u[n, o, i, k] · w[o, c, k], where P_u reads u at
//!   the output that reads input i at tap k (`Axis::target`): the same contraction with the
//!   weight's two channel axes swapped within each group.
//! - weight grad: w̄[o, c, k] = Σ_{n, p} u[n, o, p] · P_x[n, c, p, k].

use super::conv_spec::ConvSpec;
use crate::ir::{Builder, TypeError, Var};
use crate::prim::window::geometry::narrow;
use crate::prim::window::lower::{as_2d, from_2d, patches, slice, Reads};
use crate::prim::Ops;

/// Σ over (channel in group, taps) of p (N, Cin, Ho, kH, Wo, kW) against w (Cout, Cin/G, kH, kW):
/// (N, Cout, Ho, Wo).
fn contract(b: &mut Builder, p: Var, w: Var, groups: usize) -> Result<Var, TypeError> {
    let pd = b.ty(p).dims().to_vec();
    let wd = b.ty(w).dims().to_vec();
    let (n, cin, ho, wo) = (pd[0], pd[1], pd[2], pd[4]);
    let (cout, cg) = (wd[0], wd[1]);
    let (og, taps) = (cout / groups, cg * wd[2] * wd[3]);
    let mut parts = Vec::with_capacity(groups);
    for g in 0..groups {
        let pg = slice(b, p, 1, g * cg, cg)?;
        debug_assert_eq!(cg * groups, cin);
        let pg = b.permute(pg, vec![0, 2, 4, 1, 3, 5])?;
        let pg = b.reshape(pg, [n * ho * wo, taps])?;
        let wg = slice(b, w, 0, g * og, og)?;
        let wg = b.reshape(wg, [og, taps])?;
        let wg = b.transpose(wg)?;
        parts.push(b.matmul(pg, wg)?);
    }
    let y = if groups == 1 {
        parts[0]
    } else {
        b.concat(&parts, 1)?
    };
    let y = b.reshape(y, [n, ho, wo, cout])?;
    b.permute(y, vec![0, 3, 1, 2])
}

/// conv(x, w) (+ bias).
pub fn conv(
    b: &mut Builder,
    spec: &ConvSpec,
    x: Var,
    w: Var,
    bias: Option<Var>,
) -> Result<Var, TypeError> {
    let g = spec.geom(b.ty(x).dims(), b.ty(w).dims());
    let (x4, w4) = (as_2d(b, x, spec.rank)?, as_2d(b, w, spec.rank)?);
    let (h, wa) = (g.h, g.w);
    let p = patches(
        b,
        x4,
        Reads {
            out: h.out(),
            kernel: h.kernel,
            src: |o, k| h.source(o, k),
        },
        Reads {
            out: wa.out(),
            kernel: wa.kernel,
            src: |o, k| wa.source(o, k),
        },
    )?;
    let mut y = contract(b, p, w4, g.groups)?;
    if let Some(bias) = bias {
        let shape = b.ty(y).shape.clone();
        let bb = b.broadcast(bias, shape, vec![1])?;
        y = b.add(y, bb)?;
    }
    from_2d(b, y, spec.rank)
}

/// input_grad(u, w) for an input of spatial size `input_size`.
pub fn input_grad(
    b: &mut Builder,
    spec: &ConvSpec,
    input_size: [usize; 2],
    u: Var,
    w: Var,
) -> Result<Var, TypeError> {
    let wd = b.ty(w).dims().to_vec();
    let groups = spec.attrs.groups;
    let mut x_dims = vec![b.ty(u).dims()[0], wd[1] * groups];
    x_dims.extend(narrow(input_size, spec.rank));
    let g = spec.geom(&x_dims, &wd);
    let (u4, w4) = (as_2d(b, u, spec.rank)?, as_2d(b, w, spec.rank)?);
    let (h, wa) = (g.h, g.w);
    let p = patches(
        b,
        u4,
        Reads {
            out: h.size,
            kernel: h.kernel,
            src: |i, k| h.target(i, k),
        },
        Reads {
            out: wa.size,
            kernel: wa.kernel,
            src: |i, k| wa.target(i, k),
        },
    )?;
    // wt[g·Cg + c, o, k] = w[g·Og + o, c, k]
    let (og, cg, kh, kw) = (g.og(), g.cg(), h.kernel, wa.kernel);
    let wt = b.reshape(w4, [groups, og, cg, kh, kw])?;
    let wt = b.permute(wt, vec![0, 2, 1, 3, 4])?;
    let wt = b.reshape(wt, [g.c, og, kh, kw])?;
    let x = contract(b, p, wt, groups)?;
    from_2d(b, x, spec.rank)
}

/// weight_grad(x, u) for a kernel of spatial size `kernel_size`.
pub fn weight_grad(
    b: &mut Builder,
    spec: &ConvSpec,
    kernel_size: [usize; 2],
    x: Var,
    u: Var,
) -> Result<Var, TypeError> {
    let xd = b.ty(x).dims().to_vec();
    let groups = spec.attrs.groups;
    let o = b.ty(u).dims()[1];
    let mut w_dims = vec![o, xd[1] / groups];
    w_dims.extend(narrow(kernel_size, spec.rank));
    let g = spec.geom(&xd, &w_dims);
    let (x4, u4) = (as_2d(b, x, spec.rank)?, as_2d(b, u, spec.rank)?);
    let (h, wa) = (g.h, g.w);
    let p = patches(
        b,
        x4,
        Reads {
            out: h.out(),
            kernel: h.kernel,
            src: |o, k| h.source(o, k),
        },
        Reads {
            out: wa.out(),
            kernel: wa.kernel,
            src: |o, k| wa.source(o, k),
        },
    )?;
    let (og, cg, pixels) = (g.og(), g.cg(), g.n * g.pixels_out());
    let mut parts = Vec::with_capacity(groups);
    for gi in 0..groups {
        let pg = slice(b, p, 1, gi * cg, cg)?;
        let pg = b.permute(pg, vec![1, 3, 5, 0, 2, 4])?;
        let pg = b.reshape(pg, [g.taps(), pixels])?;
        let ug = slice(b, u4, 1, gi * og, og)?;
        let ug = b.permute(ug, vec![0, 2, 3, 1])?;
        let ug = b.reshape(ug, [pixels, og])?;
        let m = b.matmul(pg, ug)?;
        let m = b.transpose(m)?;
        parts.push(b.reshape(m, [og, cg, h.kernel, wa.kernel])?);
    }
    let w = if groups == 1 {
        parts[0]
    } else {
        b.concat(&parts, 0)?
    };
    from_2d(b, w, spec.rank)
}
