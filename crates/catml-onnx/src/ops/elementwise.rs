//! Elementwise operators: numpy broadcasting made explicit with `broadcast`, activations as
//! compositions of core primitives where CatML has no primitive of their own.

use catml_core::ir::Var;
use catml_core::prim::{names, Ops};

use crate::ctx::{broadcast_dims, Ctx, Value, R};

/// Both operands of a binary operator, broadcast to their common shape.
pub fn operands2(c: &mut Ctx, i: usize, j: usize) -> R<(Var, Var)> {
    let (a, b) = (c.fvar(i)?, c.fvar(j)?);
    broadcast2(c, a, b)
}

/// As [`operands2`], taking i64 program values too (`ordered`: see [`Ctx::nvar`]).
pub fn number_operands2(c: &mut Ctx, i: usize, j: usize, ordered: bool) -> R<(Var, Var)> {
    let (a, b) = (c.nvar(i, ordered)?, c.nvar(j, ordered)?);
    broadcast2(c, a, b)
}

fn broadcast2(c: &mut Ctx, a: Var, b: Var) -> R<(Var, Var)> {
    let (ta, tb) = (c.ty(a), c.ty(b));
    if ta.dtype != tb.dtype {
        return Err(c.err(format!(
            "operands have dtypes {} and {}",
            ta.dtype, tb.dtype
        )));
    }
    let dims = broadcast_dims(ta.dims(), tb.dims())
        .ok_or_else(|| c.err(format!("shapes {ta} and {tb} do not broadcast")))?;
    Ok((c.expand_to(a, &dims)?, c.expand_to(b, &dims)?))
}

pub fn add(c: &mut Ctx) -> R<Vec<Value>> {
    let (a, b) = number_operands2(c, 0, 1, false)?;
    Ok(vec![Value::Var(t!(c, c.b.add(a, b))?)])
}

pub fn sub(c: &mut Ctx) -> R<Vec<Value>> {
    let (a, b) = number_operands2(c, 0, 1, false)?;
    Ok(vec![Value::Var(t!(c, c.b.sub(a, b))?)])
}

pub fn mul(c: &mut Ctx) -> R<Vec<Value>> {
    let (a, b) = number_operands2(c, 0, 1, false)?;
    Ok(vec![Value::Var(t!(c, c.b.mul(a, b))?)])
}

/// a / b.
pub fn div_vars(c: &mut Ctx, a: Var, b: Var) -> R<Var> {
    t!(c, c.b.div(a, b))
}

/// Div; on integers it truncates toward zero, as ONNX says (the core's i64 `div`).
pub fn div(c: &mut Ctx) -> R<Vec<Value>> {
    let (a, b) = number_operands2(c, 0, 1, true)?;
    Ok(vec![Value::Var(div_vars(c, a, b)?)])
}

fn max2(c: &mut Ctx, a: Var, b: Var) -> R<Var> {
    t!(c, c.b.maximum(a, b))
}

fn min2(c: &mut Ctx, a: Var, b: Var) -> R<Var> {
    t!(c, c.b.minimum(a, b))
}

/// Variadic Max, Min, Sum, Mean with multidirectional broadcasting.
pub fn variadic(c: &mut Ctx) -> R<Vec<Value>> {
    let n = c.n_inputs();
    if n == 0 {
        return Err(c.err("needs at least one input"));
    }
    let mut dims = c.dims(0)?;
    for i in 1..n {
        let d = c.dims(i)?;
        dims = broadcast_dims(&dims, &d).ok_or_else(|| c.err("inputs do not broadcast"))?;
    }
    // Max, Min and Sum are defined on integers too; Mean divides in floats.
    let int = c.node.op_type != "Mean";
    let ordered = c.node.op_type != "Sum";
    let operand = |c: &mut Ctx, i: usize| {
        if int {
            c.nvar(i, ordered)
        } else {
            c.fvar(i)
        }
    };
    let v0 = operand(c, 0)?;
    let mut acc = c.expand_to(v0, &dims)?;
    for i in 1..n {
        let v = operand(c, i)?;
        let v = c.expand_to(v, &dims)?;
        acc = match c.node.op_type.as_str() {
            "Max" => max2(c, acc, v)?,
            "Min" => min2(c, acc, v)?,
            _ => t!(c, c.b.add(acc, v))?,
        };
    }
    if c.node.op_type == "Mean" && n > 1 {
        acc = t!(c, c.b.div_count(acc, n))?;
    }
    Ok(vec![Value::Var(acc)])
}

