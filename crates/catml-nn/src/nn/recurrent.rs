//! Fixed-T recurrences as layers, around the builder functions of
//! [`prim::recurrent`](crate::prim::recurrent): one parameter slot per weight, read by every
//! step, and a differentiable initial state. Inputs are (T, B, D), states (B, H). By default the
//! recurrence is one `scan` node whose body is the cell (a program whose size does not depend on
//! T, docs/scan.md); `.unrolled()` writes the T steps out instead.

use rand::Rng;

use super::{call_built, param, Init};
use crate::prim::recurrent::{elman, elman_scan, gru, gru_scan, ElmanWeights, GruWeights};
use crate::tensor::TensorType;
use crate::trace::{tag_scope, Value};

/// The states of an unrolled recurrence.
#[derive(Debug, Clone)]
pub struct States {
    /// Every state, (T, B, H).
    pub all: Value,
    /// The last state, (B, H).
    pub last: Value,
}

/// U(-1/√H, 1/√H), PyTorch's start for recurrent weights and biases.
fn recurrent_init(hidden: usize) -> Init {
    let a = 1.0 / (hidden.max(1) as f64).sqrt();
    Init::Uniform { low: -a, high: a }
}

/// The Elman tanh cell h_t = tanh(W_ih x_t + b + W_hh h_{t-1}).
/// Parameters `<tag>.W_ih` (H, D), `<tag>.W_hh` (H, H), `<tag>.b` (H): H·D + H² + H.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rnn {
    pub hidden: usize,
    /// Whether the T steps are written out as nodes instead of one `scan` node.
    pub unrolled: bool,
}

impl Rnn {
    /// The cell as one `scan` node.
    pub fn new(hidden: usize) -> Rnn {
        Rnn {
            hidden,
            unrolled: false,
        }
    }

    /// The same cell with its T steps written out as nodes.
    pub fn unrolled(self) -> Rnn {
        Rnn {
            unrolled: true,
            ..self
        }
    }

    /// Runs the cell over xs (T, B, D) from h0 (B, H) under `tag`.
    #[track_caller]
    pub fn apply<R: Rng + ?Sized>(&self, xs: &Value, h0: &Value, rng: &mut R, tag: &str) -> States {
        let weights = weights(xs, self.hidden, 1, rng, tag, &["W_ih", "W_hh", "b"]);
        let _tag = tag_scope(tag);
        let args: Vec<&Value> = [xs, h0].into_iter().chain(&weights).collect();
        let unrolled = self.unrolled;
        let out = call_built("rnn", &args, 2, |b, v| {
            let w = ElmanWeights {
                w_ih: v[2],
                w_hh: v[3],
                b: v[4],
            };
            let u = if unrolled {
                elman(b, v[0], v[1], &w)?
            } else {
                elman_scan(b, v[0], v[1], &w)?
            };
            Ok(vec![u.states, u.last])
        });
        states(out)
    }
}

/// The GRU cell (gates r, z, n stacked in that order). Parameters `<tag>.W_ih`
/// (3H, D), `<tag>.W_hh` (3H, H), `<tag>.b_ih` (3H), `<tag>.b_hh` (3H): 3H·D + 3H² + 6H.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Gru {
    pub hidden: usize,
    /// Whether the T steps are written out as nodes instead of one `scan` node.
    pub unrolled: bool,
}

impl Gru {
    /// The cell as one `scan` node.
    pub fn new(hidden: usize) -> Gru {
        Gru {
            hidden,
            unrolled: false,
        }
    }

    /// The same cell with its T steps written out as nodes.
    pub fn unrolled(self) -> Gru {
        Gru {
            unrolled: true,
            ..self
        }
    }

    /// Runs the cell over xs (T, B, D) from h0 (B, H) under `tag`.
    #[track_caller]
    pub fn apply<R: Rng + ?Sized>(&self, xs: &Value, h0: &Value, rng: &mut R, tag: &str) -> States {
        let names = ["W_ih", "W_hh", "b_ih", "b_hh"];
        let weights = weights(xs, self.hidden, 3, rng, tag, &names);
        let _tag = tag_scope(tag);
        let args: Vec<&Value> = [xs, h0].into_iter().chain(&weights).collect();
        let unrolled = self.unrolled;
        let out = call_built("gru", &args, 2, |b, v| {
            let w = GruWeights {
                w_ih: v[2],
                w_hh: v[3],
                b_ih: v[4],
                b_hh: v[5],
            };
            let u = if unrolled {
                gru(b, v[0], v[1], &w)?
            } else {
                gru_scan(b, v[0], v[1], &w)?
            };
            Ok(vec![u.states, u.last])
        });
        states(out)
    }
}

/// The parameters `<tag>.<name>` in the order of `names`: W_ih (gates·H, D), W_hh
/// (gates·H, H), then biases (gates·H), all from U(-1/√H, 1/√H). D is xs's last axis.
#[track_caller]
fn weights<R: Rng + ?Sized>(
    xs: &Value,
    hidden: usize,
    gates: usize,
    rng: &mut R,
    tag: &str,
    names: &[&str],
) -> Vec<Value> {
    let xt = match xs.ty() {
        Ok(t) => t,
        Err(e) => return vec![Value::failed(e); names.len()],
    };
    let d = xt.dims().last().copied().unwrap_or(0);
    let rows = gates * hidden;
    let mut weights = Vec::with_capacity(names.len());
    for (i, name) in names.iter().enumerate() {
        let dims = match i {
            0 => vec![rows, d],
            1 => vec![rows, hidden],
            _ => vec![rows],
        };
        let ty = TensorType::new(xt.dtype, dims);
        weights.push(param(
            &format!("{tag}.{name}"),
            &ty,
            recurrent_init(hidden),
            rng,
        ));
    }
    weights
}

fn states(out: Vec<Value>) -> States {
    let mut out = out.into_iter();
    let all = out.next().expect("two outputs");
    let last = out.next().expect("two outputs");
    States { all, last }
}
