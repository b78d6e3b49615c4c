//! Small programs run in one buffer. Where every value of a program is of one float type and
//! all of them together are a few kilobytes, a call's cost is evaluation's own work per node (a
//! tensor, a buffer from the pool, a request for the non-finite count), not arithmetic. Such a
//! program gets one buffer, kept by its executable, with a slot for each value, and each node's
//! kernel writes its value into its slot from its operands' slots (`docs/memory.md`, "Small
//! programs"). Every kernel computes as the node's own does, so the results are the
//! interpreter's, bit for bit.

use smallvec::SmallVec;

use super::fuse::{repeat_into, BlockFloat};
use crate::ir::{Program, Reads, ResultStorage, SliceOperand, Var};
use crate::tensor::{alloc, Array, DType, Tensor};

/// The most bytes of all of a program's values together for it to run in one buffer: a
/// quarter of a core's first-level data cache, so that the buffer stays in it.
const MAX_BYTES: usize = 8 << 10;

/// The most operands of a node run in the buffer.
const MAX_OPERANDS: usize = 4;

/// How a node writes its slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kernel {
    /// Its block kernel (`ir::BlockKernel`), on operands of its own type.
    Block,
    /// A broadcast: result element `f` is operand element `(f / inner) % len`.
    Repeats { len: usize, inner: usize },
    /// Its slice kernel (`ir::SliceKernel`).
    Slice,
    /// Its value is its operand's, in the operand's slot (`ResultStorage::Operand`).
    Shared,
    /// Its value is the program's (`constant`), written once when the buffer is made.
    Held,
}

/// Where each value of a program lies in its one buffer, and how each node writes its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ArenaPlan {
    dtype: DType,
    /// Each value's first element and length, inputs first, then nodes.
    slots: Vec<(usize, usize)>,
    kernels: Vec<Kernel>,
    /// Where the nodes' own slots begin: every slot from here on is a node's.
    nodes_at: usize,
    len: usize,
}

/// A buffer made for an [`ArenaPlan`], holding the values of the last call.
#[derive(Debug)]
pub(super) enum Arena {
    F32(Vec<f32>),
    F64(Vec<f64>),
}

/// How node `i` of `p` writes its slot, if it can.
fn kernel_of(p: &Program, i: usize) -> Option<Kernel> {
    let node = &p.nodes()[i];
    let inputs: SmallVec<[_; MAX_OPERANDS]> =
        node.operands.iter().map(|&o| p.ty(o).clone()).collect();
    if inputs.len() > MAX_OPERANDS {
        return None;
    }
    match node.prim.result_storage() {
        ResultStorage::Operand => {
            let same = inputs.first().is_some_and(|t| t.numel() == node.ty.numel());
            return same.then_some(Kernel::Shared);
        }
        ResultStorage::Program => return inputs.is_empty().then_some(Kernel::Held),
        ResultStorage::Own => {}
    }
    if let Some(block) = node.prim.elementwise() {
        match block.reads(&inputs, &node.ty) {
            Some(Reads::Blocks) => return Some(Kernel::Block),
            Some(Reads::Repeats { len, inner }) if len > 0 && inner > 0 && inputs.len() == 1 => {
                return Some(Kernel::Repeats { len, inner })
            }
            _ => {}
        }
    }
    let slice = node.prim.slice_kernel()?;
    slice.serves(&inputs, &node.ty).then_some(Kernel::Slice)
}

impl ArenaPlan {
    /// The plan of `p` in one buffer, when every value is of one float type, they all fit in
    /// `MAX_BYTES`, and every node has a kernel that writes into a slot.
    pub(super) fn new(p: &Program) -> Option<ArenaPlan> {
        let n_in = p.n_inputs();
        let dtype = (p.n_vars() > 0).then(|| p.ty(Var(0)).dtype)?;
        if !matches!(dtype, DType::F32 | DType::F64) {
            return None;
        }
        let mut slots = Vec::with_capacity(p.n_vars());
        let mut kernels = Vec::with_capacity(p.nodes().len());
        let mut len = 0usize;
        let mut nodes_at = 0;
        for v in 0..p.n_vars() {
            if v == n_in {
                nodes_at = len;
            }
            let ty = p.ty(Var(v as u32));
            if ty.dtype != dtype {
                return None;
            }
            let kernel = if v >= n_in {
                Some(kernel_of(p, v - n_in)?)
            } else {
                None
            };
            if let Some(k) = kernel {
                kernels.push(k);
            }
            if kernel == Some(Kernel::Shared) {
                let operand = p.nodes()[v - n_in].operands[0].index();
                slots.push(slots[operand]);
            } else {
                slots.push((len, ty.numel()));
                len = len.checked_add(ty.numel())?;
            }
            if len.checked_mul(dtype.size())? > MAX_BYTES {
                return None;
            }
        }
        Some(ArenaPlan {
            dtype,
            slots,
            kernels,
            nodes_at,
            len,
        })
    }

