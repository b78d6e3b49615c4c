//! An elementwise operation on one block of elements at a time, so that evaluation can run a
//! chain of such nodes over each block in turn while it is in cache (`interp/fuse.rs`,
//! `docs/memory.md`, "Fused elementwise passes").

use crate::tensor::TensorType;

/// How a fused pass reads a node's operands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reads {
    /// Each operand's block at the result block's place: every operand has the result's type.
    Blocks,
    /// The node copies its one operand, repeated: result element `f` is operand element
    /// `(f / inner) % len` (a broadcast). The pass writes the block itself.
    Repeats { len: usize, inner: usize },
}

/// A node's elementwise kernel on blocks: `out[i]` depends on element `i` of the operand
/// blocks alone, computed exactly as the node's own kernel computes it, so a fused pass gives
/// the node's values bit for bit.
///
/// Each block method writes every element of `out` (as long as each operand block) and
/// returns `false` when an operand element lies outside the operation's domain; evaluation
/// then runs the node alone, whose kernel reports it.
pub trait BlockKernel: Sync {
    /// How a pass reads operands of these types for a result of type `output`; `None`: the
    /// node cannot join a pass. By default, blocks where every operand has the result's type.
    fn reads(&self, inputs: &[TensorType], output: &TensorType) -> Option<Reads> {
        inputs.iter().all(|t| t == output).then_some(Reads::Blocks)
    }

    fn block_f32(&self, x: &[&[f32]], out: &mut [f32]) -> bool;
    fn block_f64(&self, x: &[&[f64]], out: &mut [f64]) -> bool;

    /// How many elements of these operand blocks sit where a labelled convention decides the
    /// derivative, as `Primitive::convention_points` counts them over whole operands.
    fn conventions_f32(&self, _x: &[&[f32]]) -> usize {
        0
    }
    fn conventions_f64(&self, _x: &[&[f64]]) -> usize {
        0
    }
}
