//! The typed SSA program (a LensIR module, docs/lensir.md), its builder, validation, the CatML
//! listing and LensIR JSON.
//!
//! `ir` knows no numbers: it holds types and primitives, and asks primitives for their rules.

mod attrs;
mod batch;
mod block;
pub mod budget;
mod builder;
mod compose;
pub mod dot;
pub mod draw;
pub mod json;
mod linear;
pub mod listing;
mod listing_places;
mod permuted;
mod primitive;
mod program;
mod registry;
mod slice;
mod structure;
pub mod suggest;
mod validate;

pub use attrs::{attrs_json, attrs_of, AttrReader};
pub use batch::{with_lead, without_lead, BatchCtx};
pub use block::{BlockKernel, Reads};
pub use budget::{Budget, BudgetSite};
pub use builder::{BuildError, Builder};
pub use compose::ComposeError;
pub use draw::{Draw, DrawError, Drawing, Drawn, Interval};
pub use linear::{Linearity, Transpose};
pub use permuted::{PermutedKernel, Permutes};
pub use primitive::{
    infer_type, operand_refs, same_prim, Attrs, Fragment, KernelError, Operands, Prim, Primitive,
    ResultStorage, RuleError, RuleKind, TypeError,
};
pub use program::{Def, Input, InputKind, Node, Program, Var};
pub use registry::{BodyConstructor, Constructor, Registry};
pub use slice::{SliceKernel, SliceOperand};
pub use structure::{structural_difference, StructuralDifference};
pub use validate::{ValidationError, ValidationErrors};