/// x^y with ONNX (C `pow`) semantics. A known exponent that is one integer n becomes
/// `powi(x, n)`; otherwise `pow` (defined for x > 0) where x > 0, and where x <= 0:
/// 0^y = 0 or 1 for y > 0 or y = 0; (-a)^n = ±a^n for integer n (negative for odd n).
pub fn pow(c: &mut Ctx) -> R<Vec<Value>> {
    if let Some(base) = c.known(0).filter(|k| !k.is_float() && c.known(1).is_none()) {
        return int_base_pow(c, &base);
    }
    if let Some(k) = c.known(1) {
        let vals = k.as_f64s();
        let dims0 = c.dims(0)?;
        if !vals.is_empty()
            && vals.iter().all(|&v| v == vals[0])
            && vals[0].fract() == 0.0
            && vals[0].abs() <= i32::MAX as f64
            && c.dtype(0)?.is_float()
        {
            let x = c.fvar(0)?;
            let dims =
                broadcast_dims(&dims0, &k.dims).ok_or_else(|| c.err("shapes do not broadcast"))?;
            let x = c.expand_to(x, &dims)?;
            return Ok(vec![Value::Var(t!(c, c.b.powi(x, vals[0] as i32))?)]);
        }
    }
    let x = c.fvar(0)?;
    let dt = c.ty(x).dtype;
    // An integer exponent known at import becomes a float of the base's type.
    let y = match c.known(1) {
        Some(k) if !k.is_float() => {
            let t =
                crate::konst::Const::floats(crate::konst::code_of(dt), k.dims.clone(), k.as_f64s())
                    .to_tensor()
                    .map_err(|m| c.err(m))?;
            t!(c, c.b.constant(t))?
        }
        _ => c.fvar(1)?,
    };
    if c.ty(y).dtype != dt {
        return Err(c.unsupported(format!(
            "base of dtype {dt} with an exponent of dtype {}",
            c.ty(y).dtype
        )));
    }
    let dims = broadcast_dims(c.ty(x).dims(), c.ty(y).dims())
        .ok_or_else(|| c.err("shapes do not broadcast"))?;
    let (x, y) = (c.expand_to(x, &dims)?, c.expand_to(y, &dims)?);
    Ok(vec![Value::Var(pow_general(c, x, y)?)])
}

/// An integer base known at import to a float exponent (a program value): the power in f64,
/// truncated toward zero to the base's integer type (as ONNX's reference casts it). Bases are
/// exact in f64 up to 2^53; larger ones are refused.
fn int_base_pow(c: &mut Ctx, base: &crate::konst::Const) -> R<Vec<Value>> {
    let y = c.fvar(1)?;
    let vals = base.as_i64s();
    if let Some(v) = vals.iter().find(|v| v.unsigned_abs() > 1 << 53) {
        return Err(c.unsupported(format!(
            "integer base {v} beyond 2^53 (not exact in f64) with a float exponent"
        )));
    }
    let x = c.constant_of(
        catml_core::tensor::DType::F64,
        &base.dims,
        vals.iter().map(|&v| v as f64).collect(),
    )?;
    let y = if c.ty(y).dtype == catml_core::tensor::DType::F64 {
        y
    } else {
        t!(c, c.b.convert(y, catml_core::tensor::DType::F64))?
    };
    let dims = broadcast_dims(c.ty(x).dims(), c.ty(y).dims())
        .ok_or_else(|| c.err("shapes do not broadcast"))?;
    let (x, y) = (c.expand_to(x, &dims)?, c.expand_to(y, &dims)?);
    let p = pow_general(c, x, y)?;
    Ok(vec![Value::Var(t!(
        c,
        c.b.convert(p, catml_core::tensor::DType::I64)
    )?)])
}

