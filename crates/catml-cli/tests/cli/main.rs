//! Every test of the `catml` command, in one binary.

mod ad_cli;
mod commands;
mod dot;
mod export_cli;
mod memory_cli;
#[cfg(feature = "mpi")]
mod mpi_runs;
#[cfg(feature = "mpi")]
mod mpi_specs;
mod onnx_cli;
mod ops_cli;
mod output_cli;
mod params_cli;
mod train;
mod train_step_cli;
mod verify_cmd;
mod vmap_cli;
