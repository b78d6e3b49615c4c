//! sdpa {"causal", "key_lengths"}: scaled dot-product attention of every head at once,
//! Q (B, H, Tq, d), K (B, H, Tk, d), V (B, H, Tk, dv) -> Y (B, H, Tq, dv), with
//! S = d^{-1/2} Q K^T, P = masked_softmax(S) (rows normalised over their allowed keys), Y = P V
//! (docs/architectures.md).
//!
//! The kernel runs one (batch, head) slice per task and never stores P. The rules recompute
//! P = attention_probs(Q, K) (the residuals are Q, K, V, as in memory-efficient attention) and
//! chain through Y = P V:
//! - tangent: dY = dP V + P dV, with dP the tangent of attention_probs;
//! - cotangent: V̄ = P^T Ȳ, P̄ = Ȳ V^T, then (Q̄, K̄) by attention_probs' pullback of P̄.

use std::sync::Arc;

use rayon::prelude::*;

use super::attention_mask::AttentionMask;
use super::attention_probs::{attention_sizes, check_qk, probs_slice, AttentionProbs};
use crate::ir::budget;
use crate::ir::{
    AttrReader, Attrs, Builder, KernelError, Prim, Primitive, Registry, RuleError, TypeError, Var,
};
use crate::ir::{Draw, DrawError, Drawing, Drawn};
use crate::prim::dispatch::{arity, eval_float, FloatKernel};
use crate::prim::Ops;
use crate::tensor::kernels::{gemm_into_serial, MatRef};
use crate::tensor::{Array, Float, Tensor, TensorType};

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sdpa {
    pub mask: AttentionMask,
}

impl Sdpa {
    pub fn new(mask: AttentionMask) -> Sdpa {
        Sdpa { mask }
    }

    fn probs(&self) -> AttentionProbs {
        AttentionProbs {
            mask: self.mask.clone(),
        }
    }
}

impl FloatKernel for Sdpa {
    fn float<T: Float>(&self, x: &[&Array<T>]) -> Result<Array<T>, KernelError> {
        let sizes = attention_sizes(x[0].dims(), x[1].dims());
        let (_, tq, tk, _) = sizes;
        let dv = x[2].dims()[3];
        let (q, k, v) = (x[0].data(), x[1].data(), x[2].data());
        let mut out = crate::tensor::alloc::filled(x[0].dims()[0] * sizes.0 * tq * dv, T::zero())?;
        out.par_chunks_mut(tq * dv).enumerate().for_each(|(i, y)| {
            let mut s = vec![T::zero(); tq * tk];
            let mut p = vec![T::zero(); tq * tk];
            probs_slice(&self.mask, i, q, k, sizes, &mut s, &mut p);
            let vi = &v[i * tk * dv..(i + 1) * tk * dv];
            gemm_into_serial(y, MatRef::new(&p, tq, tk), MatRef::new(vi, tk, dv), false);
        });
        let mut dims = x[0].dims().to_vec();
        dims[3] = dv;
        Ok(Array::with_elems(dims, out).expect("batch * heads * tq * dv elements"))
    }
}

