//! The generator table: one row per primitive that is not an elementwise row, and each row's
//! rule for drawing an application of it. Elementwise rows (`prim::elementwise`) need no entry:
//! their operand domains, caps and ranges are drawn from the row itself (`rows.rs`). Whether an
//! entry's primitive is smooth or rational is asked of the primitive, not restated here.

use std::sync::Arc;

use rand::RngExt;

use super::composites::*;
use super::windows::*;
use super::{Gen, GenError, Interval, Val};
use crate::ir::Var;
use crate::prim::{self, Ops};
use crate::tensor::{DType, Shape, TensorType};

type BuildFn = fn(&mut Gen) -> Result<Val, GenError>;

/// One row of the generator table.
pub struct Entry {
    /// The registry name of the primitive it exercises.
    pub name: &'static str,
    /// Relative frequency.
    pub weight: u32,
    /// Draws one application onto the generator's pool.
    pub(super) build: BuildFn,
}

impl std::fmt::Debug for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Entry({})", self.name)
    }
}

/// The generator table: one row per primitive. A new primitive's row goes here.
pub const ENTRIES: &[Entry] = &[
    entry("add", 3, gen_add),
    entry("sub", 2, gen_sub),
    entry("neg", 1, gen_neg),
    entry("mul", 3, gen_mul),
    entry("exp", 2, gen_exp),
    entry("log", 1, gen_log),
    entry("tanh", 2, gen_tanh),
    entry("sigmoid", 1, gen_sigmoid),
    entry("relu", 1, gen_relu),
    entry("step", 1, gen_step),
    entry("reciprocal", 1, gen_reciprocal),
    entry("rsqrt", 1, gen_rsqrt),
    entry("matmul", 3, gen_matmul),
    entry("sum", 2, gen_sum),
    entry("broadcast", 1, gen_broadcast),
    entry("broadcast_rows", 1, gen_broadcast_rows),
    entry("reshape", 2, gen_reshape),
    entry("permute", 1, gen_permute),
    entry("gather", 2, gen_gather),
    entry("scatter_add", 1, gen_scatter_add),
    entry("concat", 2, gen_concat),
    entry("constant", 1, gen_constant),
    entry("convert", 1, gen_convert),
    entry("linear", 2, gen_linear),
    entry("stop_gradient", 1, gen_stop_gradient),
    // Composites: windows (generate/windows.rs).
    entry("conv1d", 1, gen_conv1d),
    entry("conv2d", 2, gen_conv2d),
    entry("conv1d_input_grad", 1, gen_conv1d_input_grad),
    entry("conv2d_input_grad", 1, gen_conv2d_input_grad),
    entry("conv1d_weight_grad", 1, gen_conv1d_weight_grad),
    entry("conv2d_weight_grad", 1, gen_conv2d_weight_grad),
    entry("sum_pool2d", 1, gen_sum_pool2d),
    entry("sum_pool2d_transpose", 1, gen_sum_pool2d_transpose),
    entry("avg_pool2d", 1, gen_avg_pool2d),
    entry("max_pool2d", 1, gen_max_pool2d),
    entry("max_pool2d_select", 1, gen_max_pool2d_select),
    entry("max_pool2d_scatter", 1, gen_max_pool2d_scatter),
    // Composites: the rest (generate/composites.rs).
    entry("reduce_max", 1, gen_reduce_max),
    entry("max_weights", 1, gen_max_weights),
    entry("softmax", 2, gen_softmax),
    entry("log_softmax", 1, gen_log_softmax),
    entry("softmax_pullback", 1, gen_softmax_pullback),
    entry("tanh_pullback", 1, gen_tanh_pullback),
    entry("masked_softmax", 1, gen_masked_softmax),
    entry("batch_matmul", 2, gen_batch_matmul),
    entry("attention_probs", 1, gen_attention_probs),
    entry("sdpa", 1, gen_sdpa),
    entry("layer_norm", 1, gen_layer_norm),
    entry("cross_entropy", 1, gen_cross_entropy),
    entry("mse", 1, gen_mse),
    entry("take", 1, gen_take),
    entry("scatter_rows", 1, gen_scatter_rows),
    entry("one_hot", 1, gen_one_hot),
];

