//! Pooling over 2-D windows: sum, average and max, with their transposes.

pub(crate) mod avg_pool;
pub(crate) mod max_pool;
pub(crate) mod max_pool_lower;
pub(crate) mod pool_kernel;
pub(crate) mod pool_lower;
pub(crate) mod pool_spec;
pub(crate) mod sum_pool;