    /// A buffer for this plan, with the program's constants written in their slots; `None`
    /// where one cannot be made (the allocation or a constant failed).
    pub(super) fn buffer(&self, p: &Program) -> Option<Arena> {
        let mut arena = match self.dtype {
            DType::F32 => Arena::F32(alloc::filled(self.len, 0.0).ok()?.into_vec()),
            _ => Arena::F64(alloc::filled(self.len, 0.0).ok()?.into_vec()),
        };
        let n_in = p.n_inputs();
        for (i, k) in self.kernels.iter().enumerate() {
            if *k != Kernel::Held {
                continue;
            }
            let value = p.nodes()[i].prim.eval(&[]).ok()?;
            let (at, len) = self.slots[n_in + i];
            match (&mut arena, &value) {
                (Arena::F32(b), Tensor::F32(v)) if v.len() == len => {
                    b[at..at + len].copy_from_slice(v.data())
                }
                (Arena::F64(b), Tensor::F64(v)) if v.len() == len => {
                    b[at..at + len].copy_from_slice(v.data())
                }
                _ => return None,
            }
        }
        Some(arena)
    }

    /// Evaluates `p` on `inputs` in `arena`, writing the results to `results`. `None` (with
    /// `results` empty) where it cannot give the interpreter's results: an input of another
    /// type, a value outside a kernel's domain, a non-finite value when `check` (so that the
    /// caller evaluates on tensors, which names the node), or a result that could not be
    /// allocated.
    pub(super) fn run(
        &self,
        p: &Program,
        arena: &mut Arena,
        inputs: &[Tensor],
        check: bool,
        results: &mut Vec<Tensor>,
    ) -> Option<()> {
        results.clear();
        let done = match arena {
            Arena::F32(buffer) => self.run_in(p, buffer, inputs, check, results),
            Arena::F64(buffer) => self.run_in(p, buffer, inputs, check, results),
        };
        if done.is_none() {
            results.clear();
        }
        done
    }

    fn run_in<T: BlockFloat>(
        &self,
        p: &Program,
        buffer: &mut [T],
        inputs: &[Tensor],
        check: bool,
        results: &mut Vec<Tensor>,
    ) -> Option<()>
    where
        Tensor: From<Array<T>>,
    {
        let n_in = p.n_inputs();
        if inputs.len() != n_in || buffer.len() != self.len {
            return None;
        }
        for ((x, decl), &(at, len)) in inputs.iter().zip(p.inputs()).zip(&self.slots) {
            let x = T::array(x).filter(|x| *x.shape() == decl.ty.shape)?;
            buffer[at..at + len].copy_from_slice(x.data());
        }
        for ((node, kernel), &(at, len)) in
            (p.nodes().iter().zip(&self.kernels)).zip(&self.slots[n_in..])
        {
            if matches!(kernel, Kernel::Shared | Kernel::Held) {
                // A copy of an input is checked as the interpreter checks it; every slot of
                // the nodes' own is checked once, after the last node.
                if check && at < self.nodes_at && T::any_non_finite(&buffer[at..at + len]) {
                    return None;
                }
                continue;
            }
            // Every other node has a slot of its own, apart from its operands'.
            let (before, rest) = buffer.split_at_mut(at);
            let (out, after) = rest.split_at_mut(len);
            let slot = |o: &Var| {
                let (from, n) = self.slots[o.index()];
                if from < at {
                    &before[from..from + n]
                } else {
                    &after[from - at - len..][..n]
                }
            };
            match *kernel {
                Kernel::Block => {
                    let mut x: [&[T]; MAX_OPERANDS] = [&[]; MAX_OPERANDS];
                    for (x, o) in x.iter_mut().zip(&node.operands) {
                        *x = slot(o);
                    }
                    let x = &x[..node.operands.len()];
                    if !T::block(node.prim.elementwise()?, x, out) {
                        return None;
                    }
                }
                Kernel::Repeats { len, inner } => {
                    repeat_into(out, slot(&node.operands[0]), 0, len, inner)
                }
                Kernel::Slice => {
                    let none = SliceOperand {
                        data: &[],
                        dims: &[],
                    };
                    let mut x = [none; MAX_OPERANDS];
                    for (x, o) in x.iter_mut().zip(&node.operands) {
                        *x = SliceOperand {
                            data: slot(o),
                            dims: p.ty(*o).dims(),
                        };
                    }
                    let x = &x[..node.operands.len()];
                    T::slice(node.prim.slice_kernel()?, x, out);
                }
                Kernel::Shared | Kernel::Held => {}
            }
        }
        // One test of every node's value: a value that is not finite leaves the call to the
        // evaluation on tensors, which names the first node that made one.
        if check && T::any_non_finite(&buffer[self.nodes_at..]) {
            return None;
        }
        results.reserve(p.outputs().len());
        for o in p.outputs() {
            let (at, len) = self.slots[o.index()];
            let mut data = alloc::with_capacity(len).ok()?;
            data.extend_copied(&buffer[at..at + len]);
            let shape = p.ty(*o).shape.clone();
            results.push(Tensor::from(Array::from_parts(shape, data)));
        }
        Some(())
    }
}
