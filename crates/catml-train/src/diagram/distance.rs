//! The few builder nodes a loss needs beyond composition: row distances and weighted sums.

use super::Distance;
use crate::ir::{Builder, TypeError, Var};
use crate::prim::Ops;

/// Σ over every axis but the first: [B, ...] -> [B].
fn row_sum(b: &mut Builder, v: Var) -> Result<Var, TypeError> {
    let rank = b.ty(v).rank();
    if rank == 1 {
        return Ok(v);
    }
    b.sum(v, Some((1..rank).collect()))
}

/// Row-wise ½ ‖x − y‖²: [B, ...] -> [B].
fn squared_error(b: &mut Builder, x: Var, y: Var) -> Result<Var, TypeError> {
    let d = b.sub(x, y)?;
    let sq = b.mul(d, d)?;
    let r = row_sum(b, sq)?;
    b.scale(r, 0.5)
}

/// Row-wise mean of (x − y)² over the row's F elements: [B, ...] -> [B]. Averaged over the
/// rows this is the `mse` primitive, the mean over all B·F elements.
fn mean_squared_error(b: &mut Builder, x: Var, y: Var) -> Result<Var, TypeError> {
    let per_row: usize = b.ty(x).dims()[1..].iter().product();
    let d = b.sub(x, y)?;
    let sq = b.mul(d, d)?;
    let r = row_sum(b, sq)?;
    b.scale(r, 1.0 / per_row as f64)
}

/// Row-wise −Σ_j p_j log softmax(z)_j: [B, K] x [B, K] -> [B].
fn cross_entropy(b: &mut Builder, p: Var, z: Var) -> Result<Var, TypeError> {
    let lp = b.log_softmax(z, 1)?;
    let prod = b.mul(p, lp)?;
    let r = b.sum(prod, Some(vec![1]))?;
    b.neg(r)
}

/// The per-row distance between two paths' outputs (the left is the reference).
pub(crate) fn between_paths(
    b: &mut Builder,
    d: Distance,
    left: Var,
    right: Var,
) -> Result<Var, TypeError> {
    match d {
        Distance::SquaredError => squared_error(b, left, right),
        Distance::Mse => mean_squared_error(b, left, right),
        Distance::CrossEntropy => {
            let p = b.softmax(left, 1)?;
            cross_entropy(b, p, right)
        }
    }
}

/// The per-row loss of a path's output against target data.
pub(crate) fn against_data(
    b: &mut Builder,
    d: Distance,
    output: Var,
    target: Var,
) -> Result<Var, TypeError> {
    match d {
        Distance::SquaredError => squared_error(b, output, target),
        Distance::Mse => mean_squared_error(b, output, target),
        Distance::CrossEntropy => cross_entropy(b, target, output),
    }
}

/// Σ_rows w · r: [B] x [B] -> scalar.
pub(crate) fn weighted_sum(b: &mut Builder, rows: Var, w: Var) -> Result<Var, TypeError> {
    let wr = b.mul(rows, w)?;
    b.sum(wr, None)
}
