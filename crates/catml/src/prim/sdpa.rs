//! sdpa {"causal", "key_lengths"}: scaled dot-product attention of every head at once,
//! Q (B, H, Tq, d), K (B, H, Tk, d), V (B, H, Tk, dv) -> Y (B, H, Tq, dv), with (001 §4)
//! S = d^{-1/2} Q K^T, P = masked_softmax(S) (rows normalised over their allowed keys), Y = P V.
//!
//! The kernel runs one (batch, head) slice per task and never stores P. The rules recompute P
//! from Q and K (the residuals are Q, K, V, as in memory-efficient attention) and then read
//! as the chain rule through the three steps, with c = d^{-1/2}, R = Q K^T and P =
//! masked_softmax(c R) (so the derivative of P is v -> c P (v - <P, v>), one softmax_pullback):
//! - tangent: dR = dQ K^T + Q dK^T, dP = c P (dR - <P, dR>), dY = dP V + P dV;
//! - cotangent: V̄ = P^T Ȳ, P̄ = Ȳ V^T, R̄ = c P (P̄ - <P, P̄>), Q̄ = R̄ K, K̄ = R̄^T Q.

use std::sync::Arc;

use rayon::prelude::*;

use super::attention_mask::AttentionMask;
use super::dispatch::{arity, eval_float, float_operand, FloatKernel};
use super::masked_softmax::{check_scores, masked_rows};
use super::Ops;
use crate::ir::{
    AttrReader, Attrs, Builder, KernelError, Prim, Primitive, Registry, RuleError, TypeError, Var,
};
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
}

/// d^{-1/2} for key width d.
fn scale_for(d: usize) -> f64 {
    1.0 / (d as f64).sqrt()
}

/// P = masked_softmax(d^{-1/2} Q K^T), as nodes.
fn weights(b: &mut Builder, q: Var, k: Var, mask: &AttentionMask) -> Result<Var, TypeError> {
    let d = b.ty(q).dims()[3];
    let r = b.batch_matmul(q, k, false, true)?;
    b.masked_softmax(r, mask.clone(), scale_for(d))
}

impl FloatKernel for Sdpa {
    fn float<T: Float>(&self, x: &[&Array<T>]) -> Result<Array<T>, KernelError> {
        let (qd, kd, vd) = (x[0].dims(), x[1].dims(), x[2].dims());
        let (heads, tq, d) = (qd[1], qd[2], qd[3]);
        let (tk, dv) = (kd[2], vd[3]);
        let scale = T::from_f64(scale_for(d));
        let (q, k, v) = (x[0].data(), x[1].data(), x[2].data());
        let mut out = vec![T::zero(); qd[0] * heads * tq * dv];
        out.par_chunks_mut(tq * dv).enumerate().for_each(|(i, y)| {
            let qi = &q[i * tq * d..(i + 1) * tq * d];
            let ki = &k[i * tk * d..(i + 1) * tk * d];
            let vi = &v[i * tk * dv..(i + 1) * tk * dv];
            let mut s = vec![T::zero(); tq * tk];
            gemm_into_serial(
                &mut s,
                MatRef::new(qi, tq, d),
                MatRef::transpose_of(ki, tk, d),
                false,
            );
            let mut p = vec![T::zero(); tq * tk];
            masked_rows(&self.mask, i / heads, &s, &mut p, tq, tk, scale);
            gemm_into_serial(y, MatRef::new(&p, tq, tk), MatRef::new(vi, tk, dv), false);
        });
        let mut dims = qd.to_vec();
        dims[3] = dv;
        Ok(Array::new(dims, out).expect("batch * heads * tq * dv elements"))
    }
}

impl Primitive for Sdpa {
    fn name(&self) -> &str {
        "sdpa"
    }
    fn attrs(&self) -> Attrs {
        let mut a = Attrs::new();
        self.mask.write(&mut a);
        a
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType, TypeError> {
        arity(inputs, 3)?;
        float_operand(inputs, 0)?;
        let (q, k, v) = (&inputs[0], &inputs[1], &inputs[2]);
        if q.rank() != 4 {
            return Err(TypeError::Operand {
                index: 0,
                expected: "queries of rank 4 (batch, heads, queries, width)".to_string(),
                found: q.clone(),
            });
        }
        let (bh, d) = (&q.dims()[..2], q.dims()[3]);
        if k.dtype != q.dtype || k.rank() != 4 || &k.dims()[..2] != bh || k.dims()[3] != d {
            return Err(TypeError::Operand {
                index: 1,
                expected: format!("{}[{}, {}, keys, {d}]", q.dtype, bh[0], bh[1]),
                found: k.clone(),
            });
        }
        let tk = k.dims()[2];
        if v.dtype != q.dtype || v.rank() != 4 || &v.dims()[..2] != bh || v.dims()[2] != tk {
            return Err(TypeError::Operand {
                index: 2,
                expected: format!("{}[{}, {}, {tk}, width]", q.dtype, bh[0], bh[1]),
                found: v.clone(),
            });
        }
        let scores = TensorType::new(q.dtype, [bh[0], bh[1], q.dims()[2], tk]);
        check_scores(&scores, &self.mask)?;
        let mut dims = q.dims().to_vec();
        dims[3] = v.dims()[3];
        Ok(TensorType::new(q.dtype, dims))
    }
    fn eval(&self, x: &[&Tensor]) -> Result<Tensor, KernelError> {
        eval_float(self, x)
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
        let p = weights(b, q, k, &self.mask)?;
        let c = scale_for(b.ty(q).dims()[3]);
        let left = dx[0]
            .map(|dq| b.batch_matmul(dq, k, false, true))
            .transpose()?;
        let right = dx[1]
            .map(|dk| b.batch_matmul(q, dk, false, true))
            .transpose()?;
        let through_p = match super::sum_terms(b, &[left, right])? {
            Some(dr) => {
                let dp = b.softmax_pullback(p, dr, 3, c)?;
                Some(b.batch_matmul(dp, v, false, false)?)
            }
            None => None,
        };
        let through_v = dx[2]
            .map(|dv| b.batch_matmul(p, dv, false, false))
            .transpose()?;
        super::sum_terms(b, &[through_p, through_v])
    }
    fn vjp(
        &self,
        b: &mut Builder,
        x: &[Var],
        _y: Var,
        u: Var,
    ) -> Result<Vec<Option<Var>>, RuleError> {
        let (q, k, v) = (x[0], x[1], x[2]);
        let p = weights(b, q, k, &self.mask)?;
        let c = scale_for(b.ty(q).dims()[3]);
        let dv = b.batch_matmul(p, u, true, false)?;
        let dp = b.batch_matmul(u, v, false, true)?;
        let dr = b.softmax_pullback(p, dp, 3, c)?;
        let dq = b.batch_matmul(dr, k, false, false)?;
        let dk = b.batch_matmul(dr, q, true, false)?;
        Ok(vec![Some(dq), Some(dk), Some(dv)])
    }
    fn lower(&self, b: &mut Builder, x: &[Var]) -> Option<Result<Var, TypeError>> {
        Some((|| {
            let p = weights(b, x[0], x[1], &self.mask)?;
            b.batch_matmul(p, x[2], false, false)
        })())
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
