//! The operator sets a model imports: the default domain's (`ai.onnx`) and the other domains
//! the importer maps operators of (`ai.onnx.preview.training`, `ai.onnx.ml`). A model whose
//! nodes all belong to those other domains needs no default-domain opset.

use crate::import::opset_of;
use crate::proto::ModelProto;
use crate::OnnxError;

/// The training-operator domain (Adagrad, Adam, Momentum).
pub const TRAINING: &str = "ai.onnx.preview.training";
/// The classical machine-learning domain (Binarizer, ArrayFeatureExtractor).
pub const ML: &str = "ai.onnx.ml";

/// Non-default domains and the versions the importer reads (their mapped operators have not
/// changed within these versions).
pub const KNOWN: [(&str, i64, i64); 2] = [(TRAINING, 1, 1), (ML, 1, 5)];

/// The opsets of one model.
#[derive(Debug, Clone, Default)]
pub struct Opsets {
    /// The default domain's opset, if the model imports it.
    pub default: Option<i64>,
    /// The other known domains the model imports, with their versions.
    pub others: Vec<(String, i64)>,
}

impl Opsets {
    /// The version of `domain` ("" or "ai.onnx" for the default) the model imports.
    pub fn version(&self, domain: &str) -> Option<i64> {
        if domain.is_empty() || domain == "ai.onnx" {
            return self.default;
        }
        self.others
            .iter()
            .find(|(d, _)| d == domain)
            .map(|(_, v)| *v)
    }
}

/// The model's opsets: the default domain's checked by `opset_of` when imported, and every
/// other domain's version (checked against `KNOWN` when a node of that domain is met). Without
/// a default domain, the model must import a known other one.
pub fn opsets_of(model: &ModelProto) -> Result<Opsets, OnnxError> {
    let is_default = |d: &str| d.is_empty() || d == "ai.onnx";
    let others: Vec<(String, i64)> = model
        .opset_import
        .iter()
        .filter(|o| !is_default(&o.domain))
        .map(|o| (o.domain.clone(), o.version))
        .collect();
    let has_default = model.opset_import.iter().any(|o| is_default(&o.domain));
    let has_known = others
        .iter()
        .any(|(d, _)| KNOWN.iter().any(|(k, _, _)| k == d));
    let default = if has_default || !has_known {
        Some(opset_of(model)?)
    } else {
        None
    };
    Ok(Opsets { default, others })
}
