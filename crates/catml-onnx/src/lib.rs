//! ONNX import and export. Import: a `ModelProto` becomes a CatML [`Program`](catml_core::ir::Program) whose inputs are
//! the graph inputs (data) and the float initializers (parameters, with their values), and whose
//! outputs are the graph outputs. Each node maps onto CatML primitives or a composition of
//! them; values computed only from constants (shape arithmetic) are folded at import, so the
//! program is fully typed for the given input shapes. Export ([`export`], [`export_vjp`],
//! [`export_jvp`], [`write_model`]) writes a program or its derivative program as a model.
//!
//! ```no_run
//! use catml_onnx::{read_file, Shapes};
//! let imported = read_file("model.onnx".as_ref(), &Shapes::new())?;
//! println!("{} nodes", imported.program.n_nodes());
//! # Ok::<(), catml_onnx::OnnxError>(())
//! ```

#[macro_use]
mod ctx;
mod domains;
mod error;
mod export;
mod fold;
mod import;
mod konst;
mod ops;
mod packed;
mod promote;
pub mod proto;
mod read;
mod storage;

use std::path::Path;

pub use error::OnnxError;
pub use export::{
    export, export_jvp, export_vjp, write_model, ExportError, ExportOptions, Exported,
    DEFAULT_EXPORT_OPSET, MAX_EXPORT_OPSET, MIN_EXPORT_OPSET, NOT_EXPORTED,
};
pub use import::{
    import, import_bound, opset_of, unsupported_nodes, Bound, Imported, Shapes, MAX_OPSET,
    MIN_OPSET,
};
pub use konst::{code_of as elem_code, dtype_of, elem, Const, Data};
pub use promote::promote_to_f64;
pub use read::{decode_model, read_tensor, MAX_TENSOR_BYTES};

/// The largest model file read (protobuf messages are limited to 2 GiB).
pub const MAX_MODEL_BYTES: u64 = 2 << 30;

/// Reads a model file's bytes, refusing files over [`MAX_MODEL_BYTES`].
pub fn read_bytes(path: &Path) -> Result<Vec<u8>, OnnxError> {
    let fail =
        |e: std::io::Error| OnnxError::Decode(format!("cannot read {}: {e}", path.display()));
    let len = std::fs::metadata(path).map_err(fail)?.len();
    if len > MAX_MODEL_BYTES {
        return Err(OnnxError::Decode(format!(
            "{} has {len} bytes, more than the limit of {MAX_MODEL_BYTES}",
            path.display()
        )));
    }
    std::fs::read(path).map_err(fail)
}

/// Reads and imports a model file; external tensor data is looked up beside it.
pub fn read_file(path: &Path, shapes: &Shapes) -> Result<Imported, OnnxError> {
    let model = decode_model(&read_bytes(path)?)?;
    import(&model, shapes, path.parent())
}
