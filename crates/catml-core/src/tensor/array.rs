use std::sync::Arc;

use super::buffer::{Buffer, Lent};
use super::elems::Elems;
use super::{DType, Shape, Stored, TensorType};

/// A dense row-major array of `T` with a shape. The buffer is shared, so clones are cheap and
/// reshapes are free. It is owned, or lent by another owner for reading ([`Array::lent`]).
#[derive(Clone)]
pub struct Array<T> {
    shape: Shape,
    data: Buffer<T>,
}

impl<T: Clone + PartialEq> PartialEq for Array<T> {
    fn eq(&self, other: &Self) -> bool {
        self.shape == other.shape && self.data() == other.data()
    }
}

/// Errors building a tensor from raw parts.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum TensorError {
    #[error("data has {found} elements but shape {shape} needs {expected}")]
    Length {
        shape: Shape,
        expected: usize,
        found: usize,
    },
    #[error("invalid shape {0}: dimensions must be positive and the element count must fit")]
    InvalidShape(Shape),
    #[error("expected dtype {expected}, found {found}")]
    DType { expected: DType, found: DType },
    #[error("element {index}: the byte {byte:#04x} is not a {dtype} value")]
    Element {
        index: usize,
        byte: u8,
        dtype: DType,
    },
    #[error("item() needs a tensor of one element, this one has shape {0}")]
    NotOneElement(Shape),
}

impl<T: Clone> Array<T> {
    pub fn new(shape: impl Into<Shape>, data: Vec<T>) -> Result<Array<T>, TensorError> {
        Array::with_elems(shape, data.into())
    }

    /// [`Array::new`] over a kernel's vector.
    pub(crate) fn with_elems(
        shape: impl Into<Shape>,
        data: Elems<T>,
    ) -> Result<Array<T>, TensorError> {
        let shape = shape.into();
        let expected = shape
            .checked_numel()
            .ok_or_else(|| TensorError::InvalidShape(shape.clone()))?;
        if expected != data.len() {
            return Err(TensorError::Length {
                shape,
                expected,
                found: data.len(),
            });
        }
        Ok(Array {
            shape,
            data: Buffer::owned(data),
        })
    }

    /// An array that reads lent memory in place, without a copy: the caller's buffer of
    /// `shape.numel()` elements. Kernels never write it; taking the elements out
    /// ([`Array::into_vec`]) copies them.
    pub fn lent(shape: impl Into<Shape>, data: Lent<T>) -> Result<Array<T>, TensorError> {
        let shape = shape.into();
        let expected = shape
            .checked_numel()
            .ok_or_else(|| TensorError::InvalidShape(shape.clone()))?;
        let data = Buffer::Lent(Arc::new(data));
        let found = data.as_slice().len();
        if expected != found {
            return Err(TensorError::Length {
                shape,
                expected,
                found,
            });
        }
        Ok(Array { shape, data })
    }

    /// Whether the elements are lent memory read in place.
    pub fn is_lent(&self) -> bool {
        matches!(self.data, Buffer::Lent(_))
    }

    /// Builds an array whose length the caller has already checked (kernel outputs).
    pub(crate) fn from_parts(shape: Shape, data: impl Into<Elems<T>>) -> Array<T> {
        let data = data.into();
        debug_assert_eq!(shape.numel(), data.len());
        Array {
            shape,
            data: Buffer::owned(data),
        }
    }

    pub fn full(shape: impl Into<Shape>, value: T) -> Array<T> {
        let shape = shape.into();
        let n = shape.numel();
        Array::from_parts(shape, vec![value; n])
    }

    pub fn scalar(value: T) -> Array<T> {
        Array::from_parts(Shape::scalar(), vec![value])
    }

    pub fn shape(&self) -> &Shape {
        &self.shape
    }

    pub fn dims(&self) -> &[usize] {
        self.shape.dims()
    }

    pub fn data(&self) -> &[T] {
        self.data.as_slice()
    }

    pub fn len(&self) -> usize {
        self.data().len()
    }

