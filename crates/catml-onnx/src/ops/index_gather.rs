//! GatherND and ReverseSequence with their indices (lengths) known at import: every output
//! element's source in the flattened input is computed then, and the result is one gather.

use catml_core::ir::Var;

use super::shape::reshape_to;
use crate::ctx::{Ctx, Value, R};

/// The elements `sources` of x (flattened), shaped `dims`.
fn flat_gather(c: &mut Ctx, x: Var, sources: Vec<usize>, dims: Vec<usize>) -> R<Var> {
    let n = c.ty(x).numel();
    let flat = reshape_to(c, x, vec![n])?;
    let y = super::shape::take_along(c, flat, 0, sources)?;
    reshape_to(c, y, dims)
}

fn strides(dims: &[usize]) -> Vec<usize> {
    let mut s = vec![1; dims.len()];
    for k in (0..dims.len().saturating_sub(1)).rev() {
        s[k] = s[k + 1] * dims[k + 1];
    }
    s
}

/// GatherND: for each index tuple (after `batch_dims` shared leading dims), the data slice it
/// names: `out[b, i] = data[b, indices[b, i]]`.
pub fn gather_nd(c: &mut Ctx) -> R<Vec<Value>> {
    let x = c.fvar(0)?;
    let dd = c.ty(x).dims().to_vec();
    let idx = c.need_known(1, "indices")?;
    let bd = c.int("batch_dims", 0)?;
    let id = idx.dims.clone();
    let Some(&k) = id.last() else {
        return Err(c.err("indices must have rank at least 1"));
    };
    let b = usize::try_from(bd)
        .ok()
        .filter(|&b| b < id.len() && b < dd.len() && id[..b] == dd[..b])
        .ok_or_else(|| {
            c.err(format!(
                "batch_dims {bd} does not fit indices {id:?} and data {dd:?}"
            ))
        })?;
    if k == 0 || b + k > dd.len() {
        return Err(c.err(format!(
            "index tuples of length {k} for data {dd:?} with batch_dims {b}"
        )));
    }
    let ds = strides(&dd);
    let slice: usize = dd[b + k..].iter().product();
    let per_batch: usize = id[b..id.len() - 1].iter().product();
    let tuples = idx.as_i64s();
    let mut src = Vec::with_capacity(tuples.len() / k * slice);
    for (t, tuple) in tuples.chunks(k).enumerate() {
        // Batch entry t / per_batch starts at that multiple of the batch's element count.
        let mut base = if b == 0 { 0 } else { t / per_batch * ds[b - 1] };
        for (a, &i) in tuple.iter().enumerate() {
            let n = dd[b + a] as i64;
            let w = if i < 0 { i + n } else { i };
            if !(0..n).contains(&w) {
                return Err(c.err(format!("index {i} is out of range for size {n}")));
            }
            base += w as usize * ds[b + a];
        }
        src.extend(base..base + slice);
    }
    let mut od: Vec<usize> = id[..id.len() - 1].to_vec();
    od.extend(&dd[b + k..]);
    Ok(vec![Value::Var(flat_gather(c, x, src, od)?)])
}

/// ReverseSequence: along `time_axis`, the first `sequence_lens[b]` steps of batch entry b
/// (along `batch_axis`) reversed, the rest kept.
pub fn reverse_sequence(c: &mut Ctx) -> R<Vec<Value>> {
    let x = c.fvar(0)?;
    let dd = c.ty(x).dims().to_vec();
    let lens = c.need_known(1, "sequence_lens")?.as_i64s();
    let r = dd.len();
    let (ba, ta) = (c.int("batch_axis", 1)?, c.int("time_axis", 0)?);
    let (ba, ta) = (c.axis(ba, r)?, c.axis(ta, r)?);
    if ba == ta || r < 2 {
        return Err(c.err("batch_axis and time_axis must be two different axes"));
    }
    if lens.len() != dd[ba] || lens.iter().any(|&l| l < 0 || l as usize > dd[ta]) {
        return Err(c.err(format!(
            "sequence_lens {lens:?} must hold {} lengths in 0..={}",
            dd[ba], dd[ta]
        )));
    }
    let ds = strides(&dd);
    let n: usize = dd.iter().product();
    let src: Vec<usize> = (0..n)
        .map(|q| {
            let b = (q / ds[ba]) % dd[ba];
            let t = (q / ds[ta]) % dd[ta];
            let l = lens[b] as usize;
            if t < l {
                q - t * ds[ta] + (l - 1 - t) * ds[ta]
            } else {
                q
            }
        })
        .collect();
    Ok(vec![Value::Var(flat_gather(c, x, src, dd)?)])
}
