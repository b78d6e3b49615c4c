//! Training diagrams on data: CSV tables bound to objects, seeded shuffling and minibatches,
//! optimiser steps on the diagram's one loss, per-epoch metrics as JSON lines, checkpoints that
//! resume bit for bit, an SVG loss curve, and runs described by a TOML spec.
//!
//! Every output file is written through a temporary sibling and a rename, so an error never
//! leaves a partial file. Nothing here prints to stdout; the progress bar draws on stderr.

mod batches;
mod checkpoint;
mod dataset;
pub mod distributed;
mod error;
mod evaluate;
mod init;
mod metrics;
mod module_file;
mod param_file;
mod plot;
mod progress;
mod provenance;
mod setup;
mod shards;
pub mod spec;
mod step_update;
mod table;
mod train_step;
mod trainer;

pub use dataset::{Columns, Dataset};
pub use error::TrainError;
pub use evaluate::Evaluation;
pub use init::initialise;
pub use metrics::{from_json_lines, to_json_lines, write_metrics, EpochMetrics};
pub use module_file::{
    read_module, read_module_with, ModuleFileError, ModuleFormat, MAX_MODULE_BYTES,
};
pub use param_file::{module_params, ParamFileError};
pub use plot::{loss_curve_svg, training_curves_svg, write_plot, write_plot_scaled, PlotScale};
pub use progress::{epoch_summary, Progress};
pub use provenance::{file_digest, Provenance};
pub use setup::{prepare, run_spec, run_spec_on, run_spec_with_outputs, Run, RunOptions};
pub use shards::ShardLayout;
pub use table::Table;
pub use train_step::{TrainStep, STEP};
pub use trainer::{Outputs, Trainer};
