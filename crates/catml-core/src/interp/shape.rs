use crate::ir::{Program, TypeError};
use crate::tensor::TensorType;

/// The shape functor refused a program at some input types.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ShapeError {
    #[error("expected {expected} input types, found {found}")]
    InputCount { expected: usize, found: usize },
    #[error("node {index} `{name}` ({op}): {source}")]
    Node {
        index: usize,
        name: String,
        op: String,
        source: TypeError,
    },
}

/// Output types at the given input types, by the primitives' type rules alone (no data).
/// With the declared input types this gives the declared output types; with others it
/// re-derives every node's type, so `shape(eval(p, x)) == shape(p, shape(x))` can be checked.
pub fn shape(p: &Program, inputs: &[TensorType]) -> Result<Vec<TensorType>, ShapeError> {
    if inputs.len() != p.n_inputs() {
        return Err(ShapeError::InputCount {
            expected: p.n_inputs(),
            found: inputs.len(),
        });
    }
    let mut types: Vec<TensorType> = inputs.to_vec();
    types.reserve(p.n_nodes());
    for (i, node) in p.nodes().iter().enumerate() {
        let args: Vec<TensorType> = node
            .operands
            .iter()
            .map(|o| types[o.index()].clone())
            .collect();
        let ty = crate::ir::infer_type(node.prim.as_ref(), &args).map_err(|source| {
            ShapeError::Node {
                index: i,
                name: node.name.clone(),
                op: node.prim.name().to_string(),
                source,
            }
        })?;
        types.push(ty);
    }
    Ok(p.outputs()
        .iter()
        .map(|o| types[o.index()].clone())
        .collect())
}
