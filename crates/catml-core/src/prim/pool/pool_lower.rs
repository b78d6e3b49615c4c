//! Sum pooling and its transpose in the core fragment: gather the windows (padding reads a
//! concatenated zero), then sum over the two tap axes.
//!
//! - sum_pool:  y[n, c, o] = Σ_k P_x[n, c, o, k]
//! - transpose: x̄[n, c, i] = Σ_k P_u[n, c, i, k], where P_u reads u at the output that reads
//!   input i at tap k (`Axis::target`), zero if none does.

use super::pool_spec::Pool2dAttrs;
use crate::ir::{Builder, TypeError, Var};
use crate::prim::window::lower::{patches, Reads};
use crate::prim::Ops;

pub fn sum_pool(b: &mut Builder, attrs: &Pool2dAttrs, x: Var) -> Result<Var, TypeError> {
    let g = attrs.geom(b.ty(x).dims());
    let (h, w) = (g.h, g.w);
    let p = patches(
        b,
        x,
        Reads {
            out: h.out(),
            kernel: h.kernel,
            src: |o, k| h.source(o, k),
        },
        Reads {
            out: w.out(),
            kernel: w.kernel,
            src: |o, k| w.source(o, k),
        },
    )?;
    b.sum(p, Some(vec![3, 5]))
}

pub fn sum_pool_transpose(
    b: &mut Builder,
    attrs: &Pool2dAttrs,
    input_size: [usize; 2],
    u: Var,
) -> Result<Var, TypeError> {
    let d = b.ty(u).dims().to_vec();
    let g = attrs.geom(&[d[0], d[1], input_size[0], input_size[1]]);
    let (h, w) = (g.h, g.w);
    let p = patches(
        b,
        u,
        Reads {
            out: h.size,
            kernel: h.kernel,
            src: |i, k| h.target(i, k),
        },
        Reads {
            out: w.size,
            kernel: w.kernel,
            src: |i, k| w.target(i, k),
        },
    )?;
    b.sum(p, Some(vec![3, 5]))
}
