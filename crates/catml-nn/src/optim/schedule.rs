//! Learning-rate schedules: the rate of step t (0-based: the first update is t = 0) is the base
//! rate times a factor.
//!
//! - constant: 1;
//! - step: γ^⌊t / every⌋;
//! - cosine with linear warm-up: (t + 1) / warmup while t < warmup, then
//!   `floor + (1 − floor) · ½ (1 + cos(π p))` with p = (t − warmup) / (total − warmup), held at
//!   `floor` once p ≥ 1.

use std::f64::consts::PI;

use super::OptimError;

/// A learning-rate schedule.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Schedule {
    Constant,
    Step {
        every: u64,
        gamma: f64,
    },
    Cosine {
        warmup: u64,
        total: u64,
        /// The final rate as a fraction of the base rate.
        floor: f64,
    },
}

impl Schedule {
    /// The factor applied to the base rate at step `t` (0-based).
    pub fn factor(&self, t: u64) -> f64 {
        match *self {
            Schedule::Constant => 1.0,
            Schedule::Step { every, gamma } => {
                gamma.powi(i32::try_from(t / every).unwrap_or(i32::MAX))
            }
            Schedule::Cosine {
                warmup,
                total,
                floor,
            } => {
                if t < warmup {
                    return (t + 1) as f64 / warmup as f64;
                }
                let p = ((t - warmup) as f64 / (total - warmup) as f64).min(1.0);
                floor + (1.0 - floor) * 0.5 * (1.0 + (PI * p).cos())
            }
        }
    }

    pub(crate) fn validate(&self) -> Result<(), OptimError> {
        match *self {
            Schedule::Constant => Ok(()),
            Schedule::Step { every, gamma } => {
                if every == 0 {
                    return Err(OptimError::Config {
                        field: "schedule.every",
                        value: 0.0,
                        reason: "must be positive",
                    });
                }
                super::optimiser::non_negative("schedule.gamma", gamma)
            }
            Schedule::Cosine {
                warmup,
                total,
                floor,
            } => {
                if total <= warmup {
                    return Err(OptimError::Config {
                        field: "schedule.total",
                        value: total as f64,
                        reason: "must exceed the warm-up steps",
                    });
                }
                if !(0.0..=1.0).contains(&floor) {
                    return Err(OptimError::Config {
                        field: "schedule.floor",
                        value: floor,
                        reason: "must be in [0, 1]",
                    });
                }
                Ok(())
            }
        }
    }
}
