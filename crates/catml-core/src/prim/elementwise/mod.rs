//! Elementwise maps, each a row of data (arithmetic, the unary functions), and fused pullbacks.

pub(crate) mod arith;
pub mod binary_rows;
#[cfg(test)]
mod fast_paths;
pub mod int;
pub mod row;
mod row_draw;
pub(crate) mod tanh_pullback;
pub(crate) mod unary;
pub mod unary_rows;

pub use binary_rows::BINARY_ROWS;
pub use row::{
    AttrKind, AttrSpec, Binary, BinaryDerivative, BinaryRow, BlockFns, Domain, Interval, RowBudget,
    Sign, TensorKernel, Unary, UnaryDerivative, UnaryRow,
};
pub use unary_rows::UNARY_ROWS;

/// The unary row named `name`.
pub fn unary_row(name: &str) -> Option<&'static UnaryRow> {
    UNARY_ROWS.iter().find(|r| r.name == name).copied()
}

/// The binary row named `name`.
pub fn binary_row(name: &str) -> Option<&'static BinaryRow> {
    BINARY_ROWS.iter().find(|r| r.name == name).copied()
}
