//! Comparisons, logical connectives and selection: the primitives of the `bool` dtype.

pub mod compare;
pub mod logical;
pub mod select;

pub use compare::{Compare, Comparison};
pub use logical::{Logical, LogicalOp};
pub use select::Where;

use crate::ir::Registry;

pub(crate) fn register(r: &mut Registry) {
    compare::register(r);
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
