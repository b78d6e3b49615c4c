//! one_hot {"classes", "dtype"}: integer indices (...) to 0/1 rows (..., classes) of a float
//! dtype. It reads its indices at run time; an index outside 0..classes is a domain error. The
//! result depends only on integers, so it carries no tangent: this is how the lowerings of
//! `take`, `scatter_rows` and `cross_entropy` turn runtime indices into a matrix product.

use std::sync::Arc;

use crate::ir::{
    AttrReader, Attrs, Builder, KernelError, Prim, Primitive, Registry, RuleError, TypeError, Var,
};
use crate::prim::dispatch::arity;
use num_traits::ToPrimitive;

use crate::ir::{Draw, DrawError, Drawing, Drawn, Interval};
use crate::prim::Ops;
use crate::tensor::alloc::Elems;
use crate::tensor::{Array, DType, Element, RArray, Tensor, TensorType};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OneHot {
    pub classes: usize,
    pub dtype: DType,
}

/// Index `i` at `position` as a row number below `rows`, or a domain error saying so.
pub(crate) fn checked_index(i: i64, position: usize, rows: usize) -> Result<usize, KernelError> {
    match usize::try_from(i) {
        Ok(k) if k < rows => Ok(k),
        _ => Err(KernelError::Domain(format!(
            "index {i} at position {position} is out of range: expected 0 <= index < {rows}"
        ))),
    }
}

/// Integer indices given as exact rationals (the rational interpreter holds every operand as
/// a rational); a fraction or a value outside i64 is a domain error naming its position.
pub(crate) fn rational_indices(a: &RArray) -> Result<Array<i64>, KernelError> {
    let idx = a
        .data()
        .iter()
        .enumerate()
        .map(|(n, r)| {
            r.is_integer()
                .then(|| r.to_integer().to_i64())
                .flatten()
                .ok_or_else(|| {
                    KernelError::Domain(format!("index {r} at position {n} is not an integer"))
                })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Array::new(a.shape().clone(), idx).expect("same element count"))
}

/// An integer operand, as `what` (for messages).
pub(crate) fn index_operand(inputs: &[TensorType], i: usize) -> Result<(), TypeError> {
    if inputs[i].dtype == DType::I64 {
        Ok(())
    } else {
        Err(TypeError::DType {
            index: i,
            expected: "i64 indices".to_string(),
            found: inputs[i].dtype,
        })
    }
}

fn encode<T: Element>(idx: &[i64], classes: usize) -> Result<Elems<T>, KernelError> {
    let mut out = crate::tensor::alloc::filled(idx.len() * classes, T::zero())?;
    for (n, &i) in idx.iter().enumerate() {
        out[n * classes + checked_index(i, n, classes)?] = T::one();
    }
    Ok(out)
}

impl Primitive for OneHot {
    fn name(&self) -> &str {
        "one_hot"
    }
    fn drawing(&self) -> Option<Drawing> {
        Some(Drawing::new(1, draw_one_hot))
    }
    fn f32_budget(&self, _inputs: &[TensorType], _output: &TensorType) -> crate::ir::Budget {
        crate::ir::Budget::Exact
    }
    fn fragment(&self) -> crate::ir::Fragment {
        crate::ir::Fragment::LoweringExtra(
            "turns runtime integer indices (take, scatter_rows, cross_entropy) into a matrix",
        )
    }
    fn attrs(&self) -> Attrs {
        crate::ir::attrs_of([
            ("classes", self.classes.into()),
            ("dtype", self.dtype.as_str().into()),
        ])
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType, TypeError> {
        arity(inputs, 1)?;
        index_operand(inputs, 0)?;
        if self.classes == 0 {
            return Err(TypeError::attr(
                "classes",
                "expected a positive count, found 0",
            ));
        }
        if !self.dtype.is_float() {
            return Err(TypeError::attr(
                "dtype",
                format!("expected f32 or f64, found {}", self.dtype),
            ));
        }
        let mut dims = inputs[0].dims().to_vec();
        dims.push(self.classes);
        Ok(TensorType::new(self.dtype, dims))
    }
    fn eval(&self, x: &[&Tensor]) -> Result<Tensor, KernelError> {
        let idx = x[0]
            .as_i64()
            .ok_or_else(|| KernelError::Unsupported(format!("one_hot of {}", x[0].dtype())))?;
        let mut dims = idx.dims().to_vec();
        dims.push(self.classes);
        let t = match self.dtype {
            DType::F32 => {
                Array::with_elems(dims, encode(idx.data(), self.classes)?).map(Tensor::F32)
            }
            DType::F64 => {
                Array::with_elems(dims, encode(idx.data(), self.classes)?).map(Tensor::F64)
            }
            d => return Err(KernelError::Unsupported(format!("one_hot to {d}"))),
        };
        t.map_err(|e| KernelError::Unsupported(e.to_string()))
    }
    fn has_rational_eval(&self) -> bool {
        true
    }
    fn eval_rational(&self, x: &[&RArray]) -> Option<Result<RArray, KernelError>> {
        Some((|| {
            let idx = rational_indices(x[0])?;
            let mut dims = idx.dims().to_vec();
            dims.push(self.classes);
            let rows = encode(idx.data(), self.classes)?;
            Ok(Array::with_elems(dims, rows).expect("one row per index"))
        })())
    }
    fn flops(&self, _inputs: &[TensorType], _output: &TensorType) -> u64 {
        0
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
    /// Batching: the batch is one more axis of indices.
    fn batch(
        &self,
        b: &mut crate::ir::Builder,
        x: &[crate::ir::Var],
        at: &crate::ir::BatchCtx,
    ) -> Result<crate::ir::Var, crate::ir::RuleError> {
        // The result appends the class axis to the indices' shape, so a leading batch axis stays.
        crate::prim::batching::with_prim(b, x, at, at.prim.clone())
    }
}

pub(crate) fn register(r: &mut Registry) {
    r.register("one_hot", |attrs: &Attrs| {
        let mut a = AttrReader::new(attrs);
        let classes = a.usize("classes")?;
        let dtype = a.dtype("dtype")?;
        a.finish()?;
        Ok(Arc::new(OneHot { classes, dtype }) as Prim)
    });
    r.set_example(
        "one_hot",
        crate::ir::attrs_json(r#"{"classes": 2, "dtype": "f64"}"#),
    );
}

fn draw_one_hot(d: &mut dyn Draw) -> Result<Drawn, DrawError> {
    let dtype = d.some_dtype();
    let dims = d.index_dims();
    let classes = d.int(1, d.max_dim());
    let idx = d.indices(&dims, classes)?;
    d.same(Interval::new(0.0, 1.0), |b| b.one_hot(idx, classes, dtype))
}
