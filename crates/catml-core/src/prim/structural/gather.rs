//! gather {"axis", "indices"} selects fixed indices (repeats allowed); scatter_add {"axis",
//! "indices", "size"} is its transpose: (G^T u)_k = sum over j with i_j = k of u_j
//! (docs/derivatives.md, structural maps).

use std::sync::Arc;

use crate::ir::{
    AttrReader, Attrs, Builder, KernelError, Prim, Primitive, Registry, RuleError, TypeError, Var,
};
use crate::ir::{Draw, DrawError, Drawing, Drawn, Interval};
use crate::ir::{Linearity, Transpose};
use crate::prim::dispatch::{arity, eval_ring, eval_ring_rational, float_operand, RingKernel};
use crate::prim::Ops;
use crate::tensor::{kernels, Array, Element, RArray, Tensor, TensorType};

fn check_axis(ty: &TensorType, axis: usize) -> Result<(), TypeError> {
    if axis < ty.rank() {
        Ok(())
    } else {
        Err(TypeError::attr(
            "axis",
            format!("axis {axis} is out of range for {ty}"),
        ))
    }
}

/// Every index is below `bound`; `what` names the bound (an axis of a type, or `size`).
fn check_indices(indices: &[usize], bound: usize, what: &str) -> Result<(), TypeError> {
    if indices.is_empty() {
        return Err(TypeError::attr("indices", "must not be empty"));
    }
    match indices.iter().position(|&i| i >= bound) {
        Some(j) => Err(TypeError::attr(
            "indices",
            format!(
                "indices[{j}] = {} is out of range for {what}, expected less than {bound}",
                indices[j]
            ),
        )),
        None => Ok(()),
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gather {
    pub axis: usize,
    pub indices: Vec<usize>,
}

impl Gather {
    pub fn new(axis: usize, indices: Vec<usize>) -> Gather {
        Gather { axis, indices }
    }
}

impl RingKernel for Gather {
    fn ring<T: Element>(&self, x: &[&Array<T>]) -> Result<Array<T>, KernelError> {
        Ok(kernels::gather(x[0], self.axis, &self.indices)?)
    }
}

impl Primitive for Gather {
    fn name(&self) -> &str {
        "gather"
    }
    fn drawing(&self) -> Option<Drawing> {
        Some(Drawing::new(2, draw_gather))
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
        crate::ir::attrs_of([
            ("axis", self.axis.into()),
            ("indices", self.indices.clone().into()),
        ])
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType, TypeError> {
        // Any dtype: selecting entries is structural, so i64 index tensors may be gathered too.
        arity(inputs, 1)?;
        check_axis(&inputs[0], self.axis)?;
        check_indices(
            &self.indices,
            inputs[0].dims()[self.axis],
            &format!("axis {} of {}", self.axis, inputs[0]),
        )?;
        let mut dims = inputs[0].dims().to_vec();
        dims[self.axis] = self.indices.len();
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
    /// Batching: the same gather along the shifted axis.
    fn batch(
        &self,
        b: &mut crate::ir::Builder,
        x: &[crate::ir::Var],
        at: &crate::ir::BatchCtx,
    ) -> Result<crate::ir::Var, crate::ir::RuleError> {
        let prim = Gather {
            axis: self.axis + 1,
            indices: self.indices.clone(),
        };
        crate::prim::batching::with_prim(b, x, at, Arc::new(prim))
    }
}

impl Transpose for Gather {
    fn transpose(&self, b: &mut Builder, x: &[Var], u: Var) -> Result<Var, RuleError> {
        let size = b.ty(x[0]).dims()[self.axis];
        Ok(b.scatter_add(u, self.axis, self.indices.clone(), size)?)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScatterAdd {
    pub axis: usize,
    pub indices: Vec<usize>,
    pub size: usize,
}

impl ScatterAdd {
    pub fn new(axis: usize, indices: Vec<usize>, size: usize) -> ScatterAdd {
        ScatterAdd {
            axis,
            indices,
            size,
        }
    }
}

impl RingKernel for ScatterAdd {
    fn ring<T: Element>(&self, x: &[&Array<T>]) -> Result<Array<T>, KernelError> {
        Ok(kernels::scatter_add(
            x[0],
            self.axis,
            &self.indices,
            self.size,
        )?)
    }
}

impl Primitive for ScatterAdd {
    fn name(&self) -> &str {
        "scatter_add"
    }
    fn drawing(&self) -> Option<Drawing> {
        Some(Drawing::new(1, draw_scatter_add))
    }
    fn f32_budget(&self, inputs: &[TensorType], output: &TensorType) -> crate::ir::Budget {
        crate::ir::Budget::sum(inputs[0].numel() * self.size / output.numel().max(1))
    }
    fn attrs(&self) -> Attrs {
        crate::ir::attrs_of([
            ("axis", self.axis.into()),
            ("indices", self.indices.clone().into()),
            ("size", self.size.into()),
        ])
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType, TypeError> {
        arity(inputs, 1)?;
        float_operand(inputs, 0)?;
        check_axis(&inputs[0], self.axis)?;
        if self.size == 0 {
            return Err(TypeError::attr("size", "must be positive"));
        }
        check_indices(&self.indices, self.size, &format!("size {}", self.size))?;
        if inputs[0].dims()[self.axis] != self.indices.len() {
            return Err(TypeError::attr(
                "indices",
                format!(
                    "has {} entries but axis {} of {} has size {}",
                    self.indices.len(),
                    self.axis,
                    inputs[0],
                    inputs[0].dims()[self.axis]
                ),
            ));
        }
        let mut dims = inputs[0].dims().to_vec();
        dims[self.axis] = self.size;
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
    fn flops(&self, inputs: &[TensorType], _output: &TensorType) -> u64 {
        inputs[0].numel() as u64
    }
    fn linearity(&self) -> Option<Linearity<'_>> {
        Some(Linearity::of(self, 0))
    }
    /// Batching: the same scatter along the shifted axis.
    fn batch(
        &self,
        b: &mut crate::ir::Builder,
        x: &[crate::ir::Var],
        at: &crate::ir::BatchCtx,
    ) -> Result<crate::ir::Var, crate::ir::RuleError> {
        let prim = ScatterAdd {
            axis: self.axis + 1,
            indices: self.indices.clone(),
            size: self.size,
        };
        crate::prim::batching::with_prim(b, x, at, Arc::new(prim))
    }
}

impl Transpose for ScatterAdd {
    fn transpose(&self, b: &mut Builder, _x: &[Var], u: Var) -> Result<Var, RuleError> {
        Ok(b.gather(u, self.axis, self.indices.clone())?)
    }
}

pub(crate) fn register(r: &mut Registry) {
    r.register("gather", |attrs: &Attrs| {
        let mut a = AttrReader::new(attrs);
        let axis = a.usize("axis")?;
        let indices = a.usize_list("indices")?;
        a.finish()?;
        Ok(Arc::new(Gather::new(axis, indices)) as Prim)
    });
    r.register("scatter_add", |attrs: &Attrs| {
        let mut a = AttrReader::new(attrs);
        let axis = a.usize("axis")?;
        let indices = a.usize_list("indices")?;
        let size = a.usize("size")?;
        a.finish()?;
        Ok(Arc::new(ScatterAdd::new(axis, indices, size)) as Prim)
    });
    r.set_example(
        "gather",
        crate::ir::attrs_json(r#"{"axis": 0, "indices": [0]}"#),
    );
    r.set_example(
        "scatter_add",
        crate::ir::attrs_json(r#"{"axis": 0, "indices": [0], "size": 1}"#),
    );
}

fn draw_gather(d: &mut dyn Draw) -> Result<Drawn, DrawError> {
    let x = d.pick();
    let x = d.ranked(x)?;
    let ty = d.ty(x.var);
    let axis = d.below(ty.rank());
    let size = ty.dims()[axis];
    let len = d.int(1, d.max_dim());
    let indices: Vec<usize> = (0..len).map(|_| d.below(size)).collect();
    d.same(x.range, |b| b.gather(x.var, axis, indices))
}

/// n slices scattered: at most n terms meet at one index.
fn draw_scatter_add(d: &mut dyn Draw) -> Result<Drawn, DrawError> {
    let x = d.pick();
    let x = d.ranked(x)?;
    let ty = d.ty(x.var);
    let axis = d.below(ty.rank());
    let n = ty.dims()[axis];
    let size = d.int(1, d.max_dim());
    let indices: Vec<usize> = (0..n).map(|_| d.below(size)).collect();
    let nf = n as f64;
    let r = Interval::new((nf * x.range.lo).min(0.0), (nf * x.range.hi).max(0.0));
    d.same(r, |b| b.scatter_add(x.var, axis, indices, size))
}
