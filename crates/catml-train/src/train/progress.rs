//! Training progress on stderr, never on stdout. On a terminal, a bar with the running loss;
//! otherwise (a log file, a CI job) one line per epoch, and a line every
//! [`Progress::LINE_INTERVAL`] during a long epoch. Nothing is shown when not asked for.

use std::io::{IsTerminal, Write};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::EpochMetrics;

#[derive(Debug, Clone)]
enum Mode {
    Bar(ProgressBar),
    /// Plain lines: the run's start, and when the last line was written.
    Lines {
        start: Instant,
        last: Arc<Mutex<Instant>>,
    },
    Hidden,
}

/// Training progress: one tick per optimiser step, one report per epoch.
#[derive(Debug, Clone)]
pub struct Progress {
    mode: Mode,
    steps: u64,
    done: Arc<Mutex<u64>>,
}

impl Progress {
    /// The longest a long epoch goes without a line when stderr is not a terminal.
    pub const LINE_INTERVAL: Duration = Duration::from_secs(10);

    /// Progress over `steps` optimiser steps, shown only if `show`: a bar when stderr is a
    /// terminal, plain lines otherwise.
    pub fn new(steps: u64, show: bool) -> Progress {
        let mode = if !show {
            Mode::Hidden
        } else if std::io::stderr().is_terminal() {
            let bar = ProgressBar::with_draw_target(Some(steps), ProgressDrawTarget::stderr());
            bar.set_style(
                ProgressStyle::with_template(
                    "{prefix} [{elapsed_precise}] {wide_bar} {pos}/{len} steps  {msg}",
                )
                .expect("valid template"),
            );
            Mode::Bar(bar)
        } else {
            let now = Instant::now();
            Mode::Lines {
                start: now,
                last: Arc::new(Mutex::new(now)),
            }
        };
        Progress {
            mode,
            steps,
            done: Arc::new(Mutex::new(0)),
        }
    }

    /// Progress that never shows.
    pub fn hidden() -> Progress {
        Progress::new(0, false)
    }

    pub(crate) fn step(&self, epoch: usize, running_loss: f64) {
        self.step_with(epoch, running_loss, "");
    }

    /// A step of a distributed run: also the rank count and the communication time per step.
    pub(crate) fn step_comm(&self, epoch: usize, running_loss: f64, ranks: usize, comm_ms: f64) {
        self.step_with(
            epoch,
            running_loss,
            &format!("  {ranks} ranks  comm {comm_ms:.2} ms/step"),
        );
    }

    fn step_with(&self, epoch: usize, running_loss: f64, extra: &str) {
        let done = {
            let mut d = self.done.lock().unwrap_or_else(|e| e.into_inner());
            *d += 1;
            *d
        };
        match &self.mode {
            Mode::Bar(bar) => {
                bar.set_prefix(format!("epoch {epoch}"));
                bar.set_message(format!("loss {running_loss:.5}{extra}"));
                bar.inc(1);
            }
            Mode::Lines { start, last } => {
                let mut last = last.lock().unwrap_or_else(|e| e.into_inner());
                if last.elapsed() >= Self::LINE_INTERVAL {
                    *last = Instant::now();
                    line(&format!(
                        "epoch {epoch}: step {done}/{}  running loss {running_loss:.5}{extra}  {:.1} s",
                        self.steps,
                        start.elapsed().as_secs_f64()
                    ));
                }
            }
            Mode::Hidden => {}
        }
    }

    /// Reports a finished epoch (a line when stderr is not a terminal).
    pub(crate) fn epoch_done(&self, m: &EpochMetrics, epochs: usize) {
        if let Mode::Lines { start, last } = &self.mode {
            *last.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
            line(&format!(
                "{}  {:.1} s",
                epoch_summary(m, epochs),
                start.elapsed().as_secs_f64()
            ));
        }
    }

    pub fn finish(&self) {
        if let Mode::Bar(bar) = &self.mode {
            bar.finish_and_clear();
        }
    }
}

/// `epoch 3/25  loss 0.12345  held-out loss 0.23456  accuracy g 0.912`
pub fn epoch_summary(m: &EpochMetrics, epochs: usize) -> String {
    let mut s = format!(
        "epoch {}/{epochs}  loss {:.5}  {} loss {:.5}",
        m.epoch,
        m.loss,
        m.eval_on.replace('_', "-"),
        m.eval.loss
    );
    if !m.eval.accuracy.is_empty() {
        let acc: Vec<String> = m
            .eval
            .accuracy
            .iter()
            .map(|(k, v)| format!("{k} {v:.3}"))
            .collect();
        s.push_str(&format!("  accuracy {}", acc.join(", ")));
    }
    s
}

/// One line on stderr; a stderr that cannot take it is not worth failing a run for.
fn line(text: &str) {
    let _ = writeln!(std::io::stderr().lock(), "{text}");
}
