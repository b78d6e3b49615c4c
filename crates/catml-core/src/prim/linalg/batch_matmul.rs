//! batch_matmul {"transpose_a", "transpose_b"}: (..., m, k) x (..., k, n) -> (..., m, n), one
//! matrix product per index of the shared leading (batch) dims, either operand optionally read
//! transposed in its last two dims. Pullback per slice as for matmul: (u op(B)^T, op(A)^T u).
//! Lowering: each slice is selected by a fixed gather, multiplied by rank-2 matmul and the
//! results are concatenated.

use std::sync::Arc;

use super::matmul::MatMul;
use crate::ir::{
    AttrReader, Attrs, Builder, KernelError, Prim, Primitive, Registry, RuleError, TypeError, Var,
};
use crate::ir::{Draw, DrawError, Drawing, Drawn, Interval};
use crate::ir::{PermutedKernel, Permutes, SliceKernel, SliceOperand};
use crate::prim::dispatch::{
    arity, eval_float, eval_float_permuted, float_operand, FloatKernel, PermutedFloatKernel,
};
use crate::prim::Ops;
use crate::tensor::alloc;
use crate::tensor::kernels::{
    gemm_batched_permuted, gemm_batched_result, gemm_into, matmul_generic, MatRef, MatStack,
};
use crate::tensor::{keeps_last_axis, keeps_last_axis_in_matrix};
use crate::tensor::{Array, Element, Float, RArray, Shape, Tensor, TensorType};

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BatchMatMul {
    pub transpose_a: bool,
    pub transpose_b: bool,
}

/// Sizes of one product: batch count and (m, k, n).
#[derive(Debug, Clone, Copy)]
struct Sizes {
    batch: usize,
    m: usize,
    k: usize,
    n: usize,
}

impl BatchMatMul {
    pub fn new(transpose_a: bool, transpose_b: bool) -> BatchMatMul {
        BatchMatMul {
            transpose_a,
            transpose_b,
        }
    }

    fn sizes(&self, a: &[usize], b: &[usize]) -> Sizes {
        let r = a.len();
        let (m, k) = if self.transpose_a {
            (a[r - 1], a[r - 2])
        } else {
            (a[r - 2], a[r - 1])
        };
        let n = if self.transpose_b { b[r - 2] } else { b[r - 1] };
        Sizes {
            batch: a[..r - 2].iter().product(),
            m,
            k,
            n,
        }
    }
}

impl BatchMatMul {
    /// Matrix `i` of both operands, each read transposed where its flag says.
    fn slices<'a, T>(
        &self,
        a: &MatStack<'a, T>,
        b: &MatStack<'a, T>,
        i: usize,
    ) -> (MatRef<'a, T>, MatRef<'a, T>) {
        let op = |m: MatRef<'a, T>, t: bool| if t { m.transposed() } else { m };
        (
            op(a.matrix(i), self.transpose_a),
            op(b.matrix(i), self.transpose_b),
        )
    }

    /// The result's dims: the batch dims of `a`, then (m, n).
    fn out_shape(a: &[usize], s: &Sizes) -> Shape {
        let mut dims = a[..a.len() - 2].to_vec();
        dims.extend([s.m, s.n]);
        Shape::new(dims)
    }

    /// The exact product slice by slice, for any ring.
    fn exact<T: Element>(&self, a: &Array<T>, b: &Array<T>) -> Result<Array<T>, KernelError> {
        let s = self.sizes(a.dims(), b.dims());
        let (sa, sb) = (
            MatStack::new(a.data(), a.dims()),
            MatStack::new(b.data(), b.dims()),
        );
        let mut out: alloc::Elems<T> = alloc::with_capacity(s.batch * s.m * s.n)?;
        for i in 0..s.batch {
            let (x, y) = self.slices(&sa, &sb, i);
            out.extend_from_slice(&matmul_generic(x, y)?);
        }
        Ok(Array::with_elems(Self::out_shape(a.dims(), &s), out).expect("batch * m * n elements"))
    }

    /// The products of the stacks `a` and `b`, the result permuted by `result` if given.
    fn product<T: Float>(
        &self,
        a: MatStack<'_, T>,
        b: MatStack<'_, T>,
        result: Option<&[usize]>,
    ) -> Result<Array<T>, KernelError> {
        let s = self.sizes(a.dims(), b.dims());
        let slices = |i| self.slices(&a, &b, i);
        let dims = Self::out_shape(a.dims(), &s);
        Ok(match result {
            None => {
                let out = gemm_batched_result(s.batch, (s.m, s.n), slices)?;
                Array::with_elems(dims, out).expect("batch * m * n elements")
            }
            Some(perm) => {
                let batch = &dims.dims()[..dims.rank() - 2];
                let out = gemm_batched_permuted(batch, (s.m, s.n), perm, slices)?;
                let permuted: Vec<usize> = perm.iter().map(|&p| dims.dims()[p]).collect();
                Array::with_elems(permuted, out).expect("batch * m * n elements")
            }
        })
    }
}

