//! Generator rows for the composites outside the windowed family: maxima, softmax and its
//! pullback, attention, normalisation, losses and row indexing.
//!
//! Integer operands (indices, labels) are i64 constants drawn in range from the generator's
//! rng: they are runtime data, so keeping them valid is the generator's job.

use std::sync::Arc;

use rand::RngExt;

use super::{Gen, GenError, Interval, Val};
use crate::ir::Var;
use crate::prim::{self, AttentionMask, Ops};
use crate::tensor::{Tensor, TensorType};

impl Gen<'_> {
    /// An i64 constant of these dims with values in 0..bound.
    fn indices(&mut self, dims: &[usize], bound: usize) -> Result<Var, GenError> {
        let n: usize = dims.iter().product();
        let data: Vec<i64> = (0..n).map(|_| self.uniform(bound) as i64).collect();
        let t = Tensor::i64(dims.to_vec(), data).expect("numel values");
        self.apply(Arc::new(prim::Constant::new(t)), &[])
    }

    /// Some axes of a rank-`rank` value (None: all), as for sum.
    fn some_axes(&mut self, rank: usize) -> Option<Vec<usize>> {
        if self.chance(0.3) {
            None
        } else {
            Some((0..rank).filter(|_| self.chance(0.5)).collect())
        }
    }

    /// A random shape of rank 0..=max_rank - 1 (room for one more trailing dim).
    fn index_dims(&mut self) -> Vec<usize> {
        let rank = self.rng.random_range(0..self.cfg.max_rank.max(1));
        (0..rank)
            .map(|_| self.rng.random_range(1..=self.cfg.max_dim))
            .collect()
    }

    /// An attention mask for `batch` entries of `tq` queries and `tk` keys: causal (if tq <= tk
    /// leaves every row a key), key lengths in 1..=tk, both or none.
    fn mask(&mut self, batch: usize, tq: usize, tk: usize) -> AttentionMask {
        let causal = tq <= tk && self.chance(0.5);
        let mut m = if causal {
            AttentionMask::causal()
        } else {
            AttentionMask::none()
        };
        if self.chance(0.5) {
            let lengths = (0..batch).map(|_| self.rng.random_range(1..=tk)).collect();
            m = m.with_key_lengths(lengths);
        }
        m
    }

    /// A grid value in [lo, hi] (exact in f32).
    fn grid(&mut self, lo: f64, hi: f64) -> f64 {
        self.values(1, lo, hi)[0]
    }
}

/// [lo - hi - ln n, 0]: log_softmax over n entries of a slice within `r`.
fn log_softmax_range(r: Interval, n: usize) -> Interval {
    Interval::new(r.lo - r.hi - (n as f64).ln(), 0.0)
}

pub(super) fn gen_reduce_max(g: &mut Gen) -> Result<Val, GenError> {
    let x = g.pick();
    let axes = g.some_axes(g.ty(x).rank());
    g.same(x.range, |b| b.reduce_max(x.var, axes))
}

/// w_j = [x_j = max] / #ties, in [0, 1].
pub(super) fn gen_max_weights(g: &mut Gen) -> Result<Val, GenError> {
    let x = g.pick();
    let axes = g.some_axes(g.ty(x).rank());
    g.same(Interval::new(0.0, 1.0), |b| b.max_weights(x.var, axes))
}

/// A value of rank >= 1, moderated to `cap`, with a random axis.
fn along_axis(g: &mut Gen, cap: f64) -> Result<(Val, usize), GenError> {
    let x = g.pick();
    let x = g.moderate(x, cap)?;
    let x = g.ranked(x)?;
    let axis = g.uniform(g.ty(x).rank());
    Ok((x, axis))
}

pub(super) fn gen_softmax(g: &mut Gen) -> Result<Val, GenError> {
    let (x, axis) = along_axis(g, 8.0)?;
    g.same(Interval::new(0.0, 1.0), |b| b.softmax(x.var, axis))
}

pub(super) fn gen_log_softmax(g: &mut Gen) -> Result<Val, GenError> {
    let (x, axis) = along_axis(g, 8.0)?;
    let n = g.ty(x).dims()[axis];
    g.same(log_softmax_range(x.range, n), |b| {
        b.log_softmax(x.var, axis)
    })
}

