//! What evaluating a program needs to know before it starts, worked out once from types: where
//! each value dies, that no value is too large, and the peak of live bytes (`docs/memory.md`).

use super::budget::budget_for;
use super::eval::{EvalError, MAX_VALUE_BYTES};
use super::fold::{fold_sums, steps_fit, Step};
use crate::ir::{Program, Var};

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
    peak: Peak,
    /// The program's input, node and operand counts, to refuse a plan made for another.
    shape: (usize, usize, usize),
    /// What to do at each node, when sums are folded (`fold.rs`); empty: run every kernel.
    pub(crate) steps: Vec<Step>,
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
        Ok(EvalPlan {
            peak: peak_of(p, &last),
            last,
            shape: shape_of(p),
            steps: Vec::new(),
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
        }
        self
    }

    /// How many sums are folded.
    pub fn folded_sums(&self) -> usize {
        self.steps.iter().filter(|s| **s == Step::Made).count()
    }

    /// The same plan with no sum folded.
    pub(crate) fn unfolded(&self) -> EvalPlan {
        EvalPlan {
            steps: Vec::new(),
            ..self.clone()
        }
    }

    /// The peak of live bytes.
    pub fn peak(&self) -> Peak {
        self.peak
    }

    /// Whether this plan could be `p`'s (same input, node and operand counts, and folded sums
    /// that are sums of `p`).
    pub(crate) fn fits(&self, p: &Program) -> bool {
        self.shape == shape_of(p) && self.last.len() == p.n_vars() && steps_fit(&self.steps, p)
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

/// Inputs held throughout; each node's result added when made and its operands subtracted
/// after their last reader (once, however often it reads them).
pub(crate) fn peak_of(p: &Program, last: &[Option<usize>]) -> Peak {
    let n_in = p.n_inputs();
    let bytes = |v: usize| p.ty(Var(v as u32)).bytes() as u64;
    let mut live: u64 = (0..n_in).map(bytes).fold(0, u64::saturating_add);
    let mut peak = Peak {
        bytes: live,
        node: None,
    };
    for (i, n) in p.nodes().iter().enumerate() {
        live = live.saturating_add(n.ty.bytes() as u64);
        if live > peak.bytes {
            peak = Peak {
                bytes: live,
                node: Some(i),
            };
        }
        for (k, o) in n.operands.iter().enumerate() {
            let v = o.index();
            if v >= n_in && last[v] == Some(i) && !n.operands[..k].contains(o) {
                live -= bytes(v);
            }
        }
    }
    peak
}
