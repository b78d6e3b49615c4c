//! Attention (opset 23): 3-D inputs split into heads, the past key/value cache prepended,
//! grouped-query heads repeated, Q K^T scaled (sqrt(scale) on each side), softcapped, masked
//! (float bias, bool mask, bottom-right causal frontier, sliding window, key padding), softmax over the keys with fully masked
//! rows giving zeros, times V. Masking selects rather than adds -inf, so the program holds no
//! infinite constant unless the masked scores are asked for (`qk_matmul_output_mode = 2`).

use catml_core::ir::Var;
use catml_core::prim::Ops;
use catml_core::tensor::{DType, Tensor};

use super::nn::matmul_vars;
use crate::ctx::{broadcast_dims, Ctx, Value, R};

/// Masked scores take this value before the softmax: exp of it underflows to 0.
const MASKED: f64 = -1e30;

/// (B, S, H·D) -> (B, H, S, D).
fn split_heads(c: &mut Ctx, x: Var, heads: usize) -> R<Var> {
    let d = c.ty(x).dims().to_vec();
    if heads == 0 || d[2] % heads != 0 {
        return Err(c.err(format!(
            "hidden size {} is not a multiple of {heads} heads",
            d[2]
        )));
    }
    let r = t!(c, c.b.reshape(x, vec![d[0], d[1], heads, d[2] / heads]))?;
    t!(c, c.b.permute(r, vec![0, 2, 1, 3]))
}

fn bool_const(c: &mut Ctx, dims: Vec<usize>, data: Vec<bool>) -> R<Var> {
    let t = Tensor::bool(dims, data).map_err(|e| c.err(e.to_string()))?;
    t!(c, c.b.constant(t))
}