/// c y (v - sum(y v)) at a softmax output y: sum(y v) lies in v's range, so |out| <= 2|c||v|.
pub(super) fn gen_softmax_pullback(g: &mut Gen) -> Result<Val, GenError> {
    let (x, axis) = along_axis(g, 8.0)?;
    let y = g.op(|b| b.softmax(x.var, axis))?;
    let v = g.partner(x)?;
    let v = g.moderate(v, 8.0)?;
    let c = g.grid(-2.0, 2.0);
    let r = Interval::symmetric(2.0 * c.abs() * v.range.mag());
    g.same(r, |b| b.softmax_pullback(y, v.var, axis, c))
}

pub(super) fn gen_tanh_pullback(g: &mut Gen) -> Result<Val, GenError> {
    let x = g.pick();
    let y = g.op(|b| b.tanh(x.var))?;
    let u = g.partner(x)?;
    let u = g.moderate(u, 8.0)?;
    // |y| <= 1, so 0 <= 1 - y² <= 1.
    let r = Interval::symmetric(u.range.mag());
    g.same(r, |b| b.tanh_pullback(y, u.var))
}

pub(super) fn gen_masked_softmax(g: &mut Gen) -> Result<Val, GenError> {
    let x = g.pick();
    let x = g.moderate(x, 8.0)?;
    let x = g.shaped(x, 4)?;
    let d = g.ty(x).dims().to_vec();
    let mask = g.mask(d[0], d[2], d[3]);
    let scale = g.grid(0.25, 2.0).max(0.25);
    g.same(Interval::new(0.0, 1.0), |b| {
        b.masked_softmax(x.var, mask, scale)
    })
}

pub(super) fn gen_batch_matmul(g: &mut Gen) -> Result<Val, GenError> {
    let x = g.pick();
    let x = g.moderate(x, 2.0)?;
    let rank = g.rng.random_range(3..=g.cfg.max_rank.max(3));
    let a = g.shaped(x, rank)?;
    let ad = g.ty(a).dims().to_vec();
    let (ta, tb) = (g.chance(0.25), g.chance(0.25));
    let k = if ta { ad[rank - 2] } else { ad[rank - 1] };
    let n = g.rng.random_range(1..=g.cfg.max_dim);
    let mut bdims = ad[..rank - 2].to_vec();
    bdims.extend(if tb { [n, k] } else { [k, n] });
    let w = g.weight(&TensorType::new(g.ty(a).dtype, bdims))?;
    let w = g.moderate(w, 2.0)?;
    let r = Interval::symmetric(k as f64 * a.range.mag() * w.range.mag());
    g.same(r, |b| b.batch_matmul(a.var, w.var, ta, tb))
}

/// Queries (B, H, Tq, d) from the pool; keys (B, H, Tk, d) and a mask to go with them.
fn attention_setup(g: &mut Gen) -> Result<(Val, Val, AttentionMask), GenError> {
    let x = g.pick();
    let x = g.moderate(x, 2.0)?;
    let q = g.shaped(x, 4)?;
    let qd = g.ty(q).dims().to_vec();
    let tk = g.rng.random_range(1..=g.cfg.max_dim);
    let kty = TensorType::new(g.ty(q).dtype, [qd[0], qd[1], tk, qd[3]]);
    let k = if tk == qd[2] && g.chance(0.25) {
        q
    } else {
        g.weight(&kty)?
    };
    let k = g.moderate(k, 2.0)?;
    let mask = g.mask(qd[0], qd[2], tk);
    Ok((q, k, mask))
}

pub(super) fn gen_attention_probs(g: &mut Gen) -> Result<Val, GenError> {
    let (q, k, mask) = attention_setup(g)?;
    g.same(Interval::new(0.0, 1.0), |b| {
        b.attention_probs(q.var, k.var, mask)
    })
}

/// Each output row is a convex combination of value rows.
pub(super) fn gen_sdpa(g: &mut Gen) -> Result<Val, GenError> {
    let (q, k, mask) = attention_setup(g)?;
    let kd = g.ty(k).dims().to_vec();
    let width = g.rng.random_range(1..=g.cfg.max_dim);
    let vty = TensorType::new(g.ty(q).dtype, [kd[0], kd[1], kd[2], width]);
    let v = if g.ty(k) == vty && g.chance(0.3) {
        k
    } else {
        g.weight(&vty)?
    };
    g.same(v.range, |b| b.sdpa(q.var, k.var, v.var, mask))
}

