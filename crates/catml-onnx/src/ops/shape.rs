//! Layout operators: reshapes, permutations, concatenation, slicing and gathers with indices
//! known at import time, padding as gathers and concatenations; Shape, Size, Constant and
//! ConstantOfShape become known values.

use std::sync::Arc;

use catml_core::ir::Var;
use catml_core::prim::Ops;
use catml_core::tensor::{DType, Tensor};

use crate::ctx::{broadcast_dims, Ctx, Value, R};
use crate::fold::{reshape_dims, slice_ranges};
use crate::konst::{code_of, dtype_of, elem, Const, Data};

fn out(v: Var) -> R<Vec<Value>> {
    Ok(vec![Value::Var(v)])
}

fn konst(k: Const) -> R<Vec<Value>> {
    Ok(vec![Value::Const(Arc::new(k))])
}

fn check_dims(c: &Ctx, dims: &[usize]) -> R<()> {
    if dims.contains(&0) {
        return Err(c.unsupported(format!("result shape {dims:?} has no elements")));
    }
    Ok(())
}

/// x reshaped (float or i64 values).
pub fn reshape_to(c: &mut Ctx, x: Var, dims: Vec<usize>) -> R<Var> {
    check_dims(c, &dims)?;
    if c.ty(x).dims() == dims.as_slice() {
        return Ok(x);
    }
    t!(c, c.b.reshape(x, dims))
}

pub fn reshape(c: &mut Ctx) -> R<Vec<Value>> {
    let shape = if c.opset < 5 {
        c.ints("shape")?
            .ok_or_else(|| c.err("attribute `shape` is required"))?
    } else {
        c.need_known(1, "shape")?.as_i64s()
    };
    let allow_zero = c.int("allowzero", 0)? != 0;
    let x = c.nvar(0, false)?;
    let dims = reshape_dims(c.ty(x).dims(), &shape, allow_zero).map_err(|m| c.err(m))?;
    out(reshape_to(c, x, dims)?)
}

pub fn flatten(c: &mut Ctx) -> R<Vec<Value>> {
    let x = c.nvar(0, false)?;
    let dims = c.ty(x).dims().to_vec();
    let axis = c.int("axis", 1)?;
    let r = dims.len() as i64;
    let a = if axis < 0 { axis + r } else { axis };
    if a < 0 || a > r {
        return Err(c.err(format!("axis {axis} is out of range for rank {r}")));
    }
    let a = a as usize;
    let d = vec![dims[..a].iter().product(), dims[a..].iter().product()];
    out(reshape_to(c, x, d)?)
}

fn axes_arg(c: &Ctx, input: usize, since: i64) -> R<Option<Vec<i64>>> {
    if c.opset >= since {
        if c.has(input) {
            Ok(Some(c.need_known(input, "axes")?.as_i64s()))
        } else {
            Ok(None)
        }
    } else {
        c.ints("axes")
    }
}

pub fn squeeze(c: &mut Ctx) -> R<Vec<Value>> {
    let x = c.nvar(0, false)?;
    let dims = c.ty(x).dims().to_vec();
    let axes = axes_arg(c, 1, 13)?;
    let keep: Vec<usize> = match axes {
        None => dims.iter().copied().filter(|&d| d != 1).collect(),
        Some(a) => {
            let a: Vec<usize> = a.iter().map(|&v| c.axis(v, dims.len())).collect::<R<_>>()?;
            if let Some(&bad) = a.iter().find(|&&k| dims[k] != 1) {
                return Err(c.err(format!("axis {bad} has size {}, not 1", dims[bad])));
            }
            dims.iter()
                .enumerate()
                .filter(|(k, _)| !a.contains(k))
                .map(|(_, &d)| d)
                .collect()
        }
    };
    out(reshape_to(c, x, keep)?)
}

