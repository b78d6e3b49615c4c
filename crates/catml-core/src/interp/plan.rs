//! What evaluating a program needs to know before it starts, worked out once from types: where
//! each value dies, that no value is too large, and the peak of live bytes (`docs/memory.md`).

use smallvec::SmallVec;

use super::budget::budget_for;
use super::eval::{EvalError, MAX_VALUE_BYTES};
use super::fold::{fold_sums, steps_fit};
use super::fuse::{fuse_groups, Group};
use super::permutes::{permute_in_place, permutes_fit, PermutedRun};
use super::reader_checks::reader_checks;
use crate::ir::{Program, ResultStorage, Var};
use crate::tensor::TensorType;

/// What evaluation does at a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// Runs the node's kernel.
    Eval,
    /// Adds the node's result into the value of `addend` (taken when `take`, else copied),
    /// which becomes the value of node `sum` (`fold.rs`).
    AddInto { addend: Var, take: bool, sum: usize },
    /// Nothing: the value was made earlier, by the node that added into it.
    Made,
    /// Runs the fused pass of this group of the plan, of which the node is the root
    /// (`fuse.rs`).
    Fused(usize),
    /// Nothing: the node runs inside its group's fused pass, and its value is never held.
    Within,
    /// Runs the node's permuted kernel as run `k` of the plan says (`permutes.rs`).
    Permuted(usize),
    /// Nothing is copied: this permute's value is its operand's buffer, which its readers read
    /// through the permutation (`permutes.rs`).
    View,
    /// Nothing: this permute's value was written, permuted, by the node making its operand.
    Written,
}

/// The largest total of live values while evaluating in order, and where it is reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peak {
    /// Bytes: every input (the caller holds them throughout), plus the node results alive at
    /// the peak.
    pub bytes: u64,
    /// The node whose result brings the total to the peak; `None` when the inputs alone are
    /// the peak.
    pub node: Option<usize>,
}

/// When each value of a program dies, and its peak of live bytes, computed once and reused by
/// every evaluation of the program.
///
/// ```
/// use catml_core::interp::{eval_planned, EvalOptions, EvalPlan};
/// use catml_core::ir::json;
/// use catml_core::prim::builtins;
/// use catml_core::tensor::Tensor;
///
/// let text = r#"{"format": "lensir-module/1", "inputs": [{"name": "x", "shape": [4]}],
///     "nodes": [{"name": "y", "op": "tanh", "operands": ["x"]}], "outputs": ["y"]}"#;
/// let p = json::from_str(text, builtins()).unwrap();
/// let plan = EvalPlan::new(&p).unwrap();
/// assert_eq!(plan.peak().bytes, 64); // x and y, four f64 each
/// let x = Tensor::f64([4], vec![0.0; 4]).unwrap();
/// assert_eq!(eval_planned(&p, &plan, &[x], EvalOptions::default()).unwrap().len(), 1);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvalPlan {
    /// The node after which each value is dropped; `None` for outputs and unread values.
    pub(crate) last: Vec<Option<usize>>,
    /// The peak of live bytes evaluating by this plan.
    peak: Peak,
    /// The peak evaluating every node's kernel in order (`EvalPlan::new`'s), to refuse a plan
    /// made for another program.
    plain_peak: Peak,
    /// The program's input, node and operand counts, to refuse a plan made for another.
    shape: (usize, usize, usize),
    /// What to do at each node, when sums are folded (`fold.rs`) or passes fused (`fuse.rs`);
    /// empty: run every kernel.
    pub(crate) steps: Vec<Step>,
    /// The fused passes that `Step::Fused` names.
    pub(crate) groups: Vec<Group>,
    /// The permuted kernels' runs that `Step::Permuted` names.
    pub(crate) permuted: Vec<PermutedRun>,
    /// For each node, whether its value is checked by the node reading it next
    /// (`reader_checks.rs`); empty: every value is checked where it is made.
    read_checks: Vec<bool>,
}

fn shape_of(p: &Program) -> (usize, usize, usize) {
    let operands = p.nodes().iter().map(|n| n.operands.len()).sum();
    (p.n_inputs(), p.n_nodes(), operands)
}

