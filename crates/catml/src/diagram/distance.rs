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

/// log softmax over the last axis of [B, K], shifted by the (stopped) row mean first.
pub(crate) fn log_softmax(b: &mut Builder, z: Var) -> Result<Var, TypeError> {
    let ty = b.ty(z).clone();
    let k = ty.dims()[1];
    let total = b.sum(z, Some(vec![1]))?;
    let mean = b.scale(total, 1.0 / k as f64)?;
    let shift = b.broadcast(mean, ty.shape.clone(), vec![0])?;
    let shift = b.stop_gradient(shift)?;
    let zc = b.sub(z, shift)?;
    let e = b.exp(zc)?;
    let se = b.sum(e, Some(vec![1]))?;
    let lse = b.log(se)?;
    let lse = b.broadcast(lse, ty.shape, vec![0])?;
    b.sub(zc, lse)
}

/// Row-wise −Σ_j p_j log softmax(z)_j: [B, K] x [B, K] -> [B].
fn cross_entropy(b: &mut Builder, p: Var, z: Var) -> Result<Var, TypeError> {
    let lp = log_softmax(b, z)?;
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
        Distance::CrossEntropy => {
            let lp = log_softmax(b, left)?;
            let p = b.exp(lp)?;
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
        Distance::CrossEntropy => cross_entropy(b, target, output),
    }
}

/// Σ_rows w · r: [B] x [B] -> scalar.
pub(crate) fn weighted_sum(b: &mut Builder, rows: Var, w: Var) -> Result<Var, TypeError> {
    let wr = b.mul(rows, w)?;
    b.sum(wr, None)
}
