//! ScatterElements, Scatter and ScatterND with the indices known at import: every update's
//! flat target in the data is computed then, and the reductions none, add, mul, max and min
//! become gathers, `scatter_add`s into zeros and elementwise ops on the flattened data.

use std::collections::HashMap;

use catml_core::ir::Var;
use catml_core::prim::Ops;

use super::shape::reshape_to;
use crate::ctx::{Ctx, Value, R};

#[derive(Debug, Clone, Copy, PartialEq)]
enum Reduction {
    None,
    Add,
    Mul,
    Max,
    Min,
}

fn reduction(c: &Ctx) -> R<Reduction> {
    Ok(match c.string("reduction", "none")?.as_str() {
        "none" => Reduction::None,
        "add" => Reduction::Add,
        "mul" => Reduction::Mul,
        "max" => Reduction::Max,
        "min" => Reduction::Min,
        other => return Err(c.unsupported(format!("reduction \"{other}\""))),
    })
}

/// Row-major strides of `dims`.
fn strides(dims: &[usize]) -> Vec<usize> {
    let mut s = vec![1; dims.len()];
    for k in (0..dims.len().saturating_sub(1)).rev() {
        s[k] = s[k + 1] * dims[k + 1];
    }
    s
}

/// An index in [-n, n) made non-negative, or an error naming it.
fn wrap(c: &Ctx, i: i64, n: usize) -> R<usize> {
    let w = if i < 0 { i + n as i64 } else { i };
    if w < 0 || w >= n as i64 {
        return Err(c.err(format!("index {i} is out of range for size {n}")));
    }
    Ok(w as usize)
}

/// The data (flattened to n elements) with update k applied at `targets[k]`. Repeated targets
/// apply in order: the last wins for `none`, the others combine all their updates.
fn scatter_flat(c: &mut Ctx, data: Var, updates: Var, targets: &[usize], red: Reduction) -> R<Var> {
    let n = c.ty(data).numel();
    let dtype = c.ty(data).dtype;
    let d = reshape_to(c, data, vec![n])?;
    let m = targets.len();
    if m == 0 {
        return Ok(d);
    }
    let u = reshape_to(c, updates, vec![m])?;
    if red == Reduction::Add {
        let s = t!(c, c.b.scatter_add(u, 0, targets.to_vec(), n))?;
        return t!(c, c.b.add(d, s));
    }
    // Layers: layer j holds each target's (j+1)-th update; `none` keeps only the last one.
    let mut layers: Vec<Vec<(usize, usize)>> = Vec::new();
    if red == Reduction::None {
        let mut last: HashMap<usize, usize> = HashMap::new();
        for (k, &t) in targets.iter().enumerate() {
            last.insert(t, k);
        }
        let mut l: Vec<(usize, usize)> = last.into_iter().map(|(t, k)| (k, t)).collect();
        l.sort_unstable();
        layers.push(l);
    } else {
        let mut seen: HashMap<usize, usize> = HashMap::new();
        for (k, &t) in targets.iter().enumerate() {
            let j = seen.entry(t).or_insert(0);
            if *j == layers.len() {
                layers.push(Vec::new());
            }
            layers[*j].push((k, t));
            *j += 1;
        }
    }
    let mut y = d;
    for layer in layers {
        let (ks, ts): (Vec<usize>, Vec<usize>) = layer.into_iter().unzip();
        let g = if ks.len() == m && ks.iter().enumerate().all(|(a, &b)| a == b) {
            u
        } else {
            t!(c, c.b.gather(u, 0, ks))?
        };
        // `placed` holds the layer's updates at their targets and zeros elsewhere; `untouched`
        // is 1 off the targets.
        let placed = t!(c, c.b.scatter_add(g, 0, ts.clone(), n))?;
        let mut off = vec![1.0; n];
        for &t in &ts {
            off[t] = 0.0;
        }
        let untouched = c.constant_of(dtype, &[n], off)?;
        y = match red {
            Reduction::None => {
                let kept = t!(c, c.b.mul(y, untouched))?;
                t!(c, c.b.add(kept, placed))?
            }
            Reduction::Mul => {
                let factor = t!(c, c.b.add(placed, untouched))?;
                t!(c, c.b.mul(y, factor))?
            }
            Reduction::Max | Reduction::Min => {
                let kept = t!(c, c.b.mul(y, untouched))?;
                let cand = t!(c, c.b.add(kept, placed))?;
                if red == Reduction::Max {
                    t!(c, c.b.maximum(y, cand))?
                } else {
                    t!(c, c.b.minimum(y, cand))?
                }
            }
            Reduction::Add => unreachable!("handled above"),
        };
    }
    Ok(y)
}