pub fn unsqueeze(c: &mut Ctx) -> R<Vec<Value>> {
    let x = c.nvar(0, false)?;
    let mut dims = c.ty(x).dims().to_vec();
    let axes = axes_arg(c, 1, 13)?.ok_or_else(|| c.err("axes are required"))?;
    let r = dims.len() + axes.len();
    let mut a: Vec<usize> = axes.iter().map(|&v| c.axis(v, r)).collect::<R<_>>()?;
    a.sort();
    for k in a {
        dims.insert(k, 1);
    }
    out(reshape_to(c, x, dims)?)
}

pub fn transpose(c: &mut Ctx) -> R<Vec<Value>> {
    let x = c.nvar(0, false)?;
    let r = c.ty(x).rank();
    let perm: Vec<usize> = match c.ints("perm")? {
        Some(p) => p.iter().map(|&v| c.axis(v, r)).collect::<R<_>>()?,
        None => (0..r).rev().collect(),
    };
    if perm.iter().enumerate().all(|(k, &p)| k == p) {
        return out(x);
    }
    out(t!(c, c.b.permute(x, perm))?)
}

pub fn concat(c: &mut Ctx) -> R<Vec<Value>> {
    let r = c.rank(0)?;
    let axis = c.axis(c.int("axis", 0)?, r)?;
    let mut xs = Vec::new();
    for i in 0..c.n_inputs() {
        if c.dims(i)?.contains(&0) {
            continue;
        }
        xs.push(c.fvar(i)?);
    }
    if xs.len() == 1 {
        return out(xs[0]);
    }
    out(t!(c, c.b.concat(&xs, axis))?)
}

/// Elements `indices` of x along `axis` (each index in range), as a gather.
pub fn take_along(c: &mut Ctx, x: Var, axis: usize, indices: Vec<usize>) -> R<Var> {
    let d = c.ty(x).dims()[axis];
    if indices.len() == d && indices.iter().enumerate().all(|(k, &i)| k == i) {
        return Ok(x);
    }
    if indices.is_empty() {
        return Err(c.unsupported("a slice with no elements"));
    }
    t!(c, c.b.gather(x, axis, indices))
}

pub fn slice(c: &mut Ctx) -> R<Vec<Value>> {
    let x = c.nvar(0, false)?;
    let dims = c.ty(x).dims().to_vec();
    let (starts, ends, axes, steps) = if c.opset < 10 {
        (
            c.ints("starts")?
                .ok_or_else(|| c.err("starts are required"))?,
            c.ints("ends")?.ok_or_else(|| c.err("ends are required"))?,
            c.ints("axes")?,
            None,
        )
    } else {
        let opt = |c: &Ctx, i: usize, w: &str| -> R<Option<Vec<i64>>> {
            if c.has(i) {
                Ok(Some(c.need_known(i, w)?.as_i64s()))
            } else {
                Ok(None)
            }
        };
        (
            c.need_known(1, "starts")?.as_i64s(),
            c.need_known(2, "ends")?.as_i64s(),
            opt(c, 3, "axes")?,
            opt(c, 4, "steps")?,
        )
    };
    let spec = slice_ranges(&dims, &starts, &ends, axes.as_deref(), steps.as_deref())
        .map_err(|m| c.err(m))?;
    let mut y = x;
    for (axis, &(s, step, n)) in spec.iter().enumerate() {
        let idx: Vec<usize> = (0..n as i64).map(|k| (s + k * step) as usize).collect();
        y = take_along(c, y, axis, idx)?;
    }
    out(y)
}

pub fn split(c: &mut Ctx) -> R<Vec<Value>> {
    let x = c.fvar(0)?;
    let dims = c.ty(x).dims().to_vec();
    let axis = c.axis(c.int("axis", 0)?, dims.len())?;
    let n_out = c.node.output.len();
    let sizes: Vec<usize> = if c.opset >= 13 && c.has(1) {
        c.need_known(1, "split")?
            .as_i64s()
            .iter()
            .map(|&v| v.max(0) as usize)
            .collect()
    } else if let Some(s) = c.ints("split")? {
        s.iter().map(|&v| v.max(0) as usize).collect()
    } else {
        let parts = c
            .int_opt("num_outputs")?
            .map(|v| v as usize)
            .unwrap_or(n_out)
            .max(1);
        let chunk = dims[axis].div_ceil(parts);
        (0..parts)
            .map(|k| chunk.min(dims[axis].saturating_sub(k * chunk)))
            .collect()
    };
    if sizes.iter().sum::<usize>() != dims[axis] {
        return Err(c.err(format!(
            "split sizes {sizes:?} do not add up to {}",
            dims[axis]
        )));
    }
    let mut outs = Vec::new();
    let mut at = 0;
    for s in sizes {
        outs.push(Value::Var(take_along(c, x, axis, (at..at + s).collect())?));
        at += s;
    }
    Ok(outs)
}

