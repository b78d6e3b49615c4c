//! Reverse mode (003 §4): initialise every cotangent to zero, add each output seed to its
//! output, walk the nodes backwards and add each local response to every operand occurrence.

use super::AdError;
use crate::ir::{Builder, Def, InputKind, Program, Var};
use crate::prim::Ops;
use crate::tensor::TensorType;

/// A forward value the reverse pass reads (a residual of the tape).
#[derive(Debug, Clone, PartialEq)]
pub struct Residual {
    pub name: String,
    pub ty: TensorType,
    /// True for program inputs (saved as given), false for computed forward values.
    pub is_input: bool,
}

impl Residual {
    pub fn bytes(&self) -> usize {
        self.ty.bytes()
    }
}

/// The reverse-mode program of `p` and how to read it.
///
/// Inputs: `p`'s inputs, then one seed per output occurrence (named after the output).
/// Outputs: `p`'s outputs, then one cotangent per input of `p` that has one (floats).
#[derive(Debug, Clone)]
pub struct Vjp {
    pub program: Program,
    /// Number of primal outputs at the front of the outputs.
    pub n_primal_outputs: usize,
    /// For each input of `p`: the index in `program.outputs()` of its cotangent, if any.
    pub gradients: Vec<Option<usize>>,
    /// The forward values read by the backward nodes.
    pub residuals: Vec<Residual>,
}

impl Vjp {
    pub fn residual_bytes(&self) -> usize {
        self.residuals.iter().map(Residual::bytes).sum()
    }
}

/// cot[v] += c; a sum is named `<v>.bar`, the documents' notation for an accumulated cotangent.
fn accumulate(
    b: &mut Builder,
    cot: &mut [Option<Var>],
    v: Var,
    c: Var,
) -> Result<(), crate::ir::TypeError> {
    cot[v.index()] = Some(match cot[v.index()] {
        None => c,
        Some(prev) => {
            let hint = format!("{}.bar", b.name(v));
            let prefix = b.set_name_prefix(&hint);
            let sum = b.add(prev, c);
            b.set_name_prefix(&prefix);
            sum?
        }
    });
    Ok(())
}

/// The VJP transform.
pub fn vjp(p: &Program) -> Result<Vjp, AdError> {
    let mut b = Builder::from_program(p);
    let n_fwd = p.n_vars();
    let mut cot: Vec<Option<Var>> = vec![None; n_fwd];
    for (k, &o) in p.outputs().iter().enumerate() {
        let name = b.fresh_name(&format!("{}.seed{k}", p.name(o)));
        let seed = b
            .input(&name, p.ty(o).clone(), InputKind::Data)
            .map_err(|e| AdError::Build(e.to_string()))?;
        let prev = b.set_tag(None);
        let r = accumulate(&mut b, &mut cot, o, seed);
        b.set_tag(prev);
        r.map_err(|e| AdError::Build(e.to_string()))?;
    }
    for (i, node) in p.nodes().iter().enumerate().rev() {
        let y = p.node_var(i);
        let Some(u) = cot[y.index()] else { continue };
        b.set_tag(node.tag.clone());
        b.set_name_prefix(&format!("{}.vjp", node.name));
        let contributions = node
            .prim
            .vjp(&mut b, &node.operands, y, u)
            .map_err(|e| AdError::rule(i, node, e))?;
        if contributions.len() != node.operands.len() {
            return Err(AdError::Build(format!(
                "node {i} `{}` ({}): vjp rule returned {} cotangents for {} operands",
                node.name,
                node.prim.name(),
                contributions.len(),
                node.operands.len()
            )));
        }
        for (k, (&x, c)) in node.operands.iter().zip(contributions).enumerate() {
            let Some(c) = c else { continue };
            let (expected, found) = (p.ty(x), b.ty(c));
            if expected != found {
                return Err(AdError::RuleType {
                    index: i,
                    name: node.name.clone(),
                    op: node.prim.name().to_string(),
                    operand: k,
                    mode: "cotangent",
                    expected: expected.clone(),
                    found: found.clone(),
                });
            }
            accumulate(&mut b, &mut cot, x, c).map_err(|e| AdError::ty(i, node, e))?;
        }
    }
    b.set_tag(None);
    b.set_name_prefix("t");
    let mut outputs: Vec<Var> = p.outputs().to_vec();
    let mut gradients = Vec::with_capacity(p.n_inputs());
    for (i, input) in p.inputs().iter().enumerate() {
        if !input.ty.dtype.is_float() {
            gradients.push(None);
            continue;
        }
        let g = match cot[i] {
            Some(g) => g,
            // Discarding a value has the zero response.
            None => {
                b.set_name_prefix(&format!("{}.bar", input.name));
                b.zeros(&input.ty)
                    .map_err(|e| AdError::Build(e.to_string()))?
            }
        };
        gradients.push(Some(outputs.len()));
        outputs.push(g);
    }
    let full = b
        .finish(&outputs)
        .map_err(|e| AdError::Build(e.to_string()))?;
    let (program, map) = full.pruned_map();
    // Nodes keep their order, and the forward copy came first: its survivors are a prefix.
    let n_in = full.n_inputs();
    let fwd_kept = (0..p.n_nodes())
        .filter(|&i| map[n_in + i].is_some())
        .count();
    let residuals = residuals_of(&program, p.n_inputs(), fwd_kept);
    Ok(Vjp {
        program,
        n_primal_outputs: p.outputs().len(),
        gradients,
        residuals,
    })
}

/// Forward values (primal inputs and the first `n_fwd_nodes` nodes) read by backward nodes.
fn residuals_of(program: &Program, n_primal_inputs: usize, n_fwd_nodes: usize) -> Vec<Residual> {
    let n_in = program.n_inputs();
    let fwd_end = n_in + n_fwd_nodes;
    let is_forward =
        |v: Var| v.index() < n_primal_inputs || (v.index() >= n_in && v.index() < fwd_end);
    let mut seen = vec![false; program.n_vars()];
    let mut out = Vec::new();
    for (i, n) in program.nodes().iter().enumerate() {
        if n_in + i < fwd_end {
            continue;
        }
        for &o in &n.operands {
            if is_forward(o) && !std::mem::replace(&mut seen[o.index()], true) {
                out.push(Residual {
                    name: program.name(o).to_string(),
                    ty: program.ty(o).clone(),
                    is_input: matches!(program.def(o), Def::Input(_)),
                });
            }
        }
    }
    out
}
