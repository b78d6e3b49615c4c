//! SwiGLU: the Swish-gated linear unit of two equal-shaped inputs.

use catml_core::prim::Ops;

use crate::ctx::{Ctx, Value, R};

/// SwiGLU: y = a · sigmoid(alpha · a) · b (no broadcasting: A and B have one shape).
pub fn swiglu(c: &mut Ctx) -> R<Vec<Value>> {
    let (a, b) = (c.fvar(0)?, c.fvar(1)?);
    let (ta, tb) = (c.ty(a), c.ty(b));
    if ta != tb {
        return Err(c.err(format!("inputs A {ta} and B {tb} differ")));
    }
    let alpha = f64::from(c.float("alpha", 1.0)?);
    let z = if alpha == 1.0 {
        a
    } else {
        t!(c, c.b.scale(a, alpha))?
    };
    let g = t!(c, c.b.sigmoid(z))?;
    let s = t!(c, c.b.mul(a, g))?;
    Ok(vec![Value::Var(t!(c, c.b.mul(s, b))?)])
}
