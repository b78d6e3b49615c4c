//! ONNX's recurrent operators RNN, GRU and LSTM, unrolled over the sequence length (known at
//! import) into matrix products, gate activations, gathers and concatenations. Semantics in
//! docs/onnx-recurrent.md; `x·Wᵀ` is precomputed for all steps at once.

use catml_core::ir::Var;
use catml_core::prim::Ops;
use catml_core::tensor::DType;

use super::elementwise::clip_var;
use super::shape::reshape_to;
use crate::ctx::{Ctx, Value, R};

/// A gate activation with its `activation_alpha` / `activation_beta` parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Act {
    Relu,
    Tanh,
    Sigmoid,
    /// alpha x + beta
    Affine(f64, f64),
    LeakyRelu(f64),
    ThresholdedRelu(f64),
    /// alpha tanh(beta x)
    ScaledTanh(f64, f64),
    /// clip(alpha x + beta, 0, 1)
    HardSigmoid(f64, f64),
    Elu(f64),
    Softsign,
    Softplus,
}

/// Which of the recurrent operators, with its per-direction activation count.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Rnn,
    Gru,
    Lstm,
}

impl Kind {
    /// Gates stacked in W and R.
    fn gates(self) -> usize {
        match self {
            Kind::Rnn => 1,
            Kind::Gru => 3,
            Kind::Lstm => 4,
        }
    }

    fn default_acts(self) -> &'static [Act] {
        match self {
            Kind::Rnn => &[Act::Tanh],
            Kind::Gru => &[Act::Sigmoid, Act::Tanh],
            Kind::Lstm => &[Act::Sigmoid, Act::Tanh, Act::Tanh],
        }
    }
}

/// What every recurrent node shares: sizes, directions and the per-direction operands.
struct Setup {
    kind: Kind,
    /// Steps, batch, input size, hidden size.
    t: usize,
    b: usize,
    h: usize,
    dtype: DType,
    /// Direction 0 runs forward unless `reverse`; a second direction (bidirectional) runs back.
    reverse: Vec<bool>,
    layout: i64,
    clip: Option<f64>,
    /// Activations per direction.
    acts: Vec<Vec<Act>>,
    /// Valid steps per batch row, when some row is shorter than the sequence.
    lens: Option<Vec<usize>>,
    /// X as (T·B, I).
    x_rows: Var,
}

/// The activations named by the node (defaults when absent), split per direction. Functions
/// taking alpha (beta) consume the next value of `activation_alpha` (`activation_beta`).
fn activations(c: &Ctx, kind: Kind, dirs: usize) -> R<Vec<Vec<Act>>> {
    let n = kind.default_acts().len();
    let Some(names) = c.strings("activations")? else {
        return Ok(vec![kind.default_acts().to_vec(); dirs]);
    };
    if names.len() != n * dirs && names.len() != n {
        return Err(c.err(format!(
            "attribute `activations` has {} entries, expected {} ({n} per direction)",
            names.len(),
            n * dirs
        )));
    }
    let alphas = c.floats("activation_alpha")?.unwrap_or_default();
    let betas = c.floats("activation_beta")?.unwrap_or_default();
    let (mut ai, mut bi) = (alphas.iter(), betas.iter());
    let mut alpha = |d: f64| ai.next().map_or(d, |&v| v as f64);
    let mut acts = Vec::with_capacity(names.len());
    for name in &names {
        let a = match name.to_ascii_lowercase().as_str() {
            "relu" => Act::Relu,
            "tanh" => Act::Tanh,
            "sigmoid" => Act::Sigmoid,
            "affine" => {
                let a = alpha(1.0);
                Act::Affine(a, bi.next().map_or(0.0, |&v| v as f64))
            }
            "leakyrelu" => Act::LeakyRelu(alpha(0.01)),
            "thresholdedrelu" => Act::ThresholdedRelu(alpha(1.0)),
            "scaledtanh" => {
                let a = alpha(1.0);
                Act::ScaledTanh(a, bi.next().map_or(1.0, |&v| v as f64))
            }
            "hardsigmoid" => {
                let a = alpha(0.2);
                Act::HardSigmoid(a, bi.next().map_or(0.5, |&v| v as f64))
            }
            "elu" => Act::Elu(alpha(1.0)),
            "softsign" => Act::Softsign,
            "softplus" => Act::Softplus,
            other => {
                return Err(c.unsupported(format!("activation function `{other}`")));
            }
        };
        acts.push(a);
    }
    Ok(if acts.len() == n * dirs {
        acts.chunks(n).map(<[Act]>::to_vec).collect()
    } else {
        vec![acts; dirs]
    })
}

