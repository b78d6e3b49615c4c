//! Operators that are a constant linear map along one axis at a time: CumSum (a triangular
//! matrix) and Resize with known scales or sizes (nearest, linear and cubic interpolation
//! weights, as the ONNX reference computes them). Each axis is one matrix product.

use catml_core::ir::Var;
use catml_core::prim::Ops;
use catml_core::tensor::Tensor;

use crate::ctx::{Ctx, Value, R};

/// y = M x along `axis`, M given row-major as (out, in) weights, plus `bias` (out entries,
/// broadcast over the other axes) when given.
pub(super) fn apply_along(
    c: &mut Ctx,
    x: Var,
    axis: usize,
    m: &[f64],
    out: usize,
    bias: Option<Vec<f64>>,
) -> R<Var> {
    let ty = c.ty(x);
    let dims = ty.dims().to_vec();
    let n = dims[axis];
    let r = dims.len();
    // Move the axis last: (rest, n) · (n, out).
    let mut perm: Vec<usize> = (0..r).filter(|&k| k != axis).collect();
    perm.push(axis);
    let moved = if axis + 1 == r {
        x
    } else {
        t!(c, c.b.permute(x, perm.clone()))?
    };
    let rest: usize = dims.iter().product::<usize>() / n;
    let flat = t!(c, c.b.reshape(moved, vec![rest, n]))?;
    let mt: Vec<f64> = (0..n * out).map(|p| m[(p % out) * n + p / out]).collect();
    let mt = Tensor::from_f64s(ty.dtype, vec![n, out], mt).map_err(|e| c.err(e.to_string()))?;
    let mt = t!(c, c.b.constant(mt))?;
    let mut y = t!(c, c.b.matmul(flat, mt))?;
    if let Some(b) = bias {
        let bt = Tensor::from_f64s(ty.dtype, vec![out], b).map_err(|e| c.err(e.to_string()))?;
        let bt = t!(c, c.b.constant(bt))?;
        let bt = c.expand_to(bt, &[rest, out])?;
        y = t!(c, c.b.add(y, bt))?;
    }
    let mut mdims: Vec<usize> = perm.iter().map(|&k| dims[k]).collect();
    mdims[r - 1] = out;
    let y = t!(c, c.b.reshape(y, mdims))?;
    if axis + 1 == r {
        return Ok(y);
    }
    let mut inv = vec![0; r];
    for (i, &p) in perm.iter().enumerate() {
        inv[p] = i;
    }
    t!(c, c.b.permute(y, inv))
}

/// CumSum(x, axis) with `exclusive` and `reverse`: y_i = sum of x_j over j <= i (j < i when
/// exclusive; j >= i or j > i when reversed).
pub fn cumsum(c: &mut Ctx) -> R<Vec<Value>> {
    let x = c.nvar(0, false)?;
    let r = c.ty(x).rank();
    let a = c.need_known(1, "axis")?.as_i64s();
    let axis = c.axis(*a.first().ok_or_else(|| c.err("axis is empty"))?, r)?;
    let exclusive = c.int("exclusive", 0)? != 0;
    let reverse = c.int("reverse", 0)? != 0;
    let n = c.ty(x).dims()[axis];
    let m: Vec<i64> = (0..n * n)
        .map(|p| {
            let (i, j) = (p / n, p % n);
            let keep = match (reverse, exclusive) {
                (false, false) => j <= i,
                (false, true) => j < i,
                (true, false) => j >= i,
                (true, true) => j > i,
            };
            keep as i64
        })
        .collect();
    if c.ty(x).dtype == catml_core::tensor::DType::I64 {
        return Ok(vec![Value::Var(int_cumsum(c, x, axis, m)?)]);
    }
    let m: Vec<f64> = m.into_iter().map(|k| k as f64).collect();
    Ok(vec![Value::Var(apply_along(c, x, axis, &m, n, None)?)])
}

