//! where(cond, a, b): a bool condition and two operands of one type, all of one shape; the
//! result is a where cond holds, else b. The derivative routes the cotangent by the mask: a
//! gets it where cond holds, b elsewhere, cond none. Exact over rationals.

use std::sync::Arc;

use crate::ir::{
    AttrReader, Attrs, Builder, KernelError, Prim, Primitive, Registry, RuleError, TypeError, Var,
};
use crate::prim::dispatch::arity;
use crate::prim::Ops;
use crate::tensor::{Array, DType, RArray, Tensor, TensorType};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Where;

fn select<T: Clone>(c: &[bool], a: &Array<T>, b: &Array<T>) -> Array<T> {
    let data = c
        .iter()
        .zip(a.data().iter().zip(b.data()))
        .map(|(&c, (x, y))| if c { x.clone() } else { y.clone() })
        .collect();
    Array::new(a.shape().clone(), data).expect("same shape")
}

impl Primitive for Where {
    fn name(&self) -> &str {
        "where"
    }
    fn drawing(&self) -> Option<crate::ir::Drawing> {
        Some(crate::ir::Drawing::new(2, |d| {
            super::draw_selection(d, |b, x, y| {
                crate::prim::Ops::compare(b, super::Comparison::Less, x, y)
            })
        }))
    }
    fn batch(
        &self,
        b: &mut Builder,
        x: &[Var],
        at: &crate::ir::BatchCtx,
    ) -> Result<Var, RuleError> {
        // An unbatched bool condition cannot be broadcast (broadcast is for numbers): apply per
        // example.
        crate::prim::batching::per_example(b, x, at)
    }
    fn f32_budget(&self, _inputs: &[TensorType], _output: &TensorType) -> crate::ir::Budget {
        crate::ir::Budget::Exact
    }
    fn copies_operand_values(&self) -> bool {
        true
    }
    fn smooth(&self) -> bool {
        // Programs select by comparisons of their own values: finite differences may cross
        // the switch.
        false
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType, TypeError> {
        arity(inputs, 3)?;
        if inputs[0].dtype != DType::Bool {
            return Err(TypeError::DType {
                index: 0,
                expected: "a bool condition".to_string(),
                found: inputs[0].dtype,
            });
        }
        if inputs[1].dtype == DType::Bool {
            return Err(TypeError::DType {
                index: 1,
                expected: "f32, f64 or i64".to_string(),
                found: DType::Bool,
            });
        }
        if inputs[1] != inputs[2] {
            return Err(TypeError::Mismatch {
                left: inputs[1].clone(),
                right: inputs[2].clone(),
            });
        }
        if inputs[0].shape != inputs[1].shape {
            return Err(TypeError::Operand {
                index: 0,
                expected: format!("a bool condition of shape {}", inputs[1].shape),
                found: inputs[0].clone(),
            });
        }
        Ok(inputs[1].clone())
    }
    fn eval(&self, x: &[&Tensor]) -> Result<Tensor, KernelError> {
        let c = x[0]
            .as_bool()
            .ok_or_else(|| KernelError::Unsupported(format!("where on {}", x[0].dtype())))?
            .data();
        Ok(match (x[1], x[2]) {
            (Tensor::F32(a), Tensor::F32(b)) => Tensor::F32(select(c, a, b)),
            (Tensor::F64(a), Tensor::F64(b)) => Tensor::F64(select(c, a, b)),
            (Tensor::I64(a), Tensor::I64(b)) => Tensor::I64(select(c, a, b)),
            (a, b) => {
                return Err(KernelError::Unsupported(format!(
                    "where of {} and {}",
                    a.dtype(),
                    b.dtype()
                )))
            }
        })
    }
    fn has_rational_eval(&self) -> bool {
        true
    }
    fn eval_rational(&self, x: &[&RArray]) -> Option<Result<RArray, KernelError>> {
        let c: Vec<bool> = x[0]
            .data()
            .iter()
            .map(|v| !num_traits::Zero::is_zero(v))
            .collect();
        Some(Ok(select(&c, x[1], x[2])))
    }
    fn flops(&self, _inputs: &[TensorType], _output: &TensorType) -> u64 {
        0
    }
    fn jvp(
        &self,
        b: &mut Builder,
        x: &[Var],
        _y: Var,
        dx: &[Option<Var>],
    ) -> Result<Option<Var>, RuleError> {
        if !b.ty(x[1]).dtype.is_float() {
            return Ok(None);
        }
        Ok(match (dx[1], dx[2]) {
            (None, None) => None,
            (da, db) => {
                let da = match da {
                    Some(v) => v,
                    None => b.full_like(0.0, x[1])?,
                };
                let db = match db {
                    Some(v) => v,
                    None => b.full_like(0.0, x[2])?,
                };
                Some(b.op(Arc::new(Where), &[x[0], da, db])?)
            }
        })
    }
    fn vjp(
        &self,
        b: &mut Builder,
        x: &[Var],
        _y: Var,
        u: Var,
    ) -> Result<Vec<Option<Var>>, RuleError> {
        if !b.ty(x[1]).dtype.is_float() {
            return Ok(vec![None, None, None]);
        }
        // ā = where(cond, u, 0), b̄ = where(cond, 0, u).
        let zero = b.full_like(0.0, u)?;
        let ua = b.op(Arc::new(Where), &[x[0], u, zero])?;
        let ub = b.op(Arc::new(Where), &[x[0], zero, u])?;
        Ok(vec![None, Some(ua), Some(ub)])
    }
}

pub(crate) fn register(r: &mut Registry) {
    r.register("where", |attrs: &Attrs| {
        AttrReader::new(attrs).finish()?;
        Ok(Arc::new(Where) as Prim)
    });
    r.set_example("where", Attrs::new());
}
