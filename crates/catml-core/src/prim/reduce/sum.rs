//! sum {"axes": [..]}: sum over the axes (absent: all, giving a scalar). The adjoint pair of
//! broadcast: its pullback broadcasts the cotangent back.

use std::sync::Arc;

use crate::ir::{
    AttrReader, Attrs, Builder, KernelError, Prim, Primitive, Registry, RuleError, TypeError, Var,
};
use crate::ir::{Draw, DrawError, Drawing, Drawn};
use crate::ir::{Linearity, SliceKernel, SliceOperand, Transpose};
use crate::prim::dispatch::{arity, eval_ring, eval_ring_rational, number_operand, RingKernel};
use crate::prim::Ops;
use crate::tensor::{kernels, Array, Element, RArray, Strides, Tensor, TensorType};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sum {
    /// As given; `None` means every axis.
    pub axes: Option<Vec<usize>>,
}

impl Sum {
    pub fn new(axes: Option<Vec<usize>>) -> Sum {
        Sum { axes }
    }

    /// The reduced axes, sorted, for an operand of this rank.
    fn reduced(&self, rank: usize) -> Strides {
        super::slices::sorted_axes(self.axes.as_deref(), rank)
    }
}

impl RingKernel for Sum {
    fn ring<T: Element>(&self, x: &[&Array<T>]) -> Result<Array<T>, KernelError> {
        Ok(kernels::sum_axes(x[0], &self.reduced(x[0].dims().len()))?)
    }
}

impl Sum {
    /// The sum into `out`, as `ring` computes it.
    fn write<T: Element>(&self, x: &SliceOperand<'_, T>, out: &mut [T]) {
        out.fill(T::zero());
        kernels::sum_axes_onto(x.data, x.dims, &self.reduced(x.dims.len()), out);
    }
}

impl SliceKernel for Sum {
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

impl Primitive for Sum {
    fn name(&self) -> &str {
        "sum"
    }
    fn slice_kernel(&self) -> Option<&dyn SliceKernel> {
        Some(self)
    }
    fn drawing(&self) -> Option<Drawing> {
        Some(Drawing::new(2, draw_sum))
    }
    fn f32_budget(&self, inputs: &[TensorType], output: &TensorType) -> crate::ir::Budget {
        crate::ir::Budget::sum(inputs[0].numel() / output.numel().max(1))
    }
    fn fragment(&self) -> crate::ir::Fragment {
        crate::ir::Fragment::Core
    }
    fn attrs(&self) -> Attrs {
        match &self.axes {
            None => Attrs::new(),
            Some(a) => crate::ir::attrs_of([("axes", a.clone().into())]),
        }
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType, TypeError> {
        arity(inputs, 1)?;
        number_operand(inputs, 0)?;
        let rank = inputs[0].rank();
        let axes = self.reduced(rank);
        if let Some(&bad) = axes.iter().find(|&&a| a >= rank) {
            return Err(TypeError::attr(
                "axes",
                format!("axis {bad} is out of range for {} (rank {rank})", inputs[0]),
            ));
        }
        if let Some(w) = axes.windows(2).find(|w| w[0] == w[1]) {
            return Err(TypeError::attr(
                "axes",
                format!("axis {} is listed twice", w[0]),
            ));
        }
        let dims: Vec<usize> = (0..rank)
            .filter(|i| !axes.contains(i))
            .map(|i| inputs[0].dims()[i])
            .collect();
        Ok(TensorType::new(inputs[0].dtype, dims))
    }
    fn eval(&self, x: &[&Tensor]) -> Result<Tensor, KernelError> {
        // i64 sums wrap modulo 2^64, as i64 addition does (`docs/dtypes.md`).
        if let [Tensor::I64(a)] = x {
            let w = a.map(|&v| std::num::Wrapping(v));
            return Ok(Tensor::I64(self.ring(&[&w])?.map(|v| v.0)));
        }
        eval_ring(self, x)
    }
    fn has_rational_eval(&self) -> bool {
        true
    }
    fn eval_rational(&self, x: &[&RArray]) -> Option<Result<RArray, KernelError>> {
        eval_ring_rational(self, x)
    }
    fn flops(&self, inputs: &[TensorType], _output: &TensorType) -> u64 {
        inputs[0].numel() as u64
    }
    fn linearity(&self) -> Option<Linearity<'_>> {
        Some(Linearity::of(self, 0))
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
        crate::prim::batching::with_prim(b, x, at, Arc::new(Sum::new(Some(axes))))
    }
}

impl Transpose for Sum {
    fn transpose(&self, b: &mut Builder, x: &[Var], u: Var) -> Result<Var, RuleError> {
        let ty = b.ty(x[0]).clone();
        let axes = self.reduced(ty.rank());
        let kept: Vec<usize> = (0..ty.rank()).filter(|i| !axes.contains(i)).collect();
        Ok(b.broadcast(u, ty.shape.clone(), kept)?)
    }
}

pub(crate) fn register(r: &mut Registry) {
    r.register("sum", |attrs: &Attrs| {
        let mut a = AttrReader::new(attrs);
        let axes = a.opt_usize_list("axes")?;
        a.finish()?;
        Ok(Arc::new(Sum::new(axes)) as Prim)
    });
}

/// A sum over some axes (or all) of `count` elements.
fn draw_sum(d: &mut dyn Draw) -> Result<Drawn, DrawError> {
    let x = d.pick();
    let ty = d.ty(x.var);
    let axes = d.some_axes(ty.rank());
    let count: usize = match &axes {
        None => ty.numel(),
        Some(a) => a.iter().map(|&i| ty.dims()[i]).product(),
    };
    let r = x.range.scale(count as f64);
    d.same(r, |b| b.sum(x.var, axes))
}
