//! LRN: local response normalisation across channels, the window sum as a product with a
//! constant band matrix.

use catml_core::prim::Ops;

use super::shape::reshape_to;
use crate::ctx::{Ctx, Value, R};

/// `y = x / (bias + alpha / size · Σ x²)^beta`, the sum over channels
/// `c - ⌊(size-1)/2⌋ ..= c + ⌈(size-1)/2⌉` (clipped to the channels there are).
pub fn lrn(c: &mut Ctx) -> R<Vec<Value>> {
    let x = c.fvar(0)?;
    let d = c.ty(x).dims().to_vec();
    if d.len() < 3 {
        return Err(c.err(format!("input has shape {d:?}, expected (N, C, ...)")));
    }
    let size = c.int("size", 0)?;
    if size <= 0 {
        return Err(c.err(format!(
            "attribute `size` is {size}, expected a positive count"
        )));
    }
    let size = size as usize;
    let (alpha, beta, bias) = (
        c.float("alpha", 1e-4)? as f64,
        c.float("beta", 0.75)? as f64,
        c.float("bias", 1.0)? as f64,
    );
    let ch = d[1];
    let (lo, hi) = ((size - 1) / 2, (size - 1).div_ceil(2));
    // band[i, j] = 1 when channel i is in channel j's window.
    let mut band = vec![0.0; ch * ch];
    for j in 0..ch {
        for i in j.saturating_sub(lo)..=(j + hi).min(ch - 1) {
            band[i * ch + j] = 1.0;
        }
    }
    let dtype = c.ty(x).dtype;
    let band = c.constant_of(dtype, &[ch, ch], band)?;
    // Channels last: (N, ..., C) as rows of C.
    let mut perm: Vec<usize> = vec![0];
    perm.extend(2..d.len());
    perm.push(1);
    let sq = t!(c, c.b.mul(x, x))?;
    let sq = t!(c, c.b.permute(sq, perm.clone()))?;
    let pd = c.ty(sq).dims().to_vec();
    let rows: usize = pd[..pd.len() - 1].iter().product();
    let sq = reshape_to(c, sq, vec![rows, ch])?;
    let s = t!(c, c.b.matmul(sq, band))?;
    let s = reshape_to(c, s, pd)?;
    let mut inv = vec![0; d.len()];
    for (k, &a) in perm.iter().enumerate() {
        inv[a] = k;
    }
    let s = t!(c, c.b.permute(s, inv))?;
    let s = t!(c, c.b.scale(s, alpha / size as f64))?;
    let bv = t!(c, c.b.full_like(bias, s))?;
    let base = t!(c, c.b.add(s, bv))?;
    let e = t!(c, c.b.full_like(-beta, base))?;
    let f = t!(c, c.b.pow(base, e))?;
    Ok(vec![Value::Var(t!(c, c.b.mul(x, f))?)])
}
