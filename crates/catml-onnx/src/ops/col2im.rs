//! Col2Im: the columns of sliding blocks summed back into an image, as one `scatter_add` with
//! targets computed at import (image and block shapes must be known).

use catml_core::prim::Ops;

use super::shape::reshape_to;
use crate::ctx::{Ctx, Value, R};

/// Input (N, C·∏block, L) to output (N, C, image...): column entry (c, b, l) adds into pixel
/// `l_d·stride_d - pad_begin_d + b_d·dilation_d` per spatial dim d, when inside the image.
pub fn col2im(c: &mut Ctx) -> R<Vec<Value>> {
    let x = c.fvar(0)?;
    let xd = c.ty(x).dims().to_vec();
    let image: Vec<i64> = c.need_known(1, "image_shape")?.as_i64s();
    let block: Vec<i64> = c.need_known(2, "block_shape")?.as_i64s();
    let s = image.len();
    if s == 0 || block.len() != s || image.iter().chain(&block).any(|&v| v <= 0) {
        return Err(c.err(format!(
            "image_shape {image:?} and block_shape {block:?} must be positive and of one length"
        )));
    }
    let list = |c: &Ctx, name: &str, n: usize, d: i64| -> R<Vec<i64>> {
        let v = c.ints(name)?.unwrap_or_else(|| vec![d; n]);
        if v.len() != n {
            return Err(c.err(format!(
                "attribute `{name}` has {} entries, expected {n}",
                v.len()
            )));
        }
        Ok(v)
    };
    let dil = list(c, "dilations", s, 1)?;
    let strides = list(c, "strides", s, 1)?;
    let pads = list(c, "pads", 2 * s, 0)?;
    if dil.iter().chain(&strides).any(|&v| v <= 0) || pads.iter().any(|&v| v < 0) {
        return Err(c.err("dilations and strides must be positive, pads non-negative"));
    }
    // Blocks per spatial dim.
    let mut counts = Vec::with_capacity(s);
    for d in 0..s {
        let span = image[d] + pads[d] + pads[s + d] - dil[d] * (block[d] - 1) - 1;
        if span < 0 {
            return Err(c.err(format!(
                "the block does not fit the padded image on dim {d}"
            )));
        }
        counts.push((span / strides[d] + 1) as usize);
    }
    let k: usize = block.iter().product::<i64>() as usize;
    let l: usize = counts.iter().product();
    if xd.len() != 3 || xd[1] % k != 0 || xd[2] != l {
        return Err(c.err(format!("input has shape {xd:?}, expected (N, C·{k}, {l})")));
    }
    let (n, ch) = (xd[0], xd[1] / k);
    let pixels: usize = image.iter().product::<i64>() as usize;
    // Source positions (within the k·l entries of one channel) that land inside, and targets.
    let (mut src, mut dst) = (Vec::new(), Vec::new());
    for b in 0..k {
        for p in 0..l {
            let (mut rb, mut rp, mut flat, mut inside) = (b, p, 0i64, true);
            let mut bd = vec![0i64; s];
            let mut pd = vec![0i64; s];
            for d in (0..s).rev() {
                bd[d] = (rb % block[d] as usize) as i64;
                rb /= block[d] as usize;
                pd[d] = (rp % counts[d]) as i64;
                rp /= counts[d];
            }
            for d in 0..s {
                let pos = pd[d] * strides[d] - pads[d] + bd[d] * dil[d];
                if pos < 0 || pos >= image[d] {
                    inside = false;
                    break;
                }
                flat = flat * image[d] + pos;
            }
            if inside {
                src.push(b * l + p);
                dst.push(flat as usize);
            }
        }
    }
    if src.is_empty() {
        return Err(c.unsupported("no block entry lands inside the image"));
    }
    let cols = reshape_to(c, x, vec![n, ch, k * l])?;
    let cols = super::shape::take_along(c, cols, 2, src)?;
    let y = t!(c, c.b.scatter_add(cols, 2, dst, pixels))?;
    let mut od = vec![n, ch];
    od.extend(image.iter().map(|&v| v as usize));
    Ok(vec![Value::Var(reshape_to(c, y, od)?)])
}