/// An i64 cumulative sum: y[.., i, ..] = Σ_j m[i, j] x[.., j, ..], as the sum over a new axis
/// of x broadcast beside the 0/1 matrix m (exact, wrapping modulo 2^64 like i64 addition).
fn int_cumsum(c: &mut Ctx, x: Var, axis: usize, m: Vec<i64>) -> R<Var> {
    let dims = c.ty(x).dims().to_vec();
    let n = dims[axis];
    let mut wide = dims.clone();
    wide.insert(axis, n);
    // x's axis t lands on t, or t + 1 from the summed axis on.
    let map: Vec<usize> = (0..dims.len())
        .map(|t| if t < axis { t } else { t + 1 })
        .collect();
    let xb = t!(c, c.b.broadcast(x, wide.clone(), map))?;
    let mt = Tensor::i64([n, n], m).map_err(|e| c.err(e.to_string()))?;
    let mv = t!(c, c.b.constant(mt))?;
    let mb = t!(c, c.b.broadcast(mv, wide, vec![axis, axis + 1]))?;
    let p = t!(c, c.b.mul(xb, mb))?;
    t!(c, c.b.sum(p, Some(vec![axis + 1])))
}

/// How Resize maps an output coordinate to an input one (per axis).
struct Axis {
    input: usize,
    output: usize,
    scale: f64,
    roi: (f64, f64),
}

fn original_coordinate(mode: &str, a: &Axis, i: usize) -> f64 {
    let (inw, x) = (a.input as f64, i as f64);
    // The reference uses scale · input (not the rounded output size) here.
    let outw = a.scale * inw;
    match mode {
        "align_corners" => {
            if outw == 1.0 {
                0.0
            } else {
                x * (inw - 1.0) / (outw - 1.0)
            }
        }
        "asymmetric" => x / a.scale,
        "tf_crop_and_resize" => {
            let (s, e) = a.roi;
            let v = if outw == 1.0 {
                (e - s) * (inw - 1.0) / 2.0
            } else {
                x * (e - s) * (inw - 1.0) / (outw - 1.0)
            };
            v + s * (inw - 1.0)
        }
        "pytorch_half_pixel" => {
            if outw == 1.0 {
                -0.5
            } else {
                (x + 0.5) / a.scale - 0.5
            }
        }
        "half_pixel_symmetric" => {
            let adjustment = a.output as f64 / outw;
            let offset = inw / 2.0 * (1.0 - adjustment);
            offset + (x + 0.5) / a.scale - 0.5
        }
        _ => (x + 0.5) / a.scale - 0.5,
    }
}

struct Interp {
    mode: String,
    nearest: String,
    cubic_a: f64,
    exclude_outside: bool,
}

impl Interp {
    /// Weights of the taps start, start + 1, ... for fraction `ratio` in (0, 1].
    fn coeffs(&self, ratio: f64) -> Vec<f64> {
        match self.mode.as_str() {
            "nearest" => {
                if ratio == 1.0 {
                    return vec![0.0, 1.0];
                }
                let up = match self.nearest.as_str() {
                    "round_prefer_ceil" => ratio >= 0.5,
                    "floor" => false,
                    "ceil" => true,
                    _ => ratio > 0.5,
                };
                if up {
                    vec![0.0, 1.0]
                } else {
                    vec![1.0, 0.0]
                }
            }
            "linear" => vec![1.0 - ratio, ratio],
            _ => {
                let a = self.cubic_a;
                let (r, s) = (ratio, 1.0 - ratio);
                vec![
                    ((a * (r + 1.0) - 5.0 * a) * (r + 1.0) + 8.0 * a) * (r + 1.0) - 4.0 * a,
                    ((a + 2.0) * r - (a + 3.0)) * r * r + 1.0,
                    ((a + 2.0) * s - (a + 3.0)) * s * s + 1.0,
                    ((a * (s + 1.0) - 5.0 * a) * (s + 1.0) + 8.0 * a) * (s + 1.0) - 4.0 * a,
                ]
            }
        }
    }

    /// The (output, input) weight matrix of one axis, and the rows that take the
    /// extrapolation value (tf_crop_and_resize outside the input).
    fn matrix(&self, ctm: &str, a: &Axis) -> (Vec<f64>, Vec<bool>) {
        let n = a.input;
        let mut m = vec![0.0; a.output * n];
        let mut outside = vec![false; a.output];
        for i in 0..a.output {
            let x = original_coordinate(ctm, a, i);
            if ctm == "tf_crop_and_resize" && (x < 0.0 || x > n as f64 - 1.0) {
                outside[i] = true;
                continue;
            }
            let fl = x.floor();
            let ratio = if x == fl { 1.0 } else { x - fl };
            let mut w = self.coeffs(ratio);
            let taps = w.len() as i64;
            // The taps nearest x: ceil(x) - taps/2, ... (ties to the left).
            let start = x.ceil() as i64 - taps / 2;
            if self.exclude_outside {
                for (k, wk) in w.iter_mut().enumerate() {
                    let idx = start + k as i64;
                    if idx < 0 || idx >= n as i64 {
                        *wk = 0.0;
                    }
                }
                let s: f64 = w.iter().sum();
                w.iter_mut().for_each(|v| *v /= s);
            }
            for (k, wk) in w.iter().enumerate() {
                // Edge padding: taps beyond the ends read the end values.
                let idx = (start + k as i64).clamp(0, n as i64 - 1) as usize;
                m[i * n + idx] += wk;
            }
        }
        (m, outside)
    }
}

