//! Reductions and normalisations over a chosen set of axes: the reduced axes are moved to the
//! back (a permutation, skipped when they already are), so every slice is one contiguous run.

use crate::ir::TypeError;
use crate::tensor::alloc::{self, AllocError};
use crate::tensor::{kernels, Array, Element, Shape, Strides, TensorType};

/// The reduced axes, sorted; absent means every axis. Rejects repeats, out-of-range axes and
/// (with `nonempty`) an empty list, naming the attribute `key`.
pub(crate) fn check_axes(
    ty: &TensorType,
    axes: Option<&[usize]>,
    key: &str,
    nonempty: bool,
) -> Result<Vec<usize>, TypeError> {
    let rank = ty.rank();
    let mut sorted: Vec<usize> = match axes {
        None => (0..rank).collect(),
        Some(a) => a.to_vec(),
    };
    sorted.sort_unstable();
    if let Some(&bad) = sorted.iter().find(|&&a| a >= rank) {
        return Err(TypeError::attr(
            key,
            format!("axis {bad} is out of range for {ty}"),
        ));
    }
    if let Some(w) = sorted.windows(2).find(|w| w[0] == w[1]) {
        return Err(TypeError::attr(key, format!("axis {} is repeated", w[0])));
    }
    if nonempty && sorted.is_empty() {
        return Err(TypeError::attr(
            key,
            format!("expected at least one axis of {ty}, found none"),
        ));
    }
    Ok(sorted)
}

/// The axes of a rank-`rank` tensor not in `axes`, in order.
/// The axes an `axes` attribute names (all when absent), sorted, for an operand of `rank`;
/// held inline, as reductions evaluate it on every call.
pub(crate) fn sorted_axes(axes: Option<&[usize]>, rank: usize) -> Strides {
    let mut a: Strides = match axes {
        Some(a) => a.iter().copied().collect(),
        None => (0..rank).collect(),
    };
    a.sort_unstable();
    a
}

pub(crate) fn kept(rank: usize, axes: &[usize]) -> Vec<usize> {
    (0..rank).filter(|i| !axes.contains(i)).collect()
}

/// Kept axes first, then the reduced ones (both in order).
fn to_back(rank: usize, axes: &[usize]) -> Vec<usize> {
    let mut perm = kept(rank, axes);
    perm.extend_from_slice(axes);
    perm
}

fn is_identity(perm: &[usize]) -> bool {
    perm.iter().enumerate().all(|(i, &p)| i == p)
}

/// The array with `axes` moved to the back, and the slice length (product of their sizes).
fn reduced_last<T: Element>(a: &Array<T>, axes: &[usize]) -> Result<(Array<T>, usize), AllocError> {
    let perm = to_back(a.dims().len(), axes);
    let m = axes.iter().map(|&i| a.dims()[i]).product();
    if is_identity(&perm) {
        Ok((a.clone(), m))
    } else {
        Ok((kernels::permute(a, &perm)?, m))
    }
}

/// One value per slice: the result has the kept dims.
pub(crate) fn reduce_slices<T: Element>(
    a: &Array<T>,
    axes: &[usize],
    mut f: impl FnMut(&[T]) -> T,
) -> Result<Array<T>, AllocError> {
    let (moved, m) = reduced_last(a, axes)?;
    let out: alloc::Elems<T> = alloc::collect(moved.data().chunks(m).map(&mut f))?;
    let dims: Vec<usize> = kept(a.dims().len(), axes)
        .iter()
        .map(|&i| a.dims()[i])
        .collect();
    Ok(Array::with_elems(Shape::new(dims), out).expect("one value per slice"))
}

/// A slice-to-slice map: `f(input slice, output slice)`; the result has the operand's shape.
pub(crate) fn map_slices<T: Element>(
    a: &Array<T>,
    axes: &[usize],
    mut f: impl FnMut(&[T], &mut [T]),
) -> Result<Array<T>, AllocError> {
    let rank = a.dims().len();
    let perm = to_back(rank, axes);
    let (moved, m) = reduced_last(a, axes)?;
    let mut out = alloc::filled(moved.len(), T::zero())?;
    for (x, y) in moved.data().chunks(m).zip(out.chunks_mut(m)) {
        f(x, y);
    }
    let out = Array::with_elems(moved.shape().clone(), out).expect("same length");
    if is_identity(&perm) {
        return Ok(out);
    }
    let mut inverse = vec![0; rank];
    for (i, &p) in perm.iter().enumerate() {
        inverse[p] = i;
    }
    kernels::permute(&out, &inverse)
}
