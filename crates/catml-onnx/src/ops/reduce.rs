//! Reductions (axes as attribute or input, keepdims, noop_with_empty_axes) and softmax family.

use catml_core::ir::Var;
use catml_core::prim::Ops;

use super::shape::reshape_to;
use crate::ctx::{Ctx, Value, R};

/// The opset from which each Reduce operator takes `axes` as an input.
fn axes_input_since(op: &str) -> i64 {
    if op == "ReduceSum" {
        13
    } else {
        18
    }
}

/// `dims` after reducing `axes`: those kept as size 1 (`keep`) or dropped.
fn reduced_dims(dims: &[usize], axes: &[usize], keep: bool) -> Vec<usize> {
    dims.iter()
        .enumerate()
        .filter_map(|(k, &d)| match (axes.contains(&k), keep) {
            (false, _) => Some(d),
            (true, true) => Some(1),
            (true, false) => None,
        })
        .collect()
}

/// Sum over `axes`, with the reduced axes kept as size 1 when `keep`.
pub fn sum_keep(c: &mut Ctx, x: Var, axes: &[usize], keep: bool) -> R<Var> {
    let dims = c.ty(x).dims().to_vec();
    let s = t!(c, c.b.sum(x, Some(axes.to_vec())))?;
    if keep {
        return reshape_to(c, s, reduced_dims(&dims, axes, true));
    }
    Ok(s)
}

fn max_keep(c: &mut Ctx, x: Var, axes: &[usize], keep: bool) -> R<Var> {
    let dims = c.ty(x).dims().to_vec();
    let s = t!(c, c.b.reduce_max(x, Some(axes.to_vec())))?;
    if keep {
        return reshape_to(c, s, reduced_dims(&dims, axes, true));
    }
    Ok(s)
}

pub fn reduce(c: &mut Ctx) -> R<Vec<Value>> {
    let op = c.node.op_type.clone();
    // ReduceSum adds i64 program values too (modulo 2^64, the core's i64 sum).
    let x = if op == "ReduceSum" {
        c.nvar(0, false)?
    } else {
        c.fvar(0)?
    };
    let dims = c.ty(x).dims().to_vec();
    let r = dims.len();
    let keep = c.int("keepdims", 1)? != 0;
    let axes = if c.opset >= axes_input_since(&op) {
        if c.has(1) {
            Some(c.need_known(1, "axes")?.as_i64s())
        } else {
            None
        }
    } else {
        c.ints("axes")?
    };
    let axes: Vec<usize> = match axes {
        Some(a) if !a.is_empty() => {
            let mut v: Vec<usize> = a.iter().map(|&k| c.axis(k, r)).collect::<R<_>>()?;
            v.sort();
            v.dedup();
            v
        }
        _ => {
            if c.int("noop_with_empty_axes", 0)? != 0 {
                return Ok(vec![Value::Var(x)]);
            }
            (0..r).collect()
        }
    };
    if r == 0 {
        return Ok(vec![Value::Var(x)]);
    }
    let n: usize = axes.iter().map(|&a| dims[a]).product();
    let y = match op.as_str() {
        "ReduceSum" => sum_keep(c, x, &axes, keep)?,
        "ReduceMean" => {
            let s = sum_keep(c, x, &axes, keep)?;
            t!(c, c.b.div_count(s, n))?
        }
        "ReduceMax" => max_keep(c, x, &axes, keep)?,
        "ReduceMin" => {
            let nx = t!(c, c.b.neg(x))?;
            let m = max_keep(c, nx, &axes, keep)?;
            t!(c, c.b.neg(m))?
        }
        "ReduceSumSquare" => {
            let sq = t!(c, c.b.mul(x, x))?;
            sum_keep(c, sq, &axes, keep)?
        }
        "ReduceL1" => {
            let a = super::elementwise::unary_var(c, "Abs", x)?;
            sum_keep(c, a, &axes, keep)?
        }
        "ReduceL2" => {
            let sq = t!(c, c.b.mul(x, x))?;
            let s = sum_keep(c, sq, &axes, keep)?;
            t!(c, c.b.sqrt(s))?
        }
        "ReduceLogSum" => {
            let s = sum_keep(c, x, &axes, keep)?;
            t!(c, c.b.log(s))?
        }
        "ReduceLogSumExp" => {
            // m + log(sum(exp(x - m))), m the max (held constant: the result does not depend on it).
            let m = max_keep(c, x, &axes, true)?;
            let m = t!(c, c.b.stop_gradient(m))?;
            let mb = c.expand_to(m, &dims)?;
            let d = t!(c, c.b.sub(x, mb))?;
            let ex = t!(c, c.b.exp(d))?;
            let s = sum_keep(c, ex, &axes, true)?;
            let l = t!(c, c.b.log(s))?;
            let y = t!(c, c.b.add(l, m))?;
            if keep {
                y
            } else {
                reshape_to(c, y, reduced_dims(&dims, &axes, false))?
            }
        }
        "ReduceProd" => {
            // One product of slices per reduced axis (the last first, so positions hold).
            let mut p = x;
            for &a in axes.iter().rev() {
                if dims[a] > 256 {
                    return Err(c.unsupported(format!("ReduceProd over an axis of {}", dims[a])));
                }
                let mut acc = super::shape::take_along(c, p, a, vec![0])?;
                for k in 1..dims[a] {
                    let s = super::shape::take_along(c, p, a, vec![k])?;
                    acc = t!(c, c.b.mul(acc, s))?;
                }
                p = acc;
            }
            if keep {
                p
            } else {
                reshape_to(c, p, reduced_dims(&dims, &axes, false))?
            }
        }
        other => return Err(c.unsupported(format!("reduction {other}"))),
    };
    Ok(vec![Value::Var(y)])
}

