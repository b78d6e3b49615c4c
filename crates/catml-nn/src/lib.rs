//! CatML's layers ([`nn`]) and optimisers ([`optim`]), over the core's tracing API.

// The layers are written against the core's modules under their own names.
pub(crate) use catml_core::{interp, ir, prim, tensor, trace};

pub mod nn;
pub mod optim;
