//! softmax {"axis"} and log_softmax {"axis"} along one axis.
//!
//! y_j = e^{x_j - m} / sum_k e^{x_k - m} and log y_j = x_j - m - log sum_k e^{x_k - m} for any
//! shift m: both are shift-invariant, so taking m = max_k x_k is exact and keeps every exponent
//! <= 0 (no overflow; the largest term is 1, so the sum is >= 1). The lowerings take the shift
//! as stop_gradient(reduce_max(x)): the derivative of the result with respect to m is zero, so
//! stopping it changes no derivative.
//!
//! Softmax's Jacobian diag(y) - y y^T is symmetric: the tangent and the cotangent rules have the
//! same form, y (v - <y, v>). For log_softmax, J = I - 1 y^T: dy = dx - <y, dx> and
//! x̄ = u - y sum(u).

use std::sync::Arc;

use super::rows::{softmax_rows, softmax_strided};
use crate::ir::budget;
use crate::ir::{
    AttrReader, Attrs, Builder, KernelError, Prim, Primitive, Registry, RuleError, TypeError, Var,
};
use crate::ir::{Draw, DrawError, Drawing, Drawn, Interval};
use crate::prim::dispatch::{arity, eval_float, float_operand, FloatKernel};
use crate::prim::Ops;
use crate::tensor::kernels::split_at_axis;
use crate::tensor::{Array, Float, Tensor, TensorType};

/// One float operand of rank >= 1 with `axis` in range.
fn check_axis(inputs: &[TensorType], axis: usize) -> Result<TensorType, TypeError> {
    arity(inputs, 1)?;
    float_operand(inputs, 0)?;
    if axis >= inputs[0].rank() {
        return Err(TypeError::attr(
            "axis",
            format!("axis {axis} is out of range for {}", inputs[0]),
        ));
    }
    Ok(inputs[0].clone())
}

fn run<T: Float>(
    x: &Array<T>,
    axis: usize,
    log: bool,
) -> Result<Array<T>, crate::tensor::alloc::AllocError> {
    let (_, len, inner) = split_at_axis(x.dims(), axis);
    let mut out = crate::tensor::alloc::filled(x.len(), T::zero())?;
    if inner == 1 {
        softmax_rows(x.data(), &mut out, len, log);
    } else {
        softmax_strided(x.data(), &mut out, len, inner, log);
    }
    Ok(Array::with_elems(x.shape().clone(), out).expect("same shape"))
}

/// Broadcasts a value reduced over `axis` back to the type `ty`.
pub(crate) fn expand(
    b: &mut Builder,
    v: Var,
    ty: &TensorType,
    axis: usize,
) -> Result<Var, TypeError> {
    let kept: Vec<usize> = (0..ty.rank()).filter(|&i| i != axis).collect();
    b.broadcast(v, ty.shape.clone(), kept)
}

/// y (v - sum_axis(y v)): the tangent and the cotangent map of softmax at output y.
pub(crate) fn softmax_pullback(
    b: &mut Builder,
    y: Var,
    v: Var,
    axis: usize,
) -> Result<Var, TypeError> {
    b.softmax_pullback(y, v, axis, 1.0)
}

/// x - stop_gradient(max_axis x): the exact stabilising shift of the lowerings.
fn shifted(b: &mut Builder, x: Var, axis: usize) -> Result<Var, TypeError> {
    let ty = b.ty(x).clone();
    let m = b.reduce_max(x, Some(vec![axis]))?;
    let m = b.stop_gradient(m)?;
    let mb = expand(b, m, &ty, axis)?;
    b.sub(x, mb)
}

/// softmax along `axis`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Softmax {
    pub axis: usize,
}

impl FloatKernel for Softmax {
    fn float<T: Float>(&self, x: &[&Array<T>]) -> Result<Array<T>, KernelError> {
        Ok(run(x[0], self.axis, false)?)
    }
}

