//! Evaluation on a whole dataset: the loss and its terms as dataset means, each equation's
//! commutation defect, and the accuracy (class labels) or error (values) of named paths.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::batches::{counts, make_batch, Needs, Norm};
use super::{Dataset, TrainError};
use crate::diagram::{Compiled, Diagram, Path, Term};
use crate::interp;
use crate::ir::{InputKind, Program};
use crate::tensor::{Params, Tensor};

/// What an evaluation measured. Terms and defects are means over the rows that have the
/// term's data; an equation's defect is its term's value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Evaluation {
    /// Σ weight_t · term_t.
    pub loss: f64,
    pub terms: BTreeMap<String, f64>,
    /// Each equation's mean distance between its two paths.
    pub defects: BTreeMap<String, f64>,
    /// Fraction of rows whose path output's largest score is at the label, per path whose
    /// target object holds class labels.
    pub accuracy: BTreeMap<String, f64>,
    /// Mean ½‖path(x) − y‖², per path whose target object holds values.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub error: BTreeMap<String, f64>,
}

/// A named path measured against its target object's data.
#[derive(Debug, Clone)]
pub(crate) struct Probe {
    pub name: String,
    pub source: String,
    pub target: String,
    pub program: Program,
}

impl Probe {
    pub fn new(diagram: &Diagram, name: &str, path: &Path) -> Result<Probe, TrainError> {
        let fail = |source| TrainError::Probe {
            name: name.to_string(),
            source,
        };
        let ends = diagram
            .resolve(path)
            .map_err(|source| crate::diagram::DiagramError::Path {
                term: format!("path {path}"),
                side: "path",
                source,
            })
            .map_err(fail)?;
        Ok(Probe {
            name: name.to_string(),
            source: ends.source,
            target: ends.target,
            program: diagram.path_program(path).map_err(fail)?,
        })
    }

    fn run(&self, params: &Params, x: Tensor) -> Result<Tensor, TrainError> {
        let inputs = self
            .program
            .inputs()
            .iter()
            .map(|i| match i.kind {
                InputKind::Data => Ok(x.clone()),
                InputKind::Param => {
                    params
                        .get(&i.name)
                        .cloned()
                        .ok_or_else(|| TrainError::MissingParam {
                            name: i.name.clone(),
                            ty: i.ty.clone(),
                        })
                }
            })
            .collect::<Result<Vec<_>, _>>()?;
        let mut out = interp::eval(&self.program, &inputs).map_err(|source| TrainError::Probe {
            name: self.name.clone(),
            source: crate::diagram::DiagramError::Eval {
                place: format!("path \"{}\"", self.name),
                source,
            },
        })?;
        Ok(out.remove(0))
    }
}

/// The probes every diagram gets: each supervised term whose target holds class labels.
pub(crate) fn label_probes(diagram: &Diagram, data: &Dataset) -> Result<Vec<Probe>, TrainError> {
    let mut out = Vec::new();
    for t in diagram.terms() {
        if let Term::Supervised(s) = t {
            let ends = diagram.resolve(&s.path).expect("checked");
            if data.is_labels(&ends.target) {
                out.push(Probe::new(diagram, &s.name, &s.path)?);
            }
        }
    }
    Ok(out)
}

fn argmax(row: &[f64]) -> usize {
    let mut best = 0;
    for (i, &v) in row.iter().enumerate() {
        if v > row[best] {
            best = i;
        }
    }
    best
}

/// Everything [`Evaluation`] holds, on `data`, in row order, batch by batch.
pub(crate) fn evaluate(
    diagram: &Diagram,
    compiled: &Compiled,
    needs: &[Needs],
    probes: &[Probe],
    params: &Params,
    data: &Dataset,
) -> Result<Evaluation, TrainError> {
    let batch = compiled.batch();
    let counts = counts(needs, data);
    let mut terms: BTreeMap<String, f64> = BTreeMap::new();
    let mut hits = vec![(0.0f64, 0usize); probes.len()];
    let rows: Vec<usize> = (0..data.n_rows()).collect();
    for chunk in rows.chunks(batch) {
        let b = make_batch(
            diagram,
            needs,
            data,
            chunk,
            batch,
            compiled.dtype(),
            Norm::Total(&counts),
        );
        let losses = compiled.evaluate(params, &b)?;
        for (name, v) in losses.terms {
            *terms.entry(name).or_default() += v;
        }
        for (probe, acc) in probes.iter().zip(&mut hits) {
            let ty = diagram.object_type(&probe.source).expect("resolved");
            let x = data.gather(&probe.source, ty, chunk, batch);
            let y = probe.run(params, x)?.to_f64_vec();
            let width = y.len() / batch;
            let target = if data.is_labels(&probe.target) {
                None
            } else {
                let ty = diagram.object_type(&probe.target).expect("resolved");
                Some(data.gather(&probe.target, ty, chunk, batch).to_f64_vec())
            };
            for (i, &r) in chunk.iter().enumerate() {
                if !data.has(&probe.source, r) || !data.has(&probe.target, r) {
                    continue;
                }
                let row = &y[i * width..(i + 1) * width];
                acc.1 += 1;
                acc.0 += match &target {
                    None => (data.label(&probe.target, r) == Some(argmax(row))) as u8 as f64,
                    Some(t) => {
                        let t = &t[i * width..(i + 1) * width];
                        0.5 * row.iter().zip(t).map(|(a, b)| (a - b).powi(2)).sum::<f64>()
                    }
                };
            }
        }
    }
    let loss = diagram
        .terms()
        .iter()
        .map(|t| t.weight() * terms[t.name()])
        .sum();
    let defects = diagram
        .terms()
        .iter()
        .filter(|t| matches!(t, Term::Equation(_)))
        .map(|t| (t.name().to_string(), terms[t.name()]))
        .collect();
    let mut accuracy = BTreeMap::new();
    let mut error = BTreeMap::new();
    for (probe, (sum, n)) in probes.iter().zip(hits) {
        let mean = if n > 0 { sum / n as f64 } else { 0.0 };
        if data.is_labels(&probe.target) {
            accuracy.insert(probe.name.clone(), mean);
        } else {
            error.insert(probe.name.clone(), mean);
        }
    }
    Ok(Evaluation {
        loss,
        terms,
        defects,
        accuracy,
        error,
    })
}
