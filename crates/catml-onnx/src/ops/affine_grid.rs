//! AffineGrid with the output size known at import: each batch's affine matrix applied to the
//! constant grid of normalised sampling coordinates, one matrix product.

use catml_core::prim::Ops;

use super::shape::reshape_to;
use crate::ctx::{Ctx, Value, R};

/// Normalised coordinate i of n: `-1 + 2i / (n - 1)` with `align_corners`, else
/// `-1 + (2i + 1) / n`.
fn coord(i: usize, n: usize, align: bool) -> f64 {
    if align {
        if n == 1 {
            -1.0
        } else {
            -1.0 + 2.0 * i as f64 / (n - 1) as f64
        }
    } else {
        -1.0 + (2 * i + 1) as f64 / n as f64
    }
}

/// `grid[b, (d,) h, w] = θ_b · [x_w, y_h, (z_d,) 1]`, coordinates listed fastest axis first.
pub fn affine_grid(c: &mut Ctx) -> R<Vec<Value>> {
    let theta = c.fvar(0)?;
    let td = c.ty(theta).dims().to_vec();
    let size = c.need_known(1, "size")?.as_i64s();
    let align = c.int("align_corners", 0)? != 0;
    let k = size.len().saturating_sub(2);
    if !(k == 2 || k == 3) || size.iter().any(|&v| v <= 0) {
        return Err(c.err(format!(
            "size {size:?} must be (N, C, H, W) or (N, C, D, H, W)"
        )));
    }
    let n = size[0] as usize;
    if td != [n, k, k + 1] {
        return Err(c.err(format!(
            "theta has shape {td:?}, expected {:?}",
            [n, k, k + 1]
        )));
    }
    let spatial: Vec<usize> = size[2..].iter().map(|&v| v as usize).collect();
    let p: usize = spatial.iter().product();
    // Base (k + 1, P): row j is the coordinate along spatial axis k - 1 - j, then ones.
    let mut base = vec![0.0; (k + 1) * p];
    for q in 0..p {
        let mut rest = q;
        let mut idx = vec![0; k];
        for a in (0..k).rev() {
            idx[a] = rest % spatial[a];
            rest /= spatial[a];
        }
        for j in 0..k {
            let a = k - 1 - j;
            base[j * p + q] = coord(idx[a], spatial[a], align);
        }
        base[k * p + q] = 1.0;
    }
    let dtype = c.ty(theta).dtype;
    let g = c.constant_of(dtype, &[k + 1, p], base)?;
    let t2 = reshape_to(c, theta, vec![n * k, k + 1])?;
    let y = t!(c, c.b.matmul(t2, g))?;
    let y = reshape_to(c, y, vec![n, k, p])?;
    let y = t!(c, c.b.permute(y, vec![0, 2, 1]))?;
    let mut od = vec![n];
    od.extend(&spatial);
    od.push(k);
    Ok(vec![Value::Var(reshape_to(c, y, od)?)])
}
