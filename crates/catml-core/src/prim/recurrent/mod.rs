//! Fixed-length recurrences (Elman and GRU cells): unrolled by builder functions, or as one
//! `scan` node whose body is the cell.

pub(crate) mod scanned;
pub(crate) mod unrolled;

pub use scanned::{elman_scan, gru_scan};
pub use unrolled::{elman, gru, ElmanWeights, GruWeights, Unrolled};
