//! The two transposes of a convolution y = conv(x, w), as primitives so that derivative
//! programs can be differentiated again:
//!
//! - `conv{1,2}d_input_grad` (u, w) {.., "input_size"}: x̄ with ⟨x̄, x'⟩ = ⟨u, conv(x', w)⟩, the
//!   transposed convolution. `input_size` fixes x's spatial size, which stride > 1 leaves
//!   ambiguous.
//! - `conv{1,2}d_weight_grad` (x, u) {.., "kernel_size"}: w̄ with ⟨w̄, w'⟩ = ⟨u, conv(x, w')⟩.
//!
//! All three maps are views of one trilinear form T(x, u, w) = ⟨u, conv(x, w)⟩, so each one's
//! derivatives are the other two: the pullback of input_grad is (conv(v, w), weight_grad(v, u)),
//! the pullback of weight_grad is (input_grad(u, c), conv(x, c)).

use std::sync::Arc;

use super::conv_kernel::{
    conv_input_grad, conv_input_grad_direct, conv_weight_grad, conv_weight_grad_direct, ConvGeom,
};
use super::conv_spec::ConvSpec;
use super::forward::Conv;
use crate::ir::{
    attrs_json, AttrReader, Attrs, Builder, KernelError, Prim, Primitive, Registry, RuleError,
    TypeError, Var,
};
use crate::ir::{Draw, DrawError, Drawing, Drawn, Interval};
use crate::prim::dispatch::{arity, eval_float, FloatKernel};
use crate::prim::window::draw::{conv_out, conv_setup};
use crate::prim::window::geometry::{insert_size, narrow, read_size, widen};
use crate::tensor::{Array, Float, RArray, Shape, Tensor, TensorType};

/// Operand `index` is a float tensor of rank `rank`.
fn check_rank(inputs: &[TensorType], index: usize, rank: usize) -> Result<(), TypeError> {
    let t = &inputs[index];
    if t.dtype.is_float() && t.rank() == rank && t.dtype == inputs[0].dtype {
        Ok(())
    } else {
        Err(TypeError::Operand {
            index,
            expected: format!("a {} tensor of rank {rank}", inputs[0].dtype),
            found: t.clone(),
        })
    }
}

/// The cotangent operand `index` must have the convolution's output type.
fn check_out(spec: &ConvSpec, g: &ConvGeom, u: &TensorType, index: usize) -> Result<(), TypeError> {
    let expected = TensorType::new(u.dtype, spec.out_dims(g));
    if *u != expected {
        return Err(TypeError::Operand {
            index,
            expected: format!("the convolution's output type {expected}"),
            found: u.clone(),
        });
    }
    Ok(())
}

/// x̄ = input_grad(u, w): the transposed convolution.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConvInputGrad {
    pub spec: ConvSpec,
    /// The spatial size of x as (H, W); H is 1 for 1-D.
    pub input_size: [usize; 2],
}

impl ConvInputGrad {
    pub fn new(spec: ConvSpec, input_size: [usize; 2]) -> ConvInputGrad {
        ConvInputGrad { spec, input_size }
    }

    pub fn apply(&self, b: &mut Builder, u: Var, w: Var) -> Result<Var, TypeError> {
        b.apply(Arc::new(*self), &[u, w])
    }

    /// x's dims from u's batch and w's channels.
    fn x_dims(&self, u: &[usize], w: &[usize]) -> Vec<usize> {
        let mut dims = vec![u[0], w[1] * self.spec.attrs.groups];
        dims.extend(narrow(self.input_size, self.spec.rank));
        dims
    }

    fn geom(&self, u: &[usize], w: &[usize]) -> ConvGeom {
        self.spec.geom(&self.x_dims(u, w), w)
    }
}

impl FloatKernel for ConvInputGrad {
    fn float<T: Float>(&self, x: &[&Array<T>]) -> Result<Array<T>, KernelError> {
        let g = self.geom(x[0].dims(), x[1].dims());
        let dx = conv_input_grad(x[0].data(), x[1].data(), &g)?;
        Ok(Array::with_elems(self.x_dims(x[0].dims(), x[1].dims()), dx)
            .expect("kernel output size"))
    }
}

