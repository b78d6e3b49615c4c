//! Checkpoints: one safetensors file with the parameters (`param/<name>`), the optimiser state
//! (`optim/<key>`, including its step counter) and, as metadata, the epoch, the shuffling RNG's
//! exact position, the metrics so far and, for a run from a spec, its [`Provenance`]. Resuming
//! from it continues bit for bit.

use std::collections::HashMap;
use std::path::Path;

use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::metrics::{from_json_lines, to_json_lines};
use super::provenance::Provenance;
use super::{EpochMetrics, TrainError};
use crate::tensor::{write_atomic, Params};

/// The `format` metadata of a checkpoint.
pub(crate) const FORMAT: &str = "catml-checkpoint/1";

/// Everything a trainer needs to continue.
#[derive(Debug, Clone)]
pub(crate) struct Checkpoint {
    pub params: Params,
    pub optim: Params,
    pub epoch: usize,
    pub rng: ChaCha8Rng,
    pub history: Vec<EpochMetrics>,
    pub provenance: Option<Provenance>,
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<[u8; 32]> {
    if s.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

impl Checkpoint {
    pub fn save(&self, path: &Path) -> Result<(), TrainError> {
        let fail = |reason: String| TrainError::Checkpoint {
            path: path.display().to_string(),
            reason,
        };
        let bytes = self.to_bytes().map_err(fail)?;
        write_atomic(path, &bytes).map_err(|e| fail(e.to_string()))
    }

    /// The checkpoint file's bytes.
    pub fn to_bytes(&self) -> Result<Vec<u8>, String> {
        let mut store = Params::new();
        for (n, t) in self.params.iter() {
            store.insert(format!("param/{n}"), t.clone());
        }
        for (n, t) in self.optim.iter() {
            store.insert(format!("optim/{n}"), t.clone());
        }
        let meta: HashMap<String, String> = [
            ("format", FORMAT.to_string()),
            ("epoch", self.epoch.to_string()),
            ("rng.seed", hex(&self.rng.get_seed())),
            ("rng.stream", self.rng.get_stream().to_string()),
            ("rng.word_pos", self.rng.get_word_pos().to_string()),
            ("history", to_json_lines(&self.history)),
        ]
        .into_iter()
        .chain(self.provenance.as_ref().map(|p| {
            let json = serde_json::to_string(p).expect("provenance serialises");
            ("provenance", json)
        }))
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        store
            .to_safetensors_with(Some(meta))
            .map_err(|e| e.to_string())
    }

    pub fn load(path: &Path) -> Result<Checkpoint, TrainError> {
        let bytes = std::fs::read(path).map_err(|e| TrainError::Checkpoint {
            path: path.display().to_string(),
            reason: e.to_string(),
        })?;
        Checkpoint::from_bytes(&bytes, &path.display().to_string())
    }

    /// Reads a checkpoint file's bytes; errors name `origin`.
    pub fn from_bytes(bytes: &[u8], origin: &str) -> Result<Checkpoint, TrainError> {
        let fail = |reason: String| TrainError::Checkpoint {
            path: origin.to_string(),
            reason,
        };
        let (store, meta) =
            Params::from_safetensors_with_metadata(bytes).map_err(|e| fail(e.to_string()))?;
        let get = |key: &str| {
            meta.get(key)
                .ok_or_else(|| fail(format!("metadata has no `{key}`")))
        };
        let format = get("format")?;
        if format != FORMAT {
            return Err(fail(format!(
                "format is \"{format}\", expected \"{FORMAT}\""
            )));
        }
        let bad = |key: &str| fail(format!("metadata `{key}` is malformed"));
        let epoch = get("epoch")?.parse().map_err(|_| bad("epoch"))?;
        let seed = unhex(get("rng.seed")?).ok_or_else(|| bad("rng.seed"))?;
        let stream = get("rng.stream")?.parse().map_err(|_| bad("rng.stream"))?;
        let word_pos = get("rng.word_pos")?
            .parse()
            .map_err(|_| bad("rng.word_pos"))?;
        let mut rng = ChaCha8Rng::from_seed(seed);
        rng.set_stream(stream);
        rng.set_word_pos(word_pos);
        let history =
            from_json_lines(get("history")?).map_err(|e| fail(format!("history: {e}")))?;
        let provenance = match meta.get("provenance") {
            Some(json) => Some(
                serde_json::from_str(json)
                    .map_err(|e| fail(format!("metadata `provenance` is malformed: {e}")))?,
            ),
            None => None,
        };
        let mut params = Params::new();
        let mut optim = Params::new();
        for (n, t) in store.iter() {
            if let Some(rest) = n.strip_prefix("param/") {
                params.insert(rest, t.clone());
            } else if let Some(rest) = n.strip_prefix("optim/") {
                optim.insert(rest, t.clone());
            } else {
                return Err(fail(format!(
                    "tensor `{n}` is neither `param/<name>` nor `optim/<key>`"
                )));
            }
        }
        Ok(Checkpoint {
            params,
            optim,
            epoch,
            rng,
            history,
            provenance,
        })
    }
}
