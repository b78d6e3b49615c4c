//! Structural equality of programs up to names: two programs are the same arrow when they have
//! the same input types and kinds, the same nodes position by position (op, attributes, operand
//! wiring), and the same outputs. Names and tags are ignored.

use std::fmt::Write;

use super::{InputKind, Program, Var};

/// The first place where two programs differ in structure.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum StructuralDifference {
    /// The programs have different numbers of inputs.
    #[error("input counts differ: {left} vs {right}")]
    InputCount { left: usize, right: usize },
    /// An input differs in type or kind (data or parameter).
    #[error("input {index}: {left} vs {right}")]
    Input {
        index: usize,
        left: String,
        right: String,
    },
    /// The programs have different numbers of nodes.
    #[error("node counts differ: {left} vs {right}")]
    NodeCount { left: usize, right: usize },
    /// A node applies another primitive.
    #[error("node {index}: op `{left}` vs `{right}`")]
    Op {
        index: usize,
        left: String,
        right: String,
    },
    /// A node's primitive has other attributes.
    #[error("node {index} ({op}): attributes {left} vs {right}")]
    Attrs {
        index: usize,
        op: String,
        left: String,
        right: String,
    },
    /// A node reads other values.
    #[error("node {index} ({op}): operands ({left}) vs ({right})")]
    Operands {
        index: usize,
        op: String,
        left: String,
        right: String,
    },
    /// The outputs are other values.
    #[error("outputs differ: ({left}) vs ({right})")]
    Outputs { left: String, right: String },
}

/// Values by position (`v3`), comma separated.
fn positions(vars: &[Var]) -> String {
    let mut s = String::new();
    for (i, v) in vars.iter().enumerate() {
        if i > 0 {
            s.push_str(", ");
        }
        let _ = write!(s, "{v}");
    }
    s
}

fn input_text(p: &Program, i: usize) -> String {
    let input = &p.inputs()[i];
    let kind = match input.kind {
        InputKind::Data => "data",
        InputKind::Param => "param",
    };
    format!("{} {kind}", input.ty)
}

/// `None` when `a` and `b` are the same program up to names (and tags); else the first
/// difference. Values are compared by position: inputs first, then nodes in order.
///
/// ```
/// use catml_core::ir::{structural_difference, Builder, InputKind};
/// use catml_core::prim::Ops;
/// use catml_core::tensor::{DType, TensorType};
///
/// let make = |x_name: &str, y_name: &str| {
///     let mut b = Builder::new();
///     let x = b.input(x_name, TensorType::new(DType::F64, [2]), InputKind::Data).unwrap();
///     let y = b.apply_named(y_name, std::sync::Arc::new(catml_core::prim::Tanh), &[x]).unwrap();
///     b.finish(&[y]).unwrap()
/// };
/// assert_eq!(structural_difference(&make("x", "y"), &make("a", "b")), None);
/// ```
pub fn structural_difference(a: &Program, b: &Program) -> Option<StructuralDifference> {
    if a.n_inputs() != b.n_inputs() {
        return Some(StructuralDifference::InputCount {
            left: a.n_inputs(),
            right: b.n_inputs(),
        });
    }
    for index in 0..a.n_inputs() {
        let (l, r) = (&a.inputs()[index], &b.inputs()[index]);
        if l.ty != r.ty || l.kind != r.kind {
            return Some(StructuralDifference::Input {
                index,
                left: input_text(a, index),
                right: input_text(b, index),
            });
        }
    }
    if a.n_nodes() != b.n_nodes() {
        return Some(StructuralDifference::NodeCount {
            left: a.n_nodes(),
            right: b.n_nodes(),
        });
    }
    for (index, (l, r)) in a.nodes().iter().zip(b.nodes()).enumerate() {
        let op = l.prim.name().to_string();
        if op != r.prim.name() {
            return Some(StructuralDifference::Op {
                index,
                left: op,
                right: r.prim.name().to_string(),
            });
        }
        let (la, ra) = (l.prim.attrs(), r.prim.attrs());
        if la != ra {
            return Some(StructuralDifference::Attrs {
                index,
                op,
                left: serde_json::Value::Object(la).to_string(),
                right: serde_json::Value::Object(ra).to_string(),
            });
        }
        if l.operands != r.operands {
            return Some(StructuralDifference::Operands {
                index,
                op,
                left: positions(&l.operands),
                right: positions(&r.operands),
            });
        }
    }
    if a.outputs() != b.outputs() {
        return Some(StructuralDifference::Outputs {
            left: positions(a.outputs()),
            right: positions(b.outputs()),
        });
    }
    None
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::ir::Builder;
    use crate::prim::{Exp, Ops, Tanh};
    use crate::tensor::{DType, TensorType};

    fn t(dims: &[usize]) -> TensorType {
        TensorType::new(DType::F64, dims.to_vec())
    }

    #[test]
    fn a_different_op_is_named_with_its_position() {
        let make = |prim: crate::ir::Prim| {
            let mut b = Builder::new();
            let x = b.input("x", t(&[2]), InputKind::Data).unwrap();
            let y = b.tanh(x).unwrap();
            let z = b.apply(prim, &[y]).unwrap();
            b.finish(&[z]).unwrap()
        };
        let d = structural_difference(&make(Arc::new(Tanh)), &make(Arc::new(Exp))).unwrap();
        assert_eq!(d.to_string(), "node 1: op `tanh` vs `exp`");
    }

    #[test]
    fn swapped_operands_are_a_different_wiring() {
        let make = |swap: bool| {
            let mut b = Builder::new();
            let x = b.input("x", t(&[2, 2]), InputKind::Data).unwrap();
            let w = b.input("w", t(&[2, 2]), InputKind::Param).unwrap();
            let y = if swap { b.matmul(w, x) } else { b.matmul(x, w) }.unwrap();
            b.finish(&[y]).unwrap()
        };
        let d = structural_difference(&make(false), &make(true)).unwrap();
        assert_eq!(
            d.to_string(),
            "node 0 (matmul): operands (v0, v1) vs (v1, v0)"
        );
    }

    #[test]
    fn a_parameter_is_not_a_data_input_of_the_same_type() {
        let make = |kind| {
            let mut b = Builder::new();
            let x = b.input("x", t(&[3]), kind).unwrap();
            let y = b.tanh(x).unwrap();
            b.finish(&[y]).unwrap()
        };
        let d = structural_difference(&make(InputKind::Data), &make(InputKind::Param)).unwrap();
        assert_eq!(d.to_string(), "input 0: f64[3] data vs f64[3] param");
    }

    #[test]
    fn attributes_are_compared() {
        let make = |axes: Vec<usize>| {
            let mut b = Builder::new();
            let x = b.input("x", t(&[2, 3]), InputKind::Data).unwrap();
            let y = b.sum(x, Some(axes)).unwrap();
            b.finish(&[y]).unwrap()
        };
        let d = structural_difference(&make(vec![0]), &make(vec![1])).unwrap();
        assert_eq!(
            d.to_string(),
            r#"node 0 (sum): attributes {"axes":[0]} vs {"axes":[1]}"#
        );
    }
}
