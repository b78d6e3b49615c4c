//! Comparisons, logical connectives and selection: the primitives of the `bool` dtype.

pub mod comparison;
pub mod logical;
pub mod select;

pub use comparison::{Compare, Comparison};
pub use logical::{Logical, LogicalOp};
pub use select::Where;

use crate::ir::Registry;

pub(crate) fn register(r: &mut Registry) {
    comparison::register(r);
    logical::register(r);
    select::register(r);
}

/// A truth value as an exact 0 or 1 (how the rational interpreter holds bools).
pub(crate) fn truth(t: bool) -> crate::tensor::Rational {
    if t {
        num_traits::One::one()
    } else {
        num_traits::Zero::zero()
    }
}

#[cfg(test)]
mod tests;

/// The batching rule of the family: every primitive here is elementwise.
fn batch_elementwise(
    b: &mut crate::ir::Builder,
    x: &[crate::ir::Var],
    at: &crate::ir::BatchCtx,
) -> Result<crate::ir::Var, crate::ir::RuleError> {
    crate::prim::batching::elementwise(b, x, at)
}

/// A drawn condition and where(cond, x, y) on it: booleans never enter the generator's pool
/// of float values, so each rule ends in a selection, which lies in the hull of x and y.
fn draw_selection(
    d: &mut dyn crate::ir::Draw,
    cond: impl FnOnce(
        &mut crate::ir::Builder,
        crate::ir::Var,
        crate::ir::Var,
    ) -> Result<crate::ir::Var, crate::ir::TypeError>,
) -> Result<crate::ir::Drawn, crate::ir::DrawError> {
    use crate::prim::Ops;
    let x = d.pick();
    let y = d.partner(x)?;
    let c = d.op(|b| cond(b, x.var, y.var))?;
    d.same(x.range.hull(y.range), |b| b.select(c, x.var, y.var))
}
