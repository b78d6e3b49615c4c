//! `catml`: check, print, shape, params, cost, eval, grad and jvp of LensIR modules.
//!
//! Every command writes JSON (or a listing) to stdout on success; on any error it prints one
//! line to stderr, writes nothing to stdout and exits 1.

mod commands;
mod io;
mod verify;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "catml",
    version,
    about = "Trace once, interpret many times: typed tensor programs and their derivatives"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Validate a module and summarise it
    Check { module: PathBuf },
    /// Print the CatML listing (or, with --grad, the reverse-mode program)
    Print {
        module: PathBuf,
        /// Print the VJP program instead
        #[arg(long)]
        grad: bool,
        /// Print the JVP program instead
        #[arg(long, conflicts_with = "grad")]
        jvp: bool,
        /// Write LensIR JSON instead of the listing
        #[arg(long)]
        json: bool,
    },
    /// Output types, from the shape interpreter alone
    Shape { module: PathBuf },
    /// Parameter count, total and by tag
    Params { module: PathBuf },
    /// Flops, bytes moved and peak live bytes of one evaluation
    Cost {
        module: PathBuf,
        /// Cost of the VJP program instead
        #[arg(long)]
        grad: bool,
    },
    /// Evaluate on inputs
    Eval {
        module: PathBuf,
        /// JSON object mapping input names to tensors
        #[arg(long)]
        inputs: PathBuf,
    },
    /// Outputs and the gradient of every input (reverse mode)
    Grad {
        module: PathBuf,
        #[arg(long)]
        inputs: PathBuf,
        /// JSON array with one tensor per output occurrence (default: all ones)
        #[arg(long)]
        cotangents: Option<PathBuf>,
    },
    /// Outputs and their tangents (forward mode)
    Jvp {
        module: PathBuf,
        #[arg(long)]
        inputs: PathBuf,
        /// JSON object mapping input names to tangents (missing: zero)
        #[arg(long)]
        tangents: PathBuf,
    },
    /// Run the verification bundle and write its results file
    Verify {
        #[arg(long, default_value_t = catml::verify::DEFAULT_SEED)]
        seed: u64,
        /// The documents' counts (for CI) instead of ten times them
        #[arg(long)]
        quick: bool,
        #[arg(long, default_value = "verification-results.json")]
        output: PathBuf,
        /// A few cases per family (for tests of the command itself)
        #[arg(long, hide = true, conflicts_with = "quick")]
        smoke: bool,
    },
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
                print!("{e}");
                return ExitCode::SUCCESS;
            }
            let text = e.to_string();
            let line = text.lines().next().unwrap_or("invalid arguments");
            eprintln!("catml: {}", line.trim_start_matches("error: "));
            return ExitCode::from(1);
        }
    };
    match commands::run(cli.command) {
        Ok(out) => {
            print!("{out}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("catml: {}", e.replace('\n', " "));
            ExitCode::from(1)
        }
    }
}
