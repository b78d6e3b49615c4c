//! CatML's exceptions: `catml.Error` and its subclasses, which also derive from the built-in
//! class that fits (`TypeError` for refused types, `ValueError` for refused values), so
//! `except TypeError` catches a mistyped input. Messages are the library's one-line messages.

use catml_core::trace::TraceError;
use pyo3::exceptions::{PyException, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple, PyType};

/// Which exception class a library error becomes.
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    /// A primitive's type rule, an input of the wrong dtype or shape, a wrong count.
    Type,
    /// A value outside a kernel's domain, a non-finite result, an unreadable file.
    Value,
    /// A traced value used outside the trace that made it.
    Leak,
}

struct Classes {
    error: Py<PyType>,
    type_error: Py<PyType>,
    value_error: Py<PyType>,
    leak: Py<PyType>,
}

static CLASSES: PyOnceLock<Classes> = PyOnceLock::new();

fn make(py: Python<'_>, name: &str, bases: Bound<'_, PyTuple>, doc: &str) -> PyResult<Py<PyType>> {
    let ns = PyDict::new(py);
    ns.set_item("__doc__", doc)?;
    ns.set_item("__module__", "catml")?;
    let ty = py
        .get_type::<PyType>()
        .call1((name, bases, ns))?
        .cast_into::<PyType>()?;
    Ok(ty.unbind())
}

fn classes(py: Python<'_>) -> PyResult<&Classes> {
    CLASSES.get_or_try_init(py, || {
        let error = make(
            py,
            "Error",
            PyTuple::new(py, [py.get_type::<PyException>()])?,
            "Every error CatML raises.",
        )?;
        let sub = |name: &str, builtin: Bound<'_, PyType>, doc: &str| {
            make(
                py,
                name,
                PyTuple::new(py, [error.bind(py).clone(), builtin])?,
                doc,
            )
        };
        Ok(Classes {
            type_error: sub(
                "TypeError",
                py.get_type::<PyTypeError>(),
                "Operands or inputs of the wrong dtype, shape or count.",
            )?,
            value_error: sub(
                "ValueError",
                py.get_type::<PyValueError>(),
                "Values a kernel refuses, non-finite results, unreadable modules.",
            )?,
            leak: sub(
                "TracerLeakError",
                py.get_type::<PyValueError>(),
                "A traced value used outside the trace that made it.",
            )?,
            error,
        })
    })
}

/// Adds the classes to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    let c = classes(py)?;
    m.add("Error", c.error.bind(py))?;
    m.add("TypeError", c.type_error.bind(py))?;
    m.add("ValueError", c.value_error.bind(py))?;
    m.add("TracerLeakError", c.leak.bind(py))?;
    Ok(())
}

/// A Python exception of the class for `kind` with this message.
pub fn raise(kind: Kind, message: impl Into<String>) -> PyErr {
    let message = message.into();
    Python::attach(|py| match classes(py) {
        Ok(c) => {
            let ty = match kind {
                Kind::Type => &c.type_error,
                Kind::Value => &c.value_error,
                Kind::Leak => &c.leak,
            };
            PyErr::from_type(ty.bind(py).clone(), message)
        }
        Err(e) => e,
    })
}

/// The class a trace error belongs to.
pub fn kind_of(e: &TraceError) -> Kind {
    match e {
        TraceError::ForeignValue { .. } | TraceError::Symbolic { .. } => Kind::Leak,
        TraceError::Type { .. }
        | TraceError::Build { .. }
        | TraceError::NotScalar { .. }
        | TraceError::ArgNum { .. }
        | TraceError::Count { .. }
        | TraceError::SeedType { .. }
        | TraceError::ParamType { .. }
        | TraceError::MissingParam { .. } => Kind::Type,
        _ => Kind::Value,
    }
}

/// The message of a trace error without the Rust call site it names: inside Python the
/// traceback gives the user's line instead.
pub fn message_of(e: &TraceError) -> String {
    let text = e.to_string();
    match e.location() {
        Some(location) => text
            .strip_prefix(&format!("{location}: "))
            .map(str::to_string)
            .unwrap_or(text),
        None => text,
    }
}

/// A trace error as a Python exception.
pub fn from_trace(e: &TraceError) -> PyErr {
    raise(kind_of(e), message_of(e))
}
