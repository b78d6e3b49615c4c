//! max_pool2d {"kernel", "stride", "padding"} over NCHW: y = the maximum of x over each window.
//! Padding never wins (it is not a value), and each side's padding must be smaller than the
//! kernel so that every window holds input.
//!
//! Derivative, a labelled convention (docs/derivatives.md): where a window's maximum is attained
//! once, the derivative is exact: the tangent and the cotangent follow that element. Where it is
//! attained more than once (a tie), the whole derivative goes to the FIRST maximal element in
//! row-major window order (smallest row, then smallest column); the others get zero. Evaluations
//! report how many windows tied (`convention_points`).
//!
//! The rules emit two helper primitives, linear in their second operand and constant in the
//! first (whose derivative is zero by the same convention):
//! - `max_pool2d_select` (x, t): t read at each window's argmax of x (the JVP: select(x, ẋ));
//! - `max_pool2d_scatter` (x, u): u added at those argmaxes (the VJP).
//!
//! They are each other's transposes in the second operand.

use std::sync::Arc;

use super::pool_kernel::{argmax, put, take};
use super::pool_spec::{register_pool, Pool2dAttrs};
use crate::ir::{
    Attrs, Builder, KernelError, Primitive, Registry, RuleError, RuleKind, TypeError, Var,
};
use crate::ir::{Draw, DrawError, Drawing, Drawn};
use crate::ir::{Linearity, Transpose};
use crate::prim::dispatch::{arity, eval_ring, eval_ring_rational, RingKernel};
use crate::prim::window::draw::{nchw, pool_attrs, pooled_dims, sum_of};
use crate::prim::Ops;
use crate::tensor::{Array, Element, RArray, Tensor, TensorType};

const TIE_RULE: &str =
    "max ties: the derivative goes to the first maximal element in row-major window order";

/// Windows of `x` (a float tensor) whose maximum is attained more than once.
fn tied_windows(attrs: &Pool2dAttrs, x: &Tensor) -> usize {
    let g = attrs.geom(x.dims());
    match x {
        Tensor::F32(a) => argmax(a.data(), &g).1,
        Tensor::F64(a) => argmax(a.data(), &g).1,
        Tensor::I64(_) | Tensor::Bool(_) | Tensor::Stored(_) => 0,
    }
}

/// The maximum over each pooling window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MaxPool2d {
    pub attrs: Pool2dAttrs,
}

impl RingKernel for MaxPool2d {
    fn ring<T: Element>(&self, x: &[&Array<T>]) -> Result<Array<T>, KernelError> {
        let g = self.attrs.geom(x[0].dims());
        let (at, _) = argmax(x[0].data(), &g);
        let y = take(x[0].data(), &at);
        Ok(Array::new([g.n, g.c, g.h.out(), g.w.out()], y).expect("kernel output size"))
    }
}

impl Primitive for MaxPool2d {
    fn name(&self) -> &str {
        "max_pool2d"
    }
    fn drawing(&self) -> Option<Drawing> {
        Some(Drawing::new(1, draw_max_pool))
    }
    fn f32_budget(&self, _inputs: &[TensorType], _output: &TensorType) -> crate::ir::Budget {
        crate::ir::Budget::Exact
    }
    fn attrs(&self) -> Attrs {
        self.attrs.to_attrs()
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType, TypeError> {
        arity(inputs, 1)?;
        let g = self.attrs.check_max(&inputs[0], 0)?;
        Ok(Pool2dAttrs::out_type(&inputs[0], &g))
    }
    fn eval(&self, x: &[&Tensor]) -> Result<Tensor, KernelError> {
        eval_ring(self, x)
    }
    fn has_rational_eval(&self) -> bool {
        true
    }
    fn eval_rational(&self, x: &[&RArray]) -> Option<Result<RArray, KernelError>> {
        eval_ring_rational(self, x)
    }
    fn flops(&self, _inputs: &[TensorType], output: &TensorType) -> u64 {
        // One comparison per window element after the first.
        output.numel() as u64 * (self.attrs.window() as u64 - 1)
    }
    fn rule(&self) -> RuleKind {
        RuleKind::Convention(TIE_RULE)
    }
    fn convention_points(&self, x: &[&Tensor]) -> usize {
        tied_windows(&self.attrs, x[0])
    }
    fn jvp(
        &self,
        b: &mut Builder,
        x: &[Var],
        _y: Var,
        dx: &[Option<Var>],
    ) -> Result<Option<Var>, RuleError> {
        let select = MaxPool2dSelect { attrs: self.attrs };
        dx[0]
            .map(|d| b.apply(Arc::new(select), &[x[0], d]))
            .transpose()
            .map_err(Into::into)
    }
    fn vjp(
        &self,
        b: &mut Builder,
        x: &[Var],
        _y: Var,
        u: Var,
    ) -> Result<Vec<Option<Var>>, RuleError> {
        let scatter = MaxPool2dScatter { attrs: self.attrs };
        Ok(vec![Some(b.apply(Arc::new(scatter), &[x[0], u])?)])
    }
    fn lower(&self, b: &mut Builder, x: &[Var]) -> Option<Result<Var, TypeError>> {
        Some(super::max_pool_lower::max_pool(b, &self.attrs, x[0]))
    }
    /// Batching: samples are independent rows (N leads), so the batch folds into them; a batched weight goes per example.
    fn batch(
        &self,
        b: &mut crate::ir::Builder,
        x: &[crate::ir::Var],
        at: &crate::ir::BatchCtx,
    ) -> Result<crate::ir::Var, crate::ir::RuleError> {
        crate::prim::batching::fold_rows(b, x, at, &[0])
    }
}

/// t read at each window's argmax of x (first maximal element on ties).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MaxPool2dSelect {
    pub attrs: Pool2dAttrs,
}