pub fn gather(c: &mut Ctx) -> R<Vec<Value>> {
    let x = c.nvar(0, false)?;
    let dims = c.ty(x).dims().to_vec();
    let axis = c.axis(c.int("axis", 0)?, dims.len())?;
    let Some(idx) = c.known(1) else {
        // Runtime indices: rows of a matrix (embedding lookup).
        if axis == 0
            && dims.len() == 2
            && c.ty(x).dtype.is_float()
            && c.dtype(1)? == catml_core::tensor::DType::I64
        {
            let i = c.var(1)?;
            return out(t!(c, c.b.take(x, i))?);
        }
        return Err(c.unsupported("runtime indices other than i64 rows of a float matrix"));
    };
    let n = dims[axis] as i64;
    let ids: Vec<usize> = idx
        .as_i64s()
        .iter()
        .map(|&i| {
            let j = if i < 0 { i + n } else { i };
            if j < 0 || j >= n {
                Err(c.err(format!(
                    "index {i} is out of range for axis {axis} of size {n}"
                )))
            } else {
                Ok(j as usize)
            }
        })
        .collect::<R<_>>()?;
    let g = take_along(c, x, axis, ids)?;
    let mut od: Vec<usize> = dims[..axis].to_vec();
    od.extend(&idx.dims);
    od.extend(&dims[axis + 1..]);
    out(reshape_to(c, g, od)?)
}

pub fn expand(c: &mut Ctx) -> R<Vec<Value>> {
    let x = c.nvar(0, false)?;
    let shape: Vec<usize> = c
        .need_known(1, "shape")?
        .as_i64s()
        .iter()
        .map(|&v| v.max(0) as usize)
        .collect();
    let dims =
        broadcast_dims(c.ty(x).dims(), &shape).ok_or_else(|| c.err("shape does not broadcast"))?;
    check_dims(c, &dims)?;
    out(c.expand_to(x, &dims)?)
}

/// Tile as reshape (1, d0, 1, d1, ...), broadcast (r0, d0, r1, d1, ...), reshape.
pub fn tile(c: &mut Ctx) -> R<Vec<Value>> {
    let x = c.fvar(0)?;
    let dims = c.ty(x).dims().to_vec();
    let reps: Vec<usize> = c
        .need_known(1, "repeats")?
        .as_i64s()
        .iter()
        .map(|&v| v.max(0) as usize)
        .collect();
    if reps.len() != dims.len() {
        return Err(c.err("repeats must have one entry per axis"));
    }
    let inter: Vec<usize> = dims.iter().flat_map(|&d| [1, d]).collect();
    let big: Vec<usize> = dims.iter().zip(&reps).flat_map(|(&d, &r)| [r, d]).collect();
    let fin: Vec<usize> = dims.iter().zip(&reps).map(|(&d, &r)| d * r).collect();
    check_dims(c, &fin)?;
    let y = reshape_to(c, x, inter)?;
    let y = c.expand_to(y, &big)?;
    out(reshape_to(c, y, fin)?)
}

pub fn shape(c: &mut Ctx) -> R<Vec<Value>> {
    let dims = c.dims(0)?;
    let r = dims.len() as i64;
    let clampi = |v: i64| (if v < 0 { v + r } else { v }).clamp(0, r) as usize;
    let start = clampi(c.int("start", 0)?);
    let end = clampi(c.int_opt("end")?.unwrap_or(r));
    let v: Vec<i64> = dims[start..end.max(start)]
        .iter()
        .map(|&d| d as i64)
        .collect();
    konst(Const::ints(elem::INT64, vec![v.len()], v))
}

