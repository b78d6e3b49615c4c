//! batch_norm {"epsilon", "mode", "output"}: per-channel normalisation of x [N, C, ...] (the
//! channel is axis 1, as in ONNX) with scale [C] and bias [C]. With A every axis but 1 and m
//! the number of elements per channel:
//!
//! - `"mode": "training"` (operands x, scale, bias) uses the batch statistics
//!   mu = m^-1 sum_A x and the biased variance v = m^-1 sum_A (x - mu)^2;
//! - `"mode": "inference"` (operands x, scale, bias, mean, var) uses the given statistics
//!   (var >= 0, else a domain error).
//!
//! Either way y = scale (x - mu) (v + epsilon)^-1/2 + bias, epsilon > 0 (default 1e-5).
//!
//! A node has one result, so training mode names it with `output`: `"y"` (default) the
//! normalised values, `"mean"` or `"var"` the batch statistics [C] it used. A layer applies
//! the primitive once per result it needs and updates running statistics from the last two,
//! functionally (`docs/ops.md`). Inference mode has only `"y"`.
//!
//! Rules. Training `y` is layer normalisation over A with the affine parameters along axis 1:
//! with r = (v + epsilon)^-1/2 and x̂ = (x - mu) r, N(w) = r (w - mean_A w - x̂ mean_A(x̂ w)) is
//! the derivative of x̂ and is symmetric, so dy = scale N(dx) + dscale x̂ + dbias and
//! x̄ = N(scale u). `mean`: dmu = mean_A dx, x̄ = u / m. `var`: dv = 2 mean_A((x - mu) dx),
//! x̄ = 2 (x - mu) u / m. Inference is elementwise in x and the statistics:
//! dy = scale r (dx - dmean) + (x - mean) r dscale - scale (x - mean) r^3 dvar / 2 + dbias.
//!
//! The square root makes `y` irrational: it has no exact evaluation; the statistics do.

use crate::ir::{Draw, DrawError, Drawn, Interval};
use std::sync::Arc;

use crate::ir::{
    AttrReader, Attrs, Budget, Builder, KernelError, Prim, Primitive, Registry, RuleError,
    TypeError, Var,
};
use crate::prim::dispatch::float_operand;
use crate::prim::Ops;
use crate::tensor::{Array, Float, RArray, Rational, Tensor, TensorType};

/// Where the statistics come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchNormMode {
    /// From the batch itself.
    Training,
    /// Given as operands (running statistics).
    Inference,
}

/// Which of training mode's results a node returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchNormOutput {
    /// The normalised values, x's type.
    Y,
    /// The batch mean per channel, `[C]`.
    Mean,
    /// The biased batch variance per channel, `[C]`.
    Var,
}

#[derive(Debug, Clone, PartialEq)]
pub struct BatchNorm {
    pub epsilon: f64,
    pub mode: BatchNormMode,
    pub output: BatchNormOutput,
}

/// The default epsilon, as in ONNX and PyTorch.
pub const BATCH_NORM_EPSILON: f64 = 1e-5;

impl BatchNorm {
    pub fn new(epsilon: f64, mode: BatchNormMode, output: BatchNormOutput) -> BatchNorm {
        BatchNorm {
            epsilon,
            mode,
            output,
        }
    }

    fn check(&self) -> Result<(), TypeError> {
        if !(self.epsilon > 0.0 && self.epsilon.is_finite()) {
            return Err(TypeError::attr(
                "epsilon",
                format!("expected a finite number > 0, found {}", self.epsilon),
            ));
        }
        if self.mode == BatchNormMode::Inference && self.output != BatchNormOutput::Y {
            return Err(TypeError::attr(
                "output",
                "inference mode returns only \"y\" (its statistics are operands)",
            ));
        }
        Ok(())
    }

    fn n_operands(&self) -> usize {
        match self.mode {
            BatchNormMode::Training => 3,
            BatchNormMode::Inference => 5,
        }
    }

