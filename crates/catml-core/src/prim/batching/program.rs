//! The batching pass over a program: each node whose operands carry the batch is replaced by
//! its primitive's batching rule; the other nodes are copied unchanged.

use crate::ir::{with_lead, BatchCtx, Builder, Program, RuleError, Var};
use crate::tensor::TensorType;

/// Why a program could not be batched.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum BatchError {
    #[error("node {index} `{name}` ({op}): {source}")]
    Rule {
        index: usize,
        name: String,
        op: String,
        source: RuleError,
    },
    #[error("node {index} `{name}` ({op}): the batching rule gave {found}, expected {expected}")]
    Type {
        index: usize,
        name: String,
        op: String,
        expected: TensorType,
        found: TensorType,
    },
    #[error("the program has {expected} inputs, {found} were given")]
    Arity { expected: usize, found: usize },
    #[error("building the batched program: {0}")]
    Build(String),
}

/// Copies `p` into `b` reading `args` for its inputs, each with whether it leads with a batch
/// axis of `size`; returns `p`'s outputs with whether each carries the batch (in front).
pub fn batch_into(
    b: &mut Builder,
    p: &Program,
    args: &[(Var, bool)],
    size: usize,
) -> Result<Vec<(Var, bool)>, BatchError> {
    if args.len() != p.n_inputs() {
        return Err(BatchError::Arity {
            expected: p.n_inputs(),
            found: args.len(),
        });
    }
    let mut map: Vec<(Var, bool)> = args.to_vec();
    let saved_tag = b.tag().map(str::to_string);
    for (index, node) in p.nodes().iter().enumerate() {
        let operands: Vec<Var> = node.operands.iter().map(|o| map[o.index()].0).collect();
        let batched: Vec<bool> = node.operands.iter().map(|o| map[o.index()].1).collect();
        let rule = |source: RuleError| BatchError::Rule {
            index,
            name: node.name.clone(),
            op: node.prim.name().to_string(),
            source,
        };
        b.set_tag(node.tag.clone().or_else(|| saved_tag.clone()));
        if !batched.contains(&true) {
            let v = b
                .apply_hinted(&node.name, node.prim.clone(), &operands)
                .map_err(|e| rule(e.into()))?;
            map.push((v, false));
            continue;
        }
        let at = BatchCtx {
            prim: node.prim.clone(),
            batched,
            size,
        };
        let prefix = b.set_name_prefix(&node.name);
        let v = node.prim.batch(b, &operands, &at);
        b.set_name_prefix(&prefix);
        let v = v.map_err(rule)?;
        let expected = with_lead(&node.ty, size);
        if b.ty(v) != &expected {
            return Err(BatchError::Type {
                index,
                name: node.name.clone(),
                op: node.prim.name().to_string(),
                expected,
                found: b.ty(v).clone(),
            });
        }
        map.push((v, true));
    }
    b.set_tag(saved_tag);
    Ok(p.outputs().iter().map(|o| map[o.index()]).collect())
}
