//! The optimiser: a method (SGD or Adam/AdamW), a schedule, optional clipping, and its state.

use super::update::check_grads;
use super::{clip_by_global_norm, global_norm, Adam, OptimError, Schedule, Sgd};
use crate::tensor::{Params, Tensor};

/// The name of the step counter in the state store (an i64 scalar).
const STEP: &str = "step";

pub(crate) fn non_negative(field: &'static str, value: f64) -> Result<(), OptimError> {
    if value >= 0.0 && value.is_finite() {
        Ok(())
    } else {
        Err(OptimError::Config {
            field,
            value,
            reason: "must be finite and non-negative",
        })
    }
}

/// The update rule.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Method {
    Sgd(Sgd),
    /// Adam, or AdamW when `decoupled`.
    Adam(Adam),
}

impl From<Sgd> for Method {
    fn from(s: Sgd) -> Method {
        Method::Sgd(s)
    }
}

impl From<Adam> for Method {
    fn from(a: Adam) -> Method {
        Method::Adam(a)
    }
}

impl Method {
    fn base_lr(&self) -> f64 {
        match self {
            Method::Sgd(s) => s.lr,
            Method::Adam(a) => a.lr,
        }
    }
}

/// What one step did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepReport {
    /// The learning rate used (base rate times the schedule's factor).
    pub lr: f64,
    /// The global gradient norm before clipping.
    pub grad_norm: f64,
    pub clipped: bool,
}

/// An optimiser with its state. `step` consumes gradients by name and updates parameters in
/// place; [`state`](Self::state) and [`load_state`](Self::load_state) checkpoint it.
#[derive(Debug, Clone, PartialEq)]
pub struct Optimiser {
    method: Method,
    schedule: Schedule,
    clip: Option<f64>,
    steps: u64,
    buffers: Params,
}

impl Optimiser {
    pub fn new(method: impl Into<Method>) -> Result<Optimiser, OptimError> {
        let method = method.into();
        match &method {
            Method::Sgd(s) => s.validate()?,
            Method::Adam(a) => a.validate()?,
        }
        Ok(Optimiser {
            method,
            schedule: Schedule::Constant,
            clip: None,
            steps: 0,
            buffers: Params::new(),
        })
    }

    pub fn with_schedule(mut self, schedule: Schedule) -> Result<Optimiser, OptimError> {
        schedule.validate()?;
        self.schedule = schedule;
        Ok(self)
    }

    /// Clips gradients to this global norm before each update.
    pub fn with_clip(mut self, max_norm: f64) -> Result<Optimiser, OptimError> {
        if !max_norm.is_finite() || max_norm <= 0.0 {
            return Err(OptimError::Config {
                field: "clip_norm",
                value: max_norm,
                reason: "must be positive and finite",
            });
        }
        self.clip = Some(max_norm);
        Ok(self)
    }

    pub fn method(&self) -> &Method {
        &self.method
    }

    pub fn schedule(&self) -> &Schedule {
        &self.schedule
    }

    /// The global norm gradients are clipped to, if any.
    pub fn clip(&self) -> Option<f64> {
        self.clip
    }

    /// Steps taken so far.
    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// The learning rate the next step will use.
    pub fn lr(&self) -> f64 {
        self.method.base_lr() * self.schedule.factor(self.steps)
    }

    /// One update of every parameter from its gradient (same names, same types).
    pub fn step(&mut self, params: &mut Params, grads: &Params) -> Result<StepReport, OptimError> {
        check_grads(params, grads)?;
        let lr = self.lr();
        let mut clipped_grads;
        let (grads, grad_norm, clipped) = match self.clip {
            Some(c) => {
                clipped_grads = grads.clone();
                let norm = clip_by_global_norm(&mut clipped_grads, c);
                (&clipped_grads, norm, norm > c)
            }
            None => (grads, global_norm(grads), false),
        };
        let t = self.steps + 1;
        let names: Vec<String> = params.names().map(str::to_string).collect();
        // Compute every update before writing any, so an error leaves the parameters untouched.
        let mut buffers = self.buffers.clone();
        let mut updated = Vec::with_capacity(names.len());
        for name in names {
            let p = params.get(&name).expect("listed above");
            let g = grads.get(&name).expect("checked above");
            let new = match &self.method {
                Method::Sgd(s) => s.update(lr, &name, p, g, &mut buffers)?,
                Method::Adam(a) => a.update(lr, t, &name, p, g, &mut buffers)?,
            };
            updated.push((name, new));
        }
        for (name, new) in updated {
            params.insert(name, new);
        }
        self.buffers = buffers;
        self.steps = t;
        Ok(StepReport {
            lr,
            grad_norm,
            clipped,
        })
    }

    /// The state as a store: `step` (i64 scalar) and the buffers (`momentum/<name>` for SGD,
    /// `m/<name>` and `v/<name>` for Adam).
    pub fn state(&self) -> Params {
        let mut s = self.buffers.clone();
        s.insert(
            STEP,
            Tensor::i64(vec![], vec![self.steps as i64]).expect("scalar"),
        );
        s
    }

    /// Restores a state written by [`state`](Self::state).
    pub fn load_state(&mut self, mut state: Params) -> Result<(), OptimError> {
        let step = state.remove(STEP).ok_or_else(|| OptimError::State {
            name: STEP.to_string(),
            expected: "an i64 scalar".to_string(),
            found: "nothing".to_string(),
        })?;
        let steps = match step.as_i64() {
            Some(a) if a.dims().is_empty() && a.data()[0] >= 0 => a.data()[0] as u64,
            _ => {
                return Err(OptimError::State {
                    name: STEP.to_string(),
                    expected: "a non-negative i64 scalar".to_string(),
                    found: step.ty().to_string(),
                })
            }
        };
        let prefixes: &[&str] = match self.method {
            Method::Sgd(_) => &["momentum/"],
            Method::Adam(_) => &["m/", "v/"],
        };
        for (name, t) in state.iter() {
            if !prefixes.iter().any(|p| name.starts_with(p)) || !t.dtype().is_float() {
                return Err(OptimError::State {
                    name: name.to_string(),
                    expected: format!("a float buffer named {}<parameter>", prefixes.join(" or ")),
                    found: t.ty().to_string(),
                });
            }
        }
        self.steps = steps;
        self.buffers = state;
        Ok(())
    }
}
