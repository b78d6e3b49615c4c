//! The training loop: seeded shuffling, minibatches, optimiser steps, per-epoch evaluation,
//! and outputs (checkpoint, metrics, loss curve) rewritten atomically after every epoch.

use std::collections::BTreeMap;
use std::path::PathBuf;

use rand::seq::SliceRandom;
use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::batches::{check_bound, make_batch, needs, Needs, Norm};
use super::checkpoint::Checkpoint;
use super::evaluate::{evaluate, label_probes, Probe};
use super::metrics::write_metrics;
use super::plot::{write_plot_scaled, PlotScale};
use super::provenance::Provenance;
use super::{Dataset, EpochMetrics, Evaluation, Progress, TrainError};
use crate::diagram::{Compiled, Diagram, Path};
use crate::optim::Optimiser;
use crate::tensor::Params;

/// Where a run writes its outputs (each optional), after every epoch, atomically.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outputs {
    pub checkpoint: Option<PathBuf>,
    pub metrics: Option<PathBuf>,
    pub plot: Option<PathBuf>,
    /// The plot's loss axis.
    pub plot_scale: PlotScale,
}

/// Trains a diagram's arrows on a dataset.
///
/// Each epoch shuffles the training rows with a ChaCha8 generator seeded from `seed`, cuts them
/// into batches of the diagram's batch size (the last one padded with zero-weight rows), and
/// takes one optimiser step per batch on the gradient of the diagram's loss. Each term averages
/// over the batch's rows that have every object it reads, so partially labelled rows serve the
/// terms they can.
#[derive(Debug, Clone)]
pub struct Trainer {
    diagram: Diagram,
    compiled: Compiled,
    needs: Vec<Needs>,
    train: Dataset,
    held_out: Option<Dataset>,
    probes: Vec<Probe>,
    params: Params,
    optimiser: Optimiser,
    rng: ChaCha8Rng,
    epoch: usize,
    history: Vec<EpochMetrics>,
    provenance: Option<Provenance>,
}

impl Trainer {
    /// A trainer starting from `params` (every `<arrow>.<parameter>` the diagram's arrows have).
    pub fn new(
        diagram: Diagram,
        params: Params,
        optimiser: Optimiser,
        train: Dataset,
        seed: u64,
    ) -> Result<Trainer, TrainError> {
        let compiled = diagram.compile()?;
        let expected = diagram.params();
        for (name, t) in expected.iter() {
            match params.get(name) {
                None => {
                    return Err(TrainError::MissingParam {
                        name: name.to_string(),
                        ty: t.ty(),
                    })
                }
                Some(p) if p.ty() != t.ty() => {
                    return Err(TrainError::ParamType {
                        name: name.to_string(),
                        expected: t.ty(),
                        found: p.ty(),
                    })
                }
                Some(_) => {}
            }
        }
        if train.n_rows() == 0 {
            return Err(TrainError::Empty { which: "training" });
        }
        let needs = needs(&diagram);
        check_bound(&diagram, &needs, &train)?;
        let probes = label_probes(&diagram, &train)?;
        let params = expected
            .names()
            .map(|n| (n.to_string(), params.get(n).expect("checked").clone()))
            .collect();
        Ok(Trainer {
            diagram,
            compiled,
            needs,
            train,
            held_out: None,
            probes,
            params,
            optimiser,
            rng: ChaCha8Rng::seed_from_u64(seed),
            epoch: 0,
            history: Vec::new(),
            provenance: None,
        })
    }

    /// Measures each epoch on held-out rows instead of the training rows.
    pub fn with_held_out(mut self, data: Dataset) -> Result<Trainer, TrainError> {
        if data.n_rows() == 0 {
            return Err(TrainError::Empty { which: "held-out" });
        }
        check_bound(&self.diagram, &self.needs, &data)?;
        self.held_out = Some(data);
        Ok(self)
    }

    /// Also measures a named path on the evaluation data: its accuracy if its target holds
    /// class labels, else its mean ½‖path(x) − y‖².
    pub fn probe(&mut self, name: &str, path: &Path) -> Result<(), TrainError> {
        self.probes.push(Probe::new(&self.diagram, name, path)?);
        Ok(())
    }

    /// Records what the run is made from: checkpoints carry it, and [`resume`](Self::resume)
    /// refuses a checkpoint recorded from anything else.
    pub fn with_provenance(mut self, provenance: Provenance) -> Trainer {
        self.provenance = Some(provenance);
        self
    }

    pub fn diagram(&self) -> &Diagram {
        &self.diagram
    }

    pub fn compiled(&self) -> &Compiled {
        &self.compiled
    }

    /// The current parameters, `<arrow>.<parameter>`.
    pub fn params(&self) -> &Params {
        &self.params
    }

    pub fn optimiser(&self) -> &Optimiser {
        &self.optimiser
    }

    /// Epochs completed.
    pub fn epochs_done(&self) -> usize {
        self.epoch
    }

    pub fn history(&self) -> &[EpochMetrics] {
        &self.history
    }

    pub fn steps_per_epoch(&self) -> usize {
        self.train.n_rows().div_ceil(self.compiled.batch())
    }

    /// Loss, terms, defects and accuracies on `data` with the current parameters.
    pub fn evaluate(&self, data: &Dataset) -> Result<Evaluation, TrainError> {
        check_bound(&self.diagram, &self.needs, data)?;
        evaluate(
            &self.diagram,
            &self.compiled,
            &self.needs,
            &self.probes,
            &self.params,
            data,
        )
    }