pub fn attention(c: &mut Ctx) -> R<Vec<Value>> {
    let left = c.int("left_window_size", -1)?;
    let right = c.int("right_window_size", -1)?;
    let (mut q, mut k, mut v) = (c.fvar(0)?, c.fvar(1)?, c.fvar(2)?);
    let dt = c.ty(q).dtype;
    let rank = c.ty(q).rank();
    if c.ty(k).rank() != rank || c.ty(v).rank() != rank || !(rank == 3 || rank == 4) {
        return Err(c.err("Q, K and V must all have rank 3 or all rank 4"));
    }
    if rank == 3 {
        let hq = c.int("q_num_heads", 0)? as usize;
        let hkv = c.int("kv_num_heads", 0)? as usize;
        q = split_heads(c, q, hq)?;
        k = split_heads(c, k, hkv)?;
        v = split_heads(c, v, hkv)?;
    }
    let qd = c.ty(q).dims().to_vec();
    let head = qd[3];
    let scale = match c.attr("scale") {
        Some(_) => c.float("scale", 1.0)? as f64,
        None => 1.0 / (head as f64).sqrt(),
    };
    let past = if c.has(4) || c.has(5) {
        if !(c.has(4) && c.has(5)) {
            return Err(c.err("past_key and past_value must be given together"));
        }
        let (pk, pv) = (c.fvar(4)?, c.fvar(5)?);
        let past = c.ty(pk).dims()[2];
        k = t!(c, c.b.concat(&[pk, k], 2))?;
        v = t!(c, c.b.concat(&[pv, v], 2))?;
        past
    } else {
        0
    };
    let (present_k, present_v) = (k, v);
    let (hq, hkv) = (qd[1], c.ty(k).dims()[1]);
    if hq != hkv {
        if hkv == 0 || hq % hkv != 0 || c.ty(v).dims()[1] != hkv {
            return Err(c.err(format!(
                "{hq} query heads do not group {hkv} key/value heads"
            )));
        }
        let idx: Vec<usize> = (0..hq).map(|h| h / (hq / hkv)).collect();
        k = t!(c, c.b.gather(k, 1, idx.clone()))?;
        v = t!(c, c.b.gather(v, 1, idx))?;
    }
    let (sq, skv) = (qd[2], c.ty(k).dims()[2]);
    let s = scale.sqrt();
    let qs = t!(c, c.b.scale(q, s))?;
    let ks = t!(c, c.b.scale(k, s))?;
    let kt = t!(c, c.b.permute(ks, vec![0, 1, 3, 2]))?;
    let mut qk = matmul_vars(c, qs, kt)?;
    let softcap = c.float("softcap", 0.0)? as f64;
    if softcap > 0.0 {
        let a = t!(c, c.b.scale(qk, 1.0 / softcap))?;
        let th = t!(c, c.b.tanh(a))?;
        qk = t!(c, c.b.scale(th, softcap))?;
    }
    let sdims = c.ty(qk).dims().to_vec();
    // What may be attended (bool) and the finite additive bias.
    let mut allowed: Option<Var> = None;
    let mut bias: Option<Var> = None;
    if c.has(3) {
        let mdims = c.dims(3)?;
        let pad = skv
            .checked_sub(*mdims.last().unwrap_or(&0))
            .ok_or_else(|| c.err(format!("attn_mask's last dim exceeds the {skv} keys")))?;
        let full: Vec<usize> = mdims[..mdims.len() - 1]
            .iter()
            .copied()
            .chain([skv])
            .collect();
        let bd = broadcast_dims(&full, &sdims)
            .ok_or_else(|| c.err(format!("attn_mask {mdims:?} does not broadcast")))?;
        let m = c.var(3)?;
        // Keys beyond the mask's last dim are masked.
        let (a, f) = if c.ty(m).dtype == DType::Bool {
            let mut a = m;
            if pad > 0 {
                let mut pd = mdims.clone();
                *pd.last_mut().expect("rank >= 1") = pad;
                let n = pd.iter().product();
                let p = bool_const(c, pd, vec![false; n])?;
                a = super::logic::concat_bool(c, a, p)?;
            }
            (a, None)
        } else {
            let lo = c.full(-f64::MAX, c.ty(m).dtype, &mdims)?;
            let mut a = t!(c, c.b.greater(m, lo))?;
            let z = c.full(0.0, c.ty(m).dtype, &mdims)?;
            let mut f = t!(c, c.b.select(a, m, z))?;
            if pad > 0 {
                let mut pd = mdims.clone();
                *pd.last_mut().expect("rank >= 1") = pad;
                let n = pd.iter().product();
                let p = bool_const(c, pd.clone(), vec![false; n])?;
                a = super::logic::concat_bool(c, a, p)?;
                let zp = c.full(0.0, c.ty(m).dtype, &pd)?;
                f = t!(c, c.b.concat(&[f, zp], mdims.len() - 1))?;
            }
            (a, Some(f))
        };
        allowed = Some(c.expand_to(a, &bd)?);
        if let Some(f) = f {
            bias = Some(c.expand_to(f, &bd)?);
        }
    }
    // Per-batch frontier offsets: the past length, or nonpad_kv_seqlen[b] - sq for an
    // external cache (whose keys from nonpad_kv_seqlen[b] on are padding).
    let batch = qd[0];
    let nonpad = if c.has(6) {
        if past > 0 {
            return Err(c.err("nonpad_kv_seqlen cannot be combined with past_key"));
        }
        let k = c.need_known(6, "nonpad_kv_seqlen")?.as_i64s();
        if k.len() != batch {
            return Err(c.err(format!(
                "nonpad_kv_seqlen has {} entries, batch is {batch}",
                k.len()
            )));
        }
        Some(k)
    } else {
        None
    };
    let offsets: Vec<i64> = match &nonpad {
        Some(k) => k.iter().map(|&n| n - sq as i64).collect(),
        None => vec![past as i64; batch],
    };
    let causal = c.int("is_causal", 0)? != 0;
    if causal || left >= 0 || right >= 0 || nonpad.is_some() {
        let mut data = Vec::with_capacity(batch * sq * skv);
        for (b, &off) in offsets.iter().enumerate() {
            for i in 0..sq as i64 {
                for j in 0..skv as i64 {
                    let diff = i + off - j;
                    let ok = (!causal || diff >= 0)
                        && (left < 0 || diff <= left)
                        && (right < 0 || -diff <= right)
                        && nonpad.as_ref().is_none_or(|k| j < k[b]);
                    data.push(ok);
                }
            }
        }
        let cm = bool_const(c, vec![batch, 1, sq, skv], data)?;
        allowed = Some(match allowed {
            None => cm,
            Some(a) => {
                let d = broadcast_dims(c.ty(a).dims(), &[batch, 1, sq, skv])
                    .ok_or_else(|| c.err("attn_mask does not broadcast"))?;
                let (a, cm) = (c.expand_to(a, &d)?, c.expand_to(cm, &d)?);
                t!(c, c.b.logical_and(a, cm))?
            }
        });
    }
    let allowed = match allowed {
        Some(a) => Some(c.expand_to(a, &sdims)?),
        None => None,
    };
    let mut scores = qk;
    if let Some(f) = bias {
        let f = c.expand_to(f, &sdims)?;
        scores = t!(c, c.b.add(scores, f))?;
    }
    let mode = c.int("qk_matmul_output_mode", 0)?;
    let want_qk = c.node.output.get(3).is_some_and(|o| !o.is_empty());
    let probs = match allowed {
        None => t!(c, c.b.softmax(scores, 3))?,
        Some(a) => {
            let low = c.full(MASKED, dt, &sdims)?;
            let sm = t!(c, c.b.select(a, scores, low))?;
            let m = t!(c, c.b.reduce_max(sm, Some(vec![3])))?;
            let m = t!(c, c.b.stop_gradient(m))?;
            let m = t!(c, c.b.broadcast(m, sdims.clone(), vec![0, 1, 2]))?;
            let d = t!(c, c.b.sub(sm, m))?;
            let e = t!(c, c.b.exp(d))?;
            let af = t!(c, c.b.convert(a, dt))?;
            let e = t!(c, c.b.mul(e, af))?;
            let sum = t!(c, c.b.sum(e, Some(vec![3])))?;
            let sum = t!(c, c.b.broadcast(sum, sdims.clone(), vec![0, 1, 2]))?;
            // A fully masked row sums to 0 and gives zeros.
            let zero = c.full(0.0, dt, &sdims)?;
            let one = c.full(1.0, dt, &sdims)?;
            let empty = t!(c, c.b.equal(sum, zero))?;
            let safe = t!(c, c.b.select(empty, one, sum))?;
            t!(c, c.b.div(e, safe))?
        }
    };
    let y = matmul_vars(c, probs, v)?;
    let y = if rank == 3 {
        let yd = c.ty(y).dims().to_vec();
        let p = t!(c, c.b.permute(y, vec![0, 2, 1, 3]))?;
        t!(c, c.b.reshape(p, vec![yd[0], yd[2], yd[1] * yd[3]]))?
    } else {
        y
    };
    let mut outs = vec![Value::Var(y), Value::Var(present_k), Value::Var(present_v)];
    if want_qk {
        let o = match mode {
            0 | 1 => qk,
            2 => match allowed {
                None => scores,
                Some(a) => {
                    let ninf = c.full(f64::NEG_INFINITY, dt, &sdims)?;
                    t!(c, c.b.select(a, scores, ninf))?
                }
            },
            3 => probs,
            other => return Err(c.unsupported(format!("qk_matmul_output_mode {other}"))),
        };
        outs.push(Value::Var(o));
    }
    outs.truncate(c.node.output.len().max(1));
    Ok(outs)
}
