//! scan against its unrolling: a random body (a generated program over random carries, xs and
//! consts), a random length, `reverse` and `stack_carries`, applied once as a scan node and once
//! written out step by step as a plain program (docs/scan.md). Values must agree bit for bit
//! (each step runs the same kernels on the same values). JVP and VJP agree within
//! `DERIVATIVE_TOL` relative: the scan's JVP feeds zero tangents where the unrolled program has
//! none (x + 0 changes the sign of a zero, 0 * inf is NaN where a missing term is not), and its
//! VJP adds a carry's cotangent from the later steps and from the stacked carries, and the
//! consts' cotangents over the steps, in another order.

use std::sync::Arc;

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::generate::{generate, random_inputs, GenConfig};
use super::{Ctx, FamilyReport, Tally};
use crate::ad;
use crate::interp;
use crate::ir::{Builder, InputKind, Interval, Program, Var};
use crate::prim::names;
use crate::prim::scan::{scan, Scan, Unpack};
use crate::prim::Ops;
use crate::tensor::{DType, Tensor, TensorType};

/// Largest |scan - unrolled| / (1 + max |unrolled|) allowed for JVP and VJP outputs.
const DERIVATIVE_TOL: f64 = 1e-12;

pub(crate) fn run(ctx: &Ctx) -> FamilyReport {
    let n = ctx.level.pick(8, 300, 1500);
    let mut t = ctx.tally(
        "random scans (generated bodies, random carries, xs, consts, length, reverse, stack_carries) against their unrolling: values bitwise, JVP and VJP within 1e-12 relative",
        "a scan is its body applied length times in order (docs/scan.md)",
        n,
    );
    t.figure("scans", n);
    t.figure("derivative_tolerance", DERIVATIVE_TOL);
    let mut rng = ctx.rng();
    for k in 0..n {
        let seed = rng.random::<u64>();
        let what = format!("scan {k} (seed {seed})");
        match draw(seed) {
            Ok(d) => check(&mut t, &d, &what, seed),
            Err(e) => t.fail(format!("{what}: drawing: {e}")),
        }
        t.case();
    }
    t.finish()
}

/// One drawn scan: the program applying it and the same steps written out.
struct Drawn {
    scanned: Program,
    unrolled: Program,
    describe: String,
}

fn random_type(rng: &mut ChaCha8Rng) -> TensorType {
    let rank = rng.random_range(0..=2);
    let dims: Vec<usize> = (0..rank).map(|_| rng.random_range(1..=3)).collect();
    TensorType::new(DType::F64, dims)
}

/// A body over (carries.., x rows.., consts..): a generated program whose float outputs are the
/// ys, and each carry made from it, kept in [-1, 1] by tanh so the body's domain holds at every
/// step.
fn body(
    rng: &mut ChaCha8Rng,
    seed: u64,
    types: &[TensorType],
    nc: usize,
) -> Result<Program, String> {
    let text = |e: &dyn std::fmt::Display| e.to_string();
    let cfg = GenConfig {
        n_params: 0,
        n_nodes: rng.random_range(1..=8),
        max_outputs: 2,
        input_types: Some(types.to_vec()),
        input_ranges: Some(vec![Interval::new(-1.0, 1.0); types.len()]),
        weights_as_params: false,
        unused_input_prob: 0.0,
        ..GenConfig::default()
    }
    .without(&[names::SCAN]);
    let g = generate(&cfg, seed).map_err(|e| text(&e))?;
    let mut b = Builder::new();
    let ins: Vec<Var> = types
        .iter()
        .enumerate()
        .map(|(k, ty)| b.input(&format!("in{k}"), ty.clone(), InputKind::Data))
        .collect::<Result<_, _>>()
        .map_err(|e| text(&e))?;
    let outs = b.inline(&g, &ins).map_err(|e| text(&e))?;
    let mut ys: Vec<Var> = outs
        .into_iter()
        .filter(|&o| b.ty(o).dtype == DType::F64)
        .collect();
    let mut carries = Vec::with_capacity(nc);
    for (k, &c) in ins.iter().enumerate().take(nc) {
        let ty = types[k].clone();
        let pre = match ys.iter().find(|&&y| *b.ty(y) == ty) {
            Some(&y) => y,
            None => match ys.first() {
                Some(&y) => {
                    let s = b.sum(y, None).map_err(|e| text(&e))?;
                    let s = b
                        .broadcast(s, ty.shape.clone(), vec![])
                        .map_err(|e| text(&e))?;
                    b.add(c, s).map_err(|e| text(&e))?
                }
                None => c,
            },
        };
        carries.push(b.tanh(pre).map_err(|e| text(&e))?);
    }
    if ys.is_empty() && nc == 0 {
        ys.push(b.tanh(ins[0]).map_err(|e| text(&e))?);
    }
    let outs: Vec<Var> = carries.into_iter().chain(ys).collect();
    b.finish(&outs).map_err(|e| text(&e))
}

