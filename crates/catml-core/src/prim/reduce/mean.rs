//! mean {"axes": [..]}: m^-1 times the sum over the axes, m the product of their sizes (axes
//! absent: every axis, giving a scalar). Linear: its JVP applies it to the tangent, its
//! pullback broadcasts u / m back. Lowers to `sum` and a multiplication by 1/m.

use crate::ir::{Draw, DrawError, Drawn};
use crate::ir::{Linearity, SliceKernel, SliceOperand, Transpose};
use std::sync::Arc;

use super::slices::{check_axes, kept};
use crate::ir::{
    AttrReader, Attrs, Budget, Builder, KernelError, Prim, Primitive, Registry, RuleError,
    TypeError, Var,
};
use crate::prim::dispatch::{arity, eval_float, float_operand, FloatKernel};
use crate::prim::Ops;
use crate::tensor::{kernels, Array, Float, RArray, Rational, Strides, Tensor, TensorType};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mean {
    /// As given; `None` means every axis.
    pub axes: Option<Vec<usize>>,
}

impl Mean {
    pub fn new(axes: Option<Vec<usize>>) -> Mean {
        Mean { axes }
    }

    /// The reduced axes, sorted, for an operand of this rank.
    fn reduced(&self, rank: usize) -> Strides {
        super::slices::sorted_axes(self.axes.as_deref(), rank)
    }

    /// m: how many elements each output averages.
    fn count(&self, dims: &[usize]) -> usize {
        self.reduced(dims.len()).iter().map(|&a| dims[a]).product()
    }
}

impl FloatKernel for Mean {
    fn float<T: Float>(&self, x: &[&Array<T>]) -> Result<Array<T>, KernelError> {
        let m = T::from_f64(self.count(x[0].dims()) as f64);
        let s = kernels::sum_axes(x[0], &self.reduced(x[0].dims().len()))?;
        Ok(s.map(|v| *v / m))
    }
}

impl Mean {
    /// The mean into `out`, as `float` computes it: the sum, then each element over m.
    fn write<T: Float>(&self, x: &SliceOperand<'_, T>, out: &mut [T]) {
        let m = T::from_f64(self.count(x.dims) as f64);
        out.fill(T::zero());
        kernels::sum_axes_onto(x.data, x.dims, &self.reduced(x.dims.len()), out);
        out.iter_mut().for_each(|v| *v = *v / m);
    }
}

impl SliceKernel for Mean {
    fn serves(&self, _inputs: &[TensorType], output: &TensorType) -> bool {
        output.dtype.is_float()
    }
    fn slice_f32(&self, x: &[SliceOperand<'_, f32>], out: &mut [f32]) {
        self.write(&x[0], out)
    }
    fn slice_f64(&self, x: &[SliceOperand<'_, f64>], out: &mut [f64]) {
        self.write(&x[0], out)
    }
}

impl Primitive for Mean {
    fn name(&self) -> &str {
        "mean"
    }
    fn slice_kernel(&self) -> Option<&dyn SliceKernel> {
        Some(self)
    }
    fn drawing(&self) -> Option<crate::ir::Drawing> {
        Some(crate::ir::Drawing::new(1, draw_mean))
    }
    /// Applied per example, so batched results equal a loop bitwise.
    fn batch(
        &self,
        b: &mut crate::ir::Builder,
        x: &[crate::ir::Var],
        at: &crate::ir::BatchCtx,
    ) -> Result<crate::ir::Var, crate::ir::RuleError> {
        crate::prim::batching::per_example(b, x, at)
    }
    fn formula(&self) -> Option<&'static str> {
        Some("m^-1 sum over `axes` (absent: all) of x, m the number of elements summed")
    }
    fn attrs(&self) -> Attrs {
        match &self.axes {
            None => Attrs::new(),
            Some(a) => crate::ir::attrs_of([("axes", a.clone().into())]),
        }
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType, TypeError> {
        arity(inputs, 1)?;
        float_operand(inputs, 0)?;
        let x = &inputs[0];
        let axes = check_axes(x, self.axes.as_deref(), "axes", false)?;
        let dims: Vec<usize> = kept(x.rank(), &axes).iter().map(|&i| x.dims()[i]).collect();
        Ok(TensorType::new(x.dtype, dims))
    }
    fn eval(&self, x: &[&Tensor]) -> Result<Tensor, KernelError> {
        eval_float(self, x)
    }
    fn has_rational_eval(&self) -> bool {
        true
    }
    fn eval_rational(&self, x: &[&RArray]) -> Option<Result<RArray, KernelError>> {
        let m = Rational::from_integer((self.count(x[0].dims()) as i64).into());
        let s = match kernels::sum_axes(x[0], &self.reduced(x[0].dims().len())) {
            Ok(s) => s,
            Err(e) => return Some(Err(e.into())),
        };
        Some(Ok(s.map(|v| v / &m)))
    }
    /// The sum's m - 1 roundings and one for the division.
    fn f32_budget(&self, inputs: &[TensorType], output: &TensorType) -> Budget {
        Budget::sum(inputs[0].numel() / output.numel().max(1) + 1)
    }
    fn flops(&self, inputs: &[TensorType], output: &TensorType) -> u64 {
        (inputs[0].numel() + output.numel()) as u64
    }
    fn linearity(&self) -> Option<Linearity<'_>> {
        Some(Linearity::of(self, 0))
    }
    fn lower(&self, b: &mut Builder, x: &[Var]) -> Option<Result<Var, TypeError>> {
        Some((|| {
            let ty = b.ty(x[0]).clone();
            let s = b.sum(x[0], self.axes.clone())?;
            b.div_count(s, self.count(ty.dims()))
        })())
    }
}

impl Transpose for Mean {
    fn transpose(&self, b: &mut Builder, x: &[Var], u: Var) -> Result<Var, RuleError> {
        let ty = b.ty(x[0]).clone();
        let axes = self.reduced(ty.rank());
        let scaled = b.div_count(u, self.count(ty.dims()))?;
        Ok(b.broadcast(scaled, ty.shape.clone(), kept(ty.rank(), &axes))?)
    }
}

pub(crate) fn register(r: &mut Registry) {
    r.register("mean", |attrs: &Attrs| {
        let mut a = AttrReader::new(attrs);
        let axes = a.opt_usize_list("axes")?;
        a.finish()?;
        Ok(Arc::new(Mean::new(axes)) as Prim)
    });
}

/// The mean lies in the hull of the averaged values.
fn draw_mean(d: &mut dyn Draw) -> Result<Drawn, DrawError> {
    let x = d.pick();
    let rank = d.ty(x.var).rank();
    let axes = d.some_axes(rank);
    d.same(x.range, |b| b.mean(x.var, axes))
}
