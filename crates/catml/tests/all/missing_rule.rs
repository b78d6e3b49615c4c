//! A primitive that states no derivative rule cannot be differentiated silently: both transforms
//! stop with `AdError::Rule`, naming the node, its index and the op.

use std::sync::Arc;

use catml::ad::{self, AdError};
use catml::interp::eval;
use catml::ir::{Builder, InputKind, KernelError, Primitive, RuleError, TypeError};
use catml::prim::Ops;
use catml::tensor::{DType, Tensor, TensorType};

/// x ↦ 2x, with only a name, a type rule and a kernel: no jvp, no vjp.
#[derive(Debug)]
struct Double;

impl Primitive for Double {
    fn name(&self) -> &str {
        "double"
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType, TypeError> {
        Ok(inputs[0].clone())
    }
    fn eval(&self, inputs: &[&Tensor]) -> Result<Tensor, KernelError> {
        let t = inputs[0];
        let data = t.to_f64_vec().iter().map(|v| 2.0 * v).collect();
        Ok(Tensor::from_f64s(t.dtype(), t.shape().clone(), data).unwrap())
    }
}

#[test]
fn a_primitive_without_rules_is_a_typed_error_naming_node_and_op() {
    let mut b = Builder::new();
    let x = b
        .input("x", TensorType::new(DType::F64, [2]), InputKind::Data)
        .unwrap();
    let e = b.exp(x).unwrap();
    let d = b.apply_hinted("twice", Arc::new(Double), &[e]).unwrap();
    let p = b.finish(&[d]).unwrap();

    // It evaluates: only differentiation needs the missing rules.
    let y = eval(&p, &[Tensor::f64([2], vec![0.0, 1.0]).unwrap()]).unwrap();
    assert_eq!(y[0].to_f64_vec(), vec![2.0, 2.0 * 1f64.exp()]);

    for (mode, err) in [
        ("vjp", ad::vjp(&p).unwrap_err()),
        ("jvp", ad::jvp(&p).unwrap_err()),
    ] {
        match &err {
            AdError::Rule {
                index,
                name,
                op,
                source,
            } => {
                assert_eq!((*index, name.as_str(), op.as_str()), (1, "twice", "double"));
                assert_eq!(
                    *source,
                    RuleError::Missing {
                        op: "double".to_string(),
                        mode
                    }
                );
            }
            other => panic!("{mode}: expected AdError::Rule, found {other:?}"),
        }
        assert_eq!(
            err.to_string(),
            format!("node 1 `twice` (double): primitive `double` has no {mode} rule")
        );
    }
}