impl Primitive for Sdpa {
    fn name(&self) -> &str {
        "sdpa"
    }
    fn drawing(&self) -> Option<Drawing> {
        Some(Drawing::new(1, draw_sdpa))
    }
    fn f32_budget(&self, _inputs: &[TensorType], _output: &TensorType) -> crate::ir::Budget {
        crate::ir::Budget::formula("gamma_{c+Tk} max|V|, c as attention_probs", |s| {
            let tk = s.dims[1][2] as f64;
            let b = budget::gamma(budget::attention_c(s) + tk) * budget::max_abs(&s.ops[2]);
            vec![b; s.y.len()]
        })
    }
    fn attrs(&self) -> Attrs {
        let mut a = Attrs::new();
        self.mask.write(&mut a);
        a
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType, TypeError> {
        arity(inputs, 3)?;
        let scores = check_qk(&inputs[..2], &self.mask)?;
        let (q, v) = (&inputs[0], &inputs[2]);
        let (bh, tk) = (&q.dims()[..2], scores.dims()[3]);
        if v.dtype != q.dtype || v.rank() != 4 || &v.dims()[..2] != bh || v.dims()[2] != tk {
            return Err(TypeError::Operand {
                index: 2,
                expected: format!("{}[{}, {}, {tk}, width]", q.dtype, bh[0], bh[1]),
                found: v.clone(),
            });
        }
        let mut dims = q.dims().to_vec();
        dims[3] = v.dims()[3];
        Ok(TensorType::new(q.dtype, dims))
    }
    fn eval(&self, x: &[&Tensor]) -> Result<Tensor, KernelError> {
        eval_float(self, x)
    }
    fn is_contraction(&self) -> bool {
        true
    }

    fn flops(&self, inputs: &[TensorType], output: &TensorType) -> u64 {
        let (q, k) = (inputs[0].dims(), inputs[1].dims());
        let scores = (q[0] * q[1] * q[2] * k[2]) as u64;
        // Q K^T, the softmax, then P V.
        2 * scores * q[3] as u64 + 5 * scores + 2 * output.numel() as u64 * k[2] as u64
    }
    fn jvp(
        &self,
        b: &mut Builder,
        x: &[Var],
        _y: Var,
        dx: &[Option<Var>],
    ) -> Result<Option<Var>, RuleError> {
        let (q, k, v) = (x[0], x[1], x[2]);
        let p = b.attention_probs(q, k, self.mask.clone())?;
        let through_p = match self.probs().jvp(b, &[q, k], p, &dx[..2])? {
            Some(dp) => Some(b.batch_matmul(dp, v, false, false)?),
            None => None,
        };
        let through_v = dx[2]
            .map(|dv| b.batch_matmul(p, dv, false, false))
            .transpose()?;
        crate::prim::sum_terms(b, &[through_p, through_v])
    }
    fn vjp(
        &self,
        b: &mut Builder,
        x: &[Var],
        _y: Var,
        u: Var,
    ) -> Result<Vec<Option<Var>>, RuleError> {
        let (q, k, v) = (x[0], x[1], x[2]);
        let p = b.attention_probs(q, k, self.mask.clone())?;
        let dv = b.batch_matmul(p, u, true, false)?;
        let dp = b.batch_matmul(u, v, false, true)?;
        let mut grads = self.probs().vjp(b, &[q, k], p, dp)?;
        grads.push(Some(dv));
        Ok(grads)
    }
    fn lower(&self, b: &mut Builder, x: &[Var]) -> Option<Result<Var, TypeError>> {
        Some((|| {
            let p = b.attention_probs(x[0], x[1], self.mask.clone())?;
            b.batch_matmul(p, x[2], false, false)
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

pub(crate) fn register(r: &mut Registry) {
    r.register("sdpa", |attrs: &Attrs| {
        let mut a = AttrReader::new(attrs);
        let mask = AttentionMask::read(&mut a)?;
        a.finish()?;
        Ok(Arc::new(Sdpa { mask }) as Prim)
    });
}

/// Each output row is a convex combination of value rows.
fn draw_sdpa(d: &mut dyn Draw) -> Result<Drawn, DrawError> {
    let (q, k, mask) = super::attention_probs::draw_attention_operands(d)?;
    let kd = d.ty(k.var).dims().to_vec();
    let width = d.int(1, d.max_dim());
    let vty = TensorType::new(d.ty(q.var).dtype, [kd[0], kd[1], kd[2], width]);
    let v = if d.ty(k.var) == vty && d.chance(0.3) {
        k
    } else {
        d.weight(&vty)?
    };
    d.same(v.range, |b| b.sdpa(q.var, k.var, v.var, mask))
}
