//! Interpreters: each one walk over the node list, asking each primitive for its rule.
//! - [`eval`]: numbers (f32/f64), rejecting inputs of the wrong type, domain violations and
//!   non-finite results with the node named;
//! - [`shape`]: types only, no data allocated (the shape functor);
//! - [`params`]: parameter counts, in total and by tag;
//! - [`cost`]: flops, bytes moved and peak live bytes;
//! - `rational`: exact values over arbitrary-precision rationals.

mod cost;
mod eval;
mod params;
mod rational;
mod shape;

pub use cost::{cost, Cost};
pub use eval::{
    eval, eval_named, eval_with_options, eval_with_report, eval_with_report_options,
    order_inputs as order_inputs_named, ConventionHit, EvalError, EvalOptions, EvalReport,
    MAX_VALUE_BYTES,
};
pub use params::{params, ParamCount, ParamInfo};
pub use rational::{eval_rational, RationalError};
pub use shape::{shape, ShapeError};
