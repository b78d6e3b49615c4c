//! Losses: cross-entropy on logits and mean squared error.

pub(crate) mod cross_entropy;
pub(crate) mod mse;
