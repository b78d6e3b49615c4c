//! BitCast of a value known at import: each element's bits (little endian, the type's width)
//! read as the target type of the same width. Program values are refused: no primitive
//! reinterprets bits.

use crate::ctx::{Ctx, Value, R};
use crate::konst::{elem, Const};

/// Bit width of the element types BitCast maps (8-bit floats and narrower types are not).
fn width(code: i32) -> Option<u32> {
    Some(match code {
        elem::BOOL | elem::INT8 | elem::UINT8 => 8,
        elem::INT16 | elem::UINT16 | elem::FLOAT16 | elem::BFLOAT16 => 16,
        elem::INT32 | elem::UINT32 | elem::FLOAT => 32,
        elem::INT64 | elem::UINT64 | elem::DOUBLE => 64,
        _ => return None,
    })
}

fn bits_of(code: i32, x: f64, i: i64) -> u64 {
    match code {
        elem::FLOAT => u64::from((x as f32).to_bits()),
        elem::DOUBLE => x.to_bits(),
        elem::FLOAT16 => u64::from(half::f16::from_f64(x).to_bits()),
        elem::BFLOAT16 => u64::from(half::bf16::from_f64(x).to_bits()),
        // Integers and bools: two's complement bits, cut to the width by the caller.
        _ => i as u64,
    }
}

pub fn bitcast(c: &mut Ctx) -> R<Vec<Value>> {
    let from = c.model_elem(0)?;
    let to = c
        .int_opt("to")?
        .ok_or_else(|| c.err("attribute `to` is required"))? as i32;
    let (Some(wf), Some(wt)) = (width(from), width(to)) else {
        return Err(c.unsupported(format!(
            "BitCast from {} to {}",
            elem::name(from),
            elem::name(to)
        )));
    };
    if wf != wt {
        return Err(c.err(format!(
            "{} has {wf} bits, {} {wt}: BitCast needs equal widths",
            elem::name(from),
            elem::name(to)
        )));
    }
    let x = c.need_known(0, "input")?;
    let (fs, is) = (x.as_f64s(), x.as_i64s());
    let mask = if wf == 64 { u64::MAX } else { (1u64 << wf) - 1 };
    let bits: Vec<u64> = fs
        .iter()
        .zip(&is)
        .map(|(&f, &i)| bits_of(from, f, i) & mask)
        .collect();
    let dims = x.dims.clone();
    let out = match to {
        elem::FLOAT => Const::floats(
            to,
            dims,
            bits.iter()
                .map(|&b| f32::from_bits(b as u32) as f64)
                .collect(),
        ),
        elem::DOUBLE => Const::floats(to, dims, bits.iter().map(|&b| f64::from_bits(b)).collect()),
        elem::FLOAT16 => Const::floats(
            to,
            dims,
            bits.iter()
                .map(|&b| half::f16::from_bits(b as u16).to_f64())
                .collect(),
        ),
        elem::BFLOAT16 => Const::floats(
            to,
            dims,
            bits.iter()
                .map(|&b| half::bf16::from_bits(b as u16).to_f64())
                .collect(),
        ),
        elem::BOOL => {
            if let Some(k) = bits.iter().position(|&b| b > 1) {
                return Err(c.err(format!(
                    "element {k} has bits {:#04x}, which are not a bool (0 or 1)",
                    bits[k]
                )));
            }
            Const::ints(to, dims, bits.iter().map(|&b| b as i64).collect())
        }
        _ => {
            // Signed targets read the top bit as the sign; unsigned ones as is (a uint64 is
            // held as i64 bits, as everywhere at import).
            let signed = matches!(to, elem::INT8 | elem::INT16 | elem::INT32 | elem::INT64);
            let v = bits
                .iter()
                .map(|&b| {
                    if signed && wt < 64 && b >> (wt - 1) & 1 == 1 {
                        (b | !mask) as i64
                    } else {
                        b as i64
                    }
                })
                .collect();
            Const::ints(to, dims, v)
        }
    };
    Ok(vec![Value::Const(std::sync::Arc::new(out))])
}
