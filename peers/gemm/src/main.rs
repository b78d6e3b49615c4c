//! Times the GEMM candidates on the matrix products of the peer workloads' value-and-grad
//! programs, in f32 and f64, and on a 2048-square product for the machine's peak.
//!
//! Candidates: the `gemm` crate (what CatML uses), `faer`, `matrixmultiply`, and with the
//! `openblas` feature Debian's OpenBLAS through CBLAS. Every candidate reads transposed
//! operands through strides, as CatML does, and runs on all cores.
//!
//! `cargo run --release [--features openblas] [-- --quick] [--only WORKLOAD] [--threads N]
//! [--cpu] [--json FILE]`; `--cpu` times by the process's CPU seconds instead of wall time.
//! (from `peers/gemm`; `peers/run.sh gemm` does this).

mod candidates;
mod products;

use std::time::Instant;

use candidates::{Candidate, Element};
use products::{Product, Workload};

/// Which clock times a product.
#[derive(Clone, Copy)]
enum Clock {
    Wall,
    /// CPU seconds of the whole process, all threads: on a machine busy with other work this
    /// counts the work done rather than the waiting, so single-thread runs compare fairly.
    ProcessCpu,
}

impl Clock {
    fn now(self) -> f64 {
        match self {
            Clock::Wall => {
                static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
                START.get_or_init(Instant::now).elapsed().as_secs_f64()
            }
            Clock::ProcessCpu => {
                let mut t = libc::timespec {
                    tv_sec: 0,
                    tv_nsec: 0,
                };
                // SAFETY: `t` is a valid timespec to write to.
                unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut t) };
                t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
            }
        }
    }
}

/// Median seconds per call of `f` over `samples` samples of about `budget` seconds in all.
fn measure(mut f: impl FnMut(), clock: Clock, budget: f64, samples: usize) -> f64 {
    for _ in 0..3 {
        f();
    }
    let t0 = clock.now();
    f();
    let once = (clock.now() - t0).max(1e-7);
    let inner = ((budget / samples as f64 / once).round() as usize).max(1);
    let mut times: Vec<f64> = (0..samples)
        .map(|_| {
            let t0 = clock.now();
            for _ in 0..inner {
                f();
            }
            (clock.now() - t0) / inner as f64
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[samples / 2]
}

/// Seconds per product of each candidate, in the order of `Candidate::all()`.
fn time_product<T: Element>(p: &Product, clock: Clock, budget: f64, samples: usize) -> Vec<f64> {
    let a: Vec<T> = (0..p.m * p.k).map(|i| T::from_index(i, 7)).collect();
    let b: Vec<T> = (0..p.k * p.n).map(|i| T::from_index(i, 11)).collect();
    let mut reference: Option<Vec<T>> = None;
    Candidate::all()
        .iter()
        .map(|c| {
            let mut out = vec![T::zero(); p.m * p.n];
            c.run(p, &a, &b, &mut out);
            // Every candidate must compute the same product before it is timed.
            match &reference {
                None => reference = Some(out.clone()),
                Some(r) => T::assert_close(r, &out, p.k, c.name()),
            }
            measure(|| c.run(p, &a, &b, &mut out), clock, budget, samples)
        })
        .collect()
}

struct Row {
    workload: &'static str,
    dtype: &'static str,
    product: Product,
    seconds: Vec<f64>,
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let option = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1).cloned())
    };
    let only = option("--only");
    if let Some(threads) = option("--threads") {
        let n: usize = threads.parse().expect("--threads takes a count");
        candidates::set_threads(n);
    }
    let clock = if args.iter().any(|a| a == "--cpu") {
        Clock::ProcessCpu
    } else {
        Clock::Wall
    };
    let (budget, samples) = if quick { (0.1, 5) } else { (0.5, 11) };
    let names: Vec<&str> = Candidate::all().iter().map(|c| c.name()).collect();
    let mut rows = Vec::new();
    let json = option("--json");
    for w in Workload::all() {
        if only.as_ref().is_some_and(|o| o != w.name) {
            continue;
        }
        for dtype in ["f32", "f64"] {
            for p in &w.products {
                let seconds = match dtype {
                    "f32" => time_product::<f32>(p, clock, budget, samples),
                    _ => time_product::<f64>(p, clock, budget, samples),
                };
                rows.push(Row {
                    workload: w.name,
                    dtype,
                    product: p.clone(),
                    seconds,
                });
            }
        }
    }
    print_tables(&rows, &names);
    if let Some(path) = json {
        let records: Vec<String> = rows
            .iter()
            .flat_map(|r| {
                names.iter().zip(&r.seconds).map(move |(c, s)| {
                    format!(
                        "{{\"workload\":\"{}\",\"dtype\":\"{}\",\"product\":\"{}\",\"forward\":{},\"m\":{},\"k\":{},\"n\":{},\"candidate\":\"{}\",\"seconds\":{:e}}}",
                        r.workload, r.dtype, r.product.label, r.product.forward, r.product.m, r.product.k,
                        r.product.n, c, s
                    )
                })
            })
            .collect();
        std::fs::write(&path, records.join("\n") + "\n").expect("writing the JSON file");
    }
}

fn gflops(p: &Product, seconds: f64) -> f64 {
    2.0 * (p.m * p.k * p.n) as f64 / seconds / 1e9
}

fn print_tables(rows: &[Row], names: &[&str]) {
    println!("GFLOP/s per product (median), and each workload's sum of times:\n");
    print!("| workload | dtype | product | m x k x n |");
    for n in names {
        print!(" {n} |");
    }
    println!(" best |");
    print!("|---|---|---|---|");
    for _ in names {
        print!("--:|");
    }
    println!("---|");
    let mut groups: Vec<(&str, &str)> = rows.iter().map(|r| (r.workload, r.dtype)).collect();
    groups.dedup();
    for (w, d) in groups {
        let group: Vec<&Row> = rows
            .iter()
            .filter(|r| r.workload == w && r.dtype == d)
            .collect();
        let mut sums = vec![0.0; names.len()];
        let mut floor = 0.0;
        for r in &group {
            let p = &r.product;
            print!("| {w} | {d} | {} | {}x{}x{} |", p.label, p.m, p.k, p.n);
            for (k, s) in r.seconds.iter().enumerate() {
                print!(" {:.1} |", gflops(p, *s));
                sums[k] += s;
            }
            let (best, s) = best(&r.seconds, names);
            floor += s;
            println!(" {best} |");
        }
        if group.len() > 1 {
            print!("| {w} | {d} | **sum of times** | |");
            for s in &sums {
                print!(" {:.3} ms |", s * 1e3);
            }
            println!(" floor {:.3} ms |", floor * 1e3);
        }
    }
}

/// The fastest candidate's name and time.
fn best<'a>(seconds: &[f64], names: &[&'a str]) -> (&'a str, f64) {
    let (k, s) = seconds
        .iter()
        .enumerate()
        .min_by(|a, b| a.1.total_cmp(b.1))
        .expect("at least one candidate");
    (names[k], *s)
}
