//! scan's derivative rules, each a scan over a derivative of the body (docs/scan.md).
//!
//! JVP: a scan over the body's JVP, carrying (carries, their tangents) and reading (x_t, their
//! tangents) and (consts, their tangents); the tangent of the value is the tangent pieces,
//! packed like the value.
//!
//! VJP: a reverse scan over the body's VJP. It reads the carry that entered each step, which the
//! forward value holds (`stack_carries`: the initial carry, then every step's carry but the
//! last); a scan keeping only its final carry is run once more with every carry kept. The
//! backward carries are the carries' cotangents and the consts' accumulated cotangents; its ys
//! are the xs' cotangents.

use std::fmt::Display;
use std::sync::Arc;

use super::primitive::{stacked, Piece, Scan};
use super::unpack::Unpack;
use crate::ad;
use crate::ir::{Builder, InputKind, Program, RuleError, TypeError, Var};
use crate::prim::Ops;
use crate::tensor::TensorType;

fn build_err(e: impl Display) -> RuleError {
    RuleError::Type(TypeError::Invalid(format!("scan: {e}")))
}

/// Reads `piece` of a scan's value `v`, optionally flattened.
fn unpack(
    b: &mut Builder,
    s: &Scan,
    v: Var,
    piece: Piece,
    flat: bool,
) -> Result<(Var, TensorType), RuleError> {
    let (_, at, ty) = s
        .layout()
        .into_iter()
        .find(|(p, _, _)| *p == piece)
        .ok_or_else(|| build_err(format!("no piece {piece:?}")))?;
    let shape = if flat {
        vec![ty.numel()]
    } else {
        ty.dims().to_vec()
    };
    Ok((b.op(Arc::new(Unpack::new(at, shape)), &[v])?, ty))
}

/// The operand's tangent, or zeros of its type.
fn or_zeros(b: &mut Builder, x: Var, d: Option<Var>) -> Result<Var, RuleError> {
    match d {
        Some(d) => Ok(d),
        None => {
            let ty = b.ty(x).clone();
            Ok(b.zeros(&ty)?)
        }
    }
}

/// Joins rank-1 pieces into one.
fn join(b: &mut Builder, parts: &[Var]) -> Result<Var, RuleError> {
    if parts.len() == 1 {
        Ok(parts[0])
    } else {
        Ok(b.concat(parts, 0)?)
    }
}

pub(super) fn jvp(
    s: &Scan,
    b: &mut Builder,
    x: &[Var],
    dx: &[Option<Var>],
) -> Result<Var, RuleError> {
    let body = &*s.body;
    let (nc, nx, nk) = (s.carries, s.xs, s.consts);
    let (n, m) = (body.n_inputs(), body.outputs().len());
    let ny = m - nc;
    let j = ad::jvp(body).map_err(build_err)?;
    if j.program.n_inputs() != 2 * n || j.program.outputs().len() != 2 * m {
        return Err(build_err(
            "the body's JVP does not have a tangent for every value",
        ));
    }
    // The step: (c, dc, x, dx, k, dk) -> (c', dc', y, dy).
    let mut sb = Builder::new();
    let mut primal = vec![None; n];
    let mut tangent = vec![None; n];
    for (start, count, role) in [(0, nc, "c"), (nc, nx, "x"), (nc + nx, nk, "k")] {
        for (slots, prefix) in [(&mut primal, ""), (&mut tangent, "d")] {
            for (i, slot) in slots.iter_mut().enumerate().skip(start).take(count) {
                let ty = body.inputs()[i].ty.clone();
                let name = format!("{prefix}{role}{}", i - start);
                *slot = Some(sb.input(&name, ty, InputKind::Data).map_err(build_err)?);
            }
        }
    }
    let args: Vec<Var> = primal
        .iter()
        .chain(&tangent)
        .map(|v| v.expect("every input made"))
        .collect();
    let outs = sb.inline(&j.program, &args).map_err(build_err)?;
    let order: Vec<Var> = (0..nc)
        .chain(m..m + nc)
        .chain(nc..m)
        .chain(m + nc..2 * m)
        .map(|k| outs[k])
        .collect();
    let step = sb.finish(&order).map_err(build_err)?;
    let mut operands = Vec::with_capacity(2 * n);
    for (start, count) in [(0, nc), (nc, nx), (nc + nx, nk)] {
        operands.extend_from_slice(&x[start..start + count]);
        for i in start..start + count {
            operands.push(or_zeros(b, x[i], dx[i])?);
        }
    }
    let ts = Scan {
        body: Arc::new(step),
        length: s.length,
        carries: 2 * nc,
        xs: 2 * nx,
        consts: 2 * nk,
        reverse: s.reverse,
        stack_carries: s.stack_carries,
    };
    let v = b.op(Arc::new(ts.clone()), &operands)?;
    let mut parts = Vec::with_capacity(nc + ny);
    for k in 0..nc {
        parts.push(unpack(b, &ts, v, Piece::Carry(nc + k), true)?.0);
    }
    for k in 0..ny {
        parts.push(unpack(b, &ts, v, Piece::Y(ny + k), true)?.0);
    }
    join(b, &parts)
}

