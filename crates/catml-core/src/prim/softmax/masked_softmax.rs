//! masked_softmax {"causal", "key_lengths", "scale"}: scores S (B, H, Tq, Tk) to attention
//! weights P, each query row normalised over its allowed keys A (see `attention_mask`): with
//! c = scale (default 1), P_ij = e^{c S_ij} / sum_{l in A_i} e^{c S_il} for j in A_i, else 0.
//!
//! Rules: on each row P is a softmax of the allowed entries padded with zeros, so the tangent
//! and cotangent maps are both v -> c P (v - <P, v>) (zero off A_i, since P is): one
//! softmax_pullback node.
//!
//! Lowering of c S, with M the constant 0/1 mask and every shift under stop_gradient (exact, as
//! for softmax): L_i = min_j S_ij, S'_ij = S_ij M_ij + L_i (1 - M_ij) (so max_j S'_ij is the allowed
//! maximum m_i, and no entry can overflow), E = e^{S' - m} M, P = E / sum_j E.

use std::sync::Arc;

use rayon::prelude::*;

use super::forward::expand;
use super::rows::{softmax_row_scaled, softmax_row_scaled_in_place};
use crate::ir::budget;
use crate::ir::{
    AttrReader, Attrs, Builder, KernelError, Prim, Primitive, Registry, RuleError, TypeError, Var,
};
use crate::ir::{Draw, DrawError, Drawing, Drawn, Interval};
use crate::prim::attention::attention_mask::AttentionMask;
use crate::prim::dispatch::{arity, eval_float, float_operand, FloatKernel};
use crate::prim::Ops;
use crate::tensor::fastmath::with_wide_simd;
use crate::tensor::kernels::count_non_finite;
use crate::tensor::{Array, Float, Tensor, TensorType};

#[derive(Debug, Clone, PartialEq)]
pub struct MaskedSoftmax {
    pub mask: AttentionMask,
    /// c > 0, multiplying the scores before the softmax.
    pub scale: f64,
}

with_wide_simd! {
    /// Softmax of the rows of one (Tq, Tk) slice of batch entry `b` over their allowed
    /// prefixes, after multiplying by `scale`; zeros elsewhere.
    pub(crate) fn masked_rows<T: Float>(
        mask: &AttentionMask,
        b: usize,
        s: &[T],
        p: &mut [T],
        tq: usize,
        tk: usize,
        scale: T,
    ) {
        for (i, (row, out)) in s.chunks_exact(tk).zip(p.chunks_exact_mut(tk)).enumerate() {
            let end = mask.end(b, i, tq, tk);
            softmax_row_scaled(&row[..end], &mut out[..end], scale, false);
            out[end..].iter_mut().for_each(|v| *v = T::zero());
        }
    }
}

with_wide_simd! {
    /// [`masked_rows`] of a slice holding its scores, overwritten by its weights; returns how
    /// many weights are NaN or infinite, counting only the rows whose weights are not
    /// certainly finite (`softmax_row_scaled_in_place`).
    pub(crate) fn masked_rows_in_place<T: Float>(
        mask: &AttentionMask,
        b: usize,
        p: &mut [T],
        tq: usize,
        tk: usize,
        scale: T,
    ) -> usize {
        let mut non_finite = 0;
        for (i, row) in p.chunks_exact_mut(tk).enumerate() {
            let (weights, rest) = row.split_at_mut(mask.end(b, i, tq, tk));
            if !softmax_row_scaled_in_place(weights, scale) {
                non_finite += count_non_finite(weights);
            }
            rest.iter_mut().for_each(|v| *v = T::zero());
        }
        non_finite
    }
}

/// Checks a rank-4 score type (B, H, Tq, Tk) against the mask.
pub(crate) fn check_scores(t: &TensorType, mask: &AttentionMask) -> Result<(), TypeError> {
    if t.rank() != 4 {
        return Err(TypeError::Operand {
            index: 0,
            expected: "scores of rank 4 (batch, heads, queries, keys)".to_string(),
            found: t.clone(),
        });
    }
    let d = t.dims();
    mask.check(d[0], d[2], d[3])
}

impl FloatKernel for MaskedSoftmax {
    fn float<T: Float>(&self, x: &[&Array<T>]) -> Result<Array<T>, KernelError> {
        let d = x[0].dims();
        let (heads, tq, tk) = (d[1], d[2], d[3]);
        let c = T::from_f64(self.scale);
        let mut out = crate::tensor::alloc::filled(x[0].len(), T::zero())?;
        out.par_chunks_mut(tq * tk)
            .zip(x[0].data().par_chunks(tq * tk))
            .enumerate()
            .for_each(|(slice, (p, s))| masked_rows(&self.mask, slice / heads, s, p, tq, tk, c));
        Ok(Array::with_elems(x[0].shape().clone(), out).expect("same shape"))
    }
}