impl Primitive for Softmax {
    fn name(&self) -> &str {
        "softmax"
    }
    fn drawing(&self) -> Option<Drawing> {
        Some(Drawing::new(2, draw_softmax))
    }
    fn f32_budget(&self, inputs: &[TensorType], _output: &TensorType) -> crate::ir::Budget {
        let n = inputs[0].dims()[self.axis] as f64;
        crate::ir::Budget::formula("gamma_c |y|, c = 2D + n + 17", move |s| {
            let c = budget::softmax_rel(budget::spread(&s.ops[0]), n);
            s.y.iter().map(|y| c * y.abs()).collect()
        })
    }
    fn attrs(&self) -> Attrs {
        crate::ir::attrs_of([("axis", self.axis.into())])
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType, TypeError> {
        check_axis(inputs, self.axis)
    }
    fn eval(&self, x: &[&Tensor]) -> Result<Tensor, KernelError> {
        eval_float(self, x)
    }
    fn flops(&self, inputs: &[TensorType], _output: &TensorType) -> u64 {
        // max, subtract, exp, add, scale per element
        5 * inputs[0].numel() as u64
    }
    fn jvp(
        &self,
        b: &mut Builder,
        _x: &[Var],
        y: Var,
        dx: &[Option<Var>],
    ) -> Result<Option<Var>, RuleError> {
        let Some(d) = dx[0] else { return Ok(None) };
        Ok(Some(softmax_pullback(b, y, d, self.axis)?))
    }
    fn vjp(
        &self,
        b: &mut Builder,
        _x: &[Var],
        y: Var,
        u: Var,
    ) -> Result<Vec<Option<Var>>, RuleError> {
        Ok(vec![Some(softmax_pullback(b, y, u, self.axis)?)])
    }
    fn lower(&self, b: &mut Builder, x: &[Var]) -> Option<Result<Var, TypeError>> {
        Some((|| {
            let ty = b.ty(x[0]).clone();
            let z = shifted(b, x[0], self.axis)?;
            let e = b.exp(z)?;
            let s = b.sum(e, Some(vec![self.axis]))?;
            let r = b.reciprocal(s)?;
            let rb = expand(b, r, &ty, self.axis)?;
            b.mul(e, rb)
        })())
    }
    /// Batching: the same normalisation along the shifted axis.
    fn batch(
        &self,
        b: &mut crate::ir::Builder,
        x: &[crate::ir::Var],
        at: &crate::ir::BatchCtx,
    ) -> Result<crate::ir::Var, crate::ir::RuleError> {
        crate::prim::batching::with_prim(
            b,
            x,
            at,
            Arc::new(Softmax {
                axis: self.axis + 1,
            }),
        )
    }
}

/// log softmax along `axis`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogSoftmax {
    pub axis: usize,
}

impl FloatKernel for LogSoftmax {
    fn float<T: Float>(&self, x: &[&Array<T>]) -> Result<Array<T>, KernelError> {
        Ok(run(x[0], self.axis, true)?)
    }
}

