//! reduce_max {"axes"} (absent: all axes) and its tie weights max_weights {"axes"}.
//!
//! The maximum is differentiable where one entry of a slice is strictly largest; there the
//! derivative selects that entry. At ties we state a convention: the derivative is shared
//! equally among the maximal entries, w_j = [x_j = max x] / #{k : x_k = max x}, so
//! d max = sum_j w_j dx_j and the pullback is u w. `max_weights` computes w; it is piecewise
//! constant, so its derivative is zero on the open regions where the set of maximal entries is
//! fixed (and undefined where that set changes: the same ties).
//!
//! softmax-style lowerings use reduce_max only under stop_gradient, as an exact shift.

use std::sync::Arc;

use super::slices::{check_axes, kept, map_slices, reduce_slices};
use crate::ir::{
    AttrReader, Attrs, Builder, KernelError, Prim, Primitive, Registry, RuleError, RuleKind,
    TypeError, Var,
};
use crate::ir::{Draw, DrawError, Drawing, Drawn, Interval};
use crate::prim::dispatch::{arity, float_operand};
use crate::prim::Ops;
use crate::tensor::alloc::AllocError;
use crate::tensor::{Array, Element, RArray, Tensor, TensorType};

const TIES: &str = "at ties the derivative is shared equally among the maximal entries";

fn largest<T: Element + PartialOrd>(s: &[T]) -> T {
    let mut m = s[0].clone();
    for v in &s[1..] {
        if *v > m {
            m = v.clone();
        }
    }
    m
}

/// The reduced type (kept dims) for these axes.
fn reduced_type(x: &TensorType, axes: &[usize]) -> TensorType {
    let dims: Vec<usize> = kept(x.rank(), axes).iter().map(|&i| x.dims()[i]).collect();
    TensorType::new(x.dtype, dims)
}

fn attrs_for(axes: &Option<Vec<usize>>) -> Attrs {
    match axes {
        None => Attrs::new(),
        Some(a) => crate::ir::attrs_of([("axes", a.clone().into())]),
    }
}

fn check(x: &[TensorType], axes: &Option<Vec<usize>>) -> Result<Vec<usize>, TypeError> {
    arity(x, 1)?;
    float_operand(x, 0)?;
    check_axes(&x[0], axes.as_deref(), "axes", false)
}

fn sorted(axes: &Option<Vec<usize>>, rank: usize) -> Vec<usize> {
    let mut a = axes.clone().unwrap_or_else(|| (0..rank).collect());
    a.sort_unstable();
    a
}

/// max over `axes`, which are removed from the shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReduceMax {
    pub axes: Option<Vec<usize>>,
}

impl ReduceMax {
    pub fn new(axes: Option<Vec<usize>>) -> ReduceMax {
        ReduceMax { axes }
    }

    fn run<T: Element + PartialOrd>(&self, x: &Array<T>) -> Result<Array<T>, AllocError> {
        reduce_slices(x, &sorted(&self.axes, x.dims().len()), largest)
    }
}

