//! add, sub, neg, mul: equal-shape elementwise ring operations (broadcasting is explicit).

use std::sync::Arc;

use crate::ir::{Builder, KernelError, Prim, Primitive, RuleError, TypeError, Var};
use crate::ir::{Draw, DrawError, Drawing, Drawn, Interval};
use crate::prim::dispatch::{
    eval_ring, eval_ring_rational, map_in_place, or_eval, same_float_pair, unary_float,
    zip_in_place, FloatMapInPlace, FloatZip, RingKernel,
};
use crate::prim::Ops;
use crate::tensor::{kernels, Array, Element, Float, RArray, Tensor, TensorType};

/// Sums the present terms; `None` if all are zero.
pub fn sum_terms(b: &mut Builder, terms: &[Option<Var>]) -> Result<Option<Var>, RuleError> {
    let mut acc: Option<Var> = None;
    for t in terms.iter().flatten() {
        acc = Some(match acc {
            None => *t,
            Some(a) => b.add(a, *t)?,
        });
    }
    Ok(acc)
}

/// The tangent of a primitive linear in operand `k` and constant in the others (indices,
/// argmax sources): the primitive itself applied to the operands with x_k replaced by dx_k.
pub(crate) fn linear_jvp(
    b: &mut Builder,
    prim: Prim,
    x: &[Var],
    dx: &[Option<Var>],
    k: usize,
) -> Result<Option<Var>, RuleError> {
    let Some(d) = dx[k] else { return Ok(None) };
    let mut operands = x.to_vec();
    operands[k] = d;
    Ok(Some(b.apply(prim, &operands)?))
}

/// The product rule of a bilinear primitive B: dB(x, y) = B(dx, y) + B(x, dy).
pub(crate) fn bilinear_jvp(
    b: &mut Builder,
    prim: Prim,
    x: &[Var],
    dx: &[Option<Var>],
) -> Result<Option<Var>, RuleError> {
    let left = dx[0]
        .map(|d| b.apply(prim.clone(), &[d, x[1]]))
        .transpose()?;
    let right = dx[1].map(|d| b.apply(prim, &[x[0], d])).transpose()?;
    sum_terms(b, &[left, right])
}

/// x + y; pullback (u, u).
#[derive(Debug, Clone, Copy)]
pub struct Add;

impl RingKernel for Add {
    fn ring<T: Element>(&self, x: &[&Array<T>]) -> Result<Array<T>, KernelError> {
        Ok(kernels::zip_with(x[0], x[1], |a, b| a + b))
    }
}

impl FloatZip for Add {
    fn apply<T: Float>(&self, a: T, b: T) -> T {
        a + b
    }
}