/// The cases x <= 0 that have a finite result take |x| or 1 as `pow`'s base; the others
/// (0 to a negative power, a negative base to a fractional one: inf and NaN in ONNX) keep x,
/// so `pow` reports them as outside its domain instead of computing a non-finite value.
fn pow_general(c: &mut Ctx, x: Var, y: Var) -> R<Var> {
    let ty = c.ty(x);
    let (dt, dims) = (ty.dtype, ty.dims().to_vec());
    let zero = c.full(0.0, dt, &dims)?;
    let one = c.full(1.0, dt, &dims)?;
    let pos = t!(c, c.b.greater(x, zero))?;
    let is_zero = t!(c, c.b.equal(x, zero))?;
    let y_nonneg = t!(c, c.b.greater_equal(y, zero))?;
    let zero_ok = t!(c, c.b.logical_and(is_zero, y_nonneg))?;
    let x_neg = t!(c, c.b.less(x, zero))?;
    let fy = t!(c, c.b.floor(y))?;
    let is_int = t!(c, c.b.equal(fy, y))?;
    let neg_ok = t!(c, c.b.logical_and(x_neg, is_int))?;
    let ax = t!(c, c.b.abs(x))?;
    let b1 = t!(c, c.b.select(neg_ok, ax, x))?;
    let b2 = t!(c, c.b.select(zero_ok, one, b1))?;
    let base = t!(c, c.b.select(pos, x, b2))?;
    let p = t!(c, c.b.pow(base, y))?;
    // 0^y: 0 for y > 0, 1 for y = 0.
    let y_pos = t!(c, c.b.greater(y, zero))?;
    let at_zero = t!(c, c.b.select(y_pos, zero, one))?;
    // (-a)^n = a^n for even n, -a^n for odd n.
    let half = t!(c, c.b.scale(y, 0.5))?;
    let fh = t!(c, c.b.floor(half))?;
    let even = t!(c, c.b.equal(fh, half))?;
    let np = t!(c, c.b.neg(p))?;
    let signed = t!(c, c.b.select(even, p, np))?;
    let nonpos = t!(c, c.b.select(zero_ok, at_zero, signed))?;
    t!(c, c.b.select(pos, p, nonpos))
}

/// Mod: integer operands fold at import (`fold`). Floats: a - r(a / b) b, with r rounding
/// toward zero for `fmod = 1` (C fmod, the dividend's sign) and down for `fmod = 0` (the
/// divisor's sign). A zero divisor gives NaN; an infinite one gives a, or for `fmod = 0` with
/// a nonzero a of the other sign, b itself (a + b).
pub fn modulo(c: &mut Ctx) -> R<Vec<Value>> {
    let fmod = c.int("fmod", 0)? == 1;
    if c.dtype(0)? == catml_core::tensor::DType::I64 {
        return int_modulo(c, fmod);
    }
    let (a, b) = operands2(c, 0, 1)?;
    let full =
        |c: &mut Ctx, v: f64, like: Var| c.b.full_like(v, like).map_err(|er| c.err(er.to_string()));
    let zero = full(c, 0.0, b)?;
    let one = full(c, 1.0, b)?;
    let inf = full(c, f64::INFINITY, b)?;
    let b_zero = t!(c, c.b.equal(b, zero))?;
    let b_abs = t!(c, c.b.abs(b))?;
    let b_inf = t!(c, c.b.equal(b_abs, inf))?;
    // The divisor the finite formula sees: 1 where b is 0 or infinite (those are chosen below).
    let special = t!(c, c.b.logical_or(b_zero, b_inf))?;
    let bs = t!(c, c.b.select(special, one, b))?;
    let q = t!(c, c.b.div(a, bs))?;
    let fl = t!(c, c.b.floor(q))?;
    let r = if fmod {
        let zero_q = full(c, 0.0, q)?;
        let nonneg = t!(c, c.b.greater_equal(q, zero_q))?;
        let ce = t!(c, c.b.ceil(q))?;
        t!(c, c.b.select(nonneg, fl, ce))?
    } else {
        fl
    };
    let rb = t!(c, c.b.mul(r, bs))?;
    let finite = t!(c, c.b.sub(a, rb))?;
    let at_inf = if fmod {
        a
    } else {
        let zero_a = full(c, 0.0, a)?;
        let a_neg = t!(c, c.b.less(a, zero_a))?;
        let b_neg = t!(c, c.b.less(b, zero))?;
        let differ = t!(c, c.b.logical_xor(a_neg, b_neg))?;
        let a_zero = t!(c, c.b.equal(a, zero_a))?;
        let a_nonzero = t!(c, c.b.logical_not(a_zero))?;
        let flip = t!(c, c.b.logical_and(differ, a_nonzero))?;
        t!(c, c.b.select(flip, b, a))?
    };
    let nan = full(c, f64::NAN, a)?;
    let y = t!(c, c.b.select(b_inf, at_inf, finite))?;
    Ok(vec![Value::Var(t!(c, c.b.select(b_zero, nan, y))?)])
}

