use std::collections::BTreeMap;

use crate::ir::Program;

/// What running a program costs, from types alone.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Cost {
    pub flops: u64,
    /// Bytes read by nodes (operands) and written (results).
    pub bytes_read: u64,
    pub bytes_written: u64,
    /// Largest total size of live values while evaluating in order: every input (held by the
    /// caller throughout) plus the node results not yet past their last reader
    /// ([`EvalPlan::peak`](super::EvalPlan::peak), which evaluation checks against the
    /// memory budget).
    pub peak_live_bytes: u64,
    /// The same peak for an [`Executable`](super::Executable) of the program, whose folded
    /// sums, fused passes and permutes read in place hold fewer values
    /// ([`EvalPlan::compiled`](super::EvalPlan::compiled)).
    pub executable_peak_live_bytes: u64,
    pub flops_by_op: BTreeMap<String, u64>,
}

/// Flops and bytes of one evaluation.
pub fn cost(p: &Program) -> Cost {
    let mut c = Cost {
        flops: 0,
        bytes_read: 0,
        bytes_written: 0,
        peak_live_bytes: 0,
        executable_peak_live_bytes: 0,
        flops_by_op: BTreeMap::new(),
    };
    let bytes = |v: crate::ir::Var| p.ty(v).bytes() as u64;
    (c.peak_live_bytes, c.executable_peak_live_bytes) = match super::EvalPlan::new(p) {
        Ok(plan) => (plan.peak().bytes, plan.compiled(p).peak().bytes),
        // A node too large to evaluate has no plan; its peak is counted as a plan counts it.
        Err(_) => {
            let plain = super::plan::peak_of(p, &super::plan::dying(p), &[], &[]).bytes;
            (plain, plain)
        }
    };
    for n in p.nodes() {
        let in_types: Vec<_> = n.operands.iter().map(|&o| p.ty(o).clone()).collect();
        let f = n.prim.flops(&in_types, &n.ty);
        c.flops += f;
        *c.flops_by_op.entry(n.prim.name().to_string()).or_default() += f;
        c.bytes_read += n.operands.iter().map(|&o| bytes(o)).sum::<u64>();
        c.bytes_written += n.ty.bytes() as u64;
    }
    c
}
