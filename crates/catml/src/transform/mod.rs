//! Program-to-program transforms beyond differentiation. [`lower`] expands every composite
//! primitive (softmax, layer norm, attention, linear, ...) into the core fragment of the
//! documents, the reference meaning the composites' fast kernels are checked against;
//! [`rewrite`] holds semantics-preserving rewrites.

mod lower;
mod rebatch;
pub mod rewrite;

pub use lower::{lower, outside_core, LowerError, CORE_FRAGMENT, LOWERING_EXTRAS};
pub use rebatch::{rebatch, RebatchError};
