//! `mpirun -n N catml train SPEC.toml`: each rank trains its pieces of every batch and the
//! ranks combine gradients over MPI. Rank 0 prints the metrics and a summary of the
//! communication; errors every rank shares (a bad spec) are printed once, by rank 0, and any
//! other error or a timeout stops the whole job with one line naming the rank.

use std::path::Path;
use std::rc::Rc;

use catml::train::distributed::mpi::MpiCollective;
use catml::train::distributed::{Collective, CommStats};
use catml::train::{run_spec_on, RunOptions, TrainError};
use mpi::traits::Communicator;

/// Whether this process was started by `mpirun` (Open MPI, or a PMI launcher such as MPICH's).
pub fn launched_by_mpirun() -> bool {
    ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"]
        .iter()
        .any(|v| std::env::var_os(v).is_some())
}

fn report_timeout(message: &str) {
    eprintln!("catml: {message}");
}

/// When mpirun ends this rank (another rank died, or the job was interrupted), say so in one
/// line and exit at once.
fn announce_termination(rank: i32, size: i32) {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGTERM, SIGINT]) else {
        return;
    };
    std::thread::spawn(move || {
        if signals.forever().next().is_some() {
            eprintln!(
                "catml: rank {rank} of {size}: stopped by mpirun (another rank failed or the job \
                 was interrupted); --resume continues from the last checkpoint"
            );
            signal_hook::low_level::exit(1);
        }
    });
}

fn summary(s: &CommStats) -> String {
    format!(
        "catml train: {} ranks, {} shards ({}), {} steps: {:.2} ms compute and {:.2} ms \
         communication per step, {} bytes sent per step by rank 0",
        s.ranks,
        s.shards,
        if s.deterministic {
            "deterministic"
        } else {
            "all-reduce"
        },
        s.steps,
        s.compute_ms_per_step(),
        s.comm_ms_per_step(),
        s.bytes_sent / s.steps.max(1)
    )
}

pub fn run(spec: &Path, options: RunOptions) -> Result<String, String> {
    let Some(universe) = mpi::initialize() else {
        return Err("MPI was already initialised".to_string());
    };
    let world = universe.world();
    let (rank, size) = (world.rank(), world.size());
    announce_termination(rank, size);
    let comm: Rc<dyn Collective> = Rc::new(MpiCollective::new(world, report_timeout));
    match run_spec_on(spec, options, Some(comm.clone())) {
        Ok((last, outputs, stats)) if rank == 0 => {
            if options.progress {
                if let Some(s) = stats {
                    eprintln!("{}", summary(&s));
                }
                crate::train::report_outputs(&outputs);
            }
            Ok(crate::train::metrics_text(&last))
        }
        Ok(_) => Ok(String::new()),
        // Read before any rank spoke to another: every rank has the same error.
        Err(e @ TrainError::Spec { .. }) if rank == 0 => Err(e.to_string()),
        Err(TrainError::Spec { .. }) => {
            drop(comm);
            drop(universe);
            std::process::exit(1)
        }
        Err(e) if size == 1 => Err(e.to_string()),
        Err(e) => {
            let line = e.to_string().replace('\n', " ");
            match e {
                TrainError::Distributed { .. } => eprintln!("catml: {line}"),
                _ => eprintln!("catml: rank {rank} of {size}: {line}"),
            }
            mpi::topology::SimpleCommunicator::world().abort(1)
        }
    }
}