    /// One epoch over the training rows, then an evaluation.
    pub fn epoch(&mut self, progress: &Progress) -> Result<&EpochMetrics, TrainError> {
        let batch = self.compiled.batch();
        let mut order: Vec<usize> = (0..self.train.n_rows()).collect();
        order.shuffle(&mut self.rng);
        let trained: Vec<String> = self.compiled.param_names().to_vec();
        let (mut loss_sum, mut term_sums, mut lr) = (0.0, BTreeMap::<String, f64>::new(), 0.0);
        let mut n_batches = 0usize;
        for rows in order.chunks(batch) {
            let b = make_batch(
                &self.diagram,
                &self.needs,
                &self.train,
                rows,
                batch,
                self.compiled.dtype(),
                Norm::PerBatch,
            );
            let (losses, grads) = self.compiled.gradients(&self.params, &b)?;
            let mut subset: Params = trained
                .iter()
                .map(|n| (n.clone(), self.params.get(n).expect("trained").clone()))
                .collect();
            lr = self.optimiser.step(&mut subset, &grads)?.lr;
            for (n, t) in subset.iter() {
                self.params.insert(n, t.clone());
            }
            n_batches += 1;
            loss_sum += losses.total;
            for (n, v) in losses.terms {
                *term_sums.entry(n).or_default() += v;
            }
            progress.step(self.epoch + 1, loss_sum / n_batches as f64);
        }
        self.epoch += 1;
        let (eval_on, eval) = match &self.held_out {
            Some(d) => ("held_out", self.evaluate(d)?),
            None => ("train", self.evaluate(&self.train)?),
        };
        let n = n_batches as f64;
        self.history.push(EpochMetrics {
            epoch: self.epoch,
            step: self.optimiser.steps(),
            lr,
            loss: loss_sum / n,
            terms: term_sums.into_iter().map(|(k, v)| (k, v / n)).collect(),
            eval_on: eval_on.to_string(),
            eval,
        });
        Ok(self.history.last().expect("just pushed"))
    }

    /// Trains until `epochs` epochs are done in all (a resumed trainer continues its count),
    /// writing the outputs after each epoch. The bar is drawn only if `show_progress` and
    /// stderr is a terminal.
    pub fn run(
        &mut self,
        epochs: usize,
        outputs: &Outputs,
        show_progress: bool,
    ) -> Result<(), TrainError> {
        let remaining = epochs.saturating_sub(self.epoch);
        let progress = Progress::new((remaining * self.steps_per_epoch()) as u64, show_progress);
        while self.epoch < epochs {
            self.epoch(&progress)?;
            self.write_outputs(outputs)?;
            progress.epoch_done(self.history.last().expect("an epoch ran"), epochs);
        }
        progress.finish();
        Ok(())
    }

    /// Writes whichever outputs are named.
    pub fn write_outputs(&self, outputs: &Outputs) -> Result<(), TrainError> {
        if let Some(p) = &outputs.checkpoint {
            self.save_checkpoint(p)?;
        }
        if let Some(p) = &outputs.metrics {
            write_metrics(p, &self.history)?;
        }
        if let Some(p) = &outputs.plot {
            write_plot_scaled(p, &self.history, outputs.plot_scale)?;
        }
        Ok(())
    }

    /// Saves parameters, optimiser state, epoch, RNG position and metrics (atomically).
    pub fn save_checkpoint(&self, path: &std::path::Path) -> Result<(), TrainError> {
        Checkpoint {
            params: self.params.clone(),
            optim: self.optimiser.state(),
            epoch: self.epoch,
            rng: self.rng.clone(),
            history: self.history.clone(),
            provenance: self.provenance.clone(),
        }
        .save(path)
    }

    /// Continues from a checkpoint written by [`save_checkpoint`](Self::save_checkpoint) of a
    /// trainer built the same way.
    pub fn resume(&mut self, path: &std::path::Path) -> Result<(), TrainError> {
        let c = Checkpoint::load(path)?;
        let fail = |reason: String| TrainError::Checkpoint {
            path: path.display().to_string(),
            reason,
        };
        if let Some(now) = &self.provenance {
            let Some(then) = &c.provenance else {
                return Err(fail(
                    "records no spec, so resuming could not continue the same run".to_string(),
                ));
            };
            let changes = now.changes_since(then);
            if !changes.is_empty() {
                return Err(fail(format!(
                    "written under a different spec or files, so resuming would not continue \
                     the same run: {}",
                    changes.join("; ")
                )));
            }
        }
        for (name, t) in self.params.iter() {
            match c.params.get(name) {
                None => return Err(fail(format!("no parameter `{name}`"))),
                Some(p) if p.ty() != t.ty() => {
                    return Err(fail(format!(
                        "parameter `{name}` has type {}, expected {}",
                        p.ty(),
                        t.ty()
                    )))
                }
                Some(_) => {}
            }
        }
        if let Some(extra) = c.params.names().find(|n| !self.params.contains(n)) {
            return Err(fail(format!("parameter `{extra}` is not in the diagram")));
        }
        let mut optimiser = self.optimiser.clone();
        optimiser
            .load_state(c.optim)
            .map_err(|e| fail(e.to_string()))?;
        self.optimiser = optimiser;
        self.params = c.params;
        self.epoch = c.epoch;
        self.rng = c.rng;
        self.history = c.history;
        Ok(())
    }
}
