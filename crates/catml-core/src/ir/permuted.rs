//! A kernel that reads operands, or writes its result, through an axis permutation in place,
//! so that an executable copies no permute that feeds it or that it feeds
//! (`interp/permutes.rs`, `docs/memory.md`, "Permutes read in place").

use super::KernelError;
use crate::tensor::{Tensor, TensorType};

/// How one run of a [`PermutedKernel`] sees its operands and its result: operand k is
/// `permute(sources[k], operands[k])` where that is `Some` (the source itself where `None`, or
/// past the list's end), and the value returned is `permute(f(operands), result)` where
/// `result` is `Some`.
#[derive(Debug, Clone, Copy)]
pub struct Permutes<'a> {
    pub operands: &'a [Option<&'a [usize]>],
    pub result: Option<&'a [usize]>,
}

impl Permutes<'_> {
    /// Every operand and the result as they are: the node's own kernel.
    pub const NONE: Permutes<'static> = Permutes {
        operands: &[],
        result: None,
    };
}

/// A node's kernel reading permuted operands and writing a permuted result through strides,
/// computing each value exactly as the node's own kernel does, so that the values are the
/// unpermuted plan's bit for bit.
///
/// A primitive with labelled conventions (`Primitive::convention_points`) offers none: an
/// evaluation reporting them reads whole operands.
pub trait PermutedKernel: Sync {
    /// Whether operand `k` of these types may be read as `permute(source, perm)`.
    fn reads(&self, inputs: &[TensorType], k: usize, perm: &[usize]) -> bool;
    /// Whether the result for operands of these types may be written as `permute(result,
    /// perm)`.
    fn writes(&self, inputs: &[TensorType], perm: &[usize]) -> bool;
    /// The value, permuted as `permutes` says; called only where `reads` and `writes` said
    /// yes.
    fn eval_permuted(
        &self,
        sources: &[&Tensor],
        permutes: Permutes<'_>,
    ) -> Result<Tensor, KernelError>;
}
