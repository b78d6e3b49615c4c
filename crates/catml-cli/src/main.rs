//! `catml`: check, print, shape, params, cost, eval, grad and jvp of LensIR modules and ONNX
//! models.
//!
//! Every command writes JSON (or a listing) to stdout on success; on any error it prints one
//! line to stderr, writes nothing to stdout and exits 1.

mod commands;
mod dot;
mod io;
mod train;
mod verify;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "catml",
    version,
    about = "Trace once, interpret many times: typed tensor programs and their derivatives"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Shape of an ONNX graph input with symbolic dimensions, as NAME=1x3x224x224 (repeatable)
    #[arg(long = "shape", global = true, value_name = "NAME=DIMS")]
    shapes: Vec<String>,
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
        /// Let NaN and infinities flow through the evaluation instead of stopping at them
        #[arg(long)]
        allow_non_finite: bool,
    },
    /// Outputs and the gradient of every input (reverse mode)
    Grad {
        module: PathBuf,
        #[arg(long)]
        inputs: PathBuf,
        /// JSON array with one tensor per output occurrence (default: all ones)
        #[arg(long)]
        cotangents: Option<PathBuf>,
        /// Let NaN and infinities flow through the evaluation instead of stopping at them
        #[arg(long)]
        allow_non_finite: bool,
    },
    /// Graphviz DOT of a module (with --grad, its reverse-mode program beside it)
    Dot {
        module: PathBuf,
        /// Draw the VJP program beside the module
        #[arg(long)]
        grad: bool,
    },
    /// Outputs and their tangents (forward mode)
    Jvp {
        module: PathBuf,
        #[arg(long)]
        inputs: PathBuf,
        /// JSON object mapping input names to tangents (missing: zero)
        #[arg(long)]
        tangents: PathBuf,
        /// Let NaN and infinities flow through the evaluation instead of stopping at them
        #[arg(long)]
        allow_non_finite: bool,
    },
    /// Train a diagram of modules described by a TOML spec; prints the last epoch's metrics
    Train {
        spec: PathBuf,
        /// Continue from the spec's checkpoint if it exists
        #[arg(long)]
        resume: bool,
        /// Never draw the progress bar
        #[arg(long)]
        quiet: bool,
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
                return write_stdout(&e.to_string());
            }
            return fail(&usage_error_line(&e));
        }
    };
    if let Err(e) = io::set_onnx_shapes(&cli.shapes) {
        return fail(&e);
    }
    match commands::run(cli.command) {
        Ok(out) => write_stdout(&out),
        Err(e) => fail(&e),
    }
}

/// Prints one error line and exits 1.
fn fail(message: &str) -> ExitCode {
    eprintln!("catml: {}", message.replace('\n', " "));
    ExitCode::from(1)
}

/// Writes the result; a stdout that cannot take it (a closed pipe, a full disk) is an error
/// like any other, not a panic.
fn write_stdout(text: &str) -> ExitCode {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&format!("cannot write output: {e}")),
    }
}

/// A usage error as one line: clap's message paragraph (which may list the missing arguments
/// on lines of their own) joined, without the tips and usage that follow it.
fn usage_error_line(e: &clap::Error) -> String {
    use clap::error::ErrorKind;
    if matches!(
        e.kind(),
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand | ErrorKind::MissingSubcommand
    ) {
        let names: Vec<String> = Cli::command()
            .get_subcommands()
            .map(|c| c.get_name().to_string())
            .collect();
        return format!("missing subcommand, expected one of: {}", names.join(", "));
    }
    let text = e.to_string();
    let message: Vec<&str> = text
        .lines()
        .map(str::trim)
        .skip_while(|l| l.is_empty())
        .take_while(|l| !l.is_empty())
        .collect();
    let line = message.join(" ");
    let line = line.trim_start_matches("error: ");
    if line.is_empty() {
        "invalid arguments".to_string()
    } else {
        line.to_string()
    }
}
