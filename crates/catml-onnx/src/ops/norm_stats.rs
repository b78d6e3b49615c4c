//! LayerNormalization's optional outputs Mean and InvStdDev: the statistics over the normalised
//! axes (kept as size 1), computed and returned in the `stash_type` precision.

use catml_core::ir::Var;
use catml_core::prim::Ops;

use super::reduce::sum_keep;
use crate::ctx::{Ctx, R};
use crate::konst::{dtype_of, elem};

/// `mean = Σx / n` and `inv_std = 1 / sqrt(Σ(x - mean)² / n + eps)` over `axes`, in the
/// `stash_type` dtype (float32 by default).
pub fn layer_norm_stats(c: &mut Ctx, x: Var, axes: &[usize], eps: f64) -> R<(Var, Var)> {
    let stash = c.int("stash_type", elem::FLOAT as i64)?;
    let dtype = i32::try_from(stash)
        .ok()
        .and_then(dtype_of)
        .filter(|d| d.is_float())
        .ok_or_else(|| c.unsupported(format!("stash_type {stash}")))?;
    let xs = if c.ty(x).dtype == dtype {
        x
    } else {
        t!(c, c.b.convert(x, dtype))?
    };
    let d = c.ty(xs).dims().to_vec();
    let n: usize = axes.iter().map(|&a| d[a]).product();
    let s = sum_keep(c, xs, axes, true)?;
    let mean = t!(c, c.b.div_count(s, n))?;
    let mb = c.expand_to(mean, &d)?;
    let dev = t!(c, c.b.sub(xs, mb))?;
    let sq = t!(c, c.b.mul(dev, dev))?;
    let ss = sum_keep(c, sq, axes, true)?;
    let var = t!(c, c.b.div_count(ss, n))?;
    let ev = t!(c, c.b.full_like(eps, var))?;
    let ve = t!(c, c.b.add(var, ev))?;
    let inv = t!(c, c.b.rsqrt(ve))?;
    Ok((mean, inv))
}
