//! cross_entropy (logits (B, C), labels i64 (B)) -> scalar mean loss
//! L = -(1/B) sum_b log_softmax(z_b)[y_b] = (1/B) sum_b (logsumexp(z_b) - z_b[y_b]).
//!
//! Differentiable in the logits only (labels are integers): with p = softmax(z) row-wise and
//! O = one_hot(y), dL = <G, dz> and z̄ = u G for G = (p - O) / B. A label outside 0..C is a
//! domain error at evaluation. Lowering: -(1/B) sum(O log_softmax(z)).

use std::sync::Arc;

use crate::ir::budget;
use crate::ir::{Builder, KernelError, Prim, Primitive, Registry, RuleError, TypeError, Var};
use crate::ir::{Draw, DrawError, Drawing, Drawn};
use crate::prim::dispatch::{arity, float_operand};
use crate::prim::structural::one_hot::{checked_index, index_operand};
use crate::prim::Ops;
use crate::tensor::{Array, Float, Tensor, TensorType};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CrossEntropy;

fn mean_loss<T: Float>(z: &Array<T>, labels: &[i64]) -> Result<T, KernelError> {
    let c = z.dims()[1];
    let mut total = 0.0f64;
    for (n, (row, &y)) in z.data().chunks_exact(c).zip(labels).enumerate() {
        let k = checked_index(y, n, c)?;
        let m = row.iter().copied().fold(T::neg_infinity(), T::max);
        let s: T = row.iter().fold(T::zero(), |s, &v| s + (v - m).exp());
        // Accumulate the batch in f64: the mean of many f32 terms loses less.
        total += (m + s.ln() - row[k]).to_f64();
    }
    Ok(T::from_f64(total / labels.len() as f64))
}

/// G = (softmax(z) - one_hot(y)) / B, as nodes.
fn gradient(b: &mut Builder, z: Var, labels: Var) -> Result<Var, TypeError> {
    let t = b.ty(z).clone();
    let (batch, classes) = (t.dims()[0], t.dims()[1]);
    let p = b.softmax(z, 1)?;
    let o = b.one_hot(labels, classes, t.dtype)?;
    let g = b.sub(p, o)?;
    b.div_count(g, batch)
}

impl Primitive for CrossEntropy {
    fn name(&self) -> &str {
        "cross_entropy"
    }
    fn drawing(&self) -> Option<Drawing> {
        Some(Drawing::new(1, draw_cross_entropy))
    }
    fn f32_budget(&self, _inputs: &[TensorType], _output: &TensorType) -> crate::ir::Budget {
        // Per row m + ln(sum e^(z - m)) - z_label in f32, accumulated in f64: the sum within
        // (D + n + 7)u, ln 8u ln n, the two additions u(M + ln n) and u(D + ln n), and u|y|.
        crate::ir::Budget::formula("gamma_c (1 + |y|), c = 2D + M + n + 8 + 10 ln n", |s| {
            let n = s.dims[0][1] as f64;
            let c = 2.0 * budget::spread(&s.ops[0])
                + budget::max_abs(&s.ops[0])
                + n
                + 8.0
                + 10.0 * n.ln();
            s.y.iter()
                .map(|y| budget::gamma(c) * (1.0 + y.abs()))
                .collect()
        })
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType, TypeError> {
        arity(inputs, 2)?;
        float_operand(inputs, 0)?;
        index_operand(inputs, 1)?;
        let (z, y) = (&inputs[0], &inputs[1]);
        if z.rank() != 2 {
            return Err(TypeError::Operand {
                index: 0,
                expected: "logits of rank 2 (batch, classes)".to_string(),
                found: z.clone(),
            });
        }
        if y.dims() != [z.dims()[0]] {
            return Err(TypeError::Operand {
                index: 1,
                expected: format!("i64[{}] (one label per row of {z})", z.dims()[0]),
                found: y.clone(),
            });
        }
        Ok(TensorType::scalar(z.dtype))
    }
    fn eval(&self, x: &[&Tensor]) -> Result<Tensor, KernelError> {
        let labels = x[1]
            .as_i64()
            .ok_or_else(|| KernelError::Unsupported(format!("labels of {}", x[1].dtype())))?;
        Ok(match x[0] {
            Tensor::F32(z) => Tensor::F32(Array::scalar(mean_loss(z, labels.data())?)),
            Tensor::F64(z) => Tensor::F64(Array::scalar(mean_loss(z, labels.data())?)),
            Tensor::I64(_) | Tensor::Bool(_) | Tensor::Stored(_) => {
                return Err(KernelError::Unsupported("integer logits".to_string()))
            }
        })
    }
    fn flops(&self, inputs: &[TensorType], _output: &TensorType) -> u64 {
        4 * inputs[0].numel() as u64
    }
    fn jvp(
        &self,
        b: &mut Builder,
        x: &[Var],
        _y: Var,
        dx: &[Option<Var>],
    ) -> Result<Option<Var>, RuleError> {
        let Some(dz) = dx[0] else { return Ok(None) };
        let g = gradient(b, x[0], x[1])?;
        let gd = b.mul(g, dz)?;
        Ok(Some(b.sum(gd, None)?))
    }
    fn vjp(
        &self,
        b: &mut Builder,
        x: &[Var],
        _y: Var,
        u: Var,
    ) -> Result<Vec<Option<Var>>, RuleError> {
        let t = b.ty(x[0]).clone();
        let g = gradient(b, x[0], x[1])?;
        let ub = b.broadcast(u, t.shape.clone(), vec![])?;
        Ok(vec![Some(b.mul(ub, g)?), None])
    }
    fn lower(&self, b: &mut Builder, x: &[Var]) -> Option<Result<Var, TypeError>> {
        Some((|| {
            let t = b.ty(x[0]).clone();
            let ls = b.log_softmax(x[0], 1)?;
            let o = b.one_hot(x[1], t.dims()[1], t.dtype)?;
            let picked = b.mul(o, ls)?;
            let total = b.sum(picked, None)?;
            let mean = b.div_count(total, t.dims()[0])?;
            b.neg(mean)
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
    crate::prim::register_unit(r, "cross_entropy", || Arc::new(CrossEntropy) as Prim);
}

/// The mean of -log_softmax(z)[label] over rows: in [0, (hi - lo) + ln C].
fn draw_cross_entropy(d: &mut dyn Draw) -> Result<Drawn, DrawError> {
    let x = d.pick();
    let x = d.moderate(x, 8.0)?;
    let z = d.matrix(x)?;
    let n = d.ty(z.var).dims().to_vec();
    let labels = d.indices(&[n[0]], n[1])?;
    let r = crate::prim::softmax::forward::log_softmax_range(z.range, n[1]).negated();
    d.same(r, |b| b.cross_entropy(z.var, labels))
}
