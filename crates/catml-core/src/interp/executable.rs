//! A program compiled once for evaluation: its plan, and the buffers its values used, kept
//! between calls so that a call with the same shapes allocates no value buffer
//! (`docs/memory.md`).

use std::sync::{Mutex, TryLockError};

use super::eval::{run, EvalError, EvalOptions, EvalReport};
use super::plan::EvalPlan;
use crate::ir::Program;
use crate::tensor::{BufferPool, Tensor};

/// A pool for `plan`'s program: free buffers beyond its own peak would never all be needed at
/// once.
fn empty_pool(plan: &EvalPlan) -> BufferPool {
    BufferPool::new(usize::try_from(plan.peak().bytes).unwrap_or(usize::MAX))
}

/// A program ready to evaluate many times: planned once (when values die, the peak of live
/// bytes), with a pool of value buffers that later calls reuse.
///
/// Calls from several threads are allowed; one of them at a time uses the pool, the others
/// allocate as [`eval`](super::eval) does. Results are the interpreter's, bit for bit.
///
/// ```
/// use catml_core::interp::{EvalOptions, Executable};
/// use catml_core::ir::json;
/// use catml_core::prim::builtins;
/// use catml_core::tensor::Tensor;
///
/// let text = r#"{"format": "lensir-module/1", "inputs": [{"name": "x", "shape": [3]}],
///     "nodes": [{"name": "y", "op": "tanh", "operands": ["x"]},
///               {"name": "z", "op": "mul", "operands": ["y", "x"]}], "outputs": ["z"]}"#;
/// let exe = Executable::new(json::from_str(text, builtins()).unwrap()).unwrap();
/// let x = Tensor::f64([3], vec![0.0, 1.0, -2.0]).unwrap();
/// let z = exe.run(&[x.clone()], EvalOptions::default()).unwrap();
/// exe.recycle(z); // the results' buffers serve the next call
/// let z = exe.run(&[x], EvalOptions::default()).unwrap();
/// assert_eq!(z[0].to_f64_vec()[1], 1f64.tanh());
/// ```
#[derive(Debug)]
pub struct Executable {
    program: Program,
    plan: EvalPlan,
    pool: Mutex<BufferPool>,
}

impl Clone for Executable {
    /// The same program and plan, with no buffers yet.
    fn clone(&self) -> Executable {
        Executable {
            program: self.program.clone(),
            plan: self.plan.clone(),
            pool: Mutex::new(empty_pool(&self.plan)),
        }
    }
}

impl Executable {
    /// Plans `program`; a node whose value alone is too large is an error
    /// ([`EvalPlan::new`]).
    pub fn new(program: Program) -> Result<Executable, EvalError> {
        let plan = EvalPlan::new(&program)?;
        Ok(Executable {
            pool: Mutex::new(empty_pool(&plan)),
            program,
            plan,
        })
    }

    pub fn program(&self) -> &Program {
        &self.program
    }

    pub fn plan(&self) -> &EvalPlan {
        &self.plan
    }

    /// Evaluates on inputs in declaration order, as [`eval_with_options`](super::eval_with_options).
    pub fn run(&self, inputs: &[Tensor], options: EvalOptions) -> Result<Vec<Tensor>, EvalError> {
        self.pooled(|| run(&self.program, Some(&self.plan), inputs, None, options))
    }

    /// [`run`](Self::run), reporting where labelled conventions decided a derivative.
    pub fn run_with_report(
        &self,
        inputs: &[Tensor],
        options: EvalOptions,
    ) -> Result<(Vec<Tensor>, EvalReport), EvalError> {
        let mut report = EvalReport::default();
        let out = self.pooled(|| {
            run(
                &self.program,
                Some(&self.plan),
                inputs,
                Some(&mut report),
                options,
            )
        })?;
        Ok((out, report))
    }

    /// Hands values back (results of an earlier call, once read) so that their buffers serve
    /// the next call. A value still shared elsewhere is simply dropped.
    pub fn recycle(&self, values: impl IntoIterator<Item = Tensor>) {
        self.pooled(|| values.into_iter().for_each(drop))
    }

    /// Bytes of free buffers kept for the next call.
    pub fn pooled_bytes(&self) -> usize {
        self.pool
            .lock()
            .unwrap_or_else(|held| held.into_inner())
            .held_bytes()
    }

    /// Runs `f` with the pool active on this thread, unless another call holds it.
    fn pooled<R>(&self, f: impl FnOnce() -> R) -> R {
        match self.pool.try_lock() {
            Ok(mut pool) => pool.activate(f),
            // A call that panicked left the pool whole (`activate` restores it on unwind).
            Err(TryLockError::Poisoned(held)) => held.into_inner().activate(f),
            Err(TryLockError::WouldBlock) => f(),
        }
    }
}
