//! Reverse mode (docs/reverse.md): initialise every cotangent to zero, add each output seed to its
//! output, walk the nodes backwards and add each local response to every operand occurrence.

use super::checkpoint::CheckpointPolicy;
use super::layout::{name_outputs, slots, Residual, VjpLayout};
use super::remat::rematerialise;
use super::AdError;
use crate::ir::{Builder, Def, InputKind, Program, Var};
use crate::prim::Ops;

/// The reverse-mode program of `p` and where its parts sit ([`VjpLayout`]).
#[derive(Debug, Clone)]
pub struct Vjp {
    pub program: Program,
    pub layout: VjpLayout,
}

impl Vjp {
    pub fn residual_bytes(&self) -> usize {
        self.layout.residual_bytes()
    }
}

/// How the outputs' seeds enter the reverse program.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Seeds {
    /// One seed input per output occurrence.
    Inputs,
    /// The first output's seed is 1 inside the program; the other outputs are not
    /// differentiated.
    FirstIsOne,
}

/// cot[v] += c; a sum is named `<v>.bar`, the bar marking an accumulated cotangent (as in x̄).
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

/// The VJP transform: `p`'s inputs and one seed per output occurrence, to `p`'s outputs and
/// the pullback of the seeds to every float input (see [`VjpLayout`]).
pub fn vjp(p: &Program) -> Result<Vjp, AdError> {
    reverse(p, Seeds::Inputs, None, None)
}

/// As [`vjp`], with the backward part reading only the forward values `policy` keeps and
/// recomputing the others just before it first reads them (`docs/checkpoint.md`). The
/// recomputed nodes are copies of the forward nodes, so every output is bitwise the same as
/// [`vjp`]'s; what changes is how long forward values stay live.
///
/// ```
/// use catml_core::ad::{self, CheckpointPolicy};
/// use catml_core::interp::{cost, eval};
/// use catml_core::ir::{Builder, InputKind};
/// use catml_core::prim::Ops;
/// use catml_core::tensor::{DType, Tensor, TensorType};
///
/// let mut b = Builder::new();
/// let mut h = b.input("x", TensorType::new(DType::F64, [64]), InputKind::Data).unwrap();
/// for _ in 0..16 {
///     h = b.tanh(h).unwrap();
/// }
/// let l = b.sum(h, None).unwrap();
/// let p = b.finish(&[l]).unwrap();
///
/// let plain = ad::vjp(&p).unwrap();
/// let sqrt = ad::vjp_with(&p, &CheckpointPolicy::SqrtSegments).unwrap();
/// assert!(cost(&sqrt.program).peak_live_bytes < cost(&plain.program).peak_live_bytes);
/// assert!(sqrt.residual_bytes() < plain.residual_bytes());
///
/// let x = Tensor::f64([64], (0..64).map(|i| i as f64 / 64.0).collect()).unwrap();
/// let seed = Tensor::f64([], vec![1.0]).unwrap();
/// let args = [x, seed];
/// assert_eq!(eval(&sqrt.program, &args).unwrap(), eval(&plain.program, &args).unwrap());
/// ```
pub fn vjp_with(p: &Program, policy: &CheckpointPolicy) -> Result<Vjp, AdError> {
    reverse(p, Seeds::Inputs, None, Some(policy))
}

/// The gradient program: `p`'s inputs to `p`'s outputs and the gradient of the first output
/// (of the sum of its elements) with respect to every float input. It is the reverse program
/// with that output's seed fixed to 1 inside it; the other outputs are carried along, not
/// differentiated, and there are no seed inputs.
///
/// ```
/// use catml_core::ad;
/// use catml_core::ir::{Builder, InputKind};
/// use catml_core::prim::Ops;
/// use catml_core::tensor::{DType, Tensor, TensorType};
///
/// let mut b = Builder::new();
/// let x = b.input("x", TensorType::new(DType::F64, [2]), InputKind::Data).unwrap();
/// let sq = b.mul(x, x).unwrap();
/// let l = b.sum(sq, None).unwrap();
/// let g = ad::grad(&b.finish(&[l, sq]).unwrap()).unwrap();
/// let out = catml_core::interp::eval(&g.program, &[Tensor::f64([2], vec![1.0, -3.0]).unwrap()]).unwrap();
/// assert_eq!(g.layout.gradient(&out, 0).unwrap().to_f64_vec(), vec![2.0, -6.0]);
/// assert_eq!(g.program.name(g.program.outputs()[2]), "grad.x");
/// ```
pub fn grad(p: &Program) -> Result<Vjp, AdError> {
    reverse(p, Seeds::FirstIsOne, None, None)
}

