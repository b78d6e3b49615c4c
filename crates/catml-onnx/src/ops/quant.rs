//! QuantizeLinear, DequantizeLinear and QLinearMatMul into the integer types the tensor layer
//! holds (uint8, int8, uint16, int16, uint4, int4, uint2, int2; int32 inputs of
//! DequantizeLinear) and, for QuantizeLinear and DequantizeLinear, the 8-bit floats and E2M1:
//! per tensor, per axis and blocked (`block_size`) scales and zero points.
//!
//! quantize:   y = clip(round_half_even(x / scale) + zero_point, type's min, type's max)
//!             y = convert(x / scale + zero_point) into a float type, saturating unless
//!                 `saturate` is 0 (E2M1 always saturates)
//! dequantize: y = (x - zero_point) · scale

use catml_core::ir::Var;
use catml_core::prim::Ops;
use catml_core::tensor::DType;

use super::nn::matmul_vars;
use super::shape::reshape_to;
use crate::ctx::{Ctx, Value, R};
use crate::konst::{dtype_of, elem};

/// The range of an integer type quantization writes.
pub fn quant_range(code: i32) -> Option<(f64, f64)> {
    Some(match code {
        elem::UINT8 => (0.0, 255.0),
        elem::INT8 => (-128.0, 127.0),
        elem::UINT16 => (0.0, 65535.0),
        elem::INT16 => (-32768.0, 32767.0),
        elem::UINT4 => (0.0, 15.0),
        elem::INT4 => (-8.0, 7.0),
        elem::UINT2 => (0.0, 3.0),
        elem::INT2 => (-2.0, 1.0),
        _ => return None,
    })
}

/// The float types quantization writes: the 8-bit floats and E2M1.
fn float_quant(code: i32) -> Option<DType> {
    dtype_of(code).filter(|d| {
        matches!(
            d,
            DType::F8E4M3FN | DType::F8E4M3FNUZ | DType::F8E5M2 | DType::F8E5M2FNUZ | DType::F4E2M1
        )
    })
}

/// ONNX element types of quantized data whose quantization is not mapped.
fn unheld_name(code: i32) -> Option<&'static str> {
    Some(match code {
        24 => "float8e8m0",
        27 => "float6e2m3",
        28 => "float6e3m2",
        _ => return None,
    })
}

/// Why quantized data of element type `code` cannot be imported.
fn unsupported_type(c: &Ctx, what: &str, code: i32) -> crate::OnnxError {
    match unheld_name(code) {
        Some(n) => c.unsupported(format!(
            "{what} of element type {n} (the integer types of 16 bits and fewer, the 8-bit floats and float4e2m1 are mapped)"
        )),
        None => c.err(format!(
            "{what} has element type {}, which is not a quantized type",
            elem::name(code)
        )),
    }
}

/// A scale or zero point (already a float program value) spread over `x_dims`: one element
/// for the whole tensor, a vector along `axis`, or (with `block`) one element per `block`
/// consecutive entries along `axis`, the last block possibly shorter.
fn spread(c: &mut Ctx, v: Var, which: usize, x_dims: &[usize], axis: i64, block: i64) -> R<Var> {
    let vd = c.ty(v).dims().to_vec();
    if vd.iter().product::<usize>() == 1 {
        let s = reshape_to(c, v, vec![])?;
        return c.expand_to(s, x_dims);
    }
    let a = c.axis(axis, x_dims.len())?;
    if block <= 0 {
        if vd.len() != 1 || vd[0] != x_dims[a] {
            return Err(c.err(format!(
                "input {which} has shape {vd:?}; per-axis quantization along axis {a} of {x_dims:?} needs a vector of {}",
                x_dims[a]
            )));
        }
        let mut d = vec![1; x_dims.len()];
        d[a] = vd[0];
        let r = reshape_to(c, v, d)?;
        return c.expand_to(r, x_dims);
    }
    let block = block as usize;
    let fits = vd.len() == x_dims.len()
        && vd.iter().zip(x_dims).enumerate().all(|(k, (&n, &m))| {
            if k == a {
                n == m.div_ceil(block)
            } else {
                n == m
            }
        });
    if !fits {
        return Err(c.err(format!(
            "input {which} has shape {vd:?}; blocks of {block} along axis {a} of {x_dims:?} need {} there and the input's dims elsewhere",
            x_dims[a].div_ceil(block)
        )));
    }
    let idx: Vec<usize> = (0..x_dims[a]).map(|k| k / block).collect();
    t!(c, c.b.gather(v, a, idx))
}

