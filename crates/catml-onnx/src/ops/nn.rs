//! Neural-network operators: MatMul and Gemm, convolutions and pooling (1-D through 2-D with
//! auto_pad, ceil_mode, count_include_pad), and the normalisations.

use catml_core::ir::Var;
use catml_core::prim::{Conv1dAttrs, Conv2dAttrs, Ops, Pool2dAttrs};

use super::shape::reshape_to;
use crate::ctx::{broadcast_dims, Ctx, Value, R};
use crate::konst::{code_of, Const};

fn out(v: Var) -> R<Vec<Value>> {
    Ok(vec![Value::Var(v)])
}

/// numpy matmul: 1-D operands promoted and their axis removed again; batch dims broadcast.
pub fn matmul_vars(c: &mut Ctx, a: Var, b: Var) -> R<Var> {
    let (da, db) = (c.ty(a).dims().to_vec(), c.ty(b).dims().to_vec());
    if da.is_empty() || db.is_empty() {
        return Err(c.err("MatMul operands must have rank at least 1"));
    }
    let a2 = if da.len() == 1 {
        reshape_to(c, a, vec![1, da[0]])?
    } else {
        a
    };
    let b2 = if db.len() == 1 {
        reshape_to(c, b, vec![db[0], 1])?
    } else {
        b
    };
    let (ea, eb) = (c.ty(a2).dims().to_vec(), c.ty(b2).dims().to_vec());
    let (m, k) = (ea[ea.len() - 2], ea[ea.len() - 1]);
    let (k2, n) = (eb[eb.len() - 2], eb[eb.len() - 1]);
    if k != k2 {
        return Err(c.err(format!("MatMul inner dims differ: {da:?} and {db:?}")));
    }
    let y = if ea.len() == 2 && eb.len() == 2 {
        t!(c, c.b.matmul(a2, b2))?
    } else {
        let batch = broadcast_dims(&ea[..ea.len() - 2], &eb[..eb.len() - 2])
            .ok_or_else(|| c.err(format!("batch dims of {da:?} and {db:?} do not broadcast")))?;
        let mut ta = batch.clone();
        ta.extend([m, k]);
        let mut tb = batch.clone();
        tb.extend([k, n]);
        let a3 = c.expand_to(a2, &ta)?;
        let b3 = c.expand_to(b2, &tb)?;
        t!(c, c.b.batch_matmul(a3, b3, false, false))?
    };
    let mut od: Vec<usize> = c.ty(y).dims().to_vec();
    if db.len() == 1 {
        od.pop();
    }
    if da.len() == 1 {
        let l = od.len();
        od.remove(l - if db.len() == 1 { 1 } else { 2 });
    }
    reshape_to(c, y, od)
}

pub fn matmul(c: &mut Ctx) -> R<Vec<Value>> {
    let (a, b) = (c.fvar(0)?, c.fvar(1)?);
    out(matmul_vars(c, a, b)?)
}

pub fn gemm(c: &mut Ctx) -> R<Vec<Value>> {
    let (mut a, mut b) = (c.fvar(0)?, c.fvar(1)?);
    if c.int("transA", 0)? != 0 {
        a = t!(c, c.b.transpose(a))?;
    }
    if c.int("transB", 0)? != 0 {
        b = t!(c, c.b.transpose(b))?;
    }
    let (alpha, beta) = (c.float("alpha", 1.0)? as f64, c.float("beta", 1.0)? as f64);
    let mut y = t!(c, c.b.matmul(a, b))?;
    if alpha != 1.0 {
        y = t!(c, c.b.scale(y, alpha))?;
    }
    if c.has(2) {
        let cv = c.fvar(2)?;
        let dims = c.ty(y).dims().to_vec();
        let mut cv = c.expand_to(cv, &dims)?;
        if beta != 1.0 {
            cv = t!(c, c.b.scale(cv, beta))?;
        }
        y = t!(c, c.b.add(y, cv))?;
    }
    out(y)
}

