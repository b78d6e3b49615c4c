//! What a traced function may return: one value, several, or a `Result` of either.

use super::error::TraceError;
use super::value::Value;

/// The outputs of a traced function, in order.
pub trait Outputs {
    /// The output values, or the error the function returned.
    fn into_values(self) -> Result<Vec<Value>, TraceError>;
}

impl Outputs for Value {
    fn into_values(self) -> Result<Vec<Value>, TraceError> {
        Ok(vec![self])
    }
}

impl Outputs for Vec<Value> {
    fn into_values(self) -> Result<Vec<Value>, TraceError> {
        Ok(self)
    }
}

impl<const N: usize> Outputs for [Value; N] {
    fn into_values(self) -> Result<Vec<Value>, TraceError> {
        Ok(self.into())
    }
}

impl Outputs for (Value, Value) {
    fn into_values(self) -> Result<Vec<Value>, TraceError> {
        Ok(vec![self.0, self.1])
    }
}

impl Outputs for (Value, Value, Value) {
    fn into_values(self) -> Result<Vec<Value>, TraceError> {
        Ok(vec![self.0, self.1, self.2])
    }
}

/// A function written with `?` returns its error through here.
impl<O: Outputs> Outputs for Result<O, TraceError> {
    fn into_values(self) -> Result<Vec<Value>, TraceError> {
        self?.into_values()
    }
}
