//! NumPy arrays to tensors and back. f32, f64, i64, bool and the integer storage dtypes map to
//! float32, float64, int64, bool, int8 ... uint64; any other dtype (float16 included) is refused
//! (no silent casts). Evaluation inputs of float32, float64 and int64 that are C-contiguous and
//! aligned are read in place, without a copy; everything else is copied once. Results come
//! back as NumPy arrays: small ones copied once into memory NumPy allocates, larger ones taking
//! over the tensor's buffer.

use std::ffi::c_int;
use std::sync::atomic::{AtomicPtr, Ordering};

use catml_core::tensor::{Array, DType, Lent, Shape, Stored, Tensor, TensorError, TensorType};
use numpy::ndarray::{ArrayD, IxDyn};
use numpy::npyffi::{self, npy_intp, PyArrayObject, NPY_TYPES, PY_ARRAY_API};
use numpy::{
    Element, IntoPyArray, PyArrayDescrMethods, PyArrayDyn, PyArrayMethods, PyUntypedArray,
    PyUntypedArrayMethods,
};
use pyo3::prelude::*;

use crate::errors::{raise, Kind};

/// How a NumPy array's elements reach its tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Read {
    /// Copied: for tensors that outlive the call (constants, traced values).
    Copy,
    /// Read in place where the layout allows: for evaluation inputs, which live only for the
    /// call. The caller must not write the array while the call runs.
    InPlace,
}

/// The tensor of a NumPy array; `what` names the argument in errors ("input `x`"), made only
/// when there is one.
pub fn to_tensor(
    obj: &Bound<'_, PyAny>,
    what: impl Fn() -> String,
    read: Read,
) -> PyResult<Tensor> {
    let Ok(array) = obj.cast::<PyUntypedArray>() else {
        return Err(raise(
            Kind::Type,
            format!(
                "{} is a {}, expected a NumPy array",
                what(),
                obj.get_type().name()?
            ),
        ));
    };
    array_tensor(array, Shape::from(array.shape()), what, read)
}

/// The tensor of a NumPy array whose dimensions are `dims` (the caller read them off it).
pub fn array_tensor(
    array: &Bound<'_, PyUntypedArray>,
    dims: Shape,
    what: impl Fn() -> String,
    read: Read,
) -> PyResult<Tensor> {
    debug_assert_eq!(dims.dims(), array.shape());
    let value_error = |e: TensorError| raise(Kind::Value, format!("{}: {e}", what()));
    // The common dtypes by the descriptor's type number, read off it without a call. A
    // built-in number in native (or no) byte order is NumPy's own dtype of that element type.
    // SAFETY: the descriptor of a live array; its leading fields have this layout in NumPy 1
    // and 2.
    let (type_num, byteorder) = unsafe {
        let descr = &(*(*array.as_array_ptr()).fields.descr).fields;
        (descr.type_num, descr.byteorder as u8)
    };
    let swapped = if cfg!(target_endian = "little") {
        b'>'
    } else {
        b'<'
    };
    if byteorder != swapped {
        // SAFETY: the element type of the type number is `T` below.
        if type_num == NPY_TYPES::NPY_FLOAT as c_int {
            let a = unsafe { array.cast_unchecked::<PyArrayDyn<f32>>() };
            return Ok(Tensor::F32(array_of(a, dims, read)?.map_err(value_error)?));
        }
        if type_num == NPY_TYPES::NPY_DOUBLE as c_int {
            let a = unsafe { array.cast_unchecked::<PyArrayDyn<f64>>() };
            return Ok(Tensor::F64(array_of(a, dims, read)?.map_err(value_error)?));
        }
        if type_num == NPY_TYPES::NPY_LONGLONG as c_int
            || (type_num == NPY_TYPES::NPY_LONG as c_int
                && std::mem::size_of::<std::ffi::c_long>() == 8)
        {
            let a = unsafe { array.cast_unchecked::<PyArrayDyn<i64>>() };
            return Ok(Tensor::I64(array_of(a, dims, read)?.map_err(value_error)?));
        }
    }
    if let Ok(a) = array.cast::<PyArrayDyn<f32>>() {
        return Ok(Tensor::F32(array_of(a, dims, read)?.map_err(value_error)?));
    } else if let Ok(a) = array.cast::<PyArrayDyn<f64>>() {
        return Ok(Tensor::F64(array_of(a, dims, read)?.map_err(value_error)?));
    } else if let Ok(a) = array.cast::<PyArrayDyn<i64>>() {
        return Ok(Tensor::I64(array_of(a, dims, read)?.map_err(value_error)?));
    } else if array.cast::<PyArrayDyn<bool>>().is_ok() {
        // NumPy takes any nonzero byte as true (a `uint8` array viewed as bool keeps its
        // bytes); Rust's `bool` must be 0 or 1, so the bytes are read as bytes.
        let bytes = array
            .call_method1("view", ("u1",))?
            .cast_into::<PyArrayDyn<u8>>()?;
        let truth = elements(&bytes)?.into_iter().map(|b| b != 0).collect();
        return Tensor::bool(dims, truth).map_err(value_error);
    }
    macro_rules! stored {
        ($t:ty, $v:ident) => {
            if let Ok(a) = array.cast::<PyArrayDyn<$t>>() {
                let a = Array::new(dims, elements(a)?).map_err(value_error)?;
                return Ok(Tensor::Stored(Stored::$v(a)));
            }
        };
    }
    stored!(i8, I8);
    stored!(i16, I16);
    stored!(i32, I32);
    stored!(u8, U8);
    stored!(u16, U16);
    stored!(u32, U32);
    stored!(u64, U64);
    Err(raise(
        Kind::Type,
        format!(
            "{} has dtype {}; CatML takes float32, float64, integer or bool arrays (convert explicitly)",
            what(),
            array.dtype()
        ),
    ))
}

