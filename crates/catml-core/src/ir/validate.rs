//! Errors for programs that arrive from outside (LensIR JSON, the listing).
//!
//! The validator checks, and reports every violation with its place rather than stopping at
//! the first:
//! - malformed JSON, trailing characters, wrong field types, unknown fields (with the JSON path);
//! - an unknown `format`;
//! - invalid input dimensions (zero, negative, non-integer) and shapes whose element count
//!   overflows;
//! - duplicate definitions (two inputs, two nodes, or a node and an input with one name);
//! - `parameters` naming something that is not an input, or naming one twice;
//! - unknown primitives;
//! - bad attributes (missing, wrong type, unknown key, out of range) and operands of the wrong
//!   count, dtype or shape, as the primitive's type rule reports them;
//! - operands used before their definition, and operands defined nowhere;
//! - empty outputs and outputs naming nothing.
//!
//! Nodes downstream of a rejected node are not reported again.

use std::fmt;

use super::primitive::TypeError;

/// One violation, with its place.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ValidationError {
    #[error("{path}: {message}")]
    Json { path: String, message: String },
    #[error("format: unsupported format `{found}`, expected `lensir-module/1`")]
    Format { found: String },
    #[error("inputs[{index}] `{name}`: invalid dimension {dim} in shape {shape}, expected a positive integer")]
    InvalidDim {
        index: usize,
        name: String,
        dim: String,
        shape: String,
    },
    #[error(
        "inputs[{index}] `{name}`: shape {shape} has too many elements (at most {max} allowed)"
    )]
    TooManyElements {
        index: usize,
        name: String,
        shape: String,
        max: usize,
    },
    #[error("{place} `{name}`: duplicate definition (first defined at {first})")]
    Duplicate {
        place: String,
        name: String,
        first: String,
    },
    #[error("parameters[{index}]: `{name}` is not an input")]
    ParamNotInput { index: usize, name: String },
    #[error("parameters[{index}]: `{name}` is listed twice")]
    ParamTwice { index: usize, name: String },
    #[error("nodes[{index}] `{name}`: unknown primitive `{op}`{}", suggestion_text(.suggestion))]
    UnknownPrimitive {
        index: usize,
        name: String,
        op: String,
        /// The nearest registered name, if one is close.
        suggestion: Option<String>,
    },
    #[error("nodes[{index}] `{name}` ({op}): {source}")]
    Type {
        index: usize,
        name: String,
        op: String,
        source: TypeError,
    },
    #[error("nodes[{index}] `{name}`: operand `{operand}` is used before its definition at nodes[{defined_at}]")]
    UseBeforeDef {
        index: usize,
        name: String,
        operand: String,
        defined_at: usize,
    },
    #[error("nodes[{index}] `{name}`: unknown operand `{operand}`")]
    UnknownOperand {
        index: usize,
        name: String,
        operand: String,
    },
    #[error("outputs: a module needs at least one output")]
    NoOutputs,
    #[error("outputs[{index}]: unknown output `{name}`")]
    UnknownOutput { index: usize, name: String },
    /// A node's body (a nested program) is invalid: its errors, placed under
    /// `nodes[index].body`.
    #[error("nodes[{index}].body.{}", first_body_error(.errors))]
    Body {
        index: usize,
        errors: Vec<ValidationError>,
    },
    #[error("nodes[{index}] `{name}`: bodies nest deeper than {max} levels")]
    BodyTooDeep {
        index: usize,
        name: String,
        max: usize,
    },
    /// A listing that does not parse: the 1-based line and column (in characters) where it
    /// stops making sense.
    #[error("line {line}, column {column}: {message}")]
    Listing {
        line: usize,
        column: usize,
        message: String,
    },
}

/// The first error of a body (and how many more), as the body's own place names it.
fn first_body_error(errors: &[ValidationError]) -> String {
    ValidationErrors(errors.to_vec()).to_string()
}

fn suggestion_text(s: &Option<String>) -> String {
    s.as_ref()
        .map(|s| format!(" (did you mean `{s}`?)"))
        .unwrap_or_default()
}

/// Every violation found in one module, in order of position.
#[derive(Debug, Clone, PartialEq)]
pub struct ValidationErrors(pub Vec<ValidationError>);

impl fmt::Display for ValidationErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.as_slice() {
            [] => write!(f, "invalid module"),
            [one] => write!(f, "{one}"),
            [first, rest @ ..] => write!(f, "{first} (and {} more)", rest.len()),
        }
    }
}

impl std::error::Error for ValidationErrors {}

impl From<ValidationError> for ValidationErrors {
    fn from(e: ValidationError) -> Self {
        ValidationErrors(vec![e])
    }
}
