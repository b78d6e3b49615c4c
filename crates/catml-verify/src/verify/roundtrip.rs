//! Serialisation: LensIR JSON and the CatML listing on generated programs over every
//! primitive, with parameters, tags, repeated outputs, unused inputs and names that need quoting
//! (listing keywords, spaces, quotes, Unicode), in f64 and f32, and on their JVP and VJP
//! programs.
//!
//! For each program p and each format: parse(print(p)) == p (same inputs, kinds, node names,
//! primitives and attributes, operands, tags, types and outputs), printing is a fixed point
//! (print(parse(print(p))) == print(p)), and eval of the parsed program equals eval of p
//! bitwise at a random point.

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::generate::{generate, random_inputs, GenConfig};
use super::{Ctx, FamilyReport, Tally};
use crate::ad;
use crate::interp;
use crate::ir::{json, listing, Program};
use crate::tensor::DType;

pub(crate) fn run(ctx: &Ctx) -> FamilyReport {
    let n = ctx.level.pick(12, 2010, 10050);
    let mut t = ctx.tally(
        "LensIR JSON and listing round trips of generated programs (every primitive, parameters, tags, exotic names, f64 and f32) and of their JVP and VJP programs: structural equality, fixed-point printing, bitwise equal evaluation",
        "reference: 201 serialisation comparisons",
        n,
    );
    t.figure("programs", n);
    let mut rng = ctx.rng();
    let mut nodes = 0;
    for k in 0..n {
        let seed = rng.random::<u64>();
        let cfg = GenConfig {
            dtype: if k % 2 == 0 { DType::F64 } else { DType::F32 },
            n_nodes: rng.random_range(1..=24),
            n_params: rng.random_range(0..=2),
            tags: true,
            exotic_names: true,
            ..GenConfig::default()
        };
        let p = match generate(&cfg, seed) {
            Ok(p) => p,
            Err(e) => {
                t.fail(format!("program {k} (seed {seed}): {e}"));
                t.case();
                continue;
            }
        };
        nodes += p.n_nodes();
        let what = format!("program {k} (seed {seed}, {})", cfg.dtype);
        both_formats(&mut t, &p, &what, seed, true);
        match (ad::jvp(&p), ad::vjp(&p)) {
            (Ok(j), Ok(v)) => {
                both_formats(&mut t, &j.program, &format!("{what}: jvp"), seed, false);
                both_formats(&mut t, &v.program, &format!("{what}: vjp"), seed, false);
            }
            (Err(e), _) | (_, Err(e)) => t.fail(format!("{what}: {e}")),
        }
        t.case();
    }
    t.figure("total_nodes", nodes);
    t.finish()
}

fn both_formats(t: &mut Tally, p: &Program, what: &str, seed: u64, evaluate: bool) {
    let formats: [(&str, PrintFn, ParseFn); 2] = [
        ("json", json::to_string, |s| {
            json::from_str(s, crate::prim::builtins())
        }),
        ("listing", listing::print, |s| {
            listing::parse(s, crate::prim::builtins())
        }),
    ];
    for (name, print, parse) in formats {
        let text = print(p);
        match parse(&text) {
            Ok(q) => {
                t.check(q == *p, || format!("{what}: {name}: parse(print(p)) != p"));
                t.check(print(&q) == text, || {
                    format!("{what}: {name}: printing is not a fixed point")
                });
                if evaluate {
                    let mut rng = ChaCha8Rng::seed_from_u64(seed);
                    let x = random_inputs(p, &mut rng);
                    let same = match (interp::eval(p, &x), interp::eval(&q, &x)) {
                        (Ok(a), Ok(b)) => a == b,
                        _ => false,
                    };
                    t.check(same, || format!("{what}: {name}: evaluations differ"));
                }
            }
            Err(e) => t.fail(format!("{what}: {name}: does not parse back: {e}")),
        }
    }
}

type ParseFn = fn(&str) -> Result<Program, crate::ir::ValidationErrors>;
type PrintFn = fn(&Program) -> String;