/// Integer Mod: r = a - trunc(a / b) b has the dividend's sign (`fmod = 1`); for `fmod = 0`
/// a nonzero r whose sign differs from b's becomes r + b (the divisor's sign). A zero divisor is
/// the core `div`'s domain error.
fn int_modulo(c: &mut Ctx, fmod: bool) -> R<Vec<Value>> {
    let (a, b) = number_operands2(c, 0, 1, true)?;
    let q = t!(c, c.b.div(a, b))?;
    let qb = t!(c, c.b.mul(q, b))?;
    let r = t!(c, c.b.sub(a, qb))?;
    if fmod {
        return Ok(vec![Value::Var(r)]);
    }
    let zero = c.full(0.0, catml_core::tensor::DType::I64, c.ty(r).dims())?;
    let r_neg = t!(c, c.b.less(r, zero))?;
    let b_neg = t!(c, c.b.less(b, zero))?;
    let differ = t!(c, c.b.logical_xor(r_neg, b_neg))?;
    let r_zero = t!(c, c.b.equal(r, zero))?;
    let r_nonzero = t!(c, c.b.logical_not(r_zero))?;
    let flip = t!(c, c.b.logical_and(differ, r_nonzero))?;
    let rb = t!(c, c.b.add(r, b))?;
    Ok(vec![Value::Var(t!(c, c.b.select(flip, rb, r))?)])
}

/// PRelu: relu(x) - slope · relu(-x), slope broadcast to x.
pub fn prelu(c: &mut Ctx) -> R<Vec<Value>> {
    let (x, s) = operands2(c, 0, 1)?;
    let p = t!(c, c.b.relu(x))?;
    let nx = t!(c, c.b.neg(x))?;
    let n = t!(c, c.b.relu(nx))?;
    let sn = t!(c, c.b.mul(s, n))?;
    Ok(vec![Value::Var(t!(c, c.b.sub(p, sn))?)])
}

/// Unary operators; `name` is the ONNX op type.
pub fn unary(c: &mut Ctx) -> R<Vec<Value>> {
    if c.dtype(0)? == catml_core::tensor::DType::I64 {
        return int_unary(c);
    }
    let x = c.fvar(0)?;
    let op = c.node.op_type.clone();
    let y = unary_var(c, &op, x)?;
    Ok(vec![Value::Var(y)])
}

/// Neg, Abs, Sign and Relu of an i64 program value (the core's integer kernels; |i64::MIN|
/// and -i64::MIN wrap to i64::MIN); other unary operators need a float.
fn int_unary(c: &mut Ctx) -> R<Vec<Value>> {
    let op = c.node.op_type.clone();
    if !matches!(op.as_str(), "Neg" | "Abs" | "Sign" | "Relu") {
        return Err(c.unsupported(format!("input 0 has dtype i64; {op} needs a float")));
    }
    let x = c.nvar(0, op != "Neg")?;
    let y = match op.as_str() {
        "Neg" => t!(c, c.b.neg(x))?,
        "Abs" => t!(c, c.b.abs(x))?,
        "Sign" => t!(c, c.b.sign(x))?,
        _ => {
            let zero = c.full(0.0, catml_core::tensor::DType::I64, c.ty(x).dims())?;
            t!(c, c.b.maximum(x, zero))?
        }
    };
    Ok(vec![Value::Var(y)])
}

/// relu(-x), the negative part.
fn neg_part(c: &mut Ctx, x: Var) -> R<Var> {
    let nx = t!(c, c.b.neg(x))?;
    t!(c, c.b.relu(nx))
}

