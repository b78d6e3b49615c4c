//! Convolution kernels. Floats: im2col + GEMM, one sample per task across threads. With
//! K = (C/G)·kH·kW taps and P = Ho·Wo output pixels, per sample and group g:
//!
//! - forward:      Y_g (O/G × P) = W_g (O/G × K) · col (K × P)          (+ bias)
//! - input grad:   col2im(W_gᵀ (K × O/G) · U_g (O/G × P))
//! - weight grad:  W̄_g (O/G × K) += U_g (O/G × P) · colᵀ (P × K), summed over samples
//!
//! Any ring (exact rationals): direct loops over the same taps, the readable reference.

use rayon::prelude::*;

use crate::prim::window::geometry::Axis;
use crate::tensor::alloc::Elems;
use crate::tensor::kernels::{gemm_into_serial, MatRef};
use crate::tensor::{Element, Float};

/// The sizes of one convolution: x (N, C, H, W), w (O, C/G, kH, kW), y (N, O, Ho, Wo).
/// 1-D convolutions have a trivial H axis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConvGeom {
    pub n: usize,
    pub c: usize,
    pub o: usize,
    pub groups: usize,
    pub h: Axis,
    pub w: Axis,
}

impl ConvGeom {
    pub fn cg(&self) -> usize {
        self.c / self.groups
    }
    pub fn og(&self) -> usize {
        self.o / self.groups
    }
    /// Taps per output: (C/G)·kH·kW.
    pub fn taps(&self) -> usize {
        self.cg() * self.h.kernel * self.w.kernel
    }
    /// Output pixels per channel: Ho·Wo.
    pub fn pixels_out(&self) -> usize {
        self.h.out() * self.w.out()
    }
    /// Input pixels per channel: H·W.
    pub fn pixels_in(&self) -> usize {
        self.h.size * self.w.size
    }
    pub fn x_len(&self) -> usize {
        self.n * self.c * self.pixels_in()
    }
    pub fn w_len(&self) -> usize {
        self.o * self.taps()
    }
    pub fn y_len(&self) -> usize {
        self.n * self.o * self.pixels_out()
    }
    /// Multiply-adds of one application: N·O·P·K.
    pub fn macs(&self) -> u64 {
        (self.n * self.o) as u64 * self.pixels_out() as u64 * self.taps() as u64
    }
}

/// Fills `col` (K × P) with the patches of one sample's group channels `x` ((C/G)·H·W).
fn im2col<T: Float>(x: &[T], g: &ConvGeom, col: &mut [T]) {
    let (ho, wo) = (g.h.out(), g.w.out());
    let (hw, ww) = (g.h.size, g.w.size);
    let p = ho * wo;
    let mut row = 0;
    for c in 0..g.cg() {
        let plane = &x[c * hw * ww..(c + 1) * hw * ww];
        for kh in 0..g.h.kernel {
            for kw in 0..g.w.kernel {
                let dst = &mut col[row * p..(row + 1) * p];
                let (lo, hi) = g.w.valid_outputs(kw);
                for oh in 0..ho {
                    let d = &mut dst[oh * wo..(oh + 1) * wo];
                    let Some(ih) = g.h.source(oh, kh) else {
                        d.fill(T::zero());
                        continue;
                    };
                    d[..lo].fill(T::zero());
                    d[hi..].fill(T::zero());
                    if lo == hi {
                        continue;
                    }
                    let src = &plane[ih * ww..(ih + 1) * ww];
                    let start = g.w.source(lo, kw).expect("valid output");
                    if g.w.stride == 1 {
                        d[lo..hi].copy_from_slice(&src[start..start + (hi - lo)]);
                    } else {
                        for (j, v) in d[lo..hi].iter_mut().enumerate() {
                            *v = src[start + j * g.w.stride];
                        }
                    }
                }
                row += 1;
            }
        }
    }
}

/// Adds the columns of `col` (K × P) back to the input positions they were read from.
fn col2im_add<T: Float>(col: &[T], g: &ConvGeom, dx: &mut [T]) {
    let (ho, wo) = (g.h.out(), g.w.out());
    let (hw, ww) = (g.h.size, g.w.size);
    let p = ho * wo;
    let mut row = 0;
    for c in 0..g.cg() {
        let plane = &mut dx[c * hw * ww..(c + 1) * hw * ww];
        for kh in 0..g.h.kernel {
            for kw in 0..g.w.kernel {
                let src = &col[row * p..(row + 1) * p];
                row += 1;
                let (lo, hi) = g.w.valid_outputs(kw);
                if lo == hi {
                    continue;
                }
                let start = g.w.source(lo, kw).expect("valid output");
                for oh in 0..ho {
                    let Some(ih) = g.h.source(oh, kh) else {
                        continue;
                    };
                    let s = &src[oh * wo + lo..oh * wo + hi];
                    let d = &mut plane[ih * ww..(ih + 1) * ww];
                    if g.w.stride == 1 {
                        for (a, &b) in d[start..start + (hi - lo)].iter_mut().zip(s) {
                            *a = *a + b;
                        }
                    } else {
                        for (j, &b) in s.iter().enumerate() {
                            let a = &mut d[start + j * g.w.stride];
                            *a = *a + b;
                        }
                    }
                }
            }
        }
    }
}

