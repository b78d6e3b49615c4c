//! `trace`: runs a Python function once on traced values and keeps what it did as a program.

use catml_core::tensor::TensorType;
use catml_core::trace::{trace_named, TraceError, Value};
use pyo3::prelude::*;

use crate::array::tensor_type;
use crate::errors::from_trace;
use crate::program::PyProgram;
use crate::value::PyValue;

/// Traces `f` on data inputs named `names` of types `(shape, dtype)`. `f` receives a list of
/// `Value`s and returns a list of `Value`s (the outputs). An exception raised by `f` is raised
/// again unchanged; a library error inside the trace becomes a `catml.Error`.
#[pyfunction]
pub fn trace(
    py: Python<'_>,
    f: &Bound<'_, PyAny>,
    names: Vec<String>,
    types: Vec<(Vec<usize>, String)>,
) -> PyResult<PyProgram> {
    let types: Vec<TensorType> = types
        .into_iter()
        .map(|(shape, dtype)| tensor_type(shape, &dtype))
        .collect::<PyResult<_>>()?;
    let named: Vec<(&str, TensorType)> = names.iter().map(String::as_str).zip(types).collect();
    let mut raised: Option<PyErr> = None;
    let traced = trace_named(&named, |args: &[Value]| -> Result<Vec<Value>, TraceError> {
        match call(py, f, args) {
            Ok(outs) => Ok(outs),
            Err(e) => {
                raised = Some(e);
                Ok(Vec::new())
            }
        }
    });
    if let Some(e) = raised {
        return Err(e);
    }
    let traced = traced.map_err(|e| from_trace(&e))?;
    Ok(PyProgram::new(traced.program, traced.params))
}

fn call(py: Python<'_>, f: &Bound<'_, PyAny>, args: &[Value]) -> PyResult<Vec<Value>> {
    let args = args
        .iter()
        .map(|v| Py::new(py, PyValue { value: v.clone() }))
        .collect::<PyResult<Vec<_>>>()?;
    let outs: Vec<PyRef<'_, PyValue>> = f.call1((args,))?.extract()?;
    Ok(outs.iter().map(|v| v.value.clone()).collect())
}
