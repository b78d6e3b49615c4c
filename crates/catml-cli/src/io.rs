//! Reading the files a command names, with errors that name the file and the JSON path.

use std::collections::BTreeMap;
use std::path::Path;

use catml::ir::{json, listing, Program};
use catml::tensor::Tensor;
use serde::de::DeserializeOwned;

/// The largest file a command reads (modules and tensors are JSON text).
const MAX_FILE_BYTES: u64 = 1 << 30;

pub fn read_text(path: &Path) -> Result<String, String> {
    let meta =
        std::fs::metadata(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if meta.len() > MAX_FILE_BYTES {
        return Err(format!(
            "{}: file is larger than {} bytes",
            path.display(),
            MAX_FILE_BYTES
        ));
    }
    std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
}

/// A module from LensIR JSON, or from a CatML listing if the text starts with `program(`.
pub fn read_module(path: &Path) -> Result<Program, String> {
    let text = read_text(path)?;
    let registry = catml::prim::builtins();
    let parsed = if text.trim_start().starts_with("program(") {
        listing::parse(&text, registry)
    } else {
        json::from_str(&text, registry)
    };
    parsed.map_err(|e| format!("{}: {e}", path.display()))
}

/// A JSON file of a given shape, with the JSON path of any error.
pub fn read_json<T: DeserializeOwned>(path: &Path) -> Result<T, String> {
    let text = read_text(path)?;
    let mut de = serde_json::Deserializer::from_str(&text);
    let value = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let at = e.path().to_string();
        format!("{}: {at}: {}", path.display(), e.into_inner())
    })?;
    de.end().map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(value)
}

/// A map of input names to tensors.
pub fn read_tensor_map(path: &Path) -> Result<BTreeMap<String, Tensor>, String> {
    read_json(path)
}
