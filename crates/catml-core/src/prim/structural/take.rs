//! take and scatter_rows: row selection by a runtime integer index tensor (embeddings).
//!
//! take (table (V, D), indices i64 (...)) -> (..., D): y[n] = table[idx[n]]. It is linear in the
//! table; the indices are integers and get no tangent or cotangent. Its transpose is
//! scatter_rows {"rows": V} (u (..., D), indices (...)) -> (V, D): out[k] = sum_{n: idx[n] = k}
//! u[n], the runtime-index form of a gather's transpose (G^T u)_k = sum_{j: i_j = k} u_j
//! (docs/derivatives.md).
//!
//! Lowering: with O = one_hot(idx) (N, V), take is O table and scatter_rows is O^T u.
//! Indices outside 0..V are a domain error at evaluation.

use std::sync::Arc;

use super::one_hot::{checked_index, index_operand, rational_indices};
use crate::ir::{
    AttrReader, Attrs, Builder, KernelError, Prim, Primitive, Registry, RuleError, TypeError, Var,
};
use crate::ir::{Draw, DrawError, Drawing, Drawn, Interval};
use crate::ir::{Linearity, Transpose};
use crate::prim::dispatch::{arity, float_operand};
use crate::prim::linalg::matmul::MatMul;
use crate::prim::Ops;
use crate::tensor::{Array, DType, Element, RArray, Tensor, TensorType};

/// (float operand, i64 indices) from a node's operands.
fn operands<'a>(x: &[&'a Tensor]) -> Result<(&'a Tensor, &'a Array<i64>), KernelError> {
    let idx = x[1]
        .as_i64()
        .ok_or_else(|| KernelError::Unsupported(format!("indices of dtype {}", x[1].dtype())))?;
    Ok((x[0], idx))
}

fn take_rows<T: Element>(table: &Array<T>, idx: &Array<i64>) -> Result<Array<T>, KernelError> {
    let (rows, width) = (table.dims()[0], table.dims()[1]);
    let mut out = crate::tensor::alloc::with_capacity(idx.len() * width)?;
    for (n, &i) in idx.data().iter().enumerate() {
        let k = checked_index(i, n, rows)?;
        out.extend_from_slice(&table.data()[k * width..(k + 1) * width]);
    }
    let mut dims = idx.dims().to_vec();
    dims.push(width);
    Ok(Array::with_elems(dims, out).expect("one row per index"))
}

fn scatter<T: Element>(
    u: &Array<T>,
    idx: &Array<i64>,
    rows: usize,
) -> Result<Array<T>, KernelError> {
    let width = *u.dims().last().expect("rank >= 1");
    let mut out = crate::tensor::alloc::filled(rows * width, T::zero())?;
    for (n, &i) in idx.data().iter().enumerate() {
        let k = checked_index(i, n, rows)?;
        let src = &u.data()[n * width..(n + 1) * width];
        for (o, s) in out[k * width..(k + 1) * width].iter_mut().zip(src) {
            *o = o.clone() + s.clone();
        }
    }
    Ok(Array::with_elems([rows, width], out).expect("rows * width"))
}

