//! An elementwise operation on one block of elements at a time, so that evaluation can run a
//! chain of such nodes over each block in turn while it is in cache (`interp/fuse.rs`,
//! `docs/memory.md`, "Fused elementwise passes").

/// A node's elementwise kernel on blocks: every operand has the result's type, and `out[i]`
/// depends on element `i` of the operands alone, computed exactly as the node's own kernel
/// computes it, so a fused pass gives the node's values bit for bit.
///
/// Each method writes every element of `out` (as long as each operand block) and returns
/// `false` when an operand element lies outside the operation's domain; evaluation then runs
/// the node alone, whose kernel reports it.
pub trait BlockKernel: Sync {
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
