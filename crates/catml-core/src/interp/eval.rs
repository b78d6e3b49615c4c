use std::collections::BTreeMap;

use super::budget::Bytes;
use super::fold::unshared;
use super::fuse::run_group;
use super::permutes::PermutedRun;
use super::plan::{EvalPlan, Step};
use crate::ir::{operand_refs, KernelError, Operands, Permutes, Program, Var};
use crate::tensor::{checked, Tensor, TensorType};

/// Why evaluation stopped. Nothing is returned on error.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum EvalError {
    #[error("expected {expected} inputs, found {found}")]
    InputCount { expected: usize, found: usize },
    #[error("missing input `{name}` ({ty})")]
    MissingInput { name: String, ty: TensorType },
    #[error("unknown input `{name}`: the program has no such input")]
    ExtraInput { name: String },
    #[error("input `{name}` has type {found}, expected {expected}")]
    InputType {
        name: String,
        expected: TensorType,
        found: TensorType,
    },
    #[error(
        "node {index} `{name}` ({op}) would hold {bytes} bytes, more than the limit of {limit}"
    )]
    TooLarge {
        index: usize,
        name: String,
        op: String,
        bytes: u64,
        limit: u64,
    },
    #[error(
        "program needs {} at its peak ({}), over the memory budget of {}",
        Bytes(*needed),
        peak_place(node),
        Bytes(*budget)
    )]
    OverBudget {
        /// The plan's peak of live bytes.
        needed: u64,
        budget: u64,
        /// Where the peak is reached: index, name and primitive of the node (`None`: the
        /// inputs alone).
        node: Option<(usize, String, String)>,
    },
    #[error("evaluation was given a plan made for another program")]
    ForeignPlan,
    #[error("node {index} `{name}` ({op}): {source}")]
    Kernel {
        index: usize,
        name: String,
        op: String,
        source: KernelError,
    },
    #[error("node {index} `{name}` ({op}) produced {count} non-finite value{} (first at element {first})", if *.count == 1 { "" } else { "s" })]
    NonFinite {
        index: usize,
        name: String,
        op: String,
        count: usize,
        first: usize,
    },
}

fn peak_place(node: &Option<(usize, String, String)>) -> String {
    match node {
        Some((index, name, op)) => format!("node {index} `{name}`, {op}"),
        None => "its inputs".to_string(),
    }
}

/// A node where a labelled convention decided the derivative, made observable
/// (docs/derivatives.md).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConventionHit {
    pub index: usize,
    pub name: String,
    pub op: String,
    /// The rule's stated convention.
    pub convention: String,
    /// How many elements sat at the convention's point.
    pub elements: usize,
}

/// What an evaluation observed besides its values.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EvalReport {
    pub conventions: Vec<ConventionHit>,
}

fn check_inputs(p: &Program, inputs: &[Tensor]) -> Result<(), EvalError> {
    if inputs.len() != p.n_inputs() {
        return Err(EvalError::InputCount {
            expected: p.n_inputs(),
            found: inputs.len(),
        });
    }
    for (decl, t) in p.inputs().iter().zip(inputs) {
        // Compared part by part: the type itself is built only for the error.
        if t.dtype() != decl.ty.dtype || *t.shape() != decl.ty.shape {
            return Err(EvalError::InputType {
                name: decl.name.clone(),
                expected: decl.ty.clone(),
                found: t.ty(),
            });
        }
    }
    Ok(())
}

/// The largest single value evaluation will allocate (a hostile module can declare a broadcast
/// to terabytes; refuse it before allocating rather than abort).
pub const MAX_VALUE_BYTES: u64 = 1 << 34;

/// How an evaluation treats what it computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EvalOptions {
    /// Reject any node that produces a NaN or an infinity (the default). Off, non-finite values
    /// flow on as IEEE arithmetic makes them (formats such as ONNX rely on that).
    pub check_non_finite: bool,
    /// The memory budget in bytes for this evaluation; `None`: the process's
    /// ([`memory_budget`](super::memory_budget)). A program whose planned peak exceeds it is
    /// refused before anything is allocated.
    pub memory_budget: Option<u64>,
}