pub fn size(c: &mut Ctx) -> R<Vec<Value>> {
    let n: usize = c.dims(0)?.iter().product();
    konst(Const::ints(elem::INT64, vec![], vec![n as i64]))
}

pub fn constant(c: &mut Ctx) -> R<Vec<Value>> {
    if let Some(t) = c.tensor_attr("value")? {
        return konst(t);
    }
    if let Some(a) = c.attr("value_float") {
        return konst(Const::floats(elem::FLOAT, vec![], vec![a.f as f64]));
    }
    if let Some(v) = c.floats("value_floats")? {
        return konst(Const::floats(
            elem::FLOAT,
            vec![v.len()],
            v.iter().map(|&x| x as f64).collect(),
        ));
    }
    if let Some(v) = c.int_opt("value_int")? {
        return konst(Const::ints(elem::INT64, vec![], vec![v]));
    }
    if let Some(v) = c.ints("value_ints")? {
        return konst(Const::ints(elem::INT64, vec![v.len()], v));
    }
    Err(c.unsupported("a Constant without value, value_float(s) or value_int(s)"))
}

pub fn constant_of_shape(c: &mut Ctx) -> R<Vec<Value>> {
    let dims: Vec<usize> = c
        .need_known(0, "shape")?
        .as_i64s()
        .iter()
        .map(|&v| v.max(0) as usize)
        .collect();
    let v = c
        .tensor_attr("value")?
        .unwrap_or_else(|| Const::floats(elem::FLOAT, vec![1], vec![0.0]));
    let n: usize = dims.iter().product();
    if n as u64 * 8 > catml_core::interp::MAX_VALUE_BYTES {
        return Err(c.err(format!("shape {dims:?} is too large")));
    }
    let data = match &v.data {
        Data::F(x) => Data::F(vec![x.first().copied().unwrap_or(0.0); n]),
        Data::I(x) => Data::I(vec![x.first().copied().unwrap_or(0); n]),
    };
    konst(Const {
        elem: v.elem,
        dims,
        data,
    })
}

pub fn range(c: &mut Ctx) -> R<Vec<Value>> {
    let (s, l, d) = (
        c.need_known(0, "start")?,
        c.need_known(1, "limit")?,
        c.need_known(2, "delta")?,
    );
    let (s0, l0, d0) = (s.as_f64s()[0], l.as_f64s()[0], d.as_f64s()[0]);
    if d0 == 0.0 {
        return Err(c.err("delta is 0"));
    }
    let n = ((l0 - s0) / d0).ceil().max(0.0) as usize;
    if n > 1 << 24 {
        return Err(c.err(format!("a range of {n} elements")));
    }
    let v: Vec<f64> = (0..n).map(|k| s0 + k as f64 * d0).collect();
    konst(Const::floats(s.elem, vec![n], v))
}

/// Cast and CastLike: `convert` between CatML dtypes (identity when equal), into the model's
/// own type (CastLike's second operand's, before any widening). Out-of-range values saturate
/// into the 8-bit floats and E8M0 unless `saturate` is 0 (opset 19); E8M0 rounds up, the only
/// `round_mode` mapped.
pub fn cast(c: &mut Ctx) -> R<Vec<Value>> {
    let to = if c.node.op_type == "CastLike" {
        c.model_elem(1)?
    } else {
        c.int_opt("to")?
            .ok_or_else(|| c.err("attribute `to` is required"))? as i32
    };
    let saturate = c.int("saturate", 1)? != 0;
    if to == elem::FLOAT8E8M0 {
        let mode = c.string("round_mode", "up")?;
        if mode != "up" {
            return Err(c.unsupported(format!(
                "attribute `round_mode` = \"{mode}\" (only \"up\" is mapped)"
            )));
        }
    }
    let target = dtype_of(to).ok_or_else(|| {
        c.unsupported(format!(
            "cast to {}, which the CatML tensor layer does not hold",
            elem::name(to)
        ))
    })?;
    // A constant operand casts at import (CastLike reads only the second operand's type).
    if let Value::Const(k) = c.value(0)? {
        let k = crate::fold::cast(k, to, saturate).map_err(|e| c.err(e))?;
        return konst(k);
    }
    c.dtype(0)?;
    let x = c.var(0)?;
    if c.ty(x).dtype == target {
        return out(x);
    }
    if saturate && target.is_floating_point() && target.size() == 1 {
        return out(t!(c, c.b.convert_saturating(x, target))?);
    }
    out(t!(c, c.b.convert(x, target))?)
}

