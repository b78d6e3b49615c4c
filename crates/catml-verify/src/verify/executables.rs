//! Executables (docs/memory.md): generated programs, attention-like programs of random shapes
//! whose permutes feed and are fed by products, and the reverse programs of both, evaluated by
//! an `Executable` whose plan runs elementwise chains as fused passes and reads and writes
//! permutes in place, against the interpreter.
//!
//! Where a program is small enough, the executable `Executable::new` makes runs it in one
//! buffer (docs/memory.md, "Small programs"); that one is checked as well, with and without
//! the non-finite check.
//!
//! Stated bound: bitwise equal values, and the interpreter's error (node, count, first index)
//! where it fails, on every call (the second reuses the first's buffers). Folded sums, which
//! reassociate a sum, are left out; their budget has tests of its own.

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::generate::{generate, random_inputs, random_tensor, GenConfig};
use super::{Ctx, FamilyReport, Tally};
use crate::ad;
use crate::interp::{self, EvalOptions, EvalPlan, Executable};
use crate::ir::{Builder, InputKind, Program};
use crate::prim::{AttentionMask, Ops};
use crate::tensor::{DType, Tensor, TensorType};

pub(crate) fn run(ctx: &Ctx) -> FamilyReport {
    let n = ctx.level.pick(12, 1000, 5000);
    let mut t = ctx.tally(
        "executables with fused passes and permutes in place, and small programs in one buffer, on generated programs and their reverse programs: values bitwise equal to the interpreter's, errors the same",
        "no reference figure: the executable's contract in docs/memory.md",
        n,
    );
    t.figure("programs", n);
    let mut rng = ctx.rng();
    for k in 0..n {
        let seed = rng.random::<u64>();
        let cfg = GenConfig {
            dtype: if k % 2 == 0 { DType::F64 } else { DType::F32 },
            n_nodes: rng.random_range(2..=24),
            max_rank: 4,
            ..GenConfig::default()
        };
        let what = format!("program {k} (seed {seed})");
        let p = match generate(&cfg, seed) {
            Ok(p) => p,
            Err(e) => {
                t.fail(format!("{what}: {e}"));
                t.case();
                continue;
            }
        };
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0xe8ec);
        let x = random_inputs(&p, &mut rng);
        check(&mut t, &p, &x, &what);
        // The reverse program, where the program has one.
        if let Ok(v) = ad::vjp(&p) {
            let mut args = x;
            for ty in p.output_types() {
                args.push(random_tensor(&ty, &mut rng, 1.0));
            }
            check(&mut t, &v.program, &args, &format!("{what}, reverse"));
        }
        t.case();
    }
    // Heads: permutes feeding and fed by products, as in attention, which generated programs
    // seldom line up.
    let heads = ctx.level.pick(4, 300, 1500);
    t.figure("heads_programs", heads);
    for k in 0..heads {
        let seed = rng.random::<u64>();
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let p = heads_program(&mut rng);
        let what = format!("heads program {k} (seed {seed})");
        let x = random_inputs(&p, &mut rng);
        check(&mut t, &p, &x, &what);
        match ad::vjp(&p) {
            Ok(v) => {
                let mut args = x;
                for ty in p.output_types() {
                    args.push(random_tensor(&ty, &mut rng, 1.0));
                }
                check(&mut t, &v.program, &args, &format!("{what}, reverse"));
            }
            Err(e) => t.fail(format!("{what}: {e}")),
        }
        t.case();
    }
    t.finish()
}

/// A random permutation of `rank` axes that keeps the last in place.
fn keeping_last(rng: &mut ChaCha8Rng, rank: usize) -> Vec<usize> {
    let mut perm: Vec<usize> = (0..rank - 1).collect();
    for i in (1..perm.len()).rev() {
        perm.swap(i, rng.random_range(0..=i));
    }
    perm.push(rank - 1);
    perm
}

