//! The optimiser's update written as program nodes: the learning-rate schedule, clipping by
//! global norm, SGD with momentum and Adam/AdamW, the formulas of `optim` (see
//! `docs/optimisers.md`). Scalars (the step, the rate, bias corrections, the norm) are f64;
//! each parameter's elementwise update is in the parameter's own dtype.

use std::f64::consts::PI;

use crate::ir::{Builder, TypeError, Var};
use crate::optim::{Adam, Schedule, Sgd};
use crate::prim::Ops;
use crate::tensor::{DType, Tensor};

/// An f64 scalar constant.
pub(crate) fn c64(b: &mut Builder, v: f64) -> Result<Var, TypeError> {
    b.constant(Tensor::scalar(DType::F64, v))
}

/// The f64 scalar `s` in `like`'s dtype, broadcast to its shape.
pub(crate) fn spread(b: &mut Builder, s: Var, like: Var) -> Result<Var, TypeError> {
    let ty = b.ty(like).clone();
    let s = if ty.dtype == DType::F64 {
        s
    } else {
        b.convert(s, ty.dtype)?
    };
    if ty.rank() == 0 {
        Ok(s)
    } else {
        b.broadcast(s, ty.shape.clone(), vec![])
    }
}

/// The schedule's factor at step `t` (an f64 scalar holding the 0-based step). Branches are
/// blended by an exact 0/1 weight `H(a − t)` rather than selected, so every node stays finite
/// and the program needs only arithmetic.
pub(crate) fn schedule_factor(b: &mut Builder, s: &Schedule, t: Var) -> Result<Var, TypeError> {
    match *s {
        Schedule::Constant => c64(b, 1.0),
        Schedule::Step { every, gamma } => {
            let every = c64(b, every as f64)?;
            if gamma == 0.0 {
                // 0^0 = 1 before the first decay, 0 after: H(every − t).
                let d = b.sub(every, t)?;
                return b.heaviside(d);
            }
            // t / every is exact enough that its floor is the integer quotient.
            let q = b.div(t, every)?;
            let q = b.floor(q)?;
            let g = c64(b, gamma)?;
            b.pow(g, q)
        }
        Schedule::Cosine {
            warmup,
            total,
            floor,
        } => {
            let w0 = c64(b, warmup as f64)?;
            let since = b.sub(t, w0)?;
            let span = c64(b, (total - warmup) as f64)?;
            let p = b.div(since, span)?;
            let one = c64(b, 1.0)?;
            let p = b.minimum(p, one)?;
            let pi = c64(b, PI)?;
            let angle = b.mul(pi, p)?;
            let cos = b.cos(angle)?;
            let cos1 = b.add(one, cos)?;
            let half = c64(b, (1.0 - floor) * 0.5)?;
            let scaled = b.mul(half, cos1)?;
            let fl = c64(b, floor)?;
            let decay = b.add(fl, scaled)?;
            if warmup == 0 {
                return Ok(decay);
            }
            // (t + 1) / warmup while t < warmup.
            let t1 = b.add(t, one)?;
            let warm = b.div(t1, w0)?;
            let gap = b.sub(w0, t)?;
            let in_warmup = b.heaviside(gap)?;
            let after = b.sub(one, in_warmup)?;
            let a = b.mul(in_warmup, warm)?;
            let d = b.mul(after, decay)?;
            b.add(a, d)
        }
    }
}

/// The global norm ‖(g_1, ..., g_n)‖₂ of the gradients, accumulated in f64.
pub(crate) fn global_norm(b: &mut Builder, grads: &[Var]) -> Result<Var, TypeError> {
    let mut total: Option<Var> = None;
    for &g in grads {
        let g = if b.ty(g).dtype == DType::F64 {
            g
        } else {
            b.convert(g, DType::F64)?
        };
        let sq = b.mul(g, g)?;
        let s = b.sum(sq, None)?;
        total = Some(match total {
            None => s,
            Some(acc) => b.add(acc, s)?,
        });
    }
    match total {
        Some(t) => b.sqrt(t),
        None => c64(b, 0.0),
    }
}

