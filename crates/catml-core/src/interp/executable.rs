//! A program compiled once for evaluation: its plan, and the buffers its values used, kept
//! between calls so that a call with the same shapes allocates no value buffer
//! (`docs/memory.md`).

use std::sync::{Mutex, MutexGuard, TryLockError};

use super::arena::{Arena, ArenaPlan};
use super::budget::budget_for;
use super::eval::{run_into, EvalError, EvalOptions, EvalReport, PlanOf};
use super::plan::EvalPlan;
use crate::ir::Program;
use crate::tensor::{kernels, BufferPool, Tensor};

/// What calls leave behind for the next: free buffers, the room of the list of values, and
/// the one buffer of a small program.
#[derive(Debug)]
struct Reuse {
    pool: BufferPool,
    env: Vec<Option<Tensor>>,
    arena: Option<Arena>,
}

/// Nothing yet for `plan`'s program, with a pool that learns from the first call which values
/// can share buffers and keeps at most the plan's peak until then, and a buffer for `arena`'s
/// plan.
fn empty_reuse(plan: &EvalPlan, program: &Program, arena: Option<&ArenaPlan>) -> Reuse {
    Reuse {
        pool: BufferPool::sharing(usize::try_from(plan.peak().bytes).unwrap_or(usize::MAX)),
        env: Vec::new(),
        arena: arena.and_then(|a| a.buffer(program)),
    }
}

/// A program ready to evaluate many times: planned once (when values die, the peak of live
/// bytes), with a pool of value buffers that later calls reuse.
///
/// Calls from several threads are allowed; one of them at a time uses the pool, the others
/// allocate as [`eval`](super::eval) does. A sum fed by a matrix product is folded into the
/// product ([`EvalPlan::folding_sums`]); such a sum is within the budget of its k + 1 terms,
/// and every other result is the interpreter's, bit for bit, chains of elementwise nodes
/// included, which run as one pass each ([`EvalPlan::fusing_passes`]), and kernels reading or
/// writing permutes in place ([`EvalPlan::permuting_in_place`]). A large value read next by
/// an elementwise pass is checked by that pass ([`EvalPlan::checking_in_readers`]). A small
/// program runs in one buffer with a slot for each value instead, and gives the interpreter's
/// results, bit for bit ([`in_one_buffer`](Self::in_one_buffer)).
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
    /// The plan without folded sums or fused passes, which a call that failed follows again to
    /// find the interpreter's error.
    plain: EvalPlan,
    /// Whether some node is large enough for its kernel to use the thread pool; then a call
    /// runs on a thread of the pool (`threads_worth_it`).
    threaded: bool,
    /// The inputs' bytes, which the caller holds beside the pool's buffers.
    input_bytes: u64,
    /// Where each value lies in one buffer, for a small program (`arena.rs`).
    arena: Option<ArenaPlan>,
    reuse: Mutex<Reuse>,
}

/// Whether some node of `program` may cut its work across the thread pool
/// ([`kernels::may_use_threads`]). A call of such a program runs on a thread of the pool, so
/// that each of its parallel kernels shares its work with threads that are already awake,
/// where a call from outside hands every parallel kernel to the pool and sleeps until it is
/// done. A program of small nodes stays on the caller's thread, with no hand-off at all.
fn threads_worth_it(program: &Program) -> bool {
    program.nodes().iter().any(|n| {
        let operands: Vec<_> = n.operands.iter().map(|&o| program.ty(o).clone()).collect();
        kernels::may_use_threads(n.ty.numel(), n.prim.flops(&operands, &n.ty))
    })
}

impl Clone for Executable {
    /// The same program and plan, with no buffers yet (and without one buffer for a small
    /// program if that one cannot be made).
    fn clone(&self) -> Executable {
        let (program, plan, plain) = (self.program.clone(), self.plan.clone(), self.plain.clone());
        Executable::planned(program, plan, plain, self.arena.clone())
    }
}

impl Executable {
    /// Plans `program`; a node whose value alone is too large is an error
    /// ([`EvalPlan::new`]).
    pub fn new(program: Program) -> Result<Executable, EvalError> {
        let plain = EvalPlan::new(&program)?;
        let plan = plain.clone().compiled(&program);
        let arena = ArenaPlan::new(&program);
        Ok(Executable::planned(program, plan, plain, arena))
    }

