//! NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss and GatherElements with indices known at
//! import: each picks entries of a float value by flat positions (one `gather` of the flattened
//! value), so gradients flow to the picked entries.

use catml_core::ir::Var;
use catml_core::prim::Ops;

use crate::ctx::{Ctx, Value, R};

/// Row-major flat positions of `x` (dims `dims`) given, per element of `idx_dims`, the index
/// along `axis` (`idx`) and the element's own coordinates elsewhere.
fn flat_positions(dims: &[usize], axis: usize, idx_dims: &[usize], idx: &[usize]) -> Vec<usize> {
    let mut strides = vec![1usize; dims.len()];
    for k in (0..dims.len().saturating_sub(1)).rev() {
        strides[k] = strides[k + 1] * dims[k + 1];
    }
    let mut coord = vec![0usize; idx_dims.len()];
    let mut out = Vec::with_capacity(idx.len());
    for &i in idx {
        let p: usize = coord
            .iter()
            .enumerate()
            .map(|(k, &c)| if k == axis { i } else { c } * strides[k])
            .sum();
        out.push(p);
        for k in (0..idx_dims.len()).rev() {
            coord[k] += 1;
            if coord[k] < idx_dims[k] {
                break;
            }
            coord[k] = 0;
        }
    }
    out
}

/// Entries of `x` at flat positions `pos`, shaped `dims`.
fn pick(c: &mut Ctx, x: Var, pos: Vec<usize>, dims: Vec<usize>) -> R<Var> {
    let n: usize = c.ty(x).dims().iter().product();
    let flat = t!(c, c.b.reshape(x, vec![n]))?;
    let g = t!(c, c.b.gather(flat, 0, pos))?;
    t!(c, c.b.reshape(g, dims))
}

/// GatherElements(data, indices, axis) with indices known at import (negative ones count from
/// the end of the axis).
pub fn gather_elements(c: &mut Ctx) -> R<Vec<Value>> {
    let x = c.fvar(0)?;
    let dims = c.ty(x).dims().to_vec();
    let k = c.need_known(1, "indices")?;
    if k.dims.len() != dims.len() {
        return Err(c.err(format!(
            "indices have rank {}, data rank {}",
            k.dims.len(),
            dims.len()
        )));
    }
    if k.dims.contains(&0) {
        return Err(c.unsupported("indices with no elements"));
    }
    let axis = c.axis(c.int("axis", 0)?, dims.len())?;
    for (a, (&i, &d)) in k.dims.iter().zip(&dims).enumerate() {
        if a != axis && i > d {
            return Err(c.err(format!("indices dim {a} is {i}, larger than data's {d}")));
        }
    }
    let n = dims[axis] as i64;
    let idx: Vec<usize> = k
        .as_i64s()
        .iter()
        .map(|&i| {
            let j = if i < 0 { i + n } else { i };
            if (0..n).contains(&j) {
                Ok(j as usize)
            } else {
                Err(c.err(format!("index {i} is out of range for axis of size {n}")))
            }
        })
        .collect::<R<_>>()?;
    let pos = flat_positions(&dims, axis, &k.dims, &idx);
    Ok(vec![Value::Var(pick(c, x, pos, k.dims.clone())?)])
}

/// -log_prob[n, target, d...] weighted, with ONNX's reductions; `logp` is (N, C, d...).
fn nll(c: &mut Ctx, logp: Var, target: usize, weight: Option<usize>) -> R<Var> {
    let dims = c.ty(logp).dims().to_vec();
    if dims.len() < 2 {
        return Err(c.err("input must have shape (N, C, ...)"));
    }
    let classes = dims[1];
    let t = c.need_known(target, "target")?;
    let mut tdims = dims.clone();
    tdims.remove(1);
    if t.dims != tdims {
        return Err(c.err(format!("target has shape {:?}, expected {tdims:?}", t.dims)));
    }
    let ignore = c.int_opt("ignore_index")?;
    let reduction = c.string("reduction", "mean")?;
    if !matches!(reduction.as_str(), "none" | "sum" | "mean") {
        return Err(c.unsupported(format!("reduction \"{reduction}\"")));
    }
    let mut cls = Vec::new();
    let mut valid = Vec::new();
    for &v in &t.as_i64s() {
        if Some(v) == ignore {
            cls.push(0);
            valid.push(0.0);
        } else if (0..classes as i64).contains(&v) {
            cls.push(v as usize);
            valid.push(1.0);
        } else {
            return Err(c.err(format!("target {v} is out of range for {classes} classes")));
        }
    }
    // The per-element picks: index along axis 1 of (N, C, d...) viewed as (N, C, D).
    let mut idx_dims = tdims.clone();
    idx_dims.insert(1, 1);
    let pos = flat_positions(&dims, 1, &idx_dims, &cls);
    let picked = pick(c, logp, pos, tdims.clone())?;
    let dt = c.ty(logp).dtype;
    let mask = crate::konst::Const::floats(crate::konst::code_of(dt), tdims.clone(), valid)
        .to_tensor()
        .map_err(|m| c.err(m))?;
    let mut w = t!(c, c.b.constant(mask))?;
    if let Some(wi) = weight.filter(|&i| c.has(i)) {
        let wv = c.fvar(wi)?;
        if c.ty(wv).dims() != [classes] {
            return Err(c.err(format!("weight must have shape [{classes}]")));
        }
        let wt = t!(c, c.b.gather(wv, 0, cls))?;
        let wt = t!(c, c.b.reshape(wt, tdims.clone()))?;
        w = t!(c, c.b.mul(w, wt))?;
    }
    let l = t!(c, c.b.mul(picked, w))?;
    let l = t!(c, c.b.neg(l))?;
    Ok(match reduction.as_str() {
        "none" => l,
        "sum" => t!(c, c.b.sum(l, None))?,
        _ => {
            let s = t!(c, c.b.sum(l, None))?;
            let d = t!(c, c.b.sum(w, None))?;
            t!(c, c.b.div(s, d))?
        }
    })
}

/// NegativeLogLikelihoodLoss(input, target, weight?) with the target known at import.
pub fn nll_loss(c: &mut Ctx) -> R<Vec<Value>> {
    let x = c.fvar(0)?;
    Ok(vec![Value::Var(nll(c, x, 1, Some(2))?)])
}

/// SoftmaxCrossEntropyLoss(scores, labels, weights?): NLL of log_softmax over axis 1, with the
/// log-probabilities as the optional second output.
pub fn softmax_cross_entropy(c: &mut Ctx) -> R<Vec<Value>> {
    let x = c.fvar(0)?;
    if c.ty(x).rank() < 2 {
        return Err(c.err("scores must have shape (N, C, ...)"));
    }
    let logp = t!(c, c.b.log_softmax(x, 1))?;
    let loss = nll(c, logp, 1, Some(2))?;
    let mut outs = vec![Value::Var(loss)];
    if c.node.output.len() > 1 {
        outs.push(Value::Var(logp));
    }
    Ok(outs)
}