/// Hardmax: 1 at the first largest entry along the axis, 0 elsewhere (before opset 13 over the
/// flattened trailing axes from `axis`, default 1).
pub fn hardmax(c: &mut Ctx) -> R<Vec<Value>> {
    let x = c.fvar(0)?;
    let dims = c.ty(x).dims().to_vec();
    let r = dims.len();
    let dt = c.ty(x).dtype;
    let (v, axis) = if c.opset < 13 {
        let axis = c.axis(c.int("axis", 1)?, r)?;
        let flat = vec![dims[..axis].iter().product(), dims[axis..].iter().product()];
        (reshape_to(c, x, flat)?, 1)
    } else {
        (x, c.axis(c.int("axis", -1)?, r)?)
    };
    let vd = c.ty(v).dims().to_vec();
    let n = vd[axis];
    let i = t!(c, c.b.argmax(v, axis))?;
    let h = t!(c, c.b.one_hot(i, n, dt))?;
    // one_hot appends the class axis: move it back to `axis`.
    let rv = vd.len();
    let h = if axis + 1 == rv {
        h
    } else {
        let mut perm: Vec<usize> = (0..rv - 1).collect();
        perm.insert(axis, rv - 1);
        t!(c, c.b.permute(h, perm))?
    };
    Ok(vec![Value::Var(reshape_to(c, h, dims)?)])
}

/// LpNormalization: x / ||x||_p along `axis` (p = 1 or 2); 0 where the norm is 0.
pub fn lp_normalization(c: &mut Ctx) -> R<Vec<Value>> {
    let x = c.fvar(0)?;
    let dims = c.ty(x).dims().to_vec();
    let axis = c.axis(c.int("axis", -1)?, dims.len())?;
    let p = c.int("p", 2)?;
    let norm = match p {
        1 => {
            let a = t!(c, c.b.abs(x))?;
            sum_keep(c, a, &[axis], true)?
        }
        2 => {
            let sq = t!(c, c.b.mul(x, x))?;
            let s = sum_keep(c, sq, &[axis], true)?;
            t!(c, c.b.sqrt(s))?
        }
        other => return Err(c.unsupported(format!("p = {other}"))),
    };
    // A zero norm means x is 0 there: divide by 1 instead, giving 0 (as ONNX does).
    let nb = c.expand_to(norm, &dims)?;
    let zero = c.b.full_like(0.0, nb).map_err(|e| c.err(e.to_string()))?;
    let one = c.b.full_like(1.0, nb).map_err(|e| c.err(e.to_string()))?;
    let z = t!(c, c.b.equal(nb, zero))?;
    let safe = t!(c, c.b.select(z, one, nb))?;
    Ok(vec![Value::Var(t!(c, c.b.div(x, safe))?)])
}

/// Softmax, LogSoftmax: before opset 13 over the flattened trailing axes from `axis` (default 1),
/// since 13 over the one axis (default -1).
pub fn softmax(c: &mut Ctx) -> R<Vec<Value>> {
    let x = c.fvar(0)?;
    let dims = c.ty(x).dims().to_vec();
    let r = dims.len();
    let log = c.node.op_type == "LogSoftmax";
    let apply = |c: &mut Ctx, v: Var, axis: usize| -> R<Var> {
        if log {
            t!(c, c.b.log_softmax(v, axis))
        } else {
            t!(c, c.b.softmax(v, axis))
        }
    };
    let y = if c.opset < 13 {
        let axis = c.axis(c.int("axis", 1)?, r)?;
        let flat = vec![dims[..axis].iter().product(), dims[axis..].iter().product()];
        let v = reshape_to(c, x, flat)?;
        let s = apply(c, v, 1)?;
        reshape_to(c, s, dims)?
    } else {
        let axis = c.axis(c.int("axis", -1)?, r)?;
        apply(c, x, axis)?
    };
    Ok(vec![Value::Var(y)])
}