impl Primitive for ReduceMax {
    fn name(&self) -> &str {
        "reduce_max"
    }
    fn drawing(&self) -> Option<Drawing> {
        Some(Drawing::new(1, draw_reduce_max))
    }
    fn f32_budget(&self, _inputs: &[TensorType], _output: &TensorType) -> crate::ir::Budget {
        crate::ir::Budget::Exact
    }
    fn fragment(&self) -> crate::ir::Fragment {
        crate::ir::Fragment::LoweringExtra(
            "the stabilising shift of softmax-like lowerings (always under stop_gradient)",
        )
    }
    fn attrs(&self) -> Attrs {
        attrs_for(&self.axes)
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType, TypeError> {
        let axes = check(inputs, &self.axes)?;
        Ok(reduced_type(&inputs[0], &axes))
    }
    fn eval(&self, x: &[&Tensor]) -> Result<Tensor, KernelError> {
        match x[0] {
            Tensor::F32(a) => Ok(Tensor::F32(self.run(a)?)),
            Tensor::F64(a) => Ok(Tensor::F64(self.run(a)?)),
            Tensor::I64(_) | Tensor::Bool(_) | Tensor::Stored(_) => Err(KernelError::Unsupported(
                "reduce_max of integers".to_string(),
            )),
        }
    }
    fn has_rational_eval(&self) -> bool {
        true
    }
    fn eval_rational(&self, x: &[&RArray]) -> Option<Result<RArray, KernelError>> {
        Some(self.run(x[0]).map_err(Into::into))
    }
    fn flops(&self, inputs: &[TensorType], _output: &TensorType) -> u64 {
        inputs[0].numel() as u64
    }
    fn rule(&self) -> RuleKind {
        RuleKind::Convention(TIES)
    }
    fn convention_points(&self, x: &[&Tensor]) -> usize {
        tie_points(x[0], &self.axes)
    }
    fn jvp(
        &self,
        b: &mut Builder,
        x: &[Var],
        _y: Var,
        dx: &[Option<Var>],
    ) -> Result<Option<Var>, RuleError> {
        let Some(d) = dx[0] else { return Ok(None) };
        let w = b.max_weights(x[0], self.axes.clone())?;
        let wd = b.mul(w, d)?;
        Ok(Some(b.sum(wd, self.axes.clone())?))
    }
    fn vjp(
        &self,
        b: &mut Builder,
        x: &[Var],
        _y: Var,
        u: Var,
    ) -> Result<Vec<Option<Var>>, RuleError> {
        let ty = b.ty(x[0]).clone();
        let axes = sorted(&self.axes, ty.rank());
        let ub = b.broadcast(u, ty.shape.clone(), kept(ty.rank(), &axes))?;
        let w = b.max_weights(x[0], self.axes.clone())?;
        Ok(vec![Some(b.mul(ub, w)?)])
    }
    /// Batching: the same axes of each example; the batch axis is kept.
    fn batch(
        &self,
        b: &mut crate::ir::Builder,
        x: &[crate::ir::Var],
        at: &crate::ir::BatchCtx,
    ) -> Result<crate::ir::Var, crate::ir::RuleError> {
        let rank = b.ty(x[0]).rank() - 1;
        let axes = match &self.axes {
            None => (1..=rank).collect(),
            Some(a) => crate::prim::batching::shifted(a),
        };
        crate::prim::batching::with_prim(b, x, at, Arc::new(ReduceMax { axes: Some(axes) }))
    }
}

/// Elements that are one of several maximal entries of their slice.
fn tie_points(x: &Tensor, axes: &Option<Vec<usize>>) -> usize {
    fn count<T: Element + PartialOrd>(a: &Array<T>, axes: &[usize]) -> usize {
        let mut n = 0;
        // Without memory for the pass there is no count; evaluation then fails at this node.
        let _ = map_slices(a, axes, |s, _| {
            let m = largest(s);
            let k = s.iter().filter(|v| **v == m).count();
            if k > 1 {
                n += k;
            }
        });
        n
    }
    let axes = sorted(axes, x.dims().len());
    match x {
        Tensor::F32(a) => count(a, &axes),
        Tensor::F64(a) => count(a, &axes),
        Tensor::I64(_) | Tensor::Bool(_) | Tensor::Stored(_) => 0,
    }
}

/// w_j = [x_j = max x] / #{maximal entries}, slice by slice: the tie-sharing weights.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MaxWeights {
    pub axes: Option<Vec<usize>>,
}

impl MaxWeights {
    pub fn new(axes: Option<Vec<usize>>) -> MaxWeights {
        MaxWeights { axes }
    }

    fn run<T: Element + PartialOrd>(
        &self,
        x: &Array<T>,
        share: impl Fn(usize) -> T,
    ) -> Result<Array<T>, AllocError> {
        map_slices(x, &sorted(&self.axes, x.dims().len()), |s, out| {
            let m = largest(s);
            let k = s.iter().filter(|v| **v == m).count();
            let w = share(k);
            for (o, v) in out.iter_mut().zip(s) {
                *o = if *v == m { w.clone() } else { T::zero() };
            }
        })
    }
}

