//! Products: matmul, batched matmul and the affine map `linear`.

pub(crate) mod batch_matmul;
pub(crate) mod linear;
pub(crate) mod matmul;
