//! layer_norm {"axes", "eps", "affine"}: mean-variance normalisation over the chosen axes with
//! a fixed eps > 0 (docs/architectures.md): for each slice of m = prod of the axes' sizes,
//! mu = m^-1 sum x, c = x - mu, v = m^-1 sum c^2, x̂ = c (v + eps)^-1/2,
//! then with `affine` (operands gamma, beta of the axes' sizes, in axis order) y = gamma x̂ + beta.
//!
//! Rules, with r = (v + eps)^-1/2 and mean over the slice: the map
//! N(w) = r (w - mean(w) - x̂ mean(x̂ w)) is the derivative of x̂ and is symmetric, so
//! dx̂ = N(dx) and x̄ = N(gamma u); gamma-bar and beta-bar sum u x̂ and u over the other axes.

use std::sync::Arc;

use crate::ir::{
    AttrReader, Attrs, Builder, KernelError, Prim, Primitive, Registry, RuleError, TypeError, Var,
};
use crate::ir::{Draw, DrawError, Drawing, Drawn, Interval};
use crate::prim::dispatch::float_operand;
use crate::prim::reduce::slices::{check_axes, kept, map_slices};
use crate::prim::Ops;
use crate::tensor::alloc::AllocError;
use crate::tensor::{Array, Float, Tensor, TensorType};

#[derive(Debug, Clone, PartialEq)]
pub struct LayerNorm {
    /// The normalised axes, as given (checked and sorted by the type rule).
    pub axes: Vec<usize>,
    pub eps: f64,
    /// Whether gamma and beta follow x as operands.
    pub affine: bool,
}

impl LayerNorm {
    pub fn new(axes: Vec<usize>, eps: f64, affine: bool) -> LayerNorm {
        LayerNorm { axes, eps, affine }
    }

    fn sorted(&self) -> Vec<usize> {
        let mut a = self.axes.clone();
        a.sort_unstable();
        a
    }

    fn check_eps(&self) -> Result<(), TypeError> {
        if self.eps > 0.0 && self.eps.is_finite() {
            Ok(())
        } else {
            Err(TypeError::attr(
                "eps",
                format!("expected a finite number > 0, found {}", self.eps),
            ))
        }
    }

    fn run<T: Float>(
        &self,
        x: &Array<T>,
        affine: Option<(&[T], &[T])>,
    ) -> Result<Array<T>, AllocError> {
        let eps = self.eps;
        map_slices(x, &self.sorted(), |s, out| {
            let m = s.len() as f64;
            // Two passes in f64: the mean first, then the centred squares.
            let mu = s.iter().map(|&v| wide(v)).sum::<f64>() / m;
            let var = s.iter().map(|&v| (wide(v) - mu).powi(2)).sum::<f64>() / m;
            let r = 1.0 / (var + eps).sqrt();
            for (j, (o, v)) in out.iter_mut().zip(s).enumerate() {
                let h = (wide(*v) - mu) * r;
                *o = T::from_f64(match affine {
                    Some((g, b)) => h * wide(g[j]) + wide(b[j]),
                    None => h,
                });
            }
        })
    }
}

fn wide<T: Float>(v: T) -> f64 {
    <T as Float>::to_f64(v)
}

/// (x̂, r broadcast to x): the normalised values and the inverse deviations, as nodes.
fn normalised(b: &mut Builder, x: Var, axes: &[usize], eps: f64) -> Result<(Var, Var), TypeError> {
    let ty = b.ty(x).clone();
    let mu = mean_back(b, x, axes)?;
    let c = b.sub(x, mu)?;
    let c2 = b.mul(c, c)?;
    let v = mean(b, c2, axes)?;
    let e = b.full_like(eps, v)?;
    let ve = b.add(v, e)?;
    let r = b.rsqrt(ve)?;
    let rb = b.broadcast(r, ty.shape.clone(), kept(ty.rank(), axes))?;
    Ok((b.mul(c, rb)?, rb))
}

/// m^-1 sum over `axes`.
fn mean(b: &mut Builder, x: Var, axes: &[usize]) -> Result<Var, TypeError> {
    let ty = b.ty(x).clone();
    let m: usize = axes.iter().map(|&a| ty.dims()[a]).product();
    let s = b.sum(x, Some(axes.to_vec()))?;
    b.div_count(s, m)
}

/// The slice means, broadcast back to x's shape.
fn mean_back(b: &mut Builder, x: Var, axes: &[usize]) -> Result<Var, TypeError> {
    let ty = b.ty(x).clone();
    let mu = mean(b, x, axes)?;
    b.broadcast(mu, ty.shape.clone(), kept(ty.rank(), axes))
}

