//! Shared pieces of primitive rules: operand checks and dtype dispatch of generic kernels.

use smallvec::SmallVec;

use crate::ir::{KernelError, Operands, TypeError};
use crate::tensor::{kernels, Array, DType, Element, Float, RArray, Tensor, TensorType};

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

/// Operand `i` has a float dtype or i64 (the dtypes that sum and broadcast take).
pub fn number_operand(inputs: &[TensorType], i: usize) -> Result<(), TypeError> {
    if inputs[i].dtype.is_float() || inputs[i].dtype == DType::I64 {
        Ok(())
    } else {
        Err(TypeError::DType {
            index: i,
            expected: "f32, f64 or i64".to_string(),
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
) -> Result<SmallVec<[&'a Array<T>; 4]>, KernelError> {
    let mut arrays = SmallVec::new();
    // Pushed one by one: collecting `Result`s into a `SmallVec` costs several times more.
    for t in x {
        match get(t) {
            Some(a) => arrays.push(a),
            None => {
                return Err(KernelError::Unsupported(format!(
                    "mixed operand dtypes ({})",
                    t.dtype()
                )))
            }
        }
    }
    Ok(arrays)
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
        // Type rules admit bools only where the kernel copies values (reshape, permute,
        // gather): run it on 0/1 integers.
        DType::Bool => {
            let ints: Vec<Array<i64>> = unpack(x, Tensor::as_bool)?
                .iter()
                .map(|a| a.map(|&v| i64::from(v)))
                .collect();
            let refs: Vec<&Array<i64>> = ints.iter().collect();
            Tensor::Bool(k.ring(&refs)?.map(|&v| v != 0))
        }
        d => return Err(storage_operand(d)),
    })
}

/// The kernel error for a storage-dtype operand, which type rules keep from every kernel
/// (`infer_type`).
pub fn storage_operand(d: DType) -> KernelError {
    KernelError::Unsupported(format!(
        "{d} is a storage dtype: convert it to {} first",
        d.compute()
    ))
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
        DType::I64 | DType::Bool => {
            return Err(KernelError::Unsupported(
                "integer or bool operands in float arithmetic".to_string(),
            ))
        }
        d => return Err(storage_operand(d)),
    })
}

/// A kernel generic over floating-point elements that reads permuted operands and writes a
/// permuted result in place ([`crate::ir::PermutedKernel`]).
pub trait PermutedFloatKernel {
    fn float_permuted<T: Float>(
        &self,
        x: &[&Array<T>],
        permutes: crate::ir::Permutes<'_>,
    ) -> Result<Array<T>, KernelError>;
}

/// A permuted kernel with the permutes of one run, as a plain float kernel.
struct WithPermutes<'a, K>(&'a K, crate::ir::Permutes<'a>);

impl<K: PermutedFloatKernel> FloatKernel for WithPermutes<'_, K> {
    fn float<T: Float>(&self, x: &[&Array<T>]) -> Result<Array<T>, KernelError> {
        self.0.float_permuted(x, self.1)
    }
}

/// [`eval_float`] of a permuted kernel: the same dispatch and the same errors.
pub fn eval_float_permuted<K: PermutedFloatKernel>(
    k: &K,
    x: &[&Tensor],
    permutes: crate::ir::Permutes<'_>,
) -> Result<Tensor, KernelError> {
    eval_float(&WithPermutes(k, permutes), x)
}

/// The first element where `bad` holds, as a domain error naming the offending value and the
/// admissible domain: `log of 0 at element 1, expected a positive value`.
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

/// An elementwise binary float operation, for kernels that write into an operand's buffer.
pub trait FloatZip: Sync {
    fn apply<T: Float>(&self, a: T, b: T) -> T;
}

/// An elementwise unary float operation over a whole buffer, in place.
pub trait FloatMapInPlace: Sync {
    fn apply_all<T: Float>(&self, buf: &mut [T]);

    /// `out` = `x` mapped; by default a copy mapped in place, which a map of one element at a
    /// time replaces by a single pass.
    fn apply_from<T: Float>(&self, x: &[T], out: &mut [T]) {
        out.copy_from_slice(x);
        self.apply_all(out);
    }
}

/// `k` on one block (`ir::BlockKernel`).
pub fn map_block<T: Float, K: FloatMapInPlace>(k: &K, x: &[&[T]], out: &mut [T]) {
    k.apply_from(x[0], out);
}

