//! `catml dot MODULE [--grad]`: the Graphviz picture of a module, and with `--grad` its
//! reverse-mode program beside it in a second cluster.

use std::path::Path;

use catml::ad;
use catml::ir::dot;

use crate::io::read_module;

/// The DOT text for the module at `path`.
pub fn run(path: &Path, grad: bool) -> Result<String, String> {
    let p = read_module(path)?;
    if !grad {
        return Ok(dot::program(&p));
    }
    let v = ad::vjp(&p).map_err(|e| e.to_string())?;
    Ok(dot::side_by_side(&[
        ("forward", &p),
        ("reverse (vjp)", &v.program),
    ]))
}