/// N(w) = r (w - mean(w) - x̂ mean(x̂ w)).
fn normal_map(
    b: &mut Builder,
    w: Var,
    xhat: Var,
    rb: Var,
    axes: &[usize],
) -> Result<Var, TypeError> {
    let mw = mean_back(b, w, axes)?;
    let hw = b.mul(xhat, w)?;
    let mhw = mean_back(b, hw, axes)?;
    let proj = b.mul(xhat, mhw)?;
    let c = b.sub(w, mw)?;
    let c = b.sub(c, proj)?;
    b.mul(rb, c)
}

/// An affine parameter (axes' sizes) broadcast to x's type.
fn spread(b: &mut Builder, p: Var, ty: &TensorType, axes: &[usize]) -> Result<Var, TypeError> {
    b.broadcast(p, ty.shape.clone(), axes.to_vec())
}

/// Sum over the axes not normalised (identity when there are none).
fn sum_others(b: &mut Builder, v: Var, axes: &[usize]) -> Result<Var, TypeError> {
    let others = kept(b.ty(v).rank(), axes);
    if others.is_empty() {
        Ok(v)
    } else {
        b.sum(v, Some(others))
    }
}

impl Primitive for LayerNorm {
    fn name(&self) -> &str {
        "layer_norm"
    }
    fn drawing(&self) -> Option<Drawing> {
        Some(Drawing::new(1, draw_layer_norm))
    }
    fn f32_budget(&self, _inputs: &[TensorType], _output: &TensorType) -> crate::ir::Budget {
        crate::ir::Budget::Relative(1.0)
    }
    fn attrs(&self) -> Attrs {
        let mut a =
            crate::ir::attrs_of([("axes", self.axes.clone().into()), ("eps", self.eps.into())]);
        if self.affine {
            a.insert("affine".into(), true.into());
        }
        a
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType, TypeError> {
        let n = if self.affine { 3 } else { 1 };
        if inputs.len() != n {
            return Err(TypeError::Arity {
                expected: format!("{n} (x{})", if self.affine { ", gamma, beta" } else { "" }),
                found: inputs.len(),
            });
        }
        float_operand(inputs, 0)?;
        self.check_eps()?;
        let x = &inputs[0];
        let axes = check_axes(x, Some(&self.axes), "axes", true)?;
        let param = TensorType::new(
            x.dtype,
            axes.iter().map(|&a| x.dims()[a]).collect::<Vec<_>>(),
        );
        for (i, t) in inputs.iter().enumerate().skip(1) {
            if *t != param {
                return Err(TypeError::Operand {
                    index: i,
                    expected: format!("{param} (the sizes of axes {axes:?} of {x})"),
                    found: t.clone(),
                });
            }
        }
        Ok(x.clone())
    }
    fn eval(&self, x: &[&Tensor]) -> Result<Tensor, KernelError> {
        fn pair<'a, T: crate::tensor::Element>(
            x: &[&'a Tensor],
            get: impl Fn(&'a Tensor) -> Option<&'a Array<T>>,
        ) -> Option<(&'a [T], &'a [T])> {
            Some((get(x.get(1)?)?.data(), get(x.get(2)?)?.data()))
        }
        match x[0] {
            Tensor::F32(a) => Ok(Tensor::F32(self.run(a, pair(x, Tensor::as_f32))?)),
            Tensor::F64(a) => Ok(Tensor::F64(self.run(a, pair(x, Tensor::as_f64))?)),
            Tensor::I64(_) | Tensor::Bool(_) | Tensor::Stored(_) => Err(KernelError::Unsupported(
                "layer_norm of integers".to_string(),
            )),
        }
    }
    fn flops(&self, inputs: &[TensorType], _output: &TensorType) -> u64 {
        // mean, centre, square, sum, scale (+ affine: multiply, add) per element
        (if self.affine { 7 } else { 5 }) * inputs[0].numel() as u64
    }
    fn jvp(
        &self,
        b: &mut Builder,
        x: &[Var],
        _y: Var,
        dx: &[Option<Var>],
    ) -> Result<Option<Var>, RuleError> {
        let axes = self.sorted();
        let ty = b.ty(x[0]).clone();
        let (xhat, rb) = normalised(b, x[0], &axes, self.eps)?;
        let mut terms = Vec::new();
        if let Some(d) = dx[0] {
            let dh = normal_map(b, d, xhat, rb, &axes)?;
            terms.push(Some(if self.affine {
                let g = spread(b, x[1], &ty, &axes)?;
                b.mul(g, dh)?
            } else {
                dh
            }));
        }
        if self.affine {
            if let Some(dg) = dx[1] {
                let g = spread(b, dg, &ty, &axes)?;
                terms.push(Some(b.mul(g, xhat)?));
            }
            if let Some(db) = dx[2] {
                terms.push(Some(spread(b, db, &ty, &axes)?));
            }
        }
        crate::prim::sum_terms(b, &terms)
    }
    fn vjp(
        &self,
        b: &mut Builder,
        x: &[Var],
        _y: Var,
        u: Var,
    ) -> Result<Vec<Option<Var>>, RuleError> {
        let axes = self.sorted();
        let ty = b.ty(x[0]).clone();
        let (xhat, rb) = normalised(b, x[0], &axes, self.eps)?;
        if !self.affine {
            return Ok(vec![Some(normal_map(b, u, xhat, rb, &axes)?)]);
        }
        let g = spread(b, x[1], &ty, &axes)?;
        let gu = b.mul(g, u)?;
        let dx = normal_map(b, gu, xhat, rb, &axes)?;
        let uh = b.mul(u, xhat)?;
        let dg = sum_others(b, uh, &axes)?;
        let db = sum_others(b, u, &axes)?;
        Ok(vec![Some(dx), Some(dg), Some(db)])
    }
    fn lower(&self, b: &mut Builder, x: &[Var]) -> Option<Result<Var, TypeError>> {
        Some((|| {
            let axes = self.sorted();
            let ty = b.ty(x[0]).clone();
            let (xhat, _) = normalised(b, x[0], &axes, self.eps)?;
            if !self.affine {
                return Ok(xhat);
            }
            let g = spread(b, x[1], &ty, &axes)?;
            let beta = spread(b, x[2], &ty, &axes)?;
            let scaled = b.mul(xhat, g)?;
            b.add(scaled, beta)
        })())
    }
    /// Batching: with shared gamma and beta, the same axes shifted; else per example.
    fn batch(
        &self,
        b: &mut crate::ir::Builder,
        x: &[crate::ir::Var],
        at: &crate::ir::BatchCtx,
    ) -> Result<crate::ir::Var, crate::ir::RuleError> {
        if !at.only(&[0]) {
            return crate::prim::batching::per_example(b, x, at);
        }
        let mut prim = self.clone();
        prim.axes = crate::prim::batching::shifted(&self.axes);
        Ok(b.op(Arc::new(prim), x)?)
    }
}

pub(crate) fn register(r: &mut Registry) {
    r.register("layer_norm", |attrs: &Attrs| {
        let mut a = AttrReader::new(attrs);
        let axes = a.usize_list("axes")?;
        let eps = a.f64("eps")?;
        let affine = a.flag("affine")?;
        a.finish()?;
        let ln = LayerNorm::new(axes, eps, affine);
        ln.check_eps()?;
        Ok(Arc::new(ln) as Prim)
    });
    r.set_example(
        "layer_norm",
        crate::ir::attrs_json(r#"{"axes": [0], "eps": 1e-5}"#),
    );
}

/// |x̂| <= sqrt(m) over a slice of m (c_i^2 <= sum c^2 = m v); affine: |gamma| sqrt(m) + |beta|.
fn draw_layer_norm(d: &mut dyn Draw) -> Result<Drawn, DrawError> {
    let x = d.pick();
    let x = d.moderate(x, 8.0)?;
    let x = d.ranked(x)?;
    let ty = d.ty(x.var);
    let mut axes: Vec<usize> = (0..ty.rank()).filter(|_| d.chance(0.5)).collect();
    if axes.is_empty() {
        axes.push(ty.rank() - 1);
    }
    let m: usize = axes.iter().map(|&a| ty.dims()[a]).product();
    // eps in [2^-5, 2^-2]: the k-th derivative grows like (v + eps)^(-k/2) on near-constant
    // slices (v -> 0), beyond what a fourth-order difference with h = 2^-12 resolves.
    let eps = 2f64.powi(-(d.int(2, 5) as i32));
    let mut r = (m as f64).sqrt();
    let affine = if d.chance(0.5) {
        let pty = TensorType::new(
            ty.dtype,
            axes.iter().map(|&a| ty.dims()[a]).collect::<Vec<_>>(),
        );
        let gamma = d.weight(&pty)?;
        let gamma = d.moderate(gamma, 2.0)?;
        let beta = d.weight(&pty)?;
        let beta = d.moderate(beta, 2.0)?;
        r = gamma.range.mag() * r + beta.range.mag();
        Some((gamma.var, beta.var))
    } else {
        None
    };
    d.same(Interval::symmetric(r), |b| {
        b.layer_norm(x.var, axes, eps, affine)
    })
}
