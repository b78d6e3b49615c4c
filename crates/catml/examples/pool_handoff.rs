//! What handing work to the thread pool costs from outside it: the time of an empty
//! `rayon::scope` (the hand-off an `Executable` call of a large program makes once) and of a
//! two-piece parallel pass over 2^16 floats (the hand-off every parallel kernel makes when called
//! from outside the pool), each called after the caller has worked alone for 0, 50 or 500 µs,
//! during which the pool's idle threads may go to sleep (`docs/memory.md`, "Which thread runs a
//! call").
//!
//! `cargo run --release -p catml --example pool_handoff [-- --calls N]` (default 2000 calls).

use std::time::{Duration, Instant};

use rayon::prelude::*;

/// Keeps this thread busy for `d`, as a caller computing alone would.
fn work_alone(d: Duration) {
    let start = Instant::now();
    while start.elapsed() < d {
        std::hint::spin_loop();
    }
}

fn main() {
    let calls: usize = std::env::args()
        .skip_while(|a| a != "--calls")
        .nth(1)
        .map_or(2000, |n| n.parse().expect("--calls takes a count"));
    let mut data = vec![0f32; 1 << 16];
    println!(
        "pool of {} threads, {calls} calls each",
        rayon::current_num_threads()
    );
    for gap_us in [0, 50, 500] {
        let gap = Duration::from_micros(gap_us);
        let (mut scope, mut pass) = (Duration::ZERO, Duration::ZERO);
        for _ in 0..calls {
            work_alone(gap);
            let start = Instant::now();
            rayon::scope(|_| {});
            scope += start.elapsed();
            work_alone(gap);
            let start = Instant::now();
            data.par_chunks_mut(1 << 15).for_each(|c| c[0] += 1.0);
            pass += start.elapsed();
        }
        let per_call = |d: Duration| d.as_secs_f64() * 1e6 / calls as f64;
        println!(
            "after {gap_us:>3} µs alone: empty scope {:6.1} µs, two-piece pass {:6.1} µs",
            per_call(scope),
            per_call(pass)
        );
    }
}
