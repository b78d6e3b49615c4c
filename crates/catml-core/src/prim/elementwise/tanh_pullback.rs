//! tanh_pullback (y, u) -> u (1 - y²): the derivative of y = tanh x applied to u, one pass
//! instead of four (a constant, a square, a difference, a product). The derivative of tanh is
//! a multiplication, symmetric, so this one map is both tanh's tangent rule (u = ẋ) and its
//! cotangent rule (u = ȳ).
//!
//! Its own rules, for f(y, u) = u (1 - y²), linear in u:
//! - tangent: f(y, du) - 2 y u dy;
//! - cotangent: ū = f(y, v), ȳ = -2 y u v.
//!
//! Lowering: 1 - y y, then the product with u.

use std::sync::Arc;

use crate::ir::budget;
use crate::ir::{
    operand_refs, Builder, KernelError, Operands, Prim, Primitive, Registry, RuleError, TypeError,
    Var,
};
use crate::ir::{BlockKernel, Draw, DrawError, Drawing, Drawn, Interval};
use crate::prim::dispatch::{
    eval_float, eval_ring_rational, same_float_pair, zip_block, zip_in_place, FloatKernel,
    FloatZip, RingKernel,
};
use crate::prim::Ops;
use crate::tensor::{kernels, Array, Element, Float, RArray, Tensor, TensorType};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TanhPullback;

impl RingKernel for TanhPullback {
    fn ring<T: Element>(&self, x: &[&Array<T>]) -> Result<Array<T>, KernelError> {
        Ok(kernels::zip_with(x[0], x[1], |y, u| {
            u * (T::one() - y.clone() * y)
        })?)
    }
}

impl FloatZip for TanhPullback {
    fn apply<T: Float>(&self, y: T, u: T) -> T {
        u * (T::one() - y * y)
    }
}

impl FloatKernel for TanhPullback {
    fn float<T: Float>(&self, x: &[&Array<T>]) -> Result<Array<T>, KernelError> {
        Ok(kernels::zip_copy(x[0], x[1], |y, u| self.apply(y, u))?)
    }
}

impl BlockKernel for TanhPullback {
    fn block_f32(&self, x: &[&[f32]], out: &mut [f32]) -> bool {
        zip_block(self, x, out);
        true
    }
    fn block_f64(&self, x: &[&[f64]], out: &mut [f64]) -> bool {
        zip_block(self, x, out);
        true
    }
}

/// -2 y u w.
fn minus_two_y_u(b: &mut Builder, y: Var, u: Var, w: Var) -> Result<Var, TypeError> {
    let yu = b.mul(y, u)?;
    let yuw = b.mul(yu, w)?;
    b.scale(yuw, -2.0)
}

impl Primitive for TanhPullback {
    fn name(&self) -> &str {
        "tanh_pullback"
    }
    fn drawing(&self) -> Option<Drawing> {
        Some(Drawing::new(1, draw_tanh_pullback))
    }
    fn f32_budget(&self, _inputs: &[TensorType], _output: &TensorType) -> crate::ir::Budget {
        // fl(u fl(1 - fl(y y))): within γ_3 |u| (|1 - y²| + y²); the square's underflow η
        // reaches the result times |u|, the last product's as η, each at most doubled later.
        crate::ir::Budget::formula("gamma_3 |u| (|1 - y^2| + y^2) + 2 (|u| + 1) eta", |s| {
            s.ops[0]
                .iter()
                .zip(&s.ops[1])
                .map(|(y, u)| {
                    budget::gamma(3.0) * u.abs() * ((1.0 - y * y).abs() + y * y)
                        + 2.0 * (u.abs() + 1.0) * budget::ETA32
                })
                .collect()
        })
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType, TypeError> {
        same_float_pair(inputs)
    }
    fn eval(&self, x: &[&Tensor]) -> Result<Tensor, KernelError> {
        eval_float(self, x)
    }
    fn eval_owned(&self, x: &mut Operands) -> Result<Tensor, KernelError> {
        match zip_in_place(self, x) {
            Some(t) => Ok(t),
            None => self.eval(&operand_refs(x)),
        }
    }
    /// It zips into either operand's buffer (`dispatch::zip_in_place`).
    fn writes_in_operand(&self, inputs: &[TensorType], output: &TensorType) -> bool {
        output.dtype.is_float() && inputs.contains(output)
    }
    fn elementwise(&self) -> Option<&dyn BlockKernel> {
        Some(self)
    }
    /// The zipped passes count the result as they write it (`dispatch::zip_in_place`,
    /// `kernels::zip_copy`).
    fn counts_non_finite(&self, output: &TensorType) -> bool {
        output.numel() >= kernels::COUNTED_MIN
    }
    fn has_rational_eval(&self) -> bool {
        true
    }
    fn eval_rational(&self, x: &[&RArray]) -> Option<Result<RArray, KernelError>> {
        eval_ring_rational(self, x)
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
        let (y, u) = (x[0], x[1]);
        let through_u = dx[1].map(|du| b.tanh_pullback(y, du)).transpose()?;
        let through_y = dx[0].map(|dy| minus_two_y_u(b, y, u, dy)).transpose()?;
        crate::prim::sum_terms(b, &[through_y, through_u])
    }
    fn vjp(
        &self,
        b: &mut Builder,
        x: &[Var],
        _y: Var,
        v: Var,
    ) -> Result<Vec<Option<Var>>, RuleError> {
        let (y, u) = (x[0], x[1]);
        let dy = minus_two_y_u(b, y, u, v)?;
        let du = b.tanh_pullback(y, v)?;
        Ok(vec![Some(dy), Some(du)])
    }
    fn lower(&self, b: &mut Builder, x: &[Var]) -> Option<Result<Var, TypeError>> {
        Some((|| {
            let one = b.full_like(1.0, x[0])?;
            let y2 = b.mul(x[0], x[0])?;
            let s = b.sub(one, y2)?;
            b.mul(x[1], s)
        })())
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

pub(crate) fn register(r: &mut Registry) {
    crate::prim::register_unit(r, "tanh_pullback", || Arc::new(TanhPullback) as Prim);
}

/// At y = tanh(x), |y| <= 1, so 0 <= 1 - y² <= 1 and |out| <= |u|.
fn draw_tanh_pullback(d: &mut dyn Draw) -> Result<Drawn, DrawError> {
    let x = d.pick();
    let y = d.op(|b| b.tanh(x.var))?;
    let u = d.partner(x)?;
    let u = d.moderate(u, 8.0)?;
    let r = Interval::symmetric(u.range.mag());
    d.same(r, |b| b.tanh_pullback(y, u.var))
}
