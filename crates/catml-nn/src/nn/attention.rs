//! Multi-head attention as a layer: the projections `<tag>.Wq`, `<tag>.bq`, `<tag>.Wk`,
//! `<tag>.bk`, `<tag>.Wv`, `<tag>.bv`, `<tag>.Wo`, `<tag>.bo` in `linear`'s (out, in) layout,
//! around the builder function [`multi_head_attention`] (one `sdpa` node over all heads).

use rand::Rng;

use super::{call_built, param, Init};
use crate::prim::attention::{multi_head_attention, AttentionSpec, AttentionWeights};
use crate::prim::AttentionMask;
use crate::tensor::TensorType;
use crate::trace::{tag_scope, Value};

/// Multi-head scaled dot-product attention of x_q (B, Tq, Dq) over x_kv (B, Tk, Dkv) with
/// `heads` heads of width `width / heads`. Parameters, with D = `width` and Dout the output
/// width: D·Dq + D + 2 (D·Dkv + D) + Dout·D + Dout; for self-attention with Dq = Dkv = Dout
/// = D that is 4 (D² + D).
#[derive(Debug, Clone, PartialEq)]
pub struct MultiHeadAttention {
    pub heads: usize,
    /// The width D = heads · head width of the queries, keys and values.
    pub width: usize,
    /// The output width (the queries' input width if `None`).
    pub out: Option<usize>,
    /// Which keys each query row sees (causal, key lengths); every row must see one.
    pub mask: AttentionMask,
    /// How the projection weights start (Glorot by default; biases start at zero).
    pub weight_init: Init,
    /// Recompute the attention weights in the reverse pass (one `sdpa` node: less memory)
    /// instead of keeping them (the default: a faster reverse pass).
    pub recompute_weights: bool,
}

impl MultiHeadAttention {
    /// `heads` heads over a width of `width`, no mask, output width = input width.
    pub fn new(heads: usize, width: usize) -> MultiHeadAttention {
        MultiHeadAttention {
            heads,
            width,
            out: None,
            mask: AttentionMask::none(),
            weight_init: Init::Glorot,
            recompute_weights: false,
        }
    }

    /// The same layer with this mask.
    pub fn mask(self, mask: AttentionMask) -> MultiHeadAttention {
        MultiHeadAttention { mask, ..self }
    }

    /// The same layer with a causal mask.
    pub fn causal(self) -> MultiHeadAttention {
        self.mask(AttentionMask::causal())
    }

    /// Self-attention of x (B, T, D) under `tag`.
    #[track_caller]
    pub fn apply<R: Rng + ?Sized>(&self, x: &Value, rng: &mut R, tag: &str) -> Value {
        self.attend(x, x, rng, tag)
    }

    /// x_q attending over x_kv under `tag`: (B, Tq, Dout). Draws Wq, bq, Wk, bk, Wv, bv, Wo,
    /// bo in that order.
    #[track_caller]
    pub fn attend<R: Rng + ?Sized>(
        &self,
        x_q: &Value,
        x_kv: &Value,
        rng: &mut R,
        tag: &str,
    ) -> Value {
        let (qt, kvt) = match (x_q.ty(), x_kv.ty()) {
            (Ok(q), Ok(kv)) => (q, kv),
            (Err(e), _) | (_, Err(e)) => return Value::failed(e),
        };
        let last = |t: &TensorType| t.dims().last().copied().unwrap_or(0);
        let (dq, dkv, d) = (last(&qt), last(&kvt), self.width);
        let dout = self.out.unwrap_or(dq);
        // A loop, not a closure: `param` reports the caller's site only through direct calls.
        let mut weights = Vec::with_capacity(8);
        for (name, out, inp) in [("q", d, dq), ("k", d, dkv), ("v", d, dkv), ("o", dout, d)] {
            let w = TensorType::new(qt.dtype, [out, inp]);
            let b = TensorType::new(qt.dtype, [out]);
            weights.push(param(&format!("{tag}.W{name}"), &w, self.weight_init, rng));
            weights.push(param(&format!("{tag}.b{name}"), &b, Init::Zeros, rng));
        }
        let spec = AttentionSpec {
            heads: self.heads,
            mask: self.mask.clone(),
            recompute_weights: self.recompute_weights,
        };
        let _tag = tag_scope(tag);
        let args: Vec<&Value> = [x_q, x_kv].into_iter().chain(&weights).collect();
        let out = call_built("multi_head_attention", &args, 1, |b, v| {
            let w = AttentionWeights {
                wq: v[2],
                bq: v[3],
                wk: v[4],
                bk: v[5],
                wv: v[6],
                bv: v[7],
                wo: v[8],
                bo: v[9],
            };
            Ok(vec![multi_head_attention(b, v[0], v[1], &w, &spec)?])
        });
        out.into_iter().next().expect("one output")
    }
}
