//! Pooling kernels: direct loops over (n, c) planes, one plane per task. The innermost loop runs
//! along output columns for one tap, so with stride 1 it is a contiguous, vectorisable add.
//! Generic over ring elements, so f32, f64 and exact rationals share them.

use rayon::prelude::*;

use crate::prim::conv::conv_kernel::ConvGeom;
use crate::tensor::alloc::Elems;
use crate::tensor::Element;

/// For one tap `kw`, calls `f(output column, input column)` over the columns reading input.
#[inline]
fn columns(g: &ConvGeom, kw: usize, mut f: impl FnMut(usize, usize)) {
    let (lo, hi) = g.w.valid_outputs(kw);
    if lo == hi {
        return;
    }
    let start = g.w.source(lo, kw).expect("valid output");
    for j in 0..hi - lo {
        f(lo + j, start + j * g.w.stride);
    }
}

/// y[p, oh, ow] = Σ over the window's input elements (padding adds nothing).
pub fn sum_pool<T: Element>(
    x: &[T],
    g: &ConvGeom,
) -> Result<Elems<T>, crate::tensor::alloc::AllocError> {
    let (ho, wo, hw) = (g.h.out(), g.w.out(), g.pixels_in());
    let mut y = crate::tensor::alloc::filled(g.n * g.c * ho * wo, T::zero())?;
    y.par_chunks_mut(ho * wo)
        .zip(x.par_chunks(hw))
        .for_each(|(yp, xp)| {
            for oh in 0..ho {
                let yr = &mut yp[oh * wo..(oh + 1) * wo];
                for kh in 0..g.h.kernel {
                    let Some(ih) = g.h.source(oh, kh) else {
                        continue;
                    };
                    let xr = &xp[ih * g.w.size..(ih + 1) * g.w.size];
                    for kw in 0..g.w.kernel {
                        columns(g, kw, |ow, iw| yr[ow] = yr[ow].clone() + xr[iw].clone());
                    }
                }
            }
        });
    Ok(y)
}

/// The transpose of [`sum_pool`]: each input element receives the sum of u over the windows
/// that read it.
pub fn sum_pool_transpose<T: Element>(
    u: &[T],
    g: &ConvGeom,
) -> Result<Elems<T>, crate::tensor::alloc::AllocError> {
    let (ho, wo, hw) = (g.h.out(), g.w.out(), g.pixels_in());
    let mut dx = crate::tensor::alloc::filled(g.n * g.c * hw, T::zero())?;
    dx.par_chunks_mut(hw)
        .zip(u.par_chunks(ho * wo))
        .for_each(|(dp, up)| {
            for oh in 0..ho {
                let ur = &up[oh * wo..(oh + 1) * wo];
                for kh in 0..g.h.kernel {
                    let Some(ih) = g.h.source(oh, kh) else {
                        continue;
                    };
                    let dr = &mut dp[ih * g.w.size..(ih + 1) * g.w.size];
                    for kw in 0..g.w.kernel {
                        columns(g, kw, |ow, iw| dr[iw] = dr[iw].clone() + ur[ow].clone());
                    }
                }
            }
        });
    Ok(dx)
}

/// Where each window's maximum sits: for every output, the flat index into x of the first
/// maximal input element in row-major window order (padding never wins), and how many windows
/// attain their maximum more than once (the max-pool convention points).
pub fn argmax<T: Element>(x: &[T], g: &ConvGeom) -> (Vec<usize>, usize) {
    let (ho, wo, hw) = (g.h.out(), g.w.out(), g.pixels_in());
    let mut at = vec![0usize; g.n * g.c * ho * wo];
    let ties: usize = at
        .par_chunks_mut(ho * wo)
        .zip(x.par_chunks(hw))
        .enumerate()
        .map(|(p, (ap, xp))| {
            let mut ties = 0;
            for oh in 0..ho {
                for ow in 0..wo {
                    let mut best: Option<(usize, &T)> = None;
                    let mut count = 0;
                    for kh in 0..g.h.kernel {
                        let Some(ih) = g.h.source(oh, kh) else {
                            continue;
                        };
                        for kw in 0..g.w.kernel {
                            let Some(iw) = g.w.source(ow, kw) else {
                                continue;
                            };
                            let i = ih * g.w.size + iw;
                            let v = &xp[i];
                            match best {
                                Some((_, b)) if v == b => count += 1,
                                Some((_, b)) if !(v.clone() - b.clone()).gt_zero() => {}
                                _ => {
                                    best = Some((i, v));
                                    count = 1;
                                }
                            }
                        }
                    }
                    let (i, _) = best.expect("every max-pool window holds input");
                    ap[oh * wo + ow] = p * hw + i;
                    ties += usize::from(count > 1);
                }
            }
            ties
        })
        .sum();
    (at, ties)
}

/// t read at each window's argmax.
pub fn take<T: Element>(t: &[T], at: &[usize]) -> Vec<T> {
    at.iter().map(|&i| t[i].clone()).collect()
}

/// The transpose of [`take`]: u added into a zero tensor of `len` elements at the argmaxes.
pub fn put<T: Element>(
    u: &[T],
    at: &[usize],
    len: usize,
) -> Result<Elems<T>, crate::tensor::alloc::AllocError> {
    let mut dx = crate::tensor::alloc::filled(len, T::zero())?;
    for (v, &i) in u.iter().zip(at) {
        dx[i] = dx[i].clone() + v.clone();
    }
    Ok(dx)
}