impl RingKernel for MaxPool2dSelect {
    fn ring<T: Element>(&self, x: &[&Array<T>]) -> Result<Array<T>, KernelError> {
        let g = self.attrs.geom(x[0].dims());
        let (at, _) = argmax(x[0].data(), &g);
        let y = take(x[1].data(), &at);
        Ok(Array::new([g.n, g.c, g.h.out(), g.w.out()], y).expect("kernel output size"))
    }
}

impl Primitive for MaxPool2dSelect {
    fn name(&self) -> &str {
        "max_pool2d_select"
    }
    fn drawing(&self) -> Option<Drawing> {
        Some(Drawing::new(1, draw_select))
    }
    fn f32_budget(&self, _inputs: &[TensorType], _output: &TensorType) -> crate::ir::Budget {
        crate::ir::Budget::Exact
    }
    fn attrs(&self) -> Attrs {
        self.attrs.to_attrs()
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType, TypeError> {
        arity(inputs, 2)?;
        let g = self.attrs.check_max(&inputs[0], 0)?;
        if inputs[1] != inputs[0] {
            return Err(TypeError::Operand {
                index: 1,
                expected: format!("the type of operand 0, {}", inputs[0]),
                found: inputs[1].clone(),
            });
        }
        Ok(Pool2dAttrs::out_type(&inputs[0], &g))
    }
    fn eval(&self, x: &[&Tensor]) -> Result<Tensor, KernelError> {
        eval_ring(self, x)
    }
    fn has_rational_eval(&self) -> bool {
        true
    }
    fn eval_rational(&self, x: &[&RArray]) -> Option<Result<RArray, KernelError>> {
        eval_ring_rational(self, x)
    }
    fn flops(&self, _inputs: &[TensorType], output: &TensorType) -> u64 {
        output.numel() as u64 * (self.attrs.window() as u64 - 1)
    }
    fn rule(&self) -> RuleKind {
        RuleKind::Convention(TIE_RULE)
    }
    fn convention_points(&self, x: &[&Tensor]) -> usize {
        tied_windows(&self.attrs, x[0])
    }
    fn linearity(&self) -> Option<Linearity<'_>> {
        Some(Linearity::of(self, 1))
    }
    fn lower(&self, b: &mut Builder, x: &[Var]) -> Option<Result<Var, TypeError>> {
        Some(super::max_pool_lower::select(b, &self.attrs, x[0], x[1]))
    }
    /// Batching: samples are independent rows (N leads), so the batch folds into them; a batched weight goes per example.
    fn batch(
        &self,
        b: &mut crate::ir::Builder,
        x: &[crate::ir::Var],
        at: &crate::ir::BatchCtx,
    ) -> Result<crate::ir::Var, crate::ir::RuleError> {
        crate::prim::batching::fold_rows(b, x, at, &[0, 1])
    }
}

impl Transpose for MaxPool2dSelect {
    fn transpose(&self, b: &mut Builder, x: &[Var], u: Var) -> Result<Var, RuleError> {
        let scatter = MaxPool2dScatter { attrs: self.attrs };
        Ok(b.apply(Arc::new(scatter), &[x[0], u])?)
    }
}

/// u added at each window's argmax of x, into a tensor of x's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MaxPool2dScatter {
    pub attrs: Pool2dAttrs,
}

impl RingKernel for MaxPool2dScatter {
    fn ring<T: Element>(&self, x: &[&Array<T>]) -> Result<Array<T>, KernelError> {
        let g = self.attrs.geom(x[0].dims());
        let (at, _) = argmax(x[0].data(), &g);
        let dx = put(x[1].data(), &at, x[0].len())?;
        Ok(Array::with_elems(x[0].shape().clone(), dx).expect("kernel output size"))
    }
}