impl Default for EvalOptions {
    fn default() -> EvalOptions {
        EvalOptions {
            check_non_finite: true,
            memory_budget: None,
        }
    }
}

/// The plan an evaluation follows.
#[derive(Clone, Copy)]
pub(super) enum PlanOf<'a> {
    /// None given: one is made for this evaluation.
    Made,
    /// A caller's plan, refused unless it could be the program's ([`EvalPlan::fits`]).
    Given(&'a EvalPlan),
    /// The plan made from the program and kept with it (an `Executable`'s), so not checked
    /// again on every call. Its caller makes a failed call again on the plain plan, so a fused
    /// pass may write its root in an operand's buffer (`fuse.rs`).
    Own(&'a EvalPlan),
}

pub(super) fn run(
    p: &Program,
    plan: PlanOf<'_>,
    inputs: &[Tensor],
    report: Option<&mut EvalReport>,
    options: EvalOptions,
) -> Result<Vec<Tensor>, EvalError> {
    let mut results = Vec::new();
    run_into(
        p,
        plan,
        inputs,
        report,
        options,
        &mut Vec::new(),
        &mut results,
    )?;
    Ok(results)
}

/// `run`, with the values held in `env` (left holding none, its length kept for the next call) and
/// the results written to `results` (replacing what it held).
pub(super) fn run_into(
    p: &Program,
    plan: PlanOf<'_>,
    inputs: &[Tensor],
    report: Option<&mut EvalReport>,
    options: EvalOptions,
    env: &mut Vec<Option<Tensor>>,
    results: &mut Vec<Tensor>,
) -> Result<(), EvalError> {
    results.clear();
    // Inside a kernel (a program evaluated by a node), no inner kernel answers for the outer
    // node's result.
    checked::withdraw();
    let done = run_nodes(p, plan, inputs, report, options, env, results);
    // Values never read, and all values after an error, are still held.
    for slot in env.iter_mut().filter(|s| s.is_some()) {
        *slot = None;
    }
    if done.is_err() {
        results.clear();
    }
    done
}

fn run_nodes(
    p: &Program,
    plan: PlanOf<'_>,
    inputs: &[Tensor],
    mut report: Option<&mut EvalReport>,
    options: EvalOptions,
    env: &mut Vec<Option<Tensor>>,
    results: &mut Vec<Tensor>,
) -> Result<(), EvalError> {
    check_inputs(p, inputs)?;
    let in_place = matches!(plan, PlanOf::Own(_));
    let made;
    let plan = match plan {
        PlanOf::Own(plan) => plan,
        PlanOf::Given(plan) if plan.fits(p) => plan,
        PlanOf::Given(_) => return Err(EvalError::ForeignPlan),
        PlanOf::Made => {
            made = EvalPlan::new(p)?;
            &made
        }
    };
    plan.check_budget(p, options.memory_budget)?;
    let last = &plan.last;
    let n_in = p.n_inputs();
    if env.len() != p.n_vars() {
        env.clear();
        env.resize(p.n_vars(), None);
    }
    for (slot, input) in env.iter_mut().zip(inputs) {
        *slot = Some(input.clone());
    }
    // One operand list serves every node, so that handing operands over allocates nothing.
    let mut args = Operands::new();
    // A value made unchecked, for the next node to check as it reads it (`reader_checks.rs`).
    let mut unchecked: Option<Var> = None;
    for (i, node) in p.nodes().iter().enumerate() {
        let step = plan.steps.get(i).copied().unwrap_or(Step::Eval);
        let ops = &node.operands;
        let check = options.check_non_finite;
        // Checked here unless this node is the reader that checks it (or does nothing).
        if let Some(v) = unchecked {
            let reader = step == Step::Eval && ops.contains(&v);
            if !reader && (step != Step::Made || ops.contains(&v)) {
                scan(p, env, v)?;
                unchecked = None;
            }
        }
        match step {
            // The value was added into by an earlier node; only its operands' deaths are left.
            Step::Made => {
                free_dying(env, ops, last, i);
                continue;
            }
            // Run, and its operands read, by its group's pass.
            Step::Within => continue,
            Step::Fused(g) => {
                let group = plan.groups.get(g).ok_or(EvalError::ForeignPlan)?;
                let value = run_group(p, group, env, check, in_place, report.as_deref_mut())?;
                env[n_in + i] = Some(value);
                for e in &group.externals {
                    if last[e.index()] == Some(i) {
                        env[e.index()] = None;
                    }
                }
                continue;
            }
            // The value is its operand's buffer, read through the permute by every reader.
            Step::View => {
                let source = env[ops[0].index()].clone();
                env[n_in + i] = Some(source.ok_or(EvalError::ForeignPlan)?);
                free_dying(env, ops, last, i);
                continue;
            }
            // Made by the node making the operand, and nothing else reads that.
            Step::Written => continue,
            Step::Permuted(r) => {
                let run = plan.permuted.get(r).ok_or(EvalError::ForeignPlan)?;
                let (slot, out) = run_permuted(p, i, run, env, options.check_non_finite)?;
                env[slot] = Some(out);
                free_dying(env, ops, last, i);
                continue;
            }
            Step::Eval | Step::AddInto { .. } => {}
        }
        let fail = |source| kernel_error(p, i, source);
        // The buffer a folded sum's product adds into, taken before the operands are read, and
        // the slot the result fills.
        let (added, slot) = match step {
            Step::AddInto { addend, take, sum } => {
                let held = &mut env[addend.index()];
                let value = if take { held.take() } else { held.clone() };
                let value = value.ok_or_else(|| EvalError::ForeignPlan)?;
                (
                    Some(unshared(value).map_err(|e| fail(e.into()))?),
                    n_in + sum,
                )
            }
            _ => (None, n_in + i),
        };
        // Operands that die here are moved to the kernel, which may then reuse their buffers
        // (a repeated operand is moved only at its last occurrence); where none dies, or the
        // product adds into a buffer of its own, the kernel reads them where they are held.
        let moving = added.is_none() && ops.iter().any(|o| last[o.index()] == Some(i));
        if moving {
            for (k, o) in ops.iter().enumerate() {
                let slot = &mut env[o.index()];
                let value = if last[o.index()] == Some(i) && !ops[k + 1..].contains(o) {
                    slot.take()
                } else {
                    slot.clone()
                };
                // Only a plan of another program with the same counts can free a value early.
                args.push(value.ok_or_else(|| EvalError::ForeignPlan)?);
            }
        }
        let refs = if moving {
            smallvec::SmallVec::new()
        } else {
            held(env, ops)?
        };
        if let Some(r) = report.as_deref_mut() {
            let points = if moving {
                node.prim.convention_points(&operand_refs(&args))
            } else {
                node.prim.convention_points(&refs)
            };
            r.conventions.extend(convention_hit(p, i, points));
        }
        // Copies of node results (checked when made) need no second scan; program inputs
        // are not checked until a node reads them, so copies of those are.
        let copies_checked =
            node.prim.copies_operand_values() && node.operands.iter().all(|o| o.index() >= n_in);
        // A value whose next reader checks it is made unchecked.
        let read_checked = check && plan.checked_by_reader(slot - n_in);
        let check = check && !copies_checked && !read_checked;
        // The buffer of the value made unchecked, which this node reads (`reader_checks.rs`).
        let watched = unchecked.and_then(|v| {
            let moved = || args.get(ops.iter().position(|&o| o == v)?);
            address(env[v.index()].as_ref().or_else(moved)?)
        });
        // The kernel's error alone is returned from here, so that what it returns stays small.
        let kernel = || match added {
            Some(mut out) => node.prim.eval_added(&refs, &mut out).map(|()| out),
            None if moving => node.prim.eval_owned(&mut args),
            None => node.prim.eval(&refs),
        };
        // A kernel may count its result's non-finite values as it writes them
        // (`tensor::checked`); otherwise the result is scanned here. The reader of a value
        // made unchecked is asked to count that value too, as it reads it.
        let (out, counted, found) = if watched.is_some() {
            checked::asking_watching(watched, kernel)
        } else if !check {
            (kernel(), Some(0), None)
        } else if node.prim.counts_non_finite(&node.ty) {
            let (out, counted) = checked::asking(kernel);
            (out, counted, None)
        } else {
            (kernel(), None, None)
        };
        drop(refs);
        if let Some(v) = unchecked.take() {
            match found {
                Some(w) if w.count > 0 => {
                    return Err(non_finite_at(p, v.index() - n_in, w.count, w.first))
                }
                Some(_) => {}
                // Not counted by the kernel: still held, unless the kernel wrote over it.
                None => match (env[v.index()].as_ref())
                    .or_else(|| args.iter().find(|t| address(t) == watched))
                {
                    Some(t) => scan_value(p, v.index() - n_in, t)?,
                    None => return Err(fail(KernelError::Unsupported(UNWATCHED.into()))),
                },
            }
        }
        // Operands the kernel did not take (borrowed copies) are released now.
        args.clear();
        let out = out.map_err(fail)?;
        // A folded sum has its product's type (`fold_sums`).
        if out.dtype() != node.ty.dtype || *out.shape() != node.ty.shape {
            return Err(fail(KernelError::Unsupported(format!(
                "kernel returned {}, its type rule says {}",
                out.ty(),
                node.ty
            ))));
        }
        let bad = if check {
            counted.unwrap_or_else(|| out.count_non_finite())
        } else {
            0
        };
        if bad > 0 {
            return Err(non_finite(p, i, &out, bad));
        }
        env[slot] = Some(out);
        if read_checked {
            unchecked = Some(Var(slot as u32));
        }
        free_dying(env, ops, last, i);
    }
    if let Some(v) = unchecked {
        scan(p, env, v)?;
    }
    // A fused pass reports its nodes' conventions when it runs; the report lists them in
    // program order, as the interpreter finds them.
    if let Some(r) = report.filter(|_| !plan.groups.is_empty()) {
        r.conventions.sort_by_key(|hit| hit.index);
    }
    results.reserve(p.outputs().len());
    for (k, o) in p.outputs().iter().enumerate() {
        let value = match env[o.index()].take() {
            Some(v) => v,
            // A repeated output: the value taken at its first occurrence.
            None => match p.outputs()[..k].iter().position(|x| x == o) {
                Some(first) => results[first].clone(),
                None => return Err(EvalError::ForeignPlan),
            },
        };
        results.push(value);
    }
    Ok(())
}

/// Node `i`'s value by its permuted kernel, reading its operands and writing its result as
/// `run` says; returns the slot it fills (node `i`'s, or that of the permute it writes).
fn run_permuted(
    p: &Program,
    i: usize,
    run: &PermutedRun,
    env: &[Option<Tensor>],
    check: bool,
) -> Result<(usize, Tensor), EvalError> {
    let node = &p.nodes()[i];
    let fail = |source| kernel_error(p, i, source);
    let kernel = node.prim.permuted().ok_or(EvalError::ForeignPlan)?;
    let sources = held(env, &node.operands)?;
    let operands: smallvec::SmallVec<[Option<&[usize]>; 4]> =
        run.operands.iter().map(|perm| perm.as_deref()).collect();
    let permutes = |result| Permutes {
        operands: &operands,
        result,
    };
    let result = run.result.as_ref().map(|(perm, _)| perm.as_slice());
    // The count of the permuted result is the node's own: the same elements, moved.
    let run_kernel = || kernel.eval_permuted(&sources, permutes(result));
    let (out, counted) = if !check {
        (run_kernel(), Some(0))
    } else if node.prim.counts_non_finite(&node.ty) {
        checked::asking(run_kernel)
    } else {
        (run_kernel(), None)
    };
    let out = out.map_err(fail)?;
    let slot = p.n_inputs() + run.result.as_ref().map_or(i, |&(_, into)| into);
    let ty = p.ty(Var(slot as u32));
    if out.dtype() != ty.dtype || *out.shape() != ty.shape {
        return Err(fail(KernelError::Unsupported(format!(
            "kernel returned {}, its type rule says {ty}",
            out.ty()
        ))));
    }
    let bad = counted.unwrap_or_else(|| out.count_non_finite());
    if bad > 0 {
        // Named in the node's own layout, as the interpreter names it.
        let own = match result {
            Some(_) => kernel
                .eval_permuted(&sources, permutes(None))
                .map_err(fail)?,
            None => out,
        };
        return Err(non_finite(p, i, &own, bad));
    }
    Ok((slot, out))
}

/// The error of node `i`'s kernel.
pub(super) fn kernel_error(p: &Program, i: usize, source: KernelError) -> EvalError {
    let node = &p.nodes()[i];
    EvalError::Kernel {
        index: i,
        name: node.name.clone(),
        op: node.prim.name().to_string(),
        source,
    }
}

/// Why a reader asked to check a value made unchecked failed: it wrote over the value without
/// counting it. Evaluation on the plain plan then checks every value itself.
const UNWATCHED: &str = "the kernel wrote over a value it was asked to check, without checking it";

/// The address of a float value's buffer.
fn address(t: &Tensor) -> Option<usize> {
    match t {
        Tensor::F32(a) => Some(a.data().as_ptr() as usize),
        Tensor::F64(a) => Some(a.data().as_ptr() as usize),
        _ => None,
    }
}

/// Checks `v`, a value made unchecked, held in `env`.
fn scan(p: &Program, env: &[Option<Tensor>], v: Var) -> Result<(), EvalError> {
    let value = env[v.index()].as_ref().ok_or(EvalError::ForeignPlan)?;
    scan_value(p, v.index() - p.n_inputs(), value)
}

/// Checks `value`, node `i`'s, for non-finite elements: the error naming the node, if any.
pub(super) fn scan_value(p: &Program, i: usize, value: &Tensor) -> Result<(), EvalError> {
    match value.count_non_finite() {
        0 => Ok(()),
        bad => Err(non_finite(p, i, value, bad)),
    }
}

/// The error of node `i`'s value `out`, of which `count` elements are not finite.
pub(super) fn non_finite(p: &Program, i: usize, out: &Tensor, count: usize) -> EvalError {
    let first = out
        .to_f64_vec()
        .iter()
        .position(|v| !v.is_finite())
        .unwrap_or(0);
    non_finite_at(p, i, count, first)
}

/// The error of node `i`'s value, of which `count` elements are not finite, the first at
/// element `first`.
fn non_finite_at(p: &Program, i: usize, count: usize, first: usize) -> EvalError {
    let node = &p.nodes()[i];
    EvalError::NonFinite {
        index: i,
        name: node.name.clone(),
        op: node.prim.name().to_string(),
        count,
        first,
    }
}

/// The report's entry for node `i`, where `elements` (if any) sat at its rule's convention.
pub(super) fn convention_hit(p: &Program, i: usize, elements: usize) -> Option<ConventionHit> {
    let node = &p.nodes()[i];
    (elements > 0).then(|| ConventionHit {
        index: i,
        name: node.name.clone(),
        op: node.prim.name().to_string(),
        convention: node.prim.rule().to_string(),
        elements,
    })
}

/// Borrows of the values of `ops`, for a kernel that reads them where they are held.
fn held<'a>(
    env: &'a [Option<Tensor>],
    ops: &[Var],
) -> Result<smallvec::SmallVec<[&'a Tensor; 4]>, EvalError> {
    let mut refs = smallvec::SmallVec::new();
    for o in ops {
        // Only a plan of another program with the same counts can free a value early.
        refs.push(
            env[o.index()]
                .as_ref()
                .ok_or_else(|| EvalError::ForeignPlan)?,
        );
    }
    Ok(refs)
}