impl Primitive for LogSoftmax {
    fn name(&self) -> &str {
        "log_softmax"
    }
    fn drawing(&self) -> Option<Drawing> {
        Some(Drawing::new(1, draw_log_softmax))
    }
    fn f32_budget(&self, inputs: &[TensorType], _output: &TensorType) -> crate::ir::Budget {
        // y = t - ln(sum e^t): t within Au, the sum within (A + n + 7)u, ln adds 8u |ln sum|
        // with sum in [1, n], the subtraction u|y|.
        let n = inputs[0].dims()[self.axis] as f64;
        crate::ir::Budget::formula("gamma_c (1 + |y|), c = 2D + n + 7 + 8 ln n", move |s| {
            let c = budget::gamma(2.0 * budget::spread(&s.ops[0]) + n + 7.0 + 8.0 * n.ln());
            s.y.iter().map(|y| c * (1.0 + y.abs())).collect()
        })
    }
    fn attrs(&self) -> Attrs {
        crate::ir::attrs_of([("axis", self.axis.into())])
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType, TypeError> {
        check_axis(inputs, self.axis)
    }
    fn eval(&self, x: &[&Tensor]) -> Result<Tensor, KernelError> {
        eval_float(self, x)
    }
    fn flops(&self, inputs: &[TensorType], _output: &TensorType) -> u64 {
        5 * inputs[0].numel() as u64
    }
    fn jvp(
        &self,
        b: &mut Builder,
        _x: &[Var],
        y: Var,
        dx: &[Option<Var>],
    ) -> Result<Option<Var>, RuleError> {
        // dy = dx - sum_axis(p dx), p = e^y
        let Some(d) = dx[0] else { return Ok(None) };
        let ty = b.ty(y).clone();
        let p = b.exp(y)?;
        let pd = b.mul(p, d)?;
        let s = b.sum(pd, Some(vec![self.axis]))?;
        let sb = expand(b, s, &ty, self.axis)?;
        Ok(Some(b.sub(d, sb)?))
    }
    fn vjp(
        &self,
        b: &mut Builder,
        _x: &[Var],
        y: Var,
        u: Var,
    ) -> Result<Vec<Option<Var>>, RuleError> {
        // x̄ = u - p sum_axis(u), p = e^y
        let ty = b.ty(y).clone();
        let p = b.exp(y)?;
        let s = b.sum(u, Some(vec![self.axis]))?;
        let sb = expand(b, s, &ty, self.axis)?;
        let ps = b.mul(p, sb)?;
        Ok(vec![Some(b.sub(u, ps)?)])
    }
    fn lower(&self, b: &mut Builder, x: &[Var]) -> Option<Result<Var, TypeError>> {
        Some((|| {
            let ty = b.ty(x[0]).clone();
            let z = shifted(b, x[0], self.axis)?;
            let e = b.exp(z)?;
            let s = b.sum(e, Some(vec![self.axis]))?;
            let ls = b.log(s)?;
            let lb = expand(b, ls, &ty, self.axis)?;
            b.sub(z, lb)
        })())
    }
    /// Batching: the same normalisation along the shifted axis.
    fn batch(
        &self,
        b: &mut crate::ir::Builder,
        x: &[crate::ir::Var],
        at: &crate::ir::BatchCtx,
    ) -> Result<crate::ir::Var, crate::ir::RuleError> {
        crate::prim::batching::with_prim(
            b,
            x,
            at,
            Arc::new(LogSoftmax {
                axis: self.axis + 1,
            }),
        )
    }
}

pub(crate) fn register(r: &mut Registry) {
    r.register("softmax", |attrs: &Attrs| {
        let mut a = AttrReader::new(attrs);
        let axis = a.usize("axis")?;
        a.finish()?;
        Ok(Arc::new(Softmax { axis }) as Prim)
    });
    r.register("log_softmax", |attrs: &Attrs| {
        let mut a = AttrReader::new(attrs);
        let axis = a.usize("axis")?;
        a.finish()?;
        Ok(Arc::new(LogSoftmax { axis }) as Prim)
    });
    r.set_example("softmax", crate::ir::attrs_json(r#"{"axis": 0}"#));
    r.set_example("log_softmax", crate::ir::attrs_json(r#"{"axis": 0}"#));
}

/// [lo - hi - ln n, 0]: log_softmax over n entries of a slice within `r`.
pub(crate) fn log_softmax_range(r: Interval, n: usize) -> Interval {
    Interval::new(r.lo - r.hi - (n as f64).ln(), 0.0)
}

fn draw_softmax(d: &mut dyn Draw) -> Result<Drawn, DrawError> {
    let (x, axis) = d.along_axis(8.0)?;
    d.same(Interval::new(0.0, 1.0), |b| b.softmax(x.var, axis))
}

fn draw_log_softmax(d: &mut dyn Draw) -> Result<Drawn, DrawError> {
    let (x, axis) = d.along_axis(8.0)?;
    let n = d.ty(x.var).dims()[axis];
    d.same(log_softmax_range(x.range, n), |b| {
        b.log_softmax(x.var, axis)
    })
}