impl EvalPlan {
    /// The plan of `p`; a node whose value alone exceeds [`MAX_VALUE_BYTES`] is an error.
    pub fn new(p: &Program) -> Result<EvalPlan, EvalError> {
        for (i, node) in p.nodes().iter().enumerate() {
            let bytes = node.ty.bytes() as u64;
            if bytes > MAX_VALUE_BYTES {
                return Err(EvalError::TooLarge {
                    index: i,
                    name: node.name.clone(),
                    op: node.prim.name().to_string(),
                    bytes,
                    limit: MAX_VALUE_BYTES,
                });
            }
        }
        let last = dying(p);
        let peak = peak_of(p, &last, &[], &[]);
        Ok(EvalPlan {
            peak,
            plain_peak: peak,
            last,
            shape: shape_of(p),
            steps: Vec::new(),
            groups: Vec::new(),
            permuted: Vec::new(),
            read_checks: Vec::new(),
        })
    }

    /// This plan of `p`, with each sum that a product can accumulate into folded into that
    /// product (`docs/memory.md`, "Folded sums"). A folded value is made where its product
    /// runs and the product's own value never exists, so the peak does not grow. Results may
    /// differ from the unfolded plan's in rounding, within the product's budget
    /// (`docs/budgets.md`).
    pub fn folding_sums(mut self, p: &Program) -> EvalPlan {
        if self.fits(p) {
            self.steps = fold_sums(p, &self.last);
            self.peak = peak_of(p, &self.last, &self.steps, &self.groups);
        }
        self
    }

    /// This plan of `p`, with chains of elementwise nodes run as one pass each
    /// (`docs/memory.md`, "Fused elementwise passes"): values are the unfused plan's, bit for
    /// bit, and only each chain's last value is held. A value a chain reads is held until the
    /// chain's pass; where that would raise the peak, nothing is fused.
    ///
    /// ```
    /// use catml_core::interp::{eval, eval_planned, EvalOptions, EvalPlan};
    /// use catml_core::ir::json;
    /// use catml_core::prim::builtins;
    /// use catml_core::tensor::Tensor;
    ///
    /// let text = r#"{"format": "lensir-module/1", "inputs": [{"name": "x", "shape": [3]}],
    ///     "nodes": [{"name": "e", "op": "exp", "operands": ["x"]},
    ///               {"name": "y", "op": "mul", "operands": ["e", "x"]}], "outputs": ["y"]}"#;
    /// let p = json::from_str(text, builtins()).unwrap();
    /// let plan = EvalPlan::new(&p).unwrap().fusing_passes(&p);
    /// assert_eq!(plan.fused_passes(), 1); // e is never held
    /// let x = Tensor::f64([3], vec![0.5, -1.0, 2.0]).unwrap();
    /// let fused = eval_planned(&p, &plan, &[x.clone()], EvalOptions::default()).unwrap();
    /// assert_eq!(fused, eval(&p, &[x]).unwrap());
    /// ```
    pub fn fusing_passes(self, p: &Program) -> EvalPlan {
        let Some((mut steps, mut last)) = self.to_rewrite(p) else {
            return self;
        };
        let mut groups = fuse_groups(p, &mut steps, &mut last);
        // A folded product takes its addend's buffer only where the sum is its last reader.
        for step in &mut steps {
            if let Step::AddInto { addend, take, sum } = step {
                *take &= last[addend.index()] == Some(*sum);
            }
        }
        let buffers = Buffers::of(p, &last, &steps);
        let reused = written_in_operands(p, &last, &steps, &groups, &buffers);
        // A pass writes its root in the external whose buffer no other value needs, if any.
        for group in &mut groups {
            let root = group.members[group.members.len() - 1];
            group.into = reused[root].and_then(|b| {
                (group.externals.iter()).position(|e| buffers.owner[e.index()] == Some(b))
            });
        }
        let peak = peak_with(p, &steps, &buffers, &reused);
        if groups.is_empty() || peak.bytes > self.peak.bytes {
            return self;
        }
        EvalPlan {
            last,
            peak,
            steps,
            groups,
            ..self
        }
    }