impl Primitive for ConvInputGrad {
    fn name(&self) -> &str {
        self.spec.op_name("input_grad")
    }
    fn drawing(&self) -> Option<Drawing> {
        let rank = self.spec.rank;
        Some(Drawing::new(1, move |d| draw_input_grad(d, rank)))
    }
    fn f32_budget(&self, inputs: &[TensorType], output: &TensorType) -> crate::ir::Budget {
        crate::ir::Budget::sum(inputs[1].numel() / output.dims()[1])
    }
    fn attrs(&self) -> Attrs {
        let mut a = self.spec.to_attrs();
        insert_size(&mut a, "input_size", self.input_size, self.spec.rank);
        a
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType, TypeError> {
        arity(inputs, 2)?;
        self.spec.check_groups()?;
        let rank = self.spec.rank + 2;
        check_rank(inputs, 0, rank)?;
        check_rank(inputs, 1, rank)?;
        let x = TensorType::new(
            inputs[0].dtype,
            self.x_dims(inputs[0].dims(), inputs[1].dims()),
        );
        if x.shape.checked_numel().is_none() {
            return Err(TypeError::attr(
                "input_size",
                format!("invalid input shape {}", x.shape),
            ));
        }
        let g = self.spec.check(&x, &inputs[1], (0, 1))?;
        check_out(&self.spec, &g, &inputs[0], 0)?;
        Ok(x)
    }
    fn eval(&self, x: &[&Tensor]) -> Result<Tensor, KernelError> {
        eval_float(self, x)
    }
    fn has_rational_eval(&self) -> bool {
        true
    }
    fn eval_rational(&self, x: &[&RArray]) -> Option<Result<RArray, KernelError>> {
        let g = self.geom(x[0].dims(), x[1].dims());
        let dx = match conv_input_grad_direct(x[0].data(), x[1].data(), &g) {
            Ok(dx) => dx,
            Err(e) => return Some(Err(e.into())),
        };
        let dims = self.x_dims(x[0].dims(), x[1].dims());
        Some(Ok(
            Array::with_elems(Shape::new(dims), dx).expect("kernel output size")
        ))
    }
    fn is_contraction(&self) -> bool {
        true
    }

    fn flops(&self, inputs: &[TensorType], _output: &TensorType) -> u64 {
        2 * self.geom(inputs[0].dims(), inputs[1].dims()).macs()
    }
    fn jvp(
        &self,
        b: &mut Builder,
        x: &[Var],
        _y: Var,
        dx: &[Option<Var>],
    ) -> Result<Option<Var>, RuleError> {
        // Bilinear in (u, w).
        crate::prim::elementwise::arith::bilinear_jvp(b, Arc::new(*self), x, dx)
    }
    fn vjp(
        &self,
        b: &mut Builder,
        x: &[Var],
        _y: Var,
        v: Var,
    ) -> Result<Vec<Option<Var>>, RuleError> {
        let conv = Conv { spec: self.spec };
        let du = b.apply(Arc::new(conv), &[v, x[1]])?;
        let kernel_size = widen(&b.ty(x[1]).dims()[2..], 1);
        let dw = ConvWeightGrad::new(self.spec, kernel_size).apply(b, v, x[0])?;
        Ok(vec![Some(du), Some(dw)])
    }
    fn lower(&self, b: &mut Builder, x: &[Var]) -> Option<Result<Var, TypeError>> {
        Some(super::conv_lower::input_grad(
            b,
            &self.spec,
            self.input_size,
            x[0],
            x[1],
        ))
    }
    /// Batching: samples are independent rows (N leads), so the batch folds into them; a batched weight goes per example.
    fn batch(
        &self,
        b: &mut crate::ir::Builder,
        x: &[crate::ir::Var],
        at: &crate::ir::BatchCtx,
    ) -> Result<crate::ir::Var, crate::ir::RuleError> {
        crate::prim::batching::fold_rows(b, x, at, &[0])
    }
}

/// w̄ = weight_grad(x, u).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConvWeightGrad {
    pub spec: ConvSpec,
    /// The kernel's spatial size as (kH, kW); kH is 1 for 1-D.
    pub kernel_size: [usize; 2],
}