/// Resize (opset 10+) with scales or sizes known at import.
pub fn resize(c: &mut Ctx) -> R<Vec<Value>> {
    let x = c.fvar(0)?;
    let dims = c.ty(x).dims().to_vec();
    let r = dims.len();
    if c.int("antialias", 0)? != 0 {
        return Err(c.unsupported("antialias = 1"));
    }
    let mode = c.string("mode", "nearest")?;
    if !matches!(mode.as_str(), "nearest" | "linear" | "cubic") {
        return Err(c.unsupported(format!("mode \"{mode}\"")));
    }
    let ctm = if c.opset >= 11 {
        c.string("coordinate_transformation_mode", "half_pixel")?
    } else {
        "asymmetric".to_string()
    };
    if !matches!(
        ctm.as_str(),
        "half_pixel"
            | "half_pixel_symmetric"
            | "pytorch_half_pixel"
            | "align_corners"
            | "asymmetric"
            | "tf_crop_and_resize"
    ) {
        return Err(c.unsupported(format!("coordinate_transformation_mode \"{ctm}\"")));
    }
    let nearest = c.string("nearest_mode", "round_prefer_floor")?;
    let policy = c.string("keep_aspect_ratio_policy", "stretch")?;
    let axes: Vec<usize> = match c.ints("axes")? {
        Some(a) => a.iter().map(|&k| c.axis(k, r)).collect::<R<_>>()?,
        None => (0..r).collect(),
    };
    let (scales_in, sizes_in, roi_in) = if c.opset < 11 {
        (Some(1), None, None)
    } else {
        (Some(2), Some(3), Some(1))
    };
    let known_nonempty = |c: &Ctx, i: Option<usize>, what: &str| -> R<Option<Vec<f64>>> {
        match i {
            Some(i) if c.has(i) => {
                let k = c.need_known(i, what)?;
                Ok((k.numel() > 0).then(|| k.as_f64s()))
            }
            _ => Ok(None),
        }
    };
    let scales = known_nonempty(c, scales_in, "scales")?;
    let sizes = known_nonempty(c, sizes_in, "sizes")?;
    let roi = known_nonempty(c, roi_in, "roi")?;
    let na = axes.len();
    let mut scale = vec![1.0; r];
    let mut out = dims.clone();
    match (scales, sizes) {
        (Some(s), None) if s.len() == na => {
            for (k, &a) in axes.iter().enumerate() {
                scale[a] = s[k];
                out[a] = (s[k] * dims[a] as f64) as usize;
            }
        }
        (None, Some(z)) if z.len() == na => {
            for (k, &a) in axes.iter().enumerate() {
                scale[a] = z[k] / dims[a] as f64;
                out[a] = z[k] as usize;
            }
            if policy != "stretch" {
                let pick = axes.iter().map(|&a| scale[a]);
                let s = match policy.as_str() {
                    "not_larger" => pick.fold(f64::INFINITY, f64::min),
                    "not_smaller" => pick.fold(f64::NEG_INFINITY, f64::max),
                    other => {
                        return Err(c.unsupported(format!("keep_aspect_ratio_policy \"{other}\"")))
                    }
                };
                for &a in &axes {
                    scale[a] = s;
                    out[a] = (s * dims[a] as f64 + 0.5) as usize;
                }
            }
        }
        _ => {
            return Err(c.err(format!(
                "exactly one of scales and sizes must be given, with {na} entries"
            )))
        }
    }
    if out.contains(&0) {
        return Err(c.unsupported(format!("result shape {out:?} has no elements")));
    }
    let mut rois = vec![(0.0, 1.0); r];
    if ctm == "tf_crop_and_resize" {
        let roi = roi.ok_or_else(|| c.err("tf_crop_and_resize needs roi"))?;
        if roi.len() != 2 * na {
            return Err(c.err(format!(
                "roi has {} entries, expected {}",
                roi.len(),
                2 * na
            )));
        }
        for (k, &a) in axes.iter().enumerate() {
            rois[a] = (roi[k], roi[na + k]);
        }
    }
    let interp = Interp {
        mode,
        nearest,
        cubic_a: c.float("cubic_coeff_a", -0.75)? as f64,
        exclude_outside: c.int("exclude_outside", 0)? != 0,
    };
    let extrapolation = c.float("extrapolation_value", 0.0)? as f64;
    let mut y = x;
    for a in 0..r {
        if out[a] == dims[a] && scale[a] == 1.0 && ctm != "tf_crop_and_resize" {
            continue;
        }
        let ax = Axis {
            input: dims[a],
            output: out[a],
            scale: scale[a],
            roi: rois[a],
        };
        let (m, outside) = interp.matrix(&ctm, &ax);
        let bias = outside.iter().any(|&o| o).then(|| {
            outside
                .iter()
                .map(|&o| if o { extrapolation } else { 0.0 })
                .collect()
        });
        y = apply_along(c, y, a, &m, out[a], bias)?;
    }
    Ok(vec![Value::Var(y)])
}