/// Operand `k` as a stack of matrices, read through its permute if it has one.
pub(crate) fn stack_of<'a, T: Clone>(
    x: &'a Array<T>,
    k: usize,
    permutes: &Permutes<'_>,
) -> MatStack<'a, T> {
    match permutes.operands.get(k).copied().flatten() {
        Some(perm) => MatStack::permuted(x.data(), x.dims(), perm),
        None => MatStack::new(x.data(), x.dims()),
    }
}

impl FloatKernel for BatchMatMul {
    fn float<T: Float>(&self, x: &[&Array<T>]) -> Result<Array<T>, KernelError> {
        self.float_permuted(x, Permutes::NONE)
    }
}

impl PermutedFloatKernel for BatchMatMul {
    fn float_permuted<T: Float>(
        &self,
        x: &[&Array<T>],
        permutes: Permutes<'_>,
    ) -> Result<Array<T>, KernelError> {
        let (a, b) = (stack_of(x[0], 0, &permutes), stack_of(x[1], 1, &permutes));
        self.product(a, b, permutes.result)
    }
}

/// Either operand through a permute keeping unit-stride rows or columns (a swap of the last
/// two axes among them), and the result through one keeping the last axis last (its rows
/// written as runs of unit stride).
impl PermutedKernel for BatchMatMul {
    fn reads(&self, inputs: &[TensorType], k: usize, perm: &[usize]) -> bool {
        inputs
            .get(k)
            .is_some_and(|t| keeps_last_axis_in_matrix(perm, t.rank()))
    }
    fn writes(&self, inputs: &[TensorType], perm: &[usize]) -> bool {
        keeps_last_axis(perm, inputs[0].rank())
    }
    fn eval_permuted(&self, x: &[&Tensor], permutes: Permutes<'_>) -> Result<Tensor, KernelError> {
        eval_float_permuted(self, x, permutes)
    }
}

