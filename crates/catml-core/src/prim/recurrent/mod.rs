//! Fixed-length recurrences (Elman and GRU cells), unrolled by builder functions.

pub(crate) mod unrolled;

pub use unrolled::{elman, gru, ElmanWeights, GruWeights, Unrolled};