/// The array of a float or int64 NumPy array (any bit pattern is a valid element, so memory
/// Python code wrote can be read in place). Read in place when asked and the buffer is
/// C-contiguous and aligned for `T`; copied otherwise.
fn array_of<T: Element + Copy + Sync>(
    a: &Bound<'_, PyArrayDyn<T>>,
    dims: Shape,
    read: Read,
) -> PyResult<Result<Array<T>, TensorError>> {
    let ptr = a.data().cast_const();
    if read == Read::InPlace && a.is_c_contiguous() && !ptr.is_null() && ptr.is_aligned() {
        let owner: Py<PyAny> = a.clone().into_any().unbind();
        // SAFETY: the array object, held by `owner`, keeps its `len` elements alive at `ptr`;
        // evaluation only reads them, and the caller does not write them during the call.
        let lent = unsafe { Lent::new(ptr, a.len(), Box::new(owner)) };
        return Ok(Array::lent(dims, lent));
    }
    Ok(Array::new(dims, elements(a)?))
}

/// The elements in row-major order (one copy: from a C-contiguous buffer directly; NumPy's
/// `as_slice` also accepts Fortran order, whose buffer is column-major, so it is not used).
/// A misaligned buffer (a view at an odd byte offset) is first copied by NumPy, whose copies
/// are aligned, since the element views need alignment.
fn elements<T: Element + Copy>(a: &Bound<'_, PyArrayDyn<T>>) -> PyResult<Vec<T>> {
    if !a.data().is_aligned() {
        let aligned = a.call_method0("copy")?.cast_into::<PyArrayDyn<T>>()?;
        return elements(&aligned);
    }
    let ro = a.readonly();
    if a.is_c_contiguous() {
        if let Ok(s) = ro.as_slice() {
            return Ok(s.to_vec());
        }
    }
    Ok(ro.as_array().iter().copied().collect())
}

/// A NumPy array owning the tensor's buffer (no copy unless the buffer is shared), or, for a
/// result of at most `COPY_BELOW` elements, a copy of it in memory NumPy allocates.
pub fn to_numpy<'py>(py: Python<'py>, t: Tensor) -> PyResult<Bound<'py, PyAny>> {
    if let Some(copied) = small_copy(py, &t) {
        return copied;
    }
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

/// Results of at most this many elements are copied into an array NumPy allocates (cheaper
/// than a second Python object keeping a Rust buffer alive); larger ones keep their buffer.
const COPY_BELOW: usize = 1024;

