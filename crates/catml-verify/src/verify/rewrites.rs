//! Rewrites (docs/rewrites.md): every pass in `transform::rewrite::REWRITES` on generated programs
//! (every primitive, with identity reshapes and dead nodes), compared at random points.
//!
//! Stated bounds, with u the unit roundoff:
//! - eval and JVP: bitwise equal (the passes remove only reshapes to the same shape and dead
//!   nodes, which change no arithmetic);
//! - VJP: ‖g' - g‖∞ <= 2^5 · N · u · M, with N the number of nodes of the original VJP program
//!   and M the largest magnitude of any value it computes. Removing an identity reshape can
//!   reorder the additions of one cotangent's contributions; reordering a sum changes it by at
//!   most 2(k-1)u Σ|c_i| (to first order), which later backward nodes carry through factors
//!   that the generator keeps moderate. The bound is relative to the contributions, not to the
//!   gradient: the edge checks show a gradient 1 becoming 0 inside it.

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::generate::{generate, random_inputs, random_tensor, GenConfig};
use super::numeric::{flat, max_abs, Derivatives};
use super::{Ctx, FamilyReport, Tally};
use crate::interp;
use crate::ir::{Builder, Program, Var};
use crate::tensor::{DType, Tensor};
use crate::transform::rewrite::REWRITES;

pub(crate) fn run(ctx: &Ctx) -> FamilyReport {
    let n = ctx.level.pick(12, 2010, 10050);
    let mut t = ctx.tally(
        "every rewrite pass (identity-reshape elimination, pruning) on generated programs: eval and JVP bitwise equal, VJP within 2^5 N u M",
        "reference: 201 ordinary rewrite comparisons",
        n,
    );
    t.figure("programs", n);
    t.figure(
        "passes",
        REWRITES.iter().map(|r| r.name).collect::<Vec<_>>(),
    );
    t.figure(
        "vjp_bound",
        "2^5 N u M: N nodes of the VJP program, M its largest value",
    );
    let mut rng = ctx.rng();
    for k in 0..n {
        let seed = rng.random::<u64>();
        let cfg = GenConfig {
            dtype: if k % 2 == 0 { DType::F64 } else { DType::F32 },
            n_nodes: rng.random_range(2..=24),
            ..GenConfig::default()
        };
        match generate(&cfg, seed) {
            Ok(p) => check_program(&mut t, &p, &format!("program {k} (seed {seed})"), seed),
            Err(e) => t.fail(format!("program {k} (seed {seed}): {e}")),
        }
        t.case();
    }
    t.finish()
}

/// The program returning every value it computes (to find the largest).
pub(crate) fn with_all_values(p: &Program) -> Program {
    let b = Builder::from_program(p);
    let all: Vec<Var> = (0..p.n_vars()).map(|i| var_at(p, i)).collect();
    b.finish(&all).expect("a program with outputs has values")
}

fn var_at(p: &Program, i: usize) -> Var {
    if i < p.n_inputs() {
        p.input_var(i)
    } else {
        p.node_var(i - p.n_inputs())
    }
}

/// The largest magnitude of any value `p` computes at `x`.
pub(crate) fn largest_value(p: &Program, x: &[Tensor]) -> Result<f64, interp::EvalError> {
    Ok(max_abs(&flat(&interp::eval(&with_all_values(p), x)?)))
}

pub(crate) fn check_program(t: &mut Tally, p: &Program, what: &str, seed: u64) {
    let d = match Derivatives::new(p) {
        Ok(d) => d,
        Err(e) => return t.fail(format!("{what}: {e}")),
    };
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x7e57);
    let x = random_inputs(p, &mut rng);
    let v: Vec<Tensor> = p
        .inputs()
        .iter()
        .map(|i| random_tensor(&i.ty, &mut rng, 1.0))
        .collect();
    let u: Vec<Tensor> = p
        .output_types()
        .iter()
        .map(|ty| random_tensor(ty, &mut rng, 1.0))
        .collect();
    let (Ok(y), Ok((_, jv)), Ok((_, g))) = (d.eval(&x), d.jvp_at(&x, &v), d.vjp_at(&x, &u)) else {
        return t.fail(format!("{what}: the original does not evaluate"));
    };
    let mut vjp_args = x.clone();
    vjp_args.extend(u.iter().cloned());
    let m = match largest_value(&d.vjp.program, &vjp_args) {
        Ok(m) => m,
        Err(e) => return t.fail(format!("{what}: {e}")),
    };
    let unit = p
        .inputs()
        .iter()
        .map(|i| i.ty.dtype.unit_roundoff())
        .chain(p.nodes().iter().map(|n| n.ty.dtype.unit_roundoff()))
        .fold(0.0, f64::max);
    let bound = 32.0 * d.vjp.program.n_nodes() as f64 * unit * m;
    for pass in REWRITES {
        let at = || format!("{what}: {}", pass.name);
        let r = match (pass.apply)(p) {
            Ok(r) => r,
            Err(e) => return t.fail(format!("{}: {e}", at())),
        };
        t.count(&format!("{}_changes", pass.name), r.changes as u64);
        let d2 = match Derivatives::new(&r.program) {
            Ok(d) => d,
            Err(e) => return t.fail(format!("{}: {e}", at())),
        };
        let (Ok(y2), Ok((_, jv2)), Ok((_, g2))) =
            (d2.eval(&x), d2.jvp_at(&x, &v), d2.vjp_at(&x, &u))
        else {
            t.fail(format!("{}: the rewritten program does not evaluate", at()));
            continue;
        };
        t.check(y2 == y, || format!("{}: eval changed", at()));
        t.check(jv2 == jv, || format!("{}: jvp changed", at()));
        let diff = flat(&g2)
            .iter()
            .zip(flat(&g))
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max);
        t.max_error("vjp_difference", diff);
        if bound > 0.0 {
            t.max_error("vjp_difference_over_bound", diff / bound);
        }
        t.check(diff <= bound, || {
            format!("{}: vjp changed by {diff:e} > {bound:e}", at())
        });
    }
}
