//! Reductions over axes: sums, means, maxima and their positions.

pub(crate) mod argmax;
pub(crate) mod mean;
pub(crate) mod reduce_max;
pub(crate) mod slices;
pub(crate) mod sum;