/// y = conv(x, w) (+ bias broadcast over pixels).
pub fn conv_forward<T: Float>(
    x: &[T],
    w: &[T],
    bias: Option<&[T]>,
    g: &ConvGeom,
) -> Result<Elems<T>, crate::tensor::alloc::AllocError> {
    let (k, p, og) = (g.taps(), g.pixels_out(), g.og());
    let x_sample = g.c * g.pixels_in();
    let mut y = crate::tensor::alloc::filled(g.y_len(), T::zero())?;
    y.par_chunks_mut(g.o * p).enumerate().for_each_init(
        || vec![T::zero(); k * p],
        |col, (ni, ys)| {
            for gi in 0..g.groups {
                let xs = &x[ni * x_sample + gi * g.cg() * g.pixels_in()..];
                im2col(xs, g, col);
                let yg = &mut ys[gi * og * p..(gi + 1) * og * p];
                if let Some(b) = bias {
                    for (oi, row) in yg.chunks_mut(p).enumerate() {
                        row.fill(b[gi * og + oi]);
                    }
                }
                let wg = MatRef::new(&w[gi * og * k..(gi + 1) * og * k], og, k);
                gemm_into_serial(yg, wg, MatRef::new(col, k, p), bias.is_some());
            }
        },
    );
    Ok(y)
}

/// x̄ = the transpose of x ↦ conv(x, w), applied to u (a transposed convolution).
pub fn conv_input_grad<T: Float>(
    u: &[T],
    w: &[T],
    g: &ConvGeom,
) -> Result<Elems<T>, crate::tensor::alloc::AllocError> {
    let (k, p, og) = (g.taps(), g.pixels_out(), g.og());
    let mut dx = crate::tensor::alloc::filled(g.x_len(), T::zero())?;
    dx.par_chunks_mut(g.c * g.pixels_in())
        .enumerate()
        .for_each_init(
            || vec![T::zero(); k * p],
            |col, (ni, dxs)| {
                for gi in 0..g.groups {
                    let wg = MatRef::transpose_of(&w[gi * og * k..(gi + 1) * og * k], og, k);
                    let start = (ni * g.o + gi * og) * p;
                    let ug = MatRef::new(&u[start..start + og * p], og, p);
                    gemm_into_serial(col, wg, ug, false);
                    let dxg = &mut dxs[gi * g.cg() * g.pixels_in()..];
                    col2im_add(col, g, dxg);
                }
            },
        );
    Ok(dx)
}

/// w̄ = the transpose of w ↦ conv(x, w), applied to u.
pub fn conv_weight_grad<T: Float>(x: &[T], u: &[T], g: &ConvGeom) -> Vec<T> {
    let (k, p, og) = (g.taps(), g.pixels_out(), g.og());
    let x_sample = g.c * g.pixels_in();
    let per_sample = |(mut dw, mut col): (Vec<T>, Vec<T>), ni: usize| {
        for gi in 0..g.groups {
            im2col(
                &x[ni * x_sample + gi * g.cg() * g.pixels_in()..],
                g,
                &mut col,
            );
            let start = (ni * g.o + gi * og) * p;
            let ug = MatRef::new(&u[start..start + og * p], og, p);
            let dwg = &mut dw[gi * og * k..(gi + 1) * og * k];
            gemm_into_serial(dwg, ug, MatRef::transpose_of(&col, k, p), true);
        }
        (dw, col)
    };
    // The samples are cut into a fixed number of runs, each summed in sample order on one
    // thread, and the runs' sums are added in run order: the result does not depend on the
    // thread count or on which thread took which run.
    let per_run = g.n.div_ceil(WEIGHT_GRAD_RUNS).max(1);
    let partials: Vec<Vec<T>> = (0..g.n.div_ceil(per_run))
        .into_par_iter()
        .map(|r| {
            let scratch = (vec![T::zero(); g.w_len()], vec![T::zero(); k * p]);
            let samples = r * per_run..((r + 1) * per_run).min(g.n);
            samples.fold(scratch, per_sample).0
        })
        .collect();
    let mut partials = partials.into_iter();
    let mut dw = partials
        .next()
        .unwrap_or_else(|| vec![T::zero(); g.w_len()]);
    for part in partials {
        for (x, y) in dw.iter_mut().zip(&part) {
            *x = *x + *y;
        }
    }
    dw
}

/// How many partial sums the weight gradient adds up (fewer with fewer samples): enough runs
/// for every thread of a small machine, few enough copies of the weights.
const WEIGHT_GRAD_RUNS: usize = 8;

