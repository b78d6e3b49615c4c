//! MeanVarianceNormalization over `axes` (default 0, 2, 3).

use catml_core::prim::Ops;

use super::reduce::sum_keep;
use crate::ctx::{Ctx, Value, R};

/// `(x - mean) / (sqrt(mean((x - mean)²)) + 1e-9)`, the statistics over `axes`.
pub fn mean_variance_normalization(c: &mut Ctx) -> R<Vec<Value>> {
    let x = c.fvar(0)?;
    let d = c.ty(x).dims().to_vec();
    let axes: Vec<usize> = match c.ints("axes")? {
        Some(a) => a.iter().map(|&a| c.axis(a, d.len())).collect::<R<_>>()?,
        None if d.len() == 4 => vec![0, 2, 3],
        None => return Err(c.err(format!("the default axes need a rank-4 input, got {d:?}"))),
    };
    let mut axes = axes;
    axes.sort_unstable();
    axes.dedup();
    let n: usize = axes.iter().map(|&a| d[a]).product();
    let s = sum_keep(c, x, &axes, true)?;
    let m = t!(c, c.b.div_count(s, n))?;
    let m = c.expand_to(m, &d)?;
    let dev = t!(c, c.b.sub(x, m))?;
    let sq = t!(c, c.b.mul(dev, dev))?;
    let ss = sum_keep(c, sq, &axes, true)?;
    let var = t!(c, c.b.div_count(ss, n))?;
    let sd = t!(c, c.b.sqrt(var))?;
    let e = t!(c, c.b.full_like(1e-9, sd))?;
    let den = t!(c, c.b.add(sd, e))?;
    let den = c.expand_to(den, &d)?;
    Ok(vec![Value::Var(t!(c, c.b.div(dev, den))?)])
}
