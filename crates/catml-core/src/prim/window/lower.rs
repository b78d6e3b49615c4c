//! Building blocks for lowering windowed operations into the core fragment. Every fixed index
//! selection (padding, patches, strides, dilation, and the transposed selections) is one
//! `gather` from the operand with a zero slice `concat`enated at the end of the axis: selected
//! positions that fall in the padding read that zero.

use crate::ir::{Builder, TypeError, Var};
use crate::prim::Ops;

/// Entry j (0 ≤ j < len) along `axis` is x[src(j)], or 0 where `src(j)` is `None`.
pub fn select(
    b: &mut Builder,
    x: Var,
    axis: usize,
    len: usize,
    src: impl Fn(usize) -> Option<usize>,
) -> Result<Var, TypeError> {
    let ty = b.ty(x).clone();
    let n = ty.dims()[axis];
    let picks: Vec<Option<usize>> = (0..len).map(src).collect();
    if len == n && picks.iter().enumerate().all(|(j, p)| *p == Some(j)) {
        return Ok(x);
    }
    let source = if picks.contains(&None) {
        let mut dims = ty.dims().to_vec();
        dims[axis] = 1;
        let zero = b.zeros(&crate::tensor::TensorType::new(ty.dtype, dims))?;
        b.concat(&[x, zero], axis)?
    } else {
        x
    };
    let indices = picks.into_iter().map(|p| p.unwrap_or(n)).collect();
    b.gather(source, axis, indices)
}

/// How one spatial axis of a window operation reads its operand: `out` positions times
/// `kernel` taps, and for each (position, tap) the operand index or `None` (a zero).
pub struct Reads<F: Fn(usize, usize) -> Option<usize>> {
    pub out: usize,
    pub kernel: usize,
    pub src: F,
}

/// The windows of x (N, C, H, W) as (N, C, Ho, kH, Wo, kW).
pub fn patches<F, G>(b: &mut Builder, x: Var, h: Reads<F>, w: Reads<G>) -> Result<Var, TypeError>
where
    F: Fn(usize, usize) -> Option<usize>,
    G: Fn(usize, usize) -> Option<usize>,
{
    let d = b.ty(x).dims().to_vec();
    let rows = select(b, x, 2, h.out * h.kernel, |j| {
        (h.src)(j / h.kernel, j % h.kernel)
    })?;
    let both = select(b, rows, 3, w.out * w.kernel, |j| {
        (w.src)(j / w.kernel, j % w.kernel)
    })?;
    b.reshape(both, [d[0], d[1], h.out, h.kernel, w.out, w.kernel])
}

/// The contiguous range [start, start + len) of `axis`, or x itself if that is all of it.
pub fn slice(
    b: &mut Builder,
    x: Var,
    axis: usize,
    start: usize,
    len: usize,
) -> Result<Var, TypeError> {
    if start == 0 && b.ty(x).dims()[axis] == len {
        return Ok(x);
    }
    b.gather(x, axis, (start..start + len).collect())
}

/// x viewed with a unit H axis inserted at position 2 when the operation is 1-D.
pub fn as_2d(b: &mut Builder, x: Var, rank: usize) -> Result<Var, TypeError> {
    if rank == 2 {
        return Ok(x);
    }
    let d = b.ty(x).dims().to_vec();
    b.reshape(x, [d[0], d[1], 1, d[2]])
}

/// The inverse of [`as_2d`].
pub fn from_2d(b: &mut Builder, x: Var, rank: usize) -> Result<Var, TypeError> {
    if rank == 2 {
        return Ok(x);
    }
    let d = b.ty(x).dims().to_vec();
    b.reshape(x, [d[0], d[1], d[3]])
}
