//! DFT with static lengths: the transform along one axis as products with constant cosine and
//! sine matrices (forward, inverse, one-sided, a known `dft_length` padding or truncating).

use std::f64::consts::PI;

use catml_core::ir::Var;
use catml_core::prim::Ops;

use super::shape::reshape_to;
use crate::ctx::{Ctx, Value, R};

/// With N = dft_length and θ = 2πkn/N: forward `X_k = Σ_n x_n e^{-iθ}` (k < N, or ⌊N/2⌋ + 1
/// when one-sided); inverse `x_n = (1/N) Σ_k X_k e^{iθ}`; the one-sided inverse reads the
/// ⌊N/2⌋ + 1 given frequencies as a Hermitian spectrum and returns the real signal.
pub fn dft(c: &mut Ctx) -> R<Vec<Value>> {
    let x = c.fvar(0)?;
    let dtype = c.ty(x).dtype;
    let xd = c.ty(x).dims().to_vec();
    let r = xd.len();
    if r < 2 || !(xd[r - 1] == 1 || xd[r - 1] == 2) {
        return Err(c.err(format!(
            "input has shape {xd:?}; its last dim must be 1 (real) or 2 (complex)"
        )));
    }
    let axis = if c.opset >= 20 {
        if c.has(2) {
            let a = c.need_known(2, "axis")?.as_i64s();
            *a.first().ok_or_else(|| c.err("axis input is empty"))?
        } else {
            -2
        }
    } else {
        c.int("axis", 1)?
    };
    let axis = c.axis(axis, r)?;
    if axis == r - 1 {
        return Err(c.err("the transform axis cannot be the real/imaginary axis"));
    }
    let inverse = c.int("inverse", 0)? != 0;
    let onesided = c.int("onesided", 0)? != 0;
    let l = xd[axis];
    let n = if c.has(1) {
        let v = c.need_known(1, "dft_length")?.as_i64s();
        match v.first() {
            Some(&v) if v > 0 => v as usize,
            _ => return Err(c.err(format!("dft_length {v:?} must be one positive length"))),
        }
    } else if inverse && onesided {
        2 * (l.max(1) - 1)
    } else {
        l
    };
    if n == 0 {
        return Err(c.unsupported("a transform of length 0"));
    }
    // Real and imaginary parts as (P, L) with the transform axis last.
    let mut perm: Vec<usize> = (0..r - 1).filter(|&a| a != axis).collect();
    perm.push(axis);
    let rest: Vec<usize> = perm[..r - 2].iter().map(|&a| xd[a]).collect();
    let p: usize = rest.iter().product();
    let part = |c: &mut Ctx, k: usize| -> R<Var> {
        let v = t!(c, c.b.gather(x, r - 1, vec![k]))?;
        let v = reshape_to(c, v, xd[..r - 1].to_vec())?;
        let v = if perm.iter().enumerate().all(|(a, &b)| a == b) {
            v
        } else {
            t!(c, c.b.permute(v, perm.clone()))?
        };
        reshape_to(c, v, vec![p, l])
    };
    let re = part(c, 0)?;
    let im = if xd[r - 1] == 2 {
        Some(part(c, 1)?)
    } else {
        None
    };
    // Input positions used (the first min(L, N); zero padding adds nothing) and outputs.
    let used = l.min(n);
    let (k_out, real_out) = match (inverse, onesided) {
        (false, false) | (true, false) => (n, false),
        (false, true) => (n / 2 + 1, false),
        (true, true) => (n, true),
    };
    // out_re = re·A + im·B, out_im = re·C + im·D, matrices (L, K) over input j and output k.
    let (mut a, mut bm, mut cm, mut dm) = (
        vec![0.0; l * k_out],
        vec![0.0; l * k_out],
        vec![0.0; l * k_out],
        vec![0.0; l * k_out],
    );
    let nf = n as f64;
    for j in 0..used {
        for k in 0..k_out {
            let th = 2.0 * PI * ((j * k) % n) as f64 / nf;
            let (co, si) = (th.cos(), th.sin());
            let e = j * k_out + k;
            if !inverse {
                // e^{-iθ}: re' = re cos + im sin, im' = im cos - re sin
                (a[e], bm[e], cm[e], dm[e]) = (co, si, -si, co);
            } else if !real_out {
                // e^{iθ} / N: re' = re cos - im sin, im' = re sin + im cos
                (a[e], bm[e], cm[e], dm[e]) = (co / nf, -si / nf, si / nf, co / nf);
            } else {
                // Hermitian weight: bins 0 and N/2 once, the others twice (their mirror).
                let w = if j == 0 || 2 * j == n { 1.0 } else { 2.0 };
                if j > n / 2 {
                    continue;
                }
                (a[e], bm[e]) = (w * co / nf, -w * si / nf);
            }
        }
    }
    let mat = |c: &mut Ctx, v: Vec<f64>| c.constant_of(dtype, &[l, k_out], v);
    let mut out_parts = Vec::new();
    let lin = |c: &mut Ctx, m1: Vec<f64>, m2: Vec<f64>| -> R<Var> {
        let ma = mat(c, m1)?;
        let mut y = t!(c, c.b.matmul(re, ma))?;
        if let Some(im) = im {
            let mb = mat(c, m2)?;
            let z = t!(c, c.b.matmul(im, mb))?;
            y = t!(c, c.b.add(y, z))?;
        }
        Ok(y)
    };
    out_parts.push(lin(c, a, bm)?);
    if !real_out {
        out_parts.push(lin(c, cm, dm)?);
    }
    // Back to the input's layout, with the real/imaginary axis last.
    let mut od: Vec<usize> = rest.clone();
    od.push(k_out);
    od.push(1);
    let mut inv = vec![0; r];
    for (k, &a) in perm.iter().enumerate() {
        inv[a] = k;
    }
    inv[r - 1] = r - 1;
    let mut parts = Vec::with_capacity(2);
    for v in out_parts {
        let v = reshape_to(c, v, od.clone())?;
        let v = if inv.iter().enumerate().all(|(a, &b)| a == b) {
            v
        } else {
            t!(c, c.b.permute(v, inv.clone()))?
        };
        parts.push(v);
    }
    let y = if parts.len() == 1 {
        parts[0]
    } else {
        t!(c, c.b.concat(&parts, r - 1))?
    };
    Ok(vec![Value::Var(y)])
}
