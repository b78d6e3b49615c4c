use crate::ad::AdError;
use crate::interp::EvalError;
use crate::ir::{BuildError, ComposeError, TypeError};
use crate::tensor::{DType, TensorType};

/// Why a path does not resolve in a diagram.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum PathError {
    #[error("the path has no arrows (an identity path names its object)")]
    Empty,
    #[error("unknown arrow \"{name}\"")]
    UnknownArrow { index: usize, name: String },
    #[error("unknown object \"{name}\"")]
    UnknownObject { name: String },
    #[error("arrow \"{next}\" starts at \"{found}\" but \"{prev}\" ends at \"{expected}\": the path does not compose")]
    DoesNotCompose {
        index: usize,
        prev: String,
        next: String,
        expected: String,
        found: String,
    },
}

/// Why a diagram was rejected, or could not be compiled or evaluated.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum DiagramError {
    #[error("{kind} name \"{name}\": expected letters, digits, '_' or '-'")]
    InvalidName { kind: &'static str, name: String },
    #[error("duplicate {kind} \"{name}\"")]
    Duplicate { kind: &'static str, name: String },
    #[error("object \"{name}\": type {ty} is not a float type")]
    ObjectDType { name: String, ty: TensorType },
    #[error("arrow \"{arrow}\": expected one data input and one output, found {inputs} data inputs and {outputs} outputs")]
    ArrowInterface {
        arrow: String,
        inputs: usize,
        outputs: usize,
    },
    #[error("arrow \"{arrow}\": its {end} {ty} has no batch dimension (expected rank >= 1)")]
    NoBatch {
        arrow: String,
        end: &'static str,
        ty: TensorType,
    },
    #[error("arrow \"{arrow}\": unknown {end} object \"{object}\"")]
    UnknownObject {
        arrow: String,
        end: &'static str,
        object: String,
    },
    #[error("arrow \"{arrow}\": {end} object \"{object}\" has batch type {expected}, the program's {side} has {found}")]
    ArrowType {
        arrow: String,
        end: &'static str,
        side: &'static str,
        object: String,
        expected: TensorType,
        found: TensorType,
    },
    #[error("arrow \"{arrow}\": its {side} {found} is one example of object \"{object}\", without a batch dimension; a diagram's arrows take batches, so declare it {expected}")]
    Unbatched {
        arrow: String,
        side: &'static str,
        object: String,
        /// The batched type, or its pattern when the diagram has no batch size yet.
        expected: String,
        found: TensorType,
    },
    #[error("arrow \"{arrow}\": batch size {found} differs from the diagram's {expected}")]
    Batch {
        arrow: String,
        expected: usize,
        found: usize,
    },
    #[error("{place}: dtype {found} differs from the diagram's {expected}")]
    DType {
        place: String,
        expected: DType,
        found: DType,
    },
    #[error("arrow \"{arrow}\": parameter `{name}` has no value")]
    MissingParam { arrow: String, name: String },
    #[error("arrow \"{arrow}\": parameter `{name}` has the storage dtype {dtype}; training updates f32 and f64 parameters (convert it first)")]
    ParamDType {
        arrow: String,
        name: String,
        dtype: DType,
    },
    #[error("arrow \"{arrow}\": value `{name}` is not a parameter of the program")]
    ExtraParam { arrow: String, name: String },
    #[error(
        "arrow \"{arrow}\": parameter `{name}` has a value of type {found}, expected {expected}"
    )]
    ParamType {
        arrow: String,
        name: String,
        expected: TensorType,
        found: TensorType,
    },
    #[error("{term}: {side}: {source}")]
    Path {
        term: String,
        side: &'static str,
        source: PathError,
    },
    #[error("{term}: the left path goes \"{left_source}\" -> \"{left_target}\" but the right path goes \"{right_source}\" -> \"{right_target}\": an equation's paths share both ends")]
    Ends {
        term: String,
        left_source: String,
        left_target: String,
        right_source: String,
        right_target: String,
    },
    #[error("{term}: cross-entropy needs objects of per-example rank 1 (class scores), \"{object}\" has {ty}")]
    CrossEntropyRank {
        term: String,
        object: String,
        ty: TensorType,
    },
    #[error("{term}: weight must be finite and non-negative, found {weight}")]
    Weight { term: String, weight: f64 },
    #[error("the diagram has no terms: add an equation or a supervised term")]
    NoTerms,
    #[error("the diagram has no arrows, so its batch size is unknown")]
    NoArrows,
    #[error("batch: missing {what} \"{name}\"")]
    MissingData { what: &'static str, name: String },
    #[error("batch: {what} \"{name}\" has type {found}, expected {expected}")]
    DataType {
        what: &'static str,
        name: String,
        expected: TensorType,
        found: TensorType,
    },
    #[error("parameters: missing `{name}` ({ty})")]
    MissingValue { name: String, ty: TensorType },
    #[error("composing {place}: {source}")]
    Compose { place: String, source: ComposeError },
    #[error("building {place}: {source}")]
    Build { place: String, source: BuildError },
    #[error("building {place}: {source}")]
    Type { place: String, source: TypeError },
    #[error("differentiating the loss: {0}")]
    Ad(#[from] AdError),
    #[error("evaluating {place}: {source}")]
    Eval { place: String, source: EvalError },
}