fn draw(seed: u64) -> Result<Drawn, String> {
    let text = |e: &dyn std::fmt::Display| e.to_string();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let (nc, nx, nk) = loop {
        let c = (
            rng.random_range(0..=2),
            rng.random_range(0..=2),
            rng.random_range(0..=2),
        );
        if c.0 + c.1 + c.2 > 0 {
            break c;
        }
    };
    let length = rng.random_range(1..=4);
    let reverse = rng.random_bool(0.5);
    let stack = rng.random_bool(0.5);
    let types: Vec<TensorType> = (0..nc + nx + nk).map(|_| random_type(&mut rng)).collect();
    let body = body(&mut rng, seed, &types, nc)?;
    let s = Scan::new(body.clone(), length, nc, nx, nk)
        .map_err(|e| text(&e))?
        .reversed(reverse)
        .stacking_carries(stack);
    let describe = format!(
        "{nc} carries, {nx} xs, {nk} consts, length {length}, reverse {reverse}, stack_carries {stack}, body of {} nodes",
        body.n_nodes()
    );
    // The operands: carries and consts as the body takes them, xs stacked over the steps.
    let operand_types: Vec<TensorType> = types
        .iter()
        .enumerate()
        .map(|(k, ty)| {
            if (nc..nc + nx).contains(&k) {
                let mut dims = vec![length];
                dims.extend_from_slice(ty.dims());
                TensorType::new(ty.dtype, dims)
            } else {
                ty.clone()
            }
        })
        .collect();
    let declare = |b: &mut Builder| -> Result<Vec<Var>, String> {
        operand_types
            .iter()
            .enumerate()
            .map(|(k, ty)| {
                b.input(&format!("op{k}"), ty.clone(), InputKind::Data)
                    .map_err(|e| text(&e))
            })
            .collect()
    };
    // As a scan node.
    let mut b = Builder::new();
    let ops = declare(&mut b)?;
    let r =
        scan(&mut b, s, &ops[..nc], &ops[nc..nc + nx], &ops[nc + nx..]).map_err(|e| text(&e))?;
    let mut outs = r.final_carries.clone();
    outs.extend(r.carries.clone().unwrap_or_default());
    outs.extend(r.ys.clone());
    let scanned = b.finish(&outs).map_err(|e| text(&e))?;
    // Written out: step t reads row t of each x and writes its results at row t.
    let mut b = Builder::new();
    let ops = declare(&mut b)?;
    let flat_xs: Vec<Var> = ops[nc..nc + nx]
        .iter()
        .map(|&x| {
            let n = b.ty(x).numel();
            b.reshape(x, [n])
        })
        .collect::<Result<_, _>>()
        .map_err(|e| text(&e))?;
    let ny = body.outputs().len() - nc;
    let mut carry: Vec<Var> = ops[..nc].to_vec();
    let mut carry_rows: Vec<Vec<Option<Var>>> = vec![vec![None; length]; nc];
    let mut y_rows: Vec<Vec<Option<Var>>> = vec![vec![None; length]; ny];
    for step in 0..length {
        let t = if reverse { length - 1 - step } else { step };
        let mut args = carry.clone();
        for (j, &fx) in flat_xs.iter().enumerate() {
            let row = &types[nc + j];
            let unpack = Unpack::new(t * row.numel(), row.shape.clone());
            args.push(b.op(Arc::new(unpack), &[fx]).map_err(|e| text(&e))?);
        }
        args.extend_from_slice(&ops[nc + nx..]);
        let res = b.inline(&body, &args).map_err(|e| text(&e))?;
        for k in 0..nc {
            carry_rows[k][t] = Some(res[k]);
        }
        for k in 0..ny {
            y_rows[k][t] = Some(res[nc + k]);
        }
        carry = res[..nc].to_vec();
    }
    let mut outs = carry.clone();
    let stack_rows = |b: &mut Builder, rows: &[Option<Var>]| -> Result<Var, String> {
        let rows: Vec<Var> = rows
            .iter()
            .map(|r| {
                let r = r.expect("every step wrote its row");
                let mut dims = vec![1];
                dims.extend_from_slice(b.ty(r).dims());
                b.reshape(r, dims)
            })
            .collect::<Result<_, _>>()
            .map_err(|e| text(&e))?;
        if rows.len() == 1 {
            Ok(rows[0])
        } else {
            b.concat(&rows, 0).map_err(|e| text(&e))
        }
    };
    if stack {
        for rows in &carry_rows {
            outs.push(stack_rows(&mut b, rows)?);
        }
    }
    for rows in &y_rows {
        outs.push(stack_rows(&mut b, rows)?);
    }
    let unrolled = b.finish(&outs).map_err(|e| text(&e))?;
    Ok(Drawn {
        scanned,
        unrolled,
        describe,
    })
}

