//! Multi-head attention with affine projections, as a builder function over `linear` and `sdpa`
//! (docs/architectures.md, attention): for x_q (B, Tq, Dq) and x_kv (B, Tk, Dkv), with weights in
//! `linear`'s (out, in) layout,
//!
//! Q = x_q Wq^T + bq, K = x_kv Wk^T + bk, V = x_kv Wv^T + bv      (each (B, T, D), D = H d)
//! Y_h = sdpa(Q_h, K_h, V_h)                                      (head h: columns h d .. (h+1) d)
//! out = concat_h(Y_h) Wo^T + bo                                  ((B, Tq, Dout))
//!
//! The heads are a finite parallel composition over a (B, H, T, d) view made by reshape and
//! permute: by default one `attention_probs` node P = softmax(d^-1/2 Q K^T) and one
//! `batch_matmul` P V, so the reverse pass reads P (B H Tq Tk values) instead of computing it
//! again; with `recompute_weights`, one `sdpa` node, whose reverse rule recomputes P and which
//! keeps nothing of that size between the passes. Every weight is one operand, so shared
//! parameters stay one slot.

use super::attention_mask::AttentionMask;
use crate::ir::{Builder, TypeError, Var};
use crate::prim::Ops;

/// The projection weights: W* of shape (out, in) and b* of shape (out).
#[derive(Debug, Clone, Copy)]
pub struct AttentionWeights {
    pub wq: Var,
    pub bq: Var,
    pub wk: Var,
    pub bk: Var,
    pub wv: Var,
    pub bv: Var,
    pub wo: Var,
    pub bo: Var,
}

impl AttentionWeights {
    /// The weights in the order Wq, bq, Wk, bk, Wv, bv, Wo, bo.
    pub fn from_array([wq, bq, wk, bk, wv, bv, wo, bo]: [Var; 8]) -> AttentionWeights {
        AttentionWeights {
            wq,
            bq,
            wk,
            bk,
            wv,
            bv,
            wo,
            bo,
        }
    }
}

/// The fixed structure of an attention block.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AttentionSpec {
    pub heads: usize,
    pub mask: AttentionMask,
    /// One `sdpa` node (the weights recomputed in the reverse pass, less memory) instead of
    /// `attention_probs` and `batch_matmul` (the weights kept, a faster reverse pass).
    pub recompute_weights: bool,
}

/// (B, T, D) -> (B, T, D') by `linear` on the (B T, D) rows.
fn project(b: &mut Builder, x: Var, w: Var, bias: Var) -> Result<Var, TypeError> {
    let d = b.ty(x).dims().to_vec();
    let rows = b.reshape(x, [d[0] * d[1], d[2]])?;
    let y = b.linear(rows, w, bias)?;
    let out = b.ty(y).dims()[1];
    b.reshape(y, [d[0], d[1], out])
}

/// (B, T, H d) -> (B, H, T, d).
fn split_heads(b: &mut Builder, x: Var, heads: usize) -> Result<Var, TypeError> {
    let d = b.ty(x).dims().to_vec();
    if heads == 0 || d[2] % heads != 0 {
        return Err(TypeError::Invalid(format!(
            "attention: width {} is not divisible by {heads} heads",
            d[2]
        )));
    }
    let split = b.reshape(x, [d[0], d[1], heads, d[2] / heads])?;
    b.permute(split, vec![0, 2, 1, 3])
}

/// (B, H, T, d) -> (B, T, H d).
fn merge_heads(b: &mut Builder, y: Var) -> Result<Var, TypeError> {
    let d = b.ty(y).dims().to_vec();
    let t = b.permute(y, vec![0, 2, 1, 3])?;
    b.reshape(t, [d[0], d[2], d[1] * d[3]])
}

fn rank3(b: &Builder, x: Var, what: &str) -> Result<(), TypeError> {
    let t = b.ty(x);
    if t.rank() == 3 {
        Ok(())
    } else {
        Err(TypeError::Invalid(format!(
            "attention: {what} must be (batch, sequence, width), found {t}"
        )))
    }
}

/// Multi-head scaled dot-product attention of x_q over x_kv (self-attention: pass one value
/// twice). Returns (B, Tq, Dout).
pub fn multi_head_attention(
    b: &mut Builder,
    x_q: Var,
    x_kv: Var,
    w: &AttentionWeights,
    spec: &AttentionSpec,
) -> Result<Var, TypeError> {
    rank3(b, x_q, "the queries' input")?;
    rank3(b, x_kv, "the keys' input")?;
    let q = project(b, x_q, w.wq, w.bq)?;
    let k = project(b, x_kv, w.wk, w.bk)?;
    let v = project(b, x_kv, w.wv, w.bv)?;
    let q = split_heads(b, q, spec.heads)?;
    let k = split_heads(b, k, spec.heads)?;
    let v = split_heads(b, v, spec.heads)?;
    let y = if spec.recompute_weights {
        b.sdpa(q, k, v, spec.mask.clone())?
    } else {
        let p = b.attention_probs(q, k, spec.mask.clone())?;
        b.batch_matmul(p, v, false, false)?
    };
    let y = merge_heads(b, y)?;
    project(b, y, w.wo, w.bo)
}
