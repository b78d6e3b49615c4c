//! MaxPool, AveragePool and LpPool over any number of spatial axes, with dilations: a window is
//! a product of one window per axis, so the pooling is one pass per axis. Each pass gathers the
//! k (dilated, strided) taps of every output position along its axis and combines them by
//! `maximum` or by addition; positions in the padding are left out (max: the window's first
//! input element read again, which leaves the maximum and its derivative unchanged; sums: a
//! 0/1 factor). Average divides by each window's count of elements (with the explicit padding
//! when `count_include_pad`), known at import.

use catml_core::ir::Var;
use catml_core::prim::Ops;

use crate::ctx::{Ctx, R};

/// How a pass combines its taps.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Combine {
    Max,
    Sum,
}

/// One axis's taps: for each tap j, the input index each output position reads, and whether
/// it lies in the input.
struct AxisTaps {
    out: usize,
    taps: Vec<Vec<(i64, bool)>>,
}

fn axis_taps(len: usize, k: usize, s: usize, d: usize, before: usize, out: usize) -> AxisTaps {
    let taps = (0..k)
        .map(|j| {
            (0..out)
                .map(|o| {
                    let i = (o * s + j * d) as i64 - before as i64;
                    (i, i >= 0 && i < len as i64)
                })
                .collect()
        })
        .collect();
    AxisTaps { out, taps }
}

/// One pass along `axis`: the combination of each output position's taps.
fn pass(c: &mut Ctx, x: Var, axis: usize, at: &AxisTaps, how: Combine) -> R<Var> {
    let dtype = c.ty(x).dtype;
    let mut acc: Option<Var> = None;
    // The first tap inside the input, per output position (max reads it for padded taps).
    let first: Vec<Option<usize>> = (0..at.out)
        .map(|o| at.taps.iter().find(|t| t[o].1).map(|t| t[o].0 as usize))
        .collect();
    if how == Combine::Max {
        if let Some(o) = first.iter().position(Option::is_none) {
            return Err(c.unsupported(format!(
                "output position {o} along axis {axis}: a window wholly in the padding"
            )));
        }
    }
    for tap in &at.taps {
        if tap.iter().all(|&(_, inside)| !inside) && how == Combine::Sum {
            continue;
        }
        let idx: Vec<usize> = tap
            .iter()
            .enumerate()
            .map(|(o, &(i, inside))| {
                if inside {
                    i as usize
                } else {
                    first[o].unwrap_or(0)
                }
            })
            .collect();
        let mut term = t!(c, c.b.gather(x, axis, idx))?;
        if how == Combine::Sum && tap.iter().any(|&(_, inside)| !inside) {
            let mask: Vec<f64> = tap.iter().map(|&(_, inside)| inside as u8 as f64).collect();
            let m = c.constant_of(dtype, &[at.out], mask)?;
            let dims = c.ty(term).dims().to_vec();
            let m = t!(c, c.b.broadcast(m, dims, vec![axis]))?;
            term = t!(c, c.b.mul(term, m))?;
        }
        acc = Some(match acc {
            None => term,
            Some(a) => match how {
                Combine::Max => t!(c, c.b.maximum(a, term))?,
                Combine::Sum => t!(c, c.b.add(a, term))?,
            },
        });
    }
    match acc {
        Some(a) => Ok(a),
        // Every tap in the padding: the sum is zero.
        None => {
            let mut dims = c.ty(x).dims().to_vec();
            dims[axis] = at.out;
            c.full(0.0, dtype, &dims)
        }
    }
}

/// Pools x (N, C, d1..dn) by the node's operator with kernel, strides and dilations per axis,
/// `pads` the explicit padding and `cpads` that padding extended for `ceil_mode`.
pub fn pool(
    c: &mut Ctx,
    x: Var,
    kernel: &[usize],
    strides: &[usize],
    dilations: &[usize],
    pads: &[[usize; 2]],
    cpads: &[[usize; 2]],
) -> R<Var> {
    let op = c.node.op_type.clone();
    let xd = c.ty(x).dims().to_vec();
    let n = kernel.len();
    let mut axes = Vec::with_capacity(n);
    for a in 0..n {
        let len = xd[2 + a];
        let ext = (kernel[a] - 1) * dilations[a] + 1;
        let span = len + cpads[a][0] + cpads[a][1];
        if span < ext {
            return Err(c.err(format!(
                "spatial axis {a}: the window spans {ext}, the padded input {span}"
            )));
        }
        let out = (span - ext) / strides[a] + 1;
        axes.push(axis_taps(
            len,
            kernel[a],
            strides[a],
            dilations[a],
            cpads[a][0],
            out,
        ));
    }
    let p = if op == "LpPool" {
        let p = c.int("p", 2)?;
        if p < 1 || p > i32::MAX as i64 {
            return Err(c.err(format!("p = {p} must be a positive integer")));
        }
        Some(p)
    } else {
        None
    };
    let mut y = match p {
        Some(2) => t!(c, c.b.mul(x, x))?,
        Some(p) => {
            let a = t!(c, c.b.abs(x))?;
            t!(c, c.b.powi(a, p as i32))?
        }
        None => x,
    };
    let how = if op == "MaxPool" {
        Combine::Max
    } else {
        Combine::Sum
    };
    for (a, at) in axes.iter().enumerate() {
        y = pass(c, y, 2 + a, at, how)?;
    }
    match (op.as_str(), p) {
        ("LpPool", Some(1)) => Ok(y),
        ("LpPool", Some(2)) => t!(c, c.b.sqrt(y)),
        ("LpPool", Some(p)) => {
            let e = t!(c, c.b.full_like(1.0 / p as f64, y))?;
            t!(c, c.b.pow(y, e))
        }
        ("AveragePool", _) => {
            // Each window's count: its taps in the input, or within the explicit padding when
            // count_include_pad (never the ceil_mode extension).
            let include = c.int("count_include_pad", 0)? != 0;
            let counts: Vec<Vec<usize>> = axes
                .iter()
                .enumerate()
                .map(|(a, at)| {
                    let (lo, hi) = if include {
                        (-(pads[a][0] as i64), (xd[2 + a] + pads[a][1]) as i64)
                    } else {
                        (0, xd[2 + a] as i64)
                    };
                    (0..at.out)
                        .map(|o| {
                            at.taps
                                .iter()
                                .filter(|t| t[o].0 >= lo && t[o].0 < hi)
                                .count()
                        })
                        .collect()
                })
                .collect();
            let outs: Vec<usize> = axes.iter().map(|at| at.out).collect();
            let total: usize = outs.iter().product();
            let mut div = Vec::with_capacity(total);
            for q in 0..total {
                let mut rest = q;
                let mut count = 1;
                for a in (0..n).rev() {
                    count *= counts[a][rest % outs[a]];
                    rest /= outs[a];
                }
                div.push(1.0 / count.max(1) as f64);
            }
            let dtype = c.ty(y).dtype;
            let dv = c.constant_of(dtype, &outs, div)?;
            let yd = c.ty(y).dims().to_vec();
            let dv = c.expand_to(dv, &yd)?;
            t!(c, c.b.mul(y, dv))
        }
        _ => Ok(y),
    }
}
