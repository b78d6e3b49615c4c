//! Tracing: one model function, written once, runs eagerly on tensors outside a trace and
//! records a program inside one.
//!
//! ```
//! use catml_core::trace::{trace, Value};
//! use catml_core::tensor::{DType, Tensor, TensorType};
//!
//! fn model(x: &Value) -> Value {
//!     (x.tanh() * 2.0).sum_all()
//! }
//!
//! // Eagerly: numbers now.
//! let x = Tensor::f64([2], vec![0.5, -1.0]).unwrap();
//! let y = model(&Value::from(x.clone())).into_tensor().unwrap();
//!
//! // Traced: a program, then the same numbers from the interpreter.
//! let traced = trace(&[TensorType::new(DType::F64, [2])], |v| model(&v[0])).unwrap();
//! assert_eq!(traced.eval(&[x]).unwrap()[0], y);
//! ```
//!
//! # Errors without panics
//!
//! Operators cannot return `Result`, so a [`Value`] can hold an error: a failing operation
//! (operands of the wrong shape or dtype, an input outside a kernel's domain, a non-finite
//! result) returns a failed value naming the user's call site and the operand types, and every
//! operation on a failed value passes the error on. Inside a trace, the first error is also
//! recorded, and [`trace`] returns it as `Err`, even if the failed value was dropped. Outside a
//! trace, [`Value::tensor`], [`Value::into_tensor`] and [`Value::checked`] return it. Code
//! that prefers early exits writes `let h = x.matmul(&w).checked()?;` and returns
//! `Result<Value, TraceError>`, which a traced function may return directly.
//!
//! # Parameters and tags
//!
//! [`Value::param`] declares a named parameter input with an initial value (layers in `nn`
//! draw it from a seeded initialiser); [`with_tag`] tags the nodes recorded inside it.
//! Outside a trace a parameter is just its initial value and tags mean nothing.
//!
//! # Function transforms
//!
//! [`value_and_grad`], [`grad`], [`vjp`], [`jvp`], [`hvp`] and [`vmap`] take a model function and return
//! a callable that traces once per list of input types, transforms the program once, and
//! afterwards only evaluates. Parameters are passed by name in a [`Params`](crate::tensor::Params)
//! store (`init` gives their initial values, `init_types` from input types alone); derivatives
//! come back by data input, by parameter name, and by tag, with the conventions that decided
//! them. `value_and_grad(f).argnums(&[0])` differentiates only the chosen data inputs.
//!
//! A new list of input types traces the function again: `trace_count` counts the traces, and
//! each retrace logs one `debug` line (target `catml_core::trace`) through the `log` crate.
//!
//! # Separate arguments
//!
//! Transforms take a function of a slice of values; [`args`] adapts a function of separate
//! arguments, `args(|x: &Value, y: &Value| ...)`, and turns a call with the wrong number of
//! inputs into [`TraceError::Count`].

mod args;
mod call;
mod compare;
mod composites;
mod context;
mod error;
mod grad;
mod grads;
mod hvp;
mod jvp;
mod operators;
mod ops;
mod outputs;
mod random;
mod rows;
mod staged;
mod statistics;
mod tracing;
mod value;
mod vjp;
mod vmap;

pub use args::{args, ArgsFn};
pub use context::{is_tracing, tag_scope, with_tag, TagScope};
pub use error::{CallSite, OperandTypes, TraceError};
pub use grad::{grad, value_and_grad, GradFn, ValueAndGradFn, ValueAndGrads};
pub use grads::Grads;
pub use hvp::{hvp, HvpFn, HvpOutput};
pub use jvp::{jvp, JvpFn, JvpOutput};
pub use outputs::Outputs;
pub use tracing::{arguments, trace, trace_named, Traced};
pub use value::Value;
pub use vjp::{vjp, VjpFn, VjpOutput};
pub use vmap::{vmap, VmapFn};
