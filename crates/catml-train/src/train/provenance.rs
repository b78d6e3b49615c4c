//! What a run was made from, recorded in its checkpoint so that `--resume` continues only the
//! same run: every setting of the spec that shapes training, and the SHA-256 of every file the
//! spec reads (modules, parameters, data). `epochs` may grow on resume (a run is extended)
//! unless a cosine schedule takes its length from it; the `[output]` table may change freely.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::spec::{ScheduleKind, Spec};
use super::TrainError;

/// The spec's settings (`key = value`, keys as in spec errors) and the digests of its files.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Provenance {
    pub settings: BTreeMap<String, String>,
    /// `sha256:<hex>` of each file, by the key that names it (`data.train`, `arrows.f.module`).
    pub files: BTreeMap<String, String>,
}

fn flatten(prefix: &str, v: &toml::Value, out: &mut BTreeMap<String, String>) {
    match v {
        toml::Value::Table(t) => {
            for (k, v) in t {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten(&key, v, out);
            }
        }
        toml::Value::Array(items) if items.iter().any(toml::Value::is_table) => {
            for (i, v) in items.iter().enumerate() {
                flatten(&format!("{prefix}[{i}]"), v, out);
            }
        }
        other => {
            out.insert(prefix.to_string(), other.to_string());
        }
    }
}

/// `sha256:<hex>` of a file's bytes.
pub fn file_digest(path: &Path) -> Result<String, TrainError> {
    let bytes = std::fs::read(path).map_err(|e| TrainError::Output {
        path: path.display().to_string(),
        reason: e.to_string(),
    })?;
    let hash = Sha256::digest(&bytes);
    Ok(format!(
        "sha256:{}",
        hash.iter().map(|b| format!("{b:02x}")).collect::<String>()
    ))
}

impl Provenance {
    /// The provenance of a spec (its text, already parsed as `spec`) whose relative paths start
    /// at `base`.
    pub fn of_spec(text: &str, spec: &Spec, base: &Path) -> Result<Provenance, TrainError> {
        let table: toml::Table = toml::from_str(text).map_err(|e| TrainError::Output {
            path: "spec".to_string(),
            reason: e.to_string(),
        })?;
        let mut settings = BTreeMap::new();
        flatten("", &toml::Value::Table(table), &mut settings);
        let schedule_reads_epochs = spec
            .optimiser
            .schedule
            .as_ref()
            .is_some_and(|s| s.kind == ScheduleKind::Cosine && s.total.is_none());
        settings.retain(|k, _| {
            !(k.starts_with("output.") || (k == "epochs" && !schedule_reads_epochs))
        });
        let mut files = BTreeMap::new();
        files.insert(
            "data.train".to_string(),
            file_digest(&base.join(&spec.data.train))?,
        );
        if let Some(f) = &spec.data.held_out {
            files.insert("data.held_out".to_string(), file_digest(&base.join(f))?);
        }
        for (name, a) in &spec.arrows {
            files.insert(
                format!("arrows.{name}.module"),
                file_digest(&base.join(&a.module))?,
            );
            if let Some(p) = &a.params {
                files.insert(format!("arrows.{name}.params"), file_digest(&base.join(p))?);
            }
        }
        Ok(Provenance { settings, files })
    }

    /// What differs from `then` (the recorded provenance), one phrase per difference, in key
    /// order: `seed: 0, now 1`, `arrows.f.module: the file's contents changed`.
    pub fn changes_since(&self, then: &Provenance) -> Vec<String> {
        let mut out = Vec::new();
        let keys: std::collections::BTreeSet<&String> =
            self.settings.keys().chain(then.settings.keys()).collect();
        for k in keys {
            match (then.settings.get(k), self.settings.get(k)) {
                (Some(a), Some(b)) if a != b => out.push(format!("{k}: {a}, now {b}")),
                (Some(a), None) => out.push(format!("{k}: {a}, now unset")),
                (None, Some(b)) => out.push(format!("{k}: unset, now {b}")),
                _ => {}
            }
        }
        let keys: std::collections::BTreeSet<&String> =
            self.files.keys().chain(then.files.keys()).collect();
        for k in keys {
            match (then.files.get(k), self.files.get(k)) {
                (Some(a), Some(b)) if a != b => {
                    out.push(format!("{k}: the file's contents changed"))
                }
                (Some(_), None) => out.push(format!("{k}: no longer given")),
                (None, Some(_)) => out.push(format!("{k}: newly given")),
                _ => {}
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(text: &str) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        flatten(
            "",
            &toml::Value::Table(toml::from_str(text).unwrap()),
            &mut out,
        );
        out
    }

    #[test]
    fn tables_and_arrays_of_tables_flatten_to_spec_keys() {
        let s = settings("seed = 1\n[objects.E]\nshape = [8]\n[[supervised]]\npath = [\"f\"]\n");
        assert_eq!(s["seed"], "1");
        assert_eq!(s["objects.E.shape"], "[8]");
        assert_eq!(s["supervised[0].path"], "[\"f\"]");
    }

    #[test]
    fn changes_name_the_key_and_both_values() {
        let then = Provenance {
            settings: settings("seed = 0\nbatch_size = 32\n"),
            files: [("data.train".to_string(), "sha256:aa".to_string())].into(),
        };
        let now = Provenance {
            settings: settings("seed = 1\nbatch_size = 32\n"),
            files: [("data.train".to_string(), "sha256:bb".to_string())].into(),
        };
        assert_eq!(
            now.changes_since(&then),
            ["seed: 0, now 1", "data.train: the file's contents changed"]
        );
        assert!(then.changes_since(&then).is_empty());
    }
}
