//! scan's batching rule (`vmap`, docs/scan.md): a scan over the batched body.
//!
//! Each carry, x and const is either batched (its batch in front) or shared. The body is
//! batched for those inputs; a carry whose new value reads the batch becomes batched from the
//! start, which is repeated until no carry changes (a fixed point: at most one round per
//! carry). Inside the batched scan the time axis stays axis 0 of every x, so a batched x
//! (B, T, ..) enters as (T, B, ..), and a stacked result leaves as (T, B, ..). The rule's value
//! is (B, L): row b is example b's packed value, laid out as the unbatched scan lays it out,
//! so `unpack`'s batching rule reads each result from it.

use std::fmt::Display;
use std::sync::Arc;

use super::primitive::{Piece, Scan};
use super::unpack::Unpack;
use crate::ir::{with_lead, BatchCtx, Builder, Program, RuleError, TypeError, Var};
use crate::prim::batching::{batch_into, lift};
use crate::prim::Ops;

fn rule_err(e: impl Display) -> RuleError {
    RuleError::Type(TypeError::Invalid(format!("scan: {e}")))
}

/// The body batched for inputs marked in `batched`, with whether each output carries the batch.
fn batched_body(
    s: &Scan,
    batched: &[bool],
    size: usize,
) -> Result<(Builder, Vec<(Var, bool)>), RuleError> {
    let body = &*s.body;
    let mut b = Builder::new();
    let mut args = Vec::with_capacity(body.n_inputs());
    for (input, &on) in body.inputs().iter().zip(batched) {
        let ty = if on {
            with_lead(&input.ty, size)
        } else {
            input.ty.clone()
        };
        args.push((b.input(&input.name, ty, input.kind).map_err(rule_err)?, on));
    }
    let outs = batch_into(&mut b, body, &args, size).map_err(|e| rule_err(format!("body: {e}")))?;
    Ok((b, outs))
}

/// Which body inputs carry the batch: the batched operands, and every carry the body makes
/// depend on them (iterated to a fixed point).
fn batched_inputs(s: &Scan, at: &BatchCtx) -> Result<Vec<bool>, RuleError> {
    let mut on: Vec<bool> = (0..s.body.n_inputs()).map(|k| at.is_batched(k)).collect();
    loop {
        let (_, outs) = batched_body(s, &on, at.size)?;
        let mut changed = false;
        for k in 0..s.carries {
            if outs[k].1 && !on[k] {
                on[k] = true;
                changed = true;
            }
        }
        if !changed {
            return Ok(on);
        }
    }
}

pub(super) fn batch(s: &Scan, b: &mut Builder, x: &[Var], at: &BatchCtx) -> Result<Var, RuleError> {
    let (nc, nx) = (s.carries, s.xs);
    let size = at.size;
    let on = batched_inputs(s, at)?;
    // The body: batched carries leave batched; ys keep whether they read the batch.
    let (mut sb, outs) = batched_body(s, &on, size)?;
    let mut body_outs = Vec::with_capacity(outs.len());
    let mut y_on = Vec::with_capacity(outs.len() - nc);
    for (k, &(v, batched)) in outs.iter().enumerate() {
        if k < nc {
            body_outs.push(lift(&mut sb, v, batched || !on[k], size).map_err(rule_err)?);
            // An output that is batched where its input is not was handled by the fixed point.
            debug_assert!(!batched || on[k]);
        } else {
            body_outs.push(v);
            y_on.push(batched);
        }
    }
    let body: Program = sb.finish(&body_outs).map_err(rule_err)?;
    // The operands: carries lifted where they became batched, xs with time in front.
    let mut operands = Vec::with_capacity(x.len());
    for (k, &v) in x.iter().enumerate() {
        let v = if on[k] && !at.is_batched(k) {
            lift(b, v, false, size)?
        } else {
            v
        };
        let is_x = (nc..nc + nx).contains(&k);
        operands.push(if is_x && on[k] {
            let rank = b.ty(v).rank();
            let mut perm = vec![1, 0];
            perm.extend(2..rank);
            b.permute(v, perm)?
        } else {
            v
        });
    }
    let inner = Scan::new(body, s.length, nc, nx, s.consts)?
        .reversed(s.reverse)
        .stacking_carries(s.stack_carries);
    let v = b.op(Arc::new(inner.clone()), &operands)?;
    // Each piece as (B, n): a stacked batched piece (T, B, ..) is moved to (B, T, ..).
    let mut rows = Vec::new();
    for (piece, at_, ty) in inner.layout() {
        let piece_on = match piece {
            Piece::Carry(k) => on[k],
            Piece::Y(k) => y_on[k],
        };
        let n = if piece_on {
            ty.numel() / size
        } else {
            ty.numel()
        };
        let stacked = !matches!(piece, Piece::Carry(_)) || s.stack_carries;
        let row = if !piece_on {
            let flat = b.op(Arc::new(Unpack::new(at_, vec![n])), &[v])?;
            lift(b, flat, false, size)?
        } else if stacked {
            let whole = b.op(Arc::new(Unpack::new(at_, ty.shape.clone())), &[v])?;
            let mut perm = vec![1, 0];
            perm.extend(2..ty.rank());
            let moved = b.permute(whole, perm)?;
            b.reshape(moved, [size, n])?
        } else {
            b.op(Arc::new(Unpack::new(at_, vec![size, n])), &[v])?
        };
        rows.push(row);
    }
    if rows.len() == 1 {
        Ok(rows[0])
    } else {
        Ok(b.concat(&rows, 1)?)
    }
}