/// Per-axis (before, after) padding from pads / auto_pad, for input sizes `input`, kernel
/// extents (dilated) `k` and strides `s`; `ceil` adds the padding ceil_mode needs at the end.
fn spatial_pads(
    c: &Ctx,
    input: &[usize],
    k: &[usize],
    s: &[usize],
    ceil: bool,
) -> R<Vec<[usize; 2]>> {
    let n = input.len();
    let auto = c.string("auto_pad", "NOTSET")?;
    let mut p: Vec<[usize; 2]> = match auto.as_str() {
        "NOTSET" => {
            let pads = c.ints("pads")?.unwrap_or_else(|| vec![0; 2 * n]);
            if pads.len() != 2 * n || pads.iter().any(|&v| v < 0) {
                return Err(c.err(format!("pads {pads:?} do not fit {n} spatial axes")));
            }
            (0..n)
                .map(|i| [pads[i] as usize, pads[i + n] as usize])
                .collect()
        }
        "VALID" => vec![[0, 0]; n],
        "SAME_UPPER" | "SAME_LOWER" => (0..n)
            .map(|i| {
                let o = input[i].div_ceil(s[i]);
                let total = ((o - 1) * s[i] + k[i]).saturating_sub(input[i]);
                let (small, big) = (total / 2, total - total / 2);
                if auto == "SAME_UPPER" {
                    [small, big]
                } else {
                    [big, small]
                }
            })
            .collect(),
        other => return Err(c.unsupported(format!("auto_pad `{other}`"))),
    };
    if ceil {
        for i in 0..n {
            let span = input[i] + p[i][0] + p[i][1];
            if span < k[i] {
                continue;
            }
            let floor_out = (span - k[i]) / s[i] + 1;
            let ceil_out = (span - k[i]).div_ceil(s[i]) + 1;
            // The last window must start inside the input or the left padding.
            let ceil_out = if (ceil_out - 1) * s[i] >= input[i] + p[i][0] {
                ceil_out - 1
            } else {
                ceil_out
            };
            if ceil_out > floor_out {
                p[i][1] += (ceil_out - 1) * s[i] + k[i] - span;
            }
        }
    }
    Ok(p)
}

fn ints_or(c: &Ctx, name: &str, n: usize, d: usize) -> R<Vec<usize>> {
    Ok(match c.ints(name)? {
        Some(v) if v.len() == n && v.iter().all(|&x| x > 0) => {
            v.iter().map(|&x| x as usize).collect()
        }
        Some(v) => {
            return Err(c.err(format!(
                "attribute `{name}` {v:?} does not fit {n} spatial axes"
            )))
        }
        None => vec![d; n],
    })
}

/// Lifts a 1-D (N, C, W) value to 2-D (N, C, 1, W).
fn lift(c: &mut Ctx, x: Var) -> R<Var> {
    let d = c.ty(x).dims().to_vec();
    reshape_to(c, x, vec![d[0], d[1], 1, d[2]])
}

pub fn conv(c: &mut Ctx) -> R<Vec<Value>> {
    let (x, w) = (c.fvar(0)?, c.fvar(1)?);
    let xd = c.ty(x).dims().to_vec();
    let wd = c.ty(w).dims().to_vec();
    let n = xd.len().saturating_sub(2);
    if !(1..=2).contains(&n) || wd.len() != xd.len() {
        return Err(c.unsupported(format!("{n}-D convolution (CatML has 1-D and 2-D)")));
    }
    let strides = ints_or(c, "strides", n, 1)?;
    let dil = ints_or(c, "dilations", n, 1)?;
    let ks: Vec<usize> = (0..n).map(|i| (wd[2 + i] - 1) * dil[i] + 1).collect();
    let pads = spatial_pads(c, &xd[2..], &ks, &strides, false)?;
    let groups = c.int("group", 1)?.max(1) as usize;
    let bias = if c.has(2) { Some(c.fvar(2)?) } else { None };
    let y = if n == 2 {
        let a = Conv2dAttrs::default()
            .stride([strides[0], strides[1]])
            .padding([pads[0], pads[1]])
            .dilation([dil[0], dil[1]])
            .groups(groups);
        t!(c, c.b.conv2d(x, w, bias, a))?
    } else {
        let a = Conv1dAttrs {
            stride: strides[0],
            padding: pads[0],
            dilation: dil[0],
            groups,
        };
        t!(c, c.b.conv1d(x, w, bias, a))?
    };
    out(y)
}

