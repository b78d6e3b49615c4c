//! BitShift, BitwiseAnd, BitwiseOr, BitwiseXor and BitwiseNot on values known at import time,
//! exact per element type (int8 ... int64, uint8 ... uint64): CatML has no integer arithmetic
//! on program values, so these fold.

use std::sync::Arc;

use crate::ctx::{broadcast_dims, Ctx, Value, R};
use crate::fold::expand;
use crate::konst::{elem, Const};

/// Width in bits and signedness of an integer element type.
pub fn int_format(code: i32) -> Option<(u32, bool)> {
    Some(match code {
        elem::INT8 => (8, true),
        elem::INT16 => (16, true),
        elem::INT32 => (32, true),
        elem::INT64 => (64, true),
        elem::UINT8 => (8, false),
        elem::UINT16 => (16, false),
        elem::UINT32 => (32, false),
        elem::UINT64 => (64, false),
        _ => return None,
    })
}

/// The element's value in its type (a uint64 is held as i64 with the same bits).
fn value_in(x: i64, bits: u32, signed: bool) -> i128 {
    if bits == 64 && !signed {
        i128::from(x as u64)
    } else {
        i128::from(x)
    }
}

/// `v` modulo 2^bits, as two's complement for signed types, held in i64 bits.
fn wrap(v: i128, bits: u32, signed: bool) -> i64 {
    let m = v & ((1i128 << bits) - 1);
    if signed && m >= 1i128 << (bits - 1) {
        (m - (1i128 << bits)) as i64
    } else {
        m as i64
    }
}

/// ONNX BitShift of one element: a shift outside 0..bits gives 0, or for a signed RIGHT shift
/// the sign (-1 or 0); LEFT wraps to the type's width; RIGHT is arithmetic (logical when
/// unsigned, the value being non-negative).
pub fn shift(a: i64, s: i64, left: bool, bits: u32, signed: bool) -> i64 {
    let (a, s) = (value_in(a, bits, signed), value_in(s, bits, signed));
    if s < 0 || s >= i128::from(bits) {
        return if !left && a < 0 { -1 } else { 0 };
    }
    if left {
        wrap(a << s, bits, signed)
    } else {
        wrap(a >> s, bits, signed)
    }
}

/// An integer operand's value, its width and signedness; a program value is unsupported (with
/// the runner's "must be known at import time" wording).
fn known_int(c: &Ctx, i: usize) -> R<(Const, u32, bool)> {
    let code = c.model_elem(i)?;
    let (bits, signed) = int_format(code).ok_or_else(|| {
        c.err(format!(
            "input {i} has element type {}; this operator takes integers",
            elem::name(code)
        ))
    })?;
    let k = c.known(i).ok_or_else(|| {
        c.unsupported(format!(
            "input {i} must be known at import time: CatML has no integer arithmetic on program values"
        ))
    })?;
    Ok((k, bits, signed))
}

/// Two known integer operands of one element type, broadcast to their common shape.
struct Pair {
    dims: Vec<usize>,
    x: Vec<i64>,
    y: Vec<i64>,
    bits: u32,
    signed: bool,
}

fn known_pair(c: &Ctx) -> R<Pair> {
    let (a, bits, signed) = known_int(c, 0)?;
    let (b, bits_b, signed_b) = known_int(c, 1)?;
    if (bits, signed) != (bits_b, signed_b) {
        return Err(c.err(format!(
            "operands have element types {} and {}",
            elem::name(c.model_elem(0)?),
            elem::name(c.model_elem(1)?)
        )));
    }
    let dims = broadcast_dims(&a.dims, &b.dims).ok_or_else(|| {
        c.err(format!(
            "shapes {:?} and {:?} do not broadcast",
            a.dims, b.dims
        ))
    })?;
    let (x, y) = (expand(&a, &dims).as_i64s(), expand(&b, &dims).as_i64s());
    Ok(Pair {
        dims,
        x,
        y,
        bits,
        signed,
    })
}

