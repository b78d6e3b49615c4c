//! Values checked by the node that reads them next. The non-finite check of a large value
//! made by a product re-reads it from memory after the product wrote it; where the very next
//! node is an elementwise pass over it, which writes over it where it dies, that pass counts
//! it instead, each block while it is in cache, just before reading it (`tensor::checked`,
//! `docs/memory.md`, "The non-finite check"). Nothing runs between the two, so the node named
//! on failure is the one the interpreter names.

use super::plan::Step;
use crate::ir::Program;
use crate::tensor::kernels::COUNTED_MIN;

/// For each node of `p`, whether its value is made unchecked and checked by its next reader,
/// given each node's step (`steps`, empty: every kernel runs) and each value's last reader.
/// A value qualifies when it is a float value of at least [`COUNTED_MIN`] elements, made by
/// a kernel (`Step::Eval`, or the product a sum is folded into), not an output, and the next
/// node that runs is a plain kernel run of a node that reads it last, has its type, and
/// writes in its operand's buffer in a counted elementwise pass (`Primitive::elementwise`,
/// `writes_in_operand`, `counts_non_finite`).
pub(crate) fn reader_checks(p: &Program, steps: &[Step], last: &[Option<usize>]) -> Vec<bool> {
    let n_in = p.n_inputs();
    let nodes = p.nodes();
    let step = |i: usize| steps.get(i).copied().unwrap_or(Step::Eval);
    let mut checked = vec![false; nodes.len()];
    for i in 0..nodes.len() {
        let made = match step(i) {
            Step::Eval => i,
            Step::AddInto { sum, .. } => sum,
            _ => continue,
        };
        let Some(v) = nodes.get(made) else {
            continue;
        };
        let var = n_in + made;
        let large = v.ty.dtype.is_float() && v.ty.numel() >= COUNTED_MIN;
        let Some(r) = (i + 1..nodes.len()).find(|&r| step(r) != Step::Made) else {
            continue;
        };
        let reader = &nodes[r];
        let inputs: Vec<_> = reader.operands.iter().map(|&o| p.ty(o).clone()).collect();
        checked[made] = large
            && last[var] == Some(r)
            && step(r) == Step::Eval
            && reader.operands.iter().any(|o| o.index() == var)
            && reader.ty == v.ty
            && reader.prim.elementwise().is_some()
            && reader.prim.writes_in_operand(&inputs, &reader.ty)
            && reader.prim.counts_non_finite(&reader.ty);
    }
    checked
}
