//! Program-to-program rewrites. [`lower`] expands every composite primitive (softmax, layer
//! norm, attention, linear, ...) into the core fragment of the documents, which is the
//! reference meaning the composites' fast kernels are checked against.

mod lower;

pub use lower::{lower, outside_core, LowerError, CORE_FRAGMENT, LOWERING_EXTRAS};
