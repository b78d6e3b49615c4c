//! The i64 side of the elementwise rows: a row that states an integer kernel (`int`) takes i64
//! operands too, with the semantics of `docs/dtypes.md` (add, sub, mul, neg, abs wrap modulo
//! 2^64; div truncates toward zero and refuses a zero divisor). Integer results carry no
//! derivative: the rules give no tangent and no cotangent for them.

use super::row::{domain_error, Domain};
use crate::ir::{KernelError, TypeError};
use crate::prim::dispatch::{arity, same_float_pair, unary_float};
use crate::tensor::{Array, DType, Tensor, TensorType};

/// The integer kernel of a binary row: `None` marks operands outside the row's domains.
pub type IntBinary = fn(i64, i64) -> Option<i64>;

/// The integer kernel of a unary row without attributes.
pub type IntUnary = fn(i64) -> i64;

/// x + y modulo 2^64.
pub fn add(x: i64, y: i64) -> Option<i64> {
    Some(x.wrapping_add(y))
}

/// x - y modulo 2^64.
pub fn sub(x: i64, y: i64) -> Option<i64> {
    Some(x.wrapping_sub(y))
}

/// x y modulo 2^64.
pub fn mul(x: i64, y: i64) -> Option<i64> {
    Some(x.wrapping_mul(y))
}

/// x / y truncated toward zero (C, Rust, ONNX Div); i64::MIN / -1 wraps to i64::MIN.
pub fn div(x: i64, y: i64) -> Option<i64> {
    (y != 0).then(|| x.wrapping_div(y))
}

pub fn maximum(x: i64, y: i64) -> Option<i64> {
    Some(x.max(y))
}

pub fn minimum(x: i64, y: i64) -> Option<i64> {
    Some(x.min(y))
}

/// -x modulo 2^64 (-i64::MIN is i64::MIN).
pub fn neg(x: i64) -> i64 {
    x.wrapping_neg()
}

/// |x| modulo 2^64 (|i64::MIN| is i64::MIN).
pub fn abs(x: i64) -> i64 {
    x.wrapping_abs()
}

pub fn sign(x: i64) -> i64 {
    x.signum()
}

/// x² modulo 2^64.
pub fn square(x: i64) -> i64 {
    x.wrapping_mul(x)
}

/// The dtypes a row admits, for type errors.
fn admitted(int: bool) -> &'static str {
    if int {
        "f32, f64 or i64"
    } else {
        "f32 or f64"
    }
}

/// Two operands of one type, float or (when the row has an integer kernel) i64.
pub fn infer_binary(int: bool, inputs: &[TensorType]) -> Result<TensorType, TypeError> {
    arity(inputs, 2)?;
    if !int || inputs[0].dtype != DType::I64 {
        return same_float_pair(inputs).map_err(|e| with_admitted(e, int));
    }
    if inputs[0] != inputs[1] {
        return Err(TypeError::Mismatch {
            left: inputs[0].clone(),
            right: inputs[1].clone(),
        });
    }
    Ok(inputs[0].clone())
}

/// One operand, float or (when the row has an integer kernel) i64.
pub fn infer_unary(int: bool, inputs: &[TensorType]) -> Result<TensorType, TypeError> {
    arity(inputs, 1)?;
    if int && inputs[0].dtype == DType::I64 {
        return Ok(inputs[0].clone());
    }
    unary_float(inputs).map_err(|e| with_admitted(e, int))
}

fn with_admitted(e: TypeError, int: bool) -> TypeError {
    match e {
        TypeError::DType { index, found, .. } => TypeError::DType {
            index,
            expected: admitted(int).to_string(),
            found,
        },
        e => e,
    }
}

/// `f` elementwise on two i64 arrays of one shape; the first element `f` refuses is a domain
/// error naming the operand outside `domains`.
pub fn zip(
    name: &str,
    domains: [Domain; 2],
    f: IntBinary,
    x: &Array<i64>,
    y: &Array<i64>,
) -> Result<Array<i64>, KernelError> {
    let mut out = Vec::with_capacity(x.len());
    for (i, (&a, &b)) in x.data().iter().zip(y.data()).enumerate() {
        match f(a, b) {
            Some(v) => out.push(v),
            None => {
                let k = usize::from(domains[0].contains(a as f64));
                return Err(domain_error(name, Some(k), [a, b][k], i, domains[k]));
            }
        }
    }
    Ok(Array::new(x.shape().clone(), out).expect("same length"))
}

/// `f` elementwise on an i64 array.
pub fn map(f: IntUnary, x: &Array<i64>) -> Array<i64> {
    x.map(|&v| f(v))
}

/// The error for i64 operands of a row without an integer kernel.
pub fn refused(name: &str) -> KernelError {
    KernelError::Unsupported(format!("`{name}` has no integer kernel: it takes floats"))
}

/// Whether any operand is an i64 tensor.
pub fn any_i64<'a>(x: impl IntoIterator<Item = &'a Tensor>) -> bool {
    x.into_iter().any(|t| t.dtype() == DType::I64)
}

#[cfg(test)]
mod tests;
