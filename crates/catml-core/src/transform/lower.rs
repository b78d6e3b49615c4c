//! Lowering: replace each node whose primitive has a `lower()` expansion by that expansion,
//! recursively, until no node can be expanded further.
//!
//! For the composites (softmax, layer norm, attention, losses, take, linear, ...) what remains
//! is the core fragment ([`core_fragment`]) plus the few primitives the core cannot
//! express ([`lowering_extras`]): the core fragment has no logarithm, no maximum and no runtime
//! indices. Primitives without an expansion (log, relu, step, convert, user primitives) stay
//! as they are; [`outside_core`] lists what a lowered program still uses. Names stay readable: the last node of the expansion of
//! `y` keeps the name `y`, the others are `y/<op>` (`y/exp`, `y/exp.1`, ...), and every
//! expanded node keeps the original node's tag.

use crate::ir::{Builder, Fragment, InputKind, Node, Program, TypeError, Var};
use crate::prim::builtins;
use crate::tensor::TensorType;

/// The names of the core fragment's primitives in the built-in registry (each primitive
/// states its [`Fragment`]; `docs/lowering.md` says why these).
pub fn core_fragment() -> Vec<String> {
    fragment_members(|f| f == Fragment::Core)
        .into_iter()
        .map(|(n, _)| n)
        .collect()
}

/// Primitives that lowerings may leave besides the core fragment, each with why it is needed.
pub fn lowering_extras() -> Vec<(String, &'static str)> {
    fragment_members(|f| matches!(f, Fragment::LoweringExtra(_)))
        .into_iter()
        .map(|(n, f)| match f {
            Fragment::LoweringExtra(why) => (n, why),
            _ => unreachable!("filtered to lowering extras"),
        })
        .collect()
}

/// Built-in primitives (made with default attributes) whose fragment passes `keep`.
fn fragment_members(keep: impl Fn(Fragment) -> bool) -> Vec<(String, Fragment)> {
    let r = builtins();
    r.names()
        .filter_map(|n| {
            let p = r.example(n)?;
            keep(p.fragment()).then(|| (n.to_string(), p.fragment()))
        })
        .collect()
}

/// How many nested expansions a node may need before the pass gives up (a lowering that
/// emits itself would otherwise never stop).
const MAX_DEPTH: usize = 16;

/// Why a program could not be lowered.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum LowerError {
    #[error("node {index} `{name}` ({op}): lowering failed: {source}")]
    Rule {
        index: usize,
        name: String,
        op: String,
        source: TypeError,
    },
    #[error("node {index} `{name}` ({op}): lowering gives {found}, expected {expected}")]
    Type {
        index: usize,
        name: String,
        op: String,
        expected: TensorType,
        found: TensorType,
    },
    #[error("node `{name}` ({op}): still expanding after {depth} nested lowerings")]
    Depth {
        name: String,
        op: String,
        depth: usize,
    },
    #[error("building the lowered program: {0}")]
    Build(String),
}

/// The program with every composite expanded: same inputs (names, kinds, order) and outputs.
///
/// ```
/// use catml_core::ir::{Builder, InputKind};
/// use catml_core::prim::Ops;
/// use catml_core::tensor::{DType, TensorType};
///
/// let mut b = Builder::new();
/// let x = b.input("x", TensorType::new(DType::F64, [2, 3]), InputKind::Data).unwrap();
/// let y = b.softmax(x, 1).unwrap();
/// let p = b.finish(&[y]).unwrap();
/// let low = catml_core::transform::lower(&p).unwrap();
/// assert!(low.nodes().iter().all(|n| n.prim.name() != "softmax"));
/// assert_eq!(low.name(low.outputs()[0]), "t");
/// ```
pub fn lower(p: &Program) -> Result<Program, LowerError> {
    lower_at(p, 0)
}

/// Names of the primitives in `p` outside the core fragment, sorted, each once.
pub fn outside_core(p: &Program) -> Vec<String> {
    let mut names: Vec<String> = p
        .nodes()
        .iter()
        .filter(|n| n.prim.fragment() != Fragment::Core)
        .map(|n| n.prim.name().to_string())
        .collect();
    names.sort();
    names.dedup();
    names
}

fn build_err(e: impl std::fmt::Display) -> LowerError {
    LowerError::Build(e.to_string())
}

fn lower_at(p: &Program, depth: usize) -> Result<Program, LowerError> {
    let mut b = Builder::new();
    let mut map: Vec<Var> = Vec::with_capacity(p.n_vars());
    for input in p.inputs() {
        map.push(
            b.input(&input.name, input.ty.clone(), input.kind)
                .map_err(build_err)?,
        );
    }
    for (index, node) in p.nodes().iter().enumerate() {
        let operands: Vec<Var> = node.operands.iter().map(|o| map[o.index()]).collect();
        b.set_tag(node.tag.clone());
        let rule = |source| LowerError::Rule {
            index,
            name: node.name.clone(),
            op: node.prim.name().to_string(),
            source,
        };
        let v = match expansion(p, index, node, depth)? {
            None => b
                .apply_hinted(&node.name, node.prim.clone(), &operands)
                .map_err(rule)?,
            Some(sub) => inline_named(&mut b, &sub, &operands, &node.name).map_err(rule)?,
        };
        map.push(v);
    }
    let outputs: Vec<Var> = p.outputs().iter().map(|o| map[o.index()]).collect();
    b.finish(&outputs).map_err(build_err)
}

/// The node's expansion as a one-output program over its operand types, itself lowered;
/// `None` when the primitive has no expansion.
fn expansion(
    p: &Program,
    index: usize,
    node: &Node,
    depth: usize,
) -> Result<Option<Program>, LowerError> {
    let mut sb = Builder::new();
    let mut args = Vec::with_capacity(node.operands.len());
    for (k, &o) in node.operands.iter().enumerate() {
        args.push(
            sb.input(&format!("x{k}"), p.ty(o).clone(), InputKind::Data)
                .map_err(build_err)?,
        );
    }
    let Some(result) = node.prim.lower(&mut sb, &args) else {
        return Ok(None);
    };
    let op = node.prim.name().to_string();
    let out = result.map_err(|source| LowerError::Rule {
        index,
        name: node.name.clone(),
        op: op.clone(),
        source,
    })?;
    if sb.ty(out) != &node.ty {
        return Err(LowerError::Type {
            index,
            name: node.name.clone(),
            op,
            expected: node.ty.clone(),
            found: sb.ty(out).clone(),
        });
    }
    if depth >= MAX_DEPTH {
        return Err(LowerError::Depth {
            name: node.name.clone(),
            op,
            depth,
        });
    }
    let sub = sb.finish(&[out]).map_err(build_err)?.pruned();
    Ok(Some(lower_at(&sub, depth + 1)?))
}

/// Copies `sub`'s nodes in, reading `args` for its inputs: its output node is named `name`
/// and the others `name/<op>`.
fn inline_named(
    b: &mut Builder,
    sub: &Program,
    args: &[Var],
    name: &str,
) -> Result<Var, TypeError> {
    let out = sub.outputs()[0];
    let mut map: Vec<Var> = args.to_vec();
    for (i, n) in sub.nodes().iter().enumerate() {
        let operands: Vec<Var> = n.operands.iter().map(|o| map[o.index()]).collect();
        let hint = if sub.node_var(i) == out {
            name.to_string()
        } else {
            format!("{name}/{}", n.prim.name())
        };
        map.push(b.apply_hinted(&hint, n.prim.clone(), &operands)?);
    }
    Ok(map[out.index()])
}