/// Drops the values node `i` reads for the last time (inputs held by the caller included).
fn free_dying(env: &mut [Option<Tensor>], ops: &[Var], last: &[Option<usize>], i: usize) {
    for o in ops {
        if last[o.index()] == Some(i) {
            env[o.index()] = None;
        }
    }
}

/// Evaluates a program on inputs given in declaration order; one tensor per output occurrence.
pub fn eval(p: &Program, inputs: &[Tensor]) -> Result<Vec<Tensor>, EvalError> {
    run(p, PlanOf::Made, inputs, None, EvalOptions::default())
}

/// `eval` with a plan made once by [`EvalPlan::new`] for `p` (a plan of another program is
/// refused), for programs evaluated many times.
pub fn eval_planned(
    p: &Program,
    plan: &EvalPlan,
    inputs: &[Tensor],
    options: EvalOptions,
) -> Result<Vec<Tensor>, EvalError> {
    run(p, PlanOf::Given(plan), inputs, None, options)
}

/// `eval_with_report_options` with a plan made once for `p`.
pub fn eval_planned_with_report(
    p: &Program,
    plan: &EvalPlan,
    inputs: &[Tensor],
    options: EvalOptions,
) -> Result<(Vec<Tensor>, EvalReport), EvalError> {
    let mut report = EvalReport::default();
    let out = run(p, PlanOf::Given(plan), inputs, Some(&mut report), options)?;
    Ok((out, report))
}