/// `act(clip(x))`, the clip (when set) bounding the activation's input to [-clip, clip].
fn activate(c: &mut Ctx, act: Act, clip: Option<f64>, x: Var) -> R<Var> {
    let x = match clip {
        Some(k) => clip_var(c, x, Some(-k), Some(k))?,
        None => x,
    };
    let full = |c: &mut Ctx, v: f64, like: Var| t!(c, c.b.full_like(v, like));
    Ok(match act {
        Act::Relu => t!(c, c.b.relu(x))?,
        Act::Tanh => t!(c, c.b.tanh(x))?,
        Act::Sigmoid => t!(c, c.b.sigmoid(x))?,
        Act::Affine(a, b) => {
            let ax = t!(c, c.b.scale(x, a))?;
            let bv = full(c, b, x)?;
            t!(c, c.b.add(ax, bv))?
        }
        Act::LeakyRelu(a) => {
            // relu(x) - a relu(-x)
            let p = t!(c, c.b.relu(x))?;
            let nx = t!(c, c.b.neg(x))?;
            let n = t!(c, c.b.relu(nx))?;
            let an = t!(c, c.b.scale(n, a))?;
            t!(c, c.b.sub(p, an))?
        }
        Act::ThresholdedRelu(a) => {
            // x step(x - a)
            let av = full(c, a, x)?;
            let d = t!(c, c.b.sub(x, av))?;
            let s = t!(c, c.b.heaviside(d))?;
            t!(c, c.b.mul(x, s))?
        }
        Act::ScaledTanh(a, b) => {
            let bx = t!(c, c.b.scale(x, b))?;
            let th = t!(c, c.b.tanh(bx))?;
            t!(c, c.b.scale(th, a))?
        }
        Act::HardSigmoid(a, b) => {
            let ax = t!(c, c.b.scale(x, a))?;
            let bv = full(c, b, x)?;
            let y = t!(c, c.b.add(ax, bv))?;
            clip_var(c, y, Some(0.0), Some(1.0))?
        }
        Act::Elu(a) => {
            // relu(x) + a (exp(-relu(-x)) - 1)
            let p = t!(c, c.b.relu(x))?;
            let nx = t!(c, c.b.neg(x))?;
            let n = t!(c, c.b.relu(nx))?;
            let m = t!(c, c.b.neg(n))?;
            let e = t!(c, c.b.exp(m))?;
            let one = full(c, 1.0, e)?;
            let em = t!(c, c.b.sub(e, one))?;
            let an = t!(c, c.b.scale(em, a))?;
            t!(c, c.b.add(p, an))?
        }
        Act::Softsign => {
            let a = t!(c, c.b.abs(x))?;
            let one = full(c, 1.0, a)?;
            let d = t!(c, c.b.add(one, a))?;
            t!(c, c.b.div(x, d))?
        }
        Act::Softplus => t!(c, c.b.softplus(x))?,
    })
}

/// Columns `[k·h, (k+1)·h)` of a (B, G·h) value: gate k.
fn gate(c: &mut Ctx, v: Var, k: usize, h: usize) -> R<Var> {
    if c.ty(v).dims()[1] == h {
        return Ok(v);
    }
    t!(c, c.b.gather(v, 1, (k * h..(k + 1) * h).collect()))
}

/// Rows `[k·n, (k+1)·n)` along axis 0.
fn rows(c: &mut Ctx, v: Var, k: usize, n: usize) -> R<Var> {
    if c.ty(v).dims()[0] == n {
        return Ok(v);
    }
    t!(c, c.b.gather(v, 0, (k * n..(k + 1) * n).collect()))
}

/// Direction `d` of a per-direction operand (D, ...) as a value of `dims`.
fn direction(c: &mut Ctx, v: Var, d: usize, dims: Vec<usize>) -> R<Var> {
    let r = rows(c, v, d, 1)?;
    reshape_to(c, r, dims)
}

