//! Shared test helpers: proptest strategies over generated programs, and input values keyed by
//! input name.

#![allow(dead_code)]

use catml::ir::Program;
use catml::tensor::{Tensor, TensorType};
use catml::verify::generate::{generate, generate_with_ranges, random_tensor, GenConfig, Interval};
use proptest::prelude::*;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// Programs drawn by the generator: the seed names the program, and shrinking goes towards
/// fewer nodes.
pub fn programs(cfg: GenConfig) -> impl Strategy<Value = Program> {
    (any::<u64>(), 0..=cfg.n_nodes).prop_map(move |(seed, n)| {
        let cfg = GenConfig {
            n_nodes: n,
            ..cfg.clone()
        };
        generate(&cfg, seed).expect("generator entries always fit")
    })
}

/// Small programs over every primitive.
pub fn small() -> GenConfig {
    GenConfig {
        n_nodes: 8,
        max_rank: 2,
        max_dim: 3,
        ..GenConfig::default()
    }
}

/// `small()` with input names prefixed (chains add the program's position and a dot).
pub fn prefixed(prefix: &str) -> GenConfig {
    GenConfig {
        name_prefix: prefix.to_string(),
        ..small()
    }
}

/// A chain of `len` composable generated programs: each one's data inputs have the previous
/// one's output types and intervals. Input names are prefixed `<prefix>0.`, `<prefix>1.`, ...
/// (prefix `p` by default) so no two programs share a parameter.
pub fn chain(cfg: &GenConfig, seed: u64, len: usize) -> Vec<Program> {
    let mut out: Vec<Program> = Vec::new();
    let mut ranges: Option<Vec<Interval>> = None;
    for k in 0..len {
        let c = GenConfig {
            name_prefix: format!(
                "{}{k}.",
                if cfg.name_prefix.is_empty() {
                    "p"
                } else {
                    &cfg.name_prefix
                }
            ),
            input_types: out.last().map(Program::output_types),
            input_ranges: ranges.clone(),
            ..cfg.clone()
        };
        let (p, r) = generate_with_ranges(&c, seed.wrapping_add(k as u64)).expect("fits");
        ranges = Some(r);
        out.push(p);
    }
    out
}

/// Chains of generated programs, as a strategy.
pub fn chains(cfg: GenConfig, len: usize) -> impl Strategy<Value = Vec<Program>> {
    any::<u64>().prop_map(move |seed| chain(&cfg, seed, len))
}

/// A value in [-1, 1] for an input, determined by its name and type (so programs that share
/// input names get the same values).
pub fn value_for(name: &str, ty: &TensorType) -> Tensor {
    let h = name.bytes().fold(0xcbf29ce484222325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100000001b3)
    });
    random_tensor(ty, &mut ChaCha8Rng::seed_from_u64(h), 1.0)
}

/// Every input of `p`, by name.
pub fn inputs_by_name(p: &Program) -> Vec<Tensor> {
    p.inputs()
        .iter()
        .map(|i| value_for(&i.name, &i.ty))
        .collect()
}

/// The values of `p`'s inputs named in `names`, others from `value_for`; `given` supplies the
/// data inputs in order.
pub fn with_data(p: &Program, given: &[Tensor]) -> Vec<Tensor> {
    let mut data = given.iter();
    p.inputs()
        .iter()
        .map(|i| match i.kind {
            catml::ir::InputKind::Data => data.next().expect("one value per data input").clone(),
            catml::ir::InputKind::Param => value_for(&i.name, &i.ty),
        })
        .collect()
}

/// The largest unit roundoff of any value in `p`.
pub fn unit(p: &Program) -> f64 {
    p.inputs()
        .iter()
        .map(|i| i.ty.dtype.unit_roundoff())
        .chain(p.nodes().iter().map(|n| n.ty.dtype.unit_roundoff()))
        .fold(0.0, f64::max)
}

/// All values, widened to f64.
pub fn flat(ts: &[Tensor]) -> Vec<f64> {
    ts.iter().flat_map(Tensor::to_f64_vec).collect()
}

/// The executable `Executable::new` makes of `p` (its plan folds sums, fuses passes, reads
/// permutes in place and checks values in their readers), evaluating on tensors even where
/// `new` would run a small program in one buffer: for tests of those plans' evaluation.
pub fn on_tensors(p: Program) -> Result<catml::interp::Executable, catml::interp::EvalError> {
    let plan = catml::interp::EvalPlan::new(&p)?.compiled(&p);
    catml::interp::Executable::with_plan(p, plan)
}