/// The copy of a result of at most `COPY_BELOW` elements (and of a rank NumPy takes) into a new
/// NumPy array; `None` for any other, which keeps its buffer.
fn small_copy<'py>(py: Python<'py>, t: &Tensor) -> Option<PyResult<Bound<'py, PyAny>>> {
    let dims = t.dims();
    match t {
        Tensor::F32(a) => copied(py, dims, a.data()),
        Tensor::F64(a) => copied(py, dims, a.data()),
        Tensor::I64(a) => copied(py, dims, a.data()),
        Tensor::Bool(a) => copied(py, dims, a.data()),
        Tensor::Stored(s) => match s {
            Stored::I8(a) => copied(py, dims, a.data()),
            Stored::I16(a) => copied(py, dims, a.data()),
            Stored::I32(a) => copied(py, dims, a.data()),
            Stored::U8(a) => copied(py, dims, a.data()),
            Stored::U16(a) => copied(py, dims, a.data()),
            Stored::U32(a) => copied(py, dims, a.data()),
            Stored::U64(a) => copied(py, dims, a.data()),
            _ => None,
        },
    }
}

/// The most dimensions a copied result has (NumPy 1 takes up to 32).
const MAX_RANK: usize = 32;

/// A new C-contiguous NumPy array of `dims` holding `data`, made by NumPy's
/// `PyArray_NewFromDescr` (NumPy allocates the elements and the array owns them), then one
/// copy; `None` when `data` is too long or `dims` of too high a rank.
fn copied<'py, T: Element + Copy>(
    py: Python<'py>,
    dims: &[usize],
    data: &[T],
) -> Option<PyResult<Bound<'py, PyAny>>> {
    if data.len() > COPY_BELOW || dims.len() > MAX_RANK {
        return None;
    }
    debug_assert_eq!(dims.iter().product::<usize>(), data.len());
    let mut shape = [0 as npy_intp; MAX_RANK];
    for (s, &d) in shape.iter_mut().zip(dims) {
        // A dimension of a tensor of at most `COPY_BELOW` elements fits.
        *s = d as npy_intp;
    }
    // SAFETY: the array type and a new reference to `T`'s descriptor (which the call takes
    // over), `dims.len()` dimensions at `shape`, no strides (C order) and no data (NumPy
    // allocates it); the result is a new reference or null with an exception set.
    let made = unsafe {
        let ptr = PY_ARRAY_API.PyArray_NewFromDescr(
            py,
            array_type(py),
            T::get_dtype(py).into_dtype_ptr(),
            dims.len() as c_int,
            shape.as_mut_ptr(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
            std::ptr::null_mut(),
        );
        Bound::from_owned_ptr_or_err(py, ptr)
    };
    Some(made.inspect(|array| {
        // SAFETY: `array` is a new C-contiguous array of `data.len()` elements of `T`, which
        // nothing else has seen yet; every element is written before it is read.
        unsafe {
            let fields = &(*array.as_ptr().cast::<PyArrayObject>()).fields;
            std::ptr::copy_nonoverlapping(data.as_ptr(), fields.data.cast::<T>(), data.len());
        }
    }))
}

/// NumPy's `ndarray` type, looked up once.
fn array_type(py: Python<'_>) -> *mut pyo3::ffi::PyTypeObject {
    static TYPE: AtomicPtr<pyo3::ffi::PyTypeObject> = AtomicPtr::new(std::ptr::null_mut());
    let ty = TYPE.load(Ordering::Relaxed);
    if !ty.is_null() {
        return ty;
    }
    // SAFETY: NumPy's C API is loaded (or imported now); the type object is static in NumPy.
    let ty = unsafe { npyffi::get_type_object(py, npyffi::NpyTypes::PyArray_Type) };
    TYPE.store(ty, Ordering::Relaxed);
    ty
}

fn owned<T: Element + Copy>(
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

/// The address of the first element of the tensor that `array` becomes as an evaluation input:
/// the array's own data address when it is read in place (0 for the storage dtypes, which are
/// always copied). Tests use it to show that no copy is made.
#[pyfunction]
pub fn input_address(array: &Bound<'_, PyAny>) -> PyResult<usize> {
    let t = to_tensor(array, || "the array".into(), Read::InPlace)?;
    Ok(match &t {
        Tensor::F32(a) => a.data().as_ptr() as usize,
        Tensor::F64(a) => a.data().as_ptr() as usize,
        Tensor::I64(a) => a.data().as_ptr() as usize,
        Tensor::Bool(a) => a.data().as_ptr() as usize,
        Tensor::Stored(_) => 0,
    })
}
