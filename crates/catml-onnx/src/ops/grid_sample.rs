//! GridSample: every output point reads the input at a position the grid gives (a program
//! value). Per spatial axis the position becomes taps (an integer index computed in floats by
//! `floor` or `round`, and a weight); the input, laid out as rows (N·S, C), is read at each
//! combination of taps by `take` at runtime indices, and the rows are summed with the products
//! of the taps' weights. Derivatives reach the input through `take` and the grid through the
//! weights (linear and cubic); indices are integers and carry none. Semantics:
//! `docs/onnx-import.md`.

use catml_core::ir::Var;
use catml_core::prim::Ops;
use catml_core::tensor::DType;

use super::shape::reshape_to;
use crate::ctx::{Ctx, Value, R};

#[derive(Debug, Clone, Copy, PartialEq)]
enum Mode {
    Nearest,
    Linear,
    Cubic,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Padding {
    Zeros,
    Border,
    Reflection,
}

/// One tap of one axis: the index (integer-valued floats, possibly outside the axis) and its
/// weight (`None` is 1).
struct Tap {
    index: Var,
    weight: Option<Var>,
}

fn mode(c: &Ctx) -> R<Mode> {
    // Opset 20 renamed bilinear and bicubic to linear and cubic.
    let (default, names): (&str, [(&str, Mode); 3]) = if c.opset >= 20 {
        (
            "linear",
            [
                ("linear", Mode::Linear),
                ("nearest", Mode::Nearest),
                ("cubic", Mode::Cubic),
            ],
        )
    } else {
        (
            "bilinear",
            [
                ("bilinear", Mode::Linear),
                ("nearest", Mode::Nearest),
                ("bicubic", Mode::Cubic),
            ],
        )
    };
    let m = c.string("mode", default)?;
    names
        .iter()
        .find(|(n, _)| *n == m)
        .map(|(_, v)| *v)
        .ok_or_else(|| {
            let known: Vec<&str> = names.iter().map(|(n, _)| *n).collect();
            c.err(format!(
                "attribute `mode` is \"{m}\"; opset {} knows {known:?}",
                c.opset
            ))
        })
}

fn padding(c: &Ctx) -> R<Padding> {
    Ok(match c.string("padding_mode", "zeros")?.as_str() {
        "zeros" => Padding::Zeros,
        "border" => Padding::Border,
        "reflection" => Padding::Reflection,
        other => {
            return Err(c.err(format!(
                "attribute `padding_mode` is \"{other}\"; expected zeros, border or reflection"
            )))
        }
    })
}

/// `x mod p` in [0, p) for a constant p > 0: `x - p floor(x / p)` (a correctly rounded
/// division, so integer multiples of p give exact quotients).
fn modulo(c: &mut Ctx, x: Var, p: f64) -> R<Var> {
    let pp = t!(c, c.b.full_like(p, x))?;
    let q = t!(c, c.b.div(x, pp))?;
    let f = t!(c, c.b.floor(q))?;
    let fp = t!(c, c.b.scale(f, p))?;
    t!(c, c.b.sub(x, fp))
}

fn plus(c: &mut Ctx, x: Var, k: f64) -> R<Var> {
    if k == 0.0 {
        return Ok(x);
    }
    let kk = t!(c, c.b.full_like(k, x))?;
    t!(c, c.b.add(x, kk))
}

/// Whether x lies outside [lo, hi].
fn outside(c: &mut Ctx, x: Var, lo: f64, hi: f64) -> R<Var> {
    let l = t!(c, c.b.full_like(lo, x))?;
    let h = t!(c, c.b.full_like(hi, x))?;
    let below = t!(c, c.b.less(x, l))?;
    let above = t!(c, c.b.greater(x, h))?;
    t!(c, c.b.logical_or(below, above))
}

/// A position outside the borders [lo, hi] brought back: clamped to the axis (border), or
/// reflected by the borders until inside (reflection: the triangle wave of period 2(hi - lo)).
fn pad_position(c: &mut Ctx, x: Var, pad: Padding, lo: f64, hi: f64, d: usize) -> R<Var> {
    let moved = match pad {
        Padding::Zeros => return Ok(x),
        Padding::Border => t!(c, c.b.clip(x, 0.0, (d - 1) as f64))?,
        Padding::Reflection => {
            let range = hi - lo;
            if range <= 0.0 {
                // One pixel with align_corners: every finite position is 0 already.
                return Ok(x);
            }
            // lo + range - |((x - lo) mod 2 range) - range|
            let u = plus(c, x, -lo)?;
            let m = modulo(c, u, 2.0 * range)?;
            let m = plus(c, m, -range)?;
            let a = t!(c, c.b.abs(m))?;
            let a = t!(c, c.b.neg(a))?;
            plus(c, a, lo + range)?
        }
    };
    let out = outside(c, x, lo, hi)?;
    t!(c, c.b.select(out, moved, x))
}

/// The index actually read for an integer-valued index `u` of an axis of size d, and for zeros
/// padding the 0/1 factor of whether u lies on the axis.
fn pad_index(c: &mut Ctx, u: Var, pad: Padding, align: bool, d: usize) -> R<(Var, Option<Var>)> {
    let last = (d - 1) as f64;
    match pad {
        Padding::Zeros => {
            let off = outside(c, u, 0.0, last)?;
            let on = t!(c, c.b.logical_not(off))?;
            let dtype = c.ty(u).dtype;
            let f = t!(c, c.b.convert(on, dtype))?;
            Ok((t!(c, c.b.clip(u, 0.0, last))?, Some(f)))
        }
        Padding::Border => Ok((t!(c, c.b.clip(u, 0.0, last))?, None)),
        Padding::Reflection => {
            // Reflected by the pixel edges (-1 reads 0) without align_corners, by the pixel
            // centres (-1 reads 1) with it.
            let period = if align { 2 * (d - 1) } else { 2 * d };
            if period == 0 {
                return Ok((t!(c, c.b.full_like(0.0, u))?, None));
            }
            let m = modulo(c, u, period as f64)?;
            let top = if align { period } else { period - 1 } as f64;
            let nm = t!(c, c.b.neg(m))?;
            let back = plus(c, nm, top)?;
            Ok((t!(c, c.b.minimum(m, back))?, None))
        }
    }
}

/// Keys' cubic convolution weights (a = -0.75) of the four taps at distances t + 1, t, 1 - t,
/// 2 - t, for t in [0, 1).
fn cubic_weights(c: &mut Ctx, t: Var) -> R<[Var; 4]> {
    const A: f64 = -0.75;
    // Far taps (|s| in [1, 2]): ((A s - 5A) s + 8A) s - 4A.
    let far = |c: &mut Ctx, s: Var| -> R<Var> {
        let p = t!(c, c.b.scale(s, A))?;
        let p = plus(c, p, -5.0 * A)?;
        let p = t!(c, c.b.mul(p, s))?;
        let p = plus(c, p, 8.0 * A)?;
        let p = t!(c, c.b.mul(p, s))?;
        plus(c, p, -4.0 * A)
    };
    // Near taps (|s| in [0, 1]): ((A + 2) s - (A + 3)) s² + 1.
    let near = |c: &mut Ctx, s: Var| -> R<Var> {
        let p = t!(c, c.b.scale(s, A + 2.0))?;
        let p = plus(c, p, -(A + 3.0))?;
        let p = t!(c, c.b.mul(p, s))?;
        let p = t!(c, c.b.mul(p, s))?;
        plus(c, p, 1.0)
    };
    let t1 = plus(c, t, 1.0)?;
    let nt = t!(c, c.b.neg(t))?;
    let one_t = plus(c, nt, 1.0)?;
    let two_t = plus(c, nt, 2.0)?;
    Ok([far(c, t1)?, near(c, t)?, near(c, one_t)?, far(c, two_t)?])
}

/// GridSample for X (N, C, d1..dr) and grid (N, o1..or, r): Y (N, C, o1..or).
pub fn grid_sample(c: &mut Ctx) -> R<Vec<Value>> {
    let x = c.fvar(0)?;
    let mut grid = c.fvar(1)?;
    let xd = c.ty(x).dims().to_vec();
    let gd = c.ty(grid).dims().to_vec();
    let dtype = c.ty(x).dtype;
    let r = xd.len().saturating_sub(2);
    if r == 0 || (c.opset < 20 && r != 2) {
        return Err(c.err(format!(
            "input X has shape {xd:?}; opset {} takes (N, C, H, W){}",
            c.opset,
            if c.opset >= 20 {
                " or more spatial axes"
            } else {
                ""
            }
        )));
    }
    if gd.len() != r + 2 || gd[0] != xd[0] || gd[r + 1] != r {
        return Err(c.err(format!(
            "grid has shape {gd:?}; for X of shape {xd:?} it must be (N, ..., {r}) with N = {} \
             and {r} output axes",
            xd[0]
        )));
    }
    if c.ty(grid).dtype != dtype {
        grid = t!(c, c.b.convert(grid, dtype))?;
    }
    let mode = mode(c)?;
    let pad = padding(c)?;
    let align = c.int("align_corners", 0)? != 0;
    let (n, ch) = (xd[0], xd[1]);
    let dims = &xd[2..];
    let s: usize = dims.iter().product();
    let p: usize = gd[1..=r].iter().product();
    let m = n * p;
    // Each spatial axis's taps; the grid lists coordinates fastest axis first.
    let g2 = reshape_to(c, grid, vec![m, r])?;
    let mut axes: Vec<Vec<Tap>> = Vec::with_capacity(r);
    for (i, &d) in dims.iter().enumerate() {
        let gi = t!(c, c.b.gather(g2, 1, vec![r - 1 - i]))?;
        let gi = reshape_to(c, gi, vec![m])?;
        // Unnormalised: (g + 1)(d - 1)/2 with align_corners, else ((g + 1) d - 1)/2.
        let df = d as f64;
        let (scale, lo, hi) = if align {
            ((df - 1.0) / 2.0, 0.0, df - 1.0)
        } else {
            (df / 2.0, -0.5, df - 0.5)
        };
        let pos = t!(c, c.b.scale(gi, scale))?;
        let pos = plus(c, pos, (df - 1.0) / 2.0)?;
        let pos = if mode == Mode::Nearest {
            // Halfway points go to the even index.
            t!(c, c.b.round(pos))?
        } else {
            pos
        };
        let pos = pad_position(c, pos, pad, lo, hi, d)?;
        let raw: Vec<(Var, Option<Var>)> = match mode {
            Mode::Nearest => vec![(pos, None)],
            Mode::Linear | Mode::Cubic => {
                let f = t!(c, c.b.floor(pos))?;
                let f = t!(c, c.b.stop_gradient(f))?;
                let t = t!(c, c.b.sub(pos, f))?;
                if mode == Mode::Linear {
                    // Hats max(0, 1 - |t - k|) at k = -1, 0, 1: the values 0, 1 - t, t, and at a
                    // pixel centre (t = 0) the mean of the one-sided derivatives, by the ties
                    // of `maximum` and sign(0) = 0.
                    let mut taps = Vec::with_capacity(3);
                    for k in [-1.0, 0.0, 1.0] {
                        let d = plus(c, t, -k)?;
                        let a = t!(c, c.b.abs(d))?;
                        let a = t!(c, c.b.neg(a))?;
                        let h = plus(c, a, 1.0)?;
                        let zero = t!(c, c.b.full_like(0.0, h))?;
                        let w = t!(c, c.b.maximum(h, zero))?;
                        taps.push((plus(c, f, k)?, Some(w)));
                    }
                    taps
                } else {
                    let w = cubic_weights(c, t)?;
                    let mut taps = Vec::with_capacity(4);
                    for (k, wk) in w.into_iter().enumerate() {
                        taps.push((plus(c, f, k as f64 - 1.0)?, Some(wk)));
                    }
                    taps
                }
            }
        };
        let mut taps = Vec::with_capacity(raw.len());
        for (u, w) in raw {
            let (index, on) = pad_index(c, u, pad, align, d)?;
            let weight = match (w, on) {
                (Some(w), Some(o)) => Some(t!(c, c.b.mul(w, o))?),
                (w, o) => w.or(o),
            };
            taps.push(Tap { index, weight });
        }
        axes.push(taps);
    }
    // Rows of the input: (N·S, C); row n·S + Σ index_i stride_i.
    let mut perm = vec![0];
    perm.extend(2..r + 2);
    perm.push(1);
    let xt = t!(c, c.b.permute(x, perm))?;
    let table = reshape_to(c, xt, vec![n * s, ch])?;
    let mut stride = vec![1usize; r];
    for i in (0..r.saturating_sub(1)).rev() {
        stride[i] = stride[i + 1] * dims[i + 1];
    }
    // Index arithmetic in f64: exact for every integer below 2^53.
    let batch_rows: Vec<f64> = (0..m).map(|q| ((q / p) * s) as f64).collect();
    let base = c.constant_of(DType::F64, &[m], batch_rows)?;
    let counts: Vec<usize> = axes.iter().map(Vec::len).collect();
    let combos: usize = counts.iter().product();
    let mut total: Option<Var> = None;
    for k in 0..combos {
        let mut rest = k;
        let mut flat = base;
        let mut weight: Option<Var> = None;
        for i in (0..r).rev() {
            let tap = &axes[i][rest % counts[i]];
            rest /= counts[i];
            let (index, w) = (tap.index, tap.weight);
            let u = t!(c, c.b.convert(index, DType::F64))?;
            let u = t!(c, c.b.scale(u, stride[i] as f64))?;
            flat = t!(c, c.b.add(flat, u))?;
            weight = match (weight, w) {
                (Some(a), Some(b)) => Some(t!(c, c.b.mul(a, b))?),
                (a, b) => a.or(b),
            };
        }
        let idx = t!(c, c.b.convert(flat, DType::I64))?;
        let rows = t!(c, c.b.take(table, idx))?;
        let term = match weight {
            Some(w) => {
                let wb = t!(c, c.b.broadcast(w, vec![m, ch], vec![0]))?;
                t!(c, c.b.mul(rows, wb))?
            }
            None => rows,
        };
        total = Some(match total {
            Some(acc) => t!(c, c.b.add(acc, term))?,
            None => term,
        });
    }
    let y = total.expect("at least one tap");
    let y = reshape_to(c, y, vec![n, p, ch])?;
    let y = t!(c, c.b.permute(y, vec![0, 2, 1]))?;
    let mut od = vec![n, ch];
    od.extend(&gd[1..=r]);
    Ok(vec![Value::Var(reshape_to(c, y, od)?)])
}