impl Primitive for MaxPool2dScatter {
    fn name(&self) -> &str {
        "max_pool2d_scatter"
    }
    fn drawing(&self) -> Option<Drawing> {
        Some(Drawing::new(1, draw_scatter))
    }
    fn f32_budget(&self, _inputs: &[TensorType], _output: &TensorType) -> crate::ir::Budget {
        crate::ir::Budget::Sum {
            terms: self.attrs.window(),
            signed: &[0],
        }
    }
    fn attrs(&self) -> Attrs {
        self.attrs.to_attrs()
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType, TypeError> {
        arity(inputs, 2)?;
        let g = self.attrs.check_max(&inputs[0], 0)?;
        let out = Pool2dAttrs::out_type(&inputs[0], &g);
        if inputs[1] != out {
            return Err(TypeError::Operand {
                index: 1,
                expected: format!("the pooled type {out} of operand 0"),
                found: inputs[1].clone(),
            });
        }
        Ok(inputs[0].clone())
    }
    fn eval(&self, x: &[&Tensor]) -> Result<Tensor, KernelError> {
        eval_ring(self, x)
    }
    fn has_rational_eval(&self) -> bool {
        true
    }
    fn eval_rational(&self, x: &[&RArray]) -> Option<Result<RArray, KernelError>> {
        eval_ring_rational(self, x)
    }
    fn flops(&self, inputs: &[TensorType], _output: &TensorType) -> u64 {
        inputs[1].numel() as u64 * self.attrs.window() as u64
    }
    fn rule(&self) -> RuleKind {
        RuleKind::Convention(TIE_RULE)
    }
    fn convention_points(&self, x: &[&Tensor]) -> usize {
        tied_windows(&self.attrs, x[0])
    }
    fn linearity(&self) -> Option<Linearity<'_>> {
        Some(Linearity::of(self, 1))
    }
    fn lower(&self, b: &mut Builder, x: &[Var]) -> Option<Result<Var, TypeError>> {
        Some(super::max_pool_lower::scatter(b, &self.attrs, x[0], x[1]))
    }
    /// Batching: samples are independent rows (N leads), so the batch folds into them; a batched weight goes per example.
    fn batch(
        &self,
        b: &mut crate::ir::Builder,
        x: &[crate::ir::Var],
        at: &crate::ir::BatchCtx,
    ) -> Result<crate::ir::Var, crate::ir::RuleError> {
        crate::prim::batching::fold_rows(b, x, at, &[0, 1])
    }
}

impl Transpose for MaxPool2dScatter {
    fn transpose(&self, b: &mut Builder, x: &[Var], v: Var) -> Result<Var, RuleError> {
        let select = MaxPool2dSelect { attrs: self.attrs };
        Ok(b.apply(Arc::new(select), &[x[0], v])?)
    }
}

pub(crate) fn register(r: &mut Registry) {
    register_pool(r, "max_pool2d", |attrs| Arc::new(MaxPool2d { attrs }));
    register_pool(r, "max_pool2d_select", |attrs| {
        Arc::new(MaxPool2dSelect { attrs })
    });
    register_pool(r, "max_pool2d_scatter", |attrs| {
        Arc::new(MaxPool2dScatter { attrs })
    });
}

/// Every window holds an input element, so the maximum is one of x's elements.
fn draw_max_pool(d: &mut dyn Draw) -> Result<Drawn, DrawError> {
    let x = nchw(d, 64.0)?;
    let a = pool_attrs(d, x, true);
    d.same(x.range, |b| b.max_pool2d(x.var, a))
}

/// The argmax source of the max-pool helpers: a grid constant (1/256 steps in [-1, 1]), so
/// exact ties are frequent and the first-maximum rule is exercised.
fn argmax_source(d: &mut dyn Draw, like: Drawn) -> Result<Drawn, DrawError> {
    let ty = d.ty(like.var);
    d.constant_of(&ty)
}

/// v at each window's first maximum of x: one of v's elements.
fn draw_select(d: &mut dyn Draw) -> Result<Drawn, DrawError> {
    let v = nchw(d, 64.0)?;
    let x = argmax_source(d, v)?;
    let a = pool_attrs(d, x, true);
    let var = d.apply(Arc::new(MaxPool2dSelect { attrs: a }), &[x.var, v.var])?;
    Ok(Drawn {
        var,
        range: v.range,
    })
}

/// u scattered to each window's first maximum of x: at most kH kW terms meet.
fn draw_scatter(d: &mut dyn Draw) -> Result<Drawn, DrawError> {
    let like = nchw(d, 64.0)?;
    let x = argmax_source(d, like)?;
    let a = pool_attrs(d, x, true);
    let xty = d.ty(x.var);
    let u = d.weight(&TensorType::new(xty.dtype, pooled_dims(&a, &xty)))?;
    let u = d.moderate(u, 8.0)?;
    let var = d.apply(Arc::new(MaxPool2dScatter { attrs: a }), &[x.var, u.var])?;
    Ok(Drawn {
        var,
        range: sum_of(u.range, a.window()),
    })
}