    /// This plan of `p`, with permutes read and written in place (`docs/memory.md`, "Permutes
    /// read in place"): a permute whose readers all read it through strides is never copied,
    /// and one of a value read by it alone is written permuted by the node making that value.
    /// Values are the plan's without it, bit for bit, and no value is held longer than the
    /// permute it replaces was.
    ///
    /// ```
    /// use catml_core::interp::{eval, eval_planned, EvalOptions, EvalPlan};
    /// use catml_core::ir::json;
    /// use catml_core::prim::builtins;
    /// use catml_core::tensor::Tensor;
    ///
    /// let text = r#"{"format": "lensir-module/1",
    ///     "inputs": [{"name": "a", "shape": [2, 3, 4]}, {"name": "b", "shape": [3, 4, 5]}],
    ///     "nodes": [{"name": "e", "op": "exp", "operands": ["a"]},
    ///               {"name": "t", "op": "permute", "operands": ["e"], "attrs": {"perm": [1, 0, 2]}},
    ///               {"name": "y", "op": "batch_matmul", "operands": ["t", "b"]}],
    ///     "outputs": ["y"]}"#;
    /// let p = json::from_str(text, builtins()).unwrap();
    /// let plan = EvalPlan::new(&p).unwrap().permuting_in_place(&p);
    /// assert_eq!(plan.permutes_in_place(), 1); // t is never copied
    /// let a = Tensor::f64([2, 3, 4], (0..24).map(|i| i as f64 / 24.0).collect()).unwrap();
    /// let b = Tensor::f64([3, 4, 5], (0..60).map(|i| 1.0 - i as f64 / 30.0).collect()).unwrap();
    /// let inputs = [a, b];
    /// let y = eval_planned(&p, &plan, &inputs, EvalOptions::default()).unwrap();
    /// assert_eq!(y, eval(&p, &inputs).unwrap());
    /// ```
    pub fn permuting_in_place(self, p: &Program) -> EvalPlan {
        let Some((mut steps, _)) = self.to_rewrite(p) else {
            return self;
        };
        let permuted = permute_in_place(p, &mut steps);
        if permuted.is_empty() {
            return self;
        }
        EvalPlan {
            peak: peak_of(p, &self.last, &steps, &self.groups),
            steps,
            permuted,
            ..self
        }
    }

    /// This plan of `p` with sums folded, passes fused and permutes read and written in place,
    /// as [`Executable::new`](super::Executable::new) plans; its peak is an executable's.
    ///
    /// ```
    /// use catml_core::interp::EvalPlan;
    /// use catml_core::ir::json;
    /// use catml_core::prim::builtins;
    ///
    /// let text = r#"{"format": "lensir-module/1", "inputs": [{"name": "x", "shape": [4]}],
    ///     "nodes": [{"name": "e", "op": "exp", "operands": ["x"]},
    ///               {"name": "y", "op": "tanh", "operands": ["e"]}], "outputs": ["y"]}"#;
    /// let p = json::from_str(text, builtins()).unwrap();
    /// let plain = EvalPlan::new(&p).unwrap();
    /// assert_eq!(plain.peak().bytes, 64); // x, and e, whose buffer tanh writes y in
    /// let compiled = plain.compiled(&p);
    /// assert_eq!(compiled.fused_passes(), 1); // e is never held
    /// assert_eq!(compiled.peak().bytes, 64); // x and y
    /// ```
    pub fn compiled(self, p: &Program) -> EvalPlan {
        self.folding_sums(p)
            .fusing_passes(p)
            .permuting_in_place(p)
            .checking_in_readers(p)
    }

