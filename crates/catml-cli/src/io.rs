//! Reading the files a command names, with errors that name the file and the JSON path.

use std::collections::BTreeMap;
use std::path::Path;

use catml::ir::Program;
use catml::tensor::Tensor;
use serde::de::DeserializeOwned;

/// The largest JSON file a command reads (tensors are JSON text).
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

/// A module file, through the library's one loader (the extension picks the format).
pub fn read_module(path: &Path) -> Result<Program, String> {
    catml::train::read_module(path).map_err(|e| e.to_string())
}

/// `NaN`, `Infinity` and their kin at a JSON syntax error: JSON has no such numbers.
fn non_finite_literal_at(text: &str, line: usize, column: usize) -> bool {
    let Some(l) = text.lines().nth(line.saturating_sub(1)) else {
        return false;
    };
    // serde_json's column is 1-based and points at (or just past) the offending character.
    let from = l
        .char_indices()
        .nth(column.saturating_sub(1))
        .map_or(l.len(), |(i, _)| i);
    let near = &l[l[..from].rfind([',', '[', ':']).map_or(0, |i| i + 1)..];
    let word = near.trim_start().trim_start_matches(['-', '+']);
    ["nan", "inf"]
        .iter()
        .any(|w| word.get(..3).is_some_and(|p| p.eq_ignore_ascii_case(w)))
}

/// A JSON file of a given shape, with the JSON path of any error.
pub fn read_json<T: DeserializeOwned>(path: &Path, what: &str) -> Result<T, String> {
    let text = read_text(path)?;
    if text.trim().is_empty() {
        return Err(format!(
            "{}: the file is empty; expected {what}",
            path.display()
        ));
    }
    let mut de = serde_json::Deserializer::from_str(&text);
    let value = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let at = e.path().to_string();
        let inner = e.into_inner();
        if inner.is_syntax() && non_finite_literal_at(&text, inner.line(), inner.column()) {
            return format!(
                "{}: {at}: line {} column {}: JSON has no NaN or infinity; write non-finite \
                 numbers as the strings \"nan\", \"inf\" and \"-inf\"",
                path.display(),
                inner.line(),
                inner.column()
            );
        }
        let message = catml::ir::suggest::serde_message(&inner.to_string());
        format!("{}: {at}: {message}", path.display())
    })?;
    de.end().map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(value)
}

/// A map of input names to tensors.
pub fn read_tensor_map(path: &Path) -> Result<BTreeMap<String, Tensor>, String> {
    read_json(path, "a JSON object mapping input names to tensors")
}