impl BatchMatMul {
    /// The products into `out`, one after another, as `product` computes them without a
    /// permuted result (each product on its own, by the same GEMM).
    fn write<T: Float>(&self, x: &[SliceOperand<'_, T>], out: &mut [T]) {
        let s = self.sizes(x[0].dims, x[1].dims);
        let (a, b) = (
            MatStack::new(x[0].data, x[0].dims),
            MatStack::new(x[1].data, x[1].dims),
        );
        for (i, c) in out.chunks_exact_mut((s.m * s.n).max(1)).enumerate() {
            let (p, q) = self.slices(&a, &b, i);
            gemm_into(c, p, q, false);
        }
    }
}

impl SliceKernel for BatchMatMul {
    fn serves(&self, inputs: &[TensorType], output: &TensorType) -> bool {
        output.dtype.is_float() && inputs.iter().all(|t| t.dtype == output.dtype)
    }
    fn slice_f32(&self, x: &[SliceOperand<'_, f32>], out: &mut [f32]) {
        self.write(x, out)
    }
    fn slice_f64(&self, x: &[SliceOperand<'_, f64>], out: &mut [f64]) {
        self.write(x, out)
    }
}

impl Primitive for BatchMatMul {
    fn name(&self) -> &str {
        "batch_matmul"
    }
    fn slice_kernel(&self) -> Option<&dyn SliceKernel> {
        Some(self)
    }
    fn drawing(&self) -> Option<Drawing> {
        Some(Drawing::new(2, draw_batch_matmul))
    }
    fn f32_budget(&self, inputs: &[TensorType], _output: &TensorType) -> crate::ir::Budget {
        let a = inputs[0].dims();
        let r = a.len();
        crate::ir::Budget::sum(if self.transpose_a { a[r - 2] } else { a[r - 1] })
    }
    fn attrs(&self) -> Attrs {
        let mut a = Attrs::new();
        if self.transpose_a {
            a.insert("transpose_a".into(), true.into());
        }
        if self.transpose_b {
            a.insert("transpose_b".into(), true.into());
        }
        a
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType, TypeError> {
        arity(inputs, 2)?;
        float_operand(inputs, 0)?;
        let (a, b) = (&inputs[0], &inputs[1]);
        if a.rank() < 3 {
            return Err(TypeError::Operand {
                index: 0,
                expected: "rank >= 3 (batch dims, then a matrix)".to_string(),
                found: a.clone(),
            });
        }
        let r = a.rank();
        if b.dtype != a.dtype || b.rank() != r || b.dims()[..r - 2] != a.dims()[..r - 2] {
            return Err(TypeError::Operand {
                index: 1,
                expected: format!(
                    "{} of rank {r} with batch dims {:?}",
                    a.dtype,
                    &a.dims()[..r - 2]
                ),
                found: b.clone(),
            });
        }
        let s = self.sizes(a.dims(), b.dims());
        let k2 = if self.transpose_b {
            b.dims()[r - 1]
        } else {
            b.dims()[r - 2]
        };
        if s.k != k2 {
            return Err(TypeError::Invalid(format!(
                "contraction sizes differ: {a} by {b} (inner {} vs {k2})",
                s.k
            )));
        }
        let mut dims = a.dims()[..r - 2].to_vec();
        dims.extend([s.m, s.n]);
        Ok(TensorType::new(a.dtype, dims))
    }
    fn eval(&self, x: &[&Tensor]) -> Result<Tensor, KernelError> {
        eval_float(self, x)
    }
    /// Each product is counted as it is written (`kernels::gemm_batched_result`).
    fn counts_non_finite(&self, _output: &TensorType) -> bool {
        true
    }
    fn permuted(&self) -> Option<&dyn PermutedKernel> {
        Some(self)
    }
    fn has_rational_eval(&self) -> bool {
        true
    }
    fn eval_rational(&self, x: &[&RArray]) -> Option<Result<RArray, KernelError>> {
        Some(self.exact(x[0], x[1]))
    }
    fn is_contraction(&self) -> bool {
        true
    }

    fn flops(&self, inputs: &[TensorType], output: &TensorType) -> u64 {
        let s = self.sizes(inputs[0].dims(), inputs[1].dims());
        2 * output.numel() as u64 * s.k as u64
    }
    fn jvp(
        &self,
        b: &mut Builder,
        x: &[Var],
        _y: Var,
        dx: &[Option<Var>],
    ) -> Result<Option<Var>, RuleError> {
        crate::prim::elementwise::arith::bilinear_jvp(b, Arc::new(*self), x, dx)
    }
    fn vjp(
        &self,
        b: &mut Builder,
        x: &[Var],
        _y: Var,
        u: Var,
    ) -> Result<Vec<Option<Var>>, RuleError> {
        // As for matmul, slice by slice.
        let product = |b: &mut Builder, ta, tb, p, q| b.batch_matmul(p, q, ta, tb);
        super::matmul::product_vjp(b, (self.transpose_a, self.transpose_b), x, u, product)
    }
    fn lower(&self, b: &mut Builder, x: &[Var]) -> Option<Result<Var, TypeError>> {
        Some((|| {
            let (at, bt) = (b.ty(x[0]).clone(), b.ty(x[1]).clone());
            let r = at.rank();
            let s = self.sizes(at.dims(), bt.dims());
            let last2 = |t: &TensorType| [t.dims()[r - 2], t.dims()[r - 1]];
            let (ad, bd) = (last2(&at), last2(&bt));
            let a3 = b.reshape(x[0], [s.batch, ad[0], ad[1]])?;
            let b3 = b.reshape(x[1], [s.batch, bd[0], bd[1]])?;
            let mut parts = Vec::with_capacity(s.batch);
            for i in 0..s.batch {
                let ai = b.gather(a3, 0, vec![i])?;
                let ai = b.reshape(ai, ad)?;
                let bi = b.gather(b3, 0, vec![i])?;
                let bi = b.reshape(bi, bd)?;
                let ci = b.op(
                    Arc::new(MatMul::new(self.transpose_a, self.transpose_b)),
                    &[ai, bi],
                )?;
                parts.push(b.reshape(ci, [1, s.m, s.n])?);
            }
            let c = if parts.len() == 1 {
                parts[0]
            } else {
                b.concat(&parts, 0)?
            };
            let mut dims = at.dims()[..r - 2].to_vec();
            dims.extend([s.m, s.n]);
            b.reshape(c, dims)
        })())
    }
    /// Batching: the batch is one more batch dimension.
    fn batch(
        &self,
        b: &mut crate::ir::Builder,
        x: &[crate::ir::Var],
        at: &crate::ir::BatchCtx,
    ) -> Result<crate::ir::Var, crate::ir::RuleError> {
        // Batch dims lead both operands: the batch becomes one more of them.
        crate::prim::batching::with_prim(b, x, at, at.prim.clone())
    }
}

pub(crate) fn register(r: &mut Registry) {
    r.register("batch_matmul", |attrs: &Attrs| {
        let mut a = AttrReader::new(attrs);
        let transpose_a = a.flag("transpose_a")?;
        let transpose_b = a.flag("transpose_b")?;
        a.finish()?;
        Ok(Arc::new(BatchMatMul::new(transpose_a, transpose_b)) as Prim)
    });
}

/// Each element sums k products.
fn draw_batch_matmul(d: &mut dyn Draw) -> Result<Drawn, DrawError> {
    let x = d.pick();
    let x = d.moderate(x, 2.0)?;
    let rank = d.int(3, d.max_rank().max(3));
    let a = d.shaped(x, rank)?;
    let ad = d.ty(a.var).dims().to_vec();
    let (ta, tb) = (d.chance(0.25), d.chance(0.25));
    let k = if ta { ad[rank - 2] } else { ad[rank - 1] };
    let n = d.int(1, d.max_dim());
    let mut bdims = ad[..rank - 2].to_vec();
    bdims.extend(if tb { [n, k] } else { [k, n] });
    let w = d.weight(&TensorType::new(d.ty(a.var).dtype, bdims))?;
    let w = d.moderate(w, 2.0)?;
    let r = Interval::symmetric(k as f64 * a.range.mag() * w.range.mag());
    d.same(r, |b| b.batch_matmul(a.var, w.var, ta, tb))
}
