//! CatML traces a model once into a typed SSA tensor program and then gives that one program
//! many meanings: numbers, shapes, parameter counts, costs, exact rationals, and derivatives
//! that are themselves programs.
//!
//! # Trace, print, eval, shape, grad
//!
//! ```
//! use catml::interp;
//! use catml::ir::listing;
//! use catml::nn::{linear, seeded, ChaCha8Rng};
//! use catml::tensor::{DType, Tensor, TensorType};
//! use catml::trace::{trace, value_and_grad, Value};
//!
//! // The tiny MLP (docs/examples.md), written once: eager on tensors, recording inside a trace.
//! fn model(x: &Value, rng: &mut ChaCha8Rng) -> Value {
//!     let h = linear(x, 4, rng, "lin1").relu();
//!     linear(&h, 1, rng, "lin2").sigmoid()
//! }
//!
//! // Trace: input types are all it needs. Parameters start from seeded initialisers.
//! let x_type = TensorType::new(DType::F64, [2]);
//! let traced = trace(&[x_type], |x| model(&x[0], &mut seeded(0)))?;
//! // Print: four instructions, `linear` tagged lin1, relu, `linear` tagged lin2, sigmoid.
//! println!("{}", listing::print(&traced.program));
//! assert_eq!(traced.program.n_nodes(), 4);
//! // Eval: numbers, here with the initial parameters.
//! let x = Tensor::f64([2], vec![0.5, -1.0])?;
//! let y = traced.eval(std::slice::from_ref(&x))?;
//! // Shape: the same program read by the type rules alone, without data.
//! let p = &traced.program;
//! assert_eq!(interp::shape(p, &p.input_types())?, vec![y[0].ty()]);
//! // Grad: the VJP program, made once per input types, evaluated per call.
//! let mut f = value_and_grad(|x: &[Value]| model(&x[0], &mut seeded(0)));
//! let r = f.call(&traced.params, &[x])?;
//! assert_eq!(r.value, y[0]);
//! assert_eq!(r.grads.by_tag["lin1"].numel(), 12); // lin1.W (4, 2) and lin1.b (4)
//! assert_eq!(r.grads.by_tag["lin2"].numel(), 5);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Trace once, interpret many times
//!
//! The one decision everything else follows from: a model becomes data (an
//! [`ir::Program`]) before anything is computed from it. Each meaning is then an interpreter,
//! one walk over the node list asking each primitive for its rule ([`interp::eval`],
//! [`interp::shape`], [`interp::params`], [`interp::cost`], [`interp::eval_rational`]), and
//! each derivative is a program transform ([`ad::jvp`], [`ad::vjp`]) whose result can be
//! printed, evaluated, pictured ([`ir::dot`]) and differentiated again. A new analysis adds an
//! interpreter, not a second representation of the model; a new primitive adds its rules in
//! one file, and every interpreter and transform picks them up. Agreement between meanings is
//! checkable: `shape(eval(p, x)) == shape(p, shape(x))`.
//!
//! The price is the usual one of tracing: a trace records what ran, so a branch on a tensor's
//! values is taken once, at trace time, and the program is specialised to its input types. The
//! function transforms in [`trace`] therefore cache one program per list of input types and
//! trace again on new ones. Outside a trace the same model code runs eagerly, with the same
//! type, domain and non-finite checks, for debugging.
//!
//! # Parts
//!
//! [`tensor`] (dtypes, shapes, buffers, the parameter store) < [`ir`] (programs, builder,
//! listing, JSON, DOT) < [`prim`] (each primitive's rules) < [`interp`] and [`ad`] < [`trace`]
//! (the user-facing API) < [`nn`] (layers and initialisers) and [`optim`] (optimisers) <
//! [`diagram`] (diagrams of models compiled to one loss program) < [`train`] (data, the training
//! loop, checkpoints, metrics, TOML specs) and [`verify`] (the verification bundle). Nothing
//! below [`trace`] knows that tracing exists. [`onnx`] reads ONNX models as programs and writes
//! programs, and their derivative programs, as ONNX models.
//!
//! # Crates
//!
//! This crate gathers the workspace under one name. A user who needs only part of it depends on
//! that part: `catml-core` (tensor, ir, prim, interp, ad, transform, trace: no training, data or
//! plotting dependencies), `catml-nn` (nn, optim), `catml-train` (diagram, train),
//! `catml-verify` (verify) and `catml-onnx` (onnx).

pub use catml_core::{ad, interp, ir, prim, tensor, trace, transform};
pub use catml_nn::{nn, optim};
/// ONNX import ([`onnx::import`], [`onnx::read_file`]) and export ([`onnx::export`],
/// [`onnx::export_vjp`], [`onnx::export_jvp`], [`onnx::write_model`]).
pub use catml_onnx as onnx;
pub use catml_train::{diagram, train};
pub use catml_verify::verify;

/// The tutorial (`docs/tutorial.md`; the crate's `tutorial.md` links to it, so the package
/// carries it): its Rust blocks run as this item's doctests.
#[doc = include_str!("../tutorial.md")]
pub mod tutorial {}
