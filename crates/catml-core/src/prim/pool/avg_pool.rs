//! avg_pool2d {"kernel", "stride", "padding"} over NCHW: y = (1 / (kH·kW)) · sum_pool2d(x).
//!
//! The divisor is always the full window size kH·kW: padded positions count as zeros
//! (PyTorch's `count_include_pad=True`). That keeps the map a fixed linear stencil, the same at
//! every output, so its pullback is (1 / (kH·kW)) · sum_pool2d_transpose(u), and the border
//! outputs are averages over kH·kW values of which some are padding zeros.

use std::sync::Arc;

use num_traits::One;

use super::pool_kernel::sum_pool;
use super::pool_spec::{register_pool, Pool2dAttrs};
use super::sum_pool::SumPool2dTranspose;
use crate::ir::{Attrs, Builder, KernelError, Primitive, Registry, RuleError, TypeError, Var};
use crate::ir::{Draw, DrawError, Drawing, Drawn, Interval};
use crate::ir::{Linearity, Transpose};
use crate::prim::dispatch::{arity, eval_float, FloatKernel};
use crate::prim::window::draw::{nchw, pool_attrs};
use crate::prim::Ops;
use crate::tensor::{Array, Float, RArray, Rational, Tensor, TensorType};

/// The mean over each pooling window, padding counted as zeros.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AvgPool2d {
    pub attrs: Pool2dAttrs,
}

impl AvgPool2d {
    fn scale(&self) -> f64 {
        1.0 / self.attrs.window() as f64
    }
}

impl FloatKernel for AvgPool2d {
    fn float<T: Float>(&self, x: &[&Array<T>]) -> Result<Array<T>, KernelError> {
        let g = self.attrs.geom(x[0].dims());
        let k = T::from_f64(self.scale());
        let mut y = sum_pool(x[0].data(), &g)?;
        y.iter_mut().for_each(|v| *v = *v * k);
        Ok(Array::with_elems([g.n, g.c, g.h.out(), g.w.out()], y).expect("kernel output size"))
    }
}

impl Primitive for AvgPool2d {
    fn name(&self) -> &str {
        "avg_pool2d"
    }
    fn drawing(&self) -> Option<Drawing> {
        Some(Drawing::new(1, draw_avg_pool))
    }
    fn f32_budget(&self, _inputs: &[TensorType], _output: &TensorType) -> crate::ir::Budget {
        crate::ir::Budget::sum(self.attrs.window() + 1)
    }
    fn attrs(&self) -> Attrs {
        self.attrs.to_attrs()
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType, TypeError> {
        arity(inputs, 1)?;
        let g = self.attrs.check(&inputs[0], 0)?;
        Ok(Pool2dAttrs::out_type(&inputs[0], &g))
    }
    fn eval(&self, x: &[&Tensor]) -> Result<Tensor, KernelError> {
        eval_float(self, x)
    }
    fn has_rational_eval(&self) -> bool {
        true
    }
    fn eval_rational(&self, x: &[&RArray]) -> Option<Result<RArray, KernelError>> {
        let g = self.attrs.geom(x[0].dims());
        let k = Rational::one() / Rational::from_integer(self.attrs.window().into());
        let y = match sum_pool(x[0].data(), &g) {
            Ok(y) => y.iter().map(|v| v.clone() * k.clone()).collect(),
            Err(e) => return Some(Err(e.into())),
        };
        Some(Ok(
            Array::new([g.n, g.c, g.h.out(), g.w.out()], y).expect("kernel output size")
        ))
    }
    fn flops(&self, _inputs: &[TensorType], output: &TensorType) -> u64 {
        output.numel() as u64 * (self.attrs.window() as u64 + 1)
    }
    fn linearity(&self) -> Option<Linearity<'_>> {
        Some(Linearity::of(self, 0))
    }
    fn lower(&self, b: &mut Builder, x: &[Var]) -> Option<Result<Var, TypeError>> {
        Some((|| {
            let s = super::pool_lower::sum_pool(b, &self.attrs, x[0])?;
            b.div_count(s, self.attrs.window())
        })())
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

impl Transpose for AvgPool2d {
    fn transpose(&self, b: &mut Builder, x: &[Var], u: Var) -> Result<Var, RuleError> {
        let d = b.ty(x[0]).dims().to_vec();
        let t = SumPool2dTranspose {
            attrs: self.attrs,
            input_size: [d[2], d[3]],
        };
        let spread = b.apply(Arc::new(t), &[u])?;
        Ok(b.div_count(spread, self.attrs.window())?)
    }
}

pub(crate) fn register(r: &mut Registry) {
    register_pool(r, "avg_pool2d", |attrs| Arc::new(AvgPool2d { attrs }));
}

/// Mean over kH kW positions, padding counted as zeros: within the hull of x's range and 0.
fn draw_avg_pool(d: &mut dyn Draw) -> Result<Drawn, DrawError> {
    let x = nchw(d, 64.0)?;
    let a = pool_attrs(d, x, false);
    let r = x.range.hull(Interval::new(0.0, 0.0));
    d.same(r, |b| b.avg_pool2d(x.var, a))
}
