//! Recomputation in a reverse-mode program: the backward part reads only kept forward values,
//! and every other forward value it reads is rebuilt by copies of the forward nodes that made
//! it, emitted just before its first backward reader and shared by the later ones.

use std::collections::HashSet;

use super::AdError;
use crate::ir::{Builder, Program, Var};

/// `q` (forward part: its first `n_fwd` nodes) with the backward part reading only inputs,
/// outputs, values `kept` marks and recomputed copies. Returns the pruned program and how many
/// of its first nodes are still forward nodes.
pub(crate) fn rematerialise(
    q: &Program,
    n_fwd: usize,
    kept: &[bool],
) -> Result<(Program, usize), AdError> {
    let build = |e: &dyn std::fmt::Display| AdError::Build(e.to_string());
    let n_in = q.n_inputs();
    let mut keep = vec![true; q.n_vars()];
    for (i, &k) in kept.iter().enumerate() {
        keep[n_in + i] = k;
    }
    for &o in q.outputs() {
        keep[o.index()] = true;
    }
    let taken: HashSet<&str> = q.names().into_keys().collect();
    let mut b = Builder::new();
    let mut map: Vec<Var> = Vec::with_capacity(q.n_vars());
    for i in q.inputs() {
        map.push(
            b.input(&i.name, i.ty.clone(), i.kind)
                .map_err(|e| build(&e))?,
        );
    }
    // The recomputed copy of each forward node, once made.
    let mut copy: Vec<Option<Var>> = vec![None; n_fwd];
    for (i, n) in q.nodes().iter().enumerate() {
        let mut operands = Vec::with_capacity(n.operands.len());
        for &o in &n.operands {
            let forward = o.index() >= n_in && o.index() < n_in + n_fwd;
            operands.push(if i < n_fwd || !forward || keep[o.index()] {
                map[o.index()]
            } else {
                recompute(q, n_fwd, &keep, &map, &mut copy, &mut b, &taken, o)?
            });
        }
        b.set_tag(n.tag.clone());
        let v = b
            .apply_named(&n.name, n.prim.clone(), &operands)
            .map_err(|e| build(&e))?;
        map.push(v);
    }
    let outputs: Vec<Var> = q.outputs().iter().map(|o| map[o.index()]).collect();
    let (full, finished) = b.finish_mapped(&outputs).map_err(|e| build(&e))?;
    let (program, pruned) = full.pruned_map();
    // Forward copies came first, in order; recomputed copies follow them.
    let fwd_kept = (0..n_fwd)
        .filter(|&i| pruned[finished[map[n_in + i].index()].index()].is_some())
        .count();
    Ok((program, fwd_kept))
}

/// The recomputed copy of forward value `v`: copies of its unkept forward ancestors in node
/// order (each made once), reading kept values and inputs as they are.
#[allow(clippy::too_many_arguments)]
fn recompute(
    q: &Program,
    n_fwd: usize,
    keep: &[bool],
    map: &[Var],
    copy: &mut [Option<Var>],
    b: &mut Builder,
    taken: &HashSet<&str>,
    v: Var,
) -> Result<Var, AdError> {
    let n_in = q.n_inputs();
    let needs_copy = |o: Var| o.index() >= n_in && o.index() < n_in + n_fwd && !keep[o.index()];
    // Depth-first without recursion: chains may be thousands of nodes long.
    let mut stack = vec![v.index() - n_in];
    while let Some(&i) = stack.last() {
        if copy[i].is_some() {
            stack.pop();
            continue;
        }
        let node = &q.nodes()[i];
        if let Some(&o) = node
            .operands
            .iter()
            .find(|&&o| needs_copy(o) && copy[o.index() - n_in].is_none())
        {
            stack.push(o.index() - n_in);
            continue;
        }
        let operands: Vec<Var> = node
            .operands
            .iter()
            .map(|&o| match needs_copy(o) {
                true => copy[o.index() - n_in].expect("made before its readers"),
                false => map[o.index()],
            })
            .collect();
        let hint = format!("{}.remat", node.name);
        let mut name = b.fresh_name(&hint);
        let mut k = 1;
        while taken.contains(name.as_str()) {
            name = b.fresh_name(&format!("{hint}.{k}"));
            k += 1;
        }
        b.set_tag(node.tag.clone());
        let c = b
            .apply_named(&name, node.prim.clone(), &operands)
            .map_err(|e| AdError::Build(e.to_string()))?;
        copy[i] = Some(c);
        stack.pop();
    }
    Ok(copy[v.index() - n_in].expect("just made"))
}