/// Pad: constant, edge, reflect and wrap modes, pads known; each axis a gather (edge, reflect,
/// wrap, negative pads) or a concatenation with constant blocks.
pub fn pad(c: &mut Ctx) -> R<Vec<Value>> {
    let x = c.fvar(0)?;
    let dims = c.ty(x).dims().to_vec();
    let r = dims.len();
    let mode = c.string("mode", "constant")?;
    let (pads, value, axes) = if c.opset < 11 {
        let p = c
            .ints("pads")?
            .or(c.ints("paddings")?)
            .ok_or_else(|| c.err("pads are required"))?;
        (p, c.float("value", 0.0)? as f64, None)
    } else {
        let p = c.need_known(1, "pads")?.as_i64s();
        let v = if c.has(2) {
            c.need_known(2, "constant_value")?
                .as_f64s()
                .first()
                .copied()
                .unwrap_or(0.0)
        } else {
            0.0
        };
        let axes = if c.has(3) {
            Some(c.need_known(3, "axes")?.as_i64s())
        } else {
            None
        };
        (p, v, axes)
    };
    let axes: Vec<usize> = match axes {
        Some(a) => a.iter().map(|&v| c.axis(v, r)).collect::<R<_>>()?,
        None => (0..r).collect(),
    };
    if pads.len() != 2 * axes.len() {
        return Err(c.err(format!(
            "pads has {} entries, expected {}",
            pads.len(),
            2 * axes.len()
        )));
    }
    let mut y = x;
    for (k, &axis) in axes.iter().enumerate() {
        let (before, after) = (pads[k], pads[k + axes.len()]);
        if before == 0 && after == 0 {
            continue;
        }
        let d = c.ty(y).dims()[axis] as i64;
        // Negative pads crop first.
        let (b0, a0) = (before.min(0), after.min(0));
        if b0 < 0 || a0 < 0 {
            let idx: Vec<usize> = ((-b0)..(d + a0)).map(|i| i as usize).collect();
            y = take_along(c, y, axis, idx)?;
        }
        let d = c.ty(y).dims()[axis] as i64;
        let (bp, ap) = (before.max(0), after.max(0));
        if bp == 0 && ap == 0 {
            continue;
        }
        if mode == "constant" {
            let dt = c.ty(y).dtype;
            let mut parts = Vec::new();
            for n in [bp, 0, ap] {
                if n == 0 {
                    continue;
                }
                let mut bd = c.ty(y).dims().to_vec();
                bd[axis] = n as usize;
                parts.push(c.full(value, dt, &bd)?);
            }
            let mut all = Vec::new();
            if bp > 0 {
                all.push(parts.remove(0));
            }
            all.push(y);
            if ap > 0 {
                all.push(parts.remove(0));
            }
            y = t!(c, c.b.concat(&all, axis))?;
        } else {
            let idx: Vec<usize> = ((-bp)..(d + ap))
                .map(|i| {
                    let j = match mode.as_str() {
                        "edge" => i.clamp(0, d - 1),
                        "wrap" => i.rem_euclid(d),
                        _ => {
                            // reflect without repeating the edge
                            if d == 1 {
                                0
                            } else {
                                let p = 2 * (d - 1);
                                let m = i.rem_euclid(p);
                                if m < d {
                                    m
                                } else {
                                    p - m
                                }
                            }
                        }
                    };
                    j as usize
                })
                .collect();
            if !matches!(mode.as_str(), "edge" | "wrap" | "reflect") {
                return Err(c.unsupported(format!("mode `{mode}`")));
            }
            y = take_along(c, y, axis, idx)?;
        }
    }
    out(y)
}

