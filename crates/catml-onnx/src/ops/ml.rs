//! Operators of `ai.onnx.ml` that are plain tensor arithmetic: Binarizer (a threshold) and
//! ArrayFeatureExtractor (a gather along the last axis with indices known at import).

use catml_core::prim::Ops;

use super::shape::reshape_to;
use crate::ctx::{Ctx, Value, R};

/// (ONNX op type, mapping) of the ml domain.
pub const TABLE: &[(&str, super::OpFn)] = &[
    ("Binarizer", binarizer),
    ("ArrayFeatureExtractor", array_feature_extractor),
];

/// `Y = 1 where X > threshold, else 0`, in X's dtype (NaN gives 0).
pub fn binarizer(c: &mut Ctx) -> R<Vec<Value>> {
    let x = c.fvar(0)?;
    let th = c.float("threshold", 0.0)? as f64;
    let t = t!(c, c.b.full_like(th, x))?;
    let above = t!(c, c.b.greater(x, t))?;
    let dtype = c.ty(x).dtype;
    Ok(vec![Value::Var(t!(c, c.b.convert(above, dtype))?)])
}

/// `Z[..., k] = X[..., indices_flat[k]]`; a 1-D X gives one row (1, K), as onnxruntime does.
pub fn array_feature_extractor(c: &mut Ctx) -> R<Vec<Value>> {
    let x = c.fvar(0)?;
    let d = c.ty(x).dims().to_vec();
    let idx = c.need_known(1, "indices")?;
    if idx.is_float() {
        return Err(c.err("indices must be integers"));
    }
    let Some(&n) = d.last() else {
        return Err(c.err("X must have rank at least 1"));
    };
    let mut picks = Vec::with_capacity(idx.numel());
    for (k, &i) in idx.as_i64s().iter().enumerate() {
        let j = if i < 0 { i + n as i64 } else { i };
        if j < 0 || j >= n as i64 {
            return Err(c.err(format!(
                "indices[{k}] = {i} is out of range for a last axis of size {n}"
            )));
        }
        picks.push(j as usize);
    }
    if picks.is_empty() {
        return Err(c.unsupported("empty indices (a zero-sized output)"));
    }
    let y = t!(c, c.b.gather(x, d.len() - 1, picks))?;
    let y = if d.len() == 1 {
        let k = c.ty(y).numel();
        reshape_to(c, y, vec![1, k])?
    } else {
        y
    };
    Ok(vec![Value::Var(y)])
}
