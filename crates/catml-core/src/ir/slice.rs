//! A node's kernel on whole values held as plain slices, writing its value into a slice the
//! caller gives: how an executable runs a small program in one buffer (`interp/arena.rs`,
//! `docs/memory.md`, "Small programs").

use crate::tensor::TensorType;

/// One operand of a [`SliceKernel`]: its elements in row-major order, and its dims.
#[derive(Debug, Clone, Copy)]
pub struct SliceOperand<'a, T> {
    pub data: &'a [T],
    pub dims: &'a [usize],
}

/// A node's kernel writing its whole value into a slice: `out` receives exactly the values the
/// node's own kernel (`Primitive::eval`) computes, bit for bit, so that a program run this way
/// gives the interpreter's results.
///
/// The kernel is asked only for operands of types it [`serves`](Self::serves), and for an
/// `out` as long as the result; it writes every element of `out`.
pub trait SliceKernel: Sync {
    /// Whether it serves operands of these types for a result of type `output` (asked once,
    /// when the program is planned).
    fn serves(&self, inputs: &[TensorType], output: &TensorType) -> bool;

    fn slice_f32(&self, x: &[SliceOperand<'_, f32>], out: &mut [f32]);
    fn slice_f64(&self, x: &[SliceOperand<'_, f64>], out: &mut [f64]);
}
