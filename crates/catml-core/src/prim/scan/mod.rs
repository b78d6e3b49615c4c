//! `scan`: a loop whose step is a nested program (docs/scan.md), its derivative rules, the
//! `unpack` primitive that reads one of its results, and the builder function that applies it.

mod batch;
pub mod build;
pub mod primitive;
mod rules;
pub mod unpack;

pub use build::{scan, ScanResults};
pub use primitive::{Piece, Scan};
pub use unpack::Unpack;

pub(crate) fn register(r: &mut crate::ir::Registry) {
    primitive::register(r);
    unpack::register(r);
}

#[cfg(test)]
mod tests;