/// `eval` with explicit options.
pub fn eval_with_options(
    p: &Program,
    inputs: &[Tensor],
    options: EvalOptions,
) -> Result<Vec<Tensor>, EvalError> {
    run(p, PlanOf::Made, inputs, None, options)
}

/// Evaluates and reports where labelled conventions decided a derivative.
pub fn eval_with_report(
    p: &Program,
    inputs: &[Tensor],
) -> Result<(Vec<Tensor>, EvalReport), EvalError> {
    let mut report = EvalReport::default();
    let out = run(
        p,
        PlanOf::Made,
        inputs,
        Some(&mut report),
        EvalOptions::default(),
    )?;
    Ok((out, report))
}

/// `eval_with_report` with explicit options.
pub fn eval_with_report_options(
    p: &Program,
    inputs: &[Tensor],
    options: EvalOptions,
) -> Result<(Vec<Tensor>, EvalReport), EvalError> {
    let mut report = EvalReport::default();
    let out = run(p, PlanOf::Made, inputs, Some(&mut report), options)?;
    Ok((out, report))
}

/// Orders named inputs by declaration; missing and unknown names are errors.
pub fn order_inputs(
    p: &Program,
    named: &BTreeMap<String, Tensor>,
) -> Result<Vec<Tensor>, EvalError> {
    if let Some(extra) = named
        .keys()
        .find(|k| !p.inputs().iter().any(|i| &i.name == *k))
    {
        return Err(EvalError::ExtraInput {
            name: extra.clone(),
        });
    }
    p.inputs()
        .iter()
        .map(|i| {
            named
                .get(&i.name)
                .cloned()
                .ok_or_else(|| EvalError::MissingInput {
                    name: i.name.clone(),
                    ty: i.ty.clone(),
                })
        })
        .collect()
}

/// Evaluates on inputs given by name.
pub fn eval_named(p: &Program, named: &BTreeMap<String, Tensor>) -> Result<Vec<Tensor>, EvalError> {
    eval(p, &order_inputs(p, named)?)
}
