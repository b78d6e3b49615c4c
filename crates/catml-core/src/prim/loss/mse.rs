//! mse (a, b) -> scalar mean squared error L = (1/n) sum (a - b)^2 over the n elements of two
//! equal-typed operands. dL = (2/n) <a - b, da - db>; pullback (u G, -u G) with G = (2/n)(a - b).
//! Lowering: d = a - b, (1/n) sum(d d).

use std::sync::Arc;

use crate::ir::budget;
use crate::ir::{Builder, KernelError, Prim, Primitive, Registry, RuleError, TypeError, Var};
use crate::ir::{Draw, DrawError, Drawing, Drawn, Interval};
use crate::prim::dispatch::same_float_pair;
use crate::prim::Ops;
use crate::tensor::{Array, Element, Float, RArray, Rational, Tensor, TensorType};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mse;

fn sum_squares<T: Element>(a: &Array<T>, b: &Array<T>) -> T {
    a.data().iter().zip(b.data()).fold(T::zero(), |s, (x, y)| {
        let d = x.clone() - y.clone();
        s + d.clone() * d
    })
}

fn mean_square<T: Float>(a: &Array<T>, b: &Array<T>) -> Array<T> {
    Array::scalar(sum_squares(a, b) / T::from_f64(a.len() as f64))
}

/// G = (2/n)(a - b), as nodes.
fn gradient(b: &mut Builder, x: &[Var]) -> Result<Var, TypeError> {
    let n = b.ty(x[0]).numel();
    let d = b.sub(x[0], x[1])?;
    let d2 = b.scale(d, 2.0)?;
    b.div_count(d2, n)
}

impl Primitive for Mse {
    fn name(&self) -> &str {
        "mse"
    }
    fn drawing(&self) -> Option<Drawing> {
        Some(Drawing::new(1, draw_mse))
    }
    fn f32_budget(&self, inputs: &[TensorType], _output: &TensorType) -> crate::ir::Budget {
        // Sum of n squared differences, then a division: n + 3 roundings on nonnegative terms.
        let n = inputs[0].numel() as f64;
        crate::ir::Budget::formula("gamma_{n+3} |y|", move |s| {
            s.y.iter()
                .map(|y| budget::gamma(n + 3.0) * y.abs())
                .collect()
        })
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType, TypeError> {
        Ok(TensorType::scalar(same_float_pair(inputs)?.dtype))
    }
    fn eval(&self, x: &[&Tensor]) -> Result<Tensor, KernelError> {
        match (x[0], x[1]) {
            (Tensor::F32(a), Tensor::F32(b)) => Ok(Tensor::F32(mean_square(a, b))),
            (Tensor::F64(a), Tensor::F64(b)) => Ok(Tensor::F64(mean_square(a, b))),
            _ => Err(KernelError::Unsupported(format!(
                "mse of {} and {}",
                x[0].dtype(),
                x[1].dtype()
            ))),
        }
    }
    fn has_rational_eval(&self) -> bool {
        true
    }
    fn eval_rational(&self, x: &[&RArray]) -> Option<Result<RArray, KernelError>> {
        let n = Rational::from_integer((x[0].len() as i64).into());
        Some(Ok(Array::scalar(sum_squares(x[0], x[1]) / n)))
    }
    fn flops(&self, inputs: &[TensorType], _output: &TensorType) -> u64 {
        3 * inputs[0].numel() as u64
    }
    fn jvp(
        &self,
        b: &mut Builder,
        x: &[Var],
        _y: Var,
        dx: &[Option<Var>],
    ) -> Result<Option<Var>, RuleError> {
        let diff = match (dx[0], dx[1]) {
            (None, None) => return Ok(None),
            (Some(p), None) => p,
            (None, Some(q)) => b.neg(q)?,
            (Some(p), Some(q)) => b.sub(p, q)?,
        };
        let g = gradient(b, x)?;
        let gd = b.mul(g, diff)?;
        Ok(Some(b.sum(gd, None)?))
    }
    fn vjp(
        &self,
        b: &mut Builder,
        x: &[Var],
        _y: Var,
        u: Var,
    ) -> Result<Vec<Option<Var>>, RuleError> {
        let t = b.ty(x[0]).clone();
        let g = gradient(b, x)?;
        let ub = b.broadcast(u, t.shape.clone(), vec![])?;
        let da = b.mul(ub, g)?;
        let db = b.neg(da)?;
        Ok(vec![Some(da), Some(db)])
    }
    fn lower(&self, b: &mut Builder, x: &[Var]) -> Option<Result<Var, TypeError>> {
        Some((|| {
            let n = b.ty(x[0]).numel();
            let d = b.sub(x[0], x[1])?;
            let d2 = b.mul(d, d)?;
            let s = b.sum(d2, None)?;
            b.div_count(s, n)
        })())
    }
    /// Batching: per example.
    fn batch(
        &self,
        b: &mut crate::ir::Builder,
        x: &[crate::ir::Var],
        at: &crate::ir::BatchCtx,
    ) -> Result<crate::ir::Var, crate::ir::RuleError> {
        crate::prim::batching::per_example(b, x, at)
    }
}

pub(crate) fn register(r: &mut Registry) {
    crate::prim::register_unit(r, "mse", || Arc::new(Mse) as Prim);
}

/// mean((a - b)^2) in [0, max |a - b|^2].
fn draw_mse(d: &mut dyn Draw) -> Result<Drawn, DrawError> {
    let x = d.pick();
    let x = d.moderate(x, 8.0)?;
    let y = d.partner(x)?;
    let y = d.moderate(y, 8.0)?;
    let m = x.range.minus(y.range).mag();
    d.same(Interval::new(0.0, m * m), |b| b.mse(x.var, y.var))
}