/// Values bitwise, JVP and VJP within the tolerance, at inputs drawn from `seed`.
fn check(t: &mut Tally, d: &Drawn, what: &str, seed: u64) {
    let what = format!("{what}, {}", d.describe);
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x7363_616e);
    let args = random_inputs(&d.scanned, &mut rng);
    match (
        interp::eval(&d.scanned, &args),
        interp::eval(&d.unrolled, &args),
    ) {
        (Ok(a), Ok(b)) => {
            t.check(same_bits(&a, &b), || {
                format!("{what}: values differ from the unrolled steps")
            });
        }
        (Err(_), Err(_)) => t.count("inputs_outside_the_domain", 1),
        (a, b) => {
            return t.fail(format!(
                "{what}: one form fails: scan {:?}, unrolled {:?}",
                a.err(),
                b.err()
            ))
        }
    }
    let pair = (ad::jvp(&d.scanned), ad::jvp(&d.unrolled));
    match pair {
        (Ok(a), Ok(b)) => compare(t, "jvp", &a.program, &b.program, &mut rng, &what),
        (Err(_), Err(_)) => t.count("bodies_without_a_jvp", 1),
        (a, b) => t.fail(format!(
            "{what}: JVP of one form only: scan {:?}, unrolled {:?}",
            a.err(),
            b.err()
        )),
    }
    let pair = (ad::vjp(&d.scanned), ad::vjp(&d.unrolled));
    match pair {
        (Ok(a), Ok(b)) => compare(t, "vjp", &a.program, &b.program, &mut rng, &what),
        (Err(_), Err(_)) => t.count("bodies_without_a_vjp", 1),
        (a, b) => t.fail(format!(
            "{what}: VJP of one form only: scan {:?}, unrolled {:?}",
            a.err(),
            b.err()
        )),
    }
}

/// Two derivative programs of one signature, on the same random inputs.
fn compare(
    t: &mut Tally,
    mode: &str,
    scanned: &Program,
    unrolled: &Program,
    rng: &mut ChaCha8Rng,
    what: &str,
) {
    let args = random_inputs(scanned, rng);
    match (interp::eval(scanned, &args), interp::eval(unrolled, &args)) {
        (Ok(a), Ok(b)) => {
            let err = relative_error(&a, &b);
            t.check_le(
                &format!("{mode}_relative_error"),
                err,
                DERIVATIVE_TOL,
                || format!("{what}: {mode}"),
            );
        }
        (Err(_), Err(_)) => t.count("inputs_outside_the_domain", 1),
        (a, b) => t.fail(format!(
            "{what}: {mode} of one form fails: scan {:?}, unrolled {:?}",
            a.err(),
            b.err()
        )),
    }
}

/// max |a - b| / (1 + max |b|) over every output; infinite for a type mismatch, and NaN
/// where one side is NaN and the other is not.
fn relative_error(a: &[Tensor], b: &[Tensor]) -> f64 {
    if a.len() != b.len() {
        return f64::INFINITY;
    }
    let mut worst: f64 = 0.0;
    for (x, y) in a.iter().zip(b) {
        if x.ty() != y.ty() {
            return f64::INFINITY;
        }
        let (x, y) = (x.to_f64_vec(), y.to_f64_vec());
        let scale = 1.0 + y.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        for (p, q) in x.iter().zip(&y) {
            let d = if p == q || p.is_nan() && q.is_nan() {
                0.0
            } else {
                (p - q).abs() / scale
            };
            if d.is_nan() {
                return f64::NAN;
            }
            worst = worst.max(d);
        }
    }
    worst
}

fn same_bits(a: &[Tensor], b: &[Tensor]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            x.ty() == y.ty()
                && x.to_f64_vec()
                    .iter()
                    .zip(y.to_f64_vec())
                    .all(|(p, q)| p.to_bits() == q.to_bits())
        })
}
