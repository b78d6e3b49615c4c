//! sum_pool2d {"kernel", "stride", "padding"} over NCHW: y[n, c, o] = Σ of x over window o,
//! padding contributing zeros. It is linear, so its JVP is itself and its pullback is its
//! transpose `sum_pool2d_transpose` {.., "input_size"} (each input element collects u over the
//! windows that read it), whose pullback is sum_pool2d again.

use std::sync::Arc;

use super::pool_kernel::{sum_pool, sum_pool_transpose};
use super::pool_spec::{
    attrs_with_input_size, check_transpose, read_with_input_size, register_pool, Pool2dAttrs,
};
use crate::ir::{
    AttrReader, Attrs, Builder, KernelError, Prim, Primitive, Registry, RuleError, TypeError, Var,
};
use crate::ir::{Draw, DrawError, Drawing, Drawn};
use crate::ir::{Linearity, Transpose};
use crate::prim::dispatch::{arity, eval_ring, eval_ring_rational, RingKernel};
use crate::prim::window::draw::{nchw, pool_attrs, pooled_dims, sum_of};
use crate::prim::Ops;
use crate::tensor::{Array, Element, RArray, Shape, Tensor, TensorType};

/// Sum over each pooling window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SumPool2d {
    pub attrs: Pool2dAttrs,
}

impl RingKernel for SumPool2d {
    fn ring<T: Element>(&self, x: &[&Array<T>]) -> Result<Array<T>, KernelError> {
        let g = self.attrs.geom(x[0].dims());
        let y = sum_pool(x[0].data(), &g)?;
        Ok(Array::with_elems([g.n, g.c, g.h.out(), g.w.out()], y).expect("kernel output size"))
    }
}

impl Primitive for SumPool2d {
    fn name(&self) -> &str {
        "sum_pool2d"
    }
    fn drawing(&self) -> Option<Drawing> {
        Some(Drawing::new(1, draw_sum_pool))
    }
    fn f32_budget(&self, _inputs: &[TensorType], _output: &TensorType) -> crate::ir::Budget {
        crate::ir::Budget::sum(self.attrs.window())
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
        eval_ring(self, x)
    }
    fn has_rational_eval(&self) -> bool {
        true
    }
    fn eval_rational(&self, x: &[&RArray]) -> Option<Result<RArray, KernelError>> {
        eval_ring_rational(self, x)
    }
    fn flops(&self, _inputs: &[TensorType], output: &TensorType) -> u64 {
        output.numel() as u64 * self.attrs.window() as u64
    }
    fn linearity(&self) -> Option<Linearity<'_>> {
        Some(Linearity::of(self, 0))
    }
    fn lower(&self, b: &mut Builder, x: &[Var]) -> Option<Result<Var, TypeError>> {
        Some(super::pool_lower::sum_pool(b, &self.attrs, x[0]))
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

impl Transpose for SumPool2d {
    fn transpose(&self, b: &mut Builder, x: &[Var], u: Var) -> Result<Var, RuleError> {
        let d = b.ty(x[0]).dims().to_vec();
        let t = SumPool2dTranspose {
            attrs: self.attrs,
            input_size: [d[2], d[3]],
        };
        Ok(b.apply(Arc::new(t), &[u])?)
    }
}

/// The transpose of sum pooling, back to an input of spatial size `input_size`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SumPool2dTranspose {
    pub attrs: Pool2dAttrs,
    pub input_size: [usize; 2],
}

impl RingKernel for SumPool2dTranspose {
    fn ring<T: Element>(&self, x: &[&Array<T>]) -> Result<Array<T>, KernelError> {
        let d = x[0].dims();
        let dims = [d[0], d[1], self.input_size[0], self.input_size[1]];
        let g = self.attrs.geom(&dims);
        let dx = sum_pool_transpose(x[0].data(), &g)?;
        Ok(Array::with_elems(Shape::new(dims.to_vec()), dx).expect("kernel output size"))
    }
}

impl Primitive for SumPool2dTranspose {
    fn name(&self) -> &str {
        "sum_pool2d_transpose"
    }
    fn drawing(&self) -> Option<Drawing> {
        Some(Drawing::new(1, draw_sum_pool_transpose))
    }
    fn f32_budget(&self, _inputs: &[TensorType], _output: &TensorType) -> crate::ir::Budget {
        crate::ir::Budget::sum(self.attrs.window())
    }
    fn attrs(&self) -> Attrs {
        attrs_with_input_size(&self.attrs, self.input_size)
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType, TypeError> {
        arity(inputs, 1)?;
        let (x, _) = check_transpose(&self.attrs, self.input_size, &inputs[0], 0)?;
        Ok(x)
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
        inputs[0].numel() as u64 * self.attrs.window() as u64
    }
    fn linearity(&self) -> Option<Linearity<'_>> {
        Some(Linearity::of(self, 0))
    }
    fn lower(&self, b: &mut Builder, x: &[Var]) -> Option<Result<Var, TypeError>> {
        Some(super::pool_lower::sum_pool_transpose(
            b,
            &self.attrs,
            self.input_size,
            x[0],
        ))
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

impl Transpose for SumPool2dTranspose {
    fn transpose(&self, b: &mut Builder, _x: &[Var], v: Var) -> Result<Var, RuleError> {
        let pool = SumPool2d { attrs: self.attrs };
        Ok(b.apply(Arc::new(pool), &[v])?)
    }
}

pub(crate) fn register(r: &mut Registry) {
    register_pool(r, "sum_pool2d", |attrs| Arc::new(SumPool2d { attrs }));
    r.register("sum_pool2d_transpose", |attrs: &Attrs| {
        let mut a = AttrReader::new(attrs);
        let (attrs, input_size) = read_with_input_size(&mut a)?;
        a.finish()?;
        Ok(Arc::new(SumPool2dTranspose { attrs, input_size }) as Prim)
    });
    r.set_example(
        "sum_pool2d_transpose",
        crate::ir::attrs_json(r#"{"kernel": [2, 2], "input_size": [4, 4]}"#),
    );
}

fn draw_sum_pool(d: &mut dyn Draw) -> Result<Drawn, DrawError> {
    let x = nchw(d, 8.0)?;
    let a = pool_attrs(d, x, false);
    d.same(sum_of(x.range, a.window()), |b| b.sum_pool2d(x.var, a))
}

/// The transpose of sum_pool2d: each input position lies in at most k_H k_W windows.
fn draw_sum_pool_transpose(d: &mut dyn Draw) -> Result<Drawn, DrawError> {
    let x = nchw(d, 8.0)?;
    let a = pool_attrs(d, x, false);
    let xty = d.ty(x.var);
    let uty = TensorType::new(xty.dtype, pooled_dims(&a, &xty));
    let u = d.weight(&uty)?;
    let u = d.moderate(u, 8.0)?;
    let size = [xty.dims()[2], xty.dims()[3]];
    let var = d.apply(
        Arc::new(SumPool2dTranspose {
            attrs: a,
            input_size: size,
        }),
        &[u.var],
    )?;
    Ok(Drawn {
        var,
        range: sum_of(u.range, a.window()),
    })
}
