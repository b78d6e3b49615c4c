//! matmul: rank-2 A B, optionally reading either operand transposed (`transpose_a`,
//! `transpose_b`; both absent in the core fragment's plain form). Pullback (u B^T, A^T u).

use std::sync::Arc;

use crate::ir::{
    AttrReader, Attrs, Builder, KernelError, Prim, Primitive, Registry, RuleError, TypeError, Var,
};
use crate::ir::{Draw, DrawError, Drawing, Drawn, Interval};
use crate::ir::{PermutedKernel, Permutes, SliceKernel, SliceOperand};
use crate::prim::dispatch::{arity, eval_float, float_operand, FloatKernel};
use crate::prim::Ops;
use crate::tensor::alloc::{AllocError, Elems};
use crate::tensor::kernels::{gemm_into, gemm_into_result, gemm_result, matmul_generic, MatRef};
use crate::tensor::{Array, Element, Float, RArray, Shape, Tensor, TensorType};

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MatMul {
    pub transpose_a: bool,
    pub transpose_b: bool,
}

impl MatMul {
    pub fn new(transpose_a: bool, transpose_b: bool) -> MatMul {
        MatMul {
            transpose_a,
            transpose_b,
        }
    }

    fn operand<'a, T>(data: &'a [T], dims: &[usize], transposed: bool) -> MatRef<'a, T> {
        if transposed {
            MatRef::transpose_of(data, dims[0], dims[1])
        } else {
            MatRef::new(data, dims[0], dims[1])
        }
    }

    fn run<T: Element>(
        &self,
        x: &[&Array<T>],
        mm: impl Fn(MatRef<'_, T>, MatRef<'_, T>) -> Result<Elems<T>, AllocError>,
    ) -> Result<Array<T>, KernelError> {
        let a = Self::operand(x[0].data(), x[0].dims(), self.transpose_a);
        let b = Self::operand(x[1].data(), x[1].dims(), self.transpose_b);
        let shape = Shape::from([a.rows, b.cols]);
        Ok(Array::with_elems(shape, mm(a, b)?).expect("gemm returns rows * cols elements"))
    }
}

/// sum += A B through the GEMM's own accumulation (its beta): one pass, no product buffer.
fn add_product<T: Float>(mm: &MatMul, x: [&Array<T>; 2], sum: &mut Array<T>) -> Option<()> {
    let a = MatMul::operand(x[0].data(), x[0].dims(), mm.transpose_a);
    let b = MatMul::operand(x[1].data(), x[1].dims(), mm.transpose_b);
    let c = sum.unique_data_mut()?;
    if c.len() != a.rows * b.cols || a.cols != b.rows {
        return None;
    }
    gemm_into_result(c, a, b, true);
    Some(())
}

impl FloatKernel for MatMul {
    fn float<T: Float>(&self, x: &[&Array<T>]) -> Result<Array<T>, KernelError> {
        self.run(x, gemm_result)
    }
}

