//! `Value`: a tensor outside a trace, a variable of the current trace inside one. The Python
//! `Tracer` class wraps one; every operation is one primitive applied by name.

use std::sync::Arc;

use catml_core::ir::{Attrs, Prim};
use catml_core::prim::{builtins, Constant};
use catml_core::tensor::Tensor;
use catml_core::trace::Value;
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::array::{to_numpy, to_tensor, Read};
use crate::errors::{from_trace, raise, Kind};

/// One value of a traced (or eagerly run) Python function.
#[pyclass(name = "Value", module = "catml._catml", frozen)]
pub struct PyValue {
    pub(crate) value: Value,
}

impl PyValue {
    /// Wraps `v`, raising its error if it failed.
    pub fn checked(v: Value) -> PyResult<PyValue> {
        match v.error() {
            Some(e) => Err(from_trace(e)),
            None => Ok(PyValue { value: v }),
        }
    }

    fn ty(&self) -> PyResult<catml_core::tensor::TensorType> {
        self.value.ty().map_err(|e| from_trace(&e))
    }
}

#[pymethods]
impl PyValue {
    /// A constant value holding a copy of a NumPy array.
    #[staticmethod]
    fn from_array(array: &Bound<'_, PyAny>) -> PyResult<PyValue> {
        Ok(PyValue {
            value: Value::from(to_tensor(array, || "the array".into(), Read::Copy)?),
        })
    }

    /// The dimensions.
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.ty()?.shape.dims())
    }

    /// The dtype's CatML name: `f32`, `f64`, `i64` or `bool`.
    #[getter]
    fn dtype(&self) -> PyResult<&'static str> {
        Ok(self.ty()?.dtype.as_str())
    }

    /// Whether this is a variable of a trace rather than numbers.
    #[getter]
    fn is_traced(&self) -> bool {
        self.value.is_traced()
    }

    /// The numbers of an eager value as a NumPy array; a traced value has none.
    fn numpy<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let t: Tensor = self.value.tensor().map_err(|e| from_trace(&e))?.clone();
        to_numpy(py, t)
    }

    fn __repr__(&self) -> String {
        format!("{:?}", self.value)
    }
}

/// Applies the built-in primitive `name` with attributes given as a JSON object to the
/// operands: records a node inside a trace, evaluates now outside one.
#[pyfunction]
pub fn apply(name: &str, attrs: &str, operands: Vec<PyRef<'_, PyValue>>) -> PyResult<PyValue> {
    let prim = primitive(name, attrs)?;
    let operands: Vec<&Value> = operands.iter().map(|v| &v.value).collect();
    PyValue::checked(Value::apply(prim, &operands))
}

/// A constant node holding a copy of the array (inside a trace; the array itself outside).
#[pyfunction]
pub fn constant(array: &Bound<'_, PyAny>) -> PyResult<PyValue> {
    let t = to_tensor(array, || "the constant".into(), Read::Copy)?;
    PyValue::checked(Value::apply(Arc::new(Constant::new(t)), &[]))
}

/// The built-in primitive `name` with these attributes.
pub fn primitive(name: &str, attrs: &str) -> PyResult<Prim> {
    let attrs: Attrs = match serde_json::from_str(attrs) {
        Ok(serde_json::Value::Object(m)) => m,
        _ => {
            return Err(raise(
                Kind::Type,
                format!("attributes of `{name}` must be a JSON object, found {attrs}"),
            ))
        }
    };
    match builtins().construct(name, &attrs) {
        None => Err(raise(Kind::Value, format!("unknown primitive `{name}`"))),
        Some(Err(e)) => Err(raise(Kind::Type, format!("{name}: {e}"))),
        Some(Ok(p)) => Ok(p),
    }
}
