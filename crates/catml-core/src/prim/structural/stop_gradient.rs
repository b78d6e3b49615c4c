//! stop_gradient: the identity forward, with the declared zero response (docs/derivatives.md).

use std::sync::Arc;

use crate::ir::{
    Builder, KernelError, Prim, Primitive, Registry, RuleError, RuleKind, TypeError, Var,
};
use crate::ir::{Draw, DrawError, Drawing, Drawn, ResultStorage};
use crate::prim::dispatch::unary_float;
use crate::prim::Ops;
use crate::tensor::{RArray, Tensor, TensorType};

#[derive(Debug, Clone, Copy)]
pub struct StopGradient;

impl Primitive for StopGradient {
    fn name(&self) -> &str {
        "stop_gradient"
    }
    fn drawing(&self) -> Option<Drawing> {
        Some(Drawing::new(1, draw_stop_gradient))
    }
    fn f32_budget(&self, _inputs: &[TensorType], _output: &TensorType) -> crate::ir::Budget {
        crate::ir::Budget::Exact
    }
    fn fragment(&self) -> crate::ir::Fragment {
        crate::ir::Fragment::LoweringExtra(
            "marks the stabilising shift of softmax-like lowerings derivative-free, which is exact since softmax is shift-invariant",
        )
    }
    fn copies_operand_values(&self) -> bool {
        true
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType, TypeError> {
        unary_float(inputs)
    }
    fn eval(&self, x: &[&Tensor]) -> Result<Tensor, KernelError> {
        Ok(x[0].clone())
    }
    fn result_storage(&self) -> ResultStorage {
        ResultStorage::Operand
    }
    fn has_rational_eval(&self) -> bool {
        true
    }
    fn eval_rational(&self, x: &[&RArray]) -> Option<Result<RArray, KernelError>> {
        Some(Ok(x[0].clone()))
    }
    fn flops(&self, _inputs: &[TensorType], _output: &TensorType) -> u64 {
        0
    }
    fn rule(&self) -> RuleKind {
        RuleKind::Declared("zero response: gradients do not flow through stop_gradient")
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

pub(crate) fn register(r: &mut Registry) {
    crate::prim::register_unit(r, "stop_gradient", || Arc::new(StopGradient) as Prim);
}

fn draw_stop_gradient(d: &mut dyn Draw) -> Result<Drawn, DrawError> {
    let x = d.pick();
    d.same(x.range, |b| b.stop_gradient(x.var))
}