/// alpha (exp(min(x, 0) / s) - 1): the negative branch of ELU-like activations.
fn exp_branch(c: &mut Ctx, x: Var, alpha: f64, s: f64) -> R<Var> {
    let n = neg_part(c, x)?;
    let m = t!(c, c.b.scale(n, -1.0 / s))?;
    let ex = t!(c, c.b.exp(m))?;
    let one = c.b.full_like(1.0, ex).map_err(|er| c.err(er.to_string()))?;
    let d = t!(c, c.b.sub(ex, one))?;
    t!(c, c.b.scale(d, alpha))
}

/// clip(x, lo, hi) = lo + relu(x - lo) - relu(x - hi) (either bound optional).
pub fn clip_var(c: &mut Ctx, x: Var, lo: Option<f64>, hi: Option<f64>) -> R<Var> {
    let mut y = x;
    if let Some(hi) = hi {
        let h = c.b.full_like(hi, x).map_err(|er| c.err(er.to_string()))?;
        let d = t!(c, c.b.sub(y, h))?;
        let r = t!(c, c.b.relu(d))?;
        y = t!(c, c.b.sub(y, r))?;
    }
    if let Some(lo) = lo {
        let l = c.b.full_like(lo, x).map_err(|er| c.err(er.to_string()))?;
        let d = t!(c, c.b.sub(y, l))?;
        let r = t!(c, c.b.relu(d))?;
        y = t!(c, c.b.add(l, r))?;
    }
    Ok(y)
}

fn hard_sigmoid(c: &mut Ctx, x: Var, alpha: f64, beta: f64) -> R<Var> {
    let ax = t!(c, c.b.scale(x, alpha))?;
    let bb = c.b.full_like(beta, x).map_err(|er| c.err(er.to_string()))?;
    let y = t!(c, c.b.add(ax, bb))?;
    clip_var(c, y, Some(0.0), Some(1.0))
}