/// A (num_directions, B, H) state input (layout 0) or (B, num_directions, H) (layout 1), for
/// direction `d` as (B, H); zeros when absent.
fn initial_state(c: &mut Ctx, s: &Setup, i: usize, d: usize) -> R<Var> {
    if !c.has(i) {
        return c.full(0.0, s.dtype, &[s.b, s.h]);
    }
    let v = c.fvar(i)?;
    let dirs = s.reverse.len();
    let want = if s.layout == 0 {
        vec![dirs, s.b, s.h]
    } else {
        vec![s.b, dirs, s.h]
    };
    if c.ty(v).dims() != want.as_slice() {
        return Err(c.err(format!(
            "input {i} has shape {:?}, expected {want:?}",
            c.ty(v).dims()
        )));
    }
    let v = if s.layout == 0 {
        v
    } else {
        t!(c, c.b.permute(v, vec![1, 0, 2]))?
    };
    direction(c, v, d, vec![s.b, s.h])
}

/// Reads the operands and attributes every recurrent operator shares.
fn setup(c: &mut Ctx, kind: Kind) -> R<Setup> {
    let direction = c.string("direction", "forward")?;
    let reverse = match direction.as_str() {
        "forward" => vec![false],
        "reverse" => vec![true],
        "bidirectional" => vec![false, true],
        other => return Err(c.unsupported(format!("direction \"{other}\""))),
    };
    let layout = c.int("layout", 0)?;
    if layout != 0 && layout != 1 {
        return Err(c.err(format!("attribute `layout` is {layout}, expected 0 or 1")));
    }
    let x = c.fvar(0)?;
    let dtype = c.ty(x).dtype;
    let xd = c.ty(x).dims().to_vec();
    if xd.len() != 3 {
        return Err(c.err(format!("X has shape {xd:?}, expected rank 3")));
    }
    let (t, b, i) = if layout == 0 {
        (xd[0], xd[1], xd[2])
    } else {
        (xd[1], xd[0], xd[2])
    };
    let dirs = reverse.len();
    let g = kind.gates();
    let rd = c.dims(2)?;
    let h = match rd.as_slice() {
        [_, gh, h] if *gh == g * h => *h,
        _ => return Err(c.err(format!("R has shape {rd:?}, expected [{dirs}, {g}·H, H]"))),
    };
    if let Some(hs) = c.int_opt("hidden_size")? {
        if hs != h as i64 {
            return Err(c.err(format!("hidden_size is {hs} but R has hidden size {h}")));
        }
    }
    if h == 0 || t == 0 || b == 0 {
        return Err(c.unsupported("an empty sequence, batch or hidden state"));
    }
    let want = |c: &Ctx, k: usize, dims: Vec<usize>, name: &str| -> R<()> {
        let got = c.dims(k)?;
        if got != dims {
            return Err(c.err(format!("{name} has shape {got:?}, expected {dims:?}")));
        }
        Ok(())
    };
    want(c, 1, vec![dirs, g * h, i], "W")?;
    want(c, 2, vec![dirs, g * h, h], "R")?;
    if c.has(3) {
        want(c, 3, vec![dirs, 2 * g * h], "B")?;
    }
    let clip = match c.attr("clip") {
        None => None,
        Some(_) => {
            let k = c.float("clip", 0.0)? as f64;
            if k.is_nan() || k <= 0.0 {
                return Err(c.err(format!("attribute `clip` is {k}, expected > 0")));
            }
            Some(k)
        }
    };
    let acts = activations(c, kind, dirs)?;
    let lens = if c.has(4) {
        let l = c.need_known(4, "sequence_lens")?.as_i64s();
        if l.len() != b || l.iter().any(|&v| v < 0 || v as usize > t) {
            return Err(c.err(format!(
                "sequence_lens {l:?} must hold {b} lengths in 0..={t}"
            )));
        }
        let l: Vec<usize> = l.iter().map(|&v| v as usize).collect();
        (l.iter().any(|&v| v != t)).then_some(l)
    } else {
        None
    };
    let xt = if layout == 0 {
        x
    } else {
        t!(c, c.b.permute(x, vec![1, 0, 2]))?
    };
    let x_rows = reshape_to(c, xt, vec![t * b, i])?;
    Ok(Setup {
        kind,
        t,
        b,
        h,
        dtype,
        reverse,
        layout,
        clip,
        acts,
        lens,
        x_rows,
    })
}

/// One direction's operands: `x·Wᵀ + Wb` for all steps (T·B, G·H), `Rᵀ` (H, G·H), and `Rb`
/// broadcast to (B, G·H) when B is given.
struct Dir {
    xw: Var,
    rt: Var,
    rb: Option<Var>,
}

