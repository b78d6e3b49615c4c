//! `catml`: check, print, shape, params, cost, eval, grad and jvp of LensIR modules and ONNX
//! models.
//!
//! Every command writes JSON (or a listing) to stdout on success; on any error it prints one
//! line to stderr, writes nothing to stdout and exits 1.

mod commands;
mod dot;
mod export;
mod io;
#[cfg(feature = "mpi")]
mod mpi_train;
mod output;
mod train;
mod verify;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, CommandFactory, Parser, Subcommand};

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

/// Parameters from a safetensors file, for the commands that take inputs.
#[derive(Args, Debug, Clone, Default)]
pub struct ParamArgs {
    /// Parameters by name from a safetensors file: a plain store, or a checkpoint written by
    /// `catml train` (the arrow whose parameters fit the module is found by names and types)
    #[arg(long, value_name = "FILE.safetensors")]
    params: Option<PathBuf>,
    /// With a checkpoint, the arrow whose parameters to use when several fit
    #[arg(long, requires = "params", value_name = "NAME")]
    arrow: Option<String>,
}

/// The memory budget, for the commands that evaluate.
#[derive(Args, Debug, Clone, Copy, Default)]
pub struct MemoryArgs {
    /// Refuse to run a program whose planned peak of live values exceeds SIZE (e.g. 512M, 8G,
    /// 1.5GiB; powers of 1024). Default: 80% of the memory available
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    max_memory: Option<u64>,
}

fn parse_size(text: &str) -> Result<u64, String> {
    catml::interp::parse_bytes(text).map_err(|e| e.to_string())
}

/// The module argument's help, shared by every command.
const MODULE_HELP: &str =
    "The module: LensIR JSON (.json), a CatML listing (.catml, or any file starting `program(`), or an ONNX model (.onnx)";

