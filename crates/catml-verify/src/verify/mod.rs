//! The verification bundle: the reference evidence for CatML's semantics (an earlier, smaller
//! float64 run; VERIFICATION.md), regenerated at ten (quick) to fifty (full) times its counts or
//! exhaustively, from one seed.
//!
//! Each family is one file and reports cases, checks, failures, its largest errors, figures
//! (tolerances, bounds, counts) and its wall time:
//!
//! | family | what it checks |
//! | --- | --- |
//! | `rational_oracle` | random scalar DAGs: exact values and VJP gradients over rationals equal forward-mode dual numbers; f64 within a running error bound |
//! | `gathers` | every gather map with lengths 1..=5: the VJP program is the transpose, exactly |
//! | `policy_descent` | every surjection of finite sets and Boolean policy: kernel-pair criterion iff preimage; the residual-dimension counterexample |
//! | `smooth_graphs` | generated graphs: central differences against JVP, adjoint test of JVP against VJP, f64 and f32 |
//! | `serialisation` | JSON and listing round trips of generated programs and their derivatives |
//! | `rewrites` | every rewrite pass preserves eval, JVP and VJP within stated bounds |
//! | `tied_block` | the tied residual block (docs/examples.md) against its closed forms, with directional checks |
//! | `edge_checks` | the floating-point rewrite counterexample, validator and runtime rejections, domain violations |
//! | `backend_simulation` | per-primitive f32 local error budgets; the error recurrence bound on sequential chains (docs/backend.md) |
//! | `lowerings` | composite kernels against their lowerings into the core fragment |
//! | `vmap` | generated programs batched by `vmap` with random axes, against a loop of evaluations, bitwise |
//! | `checkpoint` | generated programs' VJP under every checkpoint policy against the plain VJP, bitwise; only kept values read |
//! | `scan` | random scans (generated bodies, random counts, shapes, length, `reverse`, `stack_carries`) against their unrolling: values bitwise, JVP and VJP within 1e-12 relative |
//!
//! [`run`] returns [`Results`]; nothing here prints. Progress goes to a [`Progress`] observer.
//! Every family draws from its own `ChaCha8Rng` seeded from the run's seed and its name, so one
//! seed gives one results file apart from the wall times.

mod backend;
mod checkpoint;
mod edge;
mod executables;
mod gathers;
pub mod generate;
mod lowering;
mod numeric;
mod policy;
mod rational;
mod rewrites;
mod roundtrip;
mod scan;
mod smooth;
mod tied;
pub mod vmap;

use std::collections::BTreeMap;
use std::time::Instant;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

pub use numeric::{dot2, Derivatives};
pub use policy::{descends, kernel_pair_criterion, Surjection};
pub use smooth::{run_smooth, SmoothOptions};

/// How much of the bundle to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    /// A few cases per family (tests).
    Smoke,
    /// Ten times the reference counts (exhaustive families in full); for CI.
    Quick,
    /// Fifty times the reference counts for the sampled families, or exhaustive.
    Full,
}

impl Level {
    /// `smoke`, `quick` or `full` count.
    pub(crate) fn pick(self, smoke: usize, quick: usize, full: usize) -> usize {
        match self {
            Level::Smoke => smoke,
            Level::Quick => quick,
            Level::Full => full,
        }
    }
}

/// A run of the bundle.
#[derive(Debug, Clone)]
pub struct Config {
    pub seed: u64,
    pub level: Level,
    /// Families run concurrently on this many threads (results do not depend on it).
    pub threads: usize,
    /// Run only these families (all if `None`).
    pub only: Option<Vec<String>>,
}

impl Config {
    pub fn new(seed: u64, level: Level) -> Config {
        Config {
            seed,
            level,
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            only: None,
        }
    }
}

/// The seed of the reference run (docs/examples.md, seeds).
pub const DEFAULT_SEED: u64 = 20261021;

