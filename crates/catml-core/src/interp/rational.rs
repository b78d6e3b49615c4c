use crate::ir::{KernelError, Program};
use num_traits::ToPrimitive;

use crate::ir::Primitive;
use crate::tensor::{Array, DType, RArray, Rational, Shape, Tensor};

/// Why exact evaluation stopped.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum RationalError {
    #[error("expected {expected} inputs, found {found}")]
    InputCount { expected: usize, found: usize },
    #[error("input `{name}` has shape {found}, expected {expected}")]
    InputShape {
        name: String,
        expected: Shape,
        found: Shape,
    },
    #[error("node {index} `{name}` ({op}) is not a rational operation")]
    NotRational {
        index: usize,
        name: String,
        op: String,
    },
    #[error("node {index} `{name}` ({op}): {source}")]
    Kernel {
        index: usize,
        name: String,
        op: String,
        source: KernelError,
    },
}

/// Exact evaluation over arbitrary-precision rationals. Fails naming the first node whose
/// primitive is not rational (exp, tanh, ...).
pub fn eval_rational(p: &Program, inputs: &[RArray]) -> Result<Vec<RArray>, RationalError> {
    if inputs.len() != p.n_inputs() {
        return Err(RationalError::InputCount {
            expected: p.n_inputs(),
            found: inputs.len(),
        });
    }
    for (decl, a) in p.inputs().iter().zip(inputs) {
        if *a.shape() != decl.ty.shape {
            return Err(RationalError::InputShape {
                name: decl.name.clone(),
                expected: decl.ty.shape.clone(),
                found: a.shape().clone(),
            });
        }
    }
    let mut env: Vec<RArray> = inputs.to_vec();
    for (i, node) in p.nodes().iter().enumerate() {
        let args: Vec<&RArray> = node.operands.iter().map(|o| &env[o.index()]).collect();
        let integer = node.ty.dtype == DType::I64
            && node
                .operands
                .iter()
                .all(|o| matches!(p.ty(*o).dtype, DType::I64 | DType::Bool));
        let exact = if integer {
            // Integer arithmetic wraps and truncates (`docs/dtypes.md`): its own kernel on the
            // integers is exact, where rational arithmetic would not wrap or truncate.
            {
                let dtypes: Vec<DType> = node.operands.iter().map(|o| p.ty(*o).dtype).collect();
                Some(integer_eval(&*node.prim, &dtypes, &args))
            }
        } else {
            node.prim.eval_rational(&args)
        };
        let out = match exact {
            None => {
                return Err(RationalError::NotRational {
                    index: i,
                    name: node.name.clone(),
                    op: node.prim.name().to_string(),
                })
            }
            Some(r) => r.map_err(|source| RationalError::Kernel {
                index: i,
                name: node.name.clone(),
                op: node.prim.name().to_string(),
                source,
            })?,
        };
        env.push(out);
    }
    Ok(p.outputs().iter().map(|o| env[o.index()].clone()).collect())
}

/// A node on integer and bool operands (`dtypes`) evaluated by its kernel: each operand is
/// read back as i64 or bool, the result as exact integers.
fn integer_eval(
    prim: &dyn Primitive,
    dtypes: &[DType],
    args: &[&RArray],
) -> Result<RArray, KernelError> {
    let mut tensors = Vec::with_capacity(args.len());
    for (a, d) in args.iter().zip(dtypes) {
        let v: Option<Vec<i64>> = a
            .data()
            .iter()
            .map(|r| r.is_integer().then(|| r.to_integer().to_i64()).flatten())
            .collect();
        let v = v.ok_or_else(|| {
            KernelError::Unsupported(format!("an operand of dtype {d} that is not one"))
        })?;
        let ints = Array::new(a.shape().clone(), v).expect("same length");
        tensors.push(match d {
            DType::Bool => Tensor::Bool(ints.map(|&v| v != 0)),
            _ => Tensor::I64(ints),
        });
    }
    match prim.eval(&tensors.iter().collect::<Vec<_>>())? {
        Tensor::I64(y) => Ok(y.map(|&v| Rational::from_integer(v.into()))),
        t => Err(KernelError::Unsupported(format!(
            "an integer node gave a {} result",
            t.dtype()
        ))),
    }
}
