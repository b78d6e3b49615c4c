//! Fused elementwise passes. A chain (or tree) of elementwise nodes of one float type, each
//! value but the last read by the next node alone, runs as one pass: each block of elements
//! goes through every node while it is in cache, and only the last node's value is written to
//! memory, over a dying operand's buffer where no other value needs it (`docs/memory.md`,
//! "Fused elementwise passes"). Each node runs its own block kernel (`ir::BlockKernel`), so
//! every value is the interpreter's, bit for bit.

use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use smallvec::SmallVec;

use super::eval::{convention_hit, kernel_error, scan_value, EvalError, EvalReport};
use super::plan::Step;
use crate::ir::{BlockKernel, KernelError, Program, Reads, SliceKernel, SliceOperand, Var};
use crate::tensor::{alloc, kernels, Array, DType, Float, Tensor};

/// The most nodes in one group (each holds a block of scratch while the pass runs).
const MAX_MEMBERS: usize = 8;

/// The most operands of a member (elementwise rows take one or two).
const MAX_OPERANDS: usize = 4;

/// Elements of each node's block (2 KiB of f64: the group's blocks together stay in L1).
const BLOCK: usize = 256;

/// Where a member node reads an operand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Source {
    /// The block of the member at this position of the group.
    Member(usize),
    /// The value held in evaluation, `Group::externals[k]`.
    External(usize),
}

/// Nodes run as one pass; the value of the last (the root) is the only one made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Group {
    /// Node indices in program order, the root last.
    pub members: Vec<usize>,
    /// Each member's operands, and how it reads them.
    pub sources: Vec<SmallVec<[Source; 2]>>,
    pub reads: Vec<Reads>,
    /// The values the group reads from outside it, each once.
    pub externals: Vec<Var>,
    /// The external whose buffer the root's value is written in, when evaluation holds the
    /// only reference to it: one read in blocks alone whose buffer the plan finds no other
    /// value needs (`EvalPlan::fusing_passes`).
    pub into: Option<usize>,
}

impl Group {
    /// Whether every member reading external `e` reads it block by block.
    pub(crate) fn reads_in_blocks(&self, e: usize) -> bool {
        (self.sources.iter().zip(&self.reads))
            .all(|(s, r)| *r == Reads::Blocks || !s.contains(&Source::External(e)))
    }

    /// Whether this group could be one of `p`'s: members of the root's type, each reading as
    /// many operands as its node has, from members before it or from the externals. (A plan
    /// of another program could otherwise hand a kernel too few blocks.)
    fn fits(&self, p: &Program) -> bool {
        let nodes = p.nodes();
        let Some(&root) = self.members.last() else {
            return false;
        };
        let ok = |k: usize, m: usize, sources: &SmallVec<[Source; 2]>| {
            let repeats = matches!(self.reads[k], Reads::Repeats { .. });
            m < nodes.len()
                && nodes[m].ty == nodes[root].ty
                && sources.len() == nodes[m].operands.len()
                && sources.len() <= MAX_OPERANDS
                && (!repeats || sources.len() == 1)
                && sources.iter().all(|s| match *s {
                    Source::Member(j) => j < k && !repeats,
                    Source::External(e) => e < self.externals.len(),
                })
        };
        let into_fits = self
            .into
            .is_none_or(|e| e < self.externals.len() && self.reads_in_blocks(e));
        root < nodes.len()
            && into_fits
            && self.members.len() <= MAX_MEMBERS
            && self.sources.len() == self.members.len()
            && self.reads.len() == self.members.len()
            && (self.members.iter().zip(&self.sources).enumerate()).all(|(k, (&m, s))| ok(k, m, s))
    }
}

/// How a fused pass would read node `i`'s operands: `None` unless it has a block kernel
/// (`ir::BlockKernel`) that serves its operand types, is of a float type and reads at most
/// `MAX_OPERANDS` operands.
fn reads(p: &Program, i: usize) -> Option<Reads> {
    let node = &p.nodes()[i];
    let kernel = node
        .prim
        .elementwise()
        .filter(|_| node.ty.dtype.is_float() && node.operands.len() <= MAX_OPERANDS)?;
    let inputs: SmallVec<[_; 2]> = node.operands.iter().map(|&o| p.ty(o).clone()).collect();
    kernel.reads(&inputs, &node.ty)
}