    /// Per channel (mean, variance) of x [N, C, S] flattened, in f64, two passes.
    fn batch_stats<T: Float>(x: &[T], n: usize, c: usize, s: usize) -> Vec<(f64, f64)> {
        (0..c)
            .map(|ch| {
                let slice =
                    || (0..n).flat_map(move |i| x[(i * c + ch) * s..(i * c + ch + 1) * s].iter());
                let m = (n * s) as f64;
                let mu = slice().map(|v| wide(*v)).sum::<f64>() / m;
                let var = slice().map(|v| (wide(*v) - mu).powi(2)).sum::<f64>() / m;
                (mu, var)
            })
            .collect()
    }

    fn run<T: Float>(&self, x: &[&Array<T>]) -> Result<Array<T>, KernelError> {
        let dims = x[0].dims();
        let (n, c) = (dims[0], dims[1]);
        let s: usize = dims[2..].iter().product();
        let widen = |a: &Array<T>| a.data().iter().map(|v| wide(*v)).collect::<Vec<_>>();
        let stats = match self.mode {
            BatchNormMode::Training => Self::batch_stats(x[0].data(), n, c, s),
            BatchNormMode::Inference => {
                let (mu, var) = (widen(x[3]), widen(x[4]));
                if let Some(k) = var.iter().position(|v| *v < 0.0) {
                    return Err(KernelError::Domain(format!(
                        "variance {} at channel {k}, expected a value >= 0",
                        var[k]
                    )));
                }
                mu.into_iter().zip(var).collect()
            }
        };
        let per_channel = |f: fn(&(f64, f64)) -> f64| {
            let v: Vec<T> = stats.iter().map(|st| T::from_f64(f(st))).collect();
            Array::new([c], v).expect("one per channel")
        };
        match self.output {
            BatchNormOutput::Mean => return Ok(per_channel(|st| st.0)),
            BatchNormOutput::Var => return Ok(per_channel(|st| st.1)),
            BatchNormOutput::Y => {}
        }
        let (scale, bias) = (widen(x[1]), widen(x[2]));
        let mut out = crate::tensor::alloc::with_capacity(x[0].len())?;
        for (k, v) in x[0].data().iter().enumerate() {
            let ch = (k / s) % c;
            let (mu, var) = stats[ch];
            let r = 1.0 / (var + self.epsilon).sqrt();
            out.push(T::from_f64(scale[ch] * (wide(*v) - mu) * r + bias[ch]));
        }
        Ok(Array::with_elems(dims.to_vec(), out).expect("x's shape"))
    }
}

fn wide<T: Float>(v: T) -> f64 {
    <T as Float>::to_f64(v)
}

/// Every axis but the channel axis 1.
fn stat_axes(rank: usize) -> Vec<usize> {
    (0..rank).filter(|&a| a != 1).collect()
}

/// A per-channel value [C] broadcast along axis 1 of x's type.
fn along_channels(b: &mut Builder, p: Var, ty: &TensorType) -> Result<Var, TypeError> {
    b.broadcast(p, ty.shape.clone(), vec![1])
}

/// m^-1 sum over every axis but 1.
fn channel_mean(b: &mut Builder, x: Var) -> Result<Var, TypeError> {
    let ty = b.ty(x).clone();
    let axes = stat_axes(ty.rank());
    let m: usize = axes.iter().map(|&a| ty.dims()[a]).product();
    let s = b.sum(x, Some(axes))?;
    b.div_count(s, m)
}

/// The channel means of x broadcast back to x's shape.
fn channel_mean_back(b: &mut Builder, x: Var) -> Result<Var, TypeError> {
    let ty = b.ty(x).clone();
    let mu = channel_mean(b, x)?;
    along_channels(b, mu, &ty)
}

/// Batch statistics as nodes: (x - mu, v) with the centred values x's shape and v [C].
fn centred_and_var(b: &mut Builder, x: Var) -> Result<(Var, Var), TypeError> {
    let mu = channel_mean_back(b, x)?;
    let c = b.sub(x, mu)?;
    let c2 = b.mul(c, c)?;
    Ok((c, channel_mean(b, c2)?))
}

/// r = (v + epsilon)^-1/2 [C].
fn inverse_deviation(b: &mut Builder, v: Var, epsilon: f64) -> Result<Var, TypeError> {
    let e = b.full_like(epsilon, v)?;
    let ve = b.add(v, e)?;
    b.rsqrt(ve)
}

