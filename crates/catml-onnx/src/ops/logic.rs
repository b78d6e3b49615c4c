//! Comparisons, logical connectives, Where, IsNaN and IsInf: bool results over the core's
//! `equal`/`less`/... , `logical_*` and `where` primitives, with numpy broadcasting.

use catml_core::ir::Var;
use catml_core::prim::Ops;
use catml_core::tensor::DType;

use crate::ctx::{broadcast_dims, Ctx, Value, R};

fn out(v: Var) -> R<Vec<Value>> {
    Ok(vec![Value::Var(v)])
}

/// Operands `idx` of any held dtype, one dtype for all, broadcast to their common shape.
pub fn operands_any(c: &mut Ctx, idx: &[usize]) -> R<Vec<Var>> {
    let mut dims: Vec<usize> = Vec::new();
    let mut dtype = None;
    for &i in idx {
        let d = c.dtype(i)?;
        if *dtype.get_or_insert(d) != d {
            return Err(c.err(format!(
                "operands have dtypes {} and {d}",
                dtype.expect("set")
            )));
        }
        let di = c.dims(i)?;
        dims = broadcast_dims(&dims, &di)
            .ok_or_else(|| c.err(format!("shapes {dims:?} and {di:?} do not broadcast")))?;
    }
    let mut vs = Vec::with_capacity(idx.len());
    for &i in idx {
        let v = c.var(i)?;
        vs.push(c.expand_to(v, &dims)?);
    }
    Ok(vs)
}

/// A bool operand as a program value.
fn bool_var(c: &mut Ctx, i: usize) -> R<Var> {
    let d = c.dtype(i)?;
    if d != DType::Bool {
        return Err(c.err(format!("input {i} has dtype {d}, expected bool")));
    }
    c.var(i)
}

/// Equal, Less, LessOrEqual, Greater, GreaterOrEqual (Equal also on bools: not xor).
pub fn compare(c: &mut Ctx) -> R<Vec<Value>> {
    let v = operands_any(c, &[0, 1])?;
    let (a, b) = (v[0], v[1]);
    let op = c.node.op_type.clone();
    if c.ty(a).dtype == DType::Bool {
        if op != "Equal" {
            return Err(c.err("ordering comparisons take numbers, not bools"));
        }
        let x = t!(c, c.b.logical_xor(a, b))?;
        return out(t!(c, c.b.logical_not(x))?);
    }
    out(match op.as_str() {
        "Equal" => t!(c, c.b.equal(a, b))?,
        "Less" => t!(c, c.b.less(a, b))?,
        "LessOrEqual" => t!(c, c.b.less_equal(a, b))?,
        "Greater" => t!(c, c.b.greater(a, b))?,
        "GreaterOrEqual" => t!(c, c.b.greater_equal(a, b))?,
        other => return Err(c.unsupported(format!("comparison {other}"))),
    })
}

/// And, Or, Xor on bools (broadcast), Not.
pub fn logical(c: &mut Ctx) -> R<Vec<Value>> {
    let op = c.node.op_type.clone();
    if op == "Not" {
        let x = bool_var(c, 0)?;
        return out(t!(c, c.b.logical_not(x))?);
    }
    bool_var(c, 0)?;
    bool_var(c, 1)?;
    let v = operands_any(c, &[0, 1])?;
    let (a, b) = (v[0], v[1]);
    out(match op.as_str() {
        "And" => t!(c, c.b.logical_and(a, b))?,
        "Or" => t!(c, c.b.logical_or(a, b))?,
        "Xor" => t!(c, c.b.logical_xor(a, b))?,
        other => return Err(c.unsupported(format!("logical operator {other}"))),
    })
}

/// cond ? a : b for bools: (cond and a) or (not cond and b).
fn select_bool(c: &mut Ctx, cond: Var, a: Var, b: Var) -> R<Var> {
    let p = t!(c, c.b.logical_and(cond, a))?;
    let n = t!(c, c.b.logical_not(cond))?;
    let q = t!(c, c.b.logical_and(n, b))?;
    t!(c, c.b.logical_or(p, q))
}

/// a where cond holds, else b; the three broadcast together.
pub fn select_vars(c: &mut Ctx, cond: Var, a: Var, b: Var) -> R<Var> {
    if c.ty(a).dtype == DType::Bool {
        select_bool(c, cond, a, b)
    } else {
        t!(c, c.b.select(cond, a, b))
    }
}

/// Where(condition, X, Y) with multidirectional broadcasting.
pub fn where_(c: &mut Ctx) -> R<Vec<Value>> {
    bool_var(c, 0)?;
    let v = operands_any(c, &[1, 2])?;
    let mut dims = c.ty(v[0]).dims().to_vec();
    let cd = c.dims(0)?;
    dims = broadcast_dims(&cd, &dims).ok_or_else(|| c.err("condition does not broadcast"))?;
    let cond = c.var(0)?;
    let cond = c.expand_to(cond, &dims)?;
    let (a, b) = (c.expand_to(v[0], &dims)?, c.expand_to(v[1], &dims)?);
    out(select_vars(c, cond, a, b)?)
}

/// IsNaN: x != x. IsInf: x > max finite (detect_positive), x < -max finite (detect_negative).
pub fn is_special(c: &mut Ctx) -> R<Vec<Value>> {
    let x = c.fvar(0)?;
    let ty = c.ty(x);
    if c.node.op_type == "IsNaN" {
        let e = t!(c, c.b.equal(x, x))?;
        return out(t!(c, c.b.logical_not(e))?);
    }
    let big = if ty.dtype == DType::F32 {
        f32::MAX as f64
    } else {
        f64::MAX
    };
    let pos = c.int("detect_positive", 1)? != 0;
    let neg = c.int("detect_negative", 1)? != 0;
    let p = if pos {
        let m = c.full(big, ty.dtype, ty.dims())?;
        Some(t!(c, c.b.greater(x, m))?)
    } else {
        None
    };
    let n = if neg {
        let m = c.full(-big, ty.dtype, ty.dims())?;
        Some(t!(c, c.b.less(x, m))?)
    } else {
        None
    };
    out(match (p, n) {
        (Some(p), Some(n)) => t!(c, c.b.logical_or(p, n))?,
        (Some(v), None) | (None, Some(v)) => v,
        (None, None) => {
            // Neither sign detected: all false.
            let m = c.full(0.0, ty.dtype, ty.dims())?;
            let e = t!(c, c.b.equal(m, m))?;
            t!(c, c.b.logical_not(e))?
        }
    })
}

/// Two bools joined along their last axis (through f32, which the core concatenates).
pub fn concat_bool(c: &mut Ctx, a: Var, b: Var) -> R<Var> {
    let axis = c.ty(a).rank() - 1;
    let fa = t!(c, c.b.convert(a, DType::F32))?;
    let fb = t!(c, c.b.convert(b, DType::F32))?;
    let j = t!(c, c.b.concat(&[fa, fb], axis))?;
    t!(c, c.b.convert(j, DType::Bool))
}