/// The groups of `p` given its steps so far (folded sums stay as they are): a node that can
/// join a pass absorbs each such operand node whose value it alone reads and that is no output, while
/// the group stays within `MAX_MEMBERS`. Marks members `Within` and roots `Fused`, and moves
/// the death of every value a group reads to its root, where the pass reads it.
pub(crate) fn fuse_groups(
    p: &Program,
    steps: &mut [Step],
    last: &mut [Option<usize>],
) -> Vec<Group> {
    let n_in = p.n_inputs();
    let nodes = p.nodes();
    let mut readers: Vec<SmallVec<[usize; 2]>> = vec![SmallVec::new(); p.n_vars()];
    for (i, n) in nodes.iter().enumerate() {
        for o in &n.operands {
            if !readers[o.index()].contains(&i) {
                readers[o.index()].push(i);
            }
        }
    }
    for o in p.outputs() {
        readers[o.index()].push(usize::MAX);
    }
    // Each node's members so far (itself last), and whether a later node absorbed it.
    let mut members: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
    let mut absorbed = vec![false; nodes.len()];
    for (k, node) in nodes.iter().enumerate() {
        // A node joins a pass while still run by its own kernel, if a pass can read its
        // operands; only one reading blocks of its own type takes other members' blocks.
        let Some(read) = reads(p, k).filter(|_| steps[k] == Step::Eval) else {
            continue;
        };
        let blocks = read == Reads::Blocks;
        let mut mine = Vec::new();
        for o in node
            .operands
            .iter()
            .filter(|&&o| blocks && *p.ty(o) == node.ty)
        {
            let Some(j) = o.index().checked_sub(n_in) else {
                continue;
            };
            let fits = mine.len() + members[j].len() < MAX_MEMBERS;
            if !absorbed[j] && !members[j].is_empty() && readers[o.index()][..] == [k] && fits {
                absorbed[j] = true;
                mine.append(&mut members[j]);
            }
        }
        mine.push(k);
        mine.sort_unstable();
        members[k] = mine;
    }
    let mut groups = Vec::new();
    for (root, mine) in members.into_iter().enumerate() {
        if absorbed[root] || mine.len() < 2 {
            continue;
        }
        let group = group_of(p, mine);
        for &e in &group.externals {
            if let Some(l) = &mut last[e.index()] {
                *l = (*l).max(root);
            }
        }
        for &m in &group.members {
            steps[m] = Step::Within;
        }
        steps[root] = Step::Fused(groups.len());
        groups.push(group);
    }
    groups
}

/// The sources and externals of the nodes `members` (in program order, the root last).
fn group_of(p: &Program, members: Vec<usize>) -> Group {
    let n_in = p.n_inputs();
    let mut externals: Vec<Var> = Vec::new();
    let sources = members
        .iter()
        .map(|&m| {
            let ops = &p.nodes()[m].operands;
            ops.iter()
                .map(|&o| {
                    let member = o
                        .index()
                        .checked_sub(n_in)
                        .and_then(|j| members.binary_search(&j).ok());
                    match member {
                        Some(at) => Source::Member(at),
                        None => Source::External(match externals.iter().position(|&e| e == o) {
                            Some(at) => at,
                            None => {
                                externals.push(o);
                                externals.len() - 1
                            }
                        }),
                    }
                })
                .collect()
        })
        .collect();
    let reads = members
        .iter()
        .map(|&m| reads(p, m).unwrap_or(Reads::Blocks))
        .collect();
    Group {
        members,
        sources,
        reads,
        externals,
        into: None,
    }
}

