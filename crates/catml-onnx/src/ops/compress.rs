//! Compress with the condition known at import: the selected slices along an axis (of the
//! flattened input when no axis is given), as a gather.

use super::shape::{reshape_to, take_along};
use crate::ctx::{Ctx, Value, R};

/// Keeps index k of the axis where `condition[k]` holds (a shorter condition drops the rest).
pub fn compress(c: &mut Ctx) -> R<Vec<Value>> {
    let x = c.fvar(0)?;
    let dims = c.ty(x).dims().to_vec();
    let cond = c.need_known(1, "condition")?;
    if cond.dims.len() != 1 {
        return Err(c.err(format!(
            "condition has shape {:?}, expected rank 1",
            cond.dims
        )));
    }
    let (x, axis) = match c.int_opt("axis")? {
        Some(a) => (x, c.axis(a, dims.len())?),
        None => (reshape_to(c, x, vec![dims.iter().product()])?, 0),
    };
    let n = c.ty(x).dims()[axis];
    let keep: Vec<usize> = cond
        .as_i64s()
        .iter()
        .enumerate()
        .filter(|(_, &v)| v != 0)
        .map(|(k, _)| k)
        .collect();
    if let Some(&k) = keep.iter().find(|&&k| k >= n) {
        return Err(c.err(format!(
            "condition selects index {k}, past the axis size {n}"
        )));
    }
    let y = take_along(c, x, axis, keep)?;
    Ok(vec![Value::Var(y)])
}
