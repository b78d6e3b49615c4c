//! Primitives linear in one operand (gathers, scatters, layouts, broadcasts, sums, pools' sums,
//! takes, selections by a fixed mask): each states its transpose once, and both derivative rules
//! follow from it (`docs/derivatives.md`, "Linear maps state their transpose once").
//!
//! For y = A(x_k) with the other operands fixed data (indices, a key, the source of an argmax):
//! the tangent is A(dx_k), the primitive itself applied to the tangent, and the cotangent of x_k
//! is Aᵀ(ū). The adjoint checks still test something: they compare the transpose with the
//! forward kernel, <A dx, ū> = <dx, Aᵀ ū>.

use std::sync::Arc;

use crate::ir::{Builder, Prim, Primitive, RuleError, Var};

/// The transpose of a linear primitive, applied to a cotangent `u` of its output: the cotangent
/// of the linear operand, as new nodes. `x` are the primal operands (fixed data is read there).
pub trait Transpose {
    fn transpose(&self, b: &mut Builder, x: &[Var], u: Var) -> Result<Var, RuleError>;
}

/// How a primitive is linear: in which operand, as which primitive, with which transpose.
/// [`Primitive::linearity`] returns it, and the default `jvp` and `vjp` use it.
pub struct Linearity<'a> {
    /// The operand the map is linear in; the others are fixed data with zero derivative.
    pub operand: usize,
    /// The primitive itself, to apply to tangents.
    pub map: Prim,
    /// Its transpose.
    pub transpose: &'a dyn Transpose,
}

impl<'a> Linearity<'a> {
    /// `p`, linear in operand `operand`.
    pub fn of<P: Primitive + Transpose + Clone + 'static>(p: &'a P, operand: usize) -> Self {
        Linearity {
            operand,
            map: Arc::new(p.clone()),
            transpose: p,
        }
    }

    /// The forward rule: A applied to the operands with x_k replaced by dx_k (zero when dx_k is).
    pub fn jvp(
        &self,
        b: &mut Builder,
        x: &[Var],
        dx: &[Option<Var>],
    ) -> Result<Option<Var>, RuleError> {
        let Some(d) = dx[self.operand] else {
            return Ok(None);
        };
        let mut operands = x.to_vec();
        operands[self.operand] = d;
        Ok(Some(b.apply(self.map.clone(), &operands)?))
    }

    /// The reverse rule: Aᵀ ū for the linear operand, zero for the fixed data.
    pub fn vjp(&self, b: &mut Builder, x: &[Var], u: Var) -> Result<Vec<Option<Var>>, RuleError> {
        let mut cts = vec![None; x.len()];
        cts[self.operand] = Some(self.transpose.transpose(b, x, u)?);
        Ok(cts)
    }
}
