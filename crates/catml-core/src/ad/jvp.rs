//! Forward mode: each node's tangent from its operands' tangents, by the primitive's own JVP
//! rule (independent of its VJP rule).

use super::layout::{name_outputs, slots, JvpLayout};
use super::AdError;
use crate::ir::{Builder, InputKind, Program, Var};
use crate::prim::Ops;

/// The forward-mode program of `p` and where its parts sit ([`JvpLayout`]).
#[derive(Debug, Clone)]
pub struct Jvp {
    pub program: Program,
    pub layout: JvpLayout,
}

/// The JVP transform.
pub fn jvp(p: &Program) -> Result<Jvp, AdError> {
    let mut b = Builder::from_program(p);
    let mut tan: Vec<Option<Var>> = vec![None; p.n_vars()];
    let tangent_inputs = slots(p, |k| p.n_inputs() + k);
    for slot in &tangent_inputs {
        let input = &p.inputs()[slot.input];
        let name = b.fresh_name(&format!("tangent.{}", input.name));
        let t = b
            .input(&name, input.ty.clone(), InputKind::Data)
            .map_err(|e| AdError::Build(e.to_string()))?;
        tan[slot.input] = Some(t);
    }
    let first_derived = b.len();
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
    let outputs = p.output_names();
    // An output that is an input has that input's tangent as its tangent, already named
    // `tangent.<input>` (or its free `.<k>` variant): it keeps that name.
    let names: Vec<String> = outputs
        .iter()
        .zip(p.outputs())
        .map(|(o, &v)| match tan[v.index()] {
            Some(t) if v.index() < p.n_inputs() => b.name(t).to_string(),
            _ => format!("tangent.{o}"),
        })
        .collect();
    let mut tangents = Vec::with_capacity(names.len());
    for (&o, name) in p.outputs().iter().zip(&names) {
        tangents.push(match tan[o.index()] {
            Some(t) => t,
            None => {
                b.set_name_prefix(&format!("{name}.zero"));
                b.zeros(p.ty(o))
                    .map_err(|e| AdError::Build(e.to_string()))?
            }
        });
    }
    let tags = vec![None; names.len()];
    name_outputs(&mut b, &mut tangents, &names, &tags, first_derived)
        .map_err(|e| AdError::Build(e.to_string()))?;
    let mut all: Vec<Var> = p.outputs().to_vec();
    all.extend(tangents);
    let program = b
        .finish(&all)
        .map_err(|e| AdError::Build(e.to_string()))?
        .pruned();
    let names = names
        .iter()
        .zip(&program.outputs()[outputs.len()..])
        .map(|(_, &v)| program.name(v).to_string())
        .collect();
    Ok(Jvp {
        program,
        layout: JvpLayout {
            n_primal_inputs: p.n_inputs(),
            tangent_inputs,
            outputs,
            tangents: names,
        },
    })
}
