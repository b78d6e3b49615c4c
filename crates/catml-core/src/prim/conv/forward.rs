//! conv1d (NCW) and conv2d (NCHW): operands (x, w) or (x, w, b), attributes stride, padding
//! per side, dilation and groups; w has shape (O, C/groups, kernel..).
//!
//! y[n, o, p] = b[o] + Σ_{c in o's group, taps k} w[o, c, k] · x_pad[n, c, p·s + k·d].
//!
//! The map is bilinear in (x, w), so both derivatives are its transposes:
//! x̄ = `conv_input_grad(u, w)` (a transposed convolution), w̄ = `conv_weight_grad(x, u)`,
//! b̄ = Σ over batch and pixels of u. Each transpose is a primitive whose own rules name the other
//! two, so derivatives of every order stay inside this family, for every stride, dilation,
//! padding and group count.

use std::sync::Arc;

use super::conv_grad::{ConvInputGrad, ConvWeightGrad};
use super::conv_kernel::{conv_direct, conv_forward};
use super::conv_spec::{Conv1dAttrs, Conv2dAttrs, ConvSpec};
use crate::ir::{
    AttrReader, Attrs, Builder, KernelError, Prim, Primitive, Registry, RuleError, TypeError, Var,
};
use crate::ir::{Draw, DrawError, Drawing, Drawn, Interval};
use crate::prim::dispatch::{eval_float, FloatKernel};
use crate::prim::window::draw::conv_setup;
use crate::prim::window::geometry::widen;
use crate::prim::Ops;
use crate::tensor::{Array, Float, RArray, Shape, Tensor, TensorType};

/// A 1-D or 2-D convolution with optional bias.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Conv {
    pub spec: ConvSpec,
}

impl Conv {
    pub fn conv1d(attrs: Conv1dAttrs) -> Conv {
        Conv { spec: attrs.into() }
    }

    pub fn conv2d(attrs: Conv2dAttrs) -> Conv {
        Conv { spec: attrs.into() }
    }

    /// The same convolution without bias (the form the derivative rules emit).
    fn apply(&self, b: &mut Builder, x: Var, w: Var) -> Result<Var, TypeError> {
        b.op(Arc::new(*self), &[x, w])
    }
}

impl FloatKernel for Conv {
    fn float<T: Float>(&self, x: &[&Array<T>]) -> Result<Array<T>, KernelError> {
        let g = self.spec.geom(x[0].dims(), x[1].dims());
        let bias = x.get(2).map(|b| b.data());
        let y = conv_forward(x[0].data(), x[1].data(), bias, &g)?;
        Ok(Array::with_elems(Shape::new(self.spec.out_dims(&g)), y).expect("kernel output size"))
    }
}