/// Operand `i` (integer or float) as a float program value of `dtype`.
fn as_float(c: &mut Ctx, i: usize, dtype: DType) -> R<Var> {
    let v = c.var(i)?;
    if c.ty(v).dtype == dtype {
        return Ok(v);
    }
    t!(c, c.b.convert(v, dtype))
}

/// `v` rounded to the float type `code` and back, as arithmetic in that type rounds.
fn round_through(c: &mut Ctx, v: Var, code: i32) -> R<Var> {
    let Some(d) = dtype_of(code).filter(|d| d.is_storage() && d.is_floating_point()) else {
        return Ok(v);
    };
    let back = c.ty(v).dtype;
    let n = t!(c, c.b.convert(v, d))?;
    t!(c, c.b.convert(n, back))
}

/// The `axis` and `block_size` attributes (`block_size` from opset 21).
fn layout(c: &Ctx) -> R<(i64, i64)> {
    let block = c.int("block_size", 0)?;
    if block < 0 {
        return Err(c.err(format!("attribute `block_size` = {block} is negative")));
    }
    Ok((c.int("axis", 1)?, block))
}

/// QuantizeLinear: x float; output type from the zero point, else `output_dtype`, else uint8.
pub fn quantize_linear(c: &mut Ctx) -> R<Vec<Value>> {
    let (axis, block) = layout(c)?;
    let out_attr = c.int_opt("output_dtype")?.filter(|&d| d != 0);
    let target = if c.has(2) {
        let z = c.model_elem(2)?;
        if let Some(o) = out_attr.filter(|&o| o as i32 != z) {
            return Err(c.err(format!(
                "attribute `output_dtype` = {} differs from the zero point's type {}",
                elem::name(o as i32),
                elem::name(z)
            )));
        }
        z
    } else {
        out_attr.map_or(elem::UINT8, |o| o as i32)
    };
    let range = quant_range(target);
    let float_target = float_quant(target);
    if range.is_none() && float_target.is_none() {
        return Err(unsupported_type(c, "quantizing to data", target));
    }
    let saturate = c.int("saturate", 1)? != 0;
    let x = c.fvar(0)?;
    let f = c.ty(x).dtype;
    let x_dims = c.ty(x).dims().to_vec();
    // The quotient is rounded as the division is done: in `precision`, else in the operands'
    // type (float16 when both are).
    let (xe, se) = (c.model_elem(0)?, c.model_elem(1)?);
    let precision = match c.int_opt("precision")?.filter(|&p| p != 0) {
        Some(p) if [elem::FLOAT, elem::FLOAT16, elem::BFLOAT16].contains(&(p as i32)) => p as i32,
        Some(p) => {
            return Err(c.unsupported(format!(
                "attribute `precision` = {} (float, float16 or bfloat16)",
                elem::name(p as i32)
            )))
        }
        None if xe == se => xe,
        None => elem::FLOAT,
    };
    let s = as_float(c, 1, f)?;
    let s = spread(c, s, 1, &x_dims, axis, block)?;
    let q = t!(c, c.b.div(x, s))?;
    let q = round_through(c, q, precision)?;
    let mut r = match float_target {
        Some(_) => q,
        None => t!(c, c.b.round(q))?,
    };
    if c.has(2) {
        let z = as_float(c, 2, f)?;
        let z = spread(c, z, 2, &x_dims, axis, block)?;
        r = t!(c, c.b.add(r, z))?;
    }
    if let Some(d) = float_target {
        let y = if saturate {
            t!(c, c.b.convert_saturating(r, d))?
        } else {
            t!(c, c.b.convert(r, d))?
        };
        return Ok(vec![Value::Var(y)]);
    }
    let (lo, hi) = range.expect("an integer quantized type");
    let r = t!(c, c.b.clip(r, lo, hi))?;
    let d = dtype_of(target).expect("quantized types are held");
    Ok(vec![Value::Var(t!(c, c.b.convert(r, d))?)])
}