impl MatMul {
    /// C = A B into `out`, as [`gemm_result`] computes it for `eval`.
    fn write_product<T: Float>(&self, x: &[SliceOperand<'_, T>], out: &mut [T]) {
        let a = Self::operand(x[0].data, x[0].dims, self.transpose_a);
        let b = Self::operand(x[1].data, x[1].dims, self.transpose_b);
        gemm_into(out, a, b, false);
    }
}

impl SliceKernel for MatMul {
    fn serves(&self, inputs: &[TensorType], output: &TensorType) -> bool {
        output.dtype.is_float() && inputs.iter().all(|t| t.dtype == output.dtype)
    }
    fn slice_f32(&self, x: &[SliceOperand<'_, f32>], out: &mut [f32]) {
        self.write_product(x, out)
    }
    fn slice_f64(&self, x: &[SliceOperand<'_, f64>], out: &mut [f64]) {
        self.write_product(x, out)
    }
}

/// Either operand through a transpose, read by flipping its flag: the product reads the
/// transpose's operand through strides, as it reads any transposed operand.
impl PermutedKernel for MatMul {
    fn reads(&self, inputs: &[TensorType], k: usize, perm: &[usize]) -> bool {
        inputs.get(k).is_some_and(|t| t.rank() == 2) && perm == [1, 0]
    }
    fn writes(&self, _inputs: &[TensorType], _perm: &[usize]) -> bool {
        false
    }
    fn eval_permuted(&self, x: &[&Tensor], permutes: Permutes<'_>) -> Result<Tensor, KernelError> {
        let flipped = |k: usize| permutes.operands.get(k).copied().flatten().is_some();
        let read = MatMul::new(self.transpose_a ^ flipped(0), self.transpose_b ^ flipped(1));
        eval_float(&read, x)
    }
}

impl Primitive for MatMul {
    fn name(&self) -> &str {
        "matmul"
    }
    fn permuted(&self) -> Option<&dyn PermutedKernel> {
        Some(self)
    }
    fn slice_kernel(&self) -> Option<&dyn SliceKernel> {
        Some(self)
    }
    fn drawing(&self) -> Option<Drawing> {
        Some(Drawing::new(3, draw_matmul))
    }
    fn f32_budget(&self, inputs: &[TensorType], _output: &TensorType) -> crate::ir::Budget {
        let a = inputs[0].dims();
        let r = a.len();
        crate::ir::Budget::sum(if self.transpose_a { a[r - 2] } else { a[r - 1] })
    }
    fn fragment(&self) -> crate::ir::Fragment {
        crate::ir::Fragment::Core
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
        for (i, t) in inputs.iter().enumerate() {
            if t.rank() != 2 {
                return Err(TypeError::Operand {
                    index: i,
                    expected: "a matrix (rank 2)".to_string(),
                    found: t.clone(),
                });
            }
        }
        if inputs[0].dtype != inputs[1].dtype {
            return Err(TypeError::Mismatch {
                left: inputs[0].clone(),
                right: inputs[1].clone(),
            });
        }
        let (a, b) = (inputs[0].dims(), inputs[1].dims());
        let (m, k1) = if self.transpose_a {
            (a[1], a[0])
        } else {
            (a[0], a[1])
        };
        let (k2, n) = if self.transpose_b {
            (b[1], b[0])
        } else {
            (b[0], b[1])
        };
        if k1 != k2 {
            return Err(TypeError::Invalid(format!(
                "contraction sizes differ: operand 0 {} contracts {k1}, operand 1 {} contracts {k2}",
                inputs[0], inputs[1]
            )));
        }
        Ok(TensorType::new(inputs[0].dtype, [m, n]))
    }
    fn eval(&self, x: &[&Tensor]) -> Result<Tensor, KernelError> {
        eval_float(self, x)
    }
    fn counts_non_finite(&self, _output: &TensorType) -> bool {
        true
    }
    fn adds_into(&self, inputs: &[TensorType]) -> bool {
        inputs.iter().all(|t| t.dtype.is_float())
    }
    fn eval_added(&self, x: &[&Tensor], sum: &mut Tensor) -> Result<(), KernelError> {
        let done = match (x, sum) {
            ([Tensor::F32(a), Tensor::F32(b)], Tensor::F32(s)) => add_product(self, [a, b], s),
            ([Tensor::F64(a), Tensor::F64(b)], Tensor::F64(s)) => add_product(self, [a, b], s),
            _ => None,
        };
        done.ok_or_else(|| {
            KernelError::Unsupported("matmul adds into an unshared float matrix of its type".into())
        })
    }
    fn has_rational_eval(&self) -> bool {
        true
    }
    fn eval_rational(&self, x: &[&RArray]) -> Option<Result<RArray, KernelError>> {
        Some(self.run(x, matmul_generic))
    }
    fn is_contraction(&self) -> bool {
        true
    }

    fn flops(&self, inputs: &[TensorType], output: &TensorType) -> u64 {
        let k = if self.transpose_a {
            inputs[0].dims()[0]
        } else {
            inputs[0].dims()[1]
        };
        2 * output.numel() as u64 * k as u64
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
        let product = |b: &mut Builder, ta, tb, p, q| b.op(Arc::new(MatMul::new(ta, tb)), &[p, q]);
        product_vjp(b, (self.transpose_a, self.transpose_b), x, u, product)
    }
    fn lower(&self, b: &mut Builder, x: &[Var]) -> Option<Result<Var, TypeError>> {
        if !self.transpose_a && !self.transpose_b {
            return None;
        }
        Some((|| {
            let a = if self.transpose_a {
                b.transpose(x[0])?
            } else {
                x[0]
            };
            let c = if self.transpose_b {
                b.transpose(x[1])?
            } else {
                x[1]
            };
            b.matmul(a, c)
        })())
    }
    /// Batching: per example, one product per example.
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
    r.register("matmul", |attrs: &Attrs| {
        let mut a = AttrReader::new(attrs);
        let transpose_a = a.flag("transpose_a")?;
        let transpose_b = a.flag("transpose_b")?;
        a.finish()?;
        Ok(Arc::new(MatMul::new(transpose_a, transpose_b)) as Prim)
    });
}

/// The pullback of C = op_a(A) op_b(B), op a transpose or not: op(A)-bar = u op(B)^T and
/// op(B)-bar = op(A)^T u, each then transposed back where op transposed. `product(b, ta, tb,
/// p, q)` builds op_ta(p) op_tb(q) (a matmul, or a batch of them).
pub(super) fn product_vjp(
    b: &mut Builder,
    (ta, tb): (bool, bool),
    x: &[Var],
    u: Var,
    product: impl Fn(&mut Builder, bool, bool, Var, Var) -> Result<Var, TypeError>,
) -> Result<Vec<Option<Var>>, RuleError> {
    let da = if ta {
        product(b, tb, true, x[1], u)?
    } else {
        product(b, false, !tb, u, x[1])?
    };
    let db = if tb {
        product(b, true, ta, u, x[0])?
    } else {
        product(b, !ta, false, x[0], u)?
    };
    Ok(vec![Some(da), Some(db)])
}

/// A pooled value as a matrix times a weight, transposes drawn: each element sums k products.
fn draw_matmul(d: &mut dyn Draw) -> Result<Drawn, DrawError> {
    let x = d.pick();
    let x = d.moderate(x, 2.0)?;
    let a = d.matrix(x)?;
    let ad = d.ty(a.var).dims().to_vec();
    let (ta, tb) = (d.chance(0.25), d.chance(0.25));
    let k = if ta { ad[0] } else { ad[1] };
    let n = d.int(1, d.max_dim());
    let bdims = if tb { [n, k] } else { [k, n] };
    let bty = TensorType::new(d.ty(a.var).dtype, bdims);
    let w = d.weight(&bty)?;
    let w = d.moderate(w, 2.0)?;
    let r = Interval::symmetric(k as f64 * a.range.mag() * w.range.mag());
    let var = d.apply(Arc::new(MatMul::new(ta, tb)), &[a.var, w.var])?;
    Ok(Drawn { var, range: r })
}