const fn entry(name: &'static str, weight: u32, build: BuildFn) -> Entry {
    Entry {
        name,
        weight,
        build,
    }
}

fn gen_add(g: &mut Gen) -> Result<Val, GenError> {
    let x = g.pick();
    let x = g.moderate(x, 64.0)?;
    let y = g.partner(x)?;
    let y = g.moderate(y, 64.0)?;
    let r = if x.var == y.var {
        x.range.scale(2.0)
    } else {
        x.range.plus(y.range)
    };
    g.same(r, |b| b.add(x.var, y.var))
}

fn gen_sub(g: &mut Gen) -> Result<Val, GenError> {
    let x = g.pick();
    let x = g.moderate(x, 64.0)?;
    let y = g.partner(x)?;
    let y = g.moderate(y, 64.0)?;
    let r = if x.var == y.var {
        Interval::new(0.0, 0.0)
    } else {
        x.range.minus(y.range)
    };
    g.same(r, |b| b.sub(x.var, y.var))
}

fn gen_neg(g: &mut Gen) -> Result<Val, GenError> {
    let x = g.pick();
    g.same(x.range.negated(), |b| b.neg(x.var))
}

fn gen_mul(g: &mut Gen) -> Result<Val, GenError> {
    let x = g.pick();
    let x = g.moderate(x, 4.0)?;
    let y = g.partner(x)?;
    let y = g.moderate(y, 4.0)?;
    let r = if x.var == y.var {
        x.range.square()
    } else {
        x.range.times(y.range)
    };
    g.same(r, |b| b.mul(x.var, y.var))
}

fn gen_exp(g: &mut Gen) -> Result<Val, GenError> {
    let x = g.pick();
    let x = g.moderate(x, 2.0)?;
    g.same(x.range.increasing(f64::exp), |b| b.exp(x.var))
}

fn gen_log(g: &mut Gen) -> Result<Val, GenError> {
    let x = g.pick();
    let x = g.positive(x)?;
    g.same(x.range.increasing(f64::ln), |b| b.log(x.var))
}

fn gen_tanh(g: &mut Gen) -> Result<Val, GenError> {
    let x = g.pick();
    g.same(x.range.increasing(f64::tanh), |b| b.tanh(x.var))
}

fn gen_sigmoid(g: &mut Gen) -> Result<Val, GenError> {
    let x = g.pick();
    let s = |v: f64| 1.0 / (1.0 + (-v).exp());
    g.same(x.range.increasing(s), |b| b.sigmoid(x.var))
}

fn gen_relu(g: &mut Gen) -> Result<Val, GenError> {
    let x = g.pick();
    g.same(x.range.increasing(|v| v.max(0.0)), |b| b.relu(x.var))
}

fn gen_step(g: &mut Gen) -> Result<Val, GenError> {
    let x = g.pick();
    let h = |v: f64| if v > 0.0 { 1.0 } else { 0.0 };
    g.same(x.range.increasing(h), |b| b.step(x.var))
}

fn gen_reciprocal(g: &mut Gen) -> Result<Val, GenError> {
    let x = g.pick();
    let mut p = g.positive(x)?;
    if g.chance(0.3) {
        let var = g.op(|b| b.neg(p.var))?;
        p = Val {
            var,
            range: p.range.negated(),
        };
    }
    let r = Interval::new(1.0 / p.range.hi, 1.0 / p.range.lo);
    g.same(r, |b| b.reciprocal(p.var))
}

fn gen_rsqrt(g: &mut Gen) -> Result<Val, GenError> {
    let x = g.pick();
    let p = g.positive(x)?;
    let r = Interval::new(1.0 / p.range.hi.sqrt(), 1.0 / p.range.lo.sqrt());
    g.same(r, |b| b.rsqrt(p.var))
}

