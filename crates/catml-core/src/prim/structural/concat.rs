//! concat {"axis"}: joins operands along an axis; its pullback splits the cotangent (the adjoint
//! pair concatenation/splitting), each piece a gather of a contiguous range.

use std::sync::Arc;

use crate::ir::{
    AttrReader, Attrs, Builder, KernelError, Prim, Primitive, Registry, RuleError, TypeError, Var,
};
use crate::ir::{Draw, DrawError, Drawing, Drawn};
use crate::prim::dispatch::{eval_ring, eval_ring_rational, float_operand, RingKernel};
use crate::prim::Ops;
use crate::tensor::{kernels, Array, Element, RArray, Tensor, TensorType};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Concat {
    pub axis: usize,
}

impl RingKernel for Concat {
    fn ring<T: Element>(&self, x: &[&Array<T>]) -> Result<Array<T>, KernelError> {
        Ok(kernels::concat(x, self.axis)?)
    }
}

impl Primitive for Concat {
    fn name(&self) -> &str {
        "concat"
    }
    fn drawing(&self) -> Option<Drawing> {
        Some(Drawing::new(2, draw_concat))
    }
    fn f32_budget(&self, _inputs: &[TensorType], _output: &TensorType) -> crate::ir::Budget {
        crate::ir::Budget::Exact
    }
    fn fragment(&self) -> crate::ir::Fragment {
        crate::ir::Fragment::Core
    }
    fn copies_operand_values(&self) -> bool {
        true
    }
    fn attrs(&self) -> Attrs {
        crate::ir::attrs_of([("axis", self.axis.into())])
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType, TypeError> {
        if inputs.is_empty() {
            return Err(TypeError::Arity {
                expected: "at least 1".to_string(),
                found: 0,
            });
        }
        float_operand(inputs, 0)?;
        let first = &inputs[0];
        if self.axis >= first.rank() {
            return Err(TypeError::attr(
                "axis",
                format!("axis {} is out of range for {first}", self.axis),
            ));
        }
        let mut dims = first.dims().to_vec();
        for (i, t) in inputs.iter().enumerate().skip(1) {
            let fits = t.dtype == first.dtype
                && t.rank() == first.rank()
                && (0..t.rank()).all(|d| d == self.axis || t.dims()[d] == first.dims()[d]);
            if !fits {
                // The type operand 0 asks for, with `_` on the joined axis.
                let sizes: Vec<String> = (0..first.rank())
                    .map(|d| {
                        if d == self.axis {
                            "_".to_string()
                        } else {
                            first.dims()[d].to_string()
                        }
                    })
                    .collect();
                return Err(TypeError::Operand {
                    index: i,
                    expected: format!(
                        "{}[{}] to join operand 0 {first} on axis {}",
                        first.dtype,
                        sizes.join(", "),
                        self.axis
                    ),
                    found: t.clone(),
                });
            }
            dims[self.axis] += t.dims()[self.axis];
        }
        Ok(TensorType::new(first.dtype, dims))
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
    fn flops(&self, _inputs: &[TensorType], _output: &TensorType) -> u64 {
        0
    }
    fn jvp(
        &self,
        b: &mut Builder,
        x: &[Var],
        _y: Var,
        dx: &[Option<Var>],
    ) -> Result<Option<Var>, RuleError> {
        if dx.iter().all(Option::is_none) {
            return Ok(None);
        }
        let parts = x
            .iter()
            .zip(dx)
            .map(|(&xi, d)| match d {
                Some(d) => Ok(*d),
                None => {
                    let ty = b.ty(xi).clone();
                    b.zeros(&ty)
                }
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Some(b.concat(&parts, self.axis)?))
    }
    fn vjp(
        &self,
        b: &mut Builder,
        x: &[Var],
        _y: Var,
        u: Var,
    ) -> Result<Vec<Option<Var>>, RuleError> {
        let mut start = 0;
        let mut out = Vec::with_capacity(x.len());
        for &xi in x {
            let len = b.ty(xi).dims()[self.axis];
            out.push(Some(b.gather(
                u,
                self.axis,
                (start..start + len).collect(),
            )?));
            start += len;
        }
        Ok(out)
    }
    /// Batching: shared operands are broadcast over the batch, then joined along the shifted axis.
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
            Arc::new(Concat {
                axis: self.axis + 1,
            }),
        )
    }
}

pub(crate) fn register(r: &mut Registry) {
    r.register("concat", |attrs: &Attrs| {
        let mut a = AttrReader::new(attrs);
        let axis = a.usize("axis")?;
        a.finish()?;
        Ok(Arc::new(Concat { axis }) as Prim)
    });
    r.set_example("concat", crate::ir::attrs_json(r#"{"axis": 0}"#));
}

/// x with up to two parts of a fitting type (x again, a pooled value or a constant).
fn draw_concat(d: &mut dyn Draw) -> Result<Drawn, DrawError> {
    let x = d.pick();
    let x = d.ranked(x)?;
    let ty = d.ty(x.var);
    let axis = d.below(ty.rank());
    let fits = |t: &TensorType| {
        t.dtype == ty.dtype
            && t.rank() == ty.rank()
            && (0..t.rank()).all(|k| k == axis || t.dims()[k] == ty.dims()[k])
            && t.dims()[axis] <= 4
    };
    let mut parts = vec![x];
    let extra = d.int(0, 2);
    for _ in 0..extra {
        let p = if d.chance(0.3) {
            x
        } else {
            match d.pick_where(&fits) {
                Some(v) => v,
                None => d.constant_of(&ty)?,
            }
        };
        parts.push(p);
    }
    let r = parts.iter().fold(x.range, |acc, p| acc.hull(p.range));
    let vars: Vec<Var> = parts.iter().map(|p| p.var).collect();
    d.same(r, |b| b.concat(&vars, axis))
}
