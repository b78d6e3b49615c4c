//! Diagrams of models as training objectives.
//!
//! Objects are named spaces with a type; arrows are named models between them (a program with
//! one data input and one output, plus its parameters); a path is a composable sequence of
//! arrows; an equation asks two paths with the same ends to agree; a supervised term ties a
//! path to labelled data. The whole diagram compiles to ONE loss program built with the
//! category operations on programs (`then`, `par`, `copy`) and a few builder nodes for the
//! distances and weights, so a single `ad::vjp` gives every arrow's gradients.
//!
//! # Batch convention
//!
//! An object's type is the type of one example (`f32[8]`). An arrow's program maps a batch of B
//! examples of its source, `f32[B, 8]`, to a batch of its target, row by row; every arrow of a
//! diagram has the same B (the leading dimension of its data input). Each term weighs its rows
//! with a `[B]` weight vector given with the batch: ones give a sum over rows, `mask / count`
//! a mean over the rows that have the term's data, zeros ignore padding.
//!
//! # Example: the triangle objective (docs/examples.md)
//!
//! ```
//! use catml_train::diagram::{triangle_gradients, Arrow};
//! use catml_core::ir::{Builder, InputKind};
//! use catml_core::prim::Ops;
//! use catml_core::tensor::{DType, Params, Tensor, TensorType};
//!
//! // A linear map x ↦ x Wᵀ + b between batches of 2 examples.
//! fn linear(name: &str, src: &str, dst: &str, w: Vec<f64>, n_in: usize, n_out: usize) -> Arrow {
//!     let mut b = Builder::new();
//!     let x = b.input("x", TensorType::new(DType::F64, [2, n_in]), InputKind::Data).unwrap();
//!     let wv = b.input("W", TensorType::new(DType::F64, [n_out, n_in]), InputKind::Param).unwrap();
//!     let bv = b.input("b", TensorType::new(DType::F64, [n_out]), InputKind::Param).unwrap();
//!     let y = b.linear(x, wv, bv).unwrap();
//!     let mut p = Params::new();
//!     p.insert("W", Tensor::f64([n_out, n_in], w).unwrap());
//!     p.insert("b", Tensor::f64([n_out], vec![0.0; n_out]).unwrap());
//!     Arrow::new(name, src, dst, b.finish(&[y]).unwrap(), p).unwrap()
//! }
//! let f = linear("f", "E", "S", vec![2.0], 1, 1);
//! let g = linear("g", "S", "D", vec![3.0], 1, 1);
//! let h = linear("h", "E", "D", vec![5.0], 1, 1);
//! let x = Tensor::f64([2, 1], vec![1.0, 2.0]).unwrap();
//! let (loss, h_grads, _f_grads, _g_grads) = triangle_gradients(&h, &f, &g, &x).unwrap();
//! // r = (5 - 6) x = -x: L = ½ (1 + 4), dL/dW_h = Σ r x = -5.
//! assert_eq!(loss, 2.5);
//! assert_eq!(h_grads.get("W").unwrap().to_f64_vec(), vec![-5.0]);
//! ```

mod arrow;
mod compile;
mod distance;
mod error;
mod graph;
mod path;
mod term;
mod triangle;

pub use arrow::{batched, per_example, Arrow};
pub use compile::{Batch, Compiled, Losses};
pub use error::{DiagramError, PathError};
pub use graph::{arrow_params, Diagram};
pub use path::{Ends, Path};
pub use term::{Distance, Equation, Supervised, Term};
pub use triangle::{triangle_gradients, TriangleGradients};
