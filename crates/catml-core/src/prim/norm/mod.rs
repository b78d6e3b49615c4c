//! Normalisation: layer norm and batch norm.

pub(crate) mod batch_norm;
pub(crate) mod layer_norm;