/// Sum over every axis but 1: [C].
fn channel_sum(b: &mut Builder, v: Var) -> Result<Var, TypeError> {
    let rank = b.ty(v).rank();
    b.sum(v, Some(stat_axes(rank)))
}

/// Training-mode pieces: (x̂, r broadcast).
fn training_normalised(b: &mut Builder, x: Var, epsilon: f64) -> Result<(Var, Var), TypeError> {
    let ty = b.ty(x).clone();
    let (c, v) = centred_and_var(b, x)?;
    let r = inverse_deviation(b, v, epsilon)?;
    let rb = along_channels(b, r, &ty)?;
    Ok((b.mul(c, rb)?, rb))
}

/// N(w) = r (w - mean_A w - x̂ mean_A(x̂ w)).
fn normal_map(b: &mut Builder, w: Var, xhat: Var, rb: Var) -> Result<Var, TypeError> {
    let mw = channel_mean_back(b, w)?;
    let hw = b.mul(xhat, w)?;
    let mhw = channel_mean_back(b, hw)?;
    let proj = b.mul(xhat, mhw)?;
    let c = b.sub(w, mw)?;
    let c = b.sub(c, proj)?;
    b.mul(rb, c)
}

/// Inference-mode pieces: (x - mean, r) both broadcast to x's shape.
fn inference_parts(b: &mut Builder, x: &[Var], epsilon: f64) -> Result<(Var, Var), TypeError> {
    let ty = b.ty(x[0]).clone();
    let mb = along_channels(b, x[3], &ty)?;
    let c = b.sub(x[0], mb)?;
    let r = inverse_deviation(b, x[4], epsilon)?;
    Ok((c, along_channels(b, r, &ty)?))
}

