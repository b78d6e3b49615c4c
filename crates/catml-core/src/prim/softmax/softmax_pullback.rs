//! softmax_pullback {"axis", "scale"} (y, v) -> c y (v - s), s = sum_axis(y v) broadcast back:
//! the derivative of y = softmax(c x) applied to v. The Jacobian c (diag(y) - y y^T) is
//! symmetric, so this one map is both the tangent (v = dx) and the cotangent (v = ȳ) rule of
//! softmax, masked_softmax and sdpa; fusing it saves four passes over the scores.
//!
//! Its own rules (it is linear in v, quadratic in y): for f(y, v) = c (y v - y s),
//! - tangent: f(y, dv) + c (dy (v - s) - y sum_axis(dy v));
//! - cotangent: v̄ = f(y, u) (symmetric in v), ȳ = c (u (v - s) - v sum_axis(u y)).

use std::mem::MaybeUninit;
use std::sync::Arc;

use rayon::prelude::*;

use super::forward::expand;
use super::rows::dot_of;
use crate::ir::budget;
use crate::ir::{
    AttrReader, Attrs, Builder, KernelError, Prim, Primitive, Registry, RuleError, TypeError, Var,
};
use crate::ir::{Draw, DrawError, Drawing, Drawn, Interval};
use crate::prim::dispatch::{eval_float, same_float_pair, FloatKernel};
use crate::prim::Ops;
use crate::tensor::fastmath::with_wide_simd;
use crate::tensor::kernels::{self, split_at_axis};
use crate::tensor::{alloc, rational_from_f64, Array, Element, Float, RArray, Tensor, TensorType};

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SoftmaxPullback {
    pub axis: usize,
    pub scale: f64,
}

/// Below this many elements the kernel runs on one thread.
const PARALLEL_MIN: usize = 1 << 16;

with_wide_simd! {
    /// One (len, inner) block: out = c y (v - sum over the block's rows of y v), written into
    /// memory not yet initialised (the result is never zeroed first).
    fn block<T: Float>(
        y: &[T],
        v: &[T],
        out: &mut [MaybeUninit<T>],
        inner: usize,
        c: T,
    ) {
        if inner == 1 {
            let s = dot_of(y, Some(v));
            for ((o, &a), &b) in out.iter_mut().zip(y).zip(v) {
                o.write(c * a * (b - s));
            }
            return;
        }
        let mut s = vec![T::zero(); inner];
        for (yr, vr) in y.chunks_exact(inner).zip(v.chunks_exact(inner)) {
            for ((t, &a), &b) in s.iter_mut().zip(yr).zip(vr) {
                *t = *t + a * b;
            }
        }
        for ((yr, vr), or) in y
            .chunks_exact(inner)
            .zip(v.chunks_exact(inner))
            .zip(out.chunks_exact_mut(inner))
        {
            for i in 0..inner {
                or[i].write(c * yr[i] * (vr[i] - s[i]));
            }
        }
    }
}

impl FloatKernel for SoftmaxPullback {
    fn float<T: Float>(&self, x: &[&Array<T>]) -> Result<Array<T>, KernelError> {
        let (_, len, inner) = split_at_axis(x[0].dims(), self.axis);
        let c = T::from_f64(self.scale);
        let (y, v) = (x[0].data(), x[1].data());
        let n = len * inner;
        let mut out: alloc::Elems<T> = alloc::with_capacity(y.len())?;
        let spare = &mut out.spare_capacity_mut()[..y.len()];
        // Each block is counted right after it is written, when evaluation asks.
        kernels::counting(|found| {
            let write = |o: &mut [MaybeUninit<T>], a: &[T], b: &[T]| {
                block(a, b, o, inner, c);
                // SAFETY: `block` wrote every element of `o`.
                kernels::tally(found, unsafe { alloc::written(o) });
            };
            if y.len() >= PARALLEL_MIN {
                spare
                    .par_chunks_mut(n)
                    .zip(y.par_chunks(n).zip(v.par_chunks(n)))
                    .for_each(|(o, (a, b))| write(o, a, b));
            } else {
                for ((o, a), b) in spare.chunks_mut(n).zip(y.chunks(n)).zip(v.chunks(n)) {
                    write(o, a, b);
                }
            }
        });
        // SAFETY: the blocks cover the first y.len() elements, and `block` writes each one.
        unsafe { out.set_len(y.len()) };
        Ok(Array::with_elems(x[0].shape().clone(), out).expect("same shape"))
    }
}

