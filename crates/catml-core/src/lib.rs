//! The core of CatML: a typed SSA tensor program and the meanings of one program.
//!
//! [`tensor`] (dtypes, shapes, buffers, the parameter store) < [`ir`] (programs, builder,
//! listing, JSON, DOT) < [`prim`] (each primitive's rules) < [`interp`] (eval, shape, params,
//! cost, exact rationals) and [`ad`] (JVP and VJP as program transforms) < [`transform`]
//! (lowering, rewrites) and [`trace`] (the user-facing tracing API). This crate has no
//! training, plotting or data-file dependencies; the `catml` crate gathers it with layers,
//! optimisers, diagrams, training and the verification bundle.

pub mod ad;
pub mod interp;
pub mod ir;
pub mod prim;
pub mod tensor;
pub mod trace;
pub mod transform;
