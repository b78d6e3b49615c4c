//! Per-epoch metrics, written as JSON lines (one object per epoch).

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::{Evaluation, TrainError};

/// One epoch's record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpochMetrics {
    /// Epochs completed (1 for the first).
    pub epoch: usize,
    /// Optimiser steps completed.
    pub step: u64,
    /// The learning rate of the epoch's last step.
    pub lr: f64,
    /// The mean over the epoch's batches of the training loss.
    pub loss: f64,
    /// The mean over the epoch's batches of each term.
    pub terms: BTreeMap<String, f64>,
    /// Which data `eval` was measured on: "held_out", or "train" when there is none.
    pub eval_on: String,
    /// Loss, terms, defects and accuracies after the epoch.
    pub eval: Evaluation,
}

impl EpochMetrics {
    /// The record as one line of JSON (no newline).
    pub fn to_json_line(&self) -> String {
        serde_json::to_string(self).expect("metrics serialise")
    }
}

/// Every record, one JSON line each.
pub fn to_json_lines(history: &[EpochMetrics]) -> String {
    history.iter().map(|m| m.to_json_line() + "\n").collect()
}

/// Parses records written by [`to_json_lines`].
pub fn from_json_lines(text: &str) -> Result<Vec<EpochMetrics>, String> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .enumerate()
        .map(|(i, l)| serde_json::from_str(l).map_err(|e| format!("line {}: {e}", i + 1)))
        .collect()
}

/// Writes the whole history atomically.
pub fn write_metrics(path: &Path, history: &[EpochMetrics]) -> Result<(), TrainError> {
    crate::tensor::write_atomic(path, to_json_lines(history).as_bytes()).map_err(|e| {
        TrainError::Output {
            path: path.display().to_string(),
            reason: e.to_string(),
        }
    })
}
