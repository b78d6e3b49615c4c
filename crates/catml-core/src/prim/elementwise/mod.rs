//! Elementwise maps: arithmetic, the unary functions, and fused pullbacks.

pub(crate) mod arith;
pub(crate) mod tanh_pullback;
pub(crate) mod unary;
