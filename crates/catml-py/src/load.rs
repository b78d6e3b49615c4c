//! `load`: a program from a file: LensIR JSON, a CatML listing, or an ONNX model (whose
//! initializers become the program's stored parameters).

use std::path::Path;

use catml_core::tensor::Params;
use pyo3::prelude::*;

use crate::errors::{raise, Kind};
use crate::program::PyProgram;

/// Reads the program at `path`; the format follows the extension as in `catml` commands.
#[pyfunction]
pub fn load(py: Python<'_>, path: std::path::PathBuf) -> PyResult<PyProgram> {
    let is_onnx = path.extension().is_some_and(|e| e == "onnx");
    py.detach(move || read(&path, is_onnx))
}

fn read(path: &Path, is_onnx: bool) -> PyResult<PyProgram> {
    if is_onnx {
        let imported = catml_onnx::read_file(path, &catml_onnx::Shapes::new())
            .map_err(|e| raise(Kind::Value, format!("{}: {e}", path.display())))?;
        return Ok(PyProgram::new(imported.program, imported.params));
    }
    let program =
        catml_train::train::read_module(path).map_err(|e| raise(Kind::Value, e.to_string()))?;
    Ok(PyProgram::new(program, Params::new()))
}
