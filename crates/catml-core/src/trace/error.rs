//! What can go wrong while tracing, running eagerly, or calling a transformed function.

use std::fmt;
use std::panic::Location;

use crate::ad::AdError;
use crate::interp::EvalError;
use crate::ir::{BuildError, KernelError, TypeError};
use crate::tensor::TensorType;

/// The user's call site of the failing operation (`file:line:column`).
pub type CallSite = &'static Location<'static>;

/// Operand types of a failing operation, printed as `(f32[2, 3], f32[4, 4])`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperandTypes(pub Vec<TensorType>);

impl fmt::Display for OperandTypes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "(")?;
        for (i, t) in self.0.iter().enumerate() {
            if i > 0 {
                write!(f, ", ")?;
            }
            write!(f, "{t}")?;
        }
        write!(f, ")")
    }
}

/// Why tracing, an eager operation, or a call of a transformed function failed.
///
/// Errors raised by an operation name the user's call site (through `#[track_caller]`), the
/// primitive, and the operand types.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum TraceError {
    /// A primitive's type rule refused the operands.
    #[error("{location}: {op}{operands}: {source}")]
    Type {
        location: CallSite,
        op: String,
        operands: OperandTypes,
        source: TypeError,
    },
    /// A kernel refused its inputs (outside the admissible domain, unsupported dtype).
    #[error("{location}: {op}{operands}: {source}")]
    Kernel {
        location: CallSite,
        op: String,
        operands: OperandTypes,
        source: KernelError,
    },
    /// An eager operation produced NaN or infinity.
    #[error(
        "{location}: {op}{operands} produced {count} non-finite values (first at element {first})"
    )]
    NonFinite {
        location: CallSite,
        op: String,
        operands: OperandTypes,
        count: usize,
        first: usize,
    },
    /// A traced value was used outside the trace that made it.
    #[error("{location}: {op}: operand {index} belongs to another trace or to one that has ended; a traced value cannot leave the trace that made it")]
    ForeignValue {
        location: CallSite,
        op: String,
        index: usize,
    },
    /// The data of a traced value was asked for.
    #[error("{location}: a traced value has no data outside its trace: evaluate the traced program instead")]
    Symbolic { location: CallSite },
    /// One trace declared one parameter name twice.
    #[error("{location}: parameter `{name}` is declared twice in one trace")]
    DuplicateParam { location: CallSite, name: String },
    /// The program could not be built (an invalid input type, a duplicate input name).
    #[error("{location}: {source}")]
    Build {
        location: CallSite,
        source: BuildError,
    },
    /// The traced function returned nothing.
    #[error("{location}: the traced function returned no outputs")]
    NoOutputs { location: CallSite },
    /// `grad` or `hvp` of a function whose output is not one float element.
    #[error(
        "{location}: {what} needs one single-element float output, the function returns {outputs}"
    )]
    NotScalar {
        location: CallSite,
        what: &'static str,
        outputs: OperandTypes,
    },
    /// `argnums` names a data input the function does not have.
    #[error("{location}: argnums names input {index}, the function has {inputs} data inputs")]
    ArgNum {
        location: CallSite,
        index: usize,
        inputs: usize,
    },
    /// A parameter of the traced program is missing from the store.
    #[error("missing parameter `{name}` ({ty}): the traced program declares it")]
    MissingParam { name: String, ty: TensorType },
    /// A parameter in the store has another type than the program declares.
    #[error("parameter `{name}` has type {found}, the traced program declares {expected}")]
    ParamType {
        name: String,
        expected: TensorType,
        found: TensorType,
    },
    /// Too many or too few inputs, cotangents or tangents.
    #[error("expected {expected} {what}s, found {found}")]
    Count {
        what: &'static str,
        expected: usize,
        found: usize,
    },
    /// A cotangent or tangent has the wrong type.
    #[error("{what} {index} has type {found}, expected {expected}")]
    SeedType {
        what: &'static str,
        index: usize,
        expected: TensorType,
        found: TensorType,
    },
    /// The derivative program could not be made.
    #[error("differentiating the traced program: {0}")]
    Ad(#[from] AdError),
    /// The traced program could not be batched, or the inputs do not form a batch.
    #[error("batching the traced program: {0}")]
    Vmap(#[from] crate::transform::VmapError),
    /// Evaluating a traced or transformed program failed.
    #[error("evaluating the traced program: {0}")]
    Eval(#[from] EvalError),
}

impl TraceError {
    /// The call site the error names, when it comes from an operation or a trace.
    pub fn location(&self) -> Option<CallSite> {
        match self {
            TraceError::Type { location, .. }
            | TraceError::Kernel { location, .. }
            | TraceError::NonFinite { location, .. }
            | TraceError::ForeignValue { location, .. }
            | TraceError::Symbolic { location }
            | TraceError::DuplicateParam { location, .. }
            | TraceError::Build { location, .. }
            | TraceError::NoOutputs { location }
            | TraceError::NotScalar { location, .. }
            | TraceError::ArgNum { location, .. } => Some(location),
            _ => None,
        }
    }
}
