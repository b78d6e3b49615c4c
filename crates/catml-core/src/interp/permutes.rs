//! Permutes read and written in place. A permute whose readers all read their operands
//! through strides (`Primitive::permuted`) is never copied: its value is its operand's buffer,
//! read through the permutation. A permute of a value read by nothing else, made by such a
//! kernel, is written by that kernel in the permuted layout (`docs/memory.md`, "Permutes read
//! in place").

use smallvec::SmallVec;

use super::plan::Step;
use crate::ir::{Program, Var};
use crate::tensor::TensorType;

/// How a node's permuted kernel runs.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct PermutedRun {
    /// Each operand's permutation, where the operand is a permute read in place.
    pub operands: SmallVec<[Option<Vec<usize>>; 4]>,
    /// The permutation the result is written through, and the permute node whose value that
    /// makes.
    pub result: Option<(Vec<usize>, usize)>,
}

fn operand_types(p: &Program, i: usize) -> Vec<TensorType> {
    p.nodes()[i]
        .operands
        .iter()
        .map(|&o| p.ty(o).clone())
        .collect()
}

/// Node `i`'s run, reading every operand as it is until told otherwise.
fn run_of<'a>(runs: &'a mut [Option<PermutedRun>], p: &Program, i: usize) -> &'a mut PermutedRun {
    runs[i].get_or_insert_with(|| PermutedRun {
        operands: smallvec::smallvec![None; p.nodes()[i].operands.len()],
        result: None,
    })
}

/// Rewrites `steps` (each node's `Step::Eval` so far, or another step left as it is) to read
/// and write permutes in place; returns the runs that `Step::Permuted` names. A permute read
/// in place holds its operand's buffer as its own value, so that the operand's value itself
/// goes where it dies, at the latest at the permute.
pub(crate) fn permute_in_place(p: &Program, steps: &mut [Step]) -> Vec<PermutedRun> {
    let n_in = p.n_inputs();
    let nodes = p.nodes();
    let mut readers: Vec<Vec<(usize, usize)>> = vec![Vec::new(); p.n_vars()];
    for (i, n) in nodes.iter().enumerate() {
        for (k, o) in n.operands.iter().enumerate() {
            readers[o.index()].push((i, k));
        }
    }
    for o in p.outputs() {
        // An output is read by the caller, as a whole.
        readers[o.index()].push((usize::MAX, 0));
    }
    let mut runs: Vec<Option<PermutedRun>> = vec![None; nodes.len()];
    for (i, node) in nodes.iter().enumerate() {
        let Some(perm) = node.prim.permutation() else {
            continue;
        };
        if steps[i] != Step::Eval || readers[n_in + i].contains(&(usize::MAX, 0)) {
            continue;
        }
        let source = node.operands[0];
        let Some(j) = source.index().checked_sub(n_in) else {
            continue;
        };
        // Written by the kernel making its operand, when that value is read by it alone.
        let writes = steps[j] == Step::Eval
            && readers[source.index()] == [(i, 0)]
            && nodes[j]
                .prim
                .permuted()
                .is_some_and(|k| k.writes(&operand_types(p, j), perm));
        if writes {
            run_of(&mut runs, p, j).result = Some((perm.to_vec(), i));
            steps[i] = Step::Written;
            continue;
        }
        // Read in place when every reader reads it through strides.
        let by_readers = !readers[n_in + i].is_empty()
            && !matches!(steps[j], Step::View | Step::Within)
            && readers[n_in + i].iter().all(|&(r, k)| {
                steps[r] == Step::Eval
                    && nodes[r]
                        .prim
                        .permuted()
                        .is_some_and(|kernel| kernel.reads(&operand_types(p, r), k, perm))
            });
        if !by_readers {
            continue;
        }
        for &(r, k) in &readers[n_in + i] {
            run_of(&mut runs, p, r).operands[k] = Some(perm.to_vec());
        }
        steps[i] = Step::View;
    }
    let mut made = Vec::new();
    for (i, r) in runs.into_iter().enumerate() {
        if let Some(r) = r {
            steps[i] = Step::Permuted(made.len());
            made.push(r);
        }
    }
    made
}

/// Whether `steps` and `runs` could be `p`'s permutes in place: each view and each written
/// permute is a permute of `p` read or written by kernels that said they can, as
/// `permute_in_place` leaves them. (A plan of another program could otherwise read a value
/// through strides it does not have.)
pub(crate) fn permutes_fit(steps: &[Step], runs: &[PermutedRun], p: &Program) -> bool {
    let n_in = p.n_inputs();
    let nodes = p.nodes();
    let mut written = 0;
    for (i, step) in steps.iter().enumerate() {
        let Step::Permuted(r) = *step else {
            continue;
        };
        let (Some(run), Some(kernel)) = (runs.get(r), nodes[i].prim.permuted()) else {
            return false;
        };
        let types = operand_types(p, i);
        if run.operands.len() != types.len() {
            return false;
        }
        for (k, perm) in run.operands.iter().enumerate() {
            let Some(perm) = perm else { continue };
            let view = nodes[i].operands[k].index().checked_sub(n_in);
            let fits = view.is_some_and(|v| {
                steps[v] == Step::View && nodes[v].prim.permutation() == Some(perm.as_slice())
            }) && kernel.reads(&types, k, perm);
            if !fits {
                return false;
            }
        }
        if let Some((perm, into)) = &run.result {
            let fits = nodes.get(*into).is_some_and(|n| {
                n.operands[..] == [Var((n_in + i) as u32)]
                    && n.prim.permutation() == Some(perm.as_slice())
            }) && steps[*into] == Step::Written
                && kernel.writes(&types, perm);
            if !fits {
                return false;
            }
            written += 1;
        }
    }
    // Every reader of a view reads it through its permute, and no output is one.
    for (v, step) in steps.iter().enumerate() {
        if *step != Step::View {
            continue;
        }
        let var = Var((n_in + v) as u32);
        let perm = nodes[v].prim.permutation();
        let read_through = nodes.iter().zip(steps).all(|(n, s)| {
            n.operands.iter().enumerate().all(|(k, o)| {
                *o != var
                    || matches!(*s, Step::Permuted(r) if runs[r].operands[k].as_deref() == perm)
            })
        });
        if !read_through || p.outputs().contains(&var) {
            return false;
        }
    }
    steps.iter().filter(|s| **s == Step::Written).count() == written
}
