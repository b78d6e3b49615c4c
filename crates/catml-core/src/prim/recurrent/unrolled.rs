//! Fixed-T recurrences (docs/architectures.md), unrolled by builder functions: T steps that all
//! read the same weight values (one input slot per shared parameter, so reverse mode accumulates
//! their gradients) from a differentiable initial state h0.
//!
//! Elman (tanh) cell:  h_t = tanh(W_ih x_t + b + W_hh h_{t-1}).
//! GRU cell (gates in the order r, z, n of the stacked weights):
//!   r = sigmoid(W_ir x + b_ir + W_hr h + b_hr),  z = sigmoid(W_iz x + b_iz + W_hz h + b_hz),
//!   n = tanh(W_in x + b_in + r (W_hn h + b_hn)),  h' = (1 - z) n + z h = n + z (h - n).
//!
//! Inputs are (T, B, D), states (B, H), weights in `linear`'s (out, in) layout. Each step
//! projects its own slice of xs. (One `linear` over all T B rows followed by T row gathers
//! would make the reverse pass add T cotangents the size of the whole (T B, gates H)
//! projection, each zero outside one step's rows: O(T² B H) work. Slicing xs costs O(T² B D),
//! in the cotangent of xs only.)

use std::sync::Arc;

use crate::ir::{Builder, TypeError, Var};
use crate::prim::linalg::matmul::MatMul;
use crate::prim::Ops;

/// Elman weights: w_ih (H, D), w_hh (H, H), b (H).
#[derive(Debug, Clone, Copy)]
pub struct ElmanWeights {
    pub w_ih: Var,
    pub w_hh: Var,
    pub b: Var,
}

/// GRU weights, gates stacked r, z, n: w_ih (3H, D), w_hh (3H, H), b_ih (3H), b_hh (3H).
#[derive(Debug, Clone, Copy)]
pub struct GruWeights {
    pub w_ih: Var,
    pub w_hh: Var,
    pub b_ih: Var,
    pub b_hh: Var,
}

/// An unrolled recurrence: every state (T, B, H) and the last one (B, H).
#[derive(Debug, Clone, Copy)]
pub struct Unrolled {
    pub states: Var,
    pub last: Var,
}

/// (T, B, D) and (B, H): the sizes (T, B, D, H), or why the shapes do not fit.
fn sizes(b: &Builder, xs: Var, h0: Var) -> Result<(usize, usize, usize, usize), TypeError> {
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
    Ok((d[0], d[1], d[2], ht.dims()[1]))
}

/// Step t's input, (B, D), projected: x_t W^T + bias.
fn project_step(b: &mut Builder, xs: Var, t: usize, w: Var, bias: Var) -> Result<Var, TypeError> {
    let d = b.ty(xs).dims().to_vec();
    let slice = b.gather(xs, 0, vec![t])?;
    let x_t = b.reshape(slice, [d[1], d[2]])?;
    b.linear(x_t, w, bias)
}

/// Columns k H .. (k+1) H: gate k.
fn gate(b: &mut Builder, m: Var, k: usize, hidden: usize) -> Result<Var, TypeError> {
    b.gather(m, 1, (k * hidden..(k + 1) * hidden).collect())
}

/// The states (B, H) stacked into (T, B, H).
fn stack(b: &mut Builder, states: &[Var]) -> Result<Var, TypeError> {
    let d = b.ty(states[0]).dims().to_vec();
    let rows: Vec<Var> = states
        .iter()
        .map(|&h| b.reshape(h, [1, d[0], d[1]]))
        .collect::<Result<_, _>>()?;
    if rows.len() == 1 {
        Ok(rows[0])
    } else {
        b.concat(&rows, 0)
    }
}

/// Unrolls the Elman tanh cell over the T steps of `xs`.
pub fn elman(b: &mut Builder, xs: Var, h0: Var, w: &ElmanWeights) -> Result<Unrolled, TypeError> {
    let (steps, _, _, _) = sizes(b, xs, h0)?;
    let mut h = h0;
    let mut states = Vec::with_capacity(steps);
    for t in 0..steps {
        let xt = project_step(b, xs, t, w.w_ih, w.b)?;
        let hw = b.op(Arc::new(MatMul::new(false, true)), &[h, w.w_hh])?;
        let a = b.add(xt, hw)?;
        h = b.tanh(a)?;
        states.push(h);
    }
    Ok(Unrolled {
        states: stack(b, &states)?,
        last: h,
    })
}

/// Unrolls the GRU cell over the T steps of `xs`.
pub fn gru(b: &mut Builder, xs: Var, h0: Var, w: &GruWeights) -> Result<Unrolled, TypeError> {
    let (steps, _, _, hidden) = sizes(b, xs, h0)?;
    let mut h = h0;
    let mut states = Vec::with_capacity(steps);
    for t in 0..steps {
        let d = b.ty(xs).dims().to_vec();
        let slice = b.gather(xs, 0, vec![t])?;
        let x_t = b.reshape(slice, [d[1], d[2]])?;
        h = gru_step(b, h, x_t, &[w.w_ih, w.w_hh, w.b_ih, w.b_hh], hidden)?;
        states.push(h);
    }
    Ok(Unrolled {
        states: stack(b, &states)?,
        last: h,
    })
}

/// One GRU step from h (B, H) and x_t (B, D), weights (w_ih, w_hh, b_ih, b_hh).
pub(crate) fn gru_step(
    b: &mut Builder,
    h: Var,
    x_t: Var,
    w: &[Var],
    hidden: usize,
) -> Result<Var, TypeError> {
    let gi_t = b.linear(x_t, w[0], w[2])?;
    let gh = b.linear(h, w[1], w[3])?;
    let pre: Vec<Var> = (0..3)
        .map(|k| gate(b, gi_t, k, hidden))
        .collect::<Result<_, _>>()?;
    let hid: Vec<Var> = (0..3)
        .map(|k| gate(b, gh, k, hidden))
        .collect::<Result<_, _>>()?;
    let r = b.add(pre[0], hid[0])?;
    let r = b.sigmoid(r)?;
    let z = b.add(pre[1], hid[1])?;
    let z = b.sigmoid(z)?;
    let rh = b.mul(r, hid[2])?;
    let n = b.add(pre[2], rh)?;
    let n = b.tanh(n)?;
    let hn = b.sub(h, n)?;
    let zhn = b.mul(z, hn)?;
    b.add(n, zhn)
}
