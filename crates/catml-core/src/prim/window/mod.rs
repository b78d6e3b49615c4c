//! Sliding-window geometry and lowering blocks shared by convolution and pooling.

pub(crate) mod draw;
pub(crate) mod geometry;
pub(crate) mod lower;
