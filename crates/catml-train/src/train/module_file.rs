//! Reading a module file, the one loader every command and every spec goes through. The file's
//! extension says how to read it: `.json` is LensIR JSON, `.catml` (or `.listing`) a CatML
//! listing; any other extension is read as a listing if its text starts with `program(` and as
//! LensIR JSON otherwise.

use std::path::Path;

use crate::ir::{json, listing, Program, Registry, ValidationErrors};

/// The largest module file read (modules are text).
pub const MAX_MODULE_BYTES: u64 = 1 << 30;

/// How a module file is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModuleFormat {
    /// LensIR JSON (`docs/lensir.md`).
    LensIr,
    /// The CatML listing, the text form printed by `catml print`.
    Listing,
}

impl ModuleFormat {
    /// The format an extension names, if it names one.
    pub fn from_extension(path: &Path) -> Option<ModuleFormat> {
        match path.extension()?.to_str()? {
            "json" => Some(ModuleFormat::LensIr),
            "catml" | "listing" => Some(ModuleFormat::Listing),
            _ => None,
        }
    }

    /// The format of a file with no known extension, from its first characters.
    pub fn sniff(text: &str) -> ModuleFormat {
        if text.trim_start().starts_with("program(") {
            ModuleFormat::Listing
        } else {
            ModuleFormat::LensIr
        }
    }

    /// Parses and validates module text of this format.
    pub fn parse(self, text: &str, registry: &Registry) -> Result<Program, ValidationErrors> {
        match self {
            ModuleFormat::LensIr => json::from_str(text, registry),
            ModuleFormat::Listing => listing::parse(text, registry),
        }
    }
}

/// Why a module file could not be read: the file and the reason, in one line.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ModuleFileError {
    #[error("cannot read {path}: {reason}")]
    Read { path: String, reason: String },
    #[error("{path}: file is larger than {max} bytes")]
    TooLarge { path: String, max: u64 },
    #[error("{path}: the file is empty")]
    Empty { path: String },
    #[error("{path}: {source}")]
    Invalid {
        path: String,
        source: ValidationErrors,
    },
}

/// Reads and validates the module at `path` with the built-in primitives.
///
/// ```
/// # let dir = std::env::temp_dir().join("catml-read-module-doc");
/// # std::fs::create_dir_all(&dir).unwrap();
/// let path = dir.join("double.catml");
/// std::fs::write(&path, "program(\n  inputs:\n    x: f64[2]\n  instructions:\n    0: y: f64[2] = add(x, x)\n  outputs: y\n)\n").unwrap();
/// let p = catml_train::train::read_module(&path).unwrap();
/// assert_eq!(p.n_nodes(), 1);
/// ```
pub fn read_module(path: &Path) -> Result<Program, ModuleFileError> {
    read_module_with(path, crate::prim::builtins())
}

/// Reads and validates the module at `path`, naming primitives from `registry`.
pub fn read_module_with(path: &Path, registry: &Registry) -> Result<Program, ModuleFileError> {
    let shown = path.display().to_string();
    let read = |e: std::io::Error| ModuleFileError::Read {
        path: shown.clone(),
        reason: e.to_string(),
    };
    let meta = std::fs::metadata(path).map_err(read)?;
    if meta.len() > MAX_MODULE_BYTES {
        return Err(ModuleFileError::TooLarge {
            path: shown,
            max: MAX_MODULE_BYTES,
        });
    }
    let bytes = std::fs::read(path).map_err(read)?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(ModuleFileError::Empty { path: shown });
    }
    // Text formats from here on; a binary format would take `bytes` by its extension first.
    let text = String::from_utf8(bytes).map_err(|e| ModuleFileError::Read {
        path: shown.clone(),
        reason: format!("not UTF-8 text ({e})"),
    })?;
    let format = ModuleFormat::from_extension(path).unwrap_or_else(|| ModuleFormat::sniff(&text));
    format
        .parse(&text, registry)
        .map_err(|source| ModuleFileError::Invalid {
            path: shown,
            source,
        })
}
