//! Trace once, transform once, then only evaluate: the cache behind the function transforms.
//!
//! A transformed function keeps, per list of data input types, the traced program and its
//! transform. A call with types seen before only evaluates; new types trace and transform again.

use std::collections::HashMap;
use std::sync::OnceLock;

use super::error::{CallSite, TraceError};
use super::outputs::Outputs;
use super::tracing::{trace_at, Traced};
use super::value::Value;
use crate::ad::CheckpointPolicy;
use crate::interp::{EvalError, EvalOptions, EvalReport, Executable};
use crate::ir::Program;
use crate::tensor::{Tensor, TensorType};

/// One traced program and what a transform made of it.
#[derive(Debug)]
pub(crate) struct Stage<C> {
    pub(crate) traced: Traced,
    pub(crate) compiled: C,
    /// The program the stage runs, compiled on its first call.
    executable: OnceLock<Executable>,
}

impl<C> Stage<C> {
    /// Evaluates `program` (the one this stage always runs), compiled once.
    pub(crate) fn eval(
        &self,
        program: &Program,
        args: &[Tensor],
    ) -> Result<(Vec<Tensor>, EvalReport), EvalError> {
        let exe = match self.executable.get() {
            Some(exe) => exe,
            None => {
                let made = Executable::new(program.clone())?;
                self.executable.get_or_init(|| made)
            }
        };
        exe.run_with_report(args, EvalOptions::default())
    }
}

/// What a transform is compiled with besides the traced program.
#[derive(Debug, Clone, Default)]
pub(crate) struct Options {
    /// Differentiate only these data inputs (by position); `None`: all of them.
    pub(crate) argnums: Option<Vec<usize>>,
    /// Recompute in the reverse pass what this policy does not keep (`ad::vjp_with`).
    pub(crate) checkpoint: Option<CheckpointPolicy>,
}

/// A model function and its stages by input types.
pub(crate) struct Staged<F, C> {
    f: F,
    stages: HashMap<Vec<TensorType>, Stage<C>>,
    traces: usize,
    pub(crate) options: Options,
}

impl<F, C> Staged<F, C> {
    pub(crate) fn new(f: F) -> Staged<F, C> {
        Staged {
            f,
            stages: HashMap::new(),
            traces: 0,
            options: Options::default(),
        }
    }

    /// Changes the options: stages made under the old ones are dropped.
    pub(crate) fn set_options(&mut self, change: impl FnOnce(&mut Options)) {
        change(&mut self.options);
        self.stages.clear();
    }

    pub(crate) fn trace_count(&self) -> usize {
        self.traces
    }

    /// The stage for these input types, tracing and transforming on first sight.
    pub(crate) fn stage<O: Outputs>(
        &mut self,
        location: CallSite,
        types: &[TensorType],
        compile: impl FnOnce(CallSite, &Traced, &Options) -> Result<C, TraceError>,
    ) -> Result<&Stage<C>, TraceError>
    where
        F: FnMut(&[Value]) -> O,
    {
        if !self.stages.contains_key(types) {
            let names: Vec<String> = (0..types.len()).map(|i| format!("v{i}")).collect();
            let named: Vec<(&str, TensorType)> = names
                .iter()
                .map(String::as_str)
                .zip(types.iter().cloned())
                .collect();
            self.traces += 1;
            if self.traces > 1 {
                log::debug!(
                    target: "catml::trace",
                    "{location}: tracing again (trace {}) for new input types {}",
                    self.traces,
                    super::error::OperandTypes(types.to_vec())
                );
            }
            let traced = trace_at(location, &named, |x| (self.f)(x))?;
            let compiled = compile(location, &traced, &self.options)?;
            self.stages.insert(
                types.to_vec(),
                Stage {
                    traced,
                    compiled,
                    executable: OnceLock::new(),
                },
            );
        }
        Ok(&self.stages[types])
    }
}

/// The types of some tensors (the cache key).
pub(crate) fn types_of(inputs: &[Tensor]) -> Vec<TensorType> {
    inputs.iter().map(Tensor::ty).collect()
}

/// The methods every transformed function shares: initial parameters, the traced and the
/// transformed program at given input types, and how often the function was traced.
macro_rules! staged_methods {
    ($compile:expr, $program:expr) => {
        /// The initial parameter values at these inputs' types (traces if not yet traced).
        #[track_caller]
        pub fn init(&mut self, inputs: &[Tensor]) -> Result<Params, TraceError> {
            let types = super::staged::types_of(inputs);
            let stage = self
                .staged
                .stage(std::panic::Location::caller(), &types, $compile)?;
            Ok(stage.traced.params.clone())
        }

        /// The initial parameter values at these data input types, without any data: the
        /// types of labels are enough (traces if not yet traced).
        #[track_caller]
        pub fn init_types(&mut self, types: &[TensorType]) -> Result<Params, TraceError> {
            let stage = self
                .staged
                .stage(std::panic::Location::caller(), types, $compile)?;
            Ok(stage.traced.params.clone())
        }

        /// The traced program at these data input types.
        #[track_caller]
        pub fn traced(&mut self, types: &[TensorType]) -> Result<&Traced, TraceError> {
            let stage = self
                .staged
                .stage(std::panic::Location::caller(), types, $compile)?;
            Ok(&stage.traced)
        }

        /// The transformed program at these data input types.
        #[track_caller]
        pub fn program(&mut self, types: &[TensorType]) -> Result<&Program, TraceError> {
            let stage = self
                .staged
                .stage(std::panic::Location::caller(), types, $compile)?;
            Ok($program(&stage.compiled))
        }

        /// How many times the function has been traced (once per new list of input types;
        /// each retrace also logs a `debug` line, target `catml_core::trace`).
        pub fn trace_count(&self) -> usize {
            self.staged.trace_count()
        }
    };
}

pub(crate) use staged_methods;
