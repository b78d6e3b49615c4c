//! The catml-onnx integration tests, one binary.

mod common;
mod hostile;
mod import;
