//! The memory budget: how many bytes of live values an evaluation may plan for
//! (`docs/memory.md`).
//!
//! By default it is [`DEFAULT_FRACTION`] of the memory available to the process: on Linux,
//! `MemAvailable` of `/proc/meminfo` (less, when the process's cgroup allows less); elsewhere,
//! [`FALLBACK_BUDGET`]. [`set_memory_budget`] fixes it for the process, and
//! [`EvalOptions::memory_budget`](super::EvalOptions::memory_budget) for one evaluation.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// The share of the available memory a program may plan for by default: the rest is headroom
/// for what the plan does not count (kernel scratch, the allocator's own overhead, other
/// processes).
pub const DEFAULT_FRACTION: f64 = 0.8;

/// The default budget where the available memory cannot be read.
pub const FALLBACK_BUDGET: u64 = 8 << 30;

/// Plans peaking under this many bytes are checked against the default budget as first read;
/// larger ones read the available memory again (a read costs microseconds, which only large
/// programs can afford on every call).
const REREAD_ABOVE: u64 = 64 << 20;

/// The process-wide setting; 0 means the default.
static SETTING: AtomicU64 = AtomicU64::new(0);

/// Fixes the budget for every later evaluation in the process; `None` returns to the default.
///
/// ```
/// use catml_core::interp::{memory_budget, set_memory_budget};
///
/// set_memory_budget(Some(64 << 30));
/// assert_eq!(memory_budget(), 64 << 30);
/// set_memory_budget(None);
/// ```
pub fn set_memory_budget(bytes: Option<u64>) {
    SETTING.store(bytes.unwrap_or(0), Ordering::Relaxed);
}

/// The budget evaluations check against now: the set one, else the default.
pub fn memory_budget() -> u64 {
    match SETTING.load(Ordering::Relaxed) {
        0 => default_memory_budget(),
        set => set,
    }
}

/// [`DEFAULT_FRACTION`] of the memory available now, or [`FALLBACK_BUDGET`] where that cannot be
/// read.
pub fn default_memory_budget() -> u64 {
    match available_memory() {
        Some(bytes) => (bytes as f64 * DEFAULT_FRACTION) as u64,
        None => FALLBACK_BUDGET,
    }
}

/// The budget for a plan of this peak: a per-call choice first, then the process setting, then
/// the default (as first read for small plans, read again for large ones).
pub(crate) fn budget_for(peak: u64, per_call: Option<u64>) -> u64 {
    static FIRST_READ: OnceLock<u64> = OnceLock::new();
    if let Some(b) = per_call {
        return b;
    }
    match SETTING.load(Ordering::Relaxed) {
        0 => {
            let first = *FIRST_READ.get_or_init(default_memory_budget);
            if peak < REREAD_ABOVE && peak <= first {
                first
            } else {
                default_memory_budget()
            }
        }
        set => set,
    }
}

/// Bytes the process can still allocate without swapping, if the system says.
fn available_memory() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let available = mem_available(&meminfo)?;
    Some(match cgroup_headroom() {
        Some(room) => available.min(room),
        None => available,
    })
}

/// `MemAvailable` of a `/proc/meminfo` text, in bytes.
fn mem_available(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let mut words = line.split_whitespace().skip(1);
    let value: u64 = words.next()?.parse().ok()?;
    match words.next() {
        Some("kB") => value.checked_mul(1024),
        None => Some(value),
        Some(_) => None,
    }
}

/// What the process's cgroup (v2) still allows: `memory.max` less `memory.current`.
fn cgroup_headroom() -> Option<u64> {
    let read = |name: &str| std::fs::read_to_string(format!("/sys/fs/cgroup/{name}")).ok();
    let max: u64 = read("memory.max")?.trim().parse().ok()?; // "max": no limit
    let current: u64 = read("memory.current")?.trim().parse().ok()?;
    Some(max.saturating_sub(current))
}

