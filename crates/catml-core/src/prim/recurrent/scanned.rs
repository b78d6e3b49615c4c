//! The Elman and GRU recurrences as one `scan` node each (docs/scan.md): the cell is built once
//! as the scan's body, so the program's size does not grow with T. The cell's operations are
//! those of [`unrolled`](super::unrolled), in the same order, so values agree bit for bit.

use std::sync::Arc;

use super::unrolled::{ElmanWeights, GruWeights, Unrolled};
use crate::ir::{Builder, InputKind, Program, TypeError, Var};
use crate::prim::linalg::matmul::MatMul;
use crate::prim::scan::{scan, Scan};
use crate::prim::Ops;
use crate::tensor::TensorType;

/// (T, B, D) and (B, H): T, or why the shapes do not fit.
fn steps(b: &Builder, xs: Var, h0: Var) -> Result<usize, TypeError> {
    let (xt, ht) = (b.ty(xs), b.ty(h0));
    if xt.rank() != 3 {
        return Err(TypeError::Invalid(format!(
            "recurrence: inputs must be (steps, batch, width), found {xt}"
        )));
    }
    let d = xt.dims();
    if ht.rank() != 2 || ht.dims()[0] != d[1] || ht.dtype != xt.dtype {
        return Err(TypeError::Invalid(format!(
            "recurrence: initial state must be {}[{}, hidden] to fit inputs {xt}, found {ht}",
            xt.dtype, d[1]
        )));
    }
    Ok(d[0])
}

/// A cell's body: inputs (h, x_t, weights..) typed like the outer values, output h'.
fn cell(
    b: &Builder,
    xs: Var,
    h0: Var,
    weights: &[(&str, Var)],
    step: impl FnOnce(&mut Builder, Var, Var, &[Var]) -> Result<Var, TypeError>,
) -> Result<Program, TypeError> {
    let build = |e: crate::ir::BuildError| TypeError::Invalid(e.to_string());
    let xt = b.ty(xs);
    let x_ty = TensorType::new(xt.dtype, xt.dims()[1..].to_vec());
    let mut c = Builder::new();
    let h = c
        .input("h", b.ty(h0).clone(), InputKind::Data)
        .map_err(build)?;
    let x = c.input("x", x_ty, InputKind::Data).map_err(build)?;
    let mut w = Vec::with_capacity(weights.len());
    for (name, v) in weights {
        w.push(
            c.input(name, b.ty(*v).clone(), InputKind::Data)
                .map_err(build)?,
        );
    }
    let h2 = step(&mut c, h, x, &w)?;
    c.finish(&[h2]).map_err(build)
}

fn run(
    b: &mut Builder,
    xs: Var,
    h0: Var,
    body: Program,
    consts: &[Var],
) -> Result<Unrolled, TypeError> {
    let t = steps(b, xs, h0)?;
    let r = scan(
        b,
        Scan::new(body, t, 1, 1, consts.len())?,
        &[h0],
        &[xs],
        consts,
    )?;
    Ok(Unrolled {
        states: r.carries.expect("carries are kept")[0],
        last: r.final_carries[0],
    })
}

/// The Elman tanh cell over the T steps of `xs`, as one scan.
pub fn elman_scan(
    b: &mut Builder,
    xs: Var,
    h0: Var,
    w: &ElmanWeights,
) -> Result<Unrolled, TypeError> {
    steps(b, xs, h0)?;
    let weights = [("W_ih", w.w_ih), ("W_hh", w.w_hh), ("b", w.b)];
    let body = cell(b, xs, h0, &weights, |c, h, x, w| {
        let xt = c.linear(x, w[0], w[2])?;
        let hw = c.op(Arc::new(MatMul::new(false, true)), &[h, w[1]])?;
        let a = c.add(xt, hw)?;
        c.tanh(a)
    })?;
    run(b, xs, h0, body, &[w.w_ih, w.w_hh, w.b])
}

/// The GRU cell over the T steps of `xs`, as one scan.
pub fn gru_scan(b: &mut Builder, xs: Var, h0: Var, w: &GruWeights) -> Result<Unrolled, TypeError> {
    steps(b, xs, h0)?;
    let hidden = b.ty(h0).dims()[1];
    let weights = [
        ("W_ih", w.w_ih),
        ("W_hh", w.w_hh),
        ("b_ih", w.b_ih),
        ("b_hh", w.b_hh),
    ];
    let body = cell(b, xs, h0, &weights, |c, h, x, w| {
        super::unrolled::gru_step(c, h, x, w, hidden)
    })?;
    run(b, xs, h0, body, &[w.w_ih, w.w_hh, w.b_ih, w.b_hh])
}