fn gen_matmul(g: &mut Gen) -> Result<Val, GenError> {
    let x = g.pick();
    let x = g.moderate(x, 2.0)?;
    let a = g.matrix(x)?;
    let ad = g.ty(a).dims().to_vec();
    let (ta, tb) = (g.chance(0.25), g.chance(0.25));
    let k = if ta { ad[0] } else { ad[1] };
    let n = g.rng.random_range(1..=g.cfg.max_dim);
    let bdims = if tb { [n, k] } else { [k, n] };
    let bty = TensorType::new(g.ty(a).dtype, bdims);
    let w = g.weight(&bty)?;
    let w = g.moderate(w, 2.0)?;
    let r = Interval::symmetric(k as f64 * a.range.mag() * w.range.mag());
    let var = g.apply(Arc::new(prim::MatMul::new(ta, tb)), &[a.var, w.var])?;
    Ok(Val { var, range: r })
}

fn gen_sum(g: &mut Gen) -> Result<Val, GenError> {
    let x = g.pick();
    let ty = g.ty(x);
    let axes: Option<Vec<usize>> = if g.chance(0.3) {
        None
    } else {
        Some((0..ty.rank()).filter(|_| g.chance(0.5)).collect())
    };
    let count: usize = match &axes {
        None => ty.numel(),
        Some(a) => a.iter().map(|&i| ty.dims()[i]).product(),
    };
    let r = x.range.scale(count as f64);
    g.same(r, |b| b.sum(x.var, axes))
}

fn gen_broadcast(g: &mut Gen) -> Result<Val, GenError> {
    let x = g.pick();
    let ty = g.ty(x);
    // Result: x's dims in order (size-1 dims sometimes expanded), new dims inserted around them.
    let extra = g
        .rng
        .random_range(0..=g.cfg.max_rank.saturating_sub(ty.rank()).min(2));
    let rank = ty.rank() + extra;
    let mut slots: Vec<bool> = vec![true; ty.rank()];
    slots.extend(vec![false; extra]);
    for i in (1..slots.len()).rev() {
        let j = g.rng.random_range(0..=i);
        slots.swap(i, j);
    }
    let mut shape = Vec::with_capacity(rank);
    let mut dims = Vec::with_capacity(ty.rank());
    let mut k = 0;
    for (r, &is_old) in slots.iter().enumerate() {
        if is_old {
            let d = ty.dims()[k];
            shape.push(if d == 1 && g.chance(0.5) {
                g.rng.random_range(1..=g.cfg.max_dim)
            } else {
                d
            });
            dims.push(r);
            k += 1;
        } else {
            shape.push(g.rng.random_range(1..=g.cfg.max_dim));
        }
    }
    g.same(x.range, |b| b.broadcast(x.var, shape, dims))
}

fn gen_broadcast_rows(g: &mut Gen) -> Result<Val, GenError> {
    let x = g.pick();
    let ty = g.ty(x);
    let v = if ty.rank() == 1 {
        x
    } else {
        let var = g.op(|b| b.reshape(x.var, [ty.numel()]))?;
        Val {
            var,
            range: x.range,
        }
    };
    let rows = g.rng.random_range(1..=g.cfg.max_dim);
    g.same(v.range, |b| b.broadcast_rows(v.var, rows))
}

fn gen_reshape(g: &mut Gen) -> Result<Val, GenError> {
    let x = g.pick();
    let ty = g.ty(x);
    let shape = if g.chance(0.3) {
        ty.shape.clone()
    } else {
        // A random factorisation of numel into at most max_rank factors.
        let mut n = ty.numel();
        let mut dims = Vec::new();
        while n > 1 && dims.len() + 1 < g.cfg.max_rank.max(1) && g.chance(0.6) {
            let divs: Vec<usize> = (2..=n).filter(|d| n % d == 0).collect();
            let d = divs[g.uniform(divs.len())];
            dims.push(d);
            n /= d;
        }
        if n > 1 || (dims.is_empty() && g.cfg.max_rank > 0 && g.chance(0.5)) {
            dims.push(n);
        }
        Shape::new(dims)
    };
    g.same(x.range, |b| b.reshape(x.var, shape))
}

fn gen_permute(g: &mut Gen) -> Result<Val, GenError> {
    let x = g.pick();
    let rank = g.ty(x).rank();
    let mut perm: Vec<usize> = (0..rank).collect();
    for i in (1..rank).rev() {
        let j = g.rng.random_range(0..=i);
        perm.swap(i, j);
    }
    g.same(x.range, |b| b.permute(x.var, perm))
}