    pub fn is_empty(&self) -> bool {
        self.data().is_empty()
    }

    /// The same buffer under another shape with the same element count.
    pub fn reshaped(&self, shape: Shape) -> Array<T> {
        debug_assert_eq!(shape.numel(), self.len());
        Array {
            shape,
            data: self.data.clone(),
        }
    }

    pub fn map<U: Clone>(&self, f: impl Fn(&T) -> U) -> Array<U> {
        Array::from_parts(
            self.shape.clone(),
            self.data().iter().map(f).collect::<Vec<_>>(),
        )
    }

    /// The buffer for writing, if this array holds the only reference to it.
    pub fn unique_data_mut(&mut self) -> Option<&mut [T]> {
        self.data.unique_mut()
    }

    /// Takes the buffer, copying only if it is shared.
    pub fn into_vec(self) -> Vec<T> {
        self.data.into_vec()
    }
}

/// A tensor of one of the supported dtypes.
#[derive(Clone, PartialEq)]
pub enum Tensor {
    F32(Array<f32>),
    F64(Array<f64>),
    I64(Array<i64>),
    /// Truth values; they enter arithmetic only through `convert` (false 0, true 1).
    Bool(Array<bool>),
    /// A storage dtype (f16, bf16, narrow or unsigned integers): held and converted only.
    Stored(Stored),
}

impl Tensor {
    /// A tensor of the given dtype from f64 values (rounded to f32 or truncated to i64 as needed).
    pub fn from_f64s(
        dtype: DType,
        shape: impl Into<Shape>,
        data: Vec<f64>,
    ) -> Result<Tensor, TensorError> {
        Ok(match dtype {
            DType::F64 => Tensor::F64(Array::new(shape, data)?),
            DType::F32 => Tensor::F32(Array::new(shape, data.iter().map(|&x| x as f32).collect())?),
            DType::I64 => Tensor::I64(Array::new(shape, data.iter().map(|&x| x as i64).collect())?),
            DType::Bool => {
                Tensor::Bool(Array::new(shape, data.iter().map(|&x| x != 0.0).collect())?)
            }
            // Integers saturate here, as `as` does for i64 above.
            d => {
                let a = Array::new(shape, data)?;
                Tensor::Stored(Stored::saturating(d, a.shape().clone(), a.data()))
            }
        })
    }

    pub fn f64(shape: impl Into<Shape>, data: Vec<f64>) -> Result<Tensor, TensorError> {
        Ok(Tensor::F64(Array::new(shape, data)?))
    }

    pub fn f32(shape: impl Into<Shape>, data: Vec<f32>) -> Result<Tensor, TensorError> {
        Ok(Tensor::F32(Array::new(shape, data)?))
    }

    pub fn i64(shape: impl Into<Shape>, data: Vec<i64>) -> Result<Tensor, TensorError> {
        Ok(Tensor::I64(Array::new(shape, data)?))
    }

    pub fn bool(shape: impl Into<Shape>, data: Vec<bool>) -> Result<Tensor, TensorError> {
        Ok(Tensor::Bool(Array::new(shape, data)?))
    }

    /// A tensor filled with one value.
    pub fn full(ty: &TensorType, value: f64) -> Tensor {
        match ty.dtype {
            DType::F32 => Tensor::F32(Array::full(ty.shape.clone(), value as f32)),
            DType::F64 => Tensor::F64(Array::full(ty.shape.clone(), value)),
            DType::I64 => Tensor::I64(Array::full(ty.shape.clone(), value as i64)),
            DType::Bool => Tensor::Bool(Array::full(ty.shape.clone(), value != 0.0)),
            d => Tensor::Stored(Stored::full(d, ty.shape.clone(), value)),
        }
    }

    pub fn zeros(ty: &TensorType) -> Tensor {
        Tensor::full(ty, 0.0)
    }

    pub fn scalar(dtype: DType, value: f64) -> Tensor {
        Tensor::full(&TensorType::scalar(dtype), value)
    }