/// The same map over any ring, one (outer, inner) line along the axis at a time (the exact
/// evaluation; the float kernel above is this with blocking and threads).
fn exact<T: Element>(
    y: &Array<T>,
    v: &Array<T>,
    axis: usize,
    c: T,
) -> Result<Array<T>, alloc::AllocError> {
    let (outer, len, inner) = split_at_axis(y.dims(), axis);
    let (yd, vd) = (y.data(), v.data());
    let mut out = alloc::filled(yd.len(), T::zero())?;
    for o in 0..outer {
        for i in 0..inner {
            let at = |j: usize| (o * len + j) * inner + i;
            let s = (0..len).fold(T::zero(), |s, j| s + yd[at(j)].clone() * vd[at(j)].clone());
            for j in 0..len {
                out[at(j)] = c.clone() * yd[at(j)].clone() * (vd[at(j)].clone() - s.clone());
            }
        }
    }
    Ok(Array::with_elems(y.shape().clone(), out).expect("same shape"))
}

/// sum_axis(a b), broadcast back.
fn row_dot(b: &mut Builder, x: Var, y: Var, axis: usize) -> Result<Var, TypeError> {
    let ty = b.ty(x).clone();
    let xy = b.mul(x, y)?;
    let s = b.sum(xy, Some(vec![axis]))?;
    expand(b, s, &ty, axis)
}

/// c w (unchanged when c = 1).
fn times(b: &mut Builder, w: Var, c: f64) -> Result<Var, TypeError> {
    if c == 1.0 {
        Ok(w)
    } else {
        b.scale(w, c)
    }
}

