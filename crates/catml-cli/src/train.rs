//! `catml train SPEC.toml`: runs the spec through the library and prints the last epoch's
//! metrics as JSON. The progress bar (stderr) is drawn only on a terminal and without --quiet.
//! Built with the `mpi` feature and started by `mpirun`, every rank trains its share of each
//! batch (see `mpi_train.rs`); rank 0 alone writes files and prints.

use std::path::Path;

use catml::train::{run_spec, RunOptions};

pub fn run(spec: &Path, resume: bool, quiet: bool) -> Result<String, String> {
    let options = RunOptions {
        progress: !quiet,
        resume,
    };
    #[cfg(feature = "mpi")]
    if crate::mpi_train::launched_by_mpirun() {
        return crate::mpi_train::run(spec, options);
    }
    let last = run_spec(spec, options).map_err(|e| e.to_string())?;
    Ok(metrics_text(&last))
}

pub fn metrics_text(last: &catml::train::EpochMetrics) -> String {
    let mut text = serde_json::to_string_pretty(last).expect("metrics serialise");
    text.push('\n');
    text
}