fn direction_operands(c: &mut Ctx, s: &Setup, d: usize) -> R<Dir> {
    let (g, h) = (s.kind.gates(), s.h);
    let w = c.fvar(1)?;
    let i = c.ty(w).dims()[2];
    let w = direction(c, w, d, vec![g * h, i])?;
    let wt = t!(c, c.b.transpose(w))?;
    let mut xw = t!(c, c.b.matmul(s.x_rows, wt))?;
    let r = c.fvar(2)?;
    let r = direction(c, r, d, vec![g * h, h])?;
    let rt = t!(c, c.b.transpose(r))?;
    let rb = if c.has(3) {
        let bias = c.fvar(3)?;
        let bias = direction(c, bias, d, vec![2 * g * h])?;
        let wb = rows(c, bias, 0, g * h)?;
        let wb = c.expand_to(wb, &[s.t * s.b, g * h])?;
        xw = t!(c, c.b.add(xw, wb))?;
        let rb = rows(c, bias, 1, g * h)?;
        Some(c.expand_to(rb, &[s.b, g * h])?)
    } else {
        None
    };
    Ok(Dir { xw, rt, rb })
}

/// The (B, H) 0/1 mask of the rows still inside their sequence at step `t`, or None when all are.
fn step_mask(c: &mut Ctx, s: &Setup, t: usize) -> R<Option<Var>> {
    let Some(lens) = &s.lens else {
        return Ok(None);
    };
    if lens.iter().all(|&l| t < l) {
        return Ok(None);
    }
    let data: Vec<f64> = lens
        .iter()
        .flat_map(|&l| std::iter::repeat_n(if t < l { 1.0 } else { 0.0 }, s.h))
        .collect();
    Ok(Some(c.constant_of(s.dtype, &[s.b, s.h], data)?))
}

/// `old + m ⊙ (new - old)`: the new state on rows still inside their sequence.
fn hold(c: &mut Ctx, mask: Option<Var>, old: Var, new: Var) -> R<Var> {
    match mask {
        None => Ok(new),
        Some(m) => {
            let d = t!(c, c.b.sub(new, old))?;
            let md = t!(c, c.b.mul(m, d))?;
            t!(c, c.b.add(old, md))
        }
    }
}

/// The recurrence of one direction: Y's steps (in time order) and the last H and C.
struct Run {
    ys: Vec<Var>,
    h: Var,
    c: Option<Var>,
}

/// x·Wᵀ (+ Wb) at step t: (B, G·H).
fn step_input(c: &mut Ctx, s: &Setup, dir: &Dir, t: usize) -> R<Var> {
    if s.t == 1 {
        return Ok(dir.xw);
    }
    rows(c, dir.xw, t, s.b)
}

/// h·Rᵀ (+ Rb): (B, G·H).
fn recur(c: &mut Ctx, dir: &Dir, h: Var) -> R<Var> {
    let hr = t!(c, c.b.matmul(h, dir.rt))?;
    match dir.rb {
        Some(rb) => t!(c, c.b.add(hr, rb)),
        None => Ok(hr),
    }
}

fn steps(s: &Setup, d: usize) -> Vec<usize> {
    if s.reverse[d] {
        (0..s.t).rev().collect()
    } else {
        (0..s.t).collect()
    }
}

/// Y (T, D, B, H), Y_h and Y_c (D, B, H) from the runs, in the node's layout.
fn outputs(c: &mut Ctx, s: &Setup, runs: Vec<Run>) -> R<Vec<Value>> {
    let (b, h, dirs) = (s.b, s.h, runs.len());
    let cat = |c: &mut Ctx, vs: Vec<Var>, axis: usize| -> R<Var> {
        if vs.len() == 1 {
            Ok(vs[0])
        } else {
            t!(c, c.b.concat(&vs, axis))
        }
    };
    let mut per_dir = Vec::with_capacity(dirs);
    let mut hs = Vec::with_capacity(dirs);
    let mut cs = Vec::with_capacity(dirs);
    for run in runs {
        let mut ys = Vec::with_capacity(s.t);
        for y in run.ys {
            ys.push(reshape_to(c, y, vec![1, 1, b, h])?);
        }
        per_dir.push(cat(c, ys, 0)?);
        hs.push(reshape_to(c, run.h, vec![1, b, h])?);
        if let Some(cv) = run.c {
            cs.push(reshape_to(c, cv, vec![1, b, h])?);
        }
    }
    let mut y = cat(c, per_dir, 1)?;
    let mut yh = cat(c, hs, 0)?;
    let mut yc = if cs.is_empty() {
        None
    } else {
        Some(cat(c, cs, 0)?)
    };
    if s.layout == 1 {
        y = t!(c, c.b.permute(y, vec![2, 0, 1, 3]))?;
        yh = t!(c, c.b.permute(yh, vec![1, 0, 2]))?;
        if let Some(v) = yc {
            yc = Some(t!(c, c.b.permute(v, vec![1, 0, 2]))?);
        }
    }
    let mut outs = vec![Value::Var(y), Value::Var(yh)];
    outs.extend(yc.map(Value::Var));
    outs.truncate(c.node.output.len().max(1));
    Ok(outs)
}

