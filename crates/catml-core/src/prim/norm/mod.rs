//! Normalisation: layer norm.

pub(crate) mod layer_norm;
