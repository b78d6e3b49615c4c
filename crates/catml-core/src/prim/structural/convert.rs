//! convert {"dtype": ..}: the only way between dtypes, with the semantics of
//! [`Tensor::convert`] (`docs/dtypes.md`). Float to float is differentiable (the pullback
//! converts back); integers and bools carry no tangent.

use std::sync::Arc;

use crate::ir::{
    AttrReader, Attrs, Builder, KernelError, Prim, Primitive, Registry, RuleError, TypeError, Var,
};
use crate::ir::{Draw, DrawError, Drawing, Drawn};
use crate::prim::dispatch::arity;
use crate::prim::Ops;
use crate::tensor::{Array, DType, RArray, Tensor, TensorType};

#[derive(Debug, Clone, Copy)]
pub struct Convert {
    pub dtype: DType,
    /// Float targets take out-of-range values as their largest finite value of that sign.
    pub saturate: bool,
}

impl Primitive for Convert {
    fn name(&self) -> &str {
        "convert"
    }
    fn drawing(&self) -> Option<Drawing> {
        Some(Drawing::new(1, draw_convert))
    }
    fn f32_budget(&self, _inputs: &[TensorType], _output: &TensorType) -> crate::ir::Budget {
        // Operands are f32 values in both runs, so both conversions give the same numbers.
        crate::ir::Budget::Exact
    }
    fn smooth(&self) -> bool {
        // A conversion to f32 rounds: finite differences through it measure the rounding.
        false
    }
    fn attrs(&self) -> Attrs {
        let mut a = crate::ir::attrs_of([("dtype", self.dtype.as_str().into())]);
        if self.saturate {
            a.insert("saturate".to_string(), true.into());
        }
        a
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType, TypeError> {
        arity(inputs, 1)?;
        Ok(inputs[0].with_dtype(self.dtype))
    }
    fn moves_storage(&self) -> bool {
        true
    }
    fn eval(&self, x: &[&Tensor]) -> Result<Tensor, KernelError> {
        x[0].convert_with(self.dtype, self.saturate)
            .map_err(KernelError::Domain)
    }
    fn has_rational_eval(&self) -> bool {
        true
    }
    fn eval_rational(&self, x: &[&RArray]) -> Option<Result<RArray, KernelError>> {
        // Exact arithmetic has one number type; conversion is the identity there, except that
        // a bool is 0 or 1.
        if self.dtype == DType::Bool {
            return Some(Ok(x[0].map(|v| {
                if num_traits::Zero::is_zero(v) {
                    num_traits::Zero::zero()
                } else {
                    num_traits::One::one()
                }
            })));
        }
        Some(Ok(Array::clone(x[0])))
    }
    fn flops(&self, _inputs: &[TensorType], _output: &TensorType) -> u64 {
        0
    }
    fn jvp(
        &self,
        b: &mut Builder,
        _x: &[Var],
        _y: Var,
        dx: &[Option<Var>],
    ) -> Result<Option<Var>, RuleError> {
        match dx[0] {
            Some(d) if self.dtype.is_floating_point() => Ok(Some(b.convert(d, self.dtype)?)),
            _ => Ok(None),
        }
    }
    fn vjp(
        &self,
        b: &mut Builder,
        x: &[Var],
        _y: Var,
        u: Var,
    ) -> Result<Vec<Option<Var>>, RuleError> {
        let source = b.ty(x[0]).dtype;
        if !source.is_floating_point() || !self.dtype.is_floating_point() {
            return Ok(vec![None]);
        }
        Ok(vec![Some(b.convert(u, source)?)])
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
    r.register("convert", |attrs: &Attrs| {
        let mut a = AttrReader::new(attrs);
        let dtype = a.dtype("dtype")?;
        let saturate = a.flag("saturate")?;
        a.finish()?;
        Ok(Arc::new(Convert { dtype, saturate }) as Prim)
    });
    r.set_example("convert", crate::ir::attrs_json(r#"{"dtype": "f64"}"#));
}

/// To the other float dtype, and half the time back, so the rest of the program keeps one
/// dtype more often.
fn draw_convert(d: &mut dyn Draw) -> Result<Drawn, DrawError> {
    let x = d.pick();
    let from = d.ty(x.var).dtype;
    let to = match from {
        DType::F32 => DType::F64,
        _ => DType::F32,
    };
    let y = d.same(x.range, |b| b.convert(x.var, to))?;
    if d.chance(0.5) {
        return d.same(y.range, |b| b.convert(y.var, from));
    }
    Ok(y)
}
