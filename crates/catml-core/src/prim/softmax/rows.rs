//! Row kernels of the softmax family, generic over f32 and f64: softmax and log-softmax of a
//! row or of the columns of a block, and the reductions they need (max, sum, dot) written with
//! independent accumulators so they vectorise, inlined into callers compiled wide
//! (`with_wide_simd`). Exponentials go through `exp_in_place`.

use crate::tensor::fastmath::{exp_in_place, with_wide_simd};
use crate::tensor::Float;

with_wide_simd! {
    /// Softmax (or log-softmax) of each row of `len` entries; `x` and `out` hold whole rows.
    pub(crate) fn softmax_rows<T: Float>(x: &[T], out: &mut [T], len: usize, log: bool) {
        for (xs, ys) in x.chunks_exact(len).zip(out.chunks_exact_mut(len)) {
            softmax_row(xs, ys, log);
        }
    }
}

/// Softmax (or log-softmax) of one row.
#[inline(always)]
pub(crate) fn softmax_row<T: Float>(xs: &[T], ys: &mut [T], log: bool) {
    softmax_row_scaled(xs, ys, T::one(), log);
}

/// Softmax (or log-softmax) of one row times `scale` > 0 (max(c x) = c max(x) for c > 0).
#[inline(always)]
pub(crate) fn softmax_row_scaled<T: Float>(xs: &[T], ys: &mut [T], scale: T, log: bool) {
    let m = max_of(xs) * scale;
    for (y, &x) in ys.iter_mut().zip(xs) {
        *y = x * scale - m;
    }
    normalise_shifted(ys, log);
}

/// [`softmax_row_scaled`] of a row overwritten by its softmax, with the same arithmetic.
/// Returns true when every weight is certainly finite: when the scaled maximum m and the
/// reciprocal r of the sum are, each weight is e^(y - m) r with y - m <= 0, so in [0, r]; a
/// NaN or +inf score makes m or r non-finite.
#[inline(always)]
pub(crate) fn softmax_row_scaled_in_place<T: Float>(ys: &mut [T], scale: T) -> bool {
    let m = max_of(ys) * scale;
    ys.iter_mut().for_each(|y| *y = *y * scale - m);
    let r = exp_normalise(ys);
    m.is_finite() && r.is_finite()
}

/// Softmax (or log-softmax) of a row already shifted by its maximum: e^y / sum e^y.
#[inline(always)]
fn normalise_shifted<T: Float>(ys: &mut [T], log: bool) {
    if log {
        let mut e = ys.to_vec();
        exp_in_place(&mut e);
        let ls = sum_of(&e).ln();
        ys.iter_mut().for_each(|y| *y = *y - ls);
    } else {
        exp_normalise(ys);
    }
}

/// e^y r in place with r = 1 / sum e^y, for a row shifted by its maximum; returns r.
#[inline(always)]
fn exp_normalise<T: Float>(ys: &mut [T]) -> T {
    exp_in_place(ys);
    let r = T::one() / sum_of(ys);
    ys.iter_mut().for_each(|y| *y = *y * r);
    r
}

/// Lanes of the reductions below: independent accumulators the compiler keeps in registers.
const LANES: usize = 8;

/// The largest element of a nonempty slice.
#[inline(always)]
pub(crate) fn max_of<T: Float>(xs: &[T]) -> T {
    let mut acc = [xs[0]; LANES];
    let mut chunks = xs.chunks_exact(LANES);
    for c in &mut chunks {
        for (a, &v) in acc.iter_mut().zip(c) {
            *a = if v > *a { v } else { *a };
        }
    }
    let tail = chunks.remainder().iter().copied().fold(xs[0], T::max);
    acc.iter().copied().fold(tail, T::max)
}

/// The sum of a slice.
#[inline(always)]
pub(crate) fn sum_of<T: Float>(xs: &[T]) -> T {
    dot_of(xs, None)
}

/// sum_i x_i y_i (or sum_i x_i without `y`).
#[inline(always)]
pub(crate) fn dot_of<T: Float>(xs: &[T], ys: Option<&[T]>) -> T {
    let mut acc = [T::zero(); LANES];
    let n = xs.len() / LANES * LANES;
    match ys {
        None => {
            for c in xs[..n].chunks_exact(LANES) {
                for (a, &v) in acc.iter_mut().zip(c) {
                    *a = *a + v;
                }
            }
        }
        Some(ys) => {
            for (c, d) in xs[..n].chunks_exact(LANES).zip(ys[..n].chunks_exact(LANES)) {
                for ((a, &v), &w) in acc.iter_mut().zip(c).zip(d) {
                    *a = *a + v * w;
                }
            }
        }
    }
    let tail = (n..xs.len()).fold(T::zero(), |t, i| t + xs[i] * ys.map_or(T::one(), |y| y[i]));
    acc.iter().copied().fold(tail, |s, a| s + a)
}

/// Softmax along the middle axis of an (outer, len, inner) buffer, `inner` > 1: the columns of
/// one outer block are processed together so the loops run over contiguous memory.
pub(crate) fn softmax_strided<T: Float>(
    x: &[T],
    out: &mut [T],
    len: usize,
    inner: usize,
    log: bool,
) {
    let block = len * inner;
    let mut m = vec![T::zero(); inner];
    let mut s = vec![T::zero(); inner];
    let mut e = vec![T::zero(); block];
    for (xb, yb) in x.chunks_exact(block).zip(out.chunks_exact_mut(block)) {
        m.copy_from_slice(&xb[..inner]);
        for row in xb.chunks_exact(inner).skip(1) {
            for (mi, &v) in m.iter_mut().zip(row) {
                *mi = mi.max(v);
            }
        }
        for (xr, yr) in xb.chunks_exact(inner).zip(yb.chunks_exact_mut(inner)) {
            for i in 0..inner {
                yr[i] = xr[i] - m[i];
            }
        }
        e.copy_from_slice(yb);
        exp_in_place(&mut e);
        s.iter_mut().for_each(|v| *v = T::zero());
        for er in e.chunks_exact(inner) {
            for (si, &v) in s.iter_mut().zip(er) {
                *si = *si + v;
            }
        }
        for (yr, er) in yb.chunks_exact_mut(inner).zip(e.chunks_exact(inner)) {
            for i in 0..inner {
                yr[i] = if log { yr[i] - s[i].ln() } else { er[i] / s[i] };
            }
        }
    }
}