/// As [`grad`], recomputing what `policy` does not keep (see [`vjp_with`]).
pub fn grad_with(p: &Program, policy: &CheckpointPolicy) -> Result<Vjp, AdError> {
    reverse(p, Seeds::FirstIsOne, None, Some(policy))
}

/// As [`grad`], with gradients only for the inputs at these positions of `p` (the others
/// get no output, and the nodes only they needed are pruned).
pub fn grad_of(p: &Program, wrt: &[usize]) -> Result<Vjp, AdError> {
    reverse(p, Seeds::FirstIsOne, Some(wrt), None)
}

/// As [`grad_of`], recomputing what `policy` does not keep (see [`vjp_with`]).
pub fn grad_of_with(p: &Program, wrt: &[usize], policy: &CheckpointPolicy) -> Result<Vjp, AdError> {
    reverse(p, Seeds::FirstIsOne, Some(wrt), Some(policy))
}

fn build_error(e: impl std::fmt::Display) -> AdError {
    AdError::Build(e.to_string())
}

fn reverse(
    p: &Program,
    seeds: Seeds,
    wrt: Option<&[usize]>,
    policy: Option<&CheckpointPolicy>,
) -> Result<Vjp, AdError> {
    let mut b = Builder::from_program(p);
    let n_fwd = p.n_vars();
    let mut cot: Vec<Option<Var>> = vec![None; n_fwd];
    let mut seed_inputs = Vec::new();
    for (k, &o) in p.outputs().iter().enumerate() {
        let name = b.fresh_name(&format!("seed.{k}"));
        let prev = b.set_tag(None);
        let seed = match seeds {
            Seeds::Inputs => {
                seed_inputs.push(p.n_inputs() + k);
                b.input(&name, p.ty(o).clone(), InputKind::Data)
                    .map_err(build_error)?
            }
            Seeds::FirstIsOne if k == 0 => {
                b.set_name_prefix(&name);
                b.full(1.0, p.ty(o)).map_err(build_error)?
            }
            Seeds::FirstIsOne => {
                b.set_tag(prev);
                continue;
            }
        };
        let r = accumulate(&mut b, &mut cot, o, seed);
        b.set_tag(prev);
        r.map_err(build_error)?;
    }
    let first_derived = b.len();
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
    let n_out = p.outputs().len();
    let mut gradients = slots(p, |k| k);
    gradients.retain(|g| wrt.is_none_or(|w| w.contains(&g.input)));
    for (k, g) in gradients.iter_mut().enumerate() {
        g.index = n_out + k;
    }
    let mut grads = Vec::with_capacity(gradients.len());
    let mut names = Vec::with_capacity(gradients.len());
    for g in &gradients {
        names.push(format!("grad.{}", g.name));
        grads.push(match cot[g.input] {
            Some(c) => c,
            // Discarding a value has the zero response.
            None => {
                // Named `.zero`: the output is renamed `grad.<input>` below.
                b.set_name_prefix(&format!("grad.{}.zero", g.name));
                b.set_tag(g.tag.clone());
                let z = b.zeros(&p.inputs()[g.input].ty).map_err(build_error)?;
                b.set_tag(None);
                z
            }
        });
    }
    let tags: Vec<Option<String>> = gradients.iter().map(|g| g.tag.clone()).collect();
    name_outputs(&mut b, &mut grads, &names, &tags, first_derived).map_err(build_error)?;
    let mut outputs: Vec<Var> = p.outputs().to_vec();
    outputs.extend(grads);
    let full = b.finish(&outputs).map_err(build_error)?;
    let (program, map) = full.pruned_map();
    // Nodes keep their order, and the forward copy came first: its survivors are a prefix.
    let n_in = full.n_inputs();
    let fwd_kept = (0..p.n_nodes())
        .filter(|&i| map[n_in + i].is_some())
        .count();
    let (program, fwd_kept) = match policy {
        None => (program, fwd_kept),
        Some(policy) => {
            let kept = policy.kept(&program, fwd_kept);
            rematerialise(&program, fwd_kept, &kept)?
        }
    };
    let residuals = residuals_of(&program, p.n_inputs(), fwd_kept);
    Ok(Vjp {
        program,
        layout: VjpLayout {
            n_primal_inputs: p.n_inputs(),
            seeds: seed_inputs,
            outputs: p.output_names(),
            gradients,
            residuals,
        },
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
