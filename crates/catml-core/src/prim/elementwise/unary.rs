//! Elementwise maps: exp, log, tanh, sigmoid, relu, step, reciprocal, rsqrt. Pullbacks (001 §2):
//! exp -> u y; tanh -> u (1 - y^2); reciprocal -> -u y^2; rsqrt -> -1/2 u y^3.

use std::sync::Arc;

use num_traits::{One, Zero};

use crate::ir::{Builder, KernelError, Prim, Primitive, RuleError, RuleKind, TypeError, Var};
use crate::ir::{Draw, DrawError, Drawing, Drawn, Interval};
use crate::prim::dispatch::{
    check_domain_of, eval_float, eval_ring_rational, map_in_place, or_eval, unary_float,
    FloatKernel, FloatMapInPlace, RingKernel,
};
use crate::prim::Ops;
use crate::tensor::{kernels, Array, Element, Float, RArray, Tensor, TensorType};

/// `dx ⊙ f` when the tangent is present.
fn times(b: &mut Builder, dx: Option<Var>, f: Var) -> Result<Option<Var>, RuleError> {
    Ok(match dx {
        Some(d) => Some(b.mul(d, f)?),
        None => None,
    })
}

/// y ⊙ (1 - y)
fn logistic_slope(b: &mut Builder, y: Var) -> Result<Var, RuleError> {
    let one = b.full_like(1.0, y)?;
    let c = b.sub(one, y)?;
    Ok(b.mul(y, c)?)
}

/// -y ⊙ y
fn neg_square(b: &mut Builder, y: Var) -> Result<Var, RuleError> {
    let y2 = b.mul(y, y)?;
    Ok(b.neg(y2)?)
}

/// -1/2 y^3
fn rsqrt_slope(b: &mut Builder, y: Var) -> Result<Var, RuleError> {
    let y2 = b.mul(y, y)?;
    let y3 = b.mul(y2, y)?;
    Ok(b.scale(y3, -0.5)?)
}

macro_rules! float_map {
    ($ty:ident, |$v:ident| $body:expr) => {
        impl FloatKernel for $ty {
            fn float<T: Float>(&self, x: &[&Array<T>]) -> Result<Array<T>, KernelError> {
                Ok(kernels::map_copy(x[0], |$v: T| $body))
            }
        }
        impl FloatMapInPlace for $ty {
            fn apply_all<T: Float>(&self, buf: &mut [T]) {
                for v in buf {
                    let $v: T = *v;
                    *v = $body;
                }
            }
        }
    };
}

/// e^x.
#[derive(Debug, Clone, Copy)]
pub struct Exp;
float_map!(Exp, |v| v.exp());