/// One family's outcome.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct FamilyReport {
    pub name: String,
    pub description: String,
    /// The reference figure this family stands beside (VERIFICATION.md).
    pub reference: String,
    pub cases: u64,
    pub checks: u64,
    pub failures: u64,
    /// Largest observed errors, by what they measure (`null` if NaN).
    pub max_errors: BTreeMap<String, f64>,
    /// Tolerances, bounds, counts and other stated figures.
    pub figures: BTreeMap<String, serde_json::Value>,
    /// The first failures, described.
    pub failure_examples: Vec<String>,
    pub wall_time_s: f64,
}

impl FamilyReport {
    pub fn passed(&self) -> bool {
        self.failures == 0
    }
}

/// The whole run.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Results {
    pub tool: String,
    pub version: String,
    pub rustc: String,
    pub seed: u64,
    pub level: Level,
    pub machine: Machine,
    pub passed: bool,
    pub cases: u64,
    pub checks: u64,
    pub failures: u64,
    pub families: Vec<FamilyReport>,
    pub wall_time_s: f64,
}

/// Where the run happened.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Machine {
    pub os: String,
    pub arch: String,
    pub cpus: usize,
}

/// The rustc that built this library.
pub const RUSTC_VERSION: &str = env!("CATML_RUSTC_VERSION");

/// Observes a run (the CLI draws progress bars; tests pass [`NoProgress`]).
pub trait Progress: Sync {
    fn start(&self, _family: &str, _cases: u64) {}
    fn advance(&self, _family: &str, _cases: u64) {}
    fn finish(&self, _report: &FamilyReport) {}
}

/// Ignores progress.
pub struct NoProgress;

impl Progress for NoProgress {}

/// What a family gets: its seed, the level and the observer.
pub(crate) struct Ctx<'a> {
    pub name: &'static str,
    pub seed: u64,
    pub level: Level,
    pub progress: &'a dyn Progress,
}

impl Ctx<'_> {
    pub fn rng(&self) -> ChaCha8Rng {
        ChaCha8Rng::seed_from_u64(self.seed)
    }

    /// Starts the report, announcing `planned` cases.
    pub fn tally(&self, description: &str, reference: &str, planned: usize) -> Tally<'_> {
        self.progress.start(self.name, planned as u64);
        Tally {
            ctx: self,
            start: Instant::now(),
            report: FamilyReport {
                name: self.name.to_string(),
                description: description.to_string(),
                reference: reference.to_string(),
                cases: 0,
                checks: 0,
                failures: 0,
                max_errors: BTreeMap::new(),
                figures: BTreeMap::new(),
                failure_examples: Vec::new(),
                wall_time_s: 0.0,
            },
        }
    }
}

/// How many failures a report describes.
const MAX_EXAMPLES: usize = 20;

/// Counts cases and checks, keeps maxima, and times the family.
pub(crate) struct Tally<'a> {
    ctx: &'a Ctx<'a>,
    start: Instant,
    report: FamilyReport,
}

impl Tally<'_> {
    /// One more case done.
    pub fn case(&mut self) {
        self.report.cases += 1;
        self.ctx.progress.advance(self.ctx.name, 1);
    }

    /// One check; describes it if it failed.
    pub fn check(&mut self, ok: bool, what: impl FnOnce() -> String) -> bool {
        self.report.checks += 1;
        if !ok {
            self.fail(what());
        }
        ok
    }

    /// A check that `error <= tol` (NaN fails), recording `error` under `key`.
    pub fn check_le(
        &mut self,
        key: &str,
        error: f64,
        tol: f64,
        what: impl FnOnce() -> String,
    ) -> bool {
        self.max_error(key, error);
        let ok = error <= tol;
        self.check(ok, || format!("{}: {key} = {error:e} > {tol:e}", what()))
    }

    /// Records a failure that is not a comparison (an unexpected error).
    pub fn fail(&mut self, what: String) {
        self.report.failures += 1;
        if self.report.failure_examples.len() < MAX_EXAMPLES {
            self.report.failure_examples.push(what);
        }
    }

    /// Keeps the largest `value` under `key` (NaN sticks).
    pub fn max_error(&mut self, key: &str, value: f64) {
        let e = self.report.max_errors.entry(key.to_string()).or_insert(0.0);
        if !e.is_nan() && (value.is_nan() || value > *e) {
            *e = value;
        }
    }

    /// States a figure.
    pub fn figure(&mut self, key: &str, value: impl Serialize) {
        self.report.figures.insert(
            key.to_string(),
            serde_json::to_value(value).expect("serialisable"),
        );
    }

    /// Adds to a counted figure.
    pub fn count(&mut self, key: &str, n: u64) {
        let v = self
            .report
            .figures
            .entry(key.to_string())
            .or_insert(serde_json::Value::from(0u64));
        *v = serde_json::Value::from(v.as_u64().unwrap_or(0) + n);
    }

    pub fn finish(mut self) -> FamilyReport {
        self.report.wall_time_s = self.start.elapsed().as_secs_f64();
        self.ctx.progress.finish(&self.report);
        self.report
    }
}

