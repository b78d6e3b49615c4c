//! Minibatches: rows of a dataset as a diagram batch, each term weighing the rows that have
//! every object it reads.

use std::collections::BTreeMap;

use super::{Dataset, TrainError};
use crate::diagram::{Batch, Diagram, Term};
use crate::tensor::{DType, Tensor};

/// The objects a term reads: an equation its source, a supervised term its source and target.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Needs {
    pub term: String,
    pub objects: Vec<String>,
}

pub(crate) fn needs(diagram: &Diagram) -> Vec<Needs> {
    diagram
        .terms()
        .iter()
        .map(|t| {
            let objects = match t {
                Term::Equation(e) => vec![diagram.resolve(&e.left).expect("checked").source],
                Term::Supervised(s) => {
                    let ends = diagram.resolve(&s.path).expect("checked");
                    vec![ends.source, ends.target]
                }
            };
            Needs {
                term: t.name().to_string(),
                objects,
            }
        })
        .collect()
}

/// Every object a term reads must have columns.
pub(crate) fn check_bound(
    diagram: &Diagram,
    needs: &[Needs],
    data: &Dataset,
) -> Result<(), TrainError> {
    for (n, t) in needs.iter().zip(diagram.terms()) {
        let kind = match t {
            Term::Equation(_) => "equation",
            Term::Supervised(_) => "supervised",
        };
        if let Some(o) = n.objects.iter().find(|o| !data.binds(o)) {
            return Err(TrainError::NoData {
                term: format!("{kind} \"{}\"", n.term),
                object: o.clone(),
            });
        }
    }
    Ok(())
}

/// How a term's row weights are normalised.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Norm<'a> {
    /// Mean over the batch's rows that have the term's objects (training).
    PerBatch,
    /// Divided by the number of such rows in the whole dataset, so that summing a term over all
    /// batches gives its mean over the dataset (evaluation).
    Total(&'a BTreeMap<String, usize>),
}

/// How many rows of the dataset each term can use.
pub(crate) fn counts(needs: &[Needs], data: &Dataset) -> BTreeMap<String, usize> {
    needs
        .iter()
        .map(|n| {
            let c = (0..data.n_rows())
                .filter(|&r| n.objects.iter().all(|o| data.has(o, r)))
                .count();
            (n.term.clone(), c)
        })
        .collect()
}

/// The batch of `rows` (at most `batch` of them; the rest is zero padding with zero weight).
pub(crate) fn make_batch(
    diagram: &Diagram,
    needs: &[Needs],
    data: &Dataset,
    rows: &[usize],
    batch: usize,
    dtype: DType,
    norm: Norm,
) -> Batch {
    let mut b = Batch::default();
    for n in needs {
        for o in &n.objects {
            if !b.objects.contains_key(o) {
                let ty = diagram.object_type(o).expect("resolved");
                b.objects.insert(o.clone(), data.gather(o, ty, rows, batch));
            }
        }
        let mask: Vec<f64> = (0..batch)
            .map(|i| {
                let has = rows
                    .get(i)
                    .is_some_and(|&r| n.objects.iter().all(|o| data.has(o, r)));
                if has {
                    1.0
                } else {
                    0.0
                }
            })
            .collect();
        let denom = match norm {
            Norm::PerBatch => mask.iter().sum::<f64>(),
            Norm::Total(c) => c[&n.term] as f64,
        };
        let w: Vec<f64> = if denom > 0.0 {
            mask.iter().map(|m| m / denom).collect()
        } else {
            mask
        };
        b.weights.insert(
            n.term.clone(),
            Tensor::from_f64s(dtype, [batch], w).expect("batch weights"),
        );
    }
    b
}