impl Primitive for Exp {
    fn name(&self) -> &str {
        "exp"
    }
    fn drawing(&self) -> Option<Drawing> {
        Some(Drawing::new(2, draw_exp))
    }
    fn f32_budget(&self, _inputs: &[TensorType], _output: &TensorType) -> crate::ir::Budget {
        crate::ir::Budget::Relative(8.0)
    }
    fn fragment(&self) -> crate::ir::Fragment {
        crate::ir::Fragment::Core
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType, TypeError> {
        unary_float(inputs)
    }
    fn eval(&self, x: &[&Tensor]) -> Result<Tensor, KernelError> {
        eval_float(self, x)
    }
    fn eval_owned(&self, x: Vec<Tensor>) -> Result<Tensor, KernelError> {
        or_eval(map_in_place(self, x), |x| self.eval(x))
    }
    fn jvp(
        &self,
        b: &mut Builder,
        _x: &[Var],
        y: Var,
        dx: &[Option<Var>],
    ) -> Result<Option<Var>, RuleError> {
        times(b, dx[0], y)
    }
    fn vjp(
        &self,
        b: &mut Builder,
        _x: &[Var],
        y: Var,
        u: Var,
    ) -> Result<Vec<Option<Var>>, RuleError> {
        Ok(vec![Some(b.mul(u, y)?)])
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

/// ln x, for x > 0.
#[derive(Debug, Clone, Copy)]
pub struct Log;

impl FloatKernel for Log {
    fn float<T: Float>(&self, x: &[&Array<T>]) -> Result<Array<T>, KernelError> {
        check_domain_of(
            x[0].data(),
            |v| v <= T::zero() || v.is_nan(),
            "log",
            "a positive value",
        )?;
        Ok(kernels::map_copy(x[0], |v| v.ln()))
    }
}

impl Primitive for Log {
    fn name(&self) -> &str {
        "log"
    }
    fn drawing(&self) -> Option<Drawing> {
        Some(Drawing::new(1, draw_log))
    }
    fn f32_budget(&self, _inputs: &[TensorType], _output: &TensorType) -> crate::ir::Budget {
        crate::ir::Budget::Relative(8.0)
    }
    fn fragment(&self) -> crate::ir::Fragment {
        crate::ir::Fragment::LoweringExtra(
            "log_softmax and cross_entropy need a logarithm, which the core fragment lacks",
        )
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType, TypeError> {
        unary_float(inputs)
    }
    fn eval(&self, x: &[&Tensor]) -> Result<Tensor, KernelError> {
        eval_float(self, x)
    }
    fn jvp(
        &self,
        b: &mut Builder,
        x: &[Var],
        _y: Var,
        dx: &[Option<Var>],
    ) -> Result<Option<Var>, RuleError> {
        match dx[0] {
            Some(d) => {
                let r = b.reciprocal(x[0])?;
                Ok(Some(b.mul(d, r)?))
            }
            None => Ok(None),
        }
    }
    fn vjp(
        &self,
        b: &mut Builder,
        x: &[Var],
        _y: Var,
        u: Var,
    ) -> Result<Vec<Option<Var>>, RuleError> {
        let r = b.reciprocal(x[0])?;
        Ok(vec![Some(b.mul(u, r)?)])
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

/// tanh x.
#[derive(Debug, Clone, Copy)]
pub struct Tanh;

impl FloatKernel for Tanh {
    fn float<T: Float>(&self, x: &[&Array<T>]) -> Result<Array<T>, KernelError> {
        Ok(Array::new(x[0].shape().clone(), T::tanh_all(x[0].data())).expect("same length"))
    }
}

impl FloatMapInPlace for Tanh {
    fn apply_all<T: Float>(&self, buf: &mut [T]) {
        T::tanh_assign(buf)
    }
}

impl Primitive for Tanh {
    fn name(&self) -> &str {
        "tanh"
    }
    fn drawing(&self) -> Option<Drawing> {
        Some(Drawing::new(2, draw_tanh))
    }
    fn f32_budget(&self, _inputs: &[TensorType], _output: &TensorType) -> crate::ir::Budget {
        crate::ir::Budget::Relative(8.0)
    }
    fn fragment(&self) -> crate::ir::Fragment {
        crate::ir::Fragment::Core
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType, TypeError> {
        unary_float(inputs)
    }
    fn eval(&self, x: &[&Tensor]) -> Result<Tensor, KernelError> {
        eval_float(self, x)
    }
    fn eval_owned(&self, x: Vec<Tensor>) -> Result<Tensor, KernelError> {
        or_eval(map_in_place(self, x), |x| self.eval(x))
    }
    fn jvp(
        &self,
        b: &mut Builder,
        _x: &[Var],
        y: Var,
        dx: &[Option<Var>],
    ) -> Result<Option<Var>, RuleError> {
        // ẏ = ẋ (1 - y²), one fused node.
        dx[0]
            .map(|d| b.tanh_pullback(y, d))
            .transpose()
            .map_err(Into::into)
    }
    fn vjp(
        &self,
        b: &mut Builder,
        _x: &[Var],
        y: Var,
        u: Var,
    ) -> Result<Vec<Option<Var>>, RuleError> {
        // x̄ = ȳ (1 - y²).
        Ok(vec![Some(b.tanh_pullback(y, u)?)])
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

/// 1 / (1 + e^-x), computed without overflow on either side.
#[derive(Debug, Clone, Copy)]
pub struct Sigmoid;
float_map!(Sigmoid, |v| {
    if v >= T::zero() {
        T::one() / (T::one() + (-v).exp())
    } else {
        let e = v.exp();
        e / (T::one() + e)
    }
});

impl Primitive for Sigmoid {
    fn name(&self) -> &str {
        "sigmoid"
    }
    fn drawing(&self) -> Option<Drawing> {
        Some(Drawing::new(1, draw_sigmoid))
    }
    fn f32_budget(&self, _inputs: &[TensorType], _output: &TensorType) -> crate::ir::Budget {
        crate::ir::Budget::Relative(8.0)
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType, TypeError> {
        unary_float(inputs)
    }
    fn eval(&self, x: &[&Tensor]) -> Result<Tensor, KernelError> {
        eval_float(self, x)
    }
    fn eval_owned(&self, x: Vec<Tensor>) -> Result<Tensor, KernelError> {
        or_eval(map_in_place(self, x), |x| self.eval(x))
    }
    fn jvp(
        &self,
        b: &mut Builder,
        _x: &[Var],
        y: Var,
        dx: &[Option<Var>],
    ) -> Result<Option<Var>, RuleError> {
        match dx[0] {
            Some(d) => {
                let s = logistic_slope(b, y)?;
                Ok(Some(b.mul(d, s)?))
            }
            None => Ok(None),
        }
    }
    fn vjp(
        &self,
        b: &mut Builder,
        _x: &[Var],
        y: Var,
        u: Var,
    ) -> Result<Vec<Option<Var>>, RuleError> {
        let s = logistic_slope(b, y)?;
        Ok(vec![Some(b.mul(u, s)?)])
    }
    fn lower(&self, b: &mut Builder, x: &[Var]) -> Option<Result<Var, TypeError>> {
        // sigmoid(x) = (1 + tanh(x / 2)) / 2, an identity that stays finite for every x.
        Some((|| {
            let half = b.scale(x[0], 0.5)?;
            let t = b.tanh(half)?;
            let t = b.scale(t, 0.5)?;
            let c = b.full_like(0.5, t)?;
            b.add(t, c)
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

/// max(x, 0). Derivative: `step(x)`, one on positive inputs and zero on nonpositive ones
/// (the documents' convention at 0).
#[derive(Debug, Clone, Copy)]
pub struct Relu;

impl RingKernel for Relu {
    fn ring<T: Element>(&self, x: &[&Array<T>]) -> Result<Array<T>, KernelError> {
        Ok(x[0].map(|v| if v.gt_zero() { v.clone() } else { T::zero() }))
    }
}

impl FloatKernel for Relu {
    fn float<T: Float>(&self, x: &[&Array<T>]) -> Result<Array<T>, KernelError> {
        Ok(kernels::map_copy(x[0], |v| {
            if v > T::zero() {
                v
            } else {
                T::zero()
            }
        }))
    }
}

impl Primitive for Relu {
    fn name(&self) -> &str {
        "relu"
    }
    fn drawing(&self) -> Option<Drawing> {
        Some(Drawing::new(1, draw_relu))
    }
    fn f32_budget(&self, _inputs: &[TensorType], _output: &TensorType) -> crate::ir::Budget {
        crate::ir::Budget::Exact
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType, TypeError> {
        unary_float(inputs)
    }
    fn eval(&self, x: &[&Tensor]) -> Result<Tensor, KernelError> {
        eval_float(self, x)
    }
    fn has_rational_eval(&self) -> bool {
        true
    }
    fn eval_rational(&self, x: &[&RArray]) -> Option<Result<RArray, KernelError>> {
        eval_ring_rational(self, x)
    }
    fn rule(&self) -> RuleKind {
        RuleKind::Convention("relu'(0) = 0")
    }
    fn convention_points(&self, x: &[&Tensor]) -> usize {
        count_zeros(x[0])
    }
    fn jvp(
        &self,
        b: &mut Builder,
        x: &[Var],
        _y: Var,
        dx: &[Option<Var>],
    ) -> Result<Option<Var>, RuleError> {
        match dx[0] {
            Some(d) => {
                let m = b.step(x[0])?;
                Ok(Some(b.mul(d, m)?))
            }
            None => Ok(None),
        }
    }
    fn vjp(
        &self,
        b: &mut Builder,
        x: &[Var],
        _y: Var,
        u: Var,
    ) -> Result<Vec<Option<Var>>, RuleError> {
        let m = b.step(x[0])?;
        Ok(vec![Some(b.mul(u, m)?)])
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

fn count_zeros(t: &Tensor) -> usize {
    t.to_f64_vec().iter().filter(|&&v| v == 0.0).count()
}

/// The Heaviside step with H(0) = 0: ReLU's derivative. Its own derivative is zero (exact away
/// from 0; at 0 the convention decides, and evaluations there are reported).
#[derive(Debug, Clone, Copy)]
pub struct Step;

impl RingKernel for Step {
    fn ring<T: Element>(&self, x: &[&Array<T>]) -> Result<Array<T>, KernelError> {
        Ok(x[0].map(|v| if v.gt_zero() { T::one() } else { T::zero() }))
    }
}

impl FloatKernel for Step {
    fn float<T: Float>(&self, x: &[&Array<T>]) -> Result<Array<T>, KernelError> {
        Ok(kernels::map_copy(x[0], |v| {
            if v > T::zero() {
                T::one()
            } else {
                T::zero()
            }
        }))
    }
}

impl Primitive for Step {
    fn name(&self) -> &str {
        "step"
    }
    fn drawing(&self) -> Option<Drawing> {
        Some(Drawing::new(1, draw_step))
    }
    fn f32_budget(&self, _inputs: &[TensorType], _output: &TensorType) -> crate::ir::Budget {
        crate::ir::Budget::Exact
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType, TypeError> {
        unary_float(inputs)
    }
    fn eval(&self, x: &[&Tensor]) -> Result<Tensor, KernelError> {
        eval_float(self, x)
    }
    fn has_rational_eval(&self) -> bool {
        true
    }
    fn eval_rational(&self, x: &[&RArray]) -> Option<Result<RArray, KernelError>> {
        eval_ring_rational(self, x)
    }
    fn rule(&self) -> RuleKind {
        RuleKind::Convention("H(0) = 0, so relu'(0) = 0")
    }
    fn convention_points(&self, x: &[&Tensor]) -> usize {
        count_zeros(x[0])
    }
    fn jvp(
        &self,
        _b: &mut Builder,
        _x: &[Var],
        _y: Var,
        _dx: &[Option<Var>],
    ) -> Result<Option<Var>, RuleError> {
        Ok(None)
    }
    fn vjp(
        &self,
        _b: &mut Builder,
        _x: &[Var],
        _y: Var,
        _u: Var,
    ) -> Result<Vec<Option<Var>>, RuleError> {
        Ok(vec![None])
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

/// 1 / x, for x != 0.
#[derive(Debug, Clone, Copy)]
pub struct Reciprocal;

impl FloatKernel for Reciprocal {
    fn float<T: Float>(&self, x: &[&Array<T>]) -> Result<Array<T>, KernelError> {
        check_domain_of(
            x[0].data(),
            |v| v == T::zero(),
            "reciprocal",
            "a nonzero value",
        )?;
        Ok(kernels::map_copy(x[0], |v| T::one() / v))
    }
}

impl Primitive for Reciprocal {
    fn name(&self) -> &str {
        "reciprocal"
    }
    fn drawing(&self) -> Option<Drawing> {
        Some(Drawing::new(1, draw_reciprocal))
    }
    fn f32_budget(&self, _inputs: &[TensorType], _output: &TensorType) -> crate::ir::Budget {
        crate::ir::Budget::Relative(1.0)
    }
    fn fragment(&self) -> crate::ir::Fragment {
        crate::ir::Fragment::Core
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType, TypeError> {
        unary_float(inputs)
    }
    fn eval(&self, x: &[&Tensor]) -> Result<Tensor, KernelError> {
        eval_float(self, x)
    }
    fn has_rational_eval(&self) -> bool {
        true
    }
    fn eval_rational(&self, x: &[&RArray]) -> Option<Result<RArray, KernelError>> {
        let a = x[0];
        Some(match a.data().iter().position(|v| v.is_zero()) {
            Some(i) => Err(KernelError::Domain(format!(
                "reciprocal of 0 at element {i}, expected a nonzero value"
            ))),
            None => Ok(a.map(|v| crate::tensor::Rational::one() / v)),
        })
    }
    fn jvp(
        &self,
        b: &mut Builder,
        _x: &[Var],
        y: Var,
        dx: &[Option<Var>],
    ) -> Result<Option<Var>, RuleError> {
        match dx[0] {
            Some(d) => {
                let s = neg_square(b, y)?;
                Ok(Some(b.mul(d, s)?))
            }
            None => Ok(None),
        }
    }
    fn vjp(
        &self,
        b: &mut Builder,
        _x: &[Var],
        y: Var,
        u: Var,
    ) -> Result<Vec<Option<Var>>, RuleError> {
        let s = neg_square(b, y)?;
        Ok(vec![Some(b.mul(u, s)?)])
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

/// x^(-1/2), for x > 0.
#[derive(Debug, Clone, Copy)]
pub struct Rsqrt;

impl FloatKernel for Rsqrt {
    fn float<T: Float>(&self, x: &[&Array<T>]) -> Result<Array<T>, KernelError> {
        check_domain_of(
            x[0].data(),
            |v| v <= T::zero() || v.is_nan(),
            "rsqrt",
            "a positive value",
        )?;
        Ok(kernels::map_copy(x[0], |v| T::one() / v.sqrt()))
    }
}

impl Primitive for Rsqrt {
    fn name(&self) -> &str {
        "rsqrt"
    }
    fn drawing(&self) -> Option<Drawing> {
        Some(Drawing::new(1, draw_rsqrt))
    }
    fn f32_budget(&self, _inputs: &[TensorType], _output: &TensorType) -> crate::ir::Budget {
        crate::ir::Budget::Relative(2.0)
    }
    fn fragment(&self) -> crate::ir::Fragment {
        crate::ir::Fragment::Core
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType, TypeError> {
        unary_float(inputs)
    }
    fn eval(&self, x: &[&Tensor]) -> Result<Tensor, KernelError> {
        eval_float(self, x)
    }
    fn jvp(
        &self,
        b: &mut Builder,
        _x: &[Var],
        y: Var,
        dx: &[Option<Var>],
    ) -> Result<Option<Var>, RuleError> {
        match dx[0] {
            Some(d) => {
                let s = rsqrt_slope(b, y)?;
                Ok(Some(b.mul(d, s)?))
            }
            None => Ok(None),
        }
    }
    fn vjp(
        &self,
        b: &mut Builder,
        _x: &[Var],
        y: Var,
        u: Var,
    ) -> Result<Vec<Option<Var>>, RuleError> {
        let s = rsqrt_slope(b, y)?;
        Ok(vec![Some(b.mul(u, s)?)])
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
    crate::prim::register_unit(r, "exp", || Arc::new(Exp) as Prim);
    crate::prim::register_unit(r, "log", || Arc::new(Log) as Prim);
    crate::prim::register_unit(r, "tanh", || Arc::new(Tanh) as Prim);
    crate::prim::register_unit(r, "sigmoid", || Arc::new(Sigmoid) as Prim);
    crate::prim::register_unit(r, "relu", || Arc::new(Relu) as Prim);
    crate::prim::register_unit(r, "step", || Arc::new(Step) as Prim);
    crate::prim::register_unit(r, "reciprocal", || Arc::new(Reciprocal) as Prim);
    crate::prim::register_unit(r, "rsqrt", || Arc::new(Rsqrt) as Prim);
}

/// exp reads values of magnitude at most 2.
fn draw_exp(d: &mut dyn Draw) -> Result<Drawn, DrawError> {
    let x = d.pick();
    let x = d.moderate(x, 2.0)?;
    d.same(x.range.increasing(f64::exp), |b| b.exp(x.var))
}

fn draw_log(d: &mut dyn Draw) -> Result<Drawn, DrawError> {
    let x = d.pick();
    let x = d.positive(x)?;
    d.same(x.range.increasing(f64::ln), |b| b.log(x.var))
}

fn draw_tanh(d: &mut dyn Draw) -> Result<Drawn, DrawError> {
    let x = d.pick();
    d.same(x.range.increasing(f64::tanh), |b| b.tanh(x.var))
}

fn draw_sigmoid(d: &mut dyn Draw) -> Result<Drawn, DrawError> {
    let x = d.pick();
    let s = |v: f64| 1.0 / (1.0 + (-v).exp());
    d.same(x.range.increasing(s), |b| b.sigmoid(x.var))
}

fn draw_relu(d: &mut dyn Draw) -> Result<Drawn, DrawError> {
    let x = d.pick();
    d.same(x.range.increasing(|v| v.max(0.0)), |b| b.relu(x.var))
}

fn draw_step(d: &mut dyn Draw) -> Result<Drawn, DrawError> {
    let x = d.pick();
    let h = |v: f64| if v > 0.0 { 1.0 } else { 0.0 };
    d.same(x.range.increasing(h), |b| b.step(x.var))
}

/// The operand is made positive with margin, and sometimes negated.
fn draw_reciprocal(d: &mut dyn Draw) -> Result<Drawn, DrawError> {
    let x = d.pick();
    let mut p = d.positive(x)?;
    if d.chance(0.3) {
        p = d.same(p.range.negated(), |b| b.neg(p.var))?;
    }
    let r = Interval::new(1.0 / p.range.hi, 1.0 / p.range.lo);
    d.same(r, |b| b.reciprocal(p.var))
}

fn draw_rsqrt(d: &mut dyn Draw) -> Result<Drawn, DrawError> {
    let x = d.pick();
    let p = d.positive(x)?;
    let r = Interval::new(1.0 / p.range.hi.sqrt(), 1.0 / p.range.lo.sqrt());
    d.same(r, |b| b.rsqrt(p.var))
}
