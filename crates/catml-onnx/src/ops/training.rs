//! The training operators of `ai.onnx.preview.training`: one step of Adagrad, Adam and
//! Momentum (standard or Nesterov) as the elementwise arithmetic of their specification, for
//! any number of optimised tensors. The update count T may be a program value (i64, converted
//! to the learning rate's dtype) or known at import.

use catml_core::ir::Var;
use catml_core::prim::Ops;

use crate::ctx::{Ctx, Value, R};

/// (ONNX op type, mapping) of the training domain.
pub const TABLE: &[(&str, super::OpFn)] =
    &[("Adagrad", adagrad), ("Adam", adam), ("Momentum", momentum)];

/// The update count: known at import, or a scalar of the learning rate's dtype.
enum Count {
    Known(i64),
    Var(Var),
}

/// R (a float scalar), T and the number of optimised tensors, from `2 + per · n` inputs.
fn common(c: &mut Ctx, per: usize) -> R<(Var, Count, usize)> {
    let k = c.n_inputs();
    if k < 2 + per || (k - 2) % per != 0 {
        return Err(c.err(format!(
            "{k} inputs; {} takes R, T and {per} tensors per optimised tensor",
            c.node.op_type
        )));
    }
    let n = (k - 2) / per;
    let outs = c.node.output.len();
    if outs != (per - 1) * n {
        return Err(c.err(format!(
            "{outs} outputs for {n} optimised tensors; expected {}",
            (per - 1) * n
        )));
    }
    let r = c.fvar(0)?;
    if c.ty(r).numel() != 1 {
        return Err(c.err(format!(
            "R has shape {:?}; expected a scalar",
            c.ty(r).dims()
        )));
    }
    let r = super::shape::reshape_to(c, r, vec![])?;
    let count = match c.known(1) {
        Some(t) if t.numel() == 1 && !t.is_float() => Count::Known(t.as_i64s()[0]),
        Some(t) => {
            return Err(c.err(format!(
                "T must be one integer, found {} elements of {}",
                t.numel(),
                crate::konst::elem::name(t.elem)
            )))
        }
        None => {
            let t = c.var(1)?;
            let ty = c.ty(t);
            if ty.dtype != catml_core::tensor::DType::I64 || ty.numel() != 1 {
                return Err(c.err(format!("T is {ty}; expected an i64 scalar")));
            }
            let dtype = c.ty(r).dtype;
            let tf = t!(c, c.b.convert(t, dtype))?;
            Count::Var(super::shape::reshape_to(c, tf, vec![])?)
        }
    };
    Ok((r, count, n))
}

/// A required float attribute.
fn required(c: &Ctx, name: &str) -> R<f64> {
    if c.attr(name).is_none() {
        return Err(c.err(format!("attribute `{name}` is required")));
    }
    Ok(c.float(name, 0.0)? as f64)
}

/// Optimised tensor j of group `g` (inputs 2 + g·n + j), in the learning rate's dtype.
fn tensor(c: &mut Ctx, g: usize, n: usize, j: usize, like: Var) -> R<Var> {
    let i = 2 + g * n + j;
    let v = c.fvar(i)?;
    let d = c.ty(like).dtype;
    if c.ty(v).dtype != d {
        return Err(c.err(format!(
            "input {i} has dtype {}, the learning rate R {d}",
            c.ty(v).dtype
        )));
    }
    Ok(v)
}

/// A scalar broadcast to `like`'s shape.
fn spread(c: &mut Ctx, s: Var, like: Var) -> R<Var> {
    let dims = c.ty(like).dims().to_vec();
    c.expand_to(s, &dims)
}

/// a·x + y.
fn axpy(c: &mut Ctx, a: f64, x: Var, y: Var) -> R<Var> {
    let ax = t!(c, c.b.scale(x, a))?;
    t!(c, c.b.add(ax, y))
}