    /// `program` with a plan of the caller's choosing: [`EvalPlan::new`]'s, perhaps
    /// [`folding_sums`](EvalPlan::folding_sums), then perhaps
    /// [`fusing_passes`](EvalPlan::fusing_passes), then perhaps
    /// [`permuting_in_place`](EvalPlan::permuting_in_place), then perhaps
    /// [`checking_in_readers`](EvalPlan::checking_in_readers); any other plan (one of another
    /// program, say) is refused. Every call follows that plan: a small program does not run
    /// in one buffer, as [`new`](Self::new)'s may.
    pub fn with_plan(program: Program, plan: EvalPlan) -> Result<Executable, EvalError> {
        let plain = EvalPlan::new(&program)?;
        let mut made = vec![plain.clone()];
        for step in [
            EvalPlan::folding_sums,
            EvalPlan::fusing_passes,
            EvalPlan::permuting_in_place,
            EvalPlan::checking_in_readers,
        ] {
            let next: Vec<EvalPlan> = made.iter().map(|m| step(m.clone(), &program)).collect();
            made.extend(next);
        }
        if !made.contains(&plan) {
            return Err(EvalError::ForeignPlan);
        }
        Ok(Executable::planned(program, plan, plain, None))
    }

    fn planned(
        program: Program,
        plan: EvalPlan,
        plain: EvalPlan,
        arena: Option<ArenaPlan>,
    ) -> Executable {
        let reuse = empty_reuse(&plan, &program, arena.as_ref());
        Executable {
            // Without its buffer (an allocation or a constant failed), a program runs on tensors.
            arena: arena.filter(|_| reuse.arena.is_some()),
            reuse: Mutex::new(reuse),
            threaded: threads_worth_it(&program),
            input_bytes: program.inputs().iter().map(|i| i.ty.bytes() as u64).sum(),
            program,
            plan,
            plain,
        }
    }

    pub fn program(&self) -> &Program {
        &self.program
    }

    pub fn plan(&self) -> &EvalPlan {
        &self.plan
    }

    /// Whether calls run in one buffer with a slot for each value, as a small program's do
    /// (`docs/memory.md`, "Small programs"); a call that finds a non-finite value, or asks
    /// for a report, evaluates as any other program's does.
    pub fn in_one_buffer(&self) -> bool {
        self.arena.is_some()
    }

    /// Evaluates on inputs in declaration order, as [`eval_with_options`](super::eval_with_options).
    pub fn run(&self, inputs: &[Tensor], options: EvalOptions) -> Result<Vec<Tensor>, EvalError> {
        let mut results = Vec::new();
        self.run_into(inputs, options, &mut results)?;
        Ok(results)
    }

    /// [`run`](Self::run), writing the results into `results` (emptied first; left empty on
    /// error). With the results of the previous call recycled and the same list passed again,
    /// a call allocates nothing.
    pub fn run_into(
        &self,
        inputs: &[Tensor],
        options: EvalOptions,
        results: &mut Vec<Tensor>,
    ) -> Result<(), EvalError> {
        self.call(inputs, options, None, results)
    }

    /// [`run`](Self::run), reporting where labelled conventions decided a derivative.
    pub fn run_with_report(
        &self,
        inputs: &[Tensor],
        options: EvalOptions,
    ) -> Result<(Vec<Tensor>, EvalReport), EvalError> {
        let (mut report, mut results) = (EvalReport::default(), Vec::new());
        self.call(inputs, options, Some(&mut report), &mut results)?;
        Ok((results, report))
    }

    /// One evaluation, on a thread of the pool when the program is large enough to use it
    /// (`threads_worth_it`) and this thread is not one already.
    fn call(
        &self,
        inputs: &[Tensor],
        options: EvalOptions,
        report: Option<&mut EvalReport>,
        results: &mut Vec<Tensor>,
    ) -> Result<(), EvalError> {
        let outside_pool = || rayon::current_thread_index().is_none();
        if self.threaded && outside_pool() && rayon::current_num_threads() > 1 {
            return rayon::scope(|_| self.call_here(inputs, options, report, results));
        }
        self.call_here(inputs, options, report, results)
    }

    /// The bytes a call's pool may keep besides its live values: the slab of a pool that
    /// shares one, where it and the inputs fit in the budget (the live values are then in it
    /// too), and free buffers of as many bytes as the inputs, for values placed where results
    /// of the last call lie while the caller holds them as this call's inputs (a training
    /// step's parameters); otherwise what the budget leaves above the peak, and at most the
    /// peak.
    fn kept_bytes(&self, pool: &BufferPool, budget: u64) -> usize {
        let peak = self.plan.peak().bytes;
        let inputs = self.input_bytes;
        let shared = (pool.shared_bytes().map(|b| b as u64))
            .filter(|&b| b.saturating_add(inputs) <= budget)
            .map(|b| b + inputs.min(budget - b - inputs));
        let kept = shared.unwrap_or(peak.min(budget.saturating_sub(peak)));
        usize::try_from(kept).unwrap_or(usize::MAX)
    }