/// DepthToSpace and SpaceToDepth as reshape, permute, reshape.
pub fn depth_space(c: &mut Ctx) -> R<Vec<Value>> {
    let x = c.fvar(0)?;
    let d = c.ty(x).dims().to_vec();
    if d.len() != 4 {
        return Err(c.unsupported("inputs of rank other than 4"));
    }
    let bs = c.int("blocksize", 0)? as usize;
    if bs == 0 {
        return Err(c.err("blocksize must be positive"));
    }
    let (n, ch, h, w) = (d[0], d[1], d[2], d[3]);
    let y = if c.node.op_type == "DepthToSpace" {
        let crd = c.string("mode", "DCR")? == "CRD";
        let cc = ch / (bs * bs);
        let (inter, perm) = if crd {
            (vec![n, cc, bs, bs, h, w], vec![0, 1, 4, 2, 5, 3])
        } else {
            (vec![n, bs, bs, cc, h, w], vec![0, 3, 4, 1, 5, 2])
        };
        let y = reshape_to(c, x, inter)?;
        let y = t!(c, c.b.permute(y, perm))?;
        reshape_to(c, y, vec![n, cc, h * bs, w * bs])?
    } else {
        // DCR puts the block offsets before the channels, CRD after them.
        let perm = match c.string("mode", "DCR")?.as_str() {
            "DCR" => vec![0, 3, 5, 1, 2, 4],
            "CRD" => vec![0, 1, 3, 5, 2, 4],
            other => {
                return Err(c.err(format!(
                    "attribute `mode` is \"{other}\"; expected DCR or CRD"
                )))
            }
        };
        if h % bs != 0 || w % bs != 0 {
            return Err(c.err(format!(
                "spatial dims {h}×{w} are not multiples of blocksize {bs}"
            )));
        }
        let y = reshape_to(c, x, vec![n, ch, h / bs, bs, w / bs, bs])?;
        let y = t!(c, c.b.permute(y, perm))?;
        reshape_to(c, y, vec![n, ch * bs * bs, h / bs, w / bs])?
    };
    out(y)
}

/// Trilu: x times a 0/1 mask of the kept triangle (k known).
pub fn trilu(c: &mut Ctx) -> R<Vec<Value>> {
    let x = c.var(0)?;
    if c.ty(x).dtype == DType::Bool {
        return Err(c.unsupported("a bool input"));
    }
    let ty = c.ty(x);
    let d = ty.dims().to_vec();
    if d.len() < 2 {
        return Err(c.err("input must have rank at least 2"));
    }
    let k = if c.has(1) {
        c.need_known(1, "k")?.as_i64s()[0]
    } else {
        0
    };
    let upper = c.int("upper", 1)? != 0;
    let (rows, cols) = (d[d.len() - 2], d[d.len() - 1]);
    let mask: Vec<f64> = (0..rows * cols)
        .map(|p| {
            let (i, j) = ((p / cols) as i64, (p % cols) as i64);
            let keep = if upper { j - i >= k } else { j - i <= k };
            keep as i64 as f64
        })
        .collect();
    if ty.dtype == DType::I64 {
        // Integer values select by a bool mask (the core multiplies floats only).
        let n: usize = d.iter().product();
        let keep: Vec<bool> = (0..n).map(|p| mask[p % (rows * cols)] != 0.0).collect();
        let m = Tensor::bool(d.clone(), keep).map_err(|e| c.err(e.to_string()))?;
        let m = t!(c, c.b.constant(m))?;
        let z = c.full(0.0, DType::I64, &d)?;
        return out(t!(c, c.b.select(m, x, z))?);
    }
    let m = Const::floats(code_of(ty.dtype), vec![rows, cols], mask)
        .to_tensor()
        .map_err(|m| c.err(m))?;
    let m = t!(c, c.b.constant(m))?;
    let m = c.expand_to(m, &d)?;
    out(t!(c, c.b.mul(x, m))?)
}
