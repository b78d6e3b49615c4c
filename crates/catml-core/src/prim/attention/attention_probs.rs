//! attention_probs {"causal", "key_lengths"}: the attention weights of every head,
//! Q (B, H, Tq, d), K (B, H, Tk, d) -> P = masked_softmax(d^{-1/2} Q K^T) (B, H, Tq, Tk).
//!
//! The kernel writes each (batch, head) slice's scores into that slice of the result and
//! normalises them there, so the scores never exist as a tensor of their own. With c = d^{-1/2} and
//! R = Q K^T, the derivative of P is v -> c P (v - <P, v>) (one softmax_pullback at the output):
//! - tangent: dP = c P (dR - <P, dR>) for dR = dQ K^T + Q dK^T;
//! - cotangent: R̄ = c P (P̄ - <P, P̄>), Q̄ = R̄ K, K̄ = R̄^T Q.
//!
//! Lowering: batch_matmul then masked_softmax with scale c.

use std::sync::Arc;

use super::attention_mask::AttentionMask;
use crate::ir::budget;
use crate::ir::{
    AttrReader, Attrs, Builder, KernelError, Prim, Primitive, Registry, RuleError, TypeError, Var,
};
use crate::ir::{Draw, DrawError, Drawing, Drawn, Interval};
use crate::ir::{PermutedKernel, Permutes};
use crate::prim::dispatch::{
    arity, eval_float, eval_float_permuted, float_operand, FloatKernel, PermutedFloatKernel,
};
use crate::prim::linalg::batch_matmul::stack_of;
use crate::prim::softmax::masked_softmax::{check_scores, masked_rows, masked_rows_in_place};
use crate::prim::Ops;
use crate::tensor::keeps_last_axis;
use crate::tensor::kernels::{
    add_found, counting, gemm_batched, gemm_into_serial, MatRef, MatStack,
};
use crate::tensor::{Array, Float, Tensor, TensorType};

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AttentionProbs {
    pub mask: AttentionMask,
}

/// d^{-1/2} for key width d.
pub(crate) fn score_scale(d: usize) -> f64 {
    1.0 / (d as f64).sqrt()
}

/// Sizes of one attention product: (heads, tq, tk, d).
pub(crate) fn attention_sizes(q: &[usize], k: &[usize]) -> (usize, usize, usize, usize) {
    (q[1], q[2], k[2], q[3])
}

/// The weights of slice `i` (batch i / heads) into `p` (tq, tk), using `s` as scratch.
#[allow(clippy::too_many_arguments)]
pub(crate) fn probs_slice<T: Float>(
    mask: &AttentionMask,
    i: usize,
    q: &[T],
    k: &[T],
    sizes: (usize, usize, usize, usize),
    s: &mut [T],
    p: &mut [T],
) {
    let (heads, tq, tk, d) = sizes;
    let qi = MatRef::new(&q[i * tq * d..(i + 1) * tq * d], tq, d);
    let kt = MatRef::transpose_of(&k[i * tk * d..(i + 1) * tk * d], tk, d);
    gemm_into_serial(s, qi, kt, false);
    masked_rows(mask, i / heads, s, p, tq, tk, T::from_f64(score_scale(d)));
}

/// Checks Q (B, H, Tq, d) and K (B, H, Tk, d); returns the scores' type (B, H, Tq, Tk).
pub(crate) fn check_qk(
    inputs: &[TensorType],
    mask: &AttentionMask,
) -> Result<TensorType, TypeError> {
    float_operand(inputs, 0)?;
    let (q, k) = (&inputs[0], &inputs[1]);
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
    let scores = TensorType::new(q.dtype, [bh[0], bh[1], q.dims()[2], k.dims()[2]]);
    check_scores(&scores, mask)?;
    Ok(scores)
}

impl AttentionProbs {
    /// The weights of the stacks Q and K (read in place, perhaps through permutes).
    fn probs<T: Float>(
        &self,
        q: MatStack<'_, T>,
        k: MatStack<'_, T>,
    ) -> Result<Array<T>, KernelError> {
        let sizes = attention_sizes(q.dims(), k.dims());
        let (heads, tq, tk, d) = sizes;
        let c = T::from_f64(score_scale(d));
        let mut dims = q.dims().to_vec();
        dims[3] = tk;
        // Each slice's scores are written into its block of the result and normalised there,
        // which counts its non-finite weights for evaluation when it asks (`tensor::checked`).
        let out = counting(|found| {
            gemm_batched(
                dims[0] * heads,
                (tq, tk),
                |i| (q.matrix(i), k.matrix(i).transposed()),
                |i, p| {
                    let non_finite = masked_rows_in_place(&self.mask, i / heads, p, tq, tk, c);
                    add_found(found, non_finite);
                },
            )
        })?;
        Ok(Array::with_elems(dims, out).expect("batch * heads * tq * tk elements"))
    }
}

impl FloatKernel for AttentionProbs {
    fn float<T: Float>(&self, x: &[&Array<T>]) -> Result<Array<T>, KernelError> {
        self.float_permuted(x, Permutes::NONE)
    }
}

impl PermutedFloatKernel for AttentionProbs {
    fn float_permuted<T: Float>(
        &self,
        x: &[&Array<T>],
        permutes: Permutes<'_>,
    ) -> Result<Array<T>, KernelError> {
        self.probs(stack_of(x[0], 0, &permutes), stack_of(x[1], 1, &permutes))
    }
}

