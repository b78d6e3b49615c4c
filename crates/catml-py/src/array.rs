//! NumPy arrays to tensors and back. f32, f64, i64, bool and the integer storage dtypes map to
//! float32, float64, int64, bool, int8 ... uint64; any other dtype (float16 included) is refused
//! (no silent casts). Results come back as NumPy arrays that
//! take over the tensor's buffer.

use catml_core::tensor::{Array, DType, Shape, Stored, Tensor, TensorType};
use numpy::ndarray::{ArrayD, IxDyn};
use numpy::{
    Element, IntoPyArray, PyArrayDyn, PyArrayMethods, PyUntypedArray, PyUntypedArrayMethods,
};
use pyo3::prelude::*;

use crate::errors::{raise, Kind};

/// The tensor of a NumPy array; `what` names the argument in errors ("input `x`").
pub fn to_tensor(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Tensor> {
    let Ok(array) = obj.cast::<PyUntypedArray>() else {
        return Err(raise(
            Kind::Type,
            format!(
                "{what} is a {}, expected a NumPy array",
                obj.get_type().name()?
            ),
        ));
    };
    let dims = Shape::new(array.shape().to_vec());
    let tensor = if let Ok(a) = array.cast::<PyArrayDyn<f32>>() {
        Tensor::f32(dims, elements(a))
    } else if let Ok(a) = array.cast::<PyArrayDyn<f64>>() {
        Tensor::f64(dims, elements(a))
    } else if let Ok(a) = array.cast::<PyArrayDyn<i64>>() {
        Tensor::i64(dims, elements(a))
    } else if let Ok(a) = array.cast::<PyArrayDyn<bool>>() {
        Tensor::bool(dims, elements(a))
    } else if let Some(t) = stored(array, dims.clone()) {
        Ok(t)
    } else {
        return Err(raise(
            Kind::Type,
            format!(
                "{what} has dtype {}; CatML takes float32, float64, integer or bool arrays (convert explicitly)",
                array.dtype()
            ),
        ));
    };
    tensor.map_err(|e| raise(Kind::Value, format!("{what}: {e}")))
}

/// An integer array of a storage dtype (int8 ... uint64, not int64).
fn stored(array: &Bound<'_, PyUntypedArray>, dims: Shape) -> Option<Tensor> {
    macro_rules! try_as {
        ($t:ty, $v:ident) => {
            if let Ok(a) = array.cast::<PyArrayDyn<$t>>() {
                return Some(Tensor::Stored(Stored::$v(
                    Array::new(dims, elements(a)).ok()?,
                )));
            }
        };
    }
    try_as!(i8, I8);
    try_as!(i16, I16);
    try_as!(i32, I32);
    try_as!(u8, U8);
    try_as!(u16, U16);
    try_as!(u32, U32);
    try_as!(u64, U64);
    None
}

/// The elements in row-major order (one copy: from a C-contiguous buffer directly; NumPy's
/// `as_slice` also accepts Fortran order, whose buffer is column-major, so it is not used).
fn elements<T: Element + Copy>(a: &Bound<'_, PyArrayDyn<T>>) -> Vec<T> {
    let ro = a.readonly();
    if a.is_c_contiguous() {
        if let Ok(s) = ro.as_slice() {
            return s.to_vec();
        }
    }
    ro.as_array().iter().copied().collect()
}

/// A NumPy array owning the tensor's buffer (no copy unless the buffer is shared).
pub fn to_numpy<'py>(py: Python<'py>, t: Tensor) -> PyResult<Bound<'py, PyAny>> {
    let dims = IxDyn(t.dims());
    let shape_error = |e: numpy::ndarray::ShapeError| raise(Kind::Value, e.to_string());
    Ok(match t {
        Tensor::F32(a) => owned(py, dims, a.into_vec()).map_err(shape_error)?,
        Tensor::F64(a) => owned(py, dims, a.into_vec()).map_err(shape_error)?,
        Tensor::I64(a) => owned(py, dims, a.into_vec()).map_err(shape_error)?,
        Tensor::Bool(a) => owned(py, dims, a.into_vec()).map_err(shape_error)?,
        Tensor::Stored(s) => match s {
            Stored::I8(a) => owned(py, dims, a.into_vec()).map_err(shape_error)?,
            Stored::I16(a) => owned(py, dims, a.into_vec()).map_err(shape_error)?,
            Stored::I32(a) => owned(py, dims, a.into_vec()).map_err(shape_error)?,
            Stored::U8(a) => owned(py, dims, a.into_vec()).map_err(shape_error)?,
            Stored::U16(a) => owned(py, dims, a.into_vec()).map_err(shape_error)?,
            Stored::U32(a) => owned(py, dims, a.into_vec()).map_err(shape_error)?,
            Stored::U64(a) => owned(py, dims, a.into_vec()).map_err(shape_error)?,
            other => {
                return Err(raise(
                    Kind::Type,
                    format!(
                        "a {} result: NumPy arrays of it are not supported; convert it to f32",
                        other.dtype()
                    ),
                ))
            }
        },
    })
}

fn owned<T: Element>(
    py: Python<'_>,
    dims: IxDyn,
    data: Vec<T>,
) -> Result<Bound<'_, PyAny>, numpy::ndarray::ShapeError> {
    Ok(ArrayD::from_shape_vec(dims, data)?
        .into_pyarray(py)
        .into_any())
}

/// A type from Python's `(shape, dtype)` pair, dtype as `"f32"`, `"f64"`, `"i64"` or `"bool"`.
pub fn tensor_type(shape: Vec<usize>, dtype: &str) -> PyResult<TensorType> {
    let dtype = DType::parse(dtype).ok_or_else(|| {
        raise(
            Kind::Type,
            format!("unknown dtype `{dtype}`; expected f32, f64, i64, bool, f16, bf16, i8, i16, i32, u8, u16, u32 or u64"),
        )
    })?;
    Ok(TensorType::new(dtype, shape))
}

/// The NumPy name of a dtype.
pub fn numpy_name(d: DType) -> &'static str {
    match d {
        DType::F32 => "float32",
        DType::F64 => "float64",
        DType::I64 => "int64",
        DType::Bool => "bool",
        DType::F16 => "float16",
        DType::BF16 => "bfloat16",
        DType::I8 => "int8",
        DType::I16 => "int16",
        DType::I32 => "int32",
        DType::U8 => "uint8",
        DType::U16 => "uint16",
        DType::U32 => "uint32",
        DType::U64 => "uint64",
        DType::F8E4M3FN => "float8_e4m3fn",
        DType::F8E4M3FNUZ => "float8_e4m3fnuz",
        DType::F8E5M2 => "float8_e5m2",
        DType::F8E5M2FNUZ => "float8_e5m2fnuz",
        DType::I4 => "int4",
        DType::U4 => "uint4",
        DType::I2 => "int2",
        DType::U2 => "uint2",
        DType::F4E2M1 => "float4_e2m1fn",
        DType::F8E8M0 => "float8_e8m0fnu",
    }
}