impl Primitive for SoftmaxPullback {
    fn name(&self) -> &str {
        "softmax_pullback"
    }
    fn drawing(&self) -> Option<Drawing> {
        Some(Drawing::new(1, draw_softmax_pullback))
    }
    fn f32_budget(&self, inputs: &[TensorType], _output: &TensorType) -> crate::ir::Budget {
        // c y_i (v_i - s): s = sum_j y_j v_j within γ_n sum_j |y_j v_j| <= γ_n n max|y| max|v|,
        // then three roundings.
        let (n, c) = (inputs[0].dims()[self.axis] as f64, self.scale.abs());
        crate::ir::Budget::formula(
            "|c y_i| gamma_n n max|y| max|v| (1 + gamma_3) + gamma_3 |out_i|",
            move |s| {
                let g3 = budget::gamma(3.0);
                let dot = budget::gamma(n)
                    * n
                    * budget::max_abs(&s.ops[0])
                    * budget::max_abs(&s.ops[1])
                    * (1.0 + g3);
                s.ops[0]
                    .iter()
                    .zip(s.y)
                    .map(|(yi, out)| c * yi.abs() * dot + g3 * out.abs())
                    .collect()
            },
        )
    }
    fn attrs(&self) -> Attrs {
        let mut a = crate::ir::attrs_of([("axis", self.axis.into())]);
        if self.scale != 1.0 {
            a.insert("scale".into(), self.scale.into());
        }
        a
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType, TypeError> {
        let t = same_float_pair(inputs)?;
        if self.axis >= t.rank() {
            return Err(TypeError::attr(
                "axis",
                format!("axis {} is out of range for {t}", self.axis),
            ));
        }
        if !self.scale.is_finite() {
            return Err(TypeError::attr(
                "scale",
                format!("expected a finite number, found {}", self.scale),
            ));
        }
        Ok(t)
    }
    fn eval(&self, x: &[&Tensor]) -> Result<Tensor, KernelError> {
        eval_float(self, x)
    }
    /// Each block is counted right after it is written.
    fn counts_non_finite(&self, output: &TensorType) -> bool {
        output.numel() >= kernels::COUNTED_MIN
    }
    fn has_rational_eval(&self) -> bool {
        true
    }
    fn eval_rational(&self, x: &[&RArray]) -> Option<Result<RArray, KernelError>> {
        let c = rational_from_f64(self.scale).expect("the type rule admits finite scales only");
        Some(exact(x[0], x[1], self.axis, c).map_err(Into::into))
    }
    fn flops(&self, inputs: &[TensorType], _output: &TensorType) -> u64 {
        5 * inputs[0].numel() as u64
    }
    fn jvp(
        &self,
        b: &mut Builder,
        x: &[Var],
        _y: Var,
        dx: &[Option<Var>],
    ) -> Result<Option<Var>, RuleError> {
        let (y, v) = (x[0], x[1]);
        let through_v = dx[1]
            .map(|dv| b.softmax_pullback(y, dv, self.axis, self.scale))
            .transpose()?;
        let through_y = match dx[0] {
            Some(dy) => {
                let s = row_dot(b, y, v, self.axis)?;
                let vs = b.sub(v, s)?;
                let first = b.mul(dy, vs)?;
                let t = row_dot(b, dy, v, self.axis)?;
                let second = b.mul(y, t)?;
                let w = b.sub(first, second)?;
                Some(times(b, w, self.scale)?)
            }
            None => None,
        };
        crate::prim::sum_terms(b, &[through_y, through_v])
    }
    fn vjp(
        &self,
        b: &mut Builder,
        x: &[Var],
        _y: Var,
        u: Var,
    ) -> Result<Vec<Option<Var>>, RuleError> {
        let (y, v) = (x[0], x[1]);
        let dv = b.softmax_pullback(y, u, self.axis, self.scale)?;
        let s = row_dot(b, y, v, self.axis)?;
        let vs = b.sub(v, s)?;
        let first = b.mul(u, vs)?;
        let t = row_dot(b, u, y, self.axis)?;
        let second = b.mul(v, t)?;
        let w = b.sub(first, second)?;
        let dy = times(b, w, self.scale)?;
        Ok(vec![Some(dy), Some(dv)])
    }
    fn lower(&self, b: &mut Builder, x: &[Var]) -> Option<Result<Var, TypeError>> {
        Some((|| {
            let s = row_dot(b, x[0], x[1], self.axis)?;
            let vs = b.sub(x[1], s)?;
            let w = b.mul(x[0], vs)?;
            times(b, w, self.scale)
        })())
    }
    /// Batching: along the shifted axis, shared operands broadcast.
    fn batch(
        &self,
        b: &mut crate::ir::Builder,
        x: &[crate::ir::Var],
        at: &crate::ir::BatchCtx,
    ) -> Result<crate::ir::Var, crate::ir::RuleError> {
        crate::prim::batching::with_prim(
            b,
            x,
            at,
            Arc::new(SoftmaxPullback {
                axis: self.axis + 1,
                scale: self.scale,
            }),
        )
    }
}

pub(crate) fn register(r: &mut Registry) {
    r.register("softmax_pullback", |attrs: &Attrs| {
        let mut a = AttrReader::new(attrs);
        let axis = a.usize("axis")?;
        let scale = match a.get("scale") {
            None => 1.0,
            Some(_) => a.f64("scale")?,
        };
        a.finish()?;
        Ok(Arc::new(SoftmaxPullback { axis, scale }) as Prim)
    });
    r.set_example("softmax_pullback", crate::ir::attrs_json(r#"{"axis": 0}"#));
}

/// c y (v - sum(y v)) at a softmax output y: sum(y v) lies in v's range, so |out| <= 2|c||v|.
fn draw_softmax_pullback(d: &mut dyn Draw) -> Result<Drawn, DrawError> {
    let (x, axis) = d.along_axis(8.0)?;
    let y = d.op(|b| b.softmax(x.var, axis))?;
    let v = d.partner(x)?;
    let v = d.moderate(v, 8.0)?;
    let c = d.grid(-2.0, 2.0);
    let r = Interval::symmetric(2.0 * c.abs() * v.range.mag());
    d.same(r, |b| b.softmax_pullback(y, v.var, axis, c))
}
