//! A progress bar on stderr with the running loss; hidden when stderr is not a terminal or when
//! asked. Nothing is ever drawn on stdout.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Training progress: one tick per optimiser step.
#[derive(Debug, Clone)]
pub struct Progress {
    bar: ProgressBar,
}

impl Progress {
    /// A bar of `steps` ticks, drawn only if `show` and stderr is a terminal.
    pub fn new(steps: u64, show: bool) -> Progress {
        let target = if show && std::io::stderr().is_terminal() {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        };
        let bar = ProgressBar::with_draw_target(Some(steps), target);
        bar.set_style(
            ProgressStyle::with_template(
                "{prefix} [{elapsed_precise}] {wide_bar} {pos}/{len} steps  {msg}",
            )
            .expect("valid template"),
        );
        Progress { bar }
    }

    /// A bar that never draws.
    pub fn hidden() -> Progress {
        Progress::new(0, false)
    }

    pub(crate) fn step(&self, epoch: usize, running_loss: f64) {
        self.bar.set_prefix(format!("epoch {epoch}"));
        self.bar.set_message(format!("loss {running_loss:.5}"));
        self.bar.inc(1);
    }

    /// A step of a distributed run: also the rank count and the communication time per step.
    pub(crate) fn step_comm(&self, epoch: usize, running_loss: f64, ranks: usize, comm_ms: f64) {
        self.bar.set_prefix(format!("epoch {epoch}"));
        self.bar.set_message(format!(
            "loss {running_loss:.5}  {ranks} ranks  comm {comm_ms:.2} ms/step"
        ));
        self.bar.inc(1);
    }

    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}