    /// This plan of `p`, with each large value that the next node reads in an elementwise
    /// pass over it left for that pass to check, block by block as it reads it, instead of
    /// being read again where it is made (`docs/memory.md`, "Values checked by their
    /// reader"). The values, and the error of a value that is not finite, are the plan's
    /// without it.
    ///
    /// ```
    /// use catml_core::interp::{eval_planned, EvalError, EvalOptions, EvalPlan};
    /// use catml_core::ir::json;
    /// use catml_core::prim::builtins;
    /// use catml_core::tensor::Tensor;
    ///
    /// let text = r#"{"format": "lensir-module/1",
    ///     "inputs": [{"name": "a", "shape": [64, 64]}, {"name": "b", "shape": [64, 64]}],
    ///     "nodes": [{"name": "p", "op": "matmul", "operands": ["a", "b"]},
    ///               {"name": "y", "op": "tanh", "operands": ["p"]}], "outputs": ["y"]}"#;
    /// let p = json::from_str(text, builtins()).unwrap();
    /// let plan = EvalPlan::new(&p).unwrap().checking_in_readers(&p);
    /// assert_eq!(plan.checks_in_readers(), 1); // tanh checks the product as it reads it
    /// let big = Tensor::f64([64, 64], vec![1e300; 4096]).unwrap();
    /// let err = eval_planned(&p, &plan, &[big.clone(), big], EvalOptions::default());
    /// assert!(matches!(err, Err(EvalError::NonFinite { index: 0, count: 4096, first: 0, .. })));
    /// ```
    pub fn checking_in_readers(self, p: &Program) -> EvalPlan {
        if !self.fits(p) {
            return self;
        }
        let read_checks = reader_checks(p, &self.steps, &self.last);
        if !read_checks.contains(&true) {
            return self;
        }
        EvalPlan {
            read_checks,
            ..self
        }
    }

    /// Whether node `i`'s value is checked by the node reading it next.
    pub(crate) fn checked_by_reader(&self, i: usize) -> bool {
        self.read_checks.get(i).copied().unwrap_or(false)
    }

    /// How many values are checked by the node reading them next.
    pub fn checks_in_readers(&self) -> usize {
        self.read_checks.iter().filter(|&&c| c).count()
    }

    /// Each node's step and each value's last reader, for a pass to rewrite; `None` when this
    /// plan is not `p`'s.
    fn to_rewrite(&self, p: &Program) -> Option<(Vec<Step>, Vec<Option<usize>>)> {
        if !self.fits(p) {
            return None;
        }
        let steps = match self.steps.is_empty() {
            true => vec![Step::Eval; p.n_nodes()],
            false => self.steps.clone(),
        };
        Some((steps, self.last.clone()))
    }

    /// How many permutes are read or written in place.
    pub fn permutes_in_place(&self) -> usize {
        let in_place = |s: &&Step| matches!(s, Step::View | Step::Written);
        self.steps.iter().filter(in_place).count()
    }

    /// How many sums are folded.
    pub fn folded_sums(&self) -> usize {
        self.steps.iter().filter(|s| **s == Step::Made).count()
    }

    /// How many fused passes the plan runs.
    pub fn fused_passes(&self) -> usize {
        self.groups.len()
    }

    /// How many fused passes write their root in the buffer of a value they read, which dies
    /// there.
    pub fn fused_in_place(&self) -> usize {
        self.groups.iter().filter(|g| g.into.is_some()).count()
    }

    /// The peak of live bytes.
    pub fn peak(&self) -> Peak {
        self.peak
    }

    /// Whether this plan could be `p`'s (same input, node and operand counts, folded sums that
    /// are sums of `p`, and `p`'s peak, so that the budget is checked against the right
    /// figure).
    pub(crate) fn fits(&self, p: &Program) -> bool {
        self.shape == shape_of(p)
            && self.last.len() == p.n_vars()
            && steps_fit(&self.steps, p)
            && permutes_fit(&self.steps, &self.permuted, p)
            && (self.read_checks.is_empty() || self.read_checks.len() == p.n_nodes())
            && self.plain_peak == peak_of(p, &dying(p), &[], &[])
    }

    /// Refuses the plan when its peak exceeds the budget (`per_call`, else the process's).
    pub(crate) fn check_budget(&self, p: &Program, per_call: Option<u64>) -> Result<(), EvalError> {
        let needed = self.peak.bytes;
        let budget = budget_for(needed, per_call);
        if needed <= budget {
            return Ok(());
        }
        let node = self.peak.node.map(|i| {
            let n = &p.nodes()[i];
            (i, n.name.clone(), n.prim.name().to_string())
        });
        Err(EvalError::OverBudget {
            needed,
            budget,
            node,
        })
    }
}

