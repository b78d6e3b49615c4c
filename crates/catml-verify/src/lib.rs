//! CatML's verification bundle ([`verify`]): a random program generator and the families of
//! checks that hold every primitive's rules to each other.

pub(crate) use catml_core::{ad, interp, ir, prim, tensor, transform};

pub mod verify;
