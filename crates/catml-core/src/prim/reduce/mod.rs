//! Reductions over axes: sums and maxima.

pub(crate) mod reduce_max;
pub(crate) mod slices;
pub(crate) mod sum;