/// RNN: `H_t = f(X_t·Wᵀ + H_{t-1}·Rᵀ + Wb + Rb)`, f = tanh unless `activations` says otherwise.
pub fn rnn(c: &mut Ctx) -> R<Vec<Value>> {
    let s = setup(c, Kind::Rnn)?;
    let mut runs = Vec::new();
    for d in 0..s.reverse.len() {
        let dir = direction_operands(c, &s, d)?;
        let mut h = initial_state(c, &s, 5, d)?;
        let mut ys = vec![h; s.t];
        for t in steps(&s, d) {
            let xw = step_input(c, &s, &dir, t)?;
            let hr = recur(c, &dir, h)?;
            let pre = t!(c, c.b.add(xw, hr))?;
            let hn = activate(c, s.acts[d][0], s.clip, pre)?;
            let mask = step_mask(c, &s, t)?;
            ys[t] = masked_output(c, mask, hn)?;
            h = hold(c, mask, h, hn)?;
        }
        runs.push(Run { ys, h, c: None });
    }
    outputs(c, &s, runs)
}

/// Y at a step: the new state, zero on rows past their sequence.
fn masked_output(c: &mut Ctx, mask: Option<Var>, hn: Var) -> R<Var> {
    match mask {
        None => Ok(hn),
        Some(m) => t!(c, c.b.mul(m, hn)),
    }
}

/// GRU (gates z, r, h stacked in that order): `z = f(X·Wzᵀ + H·Rzᵀ + Wbz + Rbz)`, r alike,
/// `ĥ = g(X·Whᵀ + (r ⊙ H)·Rhᵀ + Rbh + Wbh)` (or `g(X·Whᵀ + r ⊙ (H·Rhᵀ + Rbh) + Wbh)` with
/// `linear_before_reset`), `H' = (1 - z) ⊙ ĥ + z ⊙ H`.
pub fn gru(c: &mut Ctx) -> R<Vec<Value>> {
    let s = setup(c, Kind::Gru)?;
    let lbr = c.int("linear_before_reset", 0)? != 0;
    let h = s.h;
    let mut runs = Vec::new();
    for d in 0..s.reverse.len() {
        let dir = direction_operands(c, &s, d)?;
        // Rhᵀ (H, H) and Rbh (B, H) for the reset-before-product form.
        let rht = gate(c, dir.rt, 2, h)?;
        let rbh = match dir.rb {
            Some(rb) => Some(gate(c, rb, 2, h)?),
            None => None,
        };
        let mut hp = initial_state(c, &s, 5, d)?;
        let mut ys = vec![hp; s.t];
        let (f, g) = (s.acts[d][0], s.acts[d][1]);
        for t in steps(&s, d) {
            let xw = step_input(c, &s, &dir, t)?;
            let hr = recur(c, &dir, hp)?;
            let (xz, xr, xh) = (gate(c, xw, 0, h)?, gate(c, xw, 1, h)?, gate(c, xw, 2, h)?);
            let (hz, hrr) = (gate(c, hr, 0, h)?, gate(c, hr, 1, h)?);
            let zp = t!(c, c.b.add(xz, hz))?;
            let z = activate(c, f, s.clip, zp)?;
            let rp = t!(c, c.b.add(xr, hrr))?;
            let r = activate(c, f, s.clip, rp)?;
            let hh_in = if lbr {
                let hh = gate(c, hr, 2, h)?;
                t!(c, c.b.mul(r, hh))?
            } else {
                let rh = t!(c, c.b.mul(r, hp))?;
                let p = t!(c, c.b.matmul(rh, rht))?;
                match rbh {
                    Some(bh) => t!(c, c.b.add(p, bh))?,
                    None => p,
                }
            };
            let hp_in = t!(c, c.b.add(xh, hh_in))?;
            let hh = activate(c, g, s.clip, hp_in)?;
            // ĥ + z ⊙ (H - ĥ)
            let diff = t!(c, c.b.sub(hp, hh))?;
            let zd = t!(c, c.b.mul(z, diff))?;
            let hn = t!(c, c.b.add(hh, zd))?;
            let mask = step_mask(c, &s, t)?;
            ys[t] = masked_output(c, mask, hn)?;
            hp = hold(c, mask, hp, hn)?;
        }
        runs.push(Run { ys, h: hp, c: None });
    }
    outputs(c, &s, runs)
}