#[derive(Subcommand)]
enum Command {
    /// Validate a module and summarise it
    Check {
        #[arg(help = MODULE_HELP)]
        module: PathBuf,
    },
    /// Print the CatML listing (or, with --grad, the reverse-mode program)
    Print {
        #[arg(help = MODULE_HELP)]
        module: PathBuf,
        /// Print the VJP program instead
        #[arg(long)]
        grad: bool,
        /// Print the JVP program instead
        #[arg(long, conflicts_with = "grad")]
        jvp: bool,
        /// Batch the printed program over examples: one entry per input, each an axis or
        /// `none` (shared by every example), comma-separated, e.g. `0,none,1`. Every output
        /// carries the batch in front
        #[arg(long, value_name = "IN_AXES", requires = "vmap_size")]
        vmap: Option<String>,
        /// The batch size for --vmap
        #[arg(long, value_name = "N", requires = "vmap")]
        vmap_size: Option<usize>,
        /// Write LensIR JSON instead of the listing
        #[arg(long)]
        json: bool,
    },
    /// Output types, from the shape interpreter alone
    Shape {
        #[arg(help = MODULE_HELP)]
        module: PathBuf,
    },
    /// Parameter count, total and by tag
    Params {
        #[arg(help = MODULE_HELP)]
        module: PathBuf,
    },
    /// Flops, bytes moved and peak live bytes of one evaluation
    Cost {
        #[arg(help = MODULE_HELP)]
        module: PathBuf,
        /// Cost of the VJP program instead
        #[arg(long)]
        grad: bool,
        /// With --grad: the VJP program recomputing what POLICY does not keep (nothing, dots,
        /// sqrt, names:NAME,NAME,...), and its peak live bytes beside the plain VJP program's
        #[arg(long, requires = "grad", value_name = "POLICY")]
        checkpoint: Option<String>,
        #[command(flatten)]
        params: ParamArgs,
    },
    /// Evaluate on inputs
    Eval {
        #[arg(help = MODULE_HELP)]
        module: PathBuf,
        /// JSON object mapping input names to tensors {"dtype", "shape", "data"}
        #[arg(long, value_name = "IN.json")]
        inputs: PathBuf,
        #[command(flatten)]
        params: ParamArgs,
        /// One number per line instead of one tensor per line
        #[arg(long)]
        pretty: bool,
        /// Let NaN and infinities flow through the evaluation instead of stopping at them
        #[arg(long)]
        allow_non_finite: bool,
        #[command(flatten)]
        memory: MemoryArgs,
    },
    /// Outputs and the gradient of every input (reverse mode)
    Grad {
        #[arg(help = MODULE_HELP)]
        module: PathBuf,
        /// JSON object mapping input names to tensors {"dtype", "shape", "data"}
        #[arg(long, value_name = "IN.json")]
        inputs: PathBuf,
        /// JSON array with one tensor per output occurrence (default: all ones)
        #[arg(long, value_name = "COT.json")]
        cotangents: Option<PathBuf>,
        #[command(flatten)]
        params: ParamArgs,
        /// One number per line instead of one tensor per line
        #[arg(long)]
        pretty: bool,
        /// Let NaN and infinities flow through the evaluation instead of stopping at them
        #[arg(long)]
        allow_non_finite: bool,
        #[command(flatten)]
        memory: MemoryArgs,
    },
    /// Graphviz DOT of a module (with --grad, its reverse-mode program beside it)
    Dot {
        #[arg(help = MODULE_HELP)]
        module: PathBuf,
        /// Draw the VJP program beside the module
        #[arg(long)]
        grad: bool,
    },
    /// Outputs and their tangents (forward mode)
    Jvp {
        #[arg(help = MODULE_HELP)]
        module: PathBuf,
        /// JSON object mapping input names to tensors {"dtype", "shape", "data"}
        #[arg(long, value_name = "IN.json")]
        inputs: PathBuf,
        /// JSON object mapping `tangent.<input>` to that input's tangent (missing: zero)
        #[arg(long, value_name = "TAN.json")]
        tangents: PathBuf,
        #[command(flatten)]
        params: ParamArgs,
        /// One number per line instead of one tensor per line
        #[arg(long)]
        pretty: bool,
        /// Let NaN and infinities flow through the evaluation instead of stopping at them
        #[arg(long)]
        allow_non_finite: bool,
        #[command(flatten)]
        memory: MemoryArgs,
    },
    /// Train a diagram of modules described by a TOML spec; prints the last epoch's metrics
    Train {
        /// The TOML spec (paths in it are relative to its directory)
        spec: PathBuf,
        /// Continue from the spec's checkpoint if it exists (the spec and its files must be
        /// those the checkpoint was written under)
        #[arg(long)]
        resume: bool,
        /// No progress (bar on a terminal, one line per epoch otherwise) and no list of outputs
        #[arg(long)]
        quiet: bool,
        #[command(flatten)]
        memory: MemoryArgs,
    },
    /// The registered primitives: attributes, domain, derivative rule, exact eval
    Ops {
        /// One primitive only
        name: Option<String>,
        /// A JSON array of objects (name, attrs, convention, ...) instead of text
        #[arg(long)]
        json: bool,
        /// The Markdown page docs/ops.md
        #[arg(long, conflicts_with = "json")]
        markdown: bool,
    },
    /// Write a module (or its reverse- or forward-mode program) as an ONNX model
    Export {
        #[arg(help = MODULE_HELP)]
        module: PathBuf,
        /// Where to write the ONNX model
        #[arg(long, value_name = "OUT.onnx", required_unless_present = "train_step")]
        onnx: Option<PathBuf>,
        /// MODULE is a training spec (TOML): write its whole training step (parameters,
        /// optimiser state, `step` and a batch to `new:` values and the loss terms) here
        #[arg(long, value_name = "OUT.onnx", conflicts_with_all = ["onnx", "grad", "jvp", "params"])]
        train_step: Option<PathBuf>,
        /// The default-domain opset to write
        #[arg(long, default_value_t = catml_onnx::DEFAULT_EXPORT_OPSET, value_name = "N")]
        opset: i64,
        /// Export the reverse-mode program: inputs, `seed.<k>`; outputs, `grad.<input>`
        #[arg(long)]
        grad: bool,
        /// Export the forward-mode program: inputs, `tangent.<input>`; outputs, `tangent.<k>`
        #[arg(long, conflicts_with = "grad")]
        jvp: bool,
        #[command(flatten)]
        params: ParamArgs,
    },
    /// Run the verification bundle and write its results file
    Verify {
        /// Seed of the random programs and inputs
        #[arg(long, default_value_t = catml::verify::DEFAULT_SEED)]
        seed: u64,
        /// Ten times the reference counts instead of fifty (for CI)
        #[arg(long)]
        quick: bool,
        /// Where to write the results
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
            let (line, hints) = usage_error(&e);
            return fail_with_hints(&line, &hints);
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
    fail_with_hints(message, &[])
}

/// Prints the error line, then at most two indented hint lines, and exits 1.
fn fail_with_hints(message: &str, hints: &[String]) -> ExitCode {
    let mut text = format!("catml: {}\n", message.replace('\n', " "));
    for h in hints.iter().take(2) {
        text.push_str(&format!("  {}\n", h.replace('\n', " ")));
    }
    eprint!("{text}");
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

/// A usage error as one line (clap's message paragraph, which may list the missing arguments
/// on lines of their own, joined) and up to two hints: clap's first tip ("a similar argument
/// exists") and the usage line.
fn usage_error(e: &clap::Error) -> (String, Vec<String>) {
    use clap::error::ErrorKind;
    if matches!(
        e.kind(),
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand | ErrorKind::MissingSubcommand
    ) {
        let names: Vec<String> = Cli::command()
            .get_subcommands()
            .map(|c| c.get_name().to_string())
            .collect();
        return (
            format!("missing subcommand, expected one of: {}", names.join(", ")),
            vec!["usage: catml <COMMAND>; see `catml --help`".to_string()],
        );
    }
    let text = e.render().to_string();
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    let message: Vec<&str> = lines
        .iter()
        .copied()
        .skip_while(|l| l.is_empty())
        .take_while(|l| !l.is_empty())
        .collect();
    let line = message.join(" ");
    let line = line.trim_start_matches("error: ");
    let line = if line.is_empty() {
        "invalid arguments".to_string()
    } else {
        line.to_string()
    };
    let mut hints = Vec::new();
    if let Some(tip) = lines.iter().find(|l| l.starts_with("tip: ")) {
        hints.push(tip.to_string());
    }
    if let Some(usage) = lines.iter().find(|l| l.starts_with("Usage: ")) {
        hints.push(format!("usage: {}", &usage["Usage: ".len()..]));
    }
    (line, hints)
}
