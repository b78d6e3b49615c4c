//! reshape {"shape"} and permute {"perm"}: rearrangements whose pullbacks apply the inverse
//! arrangement.

use std::sync::Arc;

use crate::ir::{
    AttrReader, Attrs, Builder, KernelError, Prim, Primitive, Registry, RuleError, TypeError, Var,
};
use crate::ir::{Draw, DrawError, Drawing, Drawn, ResultStorage};
use crate::ir::{Linearity, SliceKernel, SliceOperand, Transpose};
use crate::prim::dispatch::{arity, eval_ring, eval_ring_rational, RingKernel};
use crate::prim::Ops;
use crate::tensor::{kernels, Array, Element, RArray, Shape, Tensor, TensorType};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reshape {
    pub shape: Shape,
}

impl Reshape {
    pub fn new(shape: Shape) -> Reshape {
        Reshape { shape }
    }
}

impl RingKernel for Reshape {
    fn ring<T: Element>(&self, x: &[&Array<T>]) -> Result<Array<T>, KernelError> {
        Ok(x[0].reshaped(self.shape.clone()))
    }
}

impl Primitive for Reshape {
    fn name(&self) -> &str {
        "reshape"
    }
    fn drawing(&self) -> Option<Drawing> {
        Some(Drawing::new(2, draw_reshape))
    }
    fn f32_budget(&self, _inputs: &[TensorType], _output: &TensorType) -> crate::ir::Budget {
        crate::ir::Budget::Exact
    }
    fn fragment(&self) -> crate::ir::Fragment {
        crate::ir::Fragment::Core
    }
    fn is_identity(&self, inputs: &[TensorType], output: &TensorType) -> bool {
        inputs.len() == 1 && inputs[0] == *output
    }
    fn result_storage(&self) -> ResultStorage {
        ResultStorage::Operand
    }
    fn copies_operand_values(&self) -> bool {
        true
    }
    fn attrs(&self) -> Attrs {
        crate::ir::attrs_of([("shape", self.shape.dims().to_vec().into())])
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType, TypeError> {
        arity(inputs, 1)?;
        if self.shape.checked_numel() != Some(inputs[0].numel()) {
            return Err(TypeError::attr(
                "shape",
                format!(
                    "reshape of {} to {} changes the element count ({} vs {})",
                    inputs[0],
                    self.shape,
                    inputs[0].numel(),
                    self.shape.numel()
                ),
            ));
        }
        Ok(TensorType::new(inputs[0].dtype, self.shape.clone()))
    }
    fn eval(&self, x: &[&Tensor]) -> Result<Tensor, KernelError> {
        Ok(x[0].reshaped(self.shape.clone()))
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
    /// Batching: the same reshape of each example, behind the batch axis.
    fn batch(
        &self,
        b: &mut crate::ir::Builder,
        x: &[crate::ir::Var],
        at: &crate::ir::BatchCtx,
    ) -> Result<crate::ir::Var, crate::ir::RuleError> {
        let _ = x;
        let shape = crate::ir::with_lead(
            &TensorType::new(crate::tensor::DType::F64, self.shape.clone()),
            at.size,
        )
        .shape;
        crate::prim::batching::with_prim(b, x, at, Arc::new(Reshape::new(shape)))
    }
}

impl Transpose for Reshape {
    fn transpose(&self, b: &mut Builder, x: &[Var], u: Var) -> Result<Var, RuleError> {
        let back = b.ty(x[0]).shape.clone();
        Ok(b.reshape(u, back)?)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Permute {
    /// Result dim i is operand dim `perm[i]`.
    pub perm: Vec<usize>,
}

impl Permute {
    pub fn new(perm: Vec<usize>) -> Permute {
        Permute { perm }
    }

    pub fn inverse(&self) -> Vec<usize> {
        let mut inv = vec![0; self.perm.len()];
        for (i, &p) in self.perm.iter().enumerate() {
            inv[p] = i;
        }
        inv
    }
}

impl RingKernel for Permute {
    fn ring<T: Element>(&self, x: &[&Array<T>]) -> Result<Array<T>, KernelError> {
        Ok(kernels::permute(x[0], &self.perm)?)
    }
}

impl SliceKernel for Permute {
    fn serves(&self, _inputs: &[TensorType], output: &TensorType) -> bool {
        output.dtype.is_float()
    }
    fn slice_f32(&self, x: &[SliceOperand<'_, f32>], out: &mut [f32]) {
        kernels::permute_into(x[0].data, x[0].dims, &self.perm, out)
    }
    fn slice_f64(&self, x: &[SliceOperand<'_, f64>], out: &mut [f64]) {
        kernels::permute_into(x[0].data, x[0].dims, &self.perm, out)
    }
}

impl Primitive for Permute {
    fn name(&self) -> &str {
        "permute"
    }
    fn slice_kernel(&self) -> Option<&dyn SliceKernel> {
        Some(self)
    }
    fn drawing(&self) -> Option<Drawing> {
        Some(Drawing::new(1, draw_permute))
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
    fn permutation(&self) -> Option<&[usize]> {
        Some(&self.perm)
    }
    fn attrs(&self) -> Attrs {
        crate::ir::attrs_of([("perm", self.perm.clone().into())])
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType, TypeError> {
        arity(inputs, 1)?;
        let rank = inputs[0].rank();
        let mut seen = vec![false; rank];
        let valid = self.perm.len() == rank
            && self
                .perm
                .iter()
                .all(|&p| p < rank && !std::mem::replace(&mut seen[p], true));
        if !valid {
            return Err(TypeError::attr(
                "perm",
                format!(
                    "{:?} is not a permutation of the {rank} axes of {}",
                    self.perm, inputs[0]
                ),
            ));
        }
        let dims: Vec<usize> = self.perm.iter().map(|&p| inputs[0].dims()[p]).collect();
        Ok(TensorType::new(inputs[0].dtype, dims))
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
    fn linearity(&self) -> Option<Linearity<'_>> {
        Some(Linearity::of(self, 0))
    }
    /// Batching: the batch axis stays in front; the other axes move as before.
    fn batch(
        &self,
        b: &mut crate::ir::Builder,
        x: &[crate::ir::Var],
        at: &crate::ir::BatchCtx,
    ) -> Result<crate::ir::Var, crate::ir::RuleError> {
        let mut perm = vec![0];
        perm.extend(crate::prim::batching::shifted(&self.perm));
        crate::prim::batching::with_prim(b, x, at, Arc::new(Permute { perm }))
    }
}

impl Transpose for Permute {
    fn transpose(&self, b: &mut Builder, _x: &[Var], u: Var) -> Result<Var, RuleError> {
        Ok(b.permute(u, self.inverse())?)
    }
}

pub(crate) fn register(r: &mut Registry) {
    r.register("reshape", |attrs: &Attrs| {
        let mut a = AttrReader::new(attrs);
        let shape = a.shape("shape")?;
        a.finish()?;
        Ok(Arc::new(Reshape::new(shape)) as Prim)
    });
    r.register("permute", |attrs: &Attrs| {
        let mut a = AttrReader::new(attrs);
        let perm = a.usize_list("perm")?;
        a.finish()?;
        Ok(Arc::new(Permute::new(perm)) as Prim)
    });
    r.set_example("reshape", crate::ir::attrs_json(r#"{"shape": [1]}"#));
    r.set_example("permute", crate::ir::attrs_json(r#"{"perm": [0]}"#));
}

/// Sometimes to the operand's own shape (an identity), else a random factorisation of its
/// numel into at most max_rank factors.
fn draw_reshape(d: &mut dyn Draw) -> Result<Drawn, DrawError> {
    let x = d.pick();
    let ty = d.ty(x.var);
    let shape = if d.chance(0.3) {
        ty.shape.clone()
    } else {
        let mut n = ty.numel();
        let mut dims = Vec::new();
        while n > 1 && dims.len() + 1 < d.max_rank().max(1) && d.chance(0.6) {
            let divs: Vec<usize> = (2..=n).filter(|k| n % k == 0).collect();
            let k = divs[d.below(divs.len())];
            dims.push(k);
            n /= k;
        }
        if n > 1 || (dims.is_empty() && d.max_rank() > 0 && d.chance(0.5)) {
            dims.push(n);
        }
        Shape::new(dims)
    };
    d.same(x.range, |b| b.reshape(x.var, shape))
}

fn draw_permute(d: &mut dyn Draw) -> Result<Drawn, DrawError> {
    let x = d.pick();
    let rank = d.ty(x.var).rank();
    let mut perm: Vec<usize> = (0..rank).collect();
    for i in (1..rank).rev() {
        let j = d.int(0, i);
        perm.swap(i, j);
    }
    d.same(x.range, |b| b.permute(x.var, perm))
}
