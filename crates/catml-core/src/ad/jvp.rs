//! Forward mode: each node's tangent from its operands' tangents, by the primitive's own JVP
//! rule (independent of its VJP rule).

use super::AdError;
use crate::ir::{Builder, InputKind, Program, Var};
use crate::prim::Ops;

/// The forward-mode program of `p` and how to read it.
///
/// Inputs: `p`'s inputs, then one tangent per float input (named `<input>.dot`).
/// Outputs: `p`'s outputs, then one tangent per output occurrence.
#[derive(Debug, Clone)]
pub struct Jvp {
    pub program: Program,
    pub n_primal_outputs: usize,
    /// For each input of `p`: the index in `program.inputs()` of its tangent, if any.
    pub tangent_inputs: Vec<Option<usize>>,
}

/// The JVP transform.
pub fn jvp(p: &Program) -> Result<Jvp, AdError> {
    let mut b = Builder::from_program(p);
    let mut tan: Vec<Option<Var>> = vec![None; p.n_vars()];
    let mut tangent_inputs = Vec::with_capacity(p.n_inputs());
    let mut n_tangents = 0;
    for (i, input) in p.inputs().iter().enumerate() {
        if !input.ty.dtype.is_float() {
            tangent_inputs.push(None);
            continue;
        }
        let name = b.fresh_name(&format!("{}.dot", input.name));
        let t = b
            .input(&name, input.ty.clone(), InputKind::Data)
            .map_err(|e| AdError::Build(e.to_string()))?;
        tan[i] = Some(t);
        tangent_inputs.push(Some(p.n_inputs() + n_tangents));
        n_tangents += 1;
    }
    for (i, node) in p.nodes().iter().enumerate() {
        let dx: Vec<Option<Var>> = node.operands.iter().map(|o| tan[o.index()]).collect();
        if dx.iter().all(Option::is_none) {
            continue;
        }
        let y = p.node_var(i);
        b.set_tag(node.tag.clone());
        b.set_name_prefix(&format!("{}.dot", node.name));
        let t = node
            .prim
            .jvp(&mut b, &node.operands, y, &dx)
            .map_err(|e| AdError::rule(i, node, e))?;
        if let Some(t) = t {
            if b.ty(t) != &node.ty {
                return Err(AdError::RuleType {
                    index: i,
                    name: node.name.clone(),
                    op: node.prim.name().to_string(),
                    operand: 0,
                    mode: "tangent",
                    expected: node.ty.clone(),
                    found: b.ty(t).clone(),
                });
            }
        }
        tan[y.index()] = t;
    }
    b.set_tag(None);
    let mut outputs: Vec<Var> = p.outputs().to_vec();
    for &o in p.outputs() {
        let t = match tan[o.index()] {
            Some(t) => t,
            None => {
                b.set_name_prefix(&format!("{}.dot", p.name(o)));
                b.zeros(p.ty(o))
                    .map_err(|e| AdError::Build(e.to_string()))?
            }
        };
        outputs.push(t);
    }
    let program = b
        .finish(&outputs)
        .map_err(|e| AdError::Build(e.to_string()))?
        .pruned();
    Ok(Jvp {
        program,
        n_primal_outputs: p.outputs().len(),
        tangent_inputs,
    })
}
