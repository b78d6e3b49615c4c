//! `catml verify`: runs the verification bundle with progress bars on stderr, writes the results
//! file atomically, prints a summary, and fails if any check failed.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;

use catml::verify::{self, Config, FamilyReport, Level, Progress};
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

/// One bar per running family.
struct Bars {
    multi: MultiProgress,
    bars: Mutex<HashMap<String, ProgressBar>>,
}

impl Bars {
    fn new() -> Bars {
        Bars {
            multi: MultiProgress::with_draw_target(ProgressDrawTarget::stderr()),
            bars: Mutex::new(HashMap::new()),
        }
    }

    fn bar(&self, family: &str) -> Option<ProgressBar> {
        self.bars.lock().ok()?.get(family).cloned()
    }
}

impl Progress for Bars {
    fn start(&self, family: &str, cases: u64) {
        let bar = self.multi.add(ProgressBar::new(cases));
        bar.set_style(
            ProgressStyle::with_template("{prefix:>20} [{bar:30}] {pos}/{len} {elapsed}")
                .expect("valid template")
                .progress_chars("=> "),
        );
        bar.set_prefix(family.to_string());
        if let Ok(mut m) = self.bars.lock() {
            m.insert(family.to_string(), bar);
        }
    }

    fn advance(&self, family: &str, cases: u64) {
        if let Some(b) = self.bar(family) {
            b.inc(cases);
        }
    }

    fn finish(&self, report: &FamilyReport) {
        if let Some(b) = self.bar(&report.name) {
            let verdict = if report.passed() { "ok" } else { "FAILED" };
            b.finish_with_message(verdict);
        }
    }
}

pub fn run(seed: u64, quick: bool, smoke: bool, output: &Path) -> Result<String, String> {
    let level = match (smoke, quick) {
        (true, _) => Level::Smoke,
        (_, true) => Level::Quick,
        _ => Level::Full,
    };
    let bars = Bars::new();
    let results = verify::run(&Config::new(seed, level), &bars);
    catml::tensor::write_atomic(output, results.to_json().as_bytes()).map_err(|e| e.to_string())?;
    let mut summary = format!(
        "{:<20} {:>9} {:>10} {:>8} {:>9}\n",
        "family", "cases", "checks", "failures", "time (s)"
    );
    for f in &results.families {
        summary.push_str(&format!(
            "{:<20} {:>9} {:>10} {:>8} {:>9.2}\n",
            f.name, f.cases, f.checks, f.failures, f.wall_time_s
        ));
    }
    summary.push_str(&format!(
        "{:<20} {:>9} {:>10} {:>8} {:>9.2}\nresults written to {}\n",
        "total",
        results.cases,
        results.checks,
        results.failures,
        results.wall_time_s,
        output.display()
    ));
    if results.passed {
        Ok(summary)
    } else {
        let failed: Vec<&str> = results
            .families
            .iter()
            .filter(|f| !f.passed())
            .map(|f| f.name.as_str())
            .collect();
        eprint!("{summary}");
        Err(format!(
            "verification failed: {} failures in {} (details in {})",
            results.failures,
            failed.join(", "),
            output.display()
        ))
    }
}