pub fn pool(c: &mut Ctx) -> R<Vec<Value>> {
    let op = c.node.op_type.clone();
    if c.node.output.len() > 1 && !c.node.output[1].is_empty() {
        return Err(c.unsupported("the Indices output"));
    }
    let x = c.fvar(0)?;
    let xd = c.ty(x).dims().to_vec();
    let n = xd.len().saturating_sub(2);
    if n == 0 {
        return Err(c.err(format!("input of shape {xd:?} has no spatial axes")));
    }
    let kernel = ints_or(c, "kernel_shape", n, 0)?;
    if kernel.contains(&0) {
        return Err(c.err("attribute `kernel_shape` is required"));
    }
    let strides = ints_or(c, "strides", n, 1)?;
    let dil = ints_or(c, "dilations", n, 1)?;
    let ceil = c.int("ceil_mode", 0)? != 0;
    if n > 2 || dil.iter().any(|&d| d != 1) {
        // Three or more axes, or dilated windows: one gathering pass per axis.
        let ext: Vec<usize> = (0..n).map(|i| (kernel[i] - 1) * dil[i] + 1).collect();
        let pads = spatial_pads(c, &xd[2..], &ext, &strides, false)?;
        let cpads = spatial_pads(c, &xd[2..], &ext, &strides, ceil)?;
        let y = super::pool_nd::pool(c, x, &kernel, &strides, &dil, &pads, &cpads)?;
        return out(y);
    }
    let pads = spatial_pads(c, &xd[2..], &kernel, &strides, false)?;
    let cpads = spatial_pads(c, &xd[2..], &kernel, &strides, ceil)?;
    let (x2, k2, s2, p2, cp2) = if n == 1 {
        (
            lift(c, x)?,
            [1, kernel[0]],
            [1, strides[0]],
            [[0, 0], pads[0]],
            [[0, 0], cpads[0]],
        )
    } else {
        (
            x,
            [kernel[0], kernel[1]],
            [strides[0], strides[1]],
            [pads[0], pads[1]],
            [cpads[0], cpads[1]],
        )
    };
    let attrs = Pool2dAttrs::new(k2).stride(s2).padding(cp2);
    let y = if op == "MaxPool" {
        t!(c, c.b.max_pool2d(x2, attrs))?
    } else if op == "LpPool" {
        // (sum over the window of |x|^p)^(1/p); padding adds zeros.
        let p = c.int("p", 2)?;
        if p < 1 || p > i32::MAX as i64 {
            return Err(c.err(format!("p = {p} must be a positive integer")));
        }
        let xp = if p == 2 {
            t!(c, c.b.mul(x2, x2))?
        } else {
            let a = t!(c, c.b.abs(x2))?;
            t!(c, c.b.powi(a, p as i32))?
        };
        let s = t!(c, c.b.sum_pool2d(xp, attrs))?;
        match p {
            1 => s,
            2 => t!(c, c.b.sqrt(s))?,
            _ => {
                let e =
                    c.b.full_like(1.0 / p as f64, s)
                        .map_err(|e| c.err(e.to_string()))?;
                t!(c, c.b.pow(s, e))?
            }
        }
    } else {
        let s = t!(c, c.b.sum_pool2d(x2, attrs))?;
        // The divisor of each window, known: its input elements, plus the explicit padding
        // when count_include_pad (never the ceil_mode extension).
        let include = c.int("count_include_pad", 0)? != 0;
        let in_hw = [c.ty(x2).dims()[2], c.ty(x2).dims()[3]];
        let out_hw = [c.ty(s).dims()[2], c.ty(s).dims()[3]];
        let mut div = Vec::with_capacity(out_hw[0] * out_hw[1]);
        for oh in 0..out_hw[0] {
            for ow in 0..out_hw[1] {
                let count = |o: usize, a: usize| -> usize {
                    let start = (o * s2[a]) as i64 - cp2[a][0] as i64;
                    let (lo, hi) = if include {
                        (-(p2[a][0] as i64), in_hw[a] as i64 + p2[a][1] as i64)
                    } else {
                        (0, in_hw[a] as i64)
                    };
                    let a0 = start.max(lo);
                    let a1 = (start + k2[a] as i64).min(hi);
                    (a1 - a0).max(0) as usize
                };
                div.push(1.0 / (count(oh, 0) * count(ow, 1)).max(1) as f64);
            }
        }
        let dt = c.ty(s).dtype;
        let dv = Const::floats(code_of(dt), vec![out_hw[0], out_hw[1]], div)
            .to_tensor()
            .map_err(|m| c.err(m))?;
        let dv = t!(c, c.b.constant(dv))?;
        let sd = c.ty(s).dims().to_vec();
        let dv = c.expand_to(dv, &sd)?;
        t!(c, c.b.mul(s, dv))?
    };
    let y = if n == 1 {
        let d = c.ty(y).dims().to_vec();
        reshape_to(c, y, vec![d[0], d[1], d[3]])?
    } else {
        y
    };
    out(y)
}

