use crate::diagram::DiagramError;
use crate::optim::OptimError;
use crate::tensor::{ParamsError, TensorType};

/// Why data could not be read, or training could not start, continue or write its outputs.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TrainError {
    #[error("{path}: {message}")]
    Csv { path: String, message: String },
    #[error("{path}: line {line}, column \"{column}\": expected a number or an empty cell, found \"{value}\"")]
    Cell {
        path: String,
        line: u64,
        column: String,
        value: String,
    },
    #[error(
        "{path}: line {line}, column \"{column}\": label {value} is not a class in 0..{classes}"
    )]
    Label {
        path: String,
        line: u64,
        column: String,
        value: f64,
        classes: usize,
    },
    #[error("object \"{object}\": unknown column \"{column}\" (the data has {available})")]
    UnknownColumn {
        object: String,
        column: String,
        available: String,
    },
    #[error(
        "object \"{object}\": {found} columns given but one example has {expected} values ({ty})"
    )]
    ColumnCount {
        object: String,
        expected: usize,
        found: usize,
        ty: TensorType,
    },
    #[error(
        "object \"{object}\": labels with {classes} classes need type [{classes}], found {ty}"
    )]
    LabelType {
        object: String,
        classes: usize,
        ty: TensorType,
    },
    #[error("data binds unknown object \"{object}\"")]
    UnknownObject { object: String },
    #[error("{term} reads object \"{object}\", which has no data columns")]
    NoData { term: String, object: String },
    #[error("the {which} data has no rows")]
    Empty { which: &'static str },
    #[error("evaluation path \"{name}\": {source}")]
    Probe { name: String, source: DiagramError },
    #[error("parameters: missing `{name}` ({ty})")]
    MissingParam { name: String, ty: TensorType },
    #[error("parameters: `{name}` has type {found}, expected {expected}")]
    ParamType {
        name: String,
        expected: TensorType,
        found: TensorType,
    },
    #[error(transparent)]
    Diagram(#[from] DiagramError),
    #[error("optimiser: {0}")]
    Optim(#[from] OptimError),
    #[error("{path}: {source}")]
    Params { path: String, source: ParamsError },
    #[error("checkpoint {path}: {reason}")]
    Checkpoint { path: String, reason: String },
    #[error("{path}: {source}")]
    Spec {
        path: String,
        source: super::spec::SpecError,
    },
    #[error("{path}: {reason}")]
    Output { path: String, reason: String },
    #[error("{shards} shards: {reason}")]
    Shards { shards: usize, reason: String },
    #[error("rank {rank} of {ranks}: {reason}")]
    Distributed {
        rank: usize,
        ranks: usize,
        reason: String,
    },
}
