//! Layers and initialisers, written on the tracing API: each layer is a function of values
//! that declares its parameters (named `<tag>.<name>`) and tags its nodes, so it runs eagerly
//! outside a trace and records inside one.
//!
//! | layer | parameters | count |
//! | --- | --- | --- |
//! | [`Linear`] (= [`Dense`]) | W (out, in), b (out) | out·in + out |
//! | [`Conv2d`] / [`Conv1d`] | W (O, C/g, k..), b (O) | O·(C/g)·∏k + O |
//! | [`Pool2d`] | none | 0 |
//! | [`LayerNorm`] | gamma, beta (trailing axes) | 2·∏ axes |
//! | [`BatchNorm`] | scale, bias (C); running statistics held apart | 2C |
//! | [`Dropout`] | none (a key per call) | 0 |
//! | [`Embedding`] | table (V, D) | V·D |
//! | [`MultiHeadAttention`] | Wq, bq, Wk, bk, Wv, bv, Wo, bo | 4(D² + D) for self-attention |
//! | [`Rnn`] | W_ih (H, D), W_hh (H, H), b (H) | H·D + H² + H |
//! | [`Gru`] | W_ih (3H, D), W_hh (3H, H), b_ih, b_hh (3H) | 3H·D + 3H² + 6H |
//!
//! [`Sequential`] applies [`Layer`]s in order, each under its own tag. As layers, [`Rnn`] and
//! [`Gru`] start from a zero state and give every state.

mod attention;
mod batch_norm;
mod conv;
mod dropout;
mod embedding;
mod init;
mod linear;
mod norm;
mod pool;
mod recurrent;
mod sequential;

pub use attention::MultiHeadAttention;
pub use batch_norm::{BatchNorm, RunningStats};
pub use conv::{Conv1d, Conv2d};
pub use dropout::Dropout;
pub use embedding::Embedding;
pub use init::{fans, seeded, Init};
pub use linear::{linear, Dense, Linear};
pub use norm::LayerNorm;
pub use pool::{Pool2d, PoolKind};
pub use rand_chacha::ChaCha8Rng;
pub use recurrent::{Gru, Rnn, States};
pub use sequential::{flatten, Layer, Sequential};

use std::panic::Location;

use rand::Rng;

use crate::ir::{Builder, InputKind, TypeError, Var};
use crate::tensor::TensorType;
use crate::trace::{OperandTypes, TraceError, Value};

/// Whether a layer uses batch statistics (and randomness) or fixed ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// Batch statistics; dropout drops.
    #[default]
    Train,
    /// Running statistics; dropout is the identity.
    Eval,
}

/// A parameter named `name` of type `ty`, drawn from `init` (see [`Value::param`]). The draw
/// happens in both modes, so eager and traced runs from one seed see the same values.
///
/// A shape with a zero dimension (from a layer setting such as groups that do not divide the
/// channels) or more than [`MAX_VALUE_BYTES`](crate::interp::MAX_VALUE_BYTES) of data is a failed
/// value naming the caller, before anything is drawn or allocated.
#[track_caller]
pub fn param<R: Rng + ?Sized>(name: &str, ty: &TensorType, init: Init, rng: &mut R) -> Value {
    let fits = ty.shape.checked_numel().is_some_and(|n| {
        (n as u64).saturating_mul(ty.dtype.size() as u64) <= crate::interp::MAX_VALUE_BYTES
    });
    if !fits {
        let source = crate::ir::BuildError::InvalidShape {
            name: name.to_string(),
            ty: ty.clone(),
        };
        let location = Location::caller();
        return Value::failed(TraceError::Build { location, source });
    }
    Value::param(name, init.sample(ty, rng))
}

/// `n_out` values computed by a builder function (`prim::attention`, `prim::recurrent`) over
/// inputs of `args`' types: the function builds a program once, which [`Value::call`] then
/// runs or records. A type error from the builder names `op` and the caller's site.
#[track_caller]
fn call_built(
    op: &str,
    args: &[&Value],
    n_out: usize,
    build: impl FnOnce(&mut Builder, &[Var]) -> Result<Vec<Var>, TypeError>,
) -> Vec<Value> {
    let location = Location::caller();
    let built = (|| {
        let types = args.iter().map(|v| v.ty()).collect::<Result<Vec<_>, _>>()?;
        let mut b = Builder::new();
        let inputs = types
            .iter()
            .enumerate()
            .map(|(i, t)| b.input(&format!("a{i}"), t.clone(), InputKind::Data))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|source| TraceError::Build { location, source })?;
        let type_error = |source| TraceError::Type {
            location,
            op: op.to_string(),
            operands: OperandTypes(types.clone()),
            source,
        };
        let outs = build(&mut b, &inputs).map_err(type_error)?;
        b.finish(&outs)
            .map_err(|source| TraceError::Build { location, source })
    })();
    match built {
        Ok(p) => Value::call(&p, args),
        Err(e) => vec![Value::failed(e); n_out],
    }
}
