//! What a batching rule is told about one node: which operands carry a batch axis (always
//! their leading axis) and its size.

use super::primitive::Prim;
use crate::tensor::TensorType;

/// The batching context of one node: the primitive being batched, which of its operands lead
/// with a batch axis of `size`, and that size. A rule returns a value whose leading axis is the
/// batch, and whose element `i` is the primitive applied to element `i` of each batched operand
/// and to the unbatched operands as they are.
#[derive(Debug, Clone)]
pub struct BatchCtx {
    pub prim: Prim,
    pub batched: Vec<bool>,
    pub size: usize,
}

impl BatchCtx {
    /// `ty` with the batch axis in front.
    pub fn lead(&self, ty: &TensorType) -> TensorType {
        with_lead(ty, self.size)
    }

    /// Whether operand `k` carries the batch.
    pub fn is_batched(&self, k: usize) -> bool {
        self.batched.get(k).copied().unwrap_or(false)
    }

    /// Whether only the operands at these positions carry the batch.
    pub fn only(&self, positions: &[usize]) -> bool {
        self.batched
            .iter()
            .enumerate()
            .all(|(k, &b)| !b || positions.contains(&k))
    }
}

/// `ty` with a leading axis of `size`.
pub fn with_lead(ty: &TensorType, size: usize) -> TensorType {
    let mut dims = Vec::with_capacity(ty.rank() + 1);
    dims.push(size);
    dims.extend_from_slice(ty.dims());
    TensorType::new(ty.dtype, dims)
}

/// `ty` without its leading axis (`ty` has rank at least 1).
pub fn without_lead(ty: &TensorType) -> TensorType {
    TensorType::new(ty.dtype, ty.dims()[1..].to_vec())
}