/// Each value's last reader, with outputs kept to the end.
pub(crate) fn dying(p: &Program) -> Vec<Option<usize>> {
    let mut last = p.last_uses();
    for &o in p.outputs() {
        last[o.index()] = None;
    }
    last
}

/// Inputs held throughout; each node's result added when made (none for a node inside a fused
/// pass, one writing in a dying operand's buffer, or one whose result is an operand's buffer or
/// the program's) and dropped after the last reader of every value in its buffer.
pub(crate) fn peak_of(
    p: &Program,
    last: &[Option<usize>],
    steps: &[Step],
    groups: &[Group],
) -> Peak {
    let buffers = Buffers::of(p, last, steps);
    let reused = written_in_operands(p, last, steps, groups, &buffers);
    peak_with(p, steps, &buffers, &reused)
}

/// [`peak_of`], given where each buffer goes and which nodes write in an operand's.
fn peak_with(p: &Program, steps: &[Step], buffers: &Buffers, reused: &[Option<usize>]) -> Peak {
    let n_in = p.n_inputs();
    let held = |i: usize| !matches!(steps.get(i), Some(Step::Within | Step::View));
    let bytes = |v: usize| p.ty(Var(v as u32)).bytes() as u64;
    let (mut made, mut freed) = (vec![0u64; p.n_nodes()], vec![0u64; p.n_nodes()]);
    for v in n_in..p.n_vars() {
        let own = buffers.owner[v] == Some(v) && held(v - n_in);
        let at = buffers.made_at[v];
        if own && reused[at].is_none() {
            made[at] = made[at].saturating_add(bytes(v));
        }
        if let Some(i) = buffers.dies[v].filter(|&i| own && reused[i] != Some(v)) {
            freed[i] = freed[i].saturating_add(bytes(v));
        }
    }
    let mut live: u64 = (0..n_in).map(bytes).fold(0, u64::saturating_add);
    let mut peak = Peak {
        bytes: live,
        node: None,
    };
    for i in 0..p.n_nodes() {
        live = live.saturating_add(made[i]);
        if live > peak.bytes {
            peak = Peak {
                bytes: live,
                node: Some(i),
            };
        }
        live = live.saturating_sub(freed[i]);
    }
    peak
}

/// Which buffer each value's elements are in, and when each buffer goes.
struct Buffers {
    /// The value whose buffer holds each value's elements: itself, an operand it shares
    /// ([`ResultStorage::Operand`], a permute read in place, or a folded sum's addend taken;
    /// followed back), or `None`: the program's, or no buffer, for a node that makes another
    /// value in place of its own (a folded product, or a kernel writing a permute).
    owner: Vec<Option<usize>>,
    /// The node whose kernel makes each value's buffer: its own, or the folded product or the
    /// kernel writing the permute that makes it.
    made_at: Vec<usize>,
    /// For a value owning its buffer, the node after which no value in it is read again;
    /// `None` when one of them is an output or never read (held to the end).
    dies: Vec<Option<usize>>,
}

impl Buffers {
    fn of(p: &Program, last: &[Option<usize>], steps: &[Step]) -> Buffers {
        let n_in = p.n_inputs();
        let nodes = p.nodes();
        // The node making each node's value in place of the value's own node.
        let mut maker: Vec<Option<usize>> = vec![None; nodes.len()];
        for (i, step) in steps.iter().enumerate() {
            match *step {
                Step::AddInto { sum, .. } => maker[sum] = Some(i),
                Step::Written => maker[i] = nodes[i].operands[0].index().checked_sub(n_in),
                _ => {}
            }
        }
        let makes_another: Vec<bool> = {
            let mut m = vec![false; nodes.len()];
            maker.iter().flatten().for_each(|&j| m[j] = true);
            m
        };
        let mut owner: Vec<Option<usize>> = (0..n_in).map(Some).collect();
        let mut made_at: Vec<usize> = vec![0; n_in];
        for (i, n) in nodes.iter().enumerate() {
            made_at.push(maker[i].unwrap_or(i));
            let storage = match steps.get(i) {
                Some(Step::View) => ResultStorage::Operand,
                _ => n.prim.result_storage(),
            };
            let own = match storage {
                ResultStorage::Own => Some(n_in + i),
                ResultStorage::Operand => n.operands.first().and_then(|o| owner[o.index()]),
                ResultStorage::Program => None,
            };
            // A folded product taking its addend's buffer adds into it; one copying it makes a
            // buffer for the sum.
            let taken = maker[i].and_then(|j| match steps[j] {
                Step::AddInto {
                    addend, take: true, ..
                } => owner[addend.index()].filter(|&b| {
                    let sole = (n_in..n_in + i).all(|v| {
                        v == addend.index() || owner[v] != Some(b) || last[v].is_some_and(|l| l < j)
                    });
                    b >= n_in && own_buffer(&*nodes[b - n_in].prim) && sole
                }),
                _ => None,
            });
            owner.push(match makes_another[i] {
                true => None,
                false => taken.or(own),
            });
        }
        let mut dies = last.to_vec();
        for (v, o) in owner.iter().enumerate() {
            if let Some(o) = o.filter(|&o| o != v) {
                dies[o] = dies[o].zip(last[v]).map(|(a, b)| a.max(b));
            }
        }
        Buffers {
            owner,
            made_at,
            dies,
        }
    }
}