/// |x̂| <= sqrt(m) over a slice of m (c_i^2 <= sum c^2 = m v); affine: |gamma| sqrt(m) + |beta|.
pub(super) fn gen_layer_norm(g: &mut Gen) -> Result<Val, GenError> {
    let x = g.pick();
    let x = g.moderate(x, 8.0)?;
    let x = g.ranked(x)?;
    let ty = g.ty(x);
    let mut axes: Vec<usize> = (0..ty.rank()).filter(|_| g.chance(0.5)).collect();
    if axes.is_empty() {
        axes.push(ty.rank() - 1);
    }
    let m: usize = axes.iter().map(|&a| ty.dims()[a]).product();
    // eps in [2^-5, 2^-2]: the k-th derivative grows like (v + eps)^(-k/2) on near-constant
    // slices (v -> 0), beyond what a fourth-order difference with h = 2^-12 resolves.
    let eps = 2f64.powi(-g.rng.random_range(2..=5));
    let mut r = (m as f64).sqrt();
    let affine = if g.chance(0.5) {
        let pty = TensorType::new(
            ty.dtype,
            axes.iter().map(|&a| ty.dims()[a]).collect::<Vec<_>>(),
        );
        let gamma = g.weight(&pty)?;
        let gamma = g.moderate(gamma, 2.0)?;
        let beta = g.weight(&pty)?;
        let beta = g.moderate(beta, 2.0)?;
        r = gamma.range.mag() * r + beta.range.mag();
        Some((gamma.var, beta.var))
    } else {
        None
    };
    g.same(Interval::symmetric(r), |b| {
        b.layer_norm(x.var, axes, eps, affine)
    })
}

/// The mean of -log_softmax(z)[label] over rows: in [0, (hi - lo) + ln C].
pub(super) fn gen_cross_entropy(g: &mut Gen) -> Result<Val, GenError> {
    let x = g.pick();
    let x = g.moderate(x, 8.0)?;
    let z = g.matrix(x)?;
    let d = g.ty(z).dims().to_vec();
    let labels = g.indices(&[d[0]], d[1])?;
    let r = log_softmax_range(z.range, d[1]).negated();
    g.same(r, |b| b.cross_entropy(z.var, labels))
}

/// mean((a - b)^2) in [0, max |a - b|^2].
pub(super) fn gen_mse(g: &mut Gen) -> Result<Val, GenError> {
    let x = g.pick();
    let x = g.moderate(x, 8.0)?;
    let y = g.partner(x)?;
    let y = g.moderate(y, 8.0)?;
    let m = x.range.minus(y.range).mag();
    g.same(Interval::new(0.0, m * m), |b| b.mse(x.var, y.var))
}

pub(super) fn gen_take(g: &mut Gen) -> Result<Val, GenError> {
    let x = g.pick();
    let table = g.matrix(x)?;
    let rows = g.ty(table).dims()[0];
    let dims = g.index_dims();
    let idx = g.indices(&dims, rows)?;
    g.same(table.range, |b| b.take(table.var, idx))
}

/// Rows of u (..., D) added at indices into (rows, D): at most numel(indices) terms meet.
pub(super) fn gen_scatter_rows(g: &mut Gen) -> Result<Val, GenError> {
    let x = g.pick();
    let x = g.moderate(x, 8.0)?;
    let x = g.ranked(x)?;
    let ud = g.ty(x).dims().to_vec();
    let lead = &ud[..ud.len() - 1];
    let rows = g.rng.random_range(1..=g.cfg.max_dim);
    let idx = g.indices(lead, rows)?;
    let n = lead.iter().product::<usize>() as f64;
    let r = Interval::new(n * x.range.lo.min(0.0), n * x.range.hi.max(0.0));
    g.same(r, |b| b.scatter_rows(x.var, idx, rows))
}

pub(super) fn gen_one_hot(g: &mut Gen) -> Result<Val, GenError> {
    let dtype = match g.pick_where(|_| true) {
        Some(v) => g.ty(v).dtype,
        None => g.cfg.dtype,
    };
    let dims = g.index_dims();
    let classes = g.rng.random_range(1..=g.cfg.max_dim);
    let idx = g.indices(&dims, classes)?;
    g.same(Interval::new(0.0, 1.0), |b| b.one_hot(idx, classes, dtype))
}
