//! Import errors: each names the protobuf field, graph input or node where it arose.

/// Why a model could not be read or imported. Nothing is returned on error.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum OnnxError {
    /// The bytes are not a ModelProto.
    #[error("not an ONNX model: {0}")]
    Decode(String),
    /// A protobuf field holds a value the format does not allow.
    #[error("{field}: {message}")]
    Field { field: String, message: String },
    /// A node is malformed or its operands do not fit its operator.
    #[error("node {index} `{name}` ({op}): {message}")]
    Node {
        index: usize,
        name: String,
        op: String,
        message: String,
    },
    /// A node uses an operator, attribute value, dtype or opset the importer does not support.
    #[error("node {index} `{name}` ({op}): unsupported: {what}")]
    Unsupported {
        index: usize,
        name: String,
        op: String,
        what: String,
    },
    /// A graph input's declared type and the given shape or tensor disagree.
    #[error("input `{name}`: {message}")]
    Input { name: String, message: String },
}

impl OnnxError {
    pub(crate) fn field(field: impl Into<String>, message: impl Into<String>) -> OnnxError {
        OnnxError::Field {
            field: field.into(),
            message: message.into(),
        }
    }

    /// Whether the error is an unsupported operator, attribute, dtype or opset (as opposed to a
    /// malformed model).
    pub fn is_unsupported(&self) -> bool {
        matches!(self, OnnxError::Unsupported { .. })
    }
}
