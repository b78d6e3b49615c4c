//! unpack {"offset", "shape"}: the elements `offset .. offset + numel(shape)` of a rank-1
//! operand, as a tensor of `shape`. It reads one result out of a `scan` node, whose value is
//! its results packed one after another (docs/scan.md). Linear: its JVP unpacks the tangent,
//! its VJP places the cotangent between zeros. Batched (`vmap`), each example's packed value is
//! a row of a (B, L) operand, and the same run is read out of every row.

use std::sync::Arc;

use crate::ir::{
    attrs_of, AttrReader, Attrs, Builder, KernelError, Prim, Primitive, Registry, RuleError,
    TypeError, Var,
};
use crate::prim::dispatch::float_operand;
use crate::prim::Ops;
use crate::tensor::{Array, Shape, Tensor, TensorType};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unpack {
    pub offset: usize,
    pub shape: Shape,
}

impl Unpack {
    pub fn new(offset: usize, shape: impl Into<Shape>) -> Unpack {
        Unpack {
            offset,
            shape: shape.into(),
        }
    }
}

impl Primitive for Unpack {
    fn name(&self) -> &str {
        crate::prim::names::UNPACK
    }
    fn formula(&self) -> Option<&'static str> {
        Some("y = reshape(x[offset .. offset + numel(shape)], shape)")
    }
    fn attrs(&self) -> Attrs {
        attrs_of([
            ("offset", self.offset.into()),
            ("shape", self.shape.dims().to_vec().into()),
        ])
    }
    fn drawing(&self) -> Option<crate::ir::Drawing> {
        Some(crate::ir::Drawing::new(1, draw_unpack))
    }
    fn copies_operand_values(&self) -> bool {
        true
    }
    fn flops(&self, _inputs: &[TensorType], _output: &TensorType) -> u64 {
        0
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType, TypeError> {
        if inputs.len() != 1 {
            return Err(TypeError::Arity {
                expected: "1".to_string(),
                found: inputs.len(),
            });
        }
        float_operand(inputs, 0)?;
        let x = &inputs[0];
        let end = self.offset.checked_add(self.shape.numel());
        if x.rank() != 1 || end.is_none_or(|e| e > x.dims()[0]) {
            return Err(TypeError::Operand {
                index: 0,
                expected: format!(
                    "a rank-1 tensor of at least {} elements",
                    end.map_or("too many".to_string(), |e| e.to_string())
                ),
                found: x.clone(),
            });
        }
        Ok(TensorType::new(x.dtype, self.shape.clone()))
    }
    fn eval(&self, inputs: &[&Tensor]) -> Result<Tensor, KernelError> {
        fn part<T: Clone>(u: &Unpack, a: &Array<T>) -> Result<Array<T>, KernelError> {
            let data = a
                .data()
                .get(u.offset..u.offset + u.shape.numel())
                .ok_or_else(|| KernelError::Unsupported("unpack: operand too short".into()))?;
            Array::new(u.shape.clone(), data.to_vec())
                .map_err(|e| KernelError::Unsupported(e.to_string()))
        }
        Ok(match inputs[0] {
            Tensor::F32(a) => Tensor::F32(part(self, a)?),
            Tensor::F64(a) => Tensor::F64(part(self, a)?),
            t => {
                return Err(KernelError::Unsupported(format!(
                    "unpack reads f32 or f64, found {}",
                    t.dtype()
                )))
            }
        })
    }
    fn jvp(
        &self,
        b: &mut Builder,
        _x: &[Var],
        _y: Var,
        dx: &[Option<Var>],
    ) -> Result<Option<Var>, RuleError> {
        match dx[0] {
            None => Ok(None),
            Some(d) => Ok(Some(b.op(Arc::new(self.clone()), &[d])?)),
        }
    }
    fn vjp(
        &self,
        b: &mut Builder,
        x: &[Var],
        _y: Var,
        dy: Var,
    ) -> Result<Vec<Option<Var>>, RuleError> {
        let xt = b.ty(x[0]).clone();
        let total = xt.dims()[0];
        let n = self.shape.numel();
        let flat = b.reshape(dy, [n])?;
        let mut parts = Vec::with_capacity(3);
        if self.offset > 0 {
            parts.push(b.zeros(&TensorType::new(xt.dtype, [self.offset]))?);
        }
        parts.push(flat);
        let rest = total - self.offset - n;
        if rest > 0 {
            parts.push(b.zeros(&TensorType::new(xt.dtype, [rest]))?);
        }
        let whole = if parts.len() == 1 {
            parts[0]
        } else {
            b.concat(&parts, 0)?
        };
        Ok(vec![Some(whole)])
    }
    /// A batched operand is (B, L), one packed value per example: the run is read out of each
    /// row by the unpack kernel itself, so the batch equals a loop over examples bit for bit.
    fn batch(
        &self,
        b: &mut Builder,
        x: &[Var],
        at: &crate::ir::BatchCtx,
    ) -> Result<Var, RuleError> {
        crate::prim::batching::per_example(b, x, at)
    }
}

/// A run of a value's elements, flattened first, as a tensor of one or two axes.
fn draw_unpack(d: &mut dyn crate::ir::Draw) -> Result<crate::ir::Drawn, crate::ir::DrawError> {
    let x = d.pick();
    let n = d.ty(x.var).numel();
    let len = d.int(1, n);
    let offset = d.int(0, n - len);
    let shape = if len % 2 == 0 && d.chance(0.5) {
        vec![2, len / 2]
    } else {
        vec![len]
    };
    d.same(x.range, |b| {
        let flat = b.reshape(x.var, [n])?;
        b.op(Arc::new(Unpack::new(offset, shape)), &[flat])
    })
}

pub(crate) fn register(r: &mut Registry) {
    r.register(crate::prim::names::UNPACK, |attrs: &Attrs| {
        let mut a = AttrReader::new(attrs);
        let offset = a.usize("offset")?;
        let shape = a.shape("shape")?;
        a.finish()?;
        Ok(Arc::new(Unpack::new(offset, shape)) as Prim)
    });
    r.set_example(
        crate::prim::names::UNPACK,
        attrs_of([("offset", 0.into()), ("shape", vec![1usize].into())]),
    );
}
