//! [`Collective`] over MPI (the `mpi` crate). Every operation is started non-blocking and
//! polled, so a rank that stops answering cannot hang the others: after the timeout (60 s
//! unless set) the waiting rank reports through its `on_timeout` function and aborts the whole
//! job with `MPI_Abort`. A rank that dies is noticed sooner by `mpirun`, which ends the others.

use std::cell::Cell;
use std::time::{Duration, Instant};

use mpi::collective::SystemOperation;
use mpi::datatype::PartitionMut;
use mpi::request::{scope, Request, Scope};
use mpi::topology::SimpleCommunicator;
use mpi::traits::{Communicator, CommunicatorCollectives, Root};
use mpi::Count;

use super::{Collective, CollectiveError};

/// How long an operation waits for the other ranks unless told otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// MPI's `MPI_COMM_WORLD` (or any communicator) as a [`Collective`].
pub struct MpiCollective {
    comm: SimpleCommunicator,
    timeout: Cell<Duration>,
    on_timeout: fn(&str),
}

impl std::fmt::Debug for MpiCollective {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MpiCollective")
            .field("rank", &self.comm.rank())
            .field("size", &self.comm.size())
            .field("timeout", &self.timeout.get())
            .finish()
    }
}

impl MpiCollective {
    /// Collectives over `comm`. When an operation times out, `on_timeout` receives a one-line
    /// description (to show it) and the job is then aborted.
    pub fn new(comm: SimpleCommunicator, on_timeout: fn(&str)) -> MpiCollective {
        MpiCollective {
            comm,
            timeout: Cell::new(DEFAULT_TIMEOUT),
            on_timeout,
        }
    }

    /// Polls `req` until it completes; past the timeout, reports and aborts the job.
    fn wait<'a, D: ?Sized, S: Scope<'a>>(&self, mut req: Request<'a, D, S>, what: &str) {
        let start = Instant::now();
        let mut polls = 0u32;
        loop {
            match req.test() {
                Ok(_) => return,
                Err(r) => req = r,
            }
            let waited = start.elapsed();
            if waited > self.timeout.get() {
                (self.on_timeout)(&format!(
                    "rank {} of {}: no answer from the other ranks for {:.0} s during the {what} \
                     (a rank died or hangs); stopping the job",
                    self.comm.rank(),
                    self.comm.size(),
                    waited.as_secs_f64()
                ));
                self.comm.abort(3);
            }
            // Spin briefly (the usual wait is short), then yield the core to the other ranks.
            polls += 1;
            if polls > 2000 {
                std::thread::sleep(Duration::from_micros(50));
            } else {
                std::thread::yield_now();
            }
        }
    }
}

impl Collective for MpiCollective {
    fn rank(&self) -> usize {
        self.comm.rank() as usize
    }

    fn size(&self) -> usize {
        self.comm.size() as usize
    }

    fn set_timeout(&self, timeout: Duration) {
        self.timeout.set(timeout);
    }

    fn broadcast(&self, bytes: &mut Vec<u8>) -> Result<(), CollectiveError> {
        let mut len = [bytes.len() as u64];
        scope(|s| {
            let r = self
                .comm
                .process_at_rank(0)
                .immediate_broadcast_into(s, &mut len[..]);
            self.wait(r, "broadcast of rank 0's state");
        });
        bytes.resize(len[0] as usize, 0);
        scope(|s| {
            let r = self
                .comm
                .process_at_rank(0)
                .immediate_broadcast_into(s, &mut bytes[..]);
            self.wait(r, "broadcast of rank 0's state");
        });
        Ok(())
    }

    fn all_gather(&self, mine: &[u8]) -> Result<Vec<Vec<u8>>, CollectiveError> {
        let n = self.size();
        let len = [mine.len() as u64];
        let mut lens = vec![0u64; n];
        scope(|s| {
            let r = self
                .comm
                .immediate_all_gather_into(s, &len[..], &mut lens[..]);
            self.wait(r, "exchange of gradient sizes");
        });
        let counts = lens
            .iter()
            .map(|&l| Count::try_from(l))
            .collect::<Result<Vec<Count>, _>>()
            .map_err(|_| CollectiveError("a rank's gradients exceed 2 GiB".to_string()))?;
        let displs: Vec<Count> = counts
            .iter()
            .scan(0, |at, &c| {
                let d = *at;
                *at += c;
                Some(d)
            })
            .collect();
        let total = lens.iter().sum::<u64>() as usize;
        let mut all = vec![0u8; total];
        {
            let mut part = PartitionMut::new(&mut all[..], &counts[..], &displs[..]);
            scope(|s| {
                let r = self
                    .comm
                    .immediate_all_gather_varcount_into(s, mine, &mut part);
                self.wait(r, "gradient all-gather");
            });
        }
        Ok(displs
            .iter()
            .zip(&counts)
            .map(|(&d, &c)| all[d as usize..(d + c) as usize].to_vec())
            .collect())
    }

    fn sum_f64(&self, xs: &mut [f64]) -> Result<(), CollectiveError> {
        let send = xs.to_vec();
        scope(|s| {
            let r = self
                .comm
                .immediate_all_reduce_into(s, &send[..], xs, SystemOperation::sum());
            self.wait(r, "gradient all-reduce");
        });
        Ok(())
    }

    fn sum_f32(&self, xs: &mut [f32]) -> Result<(), CollectiveError> {
        let send = xs.to_vec();
        scope(|s| {
            let r = self
                .comm
                .immediate_all_reduce_into(s, &send[..], xs, SystemOperation::sum());
            self.wait(r, "gradient all-reduce");
        });
        Ok(())
    }
}
