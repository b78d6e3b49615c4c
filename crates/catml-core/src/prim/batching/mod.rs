//! Batching (`vmap`) shared by the primitives' rules: the program pass that asks each node's
//! primitive for its rule ([`batch_into`]), the rules several families share (elementwise,
//! folding the batch into a leading row axis, per-example application), and the
//! [`PerExample`] primitive that applies any primitive to each element of a batch.
//!
//! Convention: a batched value carries its batch as its leading axis. Rules receive operands in
//! that form and return a value in that form.

pub mod per_example;
mod program;

pub use per_example::PerExample;
pub use program::{batch_into, BatchError};

use std::sync::Arc;

use crate::ir::{BatchCtx, Builder, Prim, RuleError, TypeError, Var};
use crate::prim::Ops;
use crate::tensor::TensorType;

/// `x` with the batch in front: itself if batched, else broadcast along a new leading axis.
pub fn lift(b: &mut Builder, x: Var, batched: bool, size: usize) -> Result<Var, TypeError> {
    if batched {
        return Ok(x);
    }
    let ty = b.ty(x).clone();
    let dims: Vec<usize> = (1..=ty.rank()).collect();
    b.broadcast(x, crate::ir::with_lead(&ty, size).shape, dims)
}

/// The rule of elementwise primitives (and of any primitive whose operands and result share
/// one shape and whose result element depends only on the operands' elements at its
/// position): lift the unbatched operands and apply the primitive to the batched shape.
pub fn elementwise(b: &mut Builder, x: &[Var], at: &BatchCtx) -> Result<Var, RuleError> {
    let lifted = lift_all(b, x, at)?;
    Ok(b.op(at.prim.clone(), &lifted)?)
}

/// Every operand lifted to carry the batch.
pub fn lift_all(b: &mut Builder, x: &[Var], at: &BatchCtx) -> Result<Vec<Var>, TypeError> {
    x.iter()
        .enumerate()
        .map(|(k, &v)| lift(b, v, at.is_batched(k), at.size))
        .collect()
}

/// The rule of primitives whose operands at `rows` lead with an axis of independent rows (a
/// batch of images, of sequences) and whose result leads with the same rows: the batch is
/// folded into those rows, `(B, N, ..) -> (B*N, ..)`, and unfolded from the result. An
/// operand outside `rows` that carries the batch cannot be folded; then the primitive is
/// applied per example.
pub fn fold_rows(
    b: &mut Builder,
    x: &[Var],
    at: &BatchCtx,
    rows: &[usize],
) -> Result<Var, RuleError> {
    if !at.only(rows) {
        return per_example(b, x, at);
    }
    let mut folded = Vec::with_capacity(x.len());
    for (k, &v) in x.iter().enumerate() {
        if !rows.contains(&k) {
            folded.push(v);
            continue;
        }
        if !at.is_batched(k) && !b.ty(v).dtype.is_float() {
            return per_example(b, x, at);
        }
        let v = lift(b, v, at.is_batched(k), at.size)?;
        let ty = b.ty(v).clone();
        if ty.rank() < 2 {
            return per_example(b, x, at);
        }
        let mut dims = vec![ty.dims()[0] * ty.dims()[1]];
        dims.extend_from_slice(&ty.dims()[2..]);
        folded.push(b.reshape(v, dims)?);
    }
    let y = b.op(at.prim.clone(), &folded)?;
    let ty = b.ty(y).clone();
    if ty.rank() == 0 || ty.dims()[0] % at.size != 0 {
        return Err(TypeError::Invalid(format!(
            "a row-wise result {ty} does not hold the batch of {}",
            at.size
        ))
        .into());
    }
    let mut dims = vec![at.size, ty.dims()[0] / at.size];
    dims.extend_from_slice(&ty.dims()[1..]);
    Ok(b.reshape(y, dims)?)
}

/// The rule that always applies: the primitive applied to each element of the batch in turn,
/// as one [`PerExample`] node. Each element is computed by the primitive's own kernel on the
/// operands of one example, so the result equals a loop over examples bit for bit.
pub fn per_example(b: &mut Builder, x: &[Var], at: &BatchCtx) -> Result<Var, RuleError> {
    let prim: Prim = Arc::new(PerExample::new(at.prim.clone(), at.batched.clone()));
    Ok(b.op(prim, x)?)
}

/// `at.prim` rebuilt with attributes for the batched rank (an axis shifted by one), applied to
/// the lifted operands.
pub fn with_prim(b: &mut Builder, x: &[Var], at: &BatchCtx, prim: Prim) -> Result<Var, RuleError> {
    let lifted = lift_all(b, x, at)?;
    Ok(b.op(prim, &lifted)?)
}

/// Axes shifted past the leading batch axis.
pub fn shifted(axes: &[usize]) -> Vec<usize> {
    axes.iter().map(|a| a + 1).collect()
}

/// The per-example type of a batched type.
pub fn example_type(ty: &TensorType) -> TensorType {
    crate::ir::without_lead(ty)
}
