//! Checkpoint policies against none: the reverse-mode program of a generated program under
//! every policy (nothing, dots, a random set of names, the √n schedule) gives bitwise the same
//! outputs as the plain one on random inputs and seeds, and its backward part reads only the
//! forward values the policy keeps (`docs/checkpoint.md`).

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::generate::{generate, random_inputs, GenConfig};
use super::{Ctx, FamilyReport, Tally};
use crate::ad::{self, CheckpointPolicy, Vjp};
use crate::interp;
use crate::ir::{Def, Program};
use crate::tensor::Tensor;

pub(crate) fn run(ctx: &Ctx) -> FamilyReport {
    let n = ctx.level.pick(12, 300, 1500);
    let mut t = ctx.tally(
        "generated programs' VJP under every checkpoint policy against the plain VJP: bitwise equal outputs; the backward part reads only kept values",
        "recomputation repeats the same operations on the same values, so it cannot change a bit",
        n,
    );
    t.figure("programs", n);
    let mut rng = ctx.rng();
    for k in 0..n {
        let seed = rng.random::<u64>();
        let cfg = GenConfig {
            n_nodes: rng.random_range(1..=16),
            max_outputs: 2,
            ..GenConfig::default()
        };
        let what = format!("program {k} (seed {seed})");
        match generate(&cfg, seed) {
            Ok(p) => check_policies(&mut t, &p, &what, seed),
            Err(e) => t.fail(format!("{what}: {e}")),
        }
        t.case();
    }
    t.finish()
}

/// Every policy on `p`, against the plain VJP program, at inputs drawn from `seed`.
fn check_policies(t: &mut Tally, p: &Program, what: &str, seed: u64) {
    let plain = match ad::vjp(p) {
        Ok(v) => v,
        Err(_) => {
            // A primitive without a reverse rule: nothing to compare.
            t.count("programs_without_vjp", 1);
            return;
        }
    };
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x636b_7074);
    let args = random_inputs(&plain.program, &mut rng);
    let want = interp::eval(&plain.program, &args).map_err(|e| e.to_string());
    if want.is_err() {
        t.count("inputs_outside_the_domain", 1);
    }
    let names: Vec<String> = p
        .nodes()
        .iter()
        .filter(|_| rng.random_bool(0.3))
        .map(|n| n.name.clone())
        .collect();
    let policies = [
        CheckpointPolicy::NothingSaveable,
        CheckpointPolicy::Dots,
        CheckpointPolicy::save_only_these_names(names),
        CheckpointPolicy::SqrtSegments,
    ];
    for policy in &policies {
        let what = format!("{what}, policy {policy}");
        let v = match ad::vjp_with(p, policy) {
            Ok(v) => v,
            Err(e) => return t.fail(format!("{what}: {e}")),
        };
        let got = interp::eval(&v.program, &args).map_err(|e| e.to_string());
        match (&want, &got) {
            (Ok(w), Ok(g)) => {
                t.check(same_bits(w, g), || format!("{what}: outputs differ"));
            }
            (Err(_), Err(_)) => {}
            (Ok(_), Err(e)) => t.fail(format!("{what}: fails where the plain VJP does not: {e}")),
            (Err(e), Ok(_)) => t.fail(format!("{what}: succeeds where the plain VJP fails: {e}")),
        }
        if let Some(bad) = unkept_residual(p, &v, policy) {
            t.fail(format!(
                "{what}: the backward part reads `{bad}`, which the policy does not keep"
            ));
        } else {
            t.check(true, String::new);
        }
    }
}

/// A residual that is neither an input, a primal output, nor kept by `policy` (the √n
/// schedule keeps what it computes; it is checked by its outputs only).
fn unkept_residual(p: &Program, v: &Vjp, policy: &CheckpointPolicy) -> Option<String> {
    let outputs: Vec<&str> = p.outputs().iter().map(|&o| p.name(o)).collect();
    v.layout
        .residuals
        .iter()
        .filter(|r| !r.is_input && !outputs.contains(&r.name.as_str()))
        .find(|r| {
            let Some(Def::Node(n)) = p.var(&r.name).map(|x| p.def(x)) else {
                return true;
            };
            match policy {
                CheckpointPolicy::NothingSaveable => true,
                CheckpointPolicy::Dots => !n.prim.is_contraction(),
                CheckpointPolicy::SaveOnlyTheseNames(names) => {
                    !names.contains(&n.name) && !n.tag.as_ref().is_some_and(|t| names.contains(t))
                }
                _ => false,
            }
        })
        .map(|r| r.name.clone())
}

fn same_bits(a: &[Tensor], b: &[Tensor]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            x.ty() == y.ty()
                && x.to_f64_vec()
                    .iter()
                    .zip(y.to_f64_vec())
                    .all(|(p, q)| p.to_bits() == q.to_bits())
        })
}
