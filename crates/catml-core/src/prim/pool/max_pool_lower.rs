//! Max pooling and its two helpers lowered to gathers, constants, add, mul, and the library's
//! labelled nonsmooth pair relu/step (max is not in the smooth core fragment).
//!
//! For each window, fold over its taps k in row-major order, starting from the first tap that
//! reads input:
//!
//!   take_k = mask_k · step(x_k − m),   m ← take_k · x_k + (1 − take_k) · m
//!
//! where mask_k is the constant 0/1 pattern of windows whose tap k reads input (padding never
//! takes part). step(0) = 0 means a tap equal to the running maximum does not take over, so the
//! fold and its derivative go to the first maximal element: the same tie rule as the kernel.
//! x_k − m > 0 exactly when x_k > m (IEEE subtraction of distinct values is never zero), and a
//! blend by a 0/1 weight is exact, so the fold equals the kernel bitwise for finite inputs.
//!
//! The helpers reuse take_k:
//! - select(x, t):  s ← take_k · t_k + (1 − take_k) · s, from s = t at the first tap;
//! - scatter(x, u): the winner of a window is the last tap that took over (or the first tap if
//!   none did): win_k = take'_k · Π_{j>k} (1 − take'_j), with take'_k = take_k + first_k; then
//!   x̄ = Σ_k spread_k(win_k · u), spread_k putting each window's value back at its tap-k input.

use super::pool_spec::Pool2dAttrs;
use crate::ir::{Builder, TypeError, Var};
use crate::prim::conv::conv_kernel::ConvGeom;
use crate::prim::window::lower::select as gather_axis;
use crate::prim::Ops;
use crate::tensor::{Tensor, TensorType};

/// The taps (kh, kw) that read input in at least one window, in row-major order.
fn live_taps(g: &ConvGeom) -> Vec<(usize, usize)> {
    let mut taps = Vec::new();
    for kh in 0..g.h.kernel {
        for kw in 0..g.w.kernel {
            let (h, w) = (g.h.valid_outputs(kh), g.w.valid_outputs(kw));
            if h.0 < h.1 && w.0 < w.1 {
                taps.push((kh, kw));
            }
        }
    }
    taps
}

/// Whether tap (kh, kw) of window (oh, ow) reads input.
fn reads(g: &ConvGeom, (kh, kw): (usize, usize), oh: usize, ow: usize) -> bool {
    g.h.source(oh, kh).is_some() && g.w.source(ow, kw).is_some()
}

/// Whether (kh, kw) is the first tap of window (oh, ow) that reads input.
fn is_first(g: &ConvGeom, (kh, kw): (usize, usize), oh: usize, ow: usize) -> bool {
    let first_h = (0..g.h.kernel).find(|&k| g.h.source(oh, k).is_some());
    let first_w = (0..g.w.kernel).find(|&k| g.w.source(ow, k).is_some());
    first_h == Some(kh) && first_w == Some(kw)
}

/// The state of one lowering: the pooled input's geometry and type.
struct Lowering<'a> {
    b: &'a mut Builder,
    g: ConvGeom,
    ty: TensorType,
}

