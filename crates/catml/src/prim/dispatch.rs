//! Shared pieces of primitive rules: operand checks and dtype dispatch of generic kernels.

use crate::ir::{KernelError, TypeError};
use crate::tensor::{Array, DType, Element, Float, RArray, Tensor, TensorType};

/// Exactly `n` operands.
pub fn arity(inputs: &[TensorType], n: usize) -> Result<(), TypeError> {
    if inputs.len() == n {
        Ok(())
    } else {
        Err(TypeError::Arity {
            expected: n.to_string(),
            found: inputs.len(),
        })
    }
}

/// Operand `i` has a float dtype.
pub fn float_operand(inputs: &[TensorType], i: usize) -> Result<(), TypeError> {
    if inputs[i].dtype.is_float() {
        Ok(())
    } else {
        Err(TypeError::DType {
            index: i,
            expected: "f32 or f64".to_string(),
            found: inputs[i].dtype,
        })
    }
}

/// Two float operands of one type (explicit broadcasting: no shape promotion).
pub fn same_float_pair(inputs: &[TensorType]) -> Result<TensorType, TypeError> {
    arity(inputs, 2)?;
    float_operand(inputs, 0)?;
    if inputs[0] != inputs[1] {
        return Err(TypeError::Mismatch {
            left: inputs[0].clone(),
            right: inputs[1].clone(),
        });
    }
    Ok(inputs[0].clone())
}

/// One float operand; the result has its type.
pub fn unary_float(inputs: &[TensorType]) -> Result<TensorType, TypeError> {
    arity(inputs, 1)?;
    float_operand(inputs, 0)?;
    Ok(inputs[0].clone())
}

/// A kernel generic over ring elements: one body serves f32, f64, i64 and exact rationals.
pub trait RingKernel {
    fn ring<T: Element>(&self, x: &[&Array<T>]) -> Result<Array<T>, KernelError>;
}

/// A kernel generic over floating-point elements.
pub trait FloatKernel {
    fn float<T: Float>(&self, x: &[&Array<T>]) -> Result<Array<T>, KernelError>;
}

fn unpack<'a, T>(
    x: &[&'a Tensor],
    get: impl Fn(&'a Tensor) -> Option<&'a Array<T>>,
) -> Result<Vec<&'a Array<T>>, KernelError> {
    x.iter()
        .map(|t| {
            get(t).ok_or_else(|| {
                KernelError::Unsupported(format!("mixed operand dtypes ({})", t.dtype()))
            })
        })
        .collect()
}

fn first_dtype(x: &[&Tensor]) -> Result<DType, KernelError> {
    x.first()
        .map(|t| t.dtype())
        .ok_or_else(|| KernelError::Unsupported("no operands".to_string()))
}

/// Runs a ring kernel on tensors of one dtype.
pub fn eval_ring<K: RingKernel>(k: &K, x: &[&Tensor]) -> Result<Tensor, KernelError> {
    Ok(match first_dtype(x)? {
        DType::F32 => Tensor::F32(k.ring(&unpack(x, Tensor::as_f32)?)?),
        DType::F64 => Tensor::F64(k.ring(&unpack(x, Tensor::as_f64)?)?),
        DType::I64 => Tensor::I64(k.ring(&unpack(x, Tensor::as_i64)?)?),
    })
}

/// Runs a ring kernel exactly.
pub fn eval_ring_rational<K: RingKernel>(
    k: &K,
    x: &[&RArray],
) -> Option<Result<RArray, KernelError>> {
    Some(k.ring(x))
}

/// Runs a float kernel on tensors of one float dtype.
pub fn eval_float<K: FloatKernel>(k: &K, x: &[&Tensor]) -> Result<Tensor, KernelError> {
    Ok(match first_dtype(x)? {
        DType::F32 => Tensor::F32(k.float(&unpack(x, Tensor::as_f32)?)?),
        DType::F64 => Tensor::F64(k.float(&unpack(x, Tensor::as_f64)?)?),
        DType::I64 => {
            return Err(KernelError::Unsupported(
                "integer operands in float arithmetic".to_string(),
            ))
        }
    })
}

/// The first element index where `bad` holds, as a domain error.
pub fn check_domain<T: Copy>(
    data: &[T],
    bad: impl Fn(T) -> bool,
    what: &str,
) -> Result<(), KernelError> {
    match data.iter().position(|&v| bad(v)) {
        Some(i) => Err(KernelError::Domain(format!("{what} at element {i}"))),
        None => Ok(()),
    }
}

/// As [`check_domain`], naming the offending value and the admissible domain:
/// `log of 0 at element 1, expected a positive value`.
pub fn check_domain_of<T: Float>(
    data: &[T],
    bad: impl Fn(T) -> bool,
    op: &str,
    expected: &str,
) -> Result<(), KernelError> {
    match data.iter().position(|&v| bad(v)) {
        Some(i) => Err(KernelError::Domain(format!(
            "{op} of {} at element {i}, expected {expected}",
            data[i].to_f64()
        ))),
        None => Ok(()),
    }
}