impl Primitive for MaxWeights {
    fn name(&self) -> &str {
        "max_weights"
    }
    fn drawing(&self) -> Option<Drawing> {
        Some(Drawing::new(1, draw_max_weights))
    }
    fn f32_budget(&self, _inputs: &[TensorType], _output: &TensorType) -> crate::ir::Budget {
        crate::ir::Budget::Relative(1.0)
    }
    fn attrs(&self) -> Attrs {
        attrs_for(&self.axes)
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType, TypeError> {
        check(inputs, &self.axes)?;
        Ok(inputs[0].clone())
    }
    fn eval(&self, x: &[&Tensor]) -> Result<Tensor, KernelError> {
        match x[0] {
            Tensor::F32(a) => Ok(Tensor::F32(self.run(a, |k| 1.0 / k as f32)?)),
            Tensor::F64(a) => Ok(Tensor::F64(self.run(a, |k| 1.0 / k as f64)?)),
            Tensor::I64(_) | Tensor::Bool(_) | Tensor::Stored(_) => Err(KernelError::Unsupported(
                "max_weights of integers".to_string(),
            )),
        }
    }
    fn has_rational_eval(&self) -> bool {
        true
    }
    fn eval_rational(&self, x: &[&RArray]) -> Option<Result<RArray, KernelError>> {
        Some(
            self.run(x[0], |k| {
                crate::tensor::Rational::new(1.into(), (k as i64).into())
            })
            .map_err(Into::into),
        )
    }
    fn flops(&self, inputs: &[TensorType], _output: &TensorType) -> u64 {
        inputs[0].numel() as u64
    }
    fn rule(&self) -> RuleKind {
        RuleKind::Convention("piecewise constant: zero derivative, discontinuous at ties")
    }
    fn convention_points(&self, x: &[&Tensor]) -> usize {
        tie_points(x[0], &self.axes)
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
    /// Batching: the same axes of each example; the batch axis is kept.
    fn batch(
        &self,
        b: &mut crate::ir::Builder,
        x: &[crate::ir::Var],
        at: &crate::ir::BatchCtx,
    ) -> Result<crate::ir::Var, crate::ir::RuleError> {
        let rank = b.ty(x[0]).rank() - 1;
        let axes = match &self.axes {
            None => (1..=rank).collect(),
            Some(a) => crate::prim::batching::shifted(a),
        };
        crate::prim::batching::with_prim(b, x, at, Arc::new(MaxWeights { axes: Some(axes) }))
    }
}

pub(crate) fn register(r: &mut Registry) {
    r.register("reduce_max", |attrs: &Attrs| {
        let mut a = AttrReader::new(attrs);
        let axes = a.opt_usize_list("axes")?;
        a.finish()?;
        Ok(Arc::new(ReduceMax::new(axes)) as Prim)
    });
    r.register("max_weights", |attrs: &Attrs| {
        let mut a = AttrReader::new(attrs);
        let axes = a.opt_usize_list("axes")?;
        a.finish()?;
        Ok(Arc::new(MaxWeights::new(axes)) as Prim)
    });
}

fn draw_reduce_max(d: &mut dyn Draw) -> Result<Drawn, DrawError> {
    let x = d.pick();
    let axes = d.some_axes(d.ty(x.var).rank());
    d.same(x.range, |b| b.reduce_max(x.var, axes))
}

/// w_j = [x_j = max] / #ties, in [0, 1].
fn draw_max_weights(d: &mut dyn Draw) -> Result<Drawn, DrawError> {
    let x = d.pick();
    let axes = d.some_axes(d.ty(x.var).rank());
    d.same(Interval::new(0.0, 1.0), |b| b.max_weights(x.var, axes))
}
