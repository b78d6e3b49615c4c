//! Ways of running the same work, timed in turns within one process: a batch of calls of each,
//! then the next, round after round, so that this machine's slow and fast phases fall on all
//! of them alike. Shared by `examples/permute_timings.rs` and `examples/check_timings.rs`.

use std::time::Instant;

/// Calls per timed batch.
const BATCH: usize = 3;

/// `--rounds N` from the command line, else `default`.
pub fn rounds_arg(default: usize) -> usize {
    std::env::args()
        .skip_while(|a| a != "--rounds")
        .nth(1)
        .map_or(default, |n| n.parse().expect("--rounds takes a count"))
}

/// Milliseconds per call over the timed batches of one way of running.
pub struct Times {
    pub fastest_ms: f64,
    pub median_ms: f64,
    pub total_ms: f64,
}

/// Runs each of `runs` `BATCH` times per turn, for `rounds` timed turns after one untimed turn
/// (which fills the buffer pools), the order of the runs reversed every other turn.
pub fn take_turns<const N: usize>(rounds: usize, runs: [&mut dyn FnMut(); N]) -> [Times; N] {
    let mut times: [Vec<f64>; N] = std::array::from_fn(|_| Vec::with_capacity(rounds));
    let mut runs = runs;
    for round in 0..=rounds {
        // Every other round in reverse, so that none always runs first (after another's work).
        let mut order: [usize; N] = std::array::from_fn(|k| k);
        if round % 2 == 1 {
            order.reverse();
        }
        for k in order {
            let (run, t) = (&mut runs[k], &mut times[k]);
            let start = Instant::now();
            for _ in 0..BATCH {
                run();
            }
            if round > 0 {
                t.push(start.elapsed().as_secs_f64() * 1e3 / BATCH as f64);
            }
        }
    }
    times.map(|mut t| {
        t.sort_by(f64::total_cmp);
        Times {
            fastest_ms: t[0],
            median_ms: t[t.len() / 2],
            total_ms: t.iter().sum(),
        }
    })
}