impl ConvWeightGrad {
    pub fn new(spec: ConvSpec, kernel_size: [usize; 2]) -> ConvWeightGrad {
        ConvWeightGrad { spec, kernel_size }
    }

    pub fn apply(&self, b: &mut Builder, x: Var, u: Var) -> Result<Var, TypeError> {
        b.apply(Arc::new(*self), &[x, u])
    }

    /// w's dims from u's channels and x's channels.
    fn w_dims(&self, x: &[usize], u: &[usize]) -> Vec<usize> {
        let mut dims = vec![u[1], x[1] / self.spec.attrs.groups];
        dims.extend(narrow(self.kernel_size, self.spec.rank));
        dims
    }

    fn geom(&self, x: &[usize], u: &[usize]) -> ConvGeom {
        self.spec.geom(x, &self.w_dims(x, u))
    }
}

impl FloatKernel for ConvWeightGrad {
    fn float<T: Float>(&self, x: &[&Array<T>]) -> Result<Array<T>, KernelError> {
        let g = self.geom(x[0].dims(), x[1].dims());
        let dw = conv_weight_grad(x[0].data(), x[1].data(), &g);
        Ok(Array::new(self.w_dims(x[0].dims(), x[1].dims()), dw).expect("kernel output size"))
    }
}

impl Primitive for ConvWeightGrad {
    fn name(&self) -> &str {
        self.spec.op_name("weight_grad")
    }
    fn drawing(&self) -> Option<Drawing> {
        let rank = self.spec.rank;
        Some(Drawing::new(1, move |d| draw_weight_grad(d, rank)))
    }
    fn f32_budget(&self, inputs: &[TensorType], _output: &TensorType) -> crate::ir::Budget {
        crate::ir::Budget::sum(inputs[1].numel() / inputs[1].dims()[1])
    }
    fn attrs(&self) -> Attrs {
        let mut a = self.spec.to_attrs();
        insert_size(&mut a, "kernel_size", self.kernel_size, self.spec.rank);
        a
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType, TypeError> {
        arity(inputs, 2)?;
        self.spec.check_groups()?;
        let rank = self.spec.rank + 2;
        check_rank(inputs, 0, rank)?;
        check_rank(inputs, 1, rank)?;
        let w = TensorType::new(
            inputs[0].dtype,
            self.w_dims(inputs[0].dims(), inputs[1].dims()),
        );
        let g = self.spec.check(&inputs[0], &w, (0, 1))?;
        if w.shape.checked_numel().is_none() {
            return Err(TypeError::attr(
                "kernel_size",
                format!("invalid weight shape {}", w.shape),
            ));
        }
        check_out(&self.spec, &g, &inputs[1], 1)?;
        Ok(w)
    }
    fn eval(&self, x: &[&Tensor]) -> Result<Tensor, KernelError> {
        eval_float(self, x)
    }
    fn has_rational_eval(&self) -> bool {
        true
    }
    fn eval_rational(&self, x: &[&RArray]) -> Option<Result<RArray, KernelError>> {
        let g = self.geom(x[0].dims(), x[1].dims());
        let dw = match conv_weight_grad_direct(x[0].data(), x[1].data(), &g) {
            Ok(dw) => dw,
            Err(e) => return Some(Err(e.into())),
        };
        let dims = self.w_dims(x[0].dims(), x[1].dims());
        Some(Ok(
            Array::with_elems(Shape::new(dims), dw).expect("kernel output size")
        ))
    }
    fn is_contraction(&self) -> bool {
        true
    }

    fn flops(&self, inputs: &[TensorType], _output: &TensorType) -> u64 {
        2 * self.geom(inputs[0].dims(), inputs[1].dims()).macs()
    }
    fn jvp(
        &self,
        b: &mut Builder,
        x: &[Var],
        _y: Var,
        dx: &[Option<Var>],
    ) -> Result<Option<Var>, RuleError> {
        // Bilinear in (x, u).
        crate::prim::elementwise::arith::bilinear_jvp(b, Arc::new(*self), x, dx)
    }
    fn vjp(
        &self,
        b: &mut Builder,
        x: &[Var],
        _y: Var,
        c: Var,
    ) -> Result<Vec<Option<Var>>, RuleError> {
        let input_size = widen(&b.ty(x[0]).dims()[2..], 1);
        let dx = ConvInputGrad::new(self.spec, input_size).apply(b, x[1], c)?;
        let conv = Conv { spec: self.spec };
        let du = b.apply(Arc::new(conv), &[x[0], c])?;
        Ok(vec![Some(dx), Some(du)])
    }
    fn lower(&self, b: &mut Builder, x: &[Var]) -> Option<Result<Var, TypeError>> {
        Some(super::conv_lower::weight_grad(
            b,
            &self.spec,
            self.kernel_size,
            x[0],
            x[1],
        ))
    }
    /// Batching: per example (the weight gradient sums over the samples of one example).
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
    for rank in [1, 2] {
        let spec_name = if rank == 1 { "conv1d" } else { "conv2d" };
        r.register(&format!("{spec_name}_input_grad"), move |attrs: &Attrs| {
            let mut a = AttrReader::new(attrs);
            let spec = ConvSpec::read(&mut a, rank)?;
            let input_size = read_size(&mut a, "input_size", rank)?;
            a.finish()?;
            Ok(Arc::new(ConvInputGrad::new(spec, input_size)) as Prim)
        });
        r.register(&format!("{spec_name}_weight_grad"), move |attrs: &Attrs| {
            let mut a = AttrReader::new(attrs);
            let spec = ConvSpec::read(&mut a, rank)?;
            let kernel_size = read_size(&mut a, "kernel_size", rank)?;
            a.finish()?;
            Ok(Arc::new(ConvWeightGrad::new(spec, kernel_size)) as Prim)
        });
        let size = if rank == 1 { "[3]" } else { "[3, 3]" };
        let input = format!(r#"{{"input_size": {size}}}"#);
        r.set_example(&format!("{spec_name}_input_grad"), attrs_json(&input));
        let kernel = format!(r#"{{"kernel_size": {size}}}"#);
        r.set_example(&format!("{spec_name}_weight_grad"), attrs_json(&kernel));
    }
}

/// dx = conv_input_grad(u, w): each x element meets at most (O/groups) k_H k_W products.
fn draw_input_grad(d: &mut dyn Draw, rank: usize) -> Result<Drawn, DrawError> {
    let (x, wty, spec) = conv_setup(d, rank)?;
    let uty = conv_out(&spec, &d.ty(x.var), &wty);
    let u = d.weight(&uty)?;
    let u = d.moderate(u, 2.0)?;
    let w = d.weight(&wty)?;
    let w = d.moderate(w, 2.0)?;
    let xd = d.ty(x.var).dims().to_vec();
    let size = [xd[xd.len() - 2], xd[xd.len() - 1]];
    let size = if rank == 1 { [1, size[1]] } else { size };
    let k = wty.numel() / xd[1];
    let var = d.apply(Arc::new(ConvInputGrad::new(spec, size)), &[u.var, w.var])?;
    Ok(Drawn {
        var,
        range: Interval::symmetric(k as f64 * u.range.mag() * w.range.mag()),
    })
}

/// dw = conv_weight_grad(x, u): each weight element sums N Ho Wo products.
fn draw_weight_grad(d: &mut dyn Draw, rank: usize) -> Result<Drawn, DrawError> {
    let (x, wty, spec) = conv_setup(d, rank)?;
    let uty = conv_out(&spec, &d.ty(x.var), &wty);
    let u = d.weight(&uty)?;
    let u = d.moderate(u, 2.0)?;
    let wd = wty.dims();
    let size = [wd[wd.len() - 2], wd[wd.len() - 1]];
    let size = if rank == 1 { [1, size[1]] } else { size };
    let k = uty.numel() / uty.dims()[1];
    let var = d.apply(Arc::new(ConvWeightGrad::new(spec, size)), &[x.var, u.var])?;
    Ok(Drawn {
        var,
        range: Interval::symmetric(k as f64 * x.range.mag() * u.range.mag()),
    })
}
