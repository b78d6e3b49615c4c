//! TensorScatter: an output whose every element is copied from a position fixed at import time
//! (the write indices are known), emitted as one static `gather` over the flattened sources.

use catml_core::ir::Var;
use catml_core::prim::Ops;

use super::shape::reshape_to;
use crate::ctx::{Ctx, Value, R};

/// Row-major strides of `dims`.
fn strides(dims: &[usize]) -> Vec<usize> {
    let mut s = vec![1; dims.len()];
    for k in (0..dims.len().saturating_sub(1)).rev() {
        s[k] = s[k + 1] * dims[k + 1];
    }
    s
}

/// The multi-index of flat position `p` in `dims`.
fn unflatten(mut p: usize, dims: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; dims.len()];
    for k in (0..dims.len()).rev() {
        idx[k] = p % dims[k].max(1);
        p /= dims[k].max(1);
    }
    idx
}

/// The output of shape `dims` whose flat element p is element `src[p]` of the sources
/// flattened and laid end to end.
fn pick(c: &mut Ctx, sources: &[Var], dims: &[usize], src: Vec<usize>) -> R<Var> {
    let mut flat = Vec::with_capacity(sources.len());
    for &v in sources {
        let n = c.ty(v).dims().iter().product();
        flat.push(reshape_to(c, v, vec![n])?);
    }
    let all = if flat.len() == 1 {
        flat[0]
    } else {
        t!(c, c.b.concat(&flat, 0))?
    };
    let g = t!(c, c.b.gather(all, 0, src))?;
    reshape_to(c, g, dims.to_vec())
}

/// Known non-negative integers of input `i`.
fn known_indices(c: &Ctx, i: usize, what: &str) -> R<Vec<i64>> {
    Ok(c.need_known(i, what)?.as_i64s())
}

/// TensorScatter: the cache with `update` written along `axis` from write_indices[b] (per
/// entry b of axis 0; 0 without the input), wrapping around for `mode` = "circular".
pub fn tensor_scatter(c: &mut Ctx) -> R<Vec<Value>> {
    let (cd, ud) = (c.dims(0)?, c.dims(1)?);
    let axis = c.axis(c.int("axis", -2)?, cd.len())?;
    if axis == 0 {
        return Err(c.err("attribute `axis` must not be the batch axis 0"));
    }
    let circular = match c.string("mode", "linear")?.as_str() {
        "linear" => false,
        "circular" => true,
        m => return Err(c.unsupported(format!("attribute `mode` = {m:?} (linear or circular)"))),
    };
    let fits = cd.len() == ud.len()
        && cd
            .iter()
            .zip(&ud)
            .enumerate()
            .all(|(k, (&a, &b))| if k == axis { b <= a } else { a == b });
    if !fits {
        return Err(c.err(format!(
            "update of shape {ud:?} does not fit the cache of shape {cd:?} along axis {axis}"
        )));
    }
    let starts = if c.has(2) {
        known_indices(c, 2, "write_indices")?
    } else {
        vec![0; cd[0]]
    };
    if starts.len() != cd[0] {
        return Err(c.err(format!(
            "write_indices has {} entries for a batch of {}",
            starts.len(),
            cd[0]
        )));
    }
    let (max, len) = (cd[axis], ud[axis]);
    // Cache position t along `axis` of batch b holds update entry t - start (mod max).
    let mut from_update = vec![None; cd[0] * max];
    for (b, &s) in starts.iter().enumerate() {
        for k in 0..len {
            let t = s + k as i64;
            let t = if circular {
                t.rem_euclid(max as i64)
            } else {
                t
            };
            if t < 0 || t as usize >= max {
                return Err(c.err(format!(
                    "write index {s} of batch entry {b} writes {len} entries past the cache length {max}"
                )));
            }
            from_update[b * max + t as usize] = Some(k);
        }
    }
    let (sc, su) = (strides(&cd), strides(&ud));
    let offset: usize = cd.iter().product();
    let src = (0..offset)
        .map(|p| {
            let mut idx = unflatten(p, &cd);
            match from_update[idx[0] * max + idx[axis]] {
                Some(k) => {
                    idx[axis] = k;
                    offset + idx.iter().zip(&su).map(|(i, s)| i * s).sum::<usize>()
                }
                None => idx.iter().zip(&sc).map(|(i, s)| i * s).sum(),
            }
        })
        .collect();
    let (cache, update) = (c.var(0)?, c.var(1)?);
    Ok(vec![Value::Var(pick(c, &[cache, update], &cd, src)?)])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flat_positions_round_trip() {
        let dims = [2, 3, 4];
        assert_eq!(strides(&dims), vec![12, 4, 1]);
        assert_eq!(unflatten(23, &dims), vec![1, 2, 3]);
        assert_eq!(unflatten(5, &dims), vec![0, 1, 1]);
    }
}
