//! Optimisers over named parameters: SGD (momentum, Nesterov, weight decay), Adam and AdamW
//! with bias correction, clipping by global norm, and learning-rate schedules.
//!
//! Everything is addressed by name: parameters and gradients are [`Params`] stores with the same
//! keys, and the optimiser's own state (step counter, momentum buffers, moment estimates) is a
//! [`Params`] too, so it checkpoints with the same safetensors code as the weights.
//!
//! Arithmetic is done in f64 per element and rounded once to the parameter's dtype (f32 or f64);
//! state tensors have their parameter's dtype.
//!
//! ```
//! use catml_nn::optim::{Optimiser, Sgd};
//! use catml_core::tensor::{Params, Tensor};
//!
//! let mut p = Params::new();
//! p.insert("w", Tensor::f64([2], vec![1.0, -2.0]).unwrap());
//! let mut g = Params::new();
//! g.insert("w", Tensor::f64([2], vec![0.5, 0.5]).unwrap());
//! let mut opt = Optimiser::new(Sgd::new(0.1)).unwrap();
//! opt.step(&mut p, &g).unwrap();
//! assert_eq!(p.get("w").unwrap().to_f64_vec(), vec![0.95, -2.05]);
//! ```
//!
//! [`Params`]: crate::tensor::Params

mod adam;
mod clip;
mod error;
mod optimiser;
mod schedule;
mod sgd;
mod update;

pub use adam::Adam;
pub use clip::{clip_by_global_norm, global_norm};
pub use error::OptimError;
pub use optimiser::{Method, Optimiser, StepReport};
pub use schedule::Schedule;
pub use sgd::Sgd;
