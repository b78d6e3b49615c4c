//! argmax {"axis": k}: the position of the largest entry along axis k, as i64, with the axis
//! removed from the shape. Ties pick the first (smallest) position.
//!
//! The result is an integer and piecewise constant in x, so it carries no tangent and passes
//! no cotangent back: differentiating through it gives no gradient path (as JAX does).

use crate::ir::{Draw, DrawError, Drawn, Interval};
use crate::prim::Ops;
use std::sync::Arc;

use super::slices::{kept, reduce_slices};
use crate::ir::{
    AttrReader, Attrs, Budget, Builder, KernelError, Prim, Primitive, Registry, RuleError,
    RuleKind, TypeError, Var,
};
use crate::prim::dispatch::{arity, float_operand};
use crate::tensor::alloc::{self, AllocError};
use crate::tensor::{Array, DType, Element, RArray, Rational, Tensor, TensorType};

const NO_DERIVATIVE: &str =
    "integer output: no tangent and no gradient path; ties pick the first position";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Argmax {
    pub axis: usize,
}

/// The first position of the largest entry of a slice.
fn first_largest<T: PartialOrd>(s: &[T]) -> usize {
    let mut k = 0;
    for (i, v) in s.iter().enumerate().skip(1) {
        if *v > s[k] {
            k = i;
        }
    }
    k
}

impl Argmax {
    fn run<T: Element + PartialOrd, U: Element>(
        &self,
        x: &Array<T>,
        to: impl Fn(usize) -> U,
    ) -> Result<Array<U>, AllocError> {
        // One position per slice, in the kept axes' row-major order.
        let mut slices = Vec::new();
        reduce_slices(x, &[self.axis], |s| {
            slices.push(first_largest(s));
            T::zero()
        })?;
        let dims: Vec<usize> = kept(x.dims().len(), &[self.axis])
            .iter()
            .map(|&i| x.dims()[i])
            .collect();
        let positions = alloc::collect(slices.into_iter().map(to))?;
        Ok(Array::with_elems(dims, positions).expect("one position per slice"))
    }
}

impl Primitive for Argmax {
    fn name(&self) -> &str {
        "argmax"
    }
    fn drawing(&self) -> Option<crate::ir::Drawing> {
        Some(crate::ir::Drawing::new(1, draw_argmax))
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
        Some("i64 position of the largest x along `axis` (removed); ties: the first")
    }
    fn attrs(&self) -> Attrs {
        crate::ir::attrs_of([("axis", self.axis.into())])
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType, TypeError> {
        arity(inputs, 1)?;
        float_operand(inputs, 0)?;
        let x = &inputs[0];
        if self.axis >= x.rank() {
            return Err(TypeError::attr(
                "axis",
                format!(
                    "axis {} is out of range for {x} (rank {})",
                    self.axis,
                    x.rank()
                ),
            ));
        }
        let dims: Vec<usize> = kept(x.rank(), &[self.axis])
            .iter()
            .map(|&i| x.dims()[i])
            .collect();
        Ok(TensorType::new(DType::I64, dims))
    }
    fn eval(&self, x: &[&Tensor]) -> Result<Tensor, KernelError> {
        match x[0] {
            Tensor::F32(a) => Ok(Tensor::I64(self.run(a, |k| k as i64)?)),
            Tensor::F64(a) => Ok(Tensor::I64(self.run(a, |k| k as i64)?)),
            other => Err(KernelError::Unsupported(format!(
                "argmax of {}",
                other.dtype()
            ))),
        }
    }
    fn has_rational_eval(&self) -> bool {
        true
    }
    fn eval_rational(&self, x: &[&RArray]) -> Option<Result<RArray, KernelError>> {
        Some(
            self.run(x[0], |k| Rational::from_integer((k as i64).into()))
                .map_err(Into::into),
        )
    }
    /// f32 and f64 compare the same operand values, so they pick the same positions.
    fn f32_budget(&self, _inputs: &[TensorType], _output: &TensorType) -> Budget {
        Budget::Exact
    }
    fn flops(&self, inputs: &[TensorType], _output: &TensorType) -> u64 {
        inputs[0].numel() as u64
    }
    fn rule(&self) -> RuleKind {
        RuleKind::Convention(NO_DERIVATIVE)
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
}

pub(crate) fn register(r: &mut Registry) {
    r.register("argmax", |attrs: &Attrs| {
        let mut a = AttrReader::new(attrs);
        let axis = a.usize("axis")?;
        a.finish()?;
        Ok(Arc::new(Argmax { axis }) as Prim)
    });
    r.set_example("argmax", crate::ir::attrs_json(r#"{"axis": 0}"#));
}

/// one_hot(argmax x) along a random axis: values 0 and 1 (integer positions never enter the
/// generator's pool of float values).
fn draw_argmax(d: &mut dyn Draw) -> Result<Drawn, DrawError> {
    let (x, axis) = d.along_axis(f64::INFINITY)?;
    let ty = d.ty(x.var);
    let k = d.op(|b| b.argmax(x.var, axis))?;
    let classes = ty.dims()[axis];
    d.same(Interval::new(0.0, 1.0), |b| b.one_hot(k, classes, ty.dtype))
}
