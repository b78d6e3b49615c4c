//! SwiGLU: the gated activation `a · sigmoid(alpha · a) · b` of two equal-shaped operands.

use catml_core::prim::Ops;

use crate::ctx::{Ctx, Value, R};

pub fn swiglu(c: &mut Ctx) -> R<Vec<Value>> {
    let (a, b) = (c.fvar(0)?, c.fvar(1)?);
    if c.ty(a) != c.ty(b) {
        return Err(c.err(format!(
            "A {} and B {} must have one type (no broadcasting)",
            c.ty(a),
            c.ty(b)
        )));
    }
    let alpha = c.float("alpha", 1.0)? as f64;
    let aa = t!(c, c.b.scale(a, alpha))?;
    let s = t!(c, c.b.sigmoid(aa))?;
    let sw = t!(c, c.b.mul(a, s))?;
    Ok(vec![Value::Var(t!(c, c.b.mul(sw, b))?)])
}