/// Q, K and V of random (B, T, H, d) split into heads by permutes, attention weights and their
/// product with V merged back, and the scores Q K^T permuted at random: every permute is one a
/// product can read or write in place.
fn heads_program(rng: &mut ChaCha8Rng) -> Program {
    let dtype = if rng.random_bool(0.5) {
        DType::F64
    } else {
        DType::F32
    };
    let dims = [1..=3, 1..=9, 1..=3, 1..=6].map(|r| rng.random_range(r));
    let mut b = Builder::new();
    let split = [0, 2, 1, 3];
    let mut heads = Vec::new();
    for name in ["q", "k", "v"] {
        let ty = TensorType::new(dtype, dims.to_vec());
        let x = b.input(name, ty, InputKind::Data).expect("fresh name");
        let x = b.tanh(x).expect("float");
        heads.push(b.permute(x, split.to_vec()).expect("rank 4"));
    }
    let mask = match rng.random_bool(0.5) {
        true => AttentionMask::causal(),
        false => AttentionMask::none(),
    };
    let p = b
        .attention_probs(heads[0], heads[1], mask)
        .expect("(B, H, T, d)");
    let y = b
        .batch_matmul(p, heads[2], false, false)
        .expect("(B, H, T, d)");
    let y = b.permute(y, split.to_vec()).expect("rank 4");
    let scores = b
        .batch_matmul(heads[0], heads[1], false, true)
        .expect("(B, H, T, T)");
    let scores = b.permute(scores, keeping_last(rng, 4)).expect("rank 4");
    let scores = b.tanh(scores).expect("float");
    b.finish(&[y, scores]).expect("two outputs")
}

/// `p` on an executable whose plan fuses passes and permutes in place, twice, against the
/// interpreter at `args`.
fn check(t: &mut Tally, p: &Program, args: &[Tensor], what: &str) {
    let plan = match EvalPlan::new(p) {
        Ok(plan) => plan.fusing_passes(p).permuting_in_place(p),
        Err(e) => return t.fail(format!("{what}: {e}")),
    };
    t.count("fused_passes", plan.fused_passes() as u64);
    t.count("permutes_in_place", plan.permutes_in_place() as u64);
    let exe = match Executable::with_plan(p.clone(), plan) {
        Ok(exe) => exe,
        Err(e) => return t.fail(format!("{what}: its own plan refused: {e}")),
    };
    let want = interp::eval(p, args);
    t.count("interpreter_errors", want.is_err() as u64);
    for call in 1..=2 {
        let got = exe.run(args, EvalOptions::default());
        t.check(got == want, || {
            format!("{what}: call {call} gave {got:?}, the interpreter {want:?}")
        });
    }
    check_in_one_buffer(t, p, args, what);
}

/// Each result's type and the bits of its elements, so that NaNs compare.
type Bits = Vec<(TensorType, Vec<u64>)>;

fn bits(values: Vec<Tensor>) -> Bits {
    let bits = |t: &Tensor| t.to_f64_vec().iter().map(|v| v.to_bits()).collect();
    values.iter().map(|t| (t.ty(), bits(t))).collect()
}

/// `p` on the executable `Executable::new` makes, where that runs it in one buffer: twice,
/// with and without the non-finite check, against the interpreter at `args`.
fn check_in_one_buffer(t: &mut Tally, p: &Program, args: &[Tensor], what: &str) {
    let exe = match Executable::new(p.clone()) {
        Ok(exe) => exe,
        Err(e) => return t.fail(format!("{what}: {e}")),
    };
    if !exe.in_one_buffer() {
        return;
    }
    t.count("in_one_buffer", 1);
    let unchecked = EvalOptions {
        check_non_finite: false,
        ..EvalOptions::default()
    };
    for options in [EvalOptions::default(), unchecked] {
        let want = interp::eval_with_options(p, args, options).map(bits);
        for call in 1..=2 {
            let got = exe.run(args, options).map(bits);
            t.check(got == want, || {
                format!("{what}, in one buffer, {options:?}: call {call} gave {got:?}, the interpreter {want:?}")
            });
        }
    }
}
