//! User primitives from closures.

pub(crate) mod closures;
