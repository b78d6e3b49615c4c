//! `catml train SPEC.toml`: runs the spec through the library and prints the last epoch's
//! metrics as JSON on stdout. On stderr, unless --quiet: progress (a bar on a terminal, one
//! line per epoch otherwise) and, at the end, the files the run wrote.
//! Built with the `mpi` feature and started by `mpirun`, every rank trains its share of each
//! batch (see `mpi_train.rs`); rank 0 alone writes files and prints.

use std::path::Path;

use catml::train::{run_spec_with_outputs, RunOptions};

pub fn run(spec: &Path, resume: bool, quiet: bool) -> Result<String, String> {
    let options = RunOptions {
        progress: !quiet,
        resume,
    };
    #[cfg(feature = "mpi")]
    if crate::mpi_train::launched_by_mpirun() {
        return crate::mpi_train::run(spec, options);
    }
    let (last, outputs) = run_spec_with_outputs(spec, options)
        .map_err(|e| format!("{e}{}", crate::commands::budget_hint(&e)))?;
    if !quiet {
        report_outputs(&outputs);
    }
    Ok(metrics_text(&last))
}

/// What the run wrote, on stderr.
pub fn report_outputs(outputs: &catml::train::Outputs) {
    eprintln!("{}", outputs.written());
}

/// The last epoch's metrics as pretty JSON, one trailing newline.
pub fn metrics_text(last: &catml::train::EpochMetrics) -> String {
    let mut text = serde_json::to_string_pretty(last).expect("metrics serialise");
    text.push('\n');
    text
}