/// ScatterElements (and the older Scatter): `out[i with axis entry indices[i]] = updates[i]`
/// for every position i of `indices`.
pub fn scatter_elements(c: &mut Ctx) -> R<Vec<Value>> {
    let data = c.fvar(0)?;
    let dims = c.ty(data).dims().to_vec();
    let idx = c.need_known(1, "indices")?;
    let updates = c.fvar(2)?;
    let ud = c.ty(updates).dims().to_vec();
    if idx.dims != ud || ud.len() != dims.len() {
        return Err(c.err(format!(
            "indices {:?} and updates {ud:?} must have one shape of the data's rank {}",
            idx.dims,
            dims.len()
        )));
    }
    let axis = c.axis(c.int("axis", 0)?, dims.len())?;
    let red = if c.node.op_type == "Scatter" {
        Reduction::None
    } else {
        reduction(c)?
    };
    let (ds, us) = (strides(&dims), strides(&ud));
    let mut targets = Vec::with_capacity(idx.numel());
    for (k, &i) in idx.as_i64s().iter().enumerate() {
        let mut flat = 0;
        for (a, (&s, &st)) in us.iter().zip(&ds).enumerate() {
            let p = (k / s) % ud[a];
            if a != axis && p >= dims[a] {
                return Err(c.err(format!("updates exceed the data along axis {a}")));
            }
            let p = if a == axis { wrap(c, i, dims[a])? } else { p };
            flat += p * st;
        }
        targets.push(flat);
    }
    let y = scatter_flat(c, data, updates, &targets, red)?;
    Ok(vec![Value::Var(reshape_to(c, y, dims)?)])
}

/// ScatterND: `out[indices[i]] = updates[i]`, each index tuple of length k naming a slice of the
/// data's trailing dims from k on.
pub fn scatter_nd(c: &mut Ctx) -> R<Vec<Value>> {
    let data = c.fvar(0)?;
    let dims = c.ty(data).dims().to_vec();
    let idx = c.need_known(1, "indices")?;
    let updates = c.fvar(2)?;
    let ud = c.ty(updates).dims().to_vec();
    let Some((&k, lead)) = idx.dims.split_last() else {
        return Err(c.err("indices must have rank at least 1"));
    };
    if k == 0 || k > dims.len() {
        return Err(c.err(format!(
            "index tuples of length {k} for data of rank {}",
            dims.len()
        )));
    }
    let want: Vec<usize> = lead.iter().chain(&dims[k..]).copied().collect();
    if ud != want {
        return Err(c.err(format!("updates have shape {ud:?}, expected {want:?}")));
    }
    let ds = strides(&dims);
    let slice: usize = dims[k..].iter().product();
    let tuples = idx.as_i64s();
    let mut targets = Vec::with_capacity(tuples.len() / k * slice);
    for tuple in tuples.chunks(k) {
        let mut base = 0;
        for (a, &i) in tuple.iter().enumerate() {
            base += wrap(c, i, dims[a])? * ds[a];
        }
        targets.extend(base..base + slice);
    }
    let red = reduction(c)?;
    let y = scatter_flat(c, data, updates, &targets, red)?;
    Ok(vec![Value::Var(reshape_to(c, y, dims)?)])
}