/// For each node, the buffer (named by the value owning it) its kernel writes the result in,
/// if any ([`Primitive::writes_in_operand`](crate::ir::Primitive::writes_in_operand), or a
/// fused pass, over an external it reads in blocks): that of an operand of the result's type,
/// read once by the node (or pass), whose buffer no other operand shares and no value is read
/// in after the node, so that evaluation hands it over with the only reference to the buffer.
/// Only a buffer of its own is sure to be that: made by an elementwise kernel or a
/// contraction, and never read through a permute in place. A constant's or an input's buffer
/// is held elsewhere, so the plan counts a new buffer there, as the kernel then makes.
fn written_in_operands(
    p: &Program,
    last: &[Option<usize>],
    steps: &[Step],
    groups: &[Group],
    buffers: &Buffers,
) -> Vec<Option<usize>> {
    let n_in = p.n_inputs();
    let mut viewed = vec![false; p.n_vars()];
    for (i, n) in p.nodes().iter().enumerate() {
        if matches!(steps.get(i), Some(Step::View)) {
            n.operands.iter().for_each(|o| viewed[o.index()] = true);
        }
    }
    p.nodes()
        .iter()
        .enumerate()
        .map(|(i, n)| {
            // What the node reads, and the operands it may write in.
            let (reads, candidates): (&[Var], SmallVec<[Var; 4]>) = match steps.get(i) {
                None | Some(Step::Eval) => {
                    let types: Vec<TensorType> =
                        n.operands.iter().map(|&o| p.ty(o).clone()).collect();
                    if !n.prim.writes_in_operand(&types, &n.ty) {
                        return None;
                    }
                    (&n.operands, n.operands.iter().copied().collect())
                }
                Some(Step::Fused(g)) => {
                    let group = groups.get(*g)?;
                    let externals = group.externals.iter().enumerate();
                    let in_blocks = externals.filter(|&(k, _)| group.reads_in_blocks(k));
                    (&group.externals, in_blocks.map(|(_, &e)| e).collect())
                }
                _ => return None,
            };
            let owner = |o: &Var| buffers.owner[o.index()];
            let alone = |o: Var| reads.iter().filter(|x| owner(x) == owner(&o)).count() == 1;
            candidates
                .iter()
                .find(|&&o| {
                    let Some(b) = owner(&o).filter(|&b| b >= n_in) else {
                        return false;
                    };
                    own_buffer(&*p.nodes()[b - n_in].prim)
                        && last[o.index()] == Some(i)
                        && buffers.dies[b] == Some(i)
                        && alone(o)
                        && !viewed[o.index()]
                        && !viewed[b]
                        && *p.ty(o) == n.ty
                        && !matches!(steps.get(b - n_in), Some(Step::Within | Step::View))
                })
                .and_then(owner)
        })
        .collect()
}

/// Whether a node of `prim` makes its result in a buffer of its own.
fn own_buffer(prim: &dyn crate::ir::Primitive) -> bool {
    prim.elementwise().is_some() || prim.is_contraction()
}
