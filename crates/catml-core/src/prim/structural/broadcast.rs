//! broadcast {"shape", "dims"} (StableHLO's broadcast_in_dim: operand dim i goes to result dim
//! dims[i], sizes equal or 1) and broadcast_rows {"rows": B} ((d) to (B, d)). Their pullbacks
//! sum over the copied axes: reduction and broadcast are an adjoint pair.

use std::sync::Arc;

use crate::ir::{
    AttrReader, Attrs, BlockKernel, Builder, KernelError, Prim, Primitive, Reads, Registry,
    RuleError, TypeError, Var,
};
use crate::ir::{Draw, DrawError, Drawing, Drawn};
use crate::ir::{Linearity, Transpose};
use crate::prim::dispatch::{
    arity, eval_ring, eval_ring_rational, float_operand, number_operand, RingKernel,
};
use crate::prim::Ops;
use crate::tensor::{checked, kernels, Array, Element, RArray, Shape, Tensor, TensorType};

/// `k`'s broadcast of `x[0]`. Each element of the operand is copied the same number of times,
/// so when evaluation asks for the result's non-finite count (`tensor::checked`) it is the
/// operand's count times that, with no pass over the result.
fn eval_counted<K: RingKernel>(k: &K, x: &[&Tensor]) -> Result<Tensor, KernelError> {
    let request = checked::asked();
    let out = eval_ring(k, x)?;
    if let (Some(request), Some(operand)) = (request, x.first()) {
        let copies = out.numel() / operand.numel().max(1);
        request.counted(operand.count_non_finite() * copies);
    }
    Ok(out)
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Broadcast {
    pub shape: Shape,
    pub dims: Vec<usize>,
}

impl Broadcast {
    pub fn new(shape: Shape, dims: Vec<usize>) -> Broadcast {
        Broadcast { shape, dims }
    }
}

impl RingKernel for Broadcast {
    fn ring<T: Element>(&self, x: &[&Array<T>]) -> Result<Array<T>, KernelError> {
        Ok(kernels::broadcast(x[0], &self.shape, &self.dims)?)
    }
}

/// A broadcast's block kernel: a fused pass writes its blocks from the repeating operand
/// ([`Reads::Repeats`]); given the operand already expanded, it copies it.
macro_rules! broadcast_blocks {
    ($ty:ident) => {
        impl BlockKernel for $ty {
            fn reads(&self, inputs: &[TensorType], output: &TensorType) -> Option<Reads> {
                repeats(&inputs[0], output, self.result_dims())
            }
            fn block_f32(&self, x: &[&[f32]], out: &mut [f32]) -> bool {
                out.copy_from_slice(x[0]);
                true
            }
            fn block_f64(&self, x: &[&[f64]], out: &mut [f64]) -> bool {
                out.copy_from_slice(x[0]);
                true
            }
        }
    };
}

broadcast_blocks!(Broadcast);
broadcast_blocks!(BroadcastRows);

/// How a broadcast of `x` to `out` repeats it, operand dim i going to result dim `dims[i]`:
/// when the operand's axes of size above 1 go to consecutive result axes, result element f is
/// operand element (f / inner) % len, inner being the size of the result axes after them.
fn repeats(x: &TensorType, out: &TensorType, dims: &[usize]) -> Option<Reads> {
    let kept: Vec<usize> = (0..x.rank())
        .filter(|&i| x.dims()[i] != 1)
        .map(|i| dims[i])
        .collect();
    if kept.windows(2).any(|w| w[1] != w[0] + 1) {
        return None;
    }
    let after = kept.last().map_or(out.rank(), |&d| d + 1);
    Some(Reads::Repeats {
        len: x.numel(),
        inner: out.dims()[after..].iter().product(),
    })
}

impl Broadcast {
    /// Where each operand axis goes.
    fn result_dims(&self) -> &[usize] {
        &self.dims
    }
}

impl Primitive for Broadcast {
    fn name(&self) -> &str {
        "broadcast"
    }
    fn drawing(&self) -> Option<Drawing> {
        Some(Drawing::new(1, draw_broadcast))
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
    fn elementwise(&self) -> Option<&dyn BlockKernel> {
        Some(self)
    }
    fn attrs(&self) -> Attrs {
        crate::ir::attrs_of([
            ("shape", self.shape.dims().to_vec().into()),
            ("dims", self.dims.clone().into()),
        ])
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType, TypeError> {
        arity(inputs, 1)?;
        number_operand(inputs, 0)?;
        let x = &inputs[0];
        if self.dims.len() != x.rank() {
            return Err(TypeError::attr(
                "dims",
                format!(
                    "has {} entries but the operand {x} has rank {}",
                    self.dims.len(),
                    x.rank()
                ),
            ));
        }
        if self.dims.windows(2).any(|w| w[0] >= w[1]) {
            return Err(TypeError::attr(
                "dims",
                format!("{:?} must be strictly increasing", self.dims),
            ));
        }
        for (i, &d) in self.dims.iter().enumerate() {
            let Some(&size) = self.shape.dims().get(d) else {
                return Err(TypeError::attr(
                    "dims",
                    format!("result dim {d} is out of range for shape {}", self.shape),
                ));
            };
            if x.dims()[i] != size && x.dims()[i] != 1 {
                return Err(TypeError::attr(
                    "dims",
                    format!(
                        "operand dim {i} of {x} (size {}) does not fit result dim {d} of {} (size {size})",
                        x.dims()[i],
                        self.shape
                    ),
                ));
            }
        }
        Ok(TensorType::new(x.dtype, self.shape.clone()))
    }
    fn eval(&self, x: &[&Tensor]) -> Result<Tensor, KernelError> {
        eval_counted(self, x)
    }
    fn counts_non_finite(&self, output: &TensorType) -> bool {
        output.dtype.is_float()
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
    fn linearity(&self) -> Option<Linearity<'_>> {
        Some(Linearity::of(self, 0))
    }
    /// Batching: the batch axis maps to the result's leading axis.
    fn batch(
        &self,
        b: &mut crate::ir::Builder,
        x: &[crate::ir::Var],
        at: &crate::ir::BatchCtx,
    ) -> Result<crate::ir::Var, crate::ir::RuleError> {
        let shape = crate::ir::with_lead(
            &TensorType::new(crate::tensor::DType::F64, self.shape.clone()),
            at.size,
        )
        .shape;
        let mut dims = vec![0];
        dims.extend(crate::prim::batching::shifted(&self.dims));
        crate::prim::batching::with_prim(b, x, at, Arc::new(Broadcast::new(shape, dims)))
    }
}

impl Transpose for Broadcast {
    fn transpose(&self, b: &mut Builder, x: &[Var], u: Var) -> Result<Var, RuleError> {
        let operand = b.ty(x[0]).clone();
        // Sum every result axis that copies: new axes, and size-1 operand axes that grew.
        let summed: Vec<usize> = (0..self.shape.rank())
            .filter(|r| match self.dims.iter().position(|d| d == r) {
                None => true,
                Some(i) => operand.dims()[i] == 1 && self.shape.dims()[*r] != 1,
            })
            .collect();
        let reduced = if summed.is_empty() {
            u
        } else {
            b.sum(u, Some(summed))?
        };
        let out = if *b.ty(reduced) == operand {
            reduced
        } else {
            b.reshape(reduced, operand.shape.clone())?
        };
        Ok(out)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BroadcastRows {
    pub rows: usize,
}

impl BroadcastRows {
    fn as_broadcast(&self, d: usize) -> Broadcast {
        Broadcast::new(Shape::from([self.rows, d]), vec![1])
    }
}

impl RingKernel for BroadcastRows {
    fn ring<T: Element>(&self, x: &[&Array<T>]) -> Result<Array<T>, KernelError> {
        // The kernel directly: the general primitive's attribute lists would be made per call.
        let shape = Shape::from([self.rows, x[0].dims()[0]]);
        Ok(kernels::broadcast(x[0], &shape, &[1])?)
    }
}

impl BroadcastRows {
    /// Where the operand's one axis goes: the result's second.
    fn result_dims(&self) -> &[usize] {
        &[1]
    }
}

impl Primitive for BroadcastRows {
    fn name(&self) -> &str {
        "broadcast_rows"
    }
    fn drawing(&self) -> Option<Drawing> {
        Some(Drawing::new(1, draw_broadcast_rows))
    }
    fn f32_budget(&self, _inputs: &[TensorType], _output: &TensorType) -> crate::ir::Budget {
        crate::ir::Budget::Exact
    }
    fn copies_operand_values(&self) -> bool {
        true
    }
    fn elementwise(&self) -> Option<&dyn BlockKernel> {
        Some(self)
    }
    fn attrs(&self) -> Attrs {
        crate::ir::attrs_of([("rows", self.rows.into())])
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType, TypeError> {
        arity(inputs, 1)?;
        float_operand(inputs, 0)?;
        if inputs[0].rank() != 1 {
            return Err(TypeError::Operand {
                index: 0,
                expected: "a vector (rank 1)".to_string(),
                found: inputs[0].clone(),
            });
        }
        if self.rows == 0 {
            return Err(TypeError::attr("rows", "must be positive"));
        }
        Ok(TensorType::new(
            inputs[0].dtype,
            [self.rows, inputs[0].dims()[0]],
        ))
    }
    fn eval(&self, x: &[&Tensor]) -> Result<Tensor, KernelError> {
        eval_counted(self, x)
    }
    fn counts_non_finite(&self, output: &TensorType) -> bool {
        output.dtype.is_float()
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
    fn linearity(&self) -> Option<Linearity<'_>> {
        Some(Linearity::of(self, 0))
    }
    fn lower(&self, b: &mut Builder, x: &[Var]) -> Option<Result<Var, TypeError>> {
        let d = b.ty(x[0]).dims()[0];
        Some(b.op(Arc::new(self.as_broadcast(d)), x))
    }
    /// Batching: each example's vector repeated in rows.
    fn batch(
        &self,
        b: &mut crate::ir::Builder,
        x: &[crate::ir::Var],
        at: &crate::ir::BatchCtx,
    ) -> Result<crate::ir::Var, crate::ir::RuleError> {
        // (B, n) -> (B, rows, n): a broadcast keeping the batch and row axes of the operand.
        let ty = b.ty(x[0]).clone();
        let shape = vec![at.size, self.rows, ty.dims()[1]];
        Ok(b.broadcast(x[0], shape, vec![0, 2])?)
    }
}

impl Transpose for BroadcastRows {
    fn transpose(&self, b: &mut Builder, _x: &[Var], u: Var) -> Result<Var, RuleError> {
        // (b, Ȳ) ↦ Σ_r Ȳ_{r,:}
        Ok(b.sum(u, Some(vec![0]))?)
    }
}

pub(crate) fn register(r: &mut Registry) {
    r.register("broadcast", |attrs: &Attrs| {
        let mut a = AttrReader::new(attrs);
        let shape = a.shape("shape")?;
        let dims = a.usize_list("dims")?;
        a.finish()?;
        Ok(Arc::new(Broadcast::new(shape, dims)) as Prim)
    });
    r.register("broadcast_rows", |attrs: &Attrs| {
        let mut a = AttrReader::new(attrs);
        let rows = a.usize("rows")?;
        a.finish()?;
        if rows == 0 {
            return Err(TypeError::attr("rows", "must be positive"));
        }
        Ok(Arc::new(BroadcastRows { rows }) as Prim)
    });
    r.set_example(
        "broadcast",
        crate::ir::attrs_json(r#"{"shape": [1], "dims": [0]}"#),
    );
    r.set_example("broadcast_rows", crate::ir::attrs_json(r#"{"rows": 1}"#));
}

/// x's dims in order (size-1 dims sometimes expanded), new dims inserted around them.
fn draw_broadcast(d: &mut dyn Draw) -> Result<Drawn, DrawError> {
    let x = d.pick();
    let ty = d.ty(x.var);
    let extra = d.int(0, d.max_rank().saturating_sub(ty.rank()).min(2));
    let rank = ty.rank() + extra;
    let mut slots: Vec<bool> = vec![true; ty.rank()];
    slots.extend(vec![false; extra]);
    for i in (1..slots.len()).rev() {
        let j = d.int(0, i);
        slots.swap(i, j);
    }
    let mut shape = Vec::with_capacity(rank);
    let mut dims = Vec::with_capacity(ty.rank());
    let mut k = 0;
    for (r, &is_old) in slots.iter().enumerate() {
        if is_old {
            let n = ty.dims()[k];
            shape.push(if n == 1 && d.chance(0.5) {
                d.int(1, d.max_dim())
            } else {
                n
            });
            dims.push(r);
            k += 1;
        } else {
            shape.push(d.int(1, d.max_dim()));
        }
    }
    d.same(x.range, |b| b.broadcast(x.var, shape, dims))
}

fn draw_broadcast_rows(d: &mut dyn Draw) -> Result<Drawn, DrawError> {
    let x = d.pick();
    let ty = d.ty(x.var);
    let v = if ty.rank() == 1 {
        x
    } else {
        d.same(x.range, |b| b.reshape(x.var, [ty.numel()]))?
    };
    let rows = d.int(1, d.max_dim());
    d.same(v.range, |b| b.broadcast_rows(v.var, rows))
}