/// Gradients scaled by c / max(‖g‖, c): by c / ‖g‖ when the norm exceeds c, else by exactly 1.
pub(crate) fn clip(
    b: &mut Builder,
    grads: &[Var],
    norm: Var,
    max_norm: f64,
) -> Result<Vec<Var>, TypeError> {
    let c = c64(b, max_norm)?;
    let bound = b.maximum(norm, c)?;
    let scale = b.div(c, bound)?;
    grads
        .iter()
        .map(|&g| {
            let s = spread(b, scale, g)?;
            b.mul(g, s)
        })
        .collect()
}

/// L2 weight decay: g + λ p.
fn decayed(b: &mut Builder, g: Var, p: Var, lambda: f64) -> Result<Var, TypeError> {
    if lambda == 0.0 {
        return Ok(g);
    }
    let lp = b.scale(p, lambda)?;
    b.add(g, lp)
}

/// One SGD update: the new parameter and, with momentum, the new buffer `momentum/<name>`
/// (a zero buffer before the first step gives b = g, as the first step does).
pub(crate) fn sgd(
    b: &mut Builder,
    s: &Sgd,
    lr: Var,
    (p, g, buffer): (Var, Var, Option<Var>),
) -> Result<(Var, Option<Var>), TypeError> {
    let g = decayed(b, g, p, s.weight_decay)?;
    let (d, buffer) = match buffer {
        Some(buf) if s.momentum != 0.0 => {
            let mb = b.scale(buf, s.momentum)?;
            let buf = b.add(mb, g)?;
            let d = if s.nesterov {
                let mb = b.scale(buf, s.momentum)?;
                b.add(g, mb)?
            } else {
                buf
            };
            (d, Some(buf))
        }
        _ => (g, None),
    };
    let lr = spread(b, lr, p)?;
    let step = b.mul(lr, d)?;
    Ok((b.sub(p, step)?, buffer))
}

/// 1 − β^t, or exactly 1 when β = 0.
fn correction(b: &mut Builder, beta: f64, t: Var) -> Result<Var, TypeError> {
    let one = c64(b, 1.0)?;
    if beta == 0.0 {
        return Ok(one);
    }
    let beta = c64(b, beta)?;
    let power = b.pow(beta, t)?;
    b.sub(one, power)
}

/// One Adam/AdamW update at 1-based step `t` (f64 scalar): the new parameter, `m` and `v`.
pub(crate) fn adam(
    b: &mut Builder,
    a: &Adam,
    (lr, t): (Var, Var),
    [p, g, m, v]: [Var; 4],
) -> Result<[Var; 3], TypeError> {
    let (p, g) = if a.weight_decay != 0.0 && a.decoupled {
        // p (1 − η λ)
        let lambda = c64(b, a.weight_decay)?;
        let one = c64(b, 1.0)?;
        let shrink = b.mul(lr, lambda)?;
        let keep = b.sub(one, shrink)?;
        let keep = spread(b, keep, p)?;
        (b.mul(p, keep)?, g)
    } else {
        (p, decayed(b, g, p, a.weight_decay)?)
    };
    let c1 = correction(b, a.beta1, t)?;
    let c2 = correction(b, a.beta2, t)?;
    // m ← β1 m + (1 − β1) g,  v ← β2 v + ((1 − β2) g) g
    let bm = b.scale(m, a.beta1)?;
    let gm = b.scale(g, 1.0 - a.beta1)?;
    let m = b.add(bm, gm)?;
    let bv = b.scale(v, a.beta2)?;
    let gv = b.scale(g, 1.0 - a.beta2)?;
    let gv = b.mul(gv, g)?;
    let v = b.add(bv, gv)?;
    // p ← p − (η m̂) / (√v̂ + ε)
    let c1 = spread(b, c1, p)?;
    let c2 = spread(b, c2, p)?;
    let m_hat = b.div(m, c1)?;
    let v_hat = b.div(v, c2)?;
    let lr = spread(b, lr, p)?;
    let num = b.mul(lr, m_hat)?;
    let root = b.sqrt(v_hat)?;
    let eps = b.full_like(a.eps, p)?;
    let den = b.add(root, eps)?;
    let step = b.div(num, den)?;
    Ok([b.sub(p, step)?, m, v])
}
