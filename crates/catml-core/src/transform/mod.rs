//! Program-to-program transforms beyond differentiation. [`lower`] expands every composite
//! primitive (softmax, layer norm, attention, linear, ...) into the core fragment
//! (docs/lowering.md), the reference meaning the composites' fast kernels are checked against;
//! [`rewrite`] holds semantics-preserving rewrites; [`vmap`] batches a program over examples.

mod lower;
mod rebatch;
pub mod rewrite;
mod vmap;

pub use lower::{core_fragment, lower, lowering_extras, outside_core, LowerError};
pub use rebatch::{rebatch, RebatchError};
pub use vmap::{parse_axes, vmap, Axis, VmapError};