fn gen_gather(g: &mut Gen) -> Result<Val, GenError> {
    let x = g.pick();
    let x = g.ranked(x)?;
    let ty = g.ty(x);
    let axis = g.uniform(ty.rank());
    let size = ty.dims()[axis];
    let len = g.rng.random_range(1..=g.cfg.max_dim);
    let indices: Vec<usize> = (0..len).map(|_| g.uniform(size)).collect();
    g.same(x.range, |b| b.gather(x.var, axis, indices))
}

fn gen_scatter_add(g: &mut Gen) -> Result<Val, GenError> {
    let x = g.pick();
    let x = g.ranked(x)?;
    let ty = g.ty(x);
    let axis = g.uniform(ty.rank());
    let n = ty.dims()[axis];
    let size = g.rng.random_range(1..=g.cfg.max_dim);
    let indices: Vec<usize> = (0..n).map(|_| g.uniform(size)).collect();
    let nf = n as f64;
    let r = Interval::new((nf * x.range.lo).min(0.0), (nf * x.range.hi).max(0.0));
    g.same(r, |b| b.scatter_add(x.var, axis, indices, size))
}

fn gen_concat(g: &mut Gen) -> Result<Val, GenError> {
    let x = g.pick();
    let x = g.ranked(x)?;
    let ty = g.ty(x);
    let axis = g.uniform(ty.rank());
    let fits = |t: &TensorType| {
        t.dtype == ty.dtype
            && t.rank() == ty.rank()
            && (0..t.rank()).all(|d| d == axis || t.dims()[d] == ty.dims()[d])
            && t.dims()[axis] <= 4
    };
    let mut parts = vec![x];
    let extra = g.rng.random_range(0..=2);
    for _ in 0..extra {
        let p = if g.chance(0.3) {
            x
        } else {
            match g.pick_where(fits) {
                Some(v) => v,
                None => g.constant_of(&ty)?,
            }
        };
        parts.push(p);
    }
    let r = parts.iter().fold(x.range, |acc, p| acc.hull(p.range));
    let vars: Vec<Var> = parts.iter().map(|p| p.var).collect();
    g.same(r, |b| b.concat(&vars, axis))
}

fn gen_constant(g: &mut Gen) -> Result<Val, GenError> {
    let dtype = match g.pick_where(|_| true) {
        Some(v) => g.ty(v).dtype,
        None => g.cfg.dtype,
    };
    let ty = TensorType::new(dtype, g.random_shape());
    g.constant_of(&ty)
}

fn gen_convert(g: &mut Gen) -> Result<Val, GenError> {
    let x = g.pick();
    let to = match g.ty(x).dtype {
        DType::F32 => DType::F64,
        _ => DType::F32,
    };
    let y = g.same(x.range, |b| b.convert(x.var, to))?;
    if g.chance(0.5) {
        // And back, so the rest of the program keeps one dtype more often.
        let back = g.ty(x).dtype;
        return g.same(y.range, |b| b.convert(y.var, back));
    }
    Ok(y)
}

fn gen_linear(g: &mut Gen) -> Result<Val, GenError> {
    let x = g.pick();
    let x = g.moderate(x, 2.0)?;
    let ty = g.ty(x);
    let x = if ty.rank() == 1 || ty.rank() == 2 {
        x
    } else {
        g.matrix(x)?
    };
    let ty = g.ty(x);
    let inp = ty.dims()[ty.rank() - 1];
    let out = g.rng.random_range(1..=g.cfg.max_dim);
    let w = g.weight(&TensorType::new(ty.dtype, [out, inp]))?;
    let w = g.moderate(w, 2.0)?;
    let bias = g.weight(&TensorType::new(ty.dtype, [out]))?;
    let bias = g.moderate(bias, 2.0)?;
    let r = Interval::symmetric(inp as f64 * x.range.mag() * w.range.mag() + bias.range.mag());
    g.same(r, |b| b.linear(x.var, w.var, bias.var))
}

fn gen_stop_gradient(g: &mut Gen) -> Result<Val, GenError> {
    let x = g.pick();
    g.same(x.range, |b| b.stop_gradient(x.var))
}