impl<'a> Lowering<'a> {
    fn new(b: &'a mut Builder, attrs: &Pool2dAttrs, x: Var) -> Lowering<'a> {
        let ty = b.ty(x).clone();
        let g = attrs.geom(ty.dims());
        Lowering { b, g, ty }
    }

    /// v at tap (kh, kw) of every window, zero where the tap is padding: (N, C, Ho, Wo).
    fn tap(&mut self, v: Var, (kh, kw): (usize, usize)) -> Result<Var, TypeError> {
        let (h, w) = (self.g.h, self.g.w);
        let rows = gather_axis(self.b, v, 2, h.out(), |o| h.source(o, kh))?;
        gather_axis(self.b, rows, 3, w.out(), |o| w.source(o, kw))
    }

    /// The transpose of [`tap`](Self::tap): each window's value back at its tap-k input.
    fn spread(&mut self, v: Var, (kh, kw): (usize, usize)) -> Result<Var, TypeError> {
        let (h, w) = (self.g.h, self.g.w);
        let rows = gather_axis(self.b, v, 2, h.size, |i| h.target(i, kh))?;
        gather_axis(self.b, rows, 3, w.size, |i| w.target(i, kw))
    }

    /// A constant 0/1 window pattern broadcast to (N, C, Ho, Wo), or `None` if it is all ones.
    fn pattern(&mut self, f: impl Fn(usize, usize) -> bool) -> Result<Option<Var>, TypeError> {
        let (ho, wo) = (self.g.h.out(), self.g.w.out());
        let values: Vec<f64> = (0..ho * wo)
            .map(|i| f64::from(u8::from(f(i / wo, i % wo))))
            .collect();
        if values.iter().all(|&v| v == 1.0) {
            return Ok(None);
        }
        let t = Tensor::from_f64s(self.ty.dtype, [ho, wo], values).expect("ho * wo values");
        let c = self.b.constant(t)?;
        let shape = [self.g.n, self.g.c, ho, wo];
        Ok(Some(self.b.broadcast(c, shape, vec![2, 3])?))
    }

    /// v times the pattern of windows whose tap reads input.
    fn masked(&mut self, v: Var, tap: (usize, usize)) -> Result<Var, TypeError> {
        let g = self.g;
        match self.pattern(|oh, ow| reads(&g, tap, oh, ow))? {
            Some(mask) => self.b.mul(v, mask),
            None => Ok(v),
        }
    }

    /// The constant pattern of windows whose first input-reading tap is `tap` (`None`: all).
    fn first(&mut self, tap: (usize, usize)) -> Result<Option<Option<Var>>, TypeError> {
        let g = self.g;
        let (ho, wo) = (g.h.out(), g.w.out());
        let any = (0..ho * wo).any(|i| is_first(&g, tap, i / wo, i % wo));
        if !any {
            return Ok(None);
        }
        Ok(Some(self.pattern(|oh, ow| is_first(&g, tap, oh, ow))?))
    }

    /// Σ_k first_k · vals_k: each window's value at its first input-reading tap.
    fn at_first(&mut self, taps: &[(usize, usize)], vals: &[Var]) -> Result<Var, TypeError> {
        let mut acc: Option<Var> = None;
        for (&tap, &v) in taps.iter().zip(vals) {
            let term = match self.first(tap)? {
                None => continue,
                Some(None) => v,
                Some(Some(p)) => self.b.mul(v, p)?,
            };
            acc = Some(match acc {
                None => term,
                Some(a) => self.b.add(a, term)?,
            });
        }
        Ok(acc.expect("every window has a first tap"))
    }

    /// a − c, as a + (−1)·c.
    fn minus(&mut self, a: Var, c: Var) -> Result<Var, TypeError> {
        let neg = self.b.scale(c, -1.0)?;
        self.b.add(a, neg)
    }

    /// The fold: returns the final maximum and each tap's take-over indicator take_k.
    fn fold(
        &mut self,
        taps: &[(usize, usize)],
        xs: &[Var],
        want_takes: bool,
    ) -> Result<(Var, Vec<Var>), TypeError> {
        let mut m = self.at_first(taps, xs)?;
        let mut takes = Vec::new();
        for (&tap, &xk) in taps.iter().zip(xs) {
            let d = self.minus(xk, m)?;
            let s = self.b.heaviside(d)?;
            let take = self.masked(s, tap)?;
            m = self.blend(take, xk, m)?;
            if want_takes {
                takes.push(take);
            }
        }
        Ok((m, takes))
    }

    /// take · a + (1 − take) · c for a 0/1 `take`: exactly a or c, never a rounded mix.
    fn blend(&mut self, take: Var, a: Var, c: Var) -> Result<Var, TypeError> {
        let one = self.b.full_like(1.0, take)?;
        let keep = self.minus(one, take)?;
        let a = self.b.mul(take, a)?;
        let c = self.b.mul(keep, c)?;
        self.b.add(a, c)
    }
}

/// max_pool2d(x).
pub fn max_pool(b: &mut Builder, attrs: &Pool2dAttrs, x: Var) -> Result<Var, TypeError> {
    let mut l = Lowering::new(b, attrs, x);
    let taps = live_taps(&l.g);
    let xs = taps
        .iter()
        .map(|&t| l.tap(x, t))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(l.fold(&taps, &xs, false)?.0)
}

/// max_pool2d_select(x, t).
pub fn select(b: &mut Builder, attrs: &Pool2dAttrs, x: Var, t: Var) -> Result<Var, TypeError> {
    let mut l = Lowering::new(b, attrs, x);
    let taps = live_taps(&l.g);
    let mut xs = Vec::with_capacity(taps.len());
    let mut ts = Vec::with_capacity(taps.len());
    for &tap in &taps {
        xs.push(l.tap(x, tap)?);
        ts.push(l.tap(t, tap)?);
    }
    let (_, takes) = l.fold(&taps, &xs, true)?;
    let mut s = l.at_first(&taps, &ts)?;
    for (take, tk) in takes.into_iter().zip(ts) {
        s = l.blend(take, tk, s)?;
    }
    Ok(s)
}

/// max_pool2d_scatter(x, u).
pub fn scatter(b: &mut Builder, attrs: &Pool2dAttrs, x: Var, u: Var) -> Result<Var, TypeError> {
    let mut l = Lowering::new(b, attrs, x);
    let taps = live_taps(&l.g);
    let xs = taps
        .iter()
        .map(|&t| l.tap(x, t))
        .collect::<Result<Vec<_>, _>>()?;
    let (_, takes) = l.fold(&taps, &xs, true)?;
    // take'_k = take_k + first_k (take_k is 0 at the first tap: x_k − m = 0 there).
    let mut took = Vec::with_capacity(taps.len());
    for (&tap, take) in taps.iter().zip(takes) {
        took.push(match l.first(tap)? {
            None => take,
            Some(None) => l.b.full_like(1.0, take)?,
            Some(Some(p)) => l.b.add(take, p)?,
        });
    }
    let mut rest: Option<Var> = None; // Π_{j>k} (1 − take'_j); None means all ones
    let mut dx: Option<Var> = None;
    for (&tap, &tk) in taps.iter().zip(&took).rev() {
        let win = match rest {
            None => tk,
            Some(r) => l.b.mul(tk, r)?,
        };
        let one = l.b.full_like(1.0, tk)?;
        let not_taken = l.minus(one, tk)?;
        rest = Some(match rest {
            None => not_taken,
            Some(r) => l.b.mul(r, not_taken)?,
        });
        let contribution = l.b.mul(win, u)?;
        let back = l.spread(contribution, tap)?;
        dx = Some(match dx {
            None => back,
            Some(a) => l.b.add(a, back)?,
        });
    }
    Ok(dx.expect("every window has a tap"))
}
