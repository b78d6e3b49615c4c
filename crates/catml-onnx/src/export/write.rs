//! Writing a model file whole or not at all: the bytes go to a temporary file beside the
//! target, which is then renamed over it.

use std::io::Write;
use std::path::Path;

use prost::Message;

use super::ExportError;
use crate::proto::ModelProto;

/// Writes `model` to `path` atomically; on error nothing is left at `path` or beside it.
pub fn write_model(model: &ModelProto, path: &Path) -> Result<(), ExportError> {
    let fail = |reason: String| ExportError::Write {
        path: path.display().to_string(),
        reason,
    };
    let bytes = model.encode_to_vec();
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    let file = path
        .file_name()
        .ok_or_else(|| fail("the path names no file".to_string()))?;
    let tmp = dir.join(format!(
        ".{}.{}.tmp",
        file.to_string_lossy(),
        std::process::id()
    ));
    let result = std::fs::File::create(&tmp)
        .and_then(|mut f| {
            f.write_all(&bytes)?;
            f.sync_all()
        })
        .and_then(|()| std::fs::rename(&tmp, path));
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        return Err(fail(e.to_string()));
    }
    Ok(())
}