    pub fn dtype(&self) -> DType {
        match self {
            Tensor::F32(_) => DType::F32,
            Tensor::F64(_) => DType::F64,
            Tensor::I64(_) => DType::I64,
            Tensor::Bool(_) => DType::Bool,
            Tensor::Stored(s) => s.dtype(),
        }
    }

    pub fn shape(&self) -> &Shape {
        match self {
            Tensor::F32(a) => a.shape(),
            Tensor::F64(a) => a.shape(),
            Tensor::I64(a) => a.shape(),
            Tensor::Bool(a) => a.shape(),
            Tensor::Stored(s) => s.shape(),
        }
    }

    pub fn dims(&self) -> &[usize] {
        self.shape().dims()
    }

    pub fn ty(&self) -> TensorType {
        TensorType::new(self.dtype(), self.shape().clone())
    }

    pub fn numel(&self) -> usize {
        self.shape().numel()
    }

    /// The value of a one-element tensor (any shape of element count 1), widened to f64.
    ///
    /// ```
    /// use catml_core::tensor::{DType, Tensor};
    /// assert_eq!(Tensor::scalar(DType::F32, 0.5).item().unwrap(), 0.5);
    /// assert!(Tensor::f64([2], vec![1.0, 2.0]).unwrap().item().is_err());
    /// ```
    pub fn item(&self) -> Result<f64, TensorError> {
        if self.numel() != 1 {
            return Err(TensorError::NotOneElement(self.shape().clone()));
        }
        Ok(match self {
            Tensor::F32(a) => a.data()[0] as f64,
            Tensor::F64(a) => a.data()[0],
            Tensor::I64(a) => a.data()[0] as f64,
            Tensor::Bool(a) => f64::from(u8::from(a.data()[0])),
            Tensor::Stored(s) => s.to_f64_vec()[0],
        })
    }

    /// `f` applied to every element in f64, the result rounded back to this tensor's dtype
    /// (as [`from_f64s`](Self::from_f64s) does).
    pub fn map_f64(&self, f: impl Fn(f64) -> f64) -> Tensor {
        match self {
            Tensor::F32(a) => Tensor::F32(a.map(|&x| f(x as f64) as f32)),
            Tensor::F64(a) => Tensor::F64(a.map(|&x| f(x))),
            Tensor::I64(a) => Tensor::I64(a.map(|&x| f(x as f64) as i64)),
            Tensor::Bool(a) => Tensor::Bool(a.map(|&x| f(f64::from(u8::from(x))) != 0.0)),
            Tensor::Stored(s) => {
                let v: Vec<f64> = s.to_f64_vec().into_iter().map(f).collect();
                Tensor::from_f64s(s.dtype(), s.shape().clone(), v)
                    .expect("the element count is unchanged")
            }
        }
    }

    /// The values widened to f64 (exact for f32 and for integers below 2^53; false 0, true 1).
    pub fn to_f64_vec(&self) -> Vec<f64> {
        match self {
            Tensor::F32(a) => a.data().iter().map(|&x| x as f64).collect(),
            Tensor::F64(a) => a.data().to_vec(),
            Tensor::I64(a) => a.data().iter().map(|&x| x as f64).collect(),
            Tensor::Bool(a) => a.data().iter().map(|&x| f64::from(u8::from(x))).collect(),
            Tensor::Stored(s) => s.to_f64_vec(),
        }
    }

    pub fn as_f64(&self) -> Option<&Array<f64>> {
        match self {
            Tensor::F64(a) => Some(a),
            _ => None,
        }
    }

    pub fn as_f32(&self) -> Option<&Array<f32>> {
        match self {
            Tensor::F32(a) => Some(a),
            _ => None,
        }
    }

    pub fn as_i64(&self) -> Option<&Array<i64>> {
        match self {
            Tensor::I64(a) => Some(a),
            _ => None,
        }
    }