pub fn unary_var(c: &mut Ctx, op: &str, x: Var) -> R<Var> {
    let f = |c: &Ctx, name: &str, d: f32| c.float(name, d).map(|v| v as f64);
    Ok(match op {
        "Relu" => t!(c, c.b.relu(x))?,
        "Sigmoid" => t!(c, c.b.sigmoid(x))?,
        "Tanh" => t!(c, c.b.tanh(x))?,
        "Exp" => t!(c, c.b.exp(x))?,
        "Log" => t!(c, c.b.log(x))?,
        "Neg" => t!(c, c.b.neg(x))?,
        "Reciprocal" => t!(c, c.b.reciprocal(x))?,
        "Abs" => t!(c, c.b.abs(x))?,
        "Sqrt" => t!(c, c.b.sqrt(x))?,
        "Sin" => t!(c, c.b.sin(x))?,
        "Cos" => t!(c, c.b.cos(x))?,
        "Atan" => t!(c, c.b.unary_row(names::ATAN, &[], x))?,
        "Erf" => t!(c, c.b.erf(x))?,
        "Floor" => t!(c, c.b.floor(x))?,
        "Ceil" => t!(c, c.b.ceil(x))?,
        "Round" => t!(c, c.b.round(x))?,
        "Sign" => t!(c, c.b.sign(x))?,
        "Softplus" => t!(c, c.b.softplus(x))?,
        "LeakyRelu" => {
            let alpha = f(c, "alpha", 0.01)?;
            let p = t!(c, c.b.relu(x))?;
            let n = neg_part(c, x)?;
            let an = t!(c, c.b.scale(n, alpha))?;
            t!(c, c.b.sub(p, an))?
        }
        "Elu" | "Selu" | "Celu" => {
            let (alpha, gamma, s) = match op {
                "Elu" => (f(c, "alpha", 1.0)?, 1.0, 1.0),
                "Selu" => (f(c, "alpha", 1.673_263_2)?, f(c, "gamma", 1.050_701)?, 1.0),
                _ => {
                    let a = f(c, "alpha", 1.0)?;
                    (a, 1.0, a)
                }
            };
            let p = t!(c, c.b.relu(x))?;
            let n = exp_branch(c, x, alpha, s)?;
            let y = t!(c, c.b.add(p, n))?;
            if gamma != 1.0 {
                t!(c, c.b.scale(y, gamma))?
            } else {
                y
            }
        }
        "Softsign" => {
            let a = t!(c, c.b.abs(x))?;
            let one = c.b.full_like(1.0, a).map_err(|er| c.err(er.to_string()))?;
            let d = t!(c, c.b.add(one, a))?;
            let r = t!(c, c.b.reciprocal(d))?;
            t!(c, c.b.mul(x, r))?
        }
        "HardSigmoid" => {
            let (a, b) = (f(c, "alpha", 0.2)?, f(c, "beta", 0.5)?);
            hard_sigmoid(c, x, a, b)?
        }
        "HardSwish" => {
            let h = hard_sigmoid(c, x, 1.0 / 6.0, 0.5)?;
            t!(c, c.b.mul(x, h))?
        }
        "ThresholdedRelu" => {
            let alpha = f(c, "alpha", 1.0)?;
            let t =
                c.b.full_like(alpha, x)
                    .map_err(|er| c.err(er.to_string()))?;
            let d = t!(c, c.b.sub(x, t))?;
            let s = t!(c, c.b.heaviside(d))?;
            t!(c, c.b.mul(x, s))?
        }
        "Swish" => {
            let alpha = f(c, "alpha", 1.0)?;
            let ax = t!(c, c.b.scale(x, alpha))?;
            let s = t!(c, c.b.sigmoid(ax))?;
            t!(c, c.b.mul(x, s))?
        }
        "Mish" => {
            let sp = t!(c, c.b.softplus(x))?;
            let t = t!(c, c.b.tanh(sp))?;
            t!(c, c.b.mul(x, t))?
        }
        "Shrink" => {
            let (bias, l) = (f(c, "bias", 0.0)?, f(c, "lambd", 0.5)?);
            // (x - bias) step(x - lambd) + (x + bias) step(-x - lambd)
            let lv = c.b.full_like(l, x).map_err(|er| c.err(er.to_string()))?;
            let bv = c.b.full_like(bias, x).map_err(|er| c.err(er.to_string()))?;
            let d1 = t!(c, c.b.sub(x, lv))?;
            let s1 = t!(c, c.b.heaviside(d1))?;
            let nx = t!(c, c.b.neg(x))?;
            let d2 = t!(c, c.b.sub(nx, lv))?;
            let s2 = t!(c, c.b.heaviside(d2))?;
            let xm = t!(c, c.b.sub(x, bv))?;
            let xp = t!(c, c.b.add(x, bv))?;
            let t1 = t!(c, c.b.mul(xm, s1))?;
            let t2 = t!(c, c.b.mul(xp, s2))?;
            t!(c, c.b.add(t1, t2))?
        }
        "Tan" => {
            let (s, co) = (t!(c, c.b.sin(x))?, t!(c, c.b.cos(x))?);
            t!(c, c.b.div(s, co))?
        }
        "Sinh" | "Cosh" => {
            // (e^x ∓ e^-x) / 2
            let e = t!(c, c.b.exp(x))?;
            let nx = t!(c, c.b.neg(x))?;
            let en = t!(c, c.b.exp(nx))?;
            let d = if op == "Sinh" {
                t!(c, c.b.sub(e, en))?
            } else {
                t!(c, c.b.add(e, en))?
            };
            t!(c, c.b.scale(d, 0.5))?
        }
        "Asin" | "Acos" => {
            // asin x = atan(x / sqrt(1 - x^2)); acos x = pi/2 - asin x
            let sq = t!(c, c.b.square(x))?;
            let one = c.b.full_like(1.0, x).map_err(|er| c.err(er.to_string()))?;
            let d = t!(c, c.b.sub(one, sq))?;
            let r = t!(c, c.b.sqrt(d))?;
            let q = t!(c, c.b.div(x, r))?;
            let a = t!(c, c.b.unary_row(names::ATAN, &[], q))?;
            if op == "Asin" {
                a
            } else {
                let h =
                    c.b.full_like(std::f64::consts::FRAC_PI_2, x)
                        .map_err(|er| c.err(er.to_string()))?;
                t!(c, c.b.sub(h, a))?
            }
        }
        "Asinh" | "Acosh" => {
            // log(x + sqrt(x^2 ± 1))
            let sq = t!(c, c.b.square(x))?;
            let one = c.b.full_like(1.0, x).map_err(|er| c.err(er.to_string()))?;
            let d = if op == "Asinh" {
                t!(c, c.b.add(sq, one))?
            } else {
                t!(c, c.b.sub(sq, one))?
            };
            let r = t!(c, c.b.sqrt(d))?;
            let a = t!(c, c.b.add(x, r))?;
            t!(c, c.b.log(a))?
        }
        "Atanh" => {
            // (log1p(x) - log1p(-x)) / 2
            let p = t!(c, c.b.log1p(x))?;
            let nx = t!(c, c.b.neg(x))?;
            let n = t!(c, c.b.log1p(nx))?;
            let d = t!(c, c.b.sub(p, n))?;
            t!(c, c.b.scale(d, 0.5))?
        }
        "Gelu" => {
            let approx = c.string("approximate", "none")?;
            let tanh = match approx.as_str() {
                "none" => false,
                "tanh" => true,
                other => return Err(c.unsupported(format!("approximate=\"{other}\""))),
            };
            t!(c, c.b.gelu(x, tanh))?
        }
        other => return Err(c.unsupported(format!("unary operator {other}"))),
    })
}