/// CumProd(x, axis) with `exclusive` and `reverse`: running products of slices (an exclusive
/// product starts from 1).
pub fn cumprod(c: &mut Ctx) -> R<Vec<Value>> {
    let x = c.fvar(0)?;
    let dims = c.ty(x).dims().to_vec();
    let a = c.need_known(1, "axis")?.as_i64s();
    let axis = c.axis(
        *a.first().ok_or_else(|| c.err("axis is empty"))?,
        dims.len(),
    )?;
    let exclusive = c.int("exclusive", 0)? != 0;
    let reverse = c.int("reverse", 0)? != 0;
    let n = dims[axis];
    if n > 256 {
        return Err(c.unsupported(format!("CumProd over an axis of {n}")));
    }
    let order: Vec<usize> = if reverse {
        (0..n).rev().collect()
    } else {
        (0..n).collect()
    };
    let mut sd = dims.clone();
    sd[axis] = 1;
    let dt = c.ty(x).dtype;
    let mut acc: Option<Var> = None;
    let mut parts = vec![None; n];
    for &i in &order {
        let s = super::shape::take_along(c, x, axis, vec![i])?;
        let next = match acc {
            None => s,
            Some(p) => t!(c, c.b.mul(p, s))?,
        };
        parts[i] = Some(if exclusive {
            match acc {
                None => c.full(1.0, dt, &sd)?,
                Some(p) => p,
            }
        } else {
            next
        });
        acc = Some(next);
    }
    let parts: Vec<Var> = parts.into_iter().map(|p| p.expect("every slice")).collect();
    let y = if n == 1 {
        parts[0]
    } else {
        t!(c, c.b.concat(&parts, axis))?
    };
    Ok(vec![Value::Var(y)])
}

/// OneHot(indices, depth, values): `values[1]` where the index along `axis` equals the
/// (known) index, negative ones counting from `depth`, `values[0]` elsewhere.
pub fn one_hot(c: &mut Ctx) -> R<Vec<Value>> {
    let depth = c.need_known(1, "depth")?.as_f64s();
    let depth = *depth.first().ok_or_else(|| c.err("depth is empty"))? as i64;
    if depth < 1 {
        return Err(c.err(format!("depth {depth} must be positive")));
    }
    let vals = c.fvar(2)?;
    if c.ty(vals).numel() != 2 {
        return Err(c.err("values must have two entries (off, on)"));
    }
    let dt = c.ty(vals).dtype;
    let Some(idx) = c.known(0) else {
        let (m, dims) = one_hot_mask(c, depth as usize, dt)?;
        return one_hot_values(c, vals, m, &dims);
    };
    let r = idx.dims.len() + 1;
    let axis = c.axis(c.int("axis", -1)?, r)?;
    let mut dims = idx.dims.clone();
    dims.insert(axis, depth as usize);
    if dims.contains(&0) {
        return Err(c.unsupported("indices with no elements"));
    }
    let inner: usize = idx.dims[axis..].iter().product();
    let ids = idx.as_i64s();
    let total: usize = dims.iter().product();
    let mask: Vec<f64> = (0..total)
        .map(|p| {
            let (outer, rest) = (p / (depth as usize * inner), p % (depth as usize * inner));
            let (k, i) = (rest / inner, rest % inner);
            let v = ids[outer * inner + i];
            let v = if v < 0 { v + depth } else { v };
            (v == k as i64) as i64 as f64
        })
        .collect();
    let m = Tensor::from_f64s(dt, dims.clone(), mask).map_err(|e| c.err(e.to_string()))?;
    let m = t!(c, c.b.constant(m))?;
    one_hot_values(c, vals, m, &dims)
}