/// `k` on one block of two operands (`ir::BlockKernel`).
pub fn zip_block<T: Float, K: FloatZip>(k: &K, x: &[&[T]], out: &mut [T]) {
    for ((o, &a), &b) in out.iter_mut().zip(x[0]).zip(x[1]) {
        *o = k.apply(a, b);
    }
}

/// `Err` gives the operands back when a new buffer cannot be had (the caller's fallback then
/// reports the allocation failure).
#[allow(clippy::type_complexity)]
fn zip_arrays<T: Float, K: FloatZip>(
    k: &K,
    mut a: Array<T>,
    mut b: Array<T>,
) -> Result<Array<T>, (Array<T>, Array<T>)> {
    if let Some(d) = a.unique_data_mut() {
        kernels::for_each_result_piece_with(d, b.data(), |d, b| {
            for (x, &y) in d.iter_mut().zip(b) {
                *x = k.apply(*x, y);
            }
        });
        return Ok(a);
    }
    if let Some(d) = b.unique_data_mut() {
        kernels::for_each_result_piece_with(d, a.data(), |d, a| {
            for (y, &x) in d.iter_mut().zip(a) {
                *y = k.apply(x, *y);
            }
        });
        return Ok(b);
    }
    match kernels::zip_copy(&a, &b, |x, y| k.apply(x, y)) {
        Ok(out) => Ok(out),
        Err(_) => Err((a, b)),
    }
}

/// Runs a ring zip on tensors of one dtype: floats by [`kernels::zip_copy`], others by the ring
/// kernel.
pub fn eval_zip<K: FloatZip + RingKernel>(k: &K, x: &[&Tensor]) -> Result<Tensor, KernelError> {
    match x {
        [Tensor::F32(a), Tensor::F32(b)] if a.shape() == b.shape() => {
            Ok(kernels::zip_copy(a, b, |x, y| k.apply(x, y))?.into())
        }
        [Tensor::F64(a), Tensor::F64(b)] if a.shape() == b.shape() => {
            Ok(kernels::zip_copy(a, b, |x, y| k.apply(x, y))?.into())
        }
        _ => eval_ring(k, x),
    }
}

/// `k` elementwise on two float operands of one type, written into the buffer of whichever
/// operand is held only here, else into a new one; `None` leaves the operands as they were
/// when they are not two floats of one dtype, or when no new buffer can be had.
pub fn zip_in_place<K: FloatZip>(k: &K, x: &mut Operands) -> Option<Tensor> {
    fn put_back<T>(x: &mut Operands, done: Result<Array<T>, (Array<T>, Array<T>)>) -> Option<Tensor>
    where
        Tensor: From<Array<T>>,
    {
        match done {
            Ok(out) => Some(out.into()),
            Err((a, b)) => {
                x.extend([a.into(), b.into()]);
                None
            }
        }
    }
    if x.len() != 2 {
        return None;
    }
    let (b, a) = (x.pop()?, x.pop()?);
    match (a, b) {
        (Tensor::F32(a), Tensor::F32(b)) => put_back(x, zip_arrays(k, a, b)),
        (Tensor::F64(a), Tensor::F64(b)) => put_back(x, zip_arrays(k, a, b)),
        (a, b) => {
            x.extend([a, b]);
            None
        }
    }
}

/// `k` on a float operand, in its own buffer when it is held only here, else in a copy; `None`
/// leaves the operand as it was when it is not a float, or when no copy can be had.
pub fn map_in_place<K: FloatMapInPlace>(k: &K, x: &mut Operands) -> Option<Tensor> {
    fn run<T: Float, K: FloatMapInPlace>(k: &K, mut a: Array<T>) -> Result<Array<T>, Array<T>> {
        match a.unique_data_mut() {
            Some(d) => kernels::for_each_result_piece(d, |d| k.apply_all(d)),
            None => return kernels::map_copy(&a, |d| k.apply_all(d)).map_err(|_| a),
        }
        Ok(a)
    }
    if x.len() != 1 {
        return None;
    }
    let done = match x.pop()? {
        Tensor::F32(a) => run(k, a).map(Tensor::F32).map_err(Tensor::F32),
        Tensor::F64(a) => run(k, a).map(Tensor::F64).map_err(Tensor::F64),
        other => Err(other),
    };
    done.map_err(|a| x.push(a)).ok()
}
