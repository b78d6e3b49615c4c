//! Sums folded into the kernels that make one of their operands. Where `s = add(p, q)` and `p`
//! is read nowhere else, the node making `p` adds its result straight into `q`'s buffer (or a
//! copy of it), as a GEMM accumulates into its destination; `s` then needs no pass of its own,
//! and `p` is never held (`docs/memory.md`, "Folded sums").

use super::plan::Step;
use crate::ir::{Program, Var};
use crate::tensor::alloc::{self, AllocError};
use crate::tensor::{Array, Float, Tensor};

/// The step of each node of `p`, given each value's last reader (`plan::dying`): a sum is
/// folded into the node making one operand when that operand is read only by the sum, is not
/// an output, comes from a kernel that can add into a value (`Primitive::adds_into`), and
/// the other operand already exists when that kernel runs. The other operand's buffer is
/// taken when nothing reads it from then on but the sum.
pub(crate) fn fold_sums(p: &Program, last: &[Option<usize>]) -> Vec<Step> {
    let n_in = p.n_inputs();
    let nodes = p.nodes();
    let mut readers: Vec<Vec<usize>> = vec![Vec::new(); p.n_vars()];
    for (i, n) in nodes.iter().enumerate() {
        for o in &n.operands {
            readers[o.index()].push(i);
        }
    }
    let outputs: Vec<usize> = p.outputs().iter().map(|o| o.index()).collect();
    // Where each node's value is made: its own position, or that of the node adding into it.
    let mut made_at: Vec<usize> = (0..nodes.len()).collect();
    let mut steps = vec![Step::Eval; nodes.len()];
    for (j, sum) in nodes.iter().enumerate() {
        let [x, y] = sum.operands[..] else {
            continue;
        };
        if x == y || !sum.prim.sums_operands() {
            continue;
        }
        for (made, addend) in [(x, y), (y, x)] {
            let Some(i) = made.index().checked_sub(n_in) else {
                continue;
            };
            let maker = &nodes[i];
            let types: Vec<_> = maker.operands.iter().map(|&o| p.ty(o).clone()).collect();
            let foldable = steps[i] == Step::Eval
                && readers[made.index()] == [j]
                && !outputs.contains(&made.index())
                && maker.ty == sum.ty
                && maker.prim.adds_into(&types);
            let before = match addend.index().checked_sub(n_in) {
                None => true,
                Some(k) => made_at[k] < i,
            };
            if !foldable || !before {
                continue;
            }
            let take = addend.index() >= n_in
                && last[addend.index()] == Some(j)
                && readers[addend.index()].iter().all(|&r| r < i || r == j);
            steps[i] = Step::AddInto {
                addend,
                take,
                sum: j,
            };
            steps[j] = Step::Made;
            made_at[j] = i;
            break;
        }
    }
    steps
}

/// Whether `steps` could be `p`'s folded sums: each product adds into an operand of a sum of
/// `p` whose other operand it makes, and the sums it names are the nodes marked made. (A plan
/// of another program could otherwise fold a node that is not a sum.)
pub(crate) fn steps_fit(steps: &[Step], p: &Program) -> bool {
    if steps.is_empty() {
        return true;
    }
    let nodes = p.nodes();
    let n_in = p.n_inputs();
    let folds = steps.iter().enumerate().filter_map(|(i, s)| match *s {
        Step::AddInto { addend, sum, .. } => Some((i, addend, sum)),
        _ => None,
    });
    let mut sums = 0;
    for (i, addend, sum) in folds {
        let made = Var((n_in + i) as u32);
        let fits = nodes.get(sum).is_some_and(|s| {
            s.prim.sums_operands()
                && (s.operands[..] == [made, addend] || s.operands[..] == [addend, made])
        }) && steps[sum] == Step::Made;
        if !fits {
            return false;
        }
        sums += 1;
    }
    steps.len() == nodes.len() && steps.iter().filter(|s| **s == Step::Made).count() == sums
}

/// `v` with a buffer of its own, for a kernel to add into: `v` itself when nothing shares its
/// buffer, else a copy. Only f32 and f64 values are added into.
pub(crate) fn unshared(v: Tensor) -> Result<Tensor, AllocError> {
    fn own<T: Float>(mut a: Array<T>) -> Result<Array<T>, AllocError> {
        if a.unique_data_mut().is_some() {
            return Ok(a);
        }
        let mut data = alloc::with_capacity(a.len())?;
        data.extend_copied(a.data());
        Ok(Array::from_parts(a.shape().clone(), data))
    }
    Ok(match v {
        Tensor::F32(a) => Tensor::F32(own(a)?),
        Tensor::F64(a) => Tensor::F64(own(a)?),
        other => other,
    })
}
