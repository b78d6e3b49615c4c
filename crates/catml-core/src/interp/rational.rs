use crate::ir::{KernelError, Program};
use crate::tensor::{RArray, Shape};

/// Why exact evaluation stopped.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum RationalError {
    #[error("expected {expected} inputs, found {found}")]
    InputCount { expected: usize, found: usize },
    #[error("input `{name}` has shape {found}, expected {expected}")]
    InputShape {
        name: String,
        expected: Shape,
        found: Shape,
    },
    #[error("node {index} `{name}` ({op}) is not a rational operation")]
    NotRational {
        index: usize,
        name: String,
        op: String,
    },
    #[error("node {index} `{name}` ({op}): {source}")]
    Kernel {
        index: usize,
        name: String,
        op: String,
        source: KernelError,
    },
}

/// Exact evaluation over arbitrary-precision rationals. Fails naming the first node whose
/// primitive is not rational (exp, tanh, ...).
pub fn eval_rational(p: &Program, inputs: &[RArray]) -> Result<Vec<RArray>, RationalError> {
    if inputs.len() != p.n_inputs() {
        return Err(RationalError::InputCount {
            expected: p.n_inputs(),
            found: inputs.len(),
        });
    }
    for (decl, a) in p.inputs().iter().zip(inputs) {
        if *a.shape() != decl.ty.shape {
            return Err(RationalError::InputShape {
                name: decl.name.clone(),
                expected: decl.ty.shape.clone(),
                found: a.shape().clone(),
            });
        }
    }
    let mut env: Vec<RArray> = inputs.to_vec();
    for (i, node) in p.nodes().iter().enumerate() {
        let args: Vec<&RArray> = node.operands.iter().map(|o| &env[o.index()]).collect();
        let out = match node.prim.eval_rational(&args) {
            None => {
                return Err(RationalError::NotRational {
                    index: i,
                    name: node.name.clone(),
                    op: node.prim.name().to_string(),
                })
            }
            Some(r) => r.map_err(|source| RationalError::Kernel {
                index: i,
                name: node.name.clone(),
                op: node.prim.name().to_string(),
                source,
            })?,
        };
        env.push(out);
    }
    Ok(p.outputs().iter().map(|o| env[o.index()].clone()).collect())
}