/// LSTM (gates i, o, f, c stacked in that order; peepholes P = [Pi, Po, Pf]):
/// `i = f(X·Wiᵀ + H·Riᵀ + Pi ⊙ C + Wbi + Rbi)`, forget gate alike (or `1 - i` with
/// `input_forget`), `C' = fg ⊙ C + i ⊙ g(X·Wcᵀ + H·Rcᵀ + Wbc + Rbc)`,
/// `o = f(X·Woᵀ + H·Roᵀ + Po ⊙ C' + Wbo + Rbo)`, `H' = o ⊙ h(C')`.
pub fn lstm(c: &mut Ctx) -> R<Vec<Value>> {
    let s = setup(c, Kind::Lstm)?;
    let input_forget = c.int("input_forget", 0)? != 0;
    let h = s.h;
    let dirs = s.reverse.len();
    if c.has(7) {
        let pd = c.dims(7)?;
        if pd != [dirs, 3 * h] {
            return Err(c.err(format!("P has shape {pd:?}, expected {:?}", [dirs, 3 * h])));
        }
    }
    let mut runs = Vec::new();
    for d in 0..dirs {
        let dir = direction_operands(c, &s, d)?;
        let peep = if c.has(7) {
            let p = c.fvar(7)?;
            let p = direction(c, p, d, vec![3 * h])?;
            let mut ps = Vec::with_capacity(3);
            for k in 0..3 {
                let pk = rows(c, p, k, h)?;
                ps.push(c.expand_to(pk, &[s.b, h])?);
            }
            Some(ps)
        } else {
            None
        };
        let mut hp = initial_state(c, &s, 5, d)?;
        let mut cp = initial_state(c, &s, 6, d)?;
        let mut ys = vec![hp; s.t];
        let (f, g, ha) = (s.acts[d][0], s.acts[d][1], s.acts[d][2]);
        let peephole = |c: &mut Ctx, pre: Var, k: usize, cell: Var| -> R<Var> {
            match &peep {
                Some(ps) => {
                    let pc = t!(c, c.b.mul(ps[k], cell))?;
                    t!(c, c.b.add(pre, pc))
                }
                None => Ok(pre),
            }
        };
        for t in steps(&s, d) {
            let xw = step_input(c, &s, &dir, t)?;
            let hr = recur(c, &dir, hp)?;
            let pre = t!(c, c.b.add(xw, hr))?;
            let (pi, po, pf, pc) = (
                gate(c, pre, 0, h)?,
                gate(c, pre, 1, h)?,
                gate(c, pre, 2, h)?,
                gate(c, pre, 3, h)?,
            );
            let pi = peephole(c, pi, 0, cp)?;
            let i = activate(c, f, s.clip, pi)?;
            let fg = if input_forget {
                let one = t!(c, c.b.full_like(1.0, i))?;
                t!(c, c.b.sub(one, i))?
            } else {
                let pf = peephole(c, pf, 2, cp)?;
                activate(c, f, s.clip, pf)?
            };
            let cc = activate(c, g, s.clip, pc)?;
            let keep = t!(c, c.b.mul(fg, cp))?;
            let add = t!(c, c.b.mul(i, cc))?;
            let cn = t!(c, c.b.add(keep, add))?;
            let po = peephole(c, po, 1, cn)?;
            let o = activate(c, f, s.clip, po)?;
            let hc = activate(c, ha, None, cn)?;
            let hn = t!(c, c.b.mul(o, hc))?;
            let mask = step_mask(c, &s, t)?;
            ys[t] = masked_output(c, mask, hn)?;
            hp = hold(c, mask, hp, hn)?;
            cp = hold(c, mask, cp, cn)?;
        }
        runs.push(Run {
            ys,
            h: hp,
            c: Some(cp),
        });
    }
    outputs(c, &s, runs)
}