/// DequantizeLinear: output type from `output_dtype`, else the scale's.
pub fn dequantize_linear(c: &mut Ctx) -> R<Vec<Value>> {
    let (axis, block) = layout(c)?;
    let xe = c.model_elem(0)?;
    if quant_range(xe).is_none() && float_quant(xe).is_none() && xe != elem::INT32 {
        return Err(unsupported_type(c, "dequantizing data", xe));
    }
    if c.has(2) && c.model_elem(2)? != xe {
        return Err(c.err(format!(
            "the zero point has type {}, the data {}",
            elem::name(c.model_elem(2)?),
            elem::name(xe)
        )));
    }
    let f = c.dtype(1)?;
    if !f.is_float() {
        return Err(c.err(format!("the scale has dtype {f}, expected a float")));
    }
    let mut x = as_float(c, 0, f)?;
    let x_dims = c.ty(x).dims().to_vec();
    if c.has(2) {
        let z = as_float(c, 2, f)?;
        let z = spread(c, z, 2, &x_dims, axis, block)?;
        x = t!(c, c.b.sub(x, z))?;
    }
    let s = c.var(1)?;
    let s = spread(c, s, 1, &x_dims, axis, block)?;
    let y = t!(c, c.b.mul(x, s))?;
    let target = match c.int_opt("output_dtype")?.filter(|&d| d != 0) {
        Some(o) => o as i32,
        None => c.model_elem(1)?,
    };
    let d = dtype_of(target)
        .filter(|d| d.is_floating_point())
        .ok_or_else(|| {
            c.unsupported(format!(
                "attribute `output_dtype` = {}: dequantizing to a non-float type",
                elem::name(target)
            ))
        })?;
    if d == f {
        return Ok(vec![Value::Var(y)]);
    }
    Ok(vec![Value::Var(t!(c, c.b.convert(y, d))?)])
}

/// A per-tensor scale or zero point of QLinearMatMul as a rank-0 program value of `dtype`.
fn scalar(c: &mut Ctx, i: usize, dtype: DType) -> R<Var> {
    let n: usize = c.dims(i)?.iter().product();
    if n != 1 {
        return Err(c.unsupported(format!(
            "input {i} has {n} elements: only per-tensor scales and zero points"
        )));
    }
    let v = as_float(c, i, dtype)?;
    reshape_to(c, v, vec![])
}

