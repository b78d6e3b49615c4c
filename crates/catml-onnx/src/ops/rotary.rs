//! RotaryEmbedding: each head's first `rotary_embedding_dim` features rotated pairwise by the
//! angles whose cosines and sines the caches hold (rows picked by `position_ids` at run time).

use catml_core::prim::Ops;

use super::shape::reshape_to;
use crate::ctx::{Ctx, Value, R};

/// With pairs (x1, x2) (the two halves, or even and odd features when `interleaved`):
/// `x1' = cos·x1 - sin·x2`, `x2' = sin·x1 + cos·x2`; features past the rotary dim pass through.
pub fn rotary_embedding(c: &mut Ctx) -> R<Vec<Value>> {
    let x = c.fvar(0)?;
    let xd = c.ty(x).dims().to_vec();
    // Work in (B, heads, S, D).
    let x4 = match xd.len() {
        4 => x,
        3 => {
            let heads = c.int("num_heads", 0)?;
            if heads <= 0 || xd[2] % heads as usize != 0 {
                return Err(c.err(format!(
                    "a rank-3 input needs num_heads dividing its hidden size {}, got {heads}",
                    xd[2]
                )));
            }
            let h = heads as usize;
            let r = reshape_to(c, x, vec![xd[0], xd[1], h, xd[2] / h])?;
            t!(c, c.b.permute(r, vec![0, 2, 1, 3]))?
        }
        r => return Err(c.err(format!("input has rank {r}, expected 3 or 4"))),
    };
    let d4 = c.ty(x4).dims().to_vec();
    let (b, heads, s, d) = (d4[0], d4[1], d4[2], d4[3]);
    let rot = match c.int("rotary_embedding_dim", 0)? {
        0 if d % 2 == 0 => d,
        r if r > 0 && r as usize <= d && r % 2 == 0 => r as usize,
        r => {
            return Err(c.err(format!(
                "rotary_embedding_dim {r} must be even and at most the head size {d}"
            )))
        }
    };
    let half = rot / 2;
    let caches = [c.fvar(1)?, c.fvar(2)?];
    let mut cs = Vec::with_capacity(2);
    for (k, cache) in caches.into_iter().enumerate() {
        let cd = c.ty(cache).dims().to_vec();
        let picked = if c.has(3) {
            if cd.len() != 2 {
                return Err(c.err(format!("cache {} has shape {cd:?}, expected rank 2", k + 1)));
            }
            if c.dims(3)? != [b, s] {
                return Err(c.err(format!("position_ids must have shape {:?}", [b, s])));
            }
            let pos = c.var(3)?;
            t!(c, c.b.take(cache, pos))?
        } else {
            cache
        };
        let pd = c.ty(picked).dims().to_vec();
        if pd != [b, s, half] {
            return Err(c.err(format!(
                "cache {} gives {pd:?} per position, expected {:?}",
                k + 1,
                [b, s, half]
            )));
        }
        cs.push(t!(
            c,
            c.b.broadcast(picked, vec![b, heads, s, half], vec![0, 2, 3])
        )?);
    }
    let (cos, sin) = (cs[0], cs[1]);
    let (i1, i2): (Vec<usize>, Vec<usize>) = if c.int("interleaved", 0)? != 0 {
        (
            (0..half).map(|k| 2 * k).collect(),
            (0..half).map(|k| 2 * k + 1).collect(),
        )
    } else {
        ((0..half).collect(), (half..rot).collect())
    };
    let x1 = t!(c, c.b.gather(x4, 3, i1.clone()))?;
    let x2 = t!(c, c.b.gather(x4, 3, i2.clone()))?;
    let (cx1, sx2) = (t!(c, c.b.mul(cos, x1))?, t!(c, c.b.mul(sin, x2))?);
    let real = t!(c, c.b.sub(cx1, sx2))?;
    let (sx1, cx2) = (t!(c, c.b.mul(sin, x1))?, t!(c, c.b.mul(cos, x2))?);
    let imag = t!(c, c.b.add(sx1, cx2))?;
    // [real, imag, pass-through] put back in feature order.
    let mut parts = vec![real, imag];
    let mut order: Vec<usize> = i1.into_iter().chain(i2).collect();
    if rot < d {
        parts.push(t!(c, c.b.gather(x4, 3, (rot..d).collect()))?);
        order.extend(rot..d);
    }
    let cat = t!(c, c.b.concat(&parts, 3))?;
    let mut inverse = vec![0; d];
    for (k, &f) in order.iter().enumerate() {
        inverse[f] = k;
    }
    let y = super::shape::take_along(c, cat, 3, inverse)?;
    let y = if xd.len() == 3 {
        let p = t!(c, c.b.permute(y, vec![0, 2, 1, 3]))?;
        reshape_to(c, p, xd)?
    } else {
        y
    };
    Ok(vec![Value::Var(y)])
}
