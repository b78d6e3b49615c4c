//! Program transforms beyond differentiation: rewrites.

pub mod rewrite;