    /// One evaluation on the plan, on this thread. A folded sum is checked where its product
    /// runs, and a fused pass where its last node runs, so after a non-finite value or a
    /// kernel's error (a reader that wrote over a value left to it unchecked, say) the call is
    /// made again on the plain plan: the error then names the node the interpreter names.
    fn call_here(
        &self,
        inputs: &[Tensor],
        options: EvalOptions,
        mut report: Option<&mut EvalReport>,
        results: &mut Vec<Tensor>,
    ) -> Result<(), EvalError> {
        // The budget is read once for the call. The free buffers kept besides the live values
        // get at most what it leaves above the peak (`docs/memory.md`, "Executables").
        let peak = self.plan.peak().bytes;
        let budget = budget_for(peak, options.memory_budget);
        let options = EvalOptions {
            memory_budget: Some(budget),
            ..options
        };
        if report.is_none() {
            if let Some(()) = self.in_arena(inputs, options, budget, results) {
                return Ok(());
            }
        }
        // Only a call on the executable's own plan teaches the pool what calls ask for.
        let once = |plan: &EvalPlan, report: Option<&mut EvalReport>, results: &mut Vec<_>| {
            let learn = std::ptr::eq(plan, &self.plan);
            self.pooled(budget, learn, |env| {
                run_into(
                    &self.program,
                    PlanOf::Own(plan),
                    inputs,
                    report,
                    options,
                    env,
                    results,
                )
            })
        };
        let rewritten = self.plan.folded_sums() > 0
            || self.plan.fused_passes() > 0
            || self.plan.checks_in_readers() > 0;
        match once(&self.plan, report.as_deref_mut(), results) {
            Err(EvalError::NonFinite { .. } | EvalError::Kernel { .. }) if rewritten => {
                if let Some(r) = report.as_deref_mut() {
                    *r = EvalReport::default();
                }
                once(&self.plain, report, results)
            }
            done => done,
        }
    }

    /// One evaluation in the small program's buffer (`arena.rs`); `None` where the call is to
    /// evaluate on tensors instead: no such buffer, another call holding it, a plan over the
    /// memory budget, or inputs or values that the interpreter would refuse.
    fn in_arena(
        &self,
        inputs: &[Tensor],
        options: EvalOptions,
        budget: u64,
        results: &mut Vec<Tensor>,
    ) -> Option<()> {
        let plan = self.arena.as_ref()?;
        let mut reuse = self.reuse.try_lock().ok()?;
        let Reuse { pool, arena, .. } = &mut *reuse;
        let arena = arena.as_mut()?;
        pool.limit_to(self.kept_bytes(pool, budget));
        // Over the budget, the call on tensors gives the error, after its checks of the inputs.
        (self.plan.check_budget(&self.program, options.memory_budget)).ok()?;
        let check = options.check_non_finite;
        pool.begin_call();
        let done = pool.activate(|| plan.run(&self.program, arena, inputs, check, results));
        pool.end_call(done.is_some());
        done
    }

    /// Hands values back (results of an earlier call, once read) so that their buffers serve
    /// the next call. A value still shared elsewhere is simply dropped.
    pub fn recycle(&self, values: impl IntoIterator<Item = Tensor>) {
        match self.reuse() {
            Some(mut reuse) => reuse.pool.activate(|| values.into_iter().for_each(drop)),
            None => values.into_iter().for_each(drop),
        }
    }

    /// Bytes kept for the next call: free buffers, or the slab calls share.
    pub fn pooled_bytes(&self) -> usize {
        self.reuse
            .lock()
            .unwrap_or_else(|held| held.into_inner())
            .pool
            .held_bytes()
    }

    /// The bytes calls share: the slab, and free buffers for small values, once the first call
    /// has taught the pool where each value can live (`docs/memory.md`, "Executables"); `None`
    /// before.
    pub fn shared_bytes(&self) -> Option<usize> {
        (self.reuse.lock().unwrap_or_else(|held| held.into_inner()))
            .pool
            .shared_bytes()
    }

    /// What calls left behind, unless another call holds it now.
    fn reuse(&self) -> Option<MutexGuard<'_, Reuse>> {
        match self.reuse.try_lock() {
            Ok(reuse) => Some(reuse),
            // A call that panicked left the pool whole (`activate` restores it on unwind), and
            // perhaps values in the list, which go.
            Err(TryLockError::Poisoned(held)) => {
                let mut reuse = held.into_inner();
                reuse.env.clear();
                Some(reuse)
            }
            Err(TryLockError::WouldBlock) => None,
        }
    }

    /// Runs a call `f` with the pool active on this thread and the kept list of values, unless
    /// another call holds them (then with none). The pool keeps what the call's `budget`
    /// allows ([`kept_bytes`](Self::kept_bytes)), and learns from the call when `learn`.
    fn pooled(
        &self,
        budget: u64,
        learn: bool,
        f: impl FnOnce(&mut Vec<Option<Tensor>>) -> Result<(), EvalError>,
    ) -> Result<(), EvalError> {
        let Some(mut reuse) = self.reuse() else {
            return f(&mut Vec::new());
        };
        let Reuse { pool, env, .. } = &mut *reuse;
        pool.limit_to(self.kept_bytes(pool, budget));
        pool.begin_call();
        let done = pool.activate(|| f(env));
        pool.end_call(learn && done.is_ok());
        done
    }
}
