//! linear (x, W, b): y = x W^T + b, with W of shape (out, in) and x of shape (in) or
//! (batch, in). Pullback: x̄ = u W, W̄ = u^T x, b̄ = Σ_rows u.

use std::sync::Arc;

use super::matmul::MatMul;
use crate::ir::{
    Builder, KernelError, Prim, Primitive, Registry, RuleError, SliceKernel, SliceOperand,
    TypeError, Var,
};
use crate::ir::{Draw, DrawError, Drawing, Drawn, Interval};
use crate::prim::dispatch::{arity, eval_float, FloatKernel};
use crate::prim::Ops;
use crate::tensor::alloc;
use crate::tensor::kernels::{gemm_into, gemm_into_result, matmul_generic, MatRef};
use crate::tensor::{Array, Float, RArray, Tensor, TensorType};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Linear;

/// (batch, in, out) of x's and W's shapes.
fn sizes(x: &[usize], w: &[usize]) -> (usize, usize, usize) {
    let batch = if x.len() == 2 { x[0] } else { 1 };
    (batch, w[1], w[0])
}

/// x and W^T as the product's operands.
fn product_operands<'a, T>(
    x: (&'a [T], &[usize]),
    w: (&'a [T], &[usize]),
) -> (MatRef<'a, T>, MatRef<'a, T>) {
    let (batch, inp, out) = sizes(x.1, w.1);
    (
        MatRef::new(x.0, batch, inp),
        MatRef::transpose_of(w.0, out, inp),
    )
}

impl FloatKernel for Linear {
    fn float<T: Float>(&self, x: &[&Array<T>]) -> Result<Array<T>, KernelError> {
        let (batch, _, out) = sizes(x[0].dims(), x[1].dims());
        let bias = x[2].data();
        // Start from the broadcast bias and accumulate x W^T onto it.
        let mut y = alloc::with_capacity(batch * out)?;
        for _ in 0..batch {
            y.extend_copied(bias);
        }
        let (a, w) = product_operands((x[0].data(), x[0].dims()), (x[1].data(), x[1].dims()));
        gemm_into_result(&mut y, a, w, true);
        // A single example (x of rank 1) gives y of rank 1; the shape is built without a Vec.
        let dims = [batch, out];
        let dims = if x[0].dims().len() == 2 {
            &dims[..]
        } else {
            &dims[1..]
        };
        Ok(Array::with_elems(dims, y).expect("batch * out elements"))
    }
}

impl Linear {
    /// y = x W^T + b into `y`, as `float` computes it: the bias in each row, then x W^T added
    /// by the product's accumulation.
    fn write<T: Float>(&self, x: &[SliceOperand<'_, T>], y: &mut [T]) {
        let bias = x[2].data;
        y.chunks_exact_mut(bias.len().max(1))
            .for_each(|row| row.copy_from_slice(bias));
        let (a, w) = product_operands((x[0].data, x[0].dims), (x[1].data, x[1].dims));
        gemm_into(y, a, w, true);
    }
}

impl SliceKernel for Linear {
    fn serves(&self, _inputs: &[TensorType], output: &TensorType) -> bool {
        output.dtype.is_float()
    }
    fn slice_f32(&self, x: &[SliceOperand<'_, f32>], out: &mut [f32]) {
        self.write(x, out)
    }
    fn slice_f64(&self, x: &[SliceOperand<'_, f64>], out: &mut [f64]) {
        self.write(x, out)
    }
}

impl Primitive for Linear {
    fn name(&self) -> &str {
        "linear"
    }
    fn slice_kernel(&self) -> Option<&dyn SliceKernel> {
        Some(self)
    }
    fn drawing(&self) -> Option<Drawing> {
        Some(Drawing::new(2, draw_linear))
    }
    fn f32_budget(&self, inputs: &[TensorType], _output: &TensorType) -> crate::ir::Budget {
        crate::ir::Budget::sum(inputs[1].dims()[1] + 1)
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType, TypeError> {
        arity(inputs, 3)?;
        crate::prim::dispatch::float_operand(inputs, 0)?;
        let (x, w, b) = (&inputs[0], &inputs[1], &inputs[2]);
        if w.rank() != 2 || w.dtype != x.dtype {
            return Err(TypeError::Operand {
                index: 1,
                expected: format!("a {} weight matrix (out, in)", x.dtype),
                found: w.clone(),
            });
        }
        let (out, inp) = (w.dims()[0], w.dims()[1]);
        if !(x.rank() == 1 || x.rank() == 2) || x.dims()[x.rank() - 1] != inp {
            return Err(TypeError::Operand {
                index: 0,
                expected: format!("({inp}) or (batch, {inp}) to fit W {w}"),
                found: x.clone(),
            });
        }
        if *b != TensorType::new(x.dtype, [out]) {
            return Err(TypeError::Operand {
                index: 2,
                expected: format!("{}[{out}] to fit W {w}", x.dtype),
                found: b.clone(),
            });
        }
        let mut dims = x.dims().to_vec();
        *dims.last_mut().expect("rank >= 1") = out;
        Ok(TensorType::new(x.dtype, dims))
    }
    fn counts_non_finite(&self, _output: &TensorType) -> bool {
        true
    }
    fn eval(&self, x: &[&Tensor]) -> Result<Tensor, KernelError> {
        eval_float(self, x)
    }
    fn has_rational_eval(&self) -> bool {
        true
    }
    fn eval_rational(&self, x: &[&RArray]) -> Option<Result<RArray, KernelError>> {
        let (batch, inp, out) = sizes(x[0].dims(), x[1].dims());
        let mut y = match matmul_generic(
            MatRef::new(x[0].data(), batch, inp),
            MatRef::transpose_of(x[1].data(), out, inp),
        ) {
            Ok(y) => y,
            Err(e) => return Some(Err(e.into())),
        };
        for (i, v) in y.iter_mut().enumerate() {
            *v = v.clone() + x[2].data()[i % out].clone();
        }
        let dims = if x[0].dims().len() == 2 {
            vec![batch, out]
        } else {
            vec![out]
        };
        Some(Array::with_elems(dims, y).map_err(|e| KernelError::Unsupported(e.to_string())))
    }
    fn is_contraction(&self) -> bool {
        true
    }

    fn flops(&self, inputs: &[TensorType], output: &TensorType) -> u64 {
        let inp = inputs[1].dims()[1] as u64;
        output.numel() as u64 * (2 * inp + 1)
    }
    fn jvp(
        &self,
        b: &mut Builder,
        x: &[Var],
        y: Var,
        dx: &[Option<Var>],
    ) -> Result<Option<Var>, RuleError> {
        // dy = dx W^T + x dW^T + db
        let out_ty = b.ty(y).clone();
        let as_rows = |b: &mut Builder, v: Var| -> Result<Var, TypeError> {
            let t = b.ty(v).clone();
            if t.rank() == 1 {
                b.reshape(v, [1, t.dims()[0]])
            } else {
                Ok(v)
            }
        };
        let nt = Arc::new(MatMul::new(false, true));
        let mut terms = Vec::new();
        if let Some(d) = dx[0] {
            let d2 = as_rows(b, d)?;
            terms.push(Some(b.op(nt.clone(), &[d2, x[1]])?));
        }
        if let Some(dw) = dx[1] {
            let x2 = as_rows(b, x[0])?;
            terms.push(Some(b.op(nt.clone(), &[x2, dw])?));
        }
        if let Some(db) = dx[2] {
            let rows = if out_ty.rank() == 2 {
                out_ty.dims()[0]
            } else {
                1
            };
            terms.push(Some(b.broadcast_rows(db, rows)?));
        }
        match crate::prim::sum_terms(b, &terms)? {
            Some(t) if out_ty.rank() == 1 => Ok(Some(b.reshape(t, out_ty.shape.clone())?)),
            other => Ok(other),
        }
    }
    fn vjp(
        &self,
        b: &mut Builder,
        x: &[Var],
        _y: Var,
        u: Var,
    ) -> Result<Vec<Option<Var>>, RuleError> {
        let xt = b.ty(x[0]).clone();
        let wt = b.ty(x[1]).clone();
        let (out, inp) = (wt.dims()[0], wt.dims()[1]);
        if xt.rank() == 2 {
            let dx = b.matmul(u, x[1])?;
            let dw = b.op(Arc::new(MatMul::new(true, false)), &[u, x[0]])?;
            let db = b.sum(u, Some(vec![0]))?;
            return Ok(vec![Some(dx), Some(dw), Some(db)]);
        }
        let u_row = b.reshape(u, [1, out])?;
        let dx_row = b.matmul(u_row, x[1])?;
        let dx = b.reshape(dx_row, [inp])?;
        let u_col = b.reshape(u, [out, 1])?;
        let x_row = b.reshape(x[0], [1, inp])?;
        let dw = b.matmul(u_col, x_row)?;
        Ok(vec![Some(dx), Some(dw), Some(u)])
    }
    fn lower(&self, b: &mut Builder, x: &[Var]) -> Option<Result<Var, TypeError>> {
        Some((|| {
            let xt = b.ty(x[0]).clone();
            let x2 = if xt.rank() == 1 {
                b.reshape(x[0], [1, xt.dims()[0]])?
            } else {
                x[0]
            };
            let wt = b.transpose(x[1])?;
            let xw = b.matmul(x2, wt)?;
            let rows = b.ty(xw).dims()[0];
            let bb = b.broadcast_rows(x[2], rows)?;
            let y = b.add(xw, bb)?;
            if xt.rank() == 1 {
                let out = b.ty(y).dims()[1];
                b.reshape(y, [out])
            } else {
                Ok(y)
            }
        })())
    }
    /// Batching: per example.
    fn batch(
        &self,
        b: &mut crate::ir::Builder,
        x: &[crate::ir::Var],
        at: &crate::ir::BatchCtx,
    ) -> Result<crate::ir::Var, crate::ir::RuleError> {
        crate::prim::batching::per_example(b, x, at)
    }
}

pub(crate) fn register(r: &mut Registry) {
    crate::prim::register_unit(r, "linear", || Arc::new(Linear) as Prim);
}

/// |y| <= in |x| |w| + |bias|.
fn draw_linear(d: &mut dyn Draw) -> Result<Drawn, DrawError> {
    let x = d.pick();
    let x = d.moderate(x, 2.0)?;
    let rank = d.ty(x.var).rank();
    let x = if rank == 1 || rank == 2 {
        x
    } else {
        d.matrix(x)?
    };
    let ty = d.ty(x.var);
    let inp = ty.dims()[ty.rank() - 1];
    let out = d.int(1, d.max_dim());
    let w = d.weight(&TensorType::new(ty.dtype, [out, inp]))?;
    let w = d.moderate(w, 2.0)?;
    let bias = d.weight(&TensorType::new(ty.dtype, [out]))?;
    let bias = d.moderate(bias, 2.0)?;
    let r = Interval::symmetric(inp as f64 * x.range.mag() * w.range.mag() + bias.range.mag());
    d.same(r, |b| b.linear(x.var, w.var, bias.var))
}