/// Q and K through any permute keeping the last axis last; the weights are written as they
/// are.
impl PermutedKernel for AttentionProbs {
    fn reads(&self, inputs: &[TensorType], k: usize, perm: &[usize]) -> bool {
        inputs
            .get(k)
            .is_some_and(|t| keeps_last_axis(perm, t.rank()))
    }
    fn writes(&self, _inputs: &[TensorType], _perm: &[usize]) -> bool {
        false
    }
    fn eval_permuted(&self, x: &[&Tensor], permutes: Permutes<'_>) -> Result<Tensor, KernelError> {
        eval_float_permuted(self, x, permutes)
    }
}

impl Primitive for AttentionProbs {
    fn name(&self) -> &str {
        "attention_probs"
    }
    fn drawing(&self) -> Option<Drawing> {
        Some(Drawing::new(1, draw_attention_probs))
    }
    fn f32_budget(&self, _inputs: &[TensorType], _output: &TensorType) -> crate::ir::Budget {
        crate::ir::Budget::formula("gamma_c |y|, c = 2A + Tk + 17, A = s P (d + 5)", |s| {
            let c = budget::gamma(budget::attention_c(s));
            s.y.iter().map(|y| c * y.abs()).collect()
        })
    }
    fn attrs(&self) -> Attrs {
        let mut a = Attrs::new();
        self.mask.write(&mut a);
        a
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType, TypeError> {
        arity(inputs, 2)?;
        check_qk(inputs, &self.mask)
    }
    fn eval(&self, x: &[&Tensor]) -> Result<Tensor, KernelError> {
        eval_float(self, x)
    }
    /// Each slice's weights are counted right after they are normalised.
    fn counts_non_finite(&self, _output: &TensorType) -> bool {
        true
    }
    fn permuted(&self) -> Option<&dyn PermutedKernel> {
        Some(self)
    }
    fn is_contraction(&self) -> bool {
        true
    }

    fn flops(&self, inputs: &[TensorType], output: &TensorType) -> u64 {
        // Q K^T, then the softmax.
        output.numel() as u64 * (2 * inputs[0].dims()[3] as u64 + 5)
    }
    fn jvp(
        &self,
        b: &mut Builder,
        x: &[Var],
        y: Var,
        dx: &[Option<Var>],
    ) -> Result<Option<Var>, RuleError> {
        let (q, k) = (x[0], x[1]);
        let left = dx[0]
            .map(|dq| b.batch_matmul(dq, k, false, true))
            .transpose()?;
        let right = dx[1]
            .map(|dk| b.batch_matmul(q, dk, false, true))
            .transpose()?;
        let Some(dr) = crate::prim::sum_terms(b, &[left, right])? else {
            return Ok(None);
        };
        let c = score_scale(b.ty(q).dims()[3]);
        Ok(Some(b.softmax_pullback(y, dr, 3, c)?))
    }
    fn vjp(
        &self,
        b: &mut Builder,
        x: &[Var],
        y: Var,
        u: Var,
    ) -> Result<Vec<Option<Var>>, RuleError> {
        let (q, k) = (x[0], x[1]);
        let c = score_scale(b.ty(q).dims()[3]);
        let dr = b.softmax_pullback(y, u, 3, c)?;
        let dq = b.batch_matmul(dr, k, false, false)?;
        let dk = b.batch_matmul(dr, q, true, false)?;
        Ok(vec![Some(dq), Some(dk)])
    }
    fn lower(&self, b: &mut Builder, x: &[Var]) -> Option<Result<Var, TypeError>> {
        Some((|| {
            let c = score_scale(b.ty(x[0]).dims()[3]);
            let r = b.batch_matmul(x[0], x[1], false, true)?;
            b.masked_softmax(r, self.mask.clone(), c)
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
    r.register("attention_probs", |attrs: &Attrs| {
        let mut a = AttrReader::new(attrs);
        let mask = AttentionMask::read(&mut a)?;
        a.finish()?;
        Ok(Arc::new(AttentionProbs { mask }) as Prim)
    });
}

/// Queries (B, H, Tq, d) from the pool; keys (B, H, Tk, d) and a mask to go with them.
pub(crate) fn draw_attention_operands(
    d: &mut dyn Draw,
) -> Result<(Drawn, Drawn, AttentionMask), DrawError> {
    let x = d.pick();
    let x = d.moderate(x, 2.0)?;
    let q = d.shaped(x, 4)?;
    let qd = d.ty(q.var).dims().to_vec();
    let tk = d.int(1, d.max_dim());
    let kty = TensorType::new(d.ty(q.var).dtype, [qd[0], qd[1], tk, qd[3]]);
    let k = if tk == qd[2] && d.chance(0.25) {
        q
    } else {
        d.weight(&kty)?
    };
    let k = d.moderate(k, 2.0)?;
    let mask = AttentionMask::draw(d, qd[0], qd[2], tk);
    Ok((q, k, mask))
}

fn draw_attention_probs(d: &mut dyn Draw) -> Result<Drawn, DrawError> {
    let (q, k, mask) = draw_attention_operands(d)?;
    d.same(Interval::new(0.0, 1.0), |b| {
        b.attention_probs(q.var, k.var, mask)
    })
}