    pub fn as_stored(&self) -> Option<&Stored> {
        match self {
            Tensor::Stored(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_bool(&self) -> Option<&Array<bool>> {
        match self {
            Tensor::Bool(a) => Some(a),
            _ => None,
        }
    }

    /// The same data under another shape of equal element count.
    pub fn reshaped(&self, shape: Shape) -> Tensor {
        match self {
            Tensor::F32(a) => Tensor::F32(a.reshaped(shape)),
            Tensor::F64(a) => Tensor::F64(a.reshaped(shape)),
            Tensor::I64(a) => Tensor::I64(a.reshaped(shape)),
            Tensor::Bool(a) => Tensor::Bool(a.reshaped(shape)),
            Tensor::Stored(s) => Tensor::Stored(s.reshaped(shape)),
        }
    }

    /// How many elements are NaN or infinite.
    pub fn count_non_finite(&self) -> usize {
        // Almost every call finds none: a vectorised test first, counting only after a hit.
        // Every node's result is checked, so large ones are split across the thread pool.
        fn split<T: super::Float>(d: &[T]) -> usize {
            use rayon::prelude::*;
            const PARALLEL_MIN: usize = 1 << 16;
            // The length first: asking rayon for its thread count costs more than a tiny scan.
            if d.len() < PARALLEL_MIN || rayon::current_num_threads() < 2 {
                super::kernels::count_non_finite(d)
            } else {
                d.par_chunks(d.len().div_ceil(rayon::current_num_threads()))
                    .map(super::kernels::count_non_finite)
                    .sum()
            }
        }
        match self {
            Tensor::F32(a) => split(a.data()),
            Tensor::F64(a) => split(a.data()),
            Tensor::I64(_) | Tensor::Bool(_) => 0,
            Tensor::Stored(s) => s.count_non_finite(),
        }
    }

    /// Euclidean inner product <self, other>, in f64.
    pub fn dot(&self, other: &Tensor) -> f64 {
        self.to_f64_vec()
            .iter()
            .zip(other.to_f64_vec())
            .map(|(a, b)| a * b)
            .sum()
    }

    /// Largest absolute elementwise difference, in f64 (infinite if the shapes differ).
    pub fn max_abs_diff(&self, other: &Tensor) -> f64 {
        if self.shape() != other.shape() {
            return f64::INFINITY;
        }
        self.to_f64_vec()
            .iter()
            .zip(other.to_f64_vec())
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max)
    }
}

impl From<Array<f32>> for Tensor {
    fn from(a: Array<f32>) -> Tensor {
        Tensor::F32(a)
    }
}

impl From<Array<f64>> for Tensor {
    fn from(a: Array<f64>) -> Tensor {
        Tensor::F64(a)
    }
}

impl From<Array<i64>> for Tensor {
    fn from(a: Array<i64>) -> Tensor {
        Tensor::I64(a)
    }
}

impl From<Stored> for Tensor {
    fn from(s: Stored) -> Tensor {
        Tensor::Stored(s)
    }
}

impl From<Array<bool>> for Tensor {
    fn from(a: Array<bool>) -> Tensor {
        Tensor::Bool(a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_nan_and_infinities_but_not_extreme_finite_values() {
        let v = vec![
            f64::NAN,
            1.0,
            f64::INFINITY,
            f64::MAX,
            -f64::INFINITY,
            5e-324,
            -0.0,
        ];
        assert_eq!(Tensor::f64([7], v.clone()).unwrap().count_non_finite(), 3);
        let w: Vec<f32> = vec![
            f32::NAN,
            1.0,
            f32::INFINITY,
            f32::MAX,
            f32::NEG_INFINITY,
            1e-45,
        ];
        assert_eq!(Tensor::f32([6], w).unwrap().count_non_finite(), 3);
        // Large buffers take the split path.
        let mut big = vec![0.5; 1 << 17];
        big[3] = f64::NAN;
        big[(1 << 17) - 1] = f64::NEG_INFINITY;
        assert_eq!(Tensor::f64([1 << 17], big).unwrap().count_non_finite(), 2);
    }
}