/// Calls `f(x index, w index, y index)` for every tap that reads real input.
pub fn for_each_tap(g: &ConvGeom, mut f: impl FnMut(usize, usize, usize)) {
    let (ho, wo) = (g.h.out(), g.w.out());
    for ni in 0..g.n {
        for o in 0..g.o {
            let gi = o / g.og();
            for c in 0..g.cg() {
                let xc = ni * g.c + gi * g.cg() + c;
                for oh in 0..ho {
                    for ow in 0..wo {
                        let yi = ((ni * g.o + o) * ho + oh) * wo + ow;
                        for kh in 0..g.h.kernel {
                            let Some(ih) = g.h.source(oh, kh) else {
                                continue;
                            };
                            for kw in 0..g.w.kernel {
                                let Some(iw) = g.w.source(ow, kw) else {
                                    continue;
                                };
                                let xi = (xc * g.h.size + ih) * g.w.size + iw;
                                let wi = ((o * g.cg() + c) * g.h.kernel + kh) * g.w.kernel + kw;
                                f(xi, wi, yi);
                            }
                        }
                    }
                }
            }
        }
    }
}

/// Direct-loop forward convolution over any ring.
pub fn conv_direct<T: Element>(
    x: &[T],
    w: &[T],
    bias: Option<&[T]>,
    g: &ConvGeom,
) -> Result<Elems<T>, crate::tensor::alloc::AllocError> {
    let p = g.pixels_out();
    let mut y = match bias {
        Some(b) => crate::tensor::alloc::collect((0..g.y_len()).map(|i| b[(i / p) % g.o].clone()))?,
        None => crate::tensor::alloc::filled(g.y_len(), T::zero())?,
    };
    for_each_tap(g, |xi, wi, yi| {
        y[yi] = y[yi].clone() + x[xi].clone() * w[wi].clone();
    });
    Ok(y)
}

/// Direct-loop input gradient over any ring.
pub fn conv_input_grad_direct<T: Element>(
    u: &[T],
    w: &[T],
    g: &ConvGeom,
) -> Result<Elems<T>, crate::tensor::alloc::AllocError> {
    let mut dx = crate::tensor::alloc::filled(g.x_len(), T::zero())?;
    for_each_tap(g, |xi, wi, yi| {
        dx[xi] = dx[xi].clone() + u[yi].clone() * w[wi].clone();
    });
    Ok(dx)
}

/// Direct-loop weight gradient over any ring.
pub fn conv_weight_grad_direct<T: Element>(
    x: &[T],
    u: &[T],
    g: &ConvGeom,
) -> Result<Elems<T>, crate::tensor::alloc::AllocError> {
    let mut dw = crate::tensor::alloc::filled(g.w_len(), T::zero())?;
    for_each_tap(g, |xi, wi, yi| {
        dw[wi] = dw[wi].clone() + x[xi].clone() * u[yi].clone();
    });
    Ok(dw)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn geom() -> ConvGeom {
        let axis = |size, kernel, stride, lo, hi, dilation| Axis {
            size,
            kernel,
            stride,
            lo,
            hi,
            dilation,
        };
        ConvGeom {
            n: 2,
            c: 4,
            o: 6,
            groups: 2,
            h: axis(5, 2, 2, 1, 0, 2),
            w: axis(6, 3, 1, 2, 1, 1),
        }
    }

    fn data(len: usize, seed: usize) -> Vec<f64> {
        (0..len)
            .map(|i| (((i * 7 + seed * 13) % 17) as f64) - 8.0)
            .collect()
    }

    #[test]
    fn gemm_kernels_match_direct_loops() {
        let g = geom();
        let (x, w, b) = (data(g.x_len(), 1), data(g.w_len(), 2), data(g.o, 3));
        let u = data(g.y_len(), 4);
        // Small integers: every sum is exact, so the two orders agree exactly.
        assert_eq!(
            conv_forward(&x, &w, Some(&b), &g),
            conv_direct(&x, &w, Some(&b), &g)
        );
        assert_eq!(
            conv_input_grad(&u, &w, &g),
            conv_input_grad_direct(&u, &w, &g)
        );
        assert_eq!(
            Ok(conv_weight_grad(&x, &u, &g)),
            conv_weight_grad_direct(&x, &u, &g).map(Elems::into_vec)
        );
    }

    #[test]
    fn the_weight_gradient_has_the_same_bits_on_any_number_of_threads() {
        let g = ConvGeom { n: 29, ..geom() };
        // Values whose sums round, so that another order of the samples would show.
        let noisy = |len: usize, seed: usize| -> Vec<f32> {
            (0..len)
                .map(|i| ((i * 7919 + seed * 104_729) % 1013) as f32 / 97.0 - 5.1)
                .collect()
        };
        let (x, u) = (noisy(g.x_len(), 1), noisy(g.y_len(), 2));
        let on = |threads: usize| {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            pool.install(|| conv_weight_grad(&x, &u, &g))
        };
        let one = on(1);
        for threads in [2, 3, 5] {
            for _ in 0..5 {
                assert_eq!(on(threads), one, "{threads} threads");
            }
        }
    }
}
