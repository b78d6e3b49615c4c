//! ConvTranspose (1-D and 2-D) as an ordinary convolution: the input spread out by the stride
//! (zeros between elements, a constant linear map per axis), padded by dilation (k - 1) minus
//! the pads (plus output_padding at the end), convolved at stride 1 with the kernel flipped and
//! its channel axes swapped within each group.

use catml_core::ir::Var;
use catml_core::prim::{Conv2dAttrs, Ops};

use super::linmap::apply_along;
use crate::ctx::{Ctx, Value, R};

fn attr_vec(c: &Ctx, name: &str, n: usize, d: i64) -> R<Vec<i64>> {
    let v = c.ints(name)?.unwrap_or_else(|| vec![d; n]);
    if v.len() != n {
        return Err(c.err(format!(
            "attribute `{name}` {v:?} does not fit {n} spatial axes"
        )));
    }
    Ok(v)
}

pub fn conv_transpose(c: &mut Ctx) -> R<Vec<Value>> {
    let (mut x, mut w) = (c.fvar(0)?, c.fvar(1)?);
    let xd = c.ty(x).dims().to_vec();
    let wd = c.ty(w).dims().to_vec();
    let n = xd.len().saturating_sub(2);
    if !(1..=2).contains(&n) || wd.len() != xd.len() {
        return Err(c.unsupported(format!("{n}-D ConvTranspose (CatML convolves 1-D and 2-D)")));
    }
    let groups = c.int("group", 1)?.max(1) as usize;
    let (cin, cout_g) = (wd[0], wd[1]);
    if cin != xd[1] || cin % groups != 0 {
        return Err(c.err(format!(
            "weight {wd:?} does not fit input {xd:?} in {groups} groups"
        )));
    }
    let k: Vec<i64> = wd[2..].iter().map(|&v| v as i64).collect();
    let strides = attr_vec(c, "strides", n, 1)?;
    let dil = attr_vec(c, "dilations", n, 1)?;
    let outpad = attr_vec(c, "output_padding", n, 0)?;
    if strides.iter().chain(&dil).any(|&v| v < 1) || outpad.iter().any(|&v| v < 0) {
        return Err(c.err("strides and dilations must be positive, output_padding not negative"));
    }
    let auto = c.string("auto_pad", "NOTSET")?;
    let natural = |i: usize, pads: i64| {
        strides[i] * (xd[i + 2] as i64 - 1) + outpad[i] + (k[i] - 1) * dil[i] + 1 - pads
    };
    let (begin, end): (Vec<i64>, Vec<i64>) = match (auto.as_str(), c.ints("output_shape")?) {
        ("SAME_UPPER" | "SAME_LOWER", shape) => {
            let shape =
                shape.unwrap_or_else(|| (0..n).map(|i| xd[i + 2] as i64 * strides[i]).collect());
            (0..n)
                .map(|i| {
                    let total = natural(i, 0) - shape[i];
                    if auto == "SAME_UPPER" {
                        (total / 2, total - total / 2)
                    } else {
                        (total - total / 2, total / 2)
                    }
                })
                .unzip()
        }
        ("NOTSET", shape) => {
            let p = attr_vec(c, "pads", 2 * n, 0)?;
            if let Some(s) = shape {
                if (0..n).any(|i| natural(i, p[i] + p[n + i]) != s[i]) {
                    return Err(c.unsupported("an output_shape other than the natural one"));
                }
            }
            (p[..n].to_vec(), p[n..].to_vec())
        }
        (other, _) => return Err(c.unsupported(format!("auto_pad {other}"))),
    };
    if n == 1 {
        x = t!(c, c.b.reshape(x, vec![xd[0], xd[1], 1, xd[2]]))?;
        w = t!(c, c.b.reshape(w, vec![wd[0], wd[1], 1, wd[2]]))?;
    }
    let (xd4, wd4) = (c.ty(x).dims().to_vec(), c.ty(w).dims().to_vec());
    let off = 2 - n; // 1-D is lifted to the last axis
    let mut pads = [[0usize; 2]; 2];
    for i in 0..n {
        let a = 2 + off + i;
        // Spread by the stride: input position j goes to output position j · s.
        let s = strides[i] as usize;
        let len = xd4[a];
        if s > 1 {
            let out = s * (len - 1) + 1;
            let m: Vec<f64> = (0..out * len)
                .map(|p| ((p % len) * s == p / len) as i64 as f64)
                .collect();
            x = apply_along(c, x, a, &m, out, None)?;
        }
        let reach = (k[i] - 1) * dil[i];
        let (pb, pe) = (reach - begin[i], reach - end[i] + outpad[i]);
        if pb < 0 || pe < 0 {
            return Err(c.unsupported("pads larger than the kernel's reach"));
        }
        pads[off + i] = [pb as usize, pe as usize];
    }
    // Kernel: (Cin, Cout/g, kh, kw) -> (g, Cout/g, Cin/g, kh, kw) -> (Cout, Cin/g, kh, kw),
    // flipped in space.
    let cin_g = cin / groups;
    let g5 = t!(
        c,
        c.b.reshape(w, vec![groups, cin_g, cout_g, wd4[2], wd4[3]])
    )?;
    let p5 = t!(c, c.b.permute(g5, vec![0, 2, 1, 3, 4]))?;
    let mut kw: Var = t!(
        c,
        c.b.reshape(p5, vec![groups * cout_g, cin_g, wd4[2], wd4[3]])
    )?;
    for a in [2, 3] {
        let len = wd4[a];
        if len > 1 {
            kw = t!(c, c.b.gather(kw, a, (0..len).rev().collect()))?;
        }
    }
    let bias = if c.has(2) { Some(c.fvar(2)?) } else { None };
    let d2 = if n == 1 {
        [1, dil[0] as usize]
    } else {
        [dil[0] as usize, dil[1] as usize]
    };
    let attrs = Conv2dAttrs {
        stride: [1, 1],
        padding: pads,
        dilation: d2,
        groups,
    };
    let y = t!(c, c.b.conv2d(x, kw, bias, attrs))?;
    let y = if n == 1 {
        let d = c.ty(y).dims().to_vec();
        t!(c, c.b.reshape(y, vec![d[0], d[1], d[3]]))?
    } else {
        y
    };
    Ok(vec![Value::Var(y)])
}
