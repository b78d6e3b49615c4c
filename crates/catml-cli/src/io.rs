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

/// Input shapes given with `--shape NAME=DIMS`, for every ONNX model a command reads.
static ONNX_SHAPES: std::sync::OnceLock<catml_onnx::Shapes> = std::sync::OnceLock::new();

/// Parses and keeps the `--shape` arguments.
pub fn set_onnx_shapes(args: &[String]) -> Result<(), String> {
    let mut shapes = catml_onnx::Shapes::new();
    for a in args {
        let bad = || format!("--shape `{a}`: expected NAME=DIMS with DIMS like 1x3x224x224");
        let (name, dims) = a.rsplit_once('=').ok_or_else(bad)?;
        let dims: Vec<usize> = dims
            .split('x')
            .map(|d| d.parse::<usize>().ok().filter(|&n| n > 0))
            .collect::<Option<_>>()
            .ok_or_else(bad)?;
        shapes.insert(name.to_string(), dims);
    }
    let _ = ONNX_SHAPES.set(shapes);
    Ok(())
}

pub fn given_shapes() -> catml_onnx::Shapes {
    ONNX_SHAPES.get().cloned().unwrap_or_default()
}

/// Whether a path names an ONNX model (by its extension).
pub fn is_onnx(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("onnx"))
}

/// An ONNX model imported for these input shapes; an unsupported model lists every unsupported
/// node on one line.
pub fn read_onnx(path: &Path, shapes: &catml_onnx::Shapes) -> Result<catml_onnx::Imported, String> {
    let fail = |e: catml_onnx::OnnxError| format!("{}: {e}", path.display());
    let model = catml_onnx::read_bytes(path)
        .and_then(|b| catml_onnx::decode_model(&b))
        .map_err(fail)?;
    match catml_onnx::import(&model, shapes, path.parent()) {
        Ok(m) => Ok(m),
        Err(e) if e.is_unsupported() => {
            let all =
                catml_onnx::unsupported_nodes(&model, shapes, path.parent()).unwrap_or_default();
            if all.len() <= 1 {
                return Err(fail(e));
            }
            let list: Vec<String> = all.iter().map(|e| e.to_string()).collect();
            Err(format!(
                "{}: {} unsupported nodes: {}",
                path.display(),
                all.len(),
                list.join("; ")
            ))
        }
        Err(e) => Err(fail(e)),
    }
}

/// A module file: an ONNX model (`.onnx`) with the `--shape` dimensions, else through the
/// library's one loader (the extension picks the format).
pub fn read_module(path: &Path) -> Result<Program, String> {
    if is_onnx(path) {
        return read_onnx(path, &given_shapes()).map(|m| m.program);
    }
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