impl Primitive for MaskedSoftmax {
    fn name(&self) -> &str {
        "masked_softmax"
    }
    fn drawing(&self) -> Option<Drawing> {
        Some(Drawing::new(1, draw_masked_softmax))
    }
    fn f32_budget(&self, inputs: &[TensorType], _output: &TensorType) -> crate::ir::Budget {
        let (scale, n) = (self.scale, inputs[0].dims()[3] as f64);
        crate::ir::Budget::formula("gamma_c |y|, c = 2A + Tk + 17", move |s| {
            let c = budget::softmax_rel(budget::shift_error(&s.ops[0], scale), n);
            s.y.iter().map(|y| c * y.abs()).collect()
        })
    }
    fn attrs(&self) -> Attrs {
        let mut a = Attrs::new();
        self.mask.write(&mut a);
        if self.scale != 1.0 {
            a.insert("scale".into(), self.scale.into());
        }
        a
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType, TypeError> {
        arity(inputs, 1)?;
        float_operand(inputs, 0)?;
        if !(self.scale > 0.0 && self.scale.is_finite()) {
            return Err(TypeError::attr(
                "scale",
                format!("expected a finite number > 0, found {}", self.scale),
            ));
        }
        check_scores(&inputs[0], &self.mask)?;
        Ok(inputs[0].clone())
    }
    fn eval(&self, x: &[&Tensor]) -> Result<Tensor, KernelError> {
        eval_float(self, x)
    }
    fn flops(&self, inputs: &[TensorType], _output: &TensorType) -> u64 {
        5 * inputs[0].numel() as u64
    }
    fn jvp(
        &self,
        b: &mut Builder,
        _x: &[Var],
        y: Var,
        dx: &[Option<Var>],
    ) -> Result<Option<Var>, RuleError> {
        let Some(d) = dx[0] else { return Ok(None) };
        Ok(Some(b.softmax_pullback(y, d, 3, self.scale)?))
    }
    fn vjp(
        &self,
        b: &mut Builder,
        _x: &[Var],
        y: Var,
        u: Var,
    ) -> Result<Vec<Option<Var>>, RuleError> {
        Ok(vec![Some(b.softmax_pullback(y, u, 3, self.scale)?)])
    }
    fn lower(&self, b: &mut Builder, x: &[Var]) -> Option<Result<Var, TypeError>> {
        Some((|| {
            let s = if self.scale == 1.0 {
                x[0]
            } else {
                b.scale(x[0], self.scale)?
            };
            lower_masked(b, s, &self.mask)
        })())
    }
    /// Batching: per example.
    fn batch(
        &self,
        b: &mut crate::ir::Builder,
        x: &[crate::ir::Var],
        at: &crate::ir::BatchCtx,
    ) -> Result<crate::ir::Var, crate::ir::RuleError> {
        crate::prim::batching::per_example(b, x, at)
    }
}

fn lower_masked(b: &mut Builder, s: Var, mask: &AttentionMask) -> Result<Var, TypeError> {
    let ty = b.ty(s).clone();
    if mask.is_full() {
        return b.softmax(s, 3);
    }
    let d = ty.dims().to_vec();
    let (batch, tq, tk) = (d[0], d[2], d[3]);
    let m01 = mask.matrix(ty.dtype, batch, tq, tk);
    let keep = b.constant(m01.clone())?;
    let keep = b.broadcast(keep, ty.shape.clone(), vec![0, 2, 3])?;
    let drop = b.constant(
        Tensor::from_f64s(
            ty.dtype,
            [batch, tq, tk],
            m01.to_f64_vec().iter().map(|v| 1.0 - v).collect(),
        )
        .expect("same size"),
    )?;
    let drop = b.broadcast(drop, ty.shape.clone(), vec![0, 2, 3])?;
    // L = -max(-S): the row minimum, a value no allowed entry is below.
    let neg = b.neg(s)?;
    let neg_min = b.reduce_max(neg, Some(vec![3]))?;
    let low = b.neg(neg_min)?;
    let low = b.stop_gradient(low)?;
    let low = expand(b, low, &ty, 3)?;
    let kept = b.mul(s, keep)?;
    let filled = b.mul(low, drop)?;
    let s2 = b.add(kept, filled)?;
    let m = b.reduce_max(s2, Some(vec![3]))?;
    let m = b.stop_gradient(m)?;
    let m = expand(b, m, &ty, 3)?;
    let z = b.sub(s2, m)?;
    let e = b.exp(z)?;
    let e = b.mul(e, keep)?;
    let total = b.sum(e, Some(vec![3]))?;
    let r = b.reciprocal(total)?;
    let r = expand(b, r, &ty, 3)?;
    b.mul(e, r)
}

pub(crate) fn register(r: &mut Registry) {
    r.register("masked_softmax", |attrs: &Attrs| {
        let mut a = AttrReader::new(attrs);
        let mask = AttentionMask::read(&mut a)?;
        let scale = match a.get("scale") {
            None => 1.0,
            Some(_) => a.f64("scale")?,
        };
        a.finish()?;
        Ok(Arc::new(MaskedSoftmax { mask, scale }) as Prim)
    });
}

fn draw_masked_softmax(d: &mut dyn Draw) -> Result<Drawn, DrawError> {
    let x = d.pick();
    let x = d.moderate(x, 8.0)?;
    let x = d.shaped(x, 4)?;
    let n = d.ty(x.var).dims().to_vec();
    let mask = AttentionMask::draw(d, n[0], n[2], n[3]);
    let scale = d.grid(0.25, 2.0).max(0.25);
    d.same(Interval::new(0.0, 1.0), |b| {
        b.masked_softmax(x.var, mask, scale)
    })
}