/// `then` where T > 0, else `otherwise` (scalars).
fn if_started(c: &mut Ctx, t: &Count, then: Var, otherwise: Var) -> R<Var> {
    match t {
        Count::Known(t) => Ok(if *t > 0 { then } else { otherwise }),
        Count::Var(t) => {
            let zero = t!(c, c.b.full_like(0.0, *t))?;
            let pos = t!(c, c.b.greater(*t, zero))?;
            t!(c, c.b.select(pos, then, otherwise))
        }
    }
}

/// Adagrad: r = R / (1 + T·decay_factor); G' = λX + G; H' = H + G'²;
/// X' = X - r G' / (√H' + ε).
pub fn adagrad(c: &mut Ctx) -> R<Vec<Value>> {
    let (r, t, n) = common(c, 3)?;
    let decay = c.float("decay_factor", 0.0)? as f64;
    let eps = c.float("epsilon", 1e-6)? as f64;
    let lambda = c.float("norm_coefficient", 0.0)? as f64;
    let rate = match &t {
        Count::Known(t) => t!(c, c.b.scale(r, 1.0 / (1.0 + *t as f64 * decay)))?,
        Count::Var(t) => {
            let td = t!(c, c.b.scale(*t, decay))?;
            let one = t!(c, c.b.full_like(1.0, td))?;
            let den = t!(c, c.b.add(one, td))?;
            t!(c, c.b.div(r, den))?
        }
    };
    let (mut xs, mut hs) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for j in 0..n {
        let x = tensor(c, 0, n, j, r)?;
        let g = tensor(c, 1, n, j, r)?;
        let h = tensor(c, 2, n, j, r)?;
        let gr = axpy(c, lambda, x, g)?;
        let g2 = t!(c, c.b.mul(gr, gr))?;
        let h_new = t!(c, c.b.add(h, g2))?;
        let s = t!(c, c.b.sqrt(h_new))?;
        let e = t!(c, c.b.full_like(eps, s))?;
        let den = t!(c, c.b.add(s, e))?;
        let step = t!(c, c.b.div(gr, den))?;
        let rb = spread(c, rate, step)?;
        let step = t!(c, c.b.mul(rb, step))?;
        xs.push(Value::Var(t!(c, c.b.sub(x, step))?));
        hs.push(Value::Var(h_new));
    }
    xs.extend(hs);
    Ok(xs)
}