pub fn global_pool(c: &mut Ctx) -> R<Vec<Value>> {
    let x = c.fvar(0)?;
    let d = c.ty(x).dims().to_vec();
    if d.len() < 3 {
        return Err(c.err("input must have rank at least 3"));
    }
    let axes: Vec<usize> = (2..d.len()).collect();
    let n: usize = d[2..].iter().product();
    let kd: Vec<usize> = d
        .iter()
        .enumerate()
        .map(|(k, &v)| if k >= 2 { 1 } else { v })
        .collect();
    let y = if c.node.op_type == "GlobalMaxPool" {
        t!(c, c.b.reduce_max(x, Some(axes)))?
    } else {
        let s = t!(c, c.b.sum(x, Some(axes)))?;
        t!(c, c.b.div_count(s, n))?
    };
    out(reshape_to(c, y, kd)?)
}

/// A per-channel (C) vector broadcast along axis 1 of `dims`.
fn per_channel(c: &mut Ctx, v: Var, dims: &[usize]) -> R<Var> {
    let vd = c.ty(v).dims().to_vec();
    if vd.len() != 1 || vd[0] != dims[1] {
        return Err(c.err(format!(
            "per-channel operand {vd:?} does not match {} channels",
            dims[1]
        )));
    }
    t!(c, c.b.broadcast(v, dims.to_vec(), vec![1]))
}

pub fn batch_norm(c: &mut Ctx) -> R<Vec<Value>> {
    if c.int("training_mode", 0)? != 0 || c.node.output.iter().skip(1).any(|o| !o.is_empty()) {
        return Err(c.unsupported("training mode (running statistics outputs)"));
    }
    let x = c.fvar(0)?;
    let d = c.ty(x).dims().to_vec();
    let eps = c.float("epsilon", 1e-5)? as f64;
    let (scale, bias, mean, var) = (c.fvar(1)?, c.fvar(2)?, c.fvar(3)?, c.fvar(4)?);
    // y = (x - mean) · scale · rsqrt(var + eps) + bias
    let ev = t!(c, c.b.full_like(eps, var))?;
    let ve = t!(c, c.b.add(var, ev))?;
    let inv = t!(c, c.b.rsqrt(ve))?;
    let k = t!(c, c.b.mul(scale, inv))?;
    let (m, k, bb) = (
        per_channel(c, mean, &d)?,
        per_channel(c, k, &d)?,
        per_channel(c, bias, &d)?,
    );
    let xc = t!(c, c.b.sub(x, m))?;
    let y = t!(c, c.b.mul(xc, k))?;
    out(t!(c, c.b.add(y, bb))?)
}

