//! Forward and reverse differentiation as program transforms: `jvp(p)` and `vjp(p)` return
//! programs, built from the primitives' own rules, so derivatives can be printed, serialised,
//! evaluated and differentiated again.

mod checkpoint;
mod jvp;
pub mod layout;
mod remat;
mod vjp;

pub use checkpoint::{CheckpointPolicy, PolicyParseError};
pub use jvp::{jvp, Jvp};
pub use layout::{JvpLayout, Residual, Slot, VjpLayout};
pub use vjp::{grad, grad_of, grad_of_with, grad_with, vjp, vjp_with, Vjp};

use crate::ir::{RuleError, TypeError};
use crate::tensor::TensorType;

/// Why a program could not be differentiated.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum AdError {
    #[error("node {index} `{name}` ({op}): {source}")]
    Rule {
        index: usize,
        name: String,
        op: String,
        source: RuleError,
    },
    #[error("node {index} `{name}` ({op}): rule gave operand {operand} a {mode} of type {found}, expected {expected}")]
    RuleType {
        index: usize,
        name: String,
        op: String,
        operand: usize,
        mode: &'static str,
        expected: TensorType,
        found: TensorType,
    },
    #[error("building the derivative program: {0}")]
    Build(String),
}

impl AdError {
    fn rule(index: usize, node: &crate::ir::Node, source: RuleError) -> AdError {
        AdError::Rule {
            index,
            name: node.name.clone(),
            op: node.prim.name().to_string(),
            source,
        }
    }

    fn ty(index: usize, node: &crate::ir::Node, source: TypeError) -> AdError {
        AdError::rule(index, node, RuleError::Type(source))
    }
}
