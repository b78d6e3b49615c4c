use crate::tensor::{DType, TensorType};

/// Why an optimiser refused a configuration, a step or a state.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum OptimError {
    #[error("optimiser {field}: {reason}, found {value}")]
    Config {
        field: &'static str,
        value: f64,
        reason: &'static str,
    },
    #[error("parameter `{name}` has no gradient")]
    MissingGradient { name: String },
    #[error("gradient `{name}` names no parameter")]
    UnknownGradient { name: String },
    #[error("gradient `{name}` has type {found}, its parameter has {expected}")]
    GradientType {
        name: String,
        expected: TensorType,
        found: TensorType,
    },
    #[error("parameter `{name}` has dtype {dtype}, expected f32 or f64")]
    NotFloat { name: String, dtype: DType },
    #[error("optimiser state `{name}`: expected {expected}, found {found}")]
    State {
        name: String,
        expected: String,
        found: String,
    },
}
