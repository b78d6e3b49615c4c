//! Every family's mapping table, looked up by primitive name. A primitive in no table is
//! exported through its lowering.

use super::graph::{Mapped, Site};
use super::ExportError;

/// A mapping: writes the ONNX nodes of one application, or asks for the lowering.
pub(crate) type MapFn = fn(&mut Site) -> Result<Mapped, ExportError>;

const FAMILIES: &[&[(&str, MapFn)]] = &[
    super::elementwise::OPS,
    super::special::OPS,
    super::structural::OPS,
    super::linalg::OPS,
    super::reduce::OPS,
    super::nn::OPS,
];

/// The mapping of a primitive, if a family has one.
pub(crate) fn lookup(name: &str) -> Option<MapFn> {
    if super::elementwise::SAME.iter().any(|(n, _)| *n == name) {
        return Some(super::elementwise::same);
    }
    FAMILIES
        .iter()
        .flat_map(|f| f.iter())
        .find(|(n, _)| *n == name)
        .map(|(_, f)| *f)
}