/// The one-hot mask of indices that are a program value: position k along the new axis is 1
/// where the index (plus depth when negative) equals k, compared as numbers, so a fractional
/// or out-of-range index matches nothing (as the reference). i64 indices compare in f64.
fn one_hot_mask(c: &mut Ctx, depth: usize, dt: catml_core::tensor::DType) -> R<(Var, Vec<usize>)> {
    use catml_core::tensor::DType;
    let x = c.var(0)?;
    let x = match c.ty(x).dtype {
        d if d.is_float() => x,
        DType::I64 => t!(c, c.b.convert(x, DType::F64))?,
        d => return Err(c.unsupported(format!("indices of dtype {d}"))),
    };
    let xd = c.ty(x).dims().to_vec();
    let axis = c.axis(c.int("axis", -1)?, xd.len() + 1)?;
    let mut dims = xd.clone();
    dims.insert(axis, depth);
    let zero = t!(c, c.b.full_like(0.0, x))?;
    let neg = t!(c, c.b.less(x, zero))?;
    let d = t!(c, c.b.full_like(depth as f64, x))?;
    let wrapped = t!(c, c.b.add(x, d))?;
    let w = t!(c, c.b.select(neg, wrapped, x))?;
    let map: Vec<usize> = (0..dims.len()).filter(|&a| a != axis).collect();
    let wb = t!(c, c.b.broadcast(w, dims.clone(), map))?;
    let xt = c.ty(x).dtype;
    let ks = c.constant_of(xt, &[depth], (0..depth).map(|k| k as f64).collect())?;
    let kb = t!(c, c.b.broadcast(ks, dims.clone(), vec![axis]))?;
    let eq = t!(c, c.b.equal(wb, kb))?;
    Ok((t!(c, c.b.convert(eq, dt))?, dims))
}

/// off + (on - off) · mask, with (off, on) the two entries of `vals`.
fn one_hot_values(c: &mut Ctx, vals: Var, m: Var, dims: &[usize]) -> R<Vec<Value>> {
    let dims = dims.to_vec();
    // off + (on - off) · mask
    let flat = t!(c, c.b.reshape(vals, vec![2]))?;
    let off = t!(c, c.b.gather(flat, 0, vec![0]))?;
    let on = t!(c, c.b.gather(flat, 0, vec![1]))?;
    let d = t!(c, c.b.sub(on, off))?;
    let off = t!(c, c.b.reshape(off, Vec::<usize>::new()))?;
    let d = t!(c, c.b.reshape(d, Vec::<usize>::new()))?;
    let off = c.expand_to(off, &dims)?;
    let d = c.expand_to(d, &dims)?;
    let dm = t!(c, c.b.mul(d, m))?;
    Ok(vec![Value::Var(t!(c, c.b.add(off, dm))?)])
}

/// EyeLike: ones on the k-th diagonal of the input's 2-D shape, of `dtype` (default the
/// input's): a value known at import.
pub fn eye_like(c: &mut Ctx) -> R<Vec<Value>> {
    let dims = c.dims(0)?;
    if dims.len() != 2 {
        return Err(c.err("input must have rank 2"));
    }
    let to = c.int("dtype", c.model_elem(0)? as i64)? as i32;
    let k = c.int("k", 0)?;
    let data: Vec<i64> = (0..dims[0] * dims[1])
        .map(|p| ((p % dims[1]) as i64 - (p / dims[1]) as i64 == k) as i64)
        .collect();
    let ints = crate::konst::Const::ints(crate::konst::elem::INT64, dims, data);
    let eye = crate::fold::cast(&ints, to, true).map_err(|e| c.err(e))?;
    Ok(vec![Value::Const(std::sync::Arc::new(eye))])
}
