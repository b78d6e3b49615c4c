//! Softmax and log-softmax along an axis, masked softmax, and the softmax pullback.

pub(crate) mod forward;
pub(crate) mod masked_softmax;
pub(crate) mod rows;
pub(crate) mod softmax_pullback;
