//! Convolutions (1-D and 2-D, strides, padding, dilation, groups) and their gradients.

pub(crate) mod conv_grad;
pub(crate) mod conv_kernel;
pub(crate) mod conv_lower;
pub(crate) mod conv_spec;
pub(crate) mod forward;
