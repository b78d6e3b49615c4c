//! `train`: runs a training spec as `catml train SPEC.toml` does, with the same progress and
//! closing line on stderr, and returns the last epoch's metrics as the JSON text the command
//! prints.

use std::path::PathBuf;

use catml_train::train::{run_spec_with_outputs, RunOptions};
use pyo3::prelude::*;

use crate::errors::{raise, Kind};

/// Trains the spec at `spec` (with the GIL released); errors are `catml.ValueError` with the
/// command's message.
#[pyfunction]
#[pyo3(signature = (spec, resume = false, quiet = false))]
pub fn train(py: Python<'_>, spec: PathBuf, resume: bool, quiet: bool) -> PyResult<String> {
    py.detach(move || {
        let options = RunOptions {
            progress: !quiet,
            resume,
        };
        let (last, outputs) =
            run_spec_with_outputs(&spec, options).map_err(|e| raise(Kind::Value, e.to_string()))?;
        if !quiet {
            eprintln!("{}", outputs.written());
        }
        serde_json::to_string(&last).map_err(|e| raise(Kind::Value, e.to_string()))
    })
}