pub fn layer_norm(c: &mut Ctx) -> R<Vec<Value>> {
    let x = c.fvar(0)?;
    let d = c.ty(x).dims().to_vec();
    let axis = c.axis(c.int("axis", -1)?, d.len())?;
    let eps = c.float("epsilon", 1e-5)? as f64;
    let axes: Vec<usize> = (axis..d.len()).collect();
    let y = t!(c, c.b.layer_norm(x, axes.clone(), eps, None))?;
    let g = c.fvar(1)?;
    let g = c.expand_to(g, &d)?;
    let mut y = t!(c, c.b.mul(y, g))?;
    if c.has(2) {
        let b = c.fvar(2)?;
        let b = c.expand_to(b, &d)?;
        y = t!(c, c.b.add(y, b))?;
    }
    if c.node.output.iter().skip(1).all(String::is_empty) {
        return out(y);
    }
    let (mean, inv_std) = super::norm_stats::layer_norm_stats(c, x, &axes, eps)?;
    Ok(vec![Value::Var(y), Value::Var(mean), Value::Var(inv_std)])
}

pub fn instance_norm(c: &mut Ctx) -> R<Vec<Value>> {
    let x = c.fvar(0)?;
    let d = c.ty(x).dims().to_vec();
    let eps = c.float("epsilon", 1e-5)? as f64;
    let axes: Vec<usize> = (2..d.len()).collect();
    let y = t!(c, c.b.layer_norm(x, axes, eps, None))?;
    let (g, b) = (c.fvar(1)?, c.fvar(2)?);
    let (g, b) = (per_channel(c, g, &d)?, per_channel(c, b, &d)?);
    let y = t!(c, c.b.mul(y, g))?;
    out(t!(c, c.b.add(y, b))?)
}

pub fn group_norm(c: &mut Ctx) -> R<Vec<Value>> {
    let x = c.fvar(0)?;
    let d = c.ty(x).dims().to_vec();
    let eps = c.float("epsilon", 1e-5)? as f64;
    let g = c.int("num_groups", 0)?.max(0) as usize;
    if g == 0 || d.len() < 3 || d[1] % g != 0 {
        return Err(c.err("num_groups must divide the channels"));
    }
    let rest: usize = d[2..].iter().product();
    let xg = reshape_to(c, x, vec![d[0], g, d[1] / g * rest])?;
    let y = t!(c, c.b.layer_norm(xg, vec![2], eps, None))?;
    let y = reshape_to(c, y, d.clone())?;
    let (s, b) = (c.fvar(1)?, c.fvar(2)?);
    let (s, b) = if c.opset >= 21 {
        (per_channel(c, s, &d)?, per_channel(c, b, &d)?)
    } else {
        // Opset 18: scale and bias per group.
        let rep: Vec<usize> = (0..d[1]).map(|ch| ch / (d[1] / g)).collect();
        let s = t!(c, c.b.gather(s, 0, rep.clone()))?;
        let b = t!(c, c.b.gather(b, 0, rep))?;
        (per_channel(c, s, &d)?, per_channel(c, b, &d)?)
    };
    let y = t!(c, c.b.mul(y, s))?;
    out(t!(c, c.b.add(y, b))?)
}

/// RMSNormalization: x · rsqrt(mean(x², axes ≥ axis) + eps) · scale.
pub fn rms_norm(c: &mut Ctx) -> R<Vec<Value>> {
    let x = c.fvar(0)?;
    let d = c.ty(x).dims().to_vec();
    let axis = c.axis(c.int("axis", -1)?, d.len())?;
    let eps = c.float("epsilon", 1e-5)? as f64;
    let axes: Vec<usize> = (axis..d.len()).collect();
    let n: usize = d[axis..].iter().product();
    let sq = t!(c, c.b.mul(x, x))?;
    let s = super::reduce::sum_keep(c, sq, &axes, true)?;
    let m = t!(c, c.b.div_count(s, n))?;
    let ev = t!(c, c.b.full_like(eps, m))?;
    let me = t!(c, c.b.add(m, ev))?;
    let r = t!(c, c.b.rsqrt(me))?;
    let r = c.expand_to(r, &d)?;
    let y = t!(c, c.b.mul(x, r))?;
    let g = c.fvar(1)?;
    let g = c.expand_to(g, &d)?;
    out(t!(c, c.b.mul(y, g))?)
}