type FamilyFn = fn(&Ctx) -> FamilyReport;

/// The families, in report order.
const FAMILIES: &[(&str, FamilyFn)] = &[
    ("rational_oracle", rational::run),
    ("gathers", gathers::run),
    ("policy_descent", policy::run),
    ("smooth_graphs", smooth::run),
    ("serialisation", roundtrip::run),
    ("rewrites", rewrites::run),
    ("tied_block", tied::run),
    ("edge_checks", edge::run),
    ("backend_simulation", backend::run),
    ("lowerings", lowering::run),
    ("vmap", vmap::run),
    ("checkpoint", checkpoint::run),
    ("scan", scan::run),
    ("executables", executables::run),
];

/// The families' names, in report order.
pub fn family_names() -> Vec<&'static str> {
    FAMILIES.iter().map(|f| f.0).collect()
}

/// A family's seed: the run's seed mixed with its name (FNV-1a), so families draw independently.
fn family_seed(seed: u64, name: &str) -> u64 {
    let mut h: u64 = 0xcbf29ce484222325 ^ seed;
    for b in name.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    h
}

/// Runs the bundle.
pub fn run(config: &Config, progress: &dyn Progress) -> Results {
    let start = Instant::now();
    let selected: Vec<(&'static str, FamilyFn)> = FAMILIES
        .iter()
        .copied()
        .filter(|(n, _)| {
            config
                .only
                .as_ref()
                .is_none_or(|o| o.iter().any(|x| x == n))
        })
        .collect();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let slots: Vec<std::sync::Mutex<Option<FamilyReport>>> = selected
        .iter()
        .map(|_| std::sync::Mutex::new(None))
        .collect();
    std::thread::scope(|s| {
        for _ in 0..config.threads.clamp(1, selected.len().max(1)) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let Some(&(name, f)) = selected.get(i) else {
                    break;
                };
                let ctx = Ctx {
                    name,
                    seed: family_seed(config.seed, name),
                    level: config.level,
                    progress,
                };
                let report = f(&ctx);
                *slots[i].lock().expect("no panics while holding") = Some(report);
            });
        }
    });
    let families: Vec<FamilyReport> = slots
        .into_iter()
        .map(|m| {
            m.into_inner()
                .expect("no poison")
                .expect("every family ran")
        })
        .collect();
    let sum = |f: fn(&FamilyReport) -> u64| families.iter().map(f).sum::<u64>();
    Results {
        tool: "catml".to_string(),
        version: env!("CARGO_PKG_VERSION").to_string(),
        rustc: RUSTC_VERSION.to_string(),
        seed: config.seed,
        level: config.level,
        machine: Machine {
            os: std::env::consts::OS.to_string(),
            arch: std::env::consts::ARCH.to_string(),
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
        },
        passed: families.iter().all(FamilyReport::passed),
        cases: sum(|f| f.cases),
        checks: sum(|f| f.checks),
        failures: sum(|f| f.failures),
        families,
        wall_time_s: start.elapsed().as_secs_f64(),
    }
}

impl Results {
    /// The results as pretty JSON.
    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).expect("serialisable");
        s.push('\n');
        s
    }
}
