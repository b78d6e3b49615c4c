//! TopK with k known at import: k rounds of argmax, each taking its element through a one-hot
//! row and pushing it below the row's minimum for the next round (ties go to the lower index).

use catml_core::ir::Var;
use catml_core::prim::Ops;

use super::shape::reshape_to;
use crate::ctx::{Ctx, Value, R};

/// Values and i64 indices of the k largest (or, with `largest = 0`, smallest) elements along
/// `axis`, in order. `values_j = Σ x ⊙ onehot(argmax)`; the derivative flows through x only.
pub fn topk(c: &mut Ctx) -> R<Vec<Value>> {
    let x = c.fvar(0)?;
    let d = c.ty(x).dims().to_vec();
    let dtype = c.ty(x).dtype;
    let k = if c.opset >= 10 {
        let v = c.need_known(1, "k")?.as_i64s();
        match v.as_slice() {
            [k] => *k,
            _ => return Err(c.err(format!("k {v:?} must be one count"))),
        }
    } else {
        c.int("k", 0)?
    };
    let axis = c.axis(c.int("axis", -1)?, d.len())?;
    let n = d[axis];
    if k <= 0 || k as usize > n {
        return Err(c.unsupported(format!(
            "k = {k} for an axis of size {n} (1..={n} supported)"
        )));
    }
    let k = k as usize;
    let largest = c.int("largest", 1)? != 0;
    // Rows of the axis: (P, n).
    let mut perm: Vec<usize> = (0..d.len()).filter(|&a| a != axis).collect();
    perm.push(axis);
    let moved = if axis + 1 == d.len() {
        x
    } else {
        t!(c, c.b.permute(x, perm.clone()))?
    };
    let md = c.ty(moved).dims().to_vec();
    let p: usize = md[..md.len() - 1].iter().product();
    let x2 = reshape_to(c, moved, vec![p, n])?;
    // The selection keys: x (or -x), only ever read by argmax.
    let keys = if largest { x2 } else { t!(c, c.b.neg(x2))? };
    let mut cur = t!(c, c.b.stop_gradient(keys))?;
    // Taken positions become `gone = m - max(1, |m|)` with m the row minimum: finite and strictly
    // below every key of the row.
    let gone = {
        let nk = t!(c, c.b.neg(cur))?;
        let nm = t!(c, c.b.reduce_max(nk, Some(vec![1])))?;
        let m = t!(c, c.b.neg(nm))?;
        let a = t!(c, c.b.abs(m))?;
        let one = t!(c, c.b.full_like(1.0, a))?;
        let w = t!(c, c.b.maximum(a, one))?;
        let g = t!(c, c.b.sub(m, w))?;
        t!(c, c.b.broadcast(g, vec![p, n], vec![0]))?
    };
    let half = c.full(0.5, dtype, &[p, n])?;
    let (mut vals, mut idxs) = (Vec::with_capacity(k), Vec::with_capacity(k));
    for j in 0..k {
        let am = t!(c, c.b.argmax(cur, 1))?;
        // A selection, not a function of x to differentiate.
        let oh = t!(c, c.b.one_hot(am, n, dtype))?;
        let oh = t!(c, c.b.stop_gradient(oh))?;
        let picked = t!(c, c.b.mul(x2, oh))?;
        let v = t!(c, c.b.sum(picked, Some(vec![1])))?;
        vals.push(reshape_to(c, v, vec![p, 1])?);
        idxs.push(reshape_to(c, oh, vec![p, 1, n])?);
        if j + 1 < k {
            let mask = t!(c, c.b.greater(oh, half))?;
            cur = t!(c, c.b.select(mask, gone, cur))?;
        }
    }
    let mut od = md.clone();
    *od.last_mut().expect("rank ≥ 1") = k;
    let mut inv = vec![0; d.len()];
    for (q, &a) in perm.iter().enumerate() {
        inv[a] = q;
    }
    let back = |c: &mut Ctx, parts: Vec<Var>| -> R<Var> {
        let y = if parts.len() == 1 {
            parts[0]
        } else {
            t!(c, c.b.concat(&parts, 1))?
        };
        let y = reshape_to(c, y, od.clone())?;
        if axis + 1 == d.len() {
            Ok(y)
        } else {
            t!(c, c.b.permute(y, inv.clone()))
        }
    };
    let values = back(c, vals)?;
    if c.node.output.get(1).is_none_or(String::is_empty) {
        return Ok(vec![Value::Var(values)]);
    }
    // Indices: the one-hot rows stacked as (..., k, n) in the output layout; their argmax over
    // the last axis is the position each round took (the core keeps i64 values unreshaped).
    let ohs = if idxs.len() == 1 {
        idxs[0]
    } else {
        t!(c, c.b.concat(&idxs, 1))?
    };
    let mut ohd = od.clone();
    ohd.push(n);
    let ohs = reshape_to(c, ohs, ohd)?;
    let ohs = if axis + 1 == d.len() {
        ohs
    } else {
        let mut inv2 = inv.clone();
        inv2.push(d.len());
        t!(c, c.b.permute(ohs, inv2))?
    };
    let indices = t!(c, c.b.argmax(ohs, d.len()))?;
    Ok(vec![Value::Var(values), Value::Var(indices)])
}
