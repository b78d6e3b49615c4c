//! NumPy arrays to tensors and back. f32, f64, i64 and bool map to float32, float64, int64 and
//! bool; any other dtype is refused (no silent casts). Results come back as NumPy arrays that
//! take over the tensor's buffer.

use catml_core::tensor::{DType, Shape, Tensor, TensorType};
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
    } else {
        return Err(raise(
            Kind::Type,
            format!(
                "{what} has dtype {}; CatML takes float32, float64, int64 or bool arrays (convert explicitly)",
                array.dtype()
            ),
        ));
    };
    tensor.map_err(|e| raise(Kind::Value, format!("{what}: {e}")))
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
            format!("unknown dtype `{dtype}`; expected f32, f64, i64 or bool"),
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
    }
}
