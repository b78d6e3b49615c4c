//! CatML's diagrams of models ([`diagram`]), compiled to one loss program, and the trainer
//! ([`train`]): CSV data, seeded minibatches, checkpoints, metrics, plots and TOML specs.

pub(crate) use catml_core::{ad, interp, ir, prim, tensor, transform};
pub(crate) use catml_nn::optim;

pub mod diagram;
pub mod train;