impl Primitive for BatchNorm {
    fn name(&self) -> &str {
        "batch_norm"
    }
    fn drawing(&self) -> Option<crate::ir::Drawing> {
        Some(crate::ir::Drawing::new(1, draw_batch_norm))
    }
    /// Applied per example, so batched results equal a loop bitwise.
    fn batch(
        &self,
        b: &mut crate::ir::Builder,
        x: &[crate::ir::Var],
        at: &crate::ir::BatchCtx,
    ) -> Result<crate::ir::Var, crate::ir::RuleError> {
        crate::prim::batching::per_example(b, x, at)
    }
    fn formula(&self) -> Option<&'static str> {
        Some("x [N, C, ...], scale, bias [C]: scale (x - mu) (v + epsilon)^-1/2 + bias per channel; `mode` \"training\" (default): mu, v the batch mean and biased variance over every axis but 1, and `output` \"y\" (default), \"mean\" or \"var\" selects which result the node returns; \"inference\": operands x, scale, bias, mean, var give mu, v (var >= 0); `epsilon` > 0 defaults to 1e-5")
    }
    fn attrs(&self) -> Attrs {
        let mut a = crate::ir::attrs_of([
            ("epsilon", self.epsilon.into()),
            (
                "mode",
                match self.mode {
                    BatchNormMode::Training => "training",
                    BatchNormMode::Inference => "inference",
                }
                .into(),
            ),
        ]);
        let out = match self.output {
            BatchNormOutput::Y => None,
            BatchNormOutput::Mean => Some("mean"),
            BatchNormOutput::Var => Some("var"),
        };
        if let Some(o) = out {
            a.insert("output".into(), o.into());
        }
        a
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType, TypeError> {
        self.check()?;
        let n = self.n_operands();
        if inputs.len() != n {
            return Err(TypeError::Arity {
                expected: match self.mode {
                    BatchNormMode::Training => "3 (x, scale, bias) in training mode".to_string(),
                    BatchNormMode::Inference => {
                        "5 (x, scale, bias, mean, var) in inference mode".to_string()
                    }
                },
                found: inputs.len(),
            });
        }
        float_operand(inputs, 0)?;
        let x = &inputs[0];
        if x.rank() < 2 {
            return Err(TypeError::Operand {
                index: 0,
                expected: "rank >= 2 (N, C, ...)".to_string(),
                found: x.clone(),
            });
        }
        let channels = TensorType::new(x.dtype, [x.dims()[1]]);
        for (i, t) in inputs.iter().enumerate().skip(1) {
            if *t != channels {
                return Err(TypeError::Operand {
                    index: i,
                    expected: format!("{channels} (one per channel, axis 1 of {x})"),
                    found: t.clone(),
                });
            }
        }
        Ok(match self.output {
            BatchNormOutput::Y => x.clone(),
            _ => channels,
        })
    }
    fn eval(&self, x: &[&Tensor]) -> Result<Tensor, KernelError> {
        fn all<'a, T: crate::tensor::Element>(
            x: &[&'a Tensor],
            get: impl Fn(&'a Tensor) -> Option<&'a Array<T>>,
        ) -> Result<Vec<&'a Array<T>>, KernelError> {
            x.iter()
                .map(|t| get(t).ok_or_else(|| KernelError::Unsupported("mixed dtypes".to_string())))
                .collect()
        }
        match x[0] {
            Tensor::F32(_) => Ok(Tensor::F32(self.run(&all(x, Tensor::as_f32)?)?)),
            Tensor::F64(_) => Ok(Tensor::F64(self.run(&all(x, Tensor::as_f64)?)?)),
            other => Err(KernelError::Unsupported(format!(
                "batch_norm of {}",
                other.dtype()
            ))),
        }
    }
    /// The statistics are rational; the normalised values need a square root.
    fn has_rational_eval(&self) -> bool {
        self.output != BatchNormOutput::Y
    }
    fn eval_rational(&self, x: &[&RArray]) -> Option<Result<RArray, KernelError>> {
        if self.output == BatchNormOutput::Y {
            return None;
        }
        let dims = x[0].dims();
        let (n, c) = (dims[0], dims[1]);
        let s: usize = dims[2..].iter().product();
        let m = Rational::from_integer(((n * s) as i64).into());
        let d = x[0].data();
        let out = (0..c)
            .map(|ch| {
                let slice: Vec<&Rational> = (0..n)
                    .flat_map(|i| d[(i * c + ch) * s..(i * c + ch + 1) * s].iter())
                    .collect();
                let mu = slice
                    .iter()
                    .fold(Rational::from_integer(0.into()), |a, v| a + *v)
                    / &m;
                if self.output == BatchNormOutput::Mean {
                    return mu;
                }
                slice.iter().fold(Rational::from_integer(0.into()), |a, v| {
                    let dv = *v - &mu;
                    a + &dv * &dv
                }) / &m
            })
            .collect();
        Some(Ok(Array::new([c], out).expect("one per channel")))
    }
    /// Computed in f64 and rounded once.
    fn f32_budget(&self, _inputs: &[TensorType], _output: &TensorType) -> Budget {
        Budget::Relative(1.0)
    }
    fn flops(&self, inputs: &[TensorType], _output: &TensorType) -> u64 {
        let per = match self.mode {
            BatchNormMode::Training => 7,
            BatchNormMode::Inference => 4,
        };
        per * inputs[0].numel() as u64
    }
    fn jvp(
        &self,
        b: &mut Builder,
        x: &[Var],
        _y: Var,
        dx: &[Option<Var>],
    ) -> Result<Option<Var>, RuleError> {
        let ty = b.ty(x[0]).clone();
        let mut terms = Vec::new();
        match (self.mode, self.output) {
            (BatchNormMode::Training, BatchNormOutput::Mean) => {
                if let Some(d) = dx[0] {
                    terms.push(Some(channel_mean(b, d)?));
                }
            }
            (BatchNormMode::Training, BatchNormOutput::Var) => {
                if let Some(d) = dx[0] {
                    let (c, _) = centred_and_var(b, x[0])?;
                    let cd = b.mul(c, d)?;
                    let m = channel_mean(b, cd)?;
                    terms.push(Some(b.scale(m, 2.0)?));
                }
            }
            (BatchNormMode::Training, BatchNormOutput::Y) => {
                let (xhat, rb) = training_normalised(b, x[0], self.epsilon)?;
                if let Some(d) = dx[0] {
                    let dh = normal_map(b, d, xhat, rb)?;
                    let g = along_channels(b, x[1], &ty)?;
                    terms.push(Some(b.mul(g, dh)?));
                }
                if let Some(dg) = dx[1] {
                    let g = along_channels(b, dg, &ty)?;
                    terms.push(Some(b.mul(g, xhat)?));
                }
                if let Some(db) = dx[2] {
                    terms.push(Some(along_channels(b, db, &ty)?));
                }
            }
            (BatchNormMode::Inference, _) => {
                let (c, rb) = inference_parts(b, x, self.epsilon)?;
                let g = along_channels(b, x[1], &ty)?;
                let gr = b.mul(g, rb)?;
                if let Some(d) = dx[0] {
                    terms.push(Some(b.mul(gr, d)?));
                }
                if let Some(dg) = dx[1] {
                    let dgb = along_channels(b, dg, &ty)?;
                    let cr = b.mul(c, rb)?;
                    terms.push(Some(b.mul(dgb, cr)?));
                }
                if let Some(db) = dx[2] {
                    terms.push(Some(along_channels(b, db, &ty)?));
                }
                if let Some(dm) = dx[3] {
                    let dmb = along_channels(b, dm, &ty)?;
                    let t = b.mul(gr, dmb)?;
                    terms.push(Some(b.neg(t)?));
                }
                if let Some(dv) = dx[4] {
                    // -scale (x - mean) r^3 dvar / 2
                    let dvb = along_channels(b, dv, &ty)?;
                    let r2 = b.mul(rb, rb)?;
                    let gr3 = b.mul(gr, r2)?;
                    let t = b.mul(gr3, c)?;
                    let t = b.mul(t, dvb)?;
                    terms.push(Some(b.scale(t, -0.5)?));
                }
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
        let ty = b.ty(x[0]).clone();
        let m: usize = stat_axes(ty.rank()).iter().map(|&a| ty.dims()[a]).product();
        match (self.mode, self.output) {
            (BatchNormMode::Training, BatchNormOutput::Mean) => {
                let ub = along_channels(b, u, &ty)?;
                Ok(vec![Some(b.div_count(ub, m)?), None, None])
            }
            (BatchNormMode::Training, BatchNormOutput::Var) => {
                let (c, _) = centred_and_var(b, x[0])?;
                let ub = along_channels(b, u, &ty)?;
                let cu = b.mul(c, ub)?;
                let two = b.scale(cu, 2.0)?;
                Ok(vec![Some(b.div_count(two, m)?), None, None])
            }
            (BatchNormMode::Training, BatchNormOutput::Y) => {
                let (xhat, rb) = training_normalised(b, x[0], self.epsilon)?;
                let g = along_channels(b, x[1], &ty)?;
                let gu = b.mul(g, u)?;
                let dx = normal_map(b, gu, xhat, rb)?;
                let uh = b.mul(u, xhat)?;
                let dg = channel_sum(b, uh)?;
                let db = channel_sum(b, u)?;
                Ok(vec![Some(dx), Some(dg), Some(db)])
            }
            (BatchNormMode::Inference, _) => {
                let (c, rb) = inference_parts(b, x, self.epsilon)?;
                let g = along_channels(b, x[1], &ty)?;
                let gr = b.mul(g, rb)?;
                let gru = b.mul(gr, u)?;
                let cr = b.mul(c, rb)?;
                let ucr = b.mul(u, cr)?;
                let dg = channel_sum(b, ucr)?;
                let db = channel_sum(b, u)?;
                let s = channel_sum(b, gru)?;
                let dm = b.neg(s)?;
                // -1/2 sum_A u scale (x - mean) r^3
                let r2 = b.mul(rb, rb)?;
                let t = b.mul(gru, c)?;
                let t = b.mul(t, r2)?;
                let t = channel_sum(b, t)?;
                let dv = b.scale(t, -0.5)?;
                Ok(vec![Some(gru), Some(dg), Some(db), Some(dm), Some(dv)])
            }
        }
    }
    fn lower(&self, b: &mut Builder, x: &[Var]) -> Option<Result<Var, TypeError>> {
        Some((|| {
            let ty = b.ty(x[0]).clone();
            let xhat = match (self.mode, self.output) {
                (BatchNormMode::Training, BatchNormOutput::Mean) => {
                    return channel_mean(b, x[0]);
                }
                (BatchNormMode::Training, BatchNormOutput::Var) => {
                    return Ok(centred_and_var(b, x[0])?.1);
                }
                (BatchNormMode::Training, BatchNormOutput::Y) => {
                    training_normalised(b, x[0], self.epsilon)?.0
                }
                (BatchNormMode::Inference, _) => {
                    let (c, rb) = inference_parts(b, x, self.epsilon)?;
                    b.mul(c, rb)?
                }
            };
            let g = along_channels(b, x[1], &ty)?;
            let beta = along_channels(b, x[2], &ty)?;
            let scaled = b.mul(xhat, g)?;
            b.add(scaled, beta)
        })())
    }
}

pub(crate) fn register(r: &mut Registry) {
    r.register("batch_norm", |attrs: &Attrs| {
        let mut a = AttrReader::new(attrs);
        let epsilon = match a.get("epsilon") {
            None => BATCH_NORM_EPSILON,
            Some(_) => a.f64("epsilon")?,
        };
        let mode = match a.get("mode") {
            None => BatchNormMode::Training,
            Some(_) => match a.string("mode")? {
                "training" => BatchNormMode::Training,
                "inference" => BatchNormMode::Inference,
                other => {
                    return Err(TypeError::attr(
                        "mode",
                        format!("expected \"training\" or \"inference\", found \"{other}\""),
                    ))
                }
            },
        };
        let output = match a.get("output") {
            None => BatchNormOutput::Y,
            Some(_) => match a.string("output")? {
                "y" => BatchNormOutput::Y,
                "mean" => BatchNormOutput::Mean,
                "var" => BatchNormOutput::Var,
                other => {
                    return Err(TypeError::attr(
                        "output",
                        format!("expected \"y\", \"mean\" or \"var\", found \"{other}\""),
                    ))
                }
            },
        };
        a.finish()?;
        let bn = BatchNorm::new(epsilon, mode, output);
        bn.check()?;
        Ok(Arc::new(bn) as Prim)
    });
}

/// Training: |x̂| <= sqrt(m) per channel, so |y| <= |scale| sqrt(m) + |bias|; the mean lies in
/// x's range and the variance in [0, mag²]. Inference with var >= v0:
/// |y| <= |scale| (|x| + |mean|) (v0 + epsilon)^-1/2 + |bias|.
fn draw_batch_norm(d: &mut dyn Draw) -> Result<Drawn, DrawError> {
    let x = d.pick();
    let x = d.moderate(x, 8.0)?;
    let rank = d.int(2, d.max_rank().max(2));
    let x = d.shaped(x, rank)?;
    let ty = d.ty(x.var);
    let channel = TensorType::new(ty.dtype, [ty.dims()[1]]);
    let m = ty.numel() / ty.dims()[1];
    // epsilon in [2^-5, 2^-2], as for layer_norm: higher derivatives stay resolvable.
    let epsilon = 2f64.powi(-(d.int(2, 5) as i32));
    let scale = d.weight(&channel)?;
    let scale = d.moderate(scale, 2.0)?;
    let bias = d.weight(&channel)?;
    let bias = d.moderate(bias, 2.0)?;
    if d.chance(0.3) {
        let mean = d.weight(&channel)?;
        let mean = d.moderate(mean, 2.0)?;
        let var = d.weight(&channel)?;
        let var = d.positive(var)?;
        let r = scale.range.mag() * (x.range.mag() + mean.range.mag())
            / (var.range.lo + epsilon).sqrt()
            + bias.range.mag();
        let ops = [x.var, scale.var, bias.var, mean.var, var.var];
        return d.same(Interval::symmetric(r), |b| {
            b.batch_norm_infer(ops[0], [ops[1], ops[2], ops[3], ops[4]], epsilon)
        });
    }
    let (output, range) = match d.below(3) {
        0 => (
            BatchNormOutput::Y,
            Interval::symmetric(scale.range.mag() * (m as f64).sqrt() + bias.range.mag()),
        ),
        1 => (BatchNormOutput::Mean, x.range),
        _ => (
            BatchNormOutput::Var,
            Interval::new(0.0, x.range.mag() * x.range.mag()),
        ),
    };
    let p = BatchNorm::new(epsilon, BatchNormMode::Training, output);
    let var = d.apply(Arc::new(p), &[x.var, scale.var, bias.var])?;
    Ok(Drawn { var, range })
}
