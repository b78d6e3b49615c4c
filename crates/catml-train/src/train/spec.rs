//! The TOML description of a training run (`catml train SPEC.toml`). Unknown keys are errors;
//! every mistake is reported as one line naming its key (`equations[1].left: unknown arrow "q"`).
//!
//! ```toml
//! seed = 0
//! epochs = 30
//! batch_size = 32                      # the arrows' modules have this leading dimension
//!
//! [data]
//! train = "triangle/train.csv"         # paths are relative to this file
//! held_out = "triangle/test.csv"       # optional: metrics are measured on it
//!
//! [objects.E]
//! shape = [8]                          # per-example shape; dtype = "f32" (default) or "f64"
//! columns = ["e0", "e1", "e2", "e3", "e4", "e5", "e6", "e7"]
//! [objects.D]
//! shape = [4]
//! labels = "diagnosis"                 # integer classes 0..4, one-hot encoded
//!
//! [arrows.f]
//! module = "triangle/f.json"           # LensIR module: one data input, one output
//! source = "E"
//! target = "S"
//! # params = "f.safetensors"          # optional; else seeded Glorot-uniform weights, zero biases
//!
//! [[equations]]
//! name = "triangle"
//! left = ["h"]
//! right = ["f", "g"]                   # [] is the identity at the other path's source
//! weight = 1.0                         # default 1
//! distance = "squared_error"           # (default) per row ½ Σ (a − b)²; "mse": per row the
//!                                      # mean of (a − b)², so the term is the mean over all
//!                                      # elements; or "cross_entropy"
//!
//! [[supervised]]
//! name = "diagnosis"
//! path = ["h"]
//! loss = "cross_entropy"
//!
//! [[evaluate]]                         # extra paths whose accuracy (or error) is reported
//! name = "g_after_f"
//! path = ["f", "g"]
//!
//! [optimiser]
//! kind = "adamw"                       # "sgd" | "adam" | "adamw"
//! lr = 0.01
//! weight_decay = 0.0001
//! clip_norm = 5.0                      # optional
//! schedule = { kind = "cosine", warmup = 20, floor = 0.1 }  # total: steps; default all steps
//! # (give `total` explicitly to resume a run with a larger `epochs` on the same schedule)
//!
//! [output]
//! checkpoint = "out/triangle.safetensors"
//! metrics = "out/metrics.jsonl"
//! plot = "out/loss.svg"                # losses, terms, defects and accuracies per epoch
//! plot_scale = "log"                   # optional: "linear" (default) or "log" loss axis
//!
//! [distributed]                        # optional; see DISTRIBUTED.md
//! shards = 3                           # pieces per batch, added in order (default: 1, or the
//!                                      # number of MPI ranks); fix it for the same bits on any
//!                                      # number of ranks
//! deterministic = true                 # gather and add in piece order (default); false: all-reduce
//! timeout = 60                         # seconds a rank waits for the others before it stops the job
//! ```
//!
//! The checkpoint records the spec's settings and the SHA-256 of every file it reads; `--resume`
//! refuses a checkpoint written under other settings or files, naming what changed (`epochs`
//! may grow, unless a cosine schedule without `total` takes its length from it; `[output]` may
//! change).

use std::collections::BTreeMap;

use serde::Deserialize;

/// A mistake in a spec: the key it concerns and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{key}: {message}")]
pub struct SpecError {
    pub key: String,
    pub message: String,
}

impl SpecError {
    pub fn new(key: impl Into<String>, message: impl Into<String>) -> SpecError {
        SpecError {
            key: key.into(),
            message: message.into(),
        }
    }
}

fn one() -> f64 {
    1.0
}

/// A training run.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Spec {
    pub seed: u64,
    pub epochs: usize,
    pub batch_size: usize,
    pub data: DataSpec,
    pub objects: BTreeMap<String, ObjectSpec>,
    pub arrows: BTreeMap<String, ArrowSpec>,
    #[serde(default)]
    pub equations: Vec<EquationSpec>,
    #[serde(default)]
    pub supervised: Vec<SupervisedSpec>,
    #[serde(default)]
    pub evaluate: Vec<ProbeSpec>,
    pub optimiser: OptimiserSpec,
    #[serde(default)]
    pub output: OutputSpec,
    #[serde(default)]
    pub distributed: DistributedSpec,
}

