//! Layers and initialisers, written on the tracing API: each layer is a function of values
//! that declares its parameters (named `<tag>.<name>`) and tags its nodes, so it runs eagerly
//! outside a trace and records inside one.

mod init;
mod linear;

pub use init::{fans, seeded, Init};
pub use linear::{linear, Linear};
pub use rand_chacha::ChaCha8Rng;

use rand::Rng;

use crate::tensor::TensorType;
use crate::trace::Value;

/// A parameter named `name` of type `ty`, drawn from `init` (see [`Value::param`]). The draw
/// happens in both modes, so eager and traced runs from one seed see the same values.
#[track_caller]
pub fn param<R: Rng + ?Sized>(name: &str, ty: &TensorType, init: Init, rng: &mut R) -> Value {
    Value::param(name, init.sample(ty, rng))
}