impl Primitive for Conv {
    fn name(&self) -> &str {
        self.spec.op_name("")
    }
    fn drawing(&self) -> Option<Drawing> {
        // conv2d is drawn twice as often as conv1d.
        let rank = self.spec.rank;
        Some(Drawing::new(rank as u32, move |d| draw_conv(d, rank)))
    }
    fn f32_budget(&self, inputs: &[TensorType], _output: &TensorType) -> crate::ir::Budget {
        crate::ir::Budget::sum(
            inputs[1].numel() / inputs[1].dims()[0] + usize::from(inputs.len() == 3),
        )
    }
    fn attrs(&self) -> Attrs {
        self.spec.to_attrs()
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType, TypeError> {
        if !(2..=3).contains(&inputs.len()) {
            return Err(TypeError::Arity {
                expected: "2 (x, w) or 3 (x, w, bias)".to_string(),
                found: inputs.len(),
            });
        }
        let g = self.spec.check(&inputs[0], &inputs[1], (0, 1))?;
        if let Some(b) = inputs.get(2) {
            self.spec.check_bias(&inputs[0], b, g.o)?;
        }
        Ok(TensorType::new(inputs[0].dtype, self.spec.out_dims(&g)))
    }
    fn eval(&self, x: &[&Tensor]) -> Result<Tensor, KernelError> {
        eval_float(self, x)
    }
    fn has_rational_eval(&self) -> bool {
        true
    }
    fn eval_rational(&self, x: &[&RArray]) -> Option<Result<RArray, KernelError>> {
        let g = self.spec.geom(x[0].dims(), x[1].dims());
        let bias = x.get(2).map(|b| b.data());
        let y = match conv_direct(x[0].data(), x[1].data(), bias, &g) {
            Ok(y) => y,
            Err(e) => return Some(Err(e.into())),
        };
        Some(Ok(
            Array::with_elems(Shape::new(self.spec.out_dims(&g)), y).expect("kernel output size")
        ))
    }
    fn is_contraction(&self) -> bool {
        true
    }

    fn flops(&self, inputs: &[TensorType], output: &TensorType) -> u64 {
        let g = self.spec.geom(inputs[0].dims(), inputs[1].dims());
        let bias = if inputs.len() == 3 {
            output.numel() as u64
        } else {
            0
        };
        2 * g.macs() + bias
    }
    fn jvp(
        &self,
        b: &mut Builder,
        x: &[Var],
        y: Var,
        dx: &[Option<Var>],
    ) -> Result<Option<Var>, RuleError> {
        // dy = conv(dx, w) + conv(x, dw) + broadcast(db)
        let from_x = dx[0].map(|d| self.apply(b, d, x[1])).transpose()?;
        let from_w = dx[1].map(|d| self.apply(b, x[0], d)).transpose()?;
        let out = b.ty(y).shape.clone();
        let from_b = dx
            .get(2)
            .copied()
            .flatten()
            .map(|d| b.broadcast(d, out, vec![1]))
            .transpose()?;
        crate::prim::sum_terms(b, &[from_x, from_w, from_b])
    }
    fn vjp(
        &self,
        b: &mut Builder,
        x: &[Var],
        _y: Var,
        u: Var,
    ) -> Result<Vec<Option<Var>>, RuleError> {
        let input_size = widen(&b.ty(x[0]).dims()[2..], 1);
        let kernel_size = widen(&b.ty(x[1]).dims()[2..], 1);
        let dx = ConvInputGrad::new(self.spec, input_size).apply(b, u, x[1])?;
        let dw = ConvWeightGrad::new(self.spec, kernel_size).apply(b, x[0], u)?;
        let mut out = vec![Some(dx), Some(dw)];
        if x.len() == 3 {
            out.push(Some(b.sum(u, Some(self.spec.bias_axes()))?));
        }
        Ok(out)
    }
    fn lower(&self, b: &mut Builder, x: &[Var]) -> Option<Result<Var, TypeError>> {
        Some(super::conv_lower::conv(
            b,
            &self.spec,
            x[0],
            x[1],
            x.get(2).copied(),
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

pub(crate) fn register(r: &mut Registry) {
    for rank in [1, 2] {
        let name = if rank == 1 { "conv1d" } else { "conv2d" };
        r.register(name, move |attrs: &Attrs| {
            let mut a = AttrReader::new(attrs);
            let spec = ConvSpec::read(&mut a, rank)?;
            a.finish()?;
            Ok(Arc::new(Conv { spec }) as Prim)
        });
    }
    super::conv_grad::register(r);
}

/// |y| <= (C/groups) k_H k_W |x| |w| + |b|.
fn draw_conv(d: &mut dyn Draw, rank: usize) -> Result<Drawn, DrawError> {
    let (x, wty, spec) = conv_setup(d, rank)?;
    let w = d.weight(&wty)?;
    let w = d.moderate(w, 2.0)?;
    let bias = if d.chance(0.5) {
        let b = d.weight(&TensorType::new(wty.dtype, [wty.dims()[0]]))?;
        Some(d.moderate(b, 2.0)?)
    } else {
        None
    };
    let k = wty.numel() / wty.dims()[0];
    let m = k as f64 * x.range.mag() * w.range.mag() + bias.map_or(0.0, |b| b.range.mag());
    let operands: Vec<_> = [x.var, w.var]
        .into_iter()
        .chain(bias.map(|b| b.var))
        .collect();
    let var = d.apply(Arc::new(Conv { spec }), &operands)?;
    Ok(Drawn {
        var,
        range: Interval::symmetric(m),
    })
}