/// The carry that entered each step, stacked (T, ...), from every step's carry `all` and the
/// initial carry.
fn entering(
    b: &mut Builder,
    s: &Scan,
    all: Var,
    all_ty: &TensorType,
    init: Var,
) -> Result<Var, RuleError> {
    let dims = all_ty.dims().to_vec();
    let mut one = dims.clone();
    one[0] = 1;
    let first = b.reshape(init, one)?;
    if s.length == 1 {
        return Ok(first);
    }
    let row = all_ty.numel() / s.length;
    let mut rest = dims.clone();
    rest[0] = s.length - 1;
    let flat_all = b.reshape(all, [all_ty.numel()])?;
    // Forward: rows 0 .. T-2 follow the initial carry; reverse: rows 1 .. T-1 precede it.
    let offset = if s.reverse { row } else { 0 };
    let others = b.op(Arc::new(Unpack::new(offset, rest)), &[flat_all])?;
    let parts = if s.reverse {
        [others, first]
    } else {
        [first, others]
    };
    Ok(b.concat(&parts, 0)?)
}

pub(super) fn vjp(
    s: &Scan,
    b: &mut Builder,
    x: &[Var],
    y: Var,
    dy: Var,
) -> Result<Vec<Option<Var>>, RuleError> {
    let body = &*s.body;
    let (nc, nx, nk) = (s.carries, s.xs, s.consts);
    let (n, m) = (body.n_inputs(), body.outputs().len());
    let ny = m - nc;
    let t_len = s.length;
    // The forward carries: this node's value, or a run that keeps them.
    let (kept, kept_scan) = if s.stack_carries {
        (y, s.clone())
    } else {
        let keep = s.clone().stacking_carries(true);
        (b.op(Arc::new(keep.clone()), x)?, keep)
    };
    let mut enter = Vec::with_capacity(nc);
    for (k, &init) in x.iter().enumerate().take(nc) {
        let (all, ty) = unpack(b, &kept_scan, kept, Piece::Carry(k), false)?;
        enter.push(entering(b, s, all, &ty, init)?);
    }
    // The cotangent's pieces.
    let mut d_carry = Vec::with_capacity(nc);
    for k in 0..nc {
        d_carry.push(unpack(b, s, dy, Piece::Carry(k), false)?.0);
    }
    let mut d_ys = Vec::with_capacity(ny);
    for k in 0..ny {
        d_ys.push(unpack(b, s, dy, Piece::Y(k), false)?.0);
    }

    let v = ad::vjp(body).map_err(build_err)?;
    if v.program.n_inputs() != n + m || v.program.outputs().len() != m + n {
        return Err(build_err(
            "the body's VJP does not have a cotangent for every value",
        ));
    }
    // The step, run backwards: carries (gc.., gk..), xs (entering c.., x.., [dc_t..], dy_t..),
    // consts (k..) -> (gc'.., gk'.., gx_t..).
    let ty_in = |i: usize| body.inputs()[i].ty.clone();
    let ty_out = |i: usize| body.ty(body.outputs()[i]).clone();
    let mut sb = Builder::new();
    let inp = |sb: &mut Builder, name: String, ty: TensorType| {
        sb.input(&name, ty, InputKind::Data).map_err(build_err)
    };
    let gc: Vec<Var> = (0..nc)
        .map(|k| inp(&mut sb, format!("gc{k}"), ty_in(k)))
        .collect::<Result<_, _>>()?;
    let gk: Vec<Var> = (0..nk)
        .map(|k| inp(&mut sb, format!("gk{k}"), ty_in(nc + nx + k)))
        .collect::<Result<_, _>>()?;
    let c_t: Vec<Var> = (0..nc)
        .map(|k| inp(&mut sb, format!("c{k}"), ty_in(k)))
        .collect::<Result<_, _>>()?;
    let x_t: Vec<Var> = (0..nx)
        .map(|k| inp(&mut sb, format!("x{k}"), ty_in(nc + k)))
        .collect::<Result<_, _>>()?;
    let dc_t: Vec<Var> = if s.stack_carries {
        (0..nc)
            .map(|k| inp(&mut sb, format!("dc{k}"), ty_in(k)))
            .collect::<Result<_, _>>()?
    } else {
        Vec::new()
    };
    let dy_t: Vec<Var> = (0..ny)
        .map(|k| inp(&mut sb, format!("dy{k}"), ty_out(nc + k)))
        .collect::<Result<_, _>>()?;
    let k_in: Vec<Var> = (0..nk)
        .map(|k| inp(&mut sb, format!("k{k}"), ty_in(nc + nx + k)))
        .collect::<Result<_, _>>()?;
    // The seed of carry k: what later steps sent back, plus this step's own cotangent.
    let mut seeds = Vec::with_capacity(m);
    for k in 0..nc {
        seeds.push(if s.stack_carries {
            sb.add(gc[k], dc_t[k]).map_err(build_err)?
        } else {
            gc[k]
        });
    }
    seeds.extend_from_slice(&dy_t);
    let args: Vec<Var> = c_t
        .iter()
        .chain(&x_t)
        .chain(&k_in)
        .chain(&seeds)
        .copied()
        .collect();
    let outs = sb.inline(&v.program, &args).map_err(build_err)?;
    let grads = &outs[m..];
    let mut step_outs: Vec<Var> = grads[..nc].to_vec();
    for k in 0..nk {
        step_outs.push(sb.add(gk[k], grads[nc + nx + k]).map_err(build_err)?);
    }
    step_outs.extend_from_slice(&grads[nc..nc + nx]);
    let step: Program = sb.finish(&step_outs).map_err(build_err)?;

    let mut operands = Vec::new();
    for (k, &d) in d_carry.iter().enumerate() {
        operands.push(if s.stack_carries {
            b.zeros(&ty_in(k))?
        } else {
            d
        });
    }
    for k in 0..nk {
        operands.push(b.zeros(&ty_in(nc + nx + k))?);
    }
    operands.extend_from_slice(&enter);
    operands.extend_from_slice(&x[nc..nc + nx]);
    if s.stack_carries {
        operands.extend_from_slice(&d_carry);
    }
    operands.extend_from_slice(&d_ys);
    operands.extend_from_slice(&x[nc + nx..]);
    let back = Scan {
        body: Arc::new(step),
        length: t_len,
        carries: nc + nk,
        xs: nc + nx + if s.stack_carries { nc } else { 0 } + ny,
        consts: nk,
        reverse: !s.reverse,
        stack_carries: false,
    };
    let g = b.op(Arc::new(back.clone()), &operands)?;
    let mut out = Vec::with_capacity(n);
    for k in 0..nc {
        out.push(Some(unpack(b, &back, g, Piece::Carry(k), false)?.0));
    }
    for k in 0..nx {
        let (gx, ty) = unpack(b, &back, g, Piece::Y(k), false)?;
        debug_assert_eq!(ty, stacked(&ty_in(nc + k), t_len));
        out.push(Some(gx));
    }
    for k in 0..nk {
        out.push(Some(unpack(b, &back, g, Piece::Carry(nc + k), false)?.0));
    }
    Ok(out)
}