/// A byte count as people read it: `512 B`, `1.5 KiB`, `24.0 GiB` (powers of 1024, one decimal).
///
/// ```
/// use catml_core::interp::Bytes;
///
/// assert_eq!(Bytes(3 << 33).to_string(), "24.0 GiB");
/// assert_eq!(Bytes(100).to_string(), "100 B");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Bytes(pub u64);

const UNITS: [(&str, u32); 5] = [
    ("KiB", 10),
    ("MiB", 20),
    ("GiB", 30),
    ("TiB", 40),
    ("PiB", 50),
];

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Some(&(unit, shift)) = UNITS.iter().rev().find(|(_, s)| self.0 >= 1 << s) else {
            return write!(f, "{} B", self.0);
        };
        write!(f, "{:.1} {unit}", self.0 as f64 / (1u64 << shift) as f64)
    }
}

/// A size that [`parse_bytes`] refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{text}` is not a size: {reason} (write e.g. 512M, 8G or 1.5GiB)")]
pub struct SizeError {
    pub text: String,
    pub reason: &'static str,
}

/// Reads a size: a positive number, optionally with a decimal part, then an optional unit
/// `B`, `K`, `M`, `G`, `T` (each with or without `iB` or `B`; all powers of 1024, any case).
///
/// ```
/// use catml_core::interp::parse_bytes;
///
/// assert_eq!(parse_bytes("512M").unwrap(), 512 << 20);
/// assert_eq!(parse_bytes("1.5GiB").unwrap(), 3 << 29);
/// assert_eq!(parse_bytes("4096").unwrap(), 4096);
/// assert!(parse_bytes("8X").is_err());
/// ```
pub fn parse_bytes(text: &str) -> Result<u64, SizeError> {
    let fail = |reason| SizeError {
        text: text.to_string(),
        reason,
    };
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = (&t[..split], t[split..].trim());
    if number.is_empty() {
        return Err(fail("it does not start with a number"));
    }
    let value: f64 = number
        .parse()
        .map_err(|_| fail("the number is malformed"))?;
    let shift = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        _ => return Err(fail("unknown unit (use B, K, M, G or T)")),
    };
    let bytes = value * (1u64 << shift) as f64;
    if bytes < 1.0 {
        return Err(fail("it must be at least one byte"));
    }
    if bytes >= u64::MAX as f64 {
        return Err(fail("it is too large"));
    }
    Ok(bytes as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_with_units_and_decimals() {
        assert_eq!(parse_bytes("8G").unwrap(), 8 << 30);
        assert_eq!(parse_bytes("8 gb").unwrap(), 8 << 30);
        assert_eq!(parse_bytes("2k").unwrap(), 2048);
        assert_eq!(parse_bytes("0.5KiB").unwrap(), 512);
        assert_eq!(parse_bytes("1T").unwrap(), 1 << 40);
        for bad in ["", "G", "-1G", "1.2.3M", "12Q", "0", "0.1", "99999999999T"] {
            let e = parse_bytes(bad).unwrap_err();
            assert!(e.to_string().contains(&format!("`{bad}`")), "{e}");
        }
    }

    #[test]
    fn byte_counts_print_in_the_largest_unit_with_one_decimal() {
        assert_eq!(Bytes(0).to_string(), "0 B");
        assert_eq!(Bytes(1023).to_string(), "1023 B");
        assert_eq!(Bytes(1536).to_string(), "1.5 KiB");
        assert_eq!(Bytes(18_300 << 20).to_string(), "17.9 GiB");
    }

    #[test]
    fn meminfo_reads_mem_available_in_kilobytes() {
        let text = "MemTotal:       24000000 kB\nMemFree:  1000 kB\nMemAvailable:   22000000 kB\n";
        assert_eq!(mem_available(text), Some(22_000_000 * 1024));
        assert_eq!(mem_available("MemTotal: 5 kB\n"), None);
    }

    #[test]
    fn a_per_call_budget_wins() {
        assert_eq!(budget_for(10, Some(123)), 123);
        assert!(default_memory_budget() > 0);
    }
}