fn yes() -> bool {
    true
}

fn sixty() -> f64 {
    60.0
}

/// How batches are cut into pieces and how ranks combine them.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DistributedSpec {
    /// Pieces per batch; default 1 in one process, the number of ranks under MPI.
    pub shards: Option<usize>,
    /// Gather every piece and add in piece order (bitwise equal on any number of ranks).
    #[serde(default = "yes")]
    pub deterministic: bool,
    /// Seconds one collective operation may wait for the other ranks.
    #[serde(default = "sixty")]
    pub timeout: f64,
}

impl Default for DistributedSpec {
    fn default() -> DistributedSpec {
        DistributedSpec {
            shards: None,
            deterministic: true,
            timeout: 60.0,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DataSpec {
    pub train: String,
    pub held_out: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ObjectSpec {
    pub shape: Vec<usize>,
    pub dtype: Option<String>,
    pub columns: Option<Vec<String>>,
    pub labels: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArrowSpec {
    pub module: String,
    pub source: String,
    pub target: String,
    pub params: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DistanceSpec {
    /// `squared_error` (the default): per row ½ Σ_j (a_j − b_j)².
    #[default]
    SquaredError,
    /// `mse`: per row (1/F) Σ_j (a_j − b_j)² over its F elements; averaged over the rows, the
    /// mean over all elements, as the `mse` primitive.
    Mse,
    CrossEntropy,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EquationSpec {
    pub name: Option<String>,
    pub left: Vec<String>,
    pub right: Vec<String>,
    #[serde(default = "one")]
    pub weight: f64,
    #[serde(default)]
    pub distance: DistanceSpec,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SupervisedSpec {
    pub name: Option<String>,
    pub path: Vec<String>,
    #[serde(default = "one")]
    pub weight: f64,
    #[serde(default)]
    pub loss: DistanceSpec,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProbeSpec {
    pub name: String,
    pub path: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OptimiserSpec {
    pub kind: OptimiserKind,
    pub lr: f64,
    /// SGD only.
    pub momentum: Option<f64>,
    /// SGD only.
    pub nesterov: Option<bool>,
    /// Adam and AdamW only.
    pub betas: Option<[f64; 2]>,
    /// Adam and AdamW only.
    pub eps: Option<f64>,
    #[serde(default)]
    pub weight_decay: f64,
    pub clip_norm: Option<f64>,
    pub schedule: Option<ScheduleSpec>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OptimiserKind {
    Sgd,
    Adam,
    Adamw,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScheduleSpec {
    pub kind: ScheduleKind,
    /// step: steps between decays.
    pub every: Option<u64>,
    /// step: the decay factor.
    pub gamma: Option<f64>,
    /// cosine: warm-up steps (default 0).
    pub warmup: Option<u64>,
    /// cosine: total steps (default: every step of the run).
    pub total: Option<u64>,
    /// cosine: the final fraction of the rate (default 0).
    pub floor: Option<f64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ScheduleKind {
    Constant,
    Step,
    Cosine,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutputSpec {
    pub checkpoint: Option<String>,
    pub metrics: Option<String>,
    pub plot: Option<String>,
    /// The plot's loss axis: "linear" (default) or "log".
    #[serde(default)]
    pub plot_scale: super::PlotScale,
}

/// 1-based line of a byte offset.
fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

impl Spec {
    /// Parses TOML text; a syntax error names its line, a schema error its key.
    pub fn parse(text: &str) -> Result<Spec, SpecError> {
        let de = toml::Deserializer::parse(text).map_err(|e| {
            let line = e.span().map_or(1, |s| line_of(text, s.start));
            SpecError::new(
                format!("line {line}"),
                e.message().trim().replace('\n', " "),
            )
        })?;
        serde_path_to_error::deserialize(de).map_err(|e| {
            let path = e.path().to_string();
            let key = if path == "." {
                "spec".to_string()
            } else {
                path
            };
            let message = e.inner().message().trim().replace('\n', " ");
            SpecError::new(key, crate::ir::suggest::serde_message(&message))
        })
    }
}