/// A float dtype that fused passes, and small programs in one buffer (`arena.rs`), run on.
pub(super) trait BlockFloat: Float {
    fn block(k: &dyn BlockKernel, x: &[&[Self]], out: &mut [Self]) -> bool;
    fn slice(k: &dyn SliceKernel, x: &[SliceOperand<'_, Self>], out: &mut [Self]);
    fn conventions(k: &dyn BlockKernel, x: &[&[Self]]) -> usize;
    fn array(t: &Tensor) -> Option<&Array<Self>>;
    fn owned(t: Tensor) -> Option<Array<Self>>;
}

impl BlockFloat for f32 {
    fn block(k: &dyn BlockKernel, x: &[&[f32]], out: &mut [f32]) -> bool {
        k.block_f32(x, out)
    }
    fn slice(k: &dyn SliceKernel, x: &[SliceOperand<'_, f32>], out: &mut [f32]) {
        k.slice_f32(x, out)
    }
    fn conventions(k: &dyn BlockKernel, x: &[&[f32]]) -> usize {
        k.conventions_f32(x)
    }
    fn array(t: &Tensor) -> Option<&Array<f32>> {
        t.as_f32()
    }
    fn owned(t: Tensor) -> Option<Array<f32>> {
        match t {
            Tensor::F32(a) => Some(a),
            _ => None,
        }
    }
}

impl BlockFloat for f64 {
    fn block(k: &dyn BlockKernel, x: &[&[f64]], out: &mut [f64]) -> bool {
        k.block_f64(x, out)
    }
    fn slice(k: &dyn SliceKernel, x: &[SliceOperand<'_, f64>], out: &mut [f64]) {
        k.slice_f64(x, out)
    }
    fn conventions(k: &dyn BlockKernel, x: &[&[f64]]) -> usize {
        k.conventions_f64(x)
    }
    fn array(t: &Tensor) -> Option<&Array<f64>> {
        t.as_f64()
    }
    fn owned(t: Tensor) -> Option<Array<f64>> {
        match t {
            Tensor::F64(a) => Some(a),
            _ => None,
        }
    }
}

/// The value of `group`'s root from the values held in `env`: one pass, checking every
/// member's block for non-finite values when `check`, and counting the members' convention
/// points into `report` when given. With `in_place`, the root is written in the buffer of the
/// group's `into` external when `env` holds the only reference to it (taking it from `env`).
/// Where a block fails (a domain or a non-finite value), the members run one by one instead,
/// so that the error is the one their own kernels give; a pass that wrote in place has
/// overwritten what they would read, and fails with a kernel error at the root, for the
/// caller to make the call again on the plain plan.
pub(crate) fn run_group(
    p: &Program,
    group: &Group,
    env: &mut [Option<Tensor>],
    check: bool,
    in_place: bool,
    report: Option<&mut EvalReport>,
) -> Result<Tensor, EvalError> {
    if !group.fits(p) {
        return Err(EvalError::ForeignPlan);
    }
    let root = group.members[group.members.len() - 1];
    let counts: SmallVec<[AtomicUsize; MAX_MEMBERS]> =
        group.members.iter().map(|_| AtomicUsize::new(0)).collect();
    let counting = report.is_some().then_some(&counts[..]);
    let into = group
        .into
        .filter(|_| in_place)
        .and_then(|e| take_unique(&mut env[group.externals[e].index()]));
    let wrote_in_place = into.is_some();
    let env = &*env;
    let fused = match p.nodes()[root].ty.dtype {
        DType::F32 => pass::<f32>(p, group, env, check, counting, into)?.map(Tensor::F32),
        DType::F64 => pass::<f64>(p, group, env, check, counting, into)?.map(Tensor::F64),
        _ => None,
    };
    let Some(value) = fused else {
        if wrote_in_place {
            let stopped = "the fused pass stopped after writing in its operand's buffer";
            return Err(kernel_error(
                p,
                root,
                KernelError::Unsupported(stopped.into()),
            ));
        }
        return one_by_one(p, group, env, check, report);
    };
    if let Some(r) = report {
        let hits = group.members.iter().zip(counts);
        r.conventions
            .extend(hits.filter_map(|(&m, c)| convention_hit(p, m, c.into_inner())));
    }
    Ok(value)
}

/// The value `env` holds in `slot`, taken when it holds the only reference to its buffer.
fn take_unique(slot: &mut Option<Tensor>) -> Option<Tensor> {
    let unique = match slot.as_mut()? {
        Tensor::F32(a) => a.unique_data_mut().is_some(),
        Tensor::F64(a) => a.unique_data_mut().is_some(),
        _ => false,
    };
    unique.then(|| slot.take()).flatten()
}

/// The fused pass, written in `into` (the group's `into` external, taken) when given; `None`
/// when a block failed.
fn pass<T: BlockFloat>(
    p: &Program,
    group: &Group,
    env: &[Option<Tensor>],
    check: bool,
    conventions: Option<&[AtomicUsize]>,
    into: Option<Tensor>,
) -> Result<Option<Array<T>>, EvalError> {
    let nodes = p.nodes();
    let root = group.members[group.members.len() - 1];
    let n = nodes[root].ty.numel();
    let mut into = match into {
        Some(t) => Some(T::owned(t).ok_or(EvalError::ForeignPlan)?),
        None => None,
    };
    // The external read from the result's own blocks, before each is written.
    let read_in_place = group.into.filter(|_| into.is_some());
    let mut externals: SmallVec<[&[T]; 8]> = SmallVec::new();
    for (k, e) in group.externals.iter().enumerate() {
        if read_in_place == Some(k) {
            externals.push(&[]);
            continue;
        }
        let value = env[e.index()].as_ref().and_then(T::array);
        // Only a plan of another program can leave a value missing or of another dtype.
        externals.push(value.ok_or(EvalError::ForeignPlan)?.data());
    }
    let in_place_len = into.as_ref().map(|a| a.len());
    // Each read must lie inside its value (the same check against another program's plan).
    for (sources, reads) in group.sources.iter().zip(&group.reads) {
        let inside = |&s: &Source| match (s, *reads) {
            (Source::Member(_), _) => true,
            (Source::External(e), Reads::Blocks) if read_in_place == Some(e) => {
                in_place_len == Some(n)
            }
            (Source::External(e), Reads::Blocks) => externals[e].len() == n,
            (Source::External(e), Reads::Repeats { len, inner }) => {
                externals[e].len() == len && len > 0 && inner > 0
            }
        };
        if !sources.iter().all(inside) {
            return Err(EvalError::ForeignPlan);
        }
    }
    let mut kernels: SmallVec<[&dyn BlockKernel; MAX_MEMBERS]> = SmallVec::new();
    for &m in &group.members {
        kernels.push(nodes[m].prim.elementwise().ok_or(EvalError::ForeignPlan)?);
    }
    // A broadcast of one value gives every block the same block: it is written once per piece.
    let constant: SmallVec<[Option<T>; MAX_MEMBERS]> = (group.sources.iter().zip(&group.reads))
        .map(|(sources, reads)| match (reads, &sources[..]) {
            (Reads::Repeats { len: 1, .. }, [Source::External(e)]) => Some(externals[*e][0]),
            _ => None,
        })
        .collect();
    if check && constant.iter().flatten().any(|c| !c.is_finite()) {
        return Ok(None);
    }
    let mut fresh = alloc::Elems::new();
    let out = match into.as_mut() {
        // SAFETY: the pass writes only finished values over the elements.
        Some(a) => unsafe { alloc::rewritable(a.unique_data_mut().ok_or(EvalError::ForeignPlan)?) },
        None => {
            fresh = alloc::with_capacity(n).map_err(|e| kernel_error(p, root, e.into()))?;
            &mut fresh.spare_capacity_mut()[..n]
        }
    };
    let failed = AtomicBool::new(false);
    kernels::for_each_piece_at(out, |piece, at| {
        let mut scratch = [[MaybeUninit::<T>::uninit(); BLOCK]; MAX_MEMBERS];
        let width = piece.len().min(BLOCK);
        let mut blocks: SmallVec<[&mut [T]; MAX_MEMBERS]> = (scratch.iter_mut().zip(&constant))
            .map(|(s, c)| {
                let s = &mut s[..width];
                s.iter_mut().for_each(|v| {
                    v.write(c.unwrap_or(T::zero()));
                });
                // SAFETY: every element of `s` was written just above.
                unsafe { alloc::written_mut(s) }
            })
            .collect();
        for (b, piece) in piece.chunks_mut(BLOCK).enumerate() {
            if failed.load(Ordering::Relaxed) {
                return;
            }
            let (start, len) = (at + b * BLOCK, piece.len());
            let members = kernels.iter().zip(&group.sources).zip(&group.reads);
            for (k, ((kernel, sources), reads)) in members.enumerate() {
                if constant[k].is_some() {
                    continue;
                }
                let (done, rest) = blocks.split_at_mut(k);
                let out = &mut rest[0][..len];
                if let (Reads::Repeats { len, inner }, [Source::External(e)]) =
                    (reads, &sources[..])
                {
                    repeat_into(out, externals[*e], start, *len, *inner);
                    if check && T::any_non_finite(out) {
                        failed.store(true, Ordering::Relaxed);
                        return;
                    }
                    continue;
                }
                let mut operands: [&[T]; MAX_OPERANDS] = [&[]; MAX_OPERANDS];
                for (x, s) in operands.iter_mut().zip(sources) {
                    *x = match *s {
                        Source::Member(m) => &done[m][..len],
                        // SAFETY: the block holds the external's values until the root's
                        // are written over them, after every member has read them.
                        Source::External(e) if read_in_place == Some(e) => unsafe {
                            alloc::written(&piece[..])
                        },
                        Source::External(e) => &externals[e][start..start + len],
                    };
                }
                let x = &operands[..sources.len()];
                if let Some(c) = conventions {
                    c[k].fetch_add(T::conventions(*kernel, x), Ordering::Relaxed);
                }
                if !T::block(*kernel, x, out) || (check && T::any_non_finite(out)) {
                    failed.store(true, Ordering::Relaxed);
                    return;
                }
            }
            for (o, &v) in piece.iter_mut().zip(blocks[kernels.len() - 1].iter()) {
                o.write(v);
            }
        }
    });
    if failed.into_inner() {
        return Ok(None);
    }
    if into.is_some() {
        return Ok(into);
    }
    // SAFETY: no block failed, so the pieces' blocks covered all n elements and wrote each.
    unsafe { fresh.set_len(n) };
    Ok(Some(Array::from_parts(nodes[root].ty.shape.clone(), fresh)))
}

/// out[i] = x[((start + i) / inner) % len]: the block at `start` of a broadcast of `x`
/// (`Reads::Repeats`), written run by run: a fill of one value, or a copy of a stretch of `x`.
/// (A broadcast of one value never comes here: the pass writes its block once.)
pub(super) fn repeat_into<T: Float>(
    out: &mut [T],
    x: &[T],
    start: usize,
    len: usize,
    inner: usize,
) {
    let (mut f, mut o) = (start, 0);
    while o < out.len() {
        let q = (f / inner) % len;
        let run = if inner == 1 {
            let run = (len - q).min(out.len() - o);
            out[o..o + run].copy_from_slice(&x[q..q + run]);
            run
        } else {
            let run = (inner - f % inner).min(out.len() - o);
            out[o..o + run].fill(x[q]);
            run
        };
        (f, o) = (f + run, o + run);
    }
}

/// The group's members run by their own kernels, in order, each result checked as evaluation
/// checks a node's: the error is the one the unfused program gives.
fn one_by_one(
    p: &Program,
    group: &Group,
    env: &[Option<Tensor>],
    check: bool,
    mut report: Option<&mut EvalReport>,
) -> Result<Tensor, EvalError> {
    let mut values: SmallVec<[Tensor; MAX_MEMBERS]> = SmallVec::new();
    for (&m, sources) in group.members.iter().zip(&group.sources) {
        let mut x: SmallVec<[&Tensor; 4]> = SmallVec::new();
        for s in sources {
            x.push(match *s {
                Source::Member(k) => values.get(k).ok_or(EvalError::ForeignPlan)?,
                Source::External(e) => env[group.externals[e].index()]
                    .as_ref()
                    .ok_or(EvalError::ForeignPlan)?,
            });
        }
        let prim = &p.nodes()[m].prim;
        if let Some(r) = report.as_deref_mut() {
            r.conventions
                .extend(convention_hit(p, m, prim.convention_points(&x)));
        }
        let value = prim.eval(&x).map_err(|e| kernel_error(p, m, e))?;
        drop(x);
        if check {
            scan_value(p, m, &value)?;
        }
        values.push(value);
    }
    values.pop().ok_or(EvalError::ForeignPlan)
}

#[cfg(test)]
mod tests {
    use super::repeat_into;

    #[test]
    fn repeated_blocks_follow_the_index_formula() {
        let x: Vec<f64> = (0..7).map(f64::from).collect();
        for (len, inner) in [(1, 1), (1, 5), (7, 1), (7, 3), (3, 50)] {
            for start in [0, 1, 6, 20, 149, 1000] {
                let mut out = vec![-1.0; 37];
                repeat_into(&mut out, &x[..len], start, len, inner);
                let want: Vec<f64> = (0..37).map(|i| x[((start + i) / inner) % len]).collect();
                assert_eq!(out, want, "len {len} inner {inner} start {start}");
            }
        }
    }
}