/// One-hot rows of the flattened indices: (N, classes).
fn one_hot_rows(b: &mut Builder, idx: Var, classes: usize, dtype: DType) -> Result<Var, TypeError> {
    let n = b.ty(idx).numel();
    let flat = b.reshape(idx, [n])?;
    b.one_hot(flat, classes, dtype)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Take;

impl Primitive for Take {
    fn name(&self) -> &str {
        "take"
    }
    fn drawing(&self) -> Option<Drawing> {
        Some(Drawing::new(1, draw_take))
    }
    fn f32_budget(&self, _inputs: &[TensorType], _output: &TensorType) -> crate::ir::Budget {
        crate::ir::Budget::Exact
    }
    fn copies_operand_values(&self) -> bool {
        true
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType, TypeError> {
        arity(inputs, 2)?;
        float_operand(inputs, 0)?;
        index_operand(inputs, 1)?;
        if inputs[0].rank() != 2 {
            return Err(TypeError::Operand {
                index: 0,
                expected: "a table of rank 2 (rows, width)".to_string(),
                found: inputs[0].clone(),
            });
        }
        let mut dims = inputs[1].dims().to_vec();
        dims.push(inputs[0].dims()[1]);
        Ok(TensorType::new(inputs[0].dtype, dims))
    }
    fn has_rational_eval(&self) -> bool {
        true
    }
    fn eval_rational(&self, x: &[&RArray]) -> Option<Result<RArray, KernelError>> {
        Some(rational_indices(x[1]).and_then(|idx| take_rows(x[0], &idx)))
    }
    fn eval(&self, x: &[&Tensor]) -> Result<Tensor, KernelError> {
        let (table, idx) = operands(x)?;
        Ok(match table {
            Tensor::F32(t) => Tensor::F32(take_rows(t, idx)?),
            Tensor::F64(t) => Tensor::F64(take_rows(t, idx)?),
            Tensor::I64(_) | Tensor::Bool(_) | Tensor::Stored(_) => {
                return Err(KernelError::Unsupported("integer table".to_string()))
            }
        })
    }
    fn flops(&self, _inputs: &[TensorType], _output: &TensorType) -> u64 {
        0
    }
    fn linearity(&self) -> Option<Linearity<'_>> {
        Some(Linearity::of(self, 0))
    }
    fn lower(&self, b: &mut Builder, x: &[Var]) -> Option<Result<Var, TypeError>> {
        Some((|| {
            let t = b.ty(x[0]).clone();
            let out = self.infer(&[t.clone(), b.ty(x[1]).clone()])?;
            let o = one_hot_rows(b, x[1], t.dims()[0], t.dtype)?;
            let y = b.matmul(o, x[0])?;
            b.reshape(y, out.shape)
        })())
    }
    /// Batching: batched indices into a shared table directly; a batched table per example.
    fn batch(
        &self,
        b: &mut crate::ir::Builder,
        x: &[crate::ir::Var],
        at: &crate::ir::BatchCtx,
    ) -> Result<crate::ir::Var, crate::ir::RuleError> {
        if at.only(&[1]) {
            // Rows of one shared table: the batch is one more axis of indices.
            return Ok(b.op(at.prim.clone(), x)?);
        }
        crate::prim::batching::per_example(b, x, at)
    }
}

impl Transpose for Take {
    fn transpose(&self, b: &mut Builder, x: &[Var], u: Var) -> Result<Var, RuleError> {
        let rows = b.ty(x[0]).dims()[0];
        Ok(b.scatter_rows(u, x[1], rows)?)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScatterRows {
    pub rows: usize,
}

impl Primitive for ScatterRows {
    fn name(&self) -> &str {
        "scatter_rows"
    }
    fn drawing(&self) -> Option<Drawing> {
        Some(Drawing::new(1, draw_scatter_rows))
    }
    fn f32_budget(&self, inputs: &[TensorType], _output: &TensorType) -> crate::ir::Budget {
        crate::ir::Budget::sum(inputs[1].numel())
    }
    fn attrs(&self) -> Attrs {
        crate::ir::attrs_of([("rows", self.rows.into())])
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType, TypeError> {
        arity(inputs, 2)?;
        float_operand(inputs, 0)?;
        index_operand(inputs, 1)?;
        let (u, idx) = (&inputs[0], &inputs[1]);
        if u.rank() != idx.rank() + 1 || u.dims()[..idx.rank()] != *idx.dims() {
            return Err(TypeError::Operand {
                index: 0,
                expected: format!("rows ({:?}, width) matching indices {idx}", idx.dims()),
                found: u.clone(),
            });
        }
        if self.rows == 0 {
            return Err(TypeError::attr(
                "rows",
                "expected a positive count, found 0",
            ));
        }
        Ok(TensorType::new(u.dtype, [self.rows, u.dims()[idx.rank()]]))
    }
    fn has_rational_eval(&self) -> bool {
        true
    }
    fn eval_rational(&self, x: &[&RArray]) -> Option<Result<RArray, KernelError>> {
        Some(rational_indices(x[1]).and_then(|idx| scatter(x[0], &idx, self.rows)))
    }
    fn eval(&self, x: &[&Tensor]) -> Result<Tensor, KernelError> {
        let (u, idx) = operands(x)?;
        Ok(match u {
            Tensor::F32(a) => Tensor::F32(scatter(a, idx, self.rows)?),
            Tensor::F64(a) => Tensor::F64(scatter(a, idx, self.rows)?),
            Tensor::I64(_) | Tensor::Bool(_) | Tensor::Stored(_) => {
                return Err(KernelError::Unsupported("integer rows".to_string()))
            }
        })
    }
    fn flops(&self, inputs: &[TensorType], _output: &TensorType) -> u64 {
        inputs[0].numel() as u64
    }
    fn linearity(&self) -> Option<Linearity<'_>> {
        Some(Linearity::of(self, 0))
    }
    fn lower(&self, b: &mut Builder, x: &[Var]) -> Option<Result<Var, TypeError>> {
        Some((|| {
            let t = b.ty(x[0]).clone();
            let width = t.dims()[t.rank() - 1];
            let o = one_hot_rows(b, x[1], self.rows, t.dtype)?;
            let u2 = b.reshape(x[0], [t.numel() / width, width])?;
            b.op(Arc::new(MatMul::new(true, false)), &[o, u2])
        })())
    }
    /// Batching: per example (each example scatters into its own rows).
    fn batch(
        &self,
        b: &mut crate::ir::Builder,
        x: &[crate::ir::Var],
        at: &crate::ir::BatchCtx,
    ) -> Result<crate::ir::Var, crate::ir::RuleError> {
        crate::prim::batching::per_example(b, x, at)
    }
}

impl Transpose for ScatterRows {
    fn transpose(&self, b: &mut Builder, x: &[Var], u: Var) -> Result<Var, RuleError> {
        Ok(b.take(u, x[1])?)
    }
}

pub(crate) fn register(r: &mut Registry) {
    crate::prim::register_unit(r, "take", || Arc::new(Take) as Prim);
    r.register("scatter_rows", |attrs: &Attrs| {
        let mut a = AttrReader::new(attrs);
        let rows = a.usize("rows")?;
        a.finish()?;
        Ok(Arc::new(ScatterRows { rows }) as Prim)
    });
    r.set_example("scatter_rows", crate::ir::attrs_json(r#"{"rows": 1}"#));
}

fn draw_take(d: &mut dyn Draw) -> Result<Drawn, DrawError> {
    let x = d.pick();
    let table = d.matrix(x)?;
    let rows = d.ty(table.var).dims()[0];
    let dims = d.index_dims();
    let idx = d.indices(&dims, rows)?;
    d.same(table.range, |b| b.take(table.var, idx))
}

/// Rows of u (..., D) added at indices into (rows, D): at most numel(indices) terms meet.
fn draw_scatter_rows(d: &mut dyn Draw) -> Result<Drawn, DrawError> {
    let x = d.pick();
    let x = d.moderate(x, 8.0)?;
    let x = d.ranked(x)?;
    let ud = d.ty(x.var).dims().to_vec();
    let lead = &ud[..ud.len() - 1];
    let rows = d.int(1, d.max_dim());
    let idx = d.indices(lead, rows)?;
    let n = lead.iter().product::<usize>() as f64;
    let r = Interval::new(n * x.range.lo.min(0.0), n * x.range.hi.max(0.0));
    d.same(r, |b| b.scatter_rows(x.var, idx, rows))
}