/// QLinearMatMul: y = clip(round((a - a_zp)(b - b_zp) · a_scale b_scale / y_scale) + y_zp),
/// the integer product exact in f64, the factor in the scales' type.
pub fn qlinear_matmul(c: &mut Ctx) -> R<Vec<Value>> {
    // The schema's types are int8, uint8 and the 8-bit floats; the integers are mapped.
    let range = |e: i32| quant_range(e).filter(|_| matches!(e, elem::UINT8 | elem::INT8));
    let refuse = |c: &Ctx, what: &str, e: i32| match float_quant(e) {
        Some(d) if d != DType::F4E2M1 => c.unsupported(format!(
            "{what} of element type {d} (int8 and uint8 are mapped)"
        )),
        _ => c.err(format!(
            "{what} has element type {}; QLinearMatMul takes int8, uint8 or an 8-bit float",
            elem::name(e)
        )),
    };
    let ae = c.model_elem(0)?;
    if range(ae).is_none() {
        return Err(refuse(c, "input a", ae));
    }
    let be = c.model_elem(3)?;
    if range(be).is_none() {
        return Err(refuse(c, "input b", be));
    }
    let ye = if c.has(7) { c.model_elem(7)? } else { ae };
    let (lo, hi) = range(ye).ok_or_else(|| refuse(c, "the output", ye))?;
    let sf = c.dtype(1)?;
    if !sf.is_float() {
        return Err(c.err(format!("a_scale has dtype {sf}, expected a float")));
    }
    let se = c.model_elem(1)?;
    let (a_s, b_s, y_s) = (scalar(c, 1, sf)?, scalar(c, 4, sf)?, scalar(c, 6, sf)?);
    let ab = t!(c, c.b.mul(a_s, b_s))?;
    let ab = round_through(c, ab, se)?;
    let k = t!(c, c.b.div(ab, y_s))?;
    let k = round_through(c, k, se)?;
    let k = t!(c, c.b.convert(k, DType::F64))?;
    let mut mats = Vec::new();
    for (x, z) in [(0, 2), (3, 5)] {
        let mut m = as_float(c, x, DType::F64)?;
        if c.has(z) {
            let zv = scalar(c, z, DType::F64)?;
            let dims = c.ty(m).dims().to_vec();
            let zv = c.expand_to(zv, &dims)?;
            m = t!(c, c.b.sub(m, zv))?;
        }
        mats.push(m);
    }
    let prod = matmul_vars(c, mats[0], mats[1])?;
    let dims = c.ty(prod).dims().to_vec();
    let k = c.expand_to(k, &dims)?;
    let mut y = t!(c, c.b.mul(prod, k))?;
    if c.has(7) {
        let z = scalar(c, 7, DType::F64)?;
        let z = c.expand_to(z, &dims)?;
        y = t!(c, c.b.add(y, z))?;
    }
    let y = t!(c, c.b.round(y))?;
    let y = t!(c, c.b.clip(y, lo, hi))?;
    let d = dtype_of(ye).expect("quantized types are held");
    Ok(vec![Value::Var(t!(c, c.b.convert(y, d))?)])
}

/// DynamicQuantizeLinear: uint8 with the scale and zero point that map [min(0, min x),
/// max(0, max x)] onto 0..=255: scale = (hi - lo) / 255 (1 / 255 when
/// hi = lo), zero point = clip(round(-lo / scale)).
pub fn dynamic_quantize_linear(c: &mut Ctx) -> R<Vec<Value>> {
    let x = c.fvar(0)?;
    let dims = c.ty(x).dims().to_vec();
    let hi = t!(c, c.b.reduce_max(x, None))?;
    let nx = t!(c, c.b.neg(x))?;
    let neg_lo = t!(c, c.b.reduce_max(nx, None))?;
    let zero = t!(c, c.b.full_like(0.0, hi))?;
    let hi = t!(c, c.b.maximum(hi, zero))?;
    let neg_lo = t!(c, c.b.maximum(neg_lo, zero))?;
    let range = t!(c, c.b.add(hi, neg_lo))?;
    // An all-zero x takes the range 1.
    let one = t!(c, c.b.full_like(1.0, range))?;
    let empty = t!(c, c.b.equal(range, zero))?;
    let range = t!(c, c.b.select(empty, one, range))?;
    let k = t!(c, c.b.full_like(255.0, range))?;
    let scale = t!(c, c.b.div(range, k))?;
    let z = t!(c, c.b.div(neg_lo, scale))?;
    let z = t!(c, c.b.round(z))?;
    let z = t!(c, c.b.clip(z, 0.0, 255.0))?;
    let (sb, zb) = (c.expand_to(scale, &dims)?, c.expand_to(z, &dims)?);
    let q = t!(c, c.b.div(x, sb))?;
    let q = t!(c, c.b.round(q))?;
    let q = t!(c, c.b.add(q, zb))?;
    let q = t!(c, c.b.clip(q, 0.0, 255.0))?;
    let y = t!(c, c.b.convert(q, DType::U8))?;
    let zp = t!(c, c.b.convert(z, DType::U8))?;
    Ok(vec![Value::Var(y), Value::Var(scale), Value::Var(zp)])
}