/// The result, held as i64 (the importer converts it back to the operand's storage type).
fn out(dims: Vec<usize>, v: Vec<i64>) -> R<Vec<Value>> {
    Ok(vec![Value::Const(Arc::new(Const::ints(
        elem::INT64,
        dims,
        v,
    )))])
}

/// BitShift (`direction` LEFT or RIGHT).
pub fn bit_shift(c: &mut Ctx) -> R<Vec<Value>> {
    let direction = c.string("direction", "")?;
    let left = match direction.as_str() {
        "LEFT" => true,
        "RIGHT" => false,
        d => return Err(c.unsupported(format!("attribute `direction` = {d:?} (LEFT or RIGHT)"))),
    };
    let Pair {
        dims,
        x,
        y,
        bits,
        signed,
    } = known_pair(c)?;
    let v = x
        .iter()
        .zip(&y)
        .map(|(&a, &s)| shift(a, s, left, bits, signed))
        .collect();
    out(dims, v)
}

/// BitwiseAnd, BitwiseOr, BitwiseXor: on two's complement bits, which commute with wrapping
/// to the type's width.
pub fn bitwise(c: &mut Ctx) -> R<Vec<Value>> {
    let Pair {
        dims,
        x,
        y,
        bits,
        signed,
    } = known_pair(c)?;
    let f: fn(i64, i64) -> i64 = match c.node.op_type.as_str() {
        "BitwiseAnd" => |a, b| a & b,
        "BitwiseOr" => |a, b| a | b,
        _ => |a, b| a ^ b,
    };
    let v = x
        .iter()
        .zip(&y)
        .map(|(&a, &b)| wrap(i128::from(f(a, b)), bits, signed))
        .collect();
    out(dims, v)
}

/// BitwiseNot: every bit flipped within the type's width.
pub fn bitwise_not(c: &mut Ctx) -> R<Vec<Value>> {
    let (a, bits, signed) = known_int(c, 0)?;
    let v = a
        .as_i64s()
        .iter()
        .map(|&x| wrap(i128::from(!x), bits, signed))
        .collect();
    out(a.dims.clone(), v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shifts_follow_the_element_type() {
        // uint8: 200 >> 3 = 25; 200 << 1 = 400 mod 256 = 144.
        assert_eq!(shift(200, 3, false, 8, false), 25);
        assert_eq!(shift(200, 1, true, 8, false), 144);
        // Shifts of the width or more, or negative, give 0 (the sign for a signed RIGHT).
        assert_eq!(shift(200, 8, false, 8, false), 0);
        assert_eq!(shift(-100, 9, false, 8, true), -1);
        assert_eq!(shift(100, -1, false, 8, true), 0);
        assert_eq!(shift(5, -1, true, 32, true), 0);
        // int8: -100 >> 2 = -25 (arithmetic); 100 << 1 = 200 wraps to -56.
        assert_eq!(shift(-100, 2, false, 8, true), -25);
        assert_eq!(shift(100, 1, true, 8, true), -56);
        // uint64: 2^64 - 2 (held as -2) >> 1 = 2^63 - 1, a logical shift.
        assert_eq!(shift(-2, 1, false, 64, false), i64::MAX);
        // uint64 shift amounts of 2^63 or more are out of range, not negative.
        assert_eq!(shift(1, i64::MIN, true, 64, false), 0);
        // int64: 1 << 63 is i64::MIN.
        assert_eq!(shift(1, 63, true, 64, true), i64::MIN);
    }

    #[test]
    fn wrapping_keeps_the_low_bits() {
        // !5 in uint8 is 250; in int8 -6.
        assert_eq!(wrap(i128::from(!5i64), 8, false), 250);
        assert_eq!(wrap(i128::from(!5i64), 8, true), -6);
        assert_eq!(wrap(65536 + 7, 16, false), 7);
        assert_eq!(wrap(i128::from(u64::MAX), 64, false), -1);
    }
}