/// Adam: G' = λX + G; V' = αV + (1 - α)G'; H' = βH + (1 - β)G'²;
/// R' = R √(1 - β^T) / (1 - α^T) if T > 0, else R; X' = (1 - λ_post)(X - R' V' / (√H' + ε)).
pub fn adam(c: &mut Ctx) -> R<Vec<Value>> {
    let (r, t, n) = common(c, 4)?;
    let alpha = c.float("alpha", 0.9)? as f64;
    let beta = c.float("beta", 0.999)? as f64;
    let eps = c.float("epsilon", 1e-6)? as f64;
    let lambda = c.float("norm_coefficient", 0.0)? as f64;
    let post = c.float("norm_coefficient_post", 0.0)? as f64;
    let rate = match &t {
        Count::Known(t) if *t > 0 => {
            let k = i32::try_from(*t).map_err(|_| c.err(format!("T = {t} is too large")))?;
            let f = (1.0 - beta.powi(k)).sqrt() / (1.0 - alpha.powi(k));
            t!(c, c.b.scale(r, f))?
        }
        Count::Known(_) => r,
        Count::Var(tv) => {
            // The correction at max(T, 1), so the branch not taken stays finite.
            let one = t!(c, c.b.full_like(1.0, *tv))?;
            let t1 = t!(c, c.b.maximum(*tv, one))?;
            let a = t!(c, c.b.full_like(alpha, t1))?;
            let b = t!(c, c.b.full_like(beta, t1))?;
            let at = t!(c, c.b.pow(a, t1))?;
            let bt = t!(c, c.b.pow(b, t1))?;
            let nb = t!(c, c.b.neg(bt))?;
            let num = t!(c, c.b.add(one, nb))?;
            let num = t!(c, c.b.sqrt(num))?;
            let na = t!(c, c.b.neg(at))?;
            let den = t!(c, c.b.add(one, na))?;
            let f = t!(c, c.b.div(num, den))?;
            let corrected = t!(c, c.b.mul(r, f))?;
            if_started(c, &t, corrected, r)?
        }
    };
    let (mut xs, mut vs, mut hs) = (Vec::new(), Vec::new(), Vec::new());
    for j in 0..n {
        let x = tensor(c, 0, n, j, r)?;
        let g = tensor(c, 1, n, j, r)?;
        let v = tensor(c, 2, n, j, r)?;
        let h = tensor(c, 3, n, j, r)?;
        let gr = axpy(c, lambda, x, g)?;
        let gs = t!(c, c.b.scale(gr, 1.0 - alpha))?;
        let v_new = axpy(c, alpha, v, gs)?;
        let g2 = t!(c, c.b.mul(gr, gr))?;
        let g2 = t!(c, c.b.scale(g2, 1.0 - beta))?;
        let h_new = axpy(c, beta, h, g2)?;
        let s = t!(c, c.b.sqrt(h_new))?;
        let e = t!(c, c.b.full_like(eps, s))?;
        let den = t!(c, c.b.add(s, e))?;
        let step = t!(c, c.b.div(v_new, den))?;
        let rb = spread(c, rate, step)?;
        let step = t!(c, c.b.mul(rb, step))?;
        let x_new = t!(c, c.b.sub(x, step))?;
        let x_new = if post == 0.0 {
            x_new
        } else {
            t!(c, c.b.scale(x_new, 1.0 - post))?
        };
        xs.push(Value::Var(x_new));
        vs.push(Value::Var(v_new));
        hs.push(Value::Var(h_new));
    }
    xs.extend(vs);
    xs.extend(hs);
    Ok(xs)
}

/// Momentum: G' = λX + G; V' = αV + β'G' with β' = β if T > 0, else 1; X' = X - R V'
/// (standard) or X' = X - R (G' + αV') (nesterov).
pub fn momentum(c: &mut Ctx) -> R<Vec<Value>> {
    let (r, t, n) = common(c, 3)?;
    let alpha = required(c, "alpha")?;
    let beta = required(c, "beta")?;
    let lambda = required(c, "norm_coefficient")?;
    if c.attr("mode").is_none() {
        return Err(c.err("attribute `mode` is required"));
    }
    let nesterov = match c.string("mode", "")?.as_str() {
        "standard" => false,
        "nesterov" => true,
        other => {
            return Err(c.err(format!(
                "attribute `mode` is \"{other}\"; expected standard or nesterov"
            )))
        }
    };
    let (mut xs, mut vs) = (Vec::new(), Vec::new());
    for j in 0..n {
        let x = tensor(c, 0, n, j, r)?;
        let g = tensor(c, 1, n, j, r)?;
        let v = tensor(c, 2, n, j, r)?;
        let gr = axpy(c, lambda, x, g)?;
        let gb = match &t {
            Count::Known(t) if *t > 0 => t!(c, c.b.scale(gr, beta))?,
            Count::Known(_) => gr,
            // Elementwise choice between β G' and G', by T > 0 broadcast.
            Count::Var(_) => {
                let one = t!(c, c.b.full_like(1.0, r))?;
                let b = t!(c, c.b.full_like(beta, r))?;
                let bs = if_started(c, &t, b, one)?;
                let bb = spread(c, bs, gr)?;
                t!(c, c.b.mul(bb, gr))?
            }
        };
        let v_new = axpy(c, alpha, v, gb)?;
        let dir = if nesterov {
            axpy(c, alpha, v_new, gr)?
        } else {
            v_new
        };
        let rb = spread(c, r, dir)?;
        let step = t!(c, c.b.mul(rb, dir))?;
        xs.push(Value::Var(t!(c, c.b.sub(x, step))?));
        vs.push(Value::Var(v_new));
    }
    xs.extend(vs);
    Ok(xs)
}
