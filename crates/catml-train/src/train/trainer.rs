//! The training loop: seeded shuffling, minibatches, optimiser steps, per-epoch evaluation,
//! and outputs (checkpoint, metrics, loss curve) rewritten atomically after every epoch.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::rc::Rc;

use rand::seq::SliceRandom;
use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::batches::{check_bound, make_batch, needs, Needs, Norm};
use super::checkpoint::Checkpoint;
use super::distributed::{Collective, CommStats, Distributed};
use super::evaluate::{evaluate, label_probes, Probe};
use super::metrics::write_metrics;
use super::plot::{write_plot_scaled, PlotScale};
use super::provenance::Provenance;
use super::shards::{fold, ShardLayout, Sharded};
use super::{Dataset, EpochMetrics, Evaluation, Progress, TrainError};
use crate::diagram::{Batch, Compiled, Diagram, Losses, Path};
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

impl Outputs {
    /// What a finished run wrote, one line: `wrote checkpoint out/a.safetensors, metrics
    /// out/m.jsonl`, or that the spec names no files.
    pub fn written(&self) -> String {
        let written: Vec<String> = [
            ("checkpoint", &self.checkpoint),
            ("metrics", &self.metrics),
            ("plot", &self.plot),
        ]
        .into_iter()
        .filter_map(|(what, p)| p.as_ref().map(|p| format!("{what} {}", p.display())))
        .collect();
        if written.is_empty() {
            "wrote nothing: the spec's [output] names no files".to_string()
        } else {
            format!("wrote {}", written.join(", "))
        }
    }
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
    /// How each batch is cut into pieces; `None` for whole batches.
    sharded: Option<Sharded>,
    distributed: Option<Distributed>,
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
            sharded: None,
            distributed: None,
        })
    }

    /// Cuts every batch into `shards` pieces whose gradients are added in piece order (see
    /// [`ShardLayout`]); the arrows are rebatched to the pieces' size.
    pub fn with_shards(mut self, shards: usize) -> Result<Trainer, TrainError> {
        let layout = ShardLayout::new(self.compiled.batch(), shards)?;
        self.sharded = Some(Sharded::new(&self.diagram, layout)?);
        Ok(self)
    }

    /// Trains as one of `comm.size()` ranks: each evaluates its pieces of every batch (as many
    /// pieces as ranks unless [`with_shards`](Self::with_shards) chose), the ranks combine
    /// them (in piece order if `deterministic`, else by an all-reduce) and take the same step.
    /// Only rank 0 writes outputs.
    pub fn distributed(
        mut self,
        comm: Rc<dyn Collective>,
        deterministic: bool,
    ) -> Result<Trainer, TrainError> {
        if self.sharded.is_none() {
            let shards = comm.size().min(self.compiled.batch());
            self = self.with_shards(shards)?;
        }
        let shards = self.shards();
        self.distributed = Some(Distributed::new(comm, deterministic, shards));
        Ok(self)
    }

    /// The pieces each batch is cut into (1 unless sharded).
    pub fn shards(&self) -> usize {
        self.sharded.as_ref().map_or(1, |s| s.layout.shards())
    }

    /// Communication so far, when distributed.
    pub fn comm_stats(&self) -> Option<CommStats> {
        self.distributed.as_ref().map(|d| d.stats)
    }

    /// This process's rank (0 unless distributed).
    pub fn rank(&self) -> usize {
        self.distributed.as_ref().map_or(0, |d| d.comm.rank())
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

    /// The batches the next epoch takes, in order, without advancing the shuffling generator:
    /// what a [`TrainStep`](super::TrainStep) is given to follow this trainer step for step
    /// (a sharded trainer adds the same batch's pieces, so it agrees to rounding).
    pub fn next_epoch_batches(&self) -> Vec<Batch> {
        let mut rng = self.rng.clone();
        let mut order: Vec<usize> = (0..self.train.n_rows()).collect();
        order.shuffle(&mut rng);
        order
            .chunks(self.compiled.batch())
            .map(|rows| self.batch(rows))
            .collect()
    }

    /// The training rows `rows` as one whole batch.
    fn batch(&self, rows: &[usize]) -> Batch {
        make_batch(
            &self.diagram,
            &self.needs,
            &self.train,
            rows,
            self.compiled.batch(),
            self.compiled.dtype(),
            Norm::PerBatch,
        )
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
            let (losses, grads) = self.batch_gradients(rows)?;
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
            match &self.distributed {
                None => progress.step(self.epoch + 1, loss_sum / n_batches as f64),
                Some(d) => progress.step_comm(
                    self.epoch + 1,
                    loss_sum / n_batches as f64,
                    d.stats.ranks,
                    d.stats.comm_ms_per_step(),
                ),
            }
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
        self.sync_from_root()?;
        let remaining = epochs.saturating_sub(self.epoch);
        let show = show_progress && self.rank() == 0;
        let progress = Progress::new((remaining * self.steps_per_epoch()) as u64, show);
        while self.epoch < epochs {
            self.epoch(&progress)?;
            self.check_replicas()?;
            if self.rank() == 0 {
                self.write_outputs(outputs)?;
            }
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

    fn checkpoint(&self) -> Checkpoint {
        Checkpoint {
            params: self.params.clone(),
            optim: self.optimiser.state(),
            epoch: self.epoch,
            rng: self.rng.clone(),
            history: self.history.clone(),
            provenance: self.provenance.clone(),
        }
    }

    /// Saves parameters, optimiser state, epoch, RNG position and metrics (atomically).
    pub fn save_checkpoint(&self, path: &std::path::Path) -> Result<(), TrainError> {
        self.checkpoint().save(path)
    }

    /// Continues from a checkpoint written by [`save_checkpoint`](Self::save_checkpoint) of a
    /// trainer built the same way.
    pub fn resume(&mut self, path: &std::path::Path) -> Result<(), TrainError> {
        let c = Checkpoint::load(path)?;
        self.restore(c, &path.display().to_string())
    }

    /// The loss and gradients of one batch: whole, or piece by piece (on this rank's pieces,
    /// combined with the other ranks').
    fn batch_gradients(&mut self, rows: &[usize]) -> Result<(Losses, Params), TrainError> {
        let Some(sharded) = &self.sharded else {
            let b = self.batch(rows);
            return Ok(self.compiled.gradients(&self.params, &b)?);
        };
        let (rank, ranks) = match &self.distributed {
            Some(d) => (d.comm.rank(), d.comm.size()),
            None => (0, 1),
        };
        let start = std::time::Instant::now();
        let pieces = sharded.pieces(
            &self.compiled,
            &self.diagram,
            &self.needs,
            &self.train,
            &self.params,
            rows,
            sharded.layout.owned(rank, ranks),
        )?;
        let Some(d) = &mut self.distributed else {
            return Ok(fold(pieces).expect("the first piece of a batch has rows"));
        };
        d.stats.compute_seconds += start.elapsed().as_secs_f64();
        // In the order a `Params` holds the gradients: by name.
        let mut types: Vec<_> = self
            .compiled
            .param_names()
            .iter()
            .map(|n| (n.clone(), self.params.get(n).expect("trained").ty()))
            .collect();
        types.sort_by(|a, b| a.0.cmp(&b.0));
        d.combine(pieces, self.compiled.term_names(), &types)
    }

    /// Every rank takes rank 0's state: parameters, optimiser state, epoch, shuffling position
    /// and metrics.
    fn sync_from_root(&mut self) -> Result<(), TrainError> {
        let Some(d) = &self.distributed else {
            return Ok(());
        };
        let rank = d.comm.rank();
        let bytes = if rank == 0 {
            self.checkpoint()
                .to_bytes()
                .map_err(|reason| TrainError::Distributed {
                    rank,
                    ranks: d.comm.size(),
                    reason,
                })?
        } else {
            Vec::new()
        };
        let bytes = d.broadcast_state(bytes)?;
        if rank != 0 {
            let origin = "the state broadcast by rank 0";
            self.restore(Checkpoint::from_bytes(&bytes, origin)?, origin)?;
        }
        Ok(())
    }

    /// After an epoch the replicas compare parameters and optimiser state. In deterministic
    /// mode a difference is an error; otherwise every rank takes rank 0's state.
    fn check_replicas(&mut self) -> Result<(), TrainError> {
        let Some(d) = &self.distributed else {
            return Ok(());
        };
        let fail = |reason: String| TrainError::Distributed {
            rank: d.comm.rank(),
            ranks: d.comm.size(),
            reason,
        };
        let mut state = self
            .params
            .to_safetensors()
            .map_err(|e| fail(e.to_string()))?;
        state.extend(
            self.optimiser
                .state()
                .to_safetensors()
                .map_err(|e| fail(e.to_string()))?,
        );
        let Some(other) = d.replicas_agree(&state)? else {
            return Ok(());
        };
        if d.deterministic {
            return Err(fail(format!(
                "after epoch {} rank {other}'s parameters differ from rank 0's",
                self.epoch
            )));
        }
        self.sync_from_root()?;
        if let Some(d) = &mut self.distributed {
            d.stats.resyncs += 1;
        }
        Ok(())
    }

    /// Takes the state of a checkpoint read from `origin`.
    fn restore(&mut self, c: Checkpoint, origin: &str) -> Result<(), TrainError> {
        let fail = |reason: String| TrainError::Checkpoint {
            path: origin.to_string(),
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
