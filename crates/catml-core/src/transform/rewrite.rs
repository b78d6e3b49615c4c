//! Rewrites: named passes from a program to a program with the same real function, JVP and VJP.
//!
//! Each pass reports how many changes it made. Equal real functions need not give equal
//! floating-point numbers: removing an identity reshape from one branch of a shared value
//! changes the order in which the reverse pass adds that value's cotangent contributions, so the
//! f64 gradient can change (docs/rewrites.md, the floating-point rewrite counterexample).

use crate::ir::{BuildError, Builder, Node, Program, Var};

/// A program after a rewrite, and how many nodes the rewrite changed or removed.
#[derive(Debug, Clone, PartialEq)]
pub struct Rewritten {
    pub program: Program,
    pub changes: usize,
}

/// A named rewrite pass.
#[derive(Debug, Clone, Copy)]
pub struct Rewrite {
    pub name: &'static str,
    pub description: &'static str,
    pub apply: fn(&Program) -> Result<Rewritten, BuildError>,
}

/// Every rewrite pass, in the order a pipeline would run them.
pub const REWRITES: &[Rewrite] = &[
    Rewrite {
        name: "eliminate-identity-reshapes",
        description: "a reshape to its operand's own shape is its operand",
        apply: eliminate_identity_reshapes,
    },
    Rewrite {
        name: "prune",
        description: "nodes that no output depends on are removed",
        apply: prune,
    },
];

/// [`Program::pruned`] as a pass.
pub fn prune(p: &Program) -> Result<Rewritten, BuildError> {
    let program = p.pruned();
    Ok(Rewritten {
        changes: p.n_nodes() - program.n_nodes(),
        program,
    })
}

/// Whether a node is `reshape` to its operand's own type.
fn is_identity_reshape(p: &Program, n: &Node) -> bool {
    let inputs: Vec<_> = n.operands.iter().map(|o| p.ty(*o).clone()).collect();
    n.prim.is_identity(&inputs, &n.ty)
}

/// Replaces every reshape whose result type equals its operand's type by the operand.
///
/// ```
/// use catml_core::ir::{Builder, InputKind};
/// use catml_core::prim::Ops;
/// use catml_core::tensor::{DType, TensorType};
/// use catml_core::transform::rewrite::eliminate_identity_reshapes;
///
/// let mut b = Builder::new();
/// let x = b.input("x", TensorType::new(DType::F64, [2]), InputKind::Data).unwrap();
/// let r = b.reshape(x, [2]).unwrap();
/// let y = b.tanh(r).unwrap();
/// let p = b.finish(&[y]).unwrap();
/// let out = eliminate_identity_reshapes(&p).unwrap();
/// assert_eq!((out.changes, out.program.n_nodes()), (1, 1));
/// ```
pub fn eliminate_identity_reshapes(p: &Program) -> Result<Rewritten, BuildError> {
    if p.outputs().is_empty() || !p.nodes().iter().any(|n| is_identity_reshape(p, n)) {
        return Ok(Rewritten {
            program: p.clone(),
            changes: 0,
        });
    }
    let mut b = Builder::new();
    let mut map: Vec<Var> = Vec::with_capacity(p.n_vars());
    for i in p.inputs() {
        map.push(b.input(&i.name, i.ty.clone(), i.kind)?);
    }
    let mut changes = 0;
    for n in p.nodes() {
        if is_identity_reshape(p, n) {
            map.push(map[n.operands[0].index()]);
            changes += 1;
            continue;
        }
        let operands: Vec<Var> = n.operands.iter().map(|o| map[o.index()]).collect();
        b.set_tag(n.tag.clone());
        map.push(b.apply_named(&n.name, n.prim.clone(), &operands)?);
    }
    let outputs: Vec<Var> = p.outputs().iter().map(|o| map[o.index()]).collect();
    Ok(Rewritten {
        program: b.finish(&outputs)?,
        changes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interp;
    use crate::ir::InputKind;
    use crate::prim::Ops;
    use crate::tensor::{DType, Tensor, TensorType};

    #[test]
    fn identity_reshapes_go_and_others_stay() {
        let mut b = Builder::new();
        let x = b
            .input("x", TensorType::new(DType::F64, [2, 3]), InputKind::Data)
            .unwrap();
        b.set_tag(Some("blk".into()));
        let r1 = b.reshape(x, [2, 3]).unwrap();
        let r2 = b.reshape(r1, [6]).unwrap();
        let r3 = b.reshape(r2, [6]).unwrap();
        let p = b.finish(&[r3, r1]).unwrap();
        let out = eliminate_identity_reshapes(&p).unwrap();
        assert_eq!(out.changes, 2);
        let q = &out.program;
        assert_eq!(q.n_nodes(), 1);
        assert_eq!(q.nodes()[0].tag.as_deref(), Some("blk"));
        assert_eq!(q.outputs(), &[q.node_var(0), q.input_var(0)]);
        let xs = [Tensor::f64([2, 3], (0..6).map(f64::from).collect()).unwrap()];
        assert_eq!(
            interp::eval(&p, &xs).unwrap(),
            interp::eval(q, &xs).unwrap()
        );
    }

    #[test]
    fn prune_counts_removed_nodes() {
        let mut b = Builder::new();
        let x = b
            .input("x", TensorType::new(DType::F64, [2]), InputKind::Data)
            .unwrap();
        let _dead = b.exp(x).unwrap();
        let y = b.tanh(x).unwrap();
        let p = b.finish(&[y]).unwrap();
        assert_eq!(prune(&p).unwrap().changes, 1);
    }
}