impl Primitive for Add {
    fn name(&self) -> &str {
        "add"
    }
    fn drawing(&self) -> Option<Drawing> {
        Some(Drawing::new(3, draw_add))
    }
    fn f32_budget(&self, _inputs: &[TensorType], _output: &TensorType) -> crate::ir::Budget {
        crate::ir::Budget::Relative(1.0)
    }
    fn fragment(&self) -> crate::ir::Fragment {
        crate::ir::Fragment::Core
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType, TypeError> {
        same_float_pair(inputs)
    }
    fn eval(&self, x: &[&Tensor]) -> Result<Tensor, KernelError> {
        eval_ring(self, x)
    }
    fn eval_owned(&self, x: Vec<Tensor>) -> Result<Tensor, KernelError> {
        or_eval(zip_in_place(self, x), |x| self.eval(x))
    }
    fn has_rational_eval(&self) -> bool {
        true
    }
    fn eval_rational(&self, x: &[&RArray]) -> Option<Result<RArray, KernelError>> {
        eval_ring_rational(self, x)
    }
    fn jvp(
        &self,
        b: &mut Builder,
        _x: &[Var],
        _y: Var,
        dx: &[Option<Var>],
    ) -> Result<Option<Var>, RuleError> {
        sum_terms(b, dx)
    }
    fn vjp(
        &self,
        _b: &mut Builder,
        _x: &[Var],
        _y: Var,
        u: Var,
    ) -> Result<Vec<Option<Var>>, RuleError> {
        Ok(vec![Some(u), Some(u)])
    }
    /// Batching: elementwise, so the batch is one more axis of the same operation.
    fn batch(
        &self,
        b: &mut crate::ir::Builder,
        x: &[crate::ir::Var],
        at: &crate::ir::BatchCtx,
    ) -> Result<crate::ir::Var, crate::ir::RuleError> {
        crate::prim::batching::elementwise(b, x, at)
    }
}

/// x - y; pullback (u, -u).
#[derive(Debug, Clone, Copy)]
pub struct Sub;

impl RingKernel for Sub {
    fn ring<T: Element>(&self, x: &[&Array<T>]) -> Result<Array<T>, KernelError> {
        Ok(kernels::zip_with(x[0], x[1], |a, b| a - b))
    }
}

impl FloatZip for Sub {
    fn apply<T: Float>(&self, a: T, b: T) -> T {
        a - b
    }
}

impl Primitive for Sub {
    fn name(&self) -> &str {
        "sub"
    }
    fn drawing(&self) -> Option<Drawing> {
        Some(Drawing::new(2, draw_sub))
    }
    fn f32_budget(&self, _inputs: &[TensorType], _output: &TensorType) -> crate::ir::Budget {
        crate::ir::Budget::Relative(1.0)
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType, TypeError> {
        same_float_pair(inputs)
    }
    fn eval(&self, x: &[&Tensor]) -> Result<Tensor, KernelError> {
        eval_ring(self, x)
    }
    fn eval_owned(&self, x: Vec<Tensor>) -> Result<Tensor, KernelError> {
        or_eval(zip_in_place(self, x), |x| self.eval(x))
    }
    fn has_rational_eval(&self) -> bool {
        true
    }
    fn eval_rational(&self, x: &[&RArray]) -> Option<Result<RArray, KernelError>> {
        eval_ring_rational(self, x)
    }
    fn jvp(
        &self,
        b: &mut Builder,
        _x: &[Var],
        _y: Var,
        dx: &[Option<Var>],
    ) -> Result<Option<Var>, RuleError> {
        Ok(match (dx[0], dx[1]) {
            (Some(p), Some(q)) => Some(b.sub(p, q)?),
            (Some(p), None) => Some(p),
            (None, Some(q)) => Some(b.neg(q)?),
            (None, None) => None,
        })
    }
    fn vjp(
        &self,
        b: &mut Builder,
        _x: &[Var],
        _y: Var,
        u: Var,
    ) -> Result<Vec<Option<Var>>, RuleError> {
        Ok(vec![Some(u), Some(b.neg(u)?)])
    }
    fn lower(&self, b: &mut Builder, x: &[Var]) -> Option<Result<Var, TypeError>> {
        // x + (-1) y
        Some(b.scale(x[1], -1.0).and_then(|n| b.add(x[0], n)))
    }
    /// Batching: elementwise, so the batch is one more axis of the same operation.
    fn batch(
        &self,
        b: &mut crate::ir::Builder,
        x: &[crate::ir::Var],
        at: &crate::ir::BatchCtx,
    ) -> Result<crate::ir::Var, crate::ir::RuleError> {
        crate::prim::batching::elementwise(b, x, at)
    }
}

/// -x; pullback -u.
#[derive(Debug, Clone, Copy)]
pub struct Neg;

impl RingKernel for Neg {
    fn ring<T: Element>(&self, x: &[&Array<T>]) -> Result<Array<T>, KernelError> {
        Ok(x[0].map(|a| -a.clone()))
    }
}

impl FloatMapInPlace for Neg {
    fn apply_all<T: Float>(&self, buf: &mut [T]) {
        for v in buf {
            *v = -*v;
        }
    }
}

impl Primitive for Neg {
    fn name(&self) -> &str {
        "neg"
    }
    fn drawing(&self) -> Option<Drawing> {
        Some(Drawing::new(1, draw_neg))
    }
    fn f32_budget(&self, _inputs: &[TensorType], _output: &TensorType) -> crate::ir::Budget {
        crate::ir::Budget::Exact
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType, TypeError> {
        unary_float(inputs)
    }
    fn eval(&self, x: &[&Tensor]) -> Result<Tensor, KernelError> {
        eval_ring(self, x)
    }
    fn eval_owned(&self, x: Vec<Tensor>) -> Result<Tensor, KernelError> {
        or_eval(map_in_place(self, x), |x| self.eval(x))
    }
    fn has_rational_eval(&self) -> bool {
        true
    }
    fn eval_rational(&self, x: &[&RArray]) -> Option<Result<RArray, KernelError>> {
        eval_ring_rational(self, x)
    }
    fn jvp(
        &self,
        b: &mut Builder,
        _x: &[Var],
        _y: Var,
        dx: &[Option<Var>],
    ) -> Result<Option<Var>, RuleError> {
        dx[0].map(|d| b.neg(d)).transpose().map_err(Into::into)
    }
    fn vjp(
        &self,
        b: &mut Builder,
        _x: &[Var],
        _y: Var,
        u: Var,
    ) -> Result<Vec<Option<Var>>, RuleError> {
        Ok(vec![Some(b.neg(u)?)])
    }
    fn lower(&self, b: &mut Builder, x: &[Var]) -> Option<Result<Var, TypeError>> {
        // (-1) x
        Some(b.scale(x[0], -1.0))
    }
    /// Batching: elementwise, so the batch is one more axis of the same operation.
    fn batch(
        &self,
        b: &mut crate::ir::Builder,
        x: &[crate::ir::Var],
        at: &crate::ir::BatchCtx,
    ) -> Result<crate::ir::Var, crate::ir::RuleError> {
        crate::prim::batching::elementwise(b, x, at)
    }
}

/// x ⊙ y; pullback (u ⊙ y, u ⊙ x).
#[derive(Debug, Clone, Copy)]
pub struct Mul;

impl RingKernel for Mul {
    fn ring<T: Element>(&self, x: &[&Array<T>]) -> Result<Array<T>, KernelError> {
        Ok(kernels::zip_with(x[0], x[1], |a, b| a * b))
    }
}

impl FloatZip for Mul {
    fn apply<T: Float>(&self, a: T, b: T) -> T {
        a * b
    }
}

impl Primitive for Mul {
    fn name(&self) -> &str {
        "mul"
    }
    fn drawing(&self) -> Option<Drawing> {
        Some(Drawing::new(3, draw_mul))
    }
    fn f32_budget(&self, _inputs: &[TensorType], _output: &TensorType) -> crate::ir::Budget {
        crate::ir::Budget::Relative(1.0)
    }
    fn fragment(&self) -> crate::ir::Fragment {
        crate::ir::Fragment::Core
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType, TypeError> {
        same_float_pair(inputs)
    }
    fn eval(&self, x: &[&Tensor]) -> Result<Tensor, KernelError> {
        eval_ring(self, x)
    }
    fn eval_owned(&self, x: Vec<Tensor>) -> Result<Tensor, KernelError> {
        or_eval(zip_in_place(self, x), |x| self.eval(x))
    }
    fn has_rational_eval(&self) -> bool {
        true
    }
    fn eval_rational(&self, x: &[&RArray]) -> Option<Result<RArray, KernelError>> {
        eval_ring_rational(self, x)
    }
    fn jvp(
        &self,
        b: &mut Builder,
        x: &[Var],
        _y: Var,
        dx: &[Option<Var>],
    ) -> Result<Option<Var>, RuleError> {
        let left = dx[0].map(|d| b.mul(d, x[1])).transpose()?;
        let right = dx[1].map(|d| b.mul(x[0], d)).transpose()?;
        sum_terms(b, &[left, right])
    }
    fn vjp(
        &self,
        b: &mut Builder,
        x: &[Var],
        _y: Var,
        u: Var,
    ) -> Result<Vec<Option<Var>>, RuleError> {
        Ok(vec![Some(b.mul(u, x[1])?), Some(b.mul(u, x[0])?)])
    }
    /// Batching: elementwise, so the batch is one more axis of the same operation.
    fn batch(
        &self,
        b: &mut crate::ir::Builder,
        x: &[crate::ir::Var],
        at: &crate::ir::BatchCtx,
    ) -> Result<crate::ir::Var, crate::ir::RuleError> {
        crate::prim::batching::elementwise(b, x, at)
    }
}

pub(crate) fn register(r: &mut crate::ir::Registry) {
    crate::prim::register_unit(r, "add", || Arc::new(Add) as Prim);
    crate::prim::register_unit(r, "sub", || Arc::new(Sub) as Prim);
    crate::prim::register_unit(r, "neg", || Arc::new(Neg) as Prim);
    crate::prim::register_unit(r, "mul", || Arc::new(Mul) as Prim);
}

/// Operands of magnitude <= 64; x + x (a repeated operand) is 2x.
fn draw_add(d: &mut dyn Draw) -> Result<Drawn, DrawError> {
    let x = d.pick();
    let x = d.moderate(x, 64.0)?;
    let y = d.partner(x)?;
    let y = d.moderate(y, 64.0)?;
    let r = if x.var == y.var {
        x.range.scale(2.0)
    } else {
        x.range.plus(y.range)
    };
    d.same(r, |b| b.add(x.var, y.var))
}

/// Operands of magnitude <= 64; x - x is 0.
fn draw_sub(d: &mut dyn Draw) -> Result<Drawn, DrawError> {
    let x = d.pick();
    let x = d.moderate(x, 64.0)?;
    let y = d.partner(x)?;
    let y = d.moderate(y, 64.0)?;
    let r = if x.var == y.var {
        Interval::new(0.0, 0.0)
    } else {
        x.range.minus(y.range)
    };
    d.same(r, |b| b.sub(x.var, y.var))
}

fn draw_neg(d: &mut dyn Draw) -> Result<Drawn, DrawError> {
    let x = d.pick();
    d.same(x.range.negated(), |b| b.neg(x.var))
}

/// Operands of magnitude <= 4; x ⊙ x is a square.
fn draw_mul(d: &mut dyn Draw) -> Result<Drawn, DrawError> {
    let x = d.pick();
    let x = d.moderate(x, 4.0)?;
    let y = d.partner(x)?;
    let y = d.moderate(y, 4.0)?;
    let r = if x.var == y.var {
        x.range.square()
    } else {
        x.range.times(y.range)
    };
    d.same(r, |b| b.mul(x.var, y.var))
}