/// Clip: bounds as attributes (opset < 11) or known inputs.
pub fn clip(c: &mut Ctx) -> R<Vec<Value>> {
    if c.dtype(0)? == catml_core::tensor::DType::I64 {
        let x = c.nvar(0, true)?;
        return clip_inputs(c, x);
    }
    let x = c.fvar(0)?;
    let (lo, hi) = if c.opset < 11 {
        (
            Some(c.float("min", f32::MIN)? as f64),
            Some(c.float("max", f32::MAX)? as f64),
        )
    } else {
        let known = |c: &Ctx, i: usize| c.has(i) && c.known(i).is_some();
        if (c.has(1) && !known(c, 1)) || (c.has(2) && !known(c, 2)) {
            return clip_inputs(c, x);
        }
        let lo = c.known(1).and_then(|k| k.as_f64s().first().copied());
        let hi = c.known(2).and_then(|k| k.as_f64s().first().copied());
        (lo, hi)
    };
    let lo = lo.filter(|v| *v > f32::MIN as f64);
    let hi = hi.filter(|v| *v < f32::MAX as f64);
    Ok(vec![Value::Var(clip_var(c, x, lo, hi)?)])
}

/// Clip with bounds that are program values: min(max(x, lo), hi), each bound a scalar
/// broadcast to x (min > max gives max everywhere, as ONNX says).
fn clip_inputs(c: &mut Ctx, x: Var) -> R<Vec<Value>> {
    let dims = c.ty(x).dims().to_vec();
    let mut y = x;
    for (i, name) in [(1, "min"), (2, "max")] {
        if !c.has(i) {
            continue;
        }
        if c.dims(i)?.iter().product::<usize>() != 1 {
            return Err(c.err(format!("{name} (input {i}) must be a scalar")));
        }
        let v = if c.ty(x).dtype == catml_core::tensor::DType::I64 {
            int_bound(c, i)?
        } else {
            c.fvar(i)?
        };
        let r = c.ty(v).rank();
        let v = if r > 0 {
            t!(c, c.b.reshape(v, Vec::<usize>::new()))?
        } else {
            v
        };
        let v = c.expand_to(v, &dims)?;
        y = if i == 1 {
            max2(c, y, v)?
        } else {
            min2(c, y, v)?
        };
    }
    Ok(vec![Value::Var(y)])
}

/// An i64 Clip bound: a program value, or a known one (integer data or, through
/// `int_data`, its exact f64 reading) as an i64 constant.
fn int_bound(c: &mut Ctx, i: usize) -> R<Var> {
    let Some(k) = c.known(i) else {
        return c.nvar(i, true);
    };
    let v: Vec<i64> = if k.is_float() {
        k.as_f64s().iter().map(|&f| f as i64).collect()
    } else {
        k.as_i64s()
    };
    let t = catml_core::tensor::Tensor::i64(k.dims.clone(), v).map_err(|e| c.err(e.to_string()))?;
    t!(c, c.b.constant(t))
}

/// Identity: the output is the input.
pub fn identity(c: &mut Ctx) -> R<Vec<Value>> {
    Ok(vec![c.value(0)?.clone()])
}
