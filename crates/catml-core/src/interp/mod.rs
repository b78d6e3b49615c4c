//! Interpreters: each one walk over the node list, asking each primitive for its rule.
//! - [`eval`]: numbers (f32/f64), rejecting inputs of the wrong type, domain violations and
//!   non-finite results with the node named;
//! - [`shape`]: types only, no data allocated (the shape functor);
//! - [`params`]: parameter counts, in total and by tag;
//! - [`cost`]: flops, bytes moved and peak live bytes;
//! - [`EvalPlan`]: what eval works out once per program (when values die, the peak of live
//!   bytes, checked against the [memory budget](set_memory_budget) before anything is
//!   allocated);
//! - [`Executable`]: a program planned once, keeping its value buffers between calls, with
//!   sums folded into the products that feed them (`fold`) and chains of elementwise nodes
//!   run as one pass each (`fuse`), and permutes read and written in place by the kernels
//!   next to them (`permutes`), large values checked by the elementwise pass that reads them
//!   next (`reader_checks`), and a small program run in one buffer (`arena`);
//! - `rational`: exact values over arbitrary-precision rationals.

mod arena;
mod budget;
mod cost;
mod eval;
mod executable;
mod fold;
mod fuse;
mod params;
mod permutes;
mod plan;
mod rational;
mod reader_checks;
mod shape;

pub use budget::{
    default_memory_budget, memory_budget, parse_bytes, set_memory_budget, Bytes, SizeError,
    DEFAULT_FRACTION, FALLBACK_BUDGET,
};
pub use cost::{cost, Cost};
pub use eval::{
    eval, eval_named, eval_planned, eval_planned_with_report, eval_with_options, eval_with_report,
    eval_with_report_options, order_inputs as order_inputs_named, ConventionHit, EvalError,
    EvalOptions, EvalReport, MAX_VALUE_BYTES,
};
pub use executable::Executable;
pub use params::{params, ParamCount, ParamInfo};
pub use plan::{EvalPlan, Peak};
pub use rational::{eval_rational, RationalError};
pub use shape::{shape, ShapeError};
