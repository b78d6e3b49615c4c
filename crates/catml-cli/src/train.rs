//! `catml train SPEC.toml`: runs the spec through the library and prints the last epoch's
//! metrics as JSON. The progress bar (stderr) is drawn only on a terminal and without --quiet.

use std::path::Path;

use catml::train::{run_spec, RunOptions};

pub fn run(spec: &Path, resume: bool, quiet: bool) -> Result<String, String> {
    let options = RunOptions {
        progress: !quiet,
        resume,
    };
    let last = run_spec(spec, options).map_err(|e| e.to_string())?;
    let mut text = serde_json::to_string_pretty(&last).expect("metrics serialise");
    text.push('\n');
    Ok(text)
}
