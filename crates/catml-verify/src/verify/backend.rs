//! Backend simulation (docs/backend.md): f32 as a backend for the f64 reference.
//!
//! Local error budgets. Every node of generated programs is re-run alone on its actual operands
//! rounded to f32, in f32 (ŷ) and in f64 (y, the reference on the same inputs); each primitive
//! states its budget per element (`Primitive::f32_budget`, `docs/budgets.md`): exact for structural maps, a few u|y| for
//! correctly rounded and library functions, γ_k S for sums of k terms (S the primitive on the
//! operands' absolute values, valid for any order of summation), and a formula of the operands
//! for the softmax family, attention and the losses.
//!
//! Sequential chains (docs/backend.md, error along a chain). For chains of stages f_1..f_n (matmul
//! by a fixed matrix, bias add, scaling, tanh, sigmoid, exp) run in f64 (z_i) and in f32 (ẑ_i),
//! with measured local errors ε_i = ‖f̂_i(ẑ_{i-1}) - f_i(ẑ_{i-1})‖∞ and Lipschitz constants L_i of
//! f_i on the segment between z_{i-1} and ẑ_{i-1} in the ∞-norm (matmul: largest column sum of |W|;
//! bias: 1; scaling by c: |c|; elementwise g: the largest sup |g'| over each element's segment),
//! the observed e_i = ‖ẑ_i - z_i‖∞ must satisfy e_i <= Σ_{j<=i} ε_j Π_{j<l<=i} L_l (+ 2^-40 ‖z_i‖∞
//! for the reference's own rounding), at every stage.

use crate::prim::names;
use std::collections::BTreeMap;

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use super::generate::{generate, random_inputs, GenConfig};
use super::numeric::{flat, max_abs};
use super::rewrites::with_all_values;
use super::{Ctx, FamilyReport, Tally};
use crate::interp;
use crate::ir::budget::{ETA32, U32};
use crate::ir::{Budget, BudgetSite};
use crate::ir::{Builder, InputKind, Node, Program, Var};
use crate::prim::Ops;
use crate::tensor::{DType, Tensor, TensorType};

#[derive(Default, Serialize)]
struct PrimStats {
    instances: u64,
    budget: String,
    /// Largest normwise relative error ‖ŷ - y‖∞ / ‖y‖∞, in units of u (large under
    /// cancellation, where the budget's S is far above |y|).
    max_rel_error_u: f64,
    /// Largest ratio of the error to the stated budget (<= 1 when it holds).
    max_over_budget: f64,
}

pub(crate) fn run(ctx: &Ctx) -> FamilyReport {
    let programs = ctx.level.pick(8, 2010, 10050);
    let chains = ctx.level.pick(8, 2010, 10050);
    let mut t = ctx.tally(
        "f32 against the f64 reference: per-primitive local error budgets on the nodes of generated programs; the recurrence bound e_n <= sum_i eps_i prod_{j>i} L_j on sequential chains with measured local constants",
        "no reference figure: the simulation contract and the chain bound of docs/backend.md",
        programs + chains,
    );
    let mut stats: BTreeMap<String, PrimStats> = BTreeMap::new();
    let mut rng = ctx.rng();
    for k in 0..programs {
        let seed = rng.random::<u64>();
        // Each node is rebuilt alone at f32 and f64; a scan's body is typed at one dtype, so
        // scan (and unpack, which reads it) stay out, as does convert.
        let cfg = GenConfig {
            n_nodes: rng.random_range(2..=20),
            ..GenConfig::default()
        }
        .without(&[names::CONVERT, names::SCAN, names::UNPACK]);
        match generate(&cfg, seed) {
            Ok(p) => local_errors(&mut t, &p, seed, k, &mut stats),
            Err(e) => t.fail(format!("program {k}: {e}")),
        }
        t.case();
    }
    t.figure("programs", programs);
    t.figure("primitives", &stats);
    let (mut worst, mut sum, mut stages) = (0.0f64, 0.0f64, 0usize);
    for k in 0..chains {
        let seed = rng.random::<u64>();
        let (ratio, n) = chain(&mut t, seed, k);
        worst = worst.max(ratio);
        sum += ratio;
        stages += n;
        t.case();
    }
    t.figure("chains", chains);
    t.figure("chain_stages", stages);
    t.figure("chain_final_observed_over_bound_max", worst);
    t.figure(
        "chain_final_observed_over_bound_mean",
        sum / chains.max(1) as f64,
    );
    t.finish()
}

/// The one-node program `prim(inputs)` at these operand types.
fn single(node: &Node, types: &[TensorType]) -> Option<Program> {
    let mut b = Builder::new();
    let xs: Vec<Var> = types
        .iter()
        .enumerate()
        .map(|(i, ty)| b.input(&format!("x{i}"), ty.clone(), InputKind::Data))
        .collect::<Result<_, _>>()
        .ok()?;
    let y = b.apply(node.prim.clone(), &xs).ok()?;
    b.finish(&[y]).ok()
}

/// A float tensor in `dtype` with `f` applied; integer operands (indices) pass unchanged.
fn as_dtype(t: &Tensor, dtype: DType, f: impl Fn(f64) -> f64) -> Tensor {
    if !t.dtype().is_float() {
        return t.clone();
    }
    let data = t.to_f64_vec().into_iter().map(f).collect();
    Tensor::from_f64s(dtype, t.shape().clone(), data).expect("same shape")
}

fn local_errors(
    t: &mut Tally,
    p: &Program,
    seed: u64,
    k: usize,
    stats: &mut BTreeMap<String, PrimStats>,
) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let x = random_inputs(p, &mut rng);
    let values = match interp::eval(&with_all_values(p), &x) {
        Ok(v) => v,
        Err(e) => return t.fail(format!("program {k}: {e}")),
    };
    for n in p.nodes() {
        let name = n.prim.name();
        if n.operands.is_empty() {
            continue;
        }
        // Operands rounded to f32; the reference reads the same (widened) values.
        let ops32: Vec<Tensor> = n
            .operands
            .iter()
            .map(|o| as_dtype(&values[o.index()], DType::F32, |v| v))
            .collect();
        let ops64: Vec<Tensor> = ops32
            .iter()
            .map(|o| as_dtype(o, DType::F64, |v| v))
            .collect();
        let types = |ts: &[Tensor]| ts.iter().map(Tensor::ty).collect::<Vec<_>>();
        let b = n.prim.f32_budget(&types(&ops64), &n.ty);
        let (Some(p32), Some(p64)) = (single(n, &types(&ops32)), single(n, &types(&ops64))) else {
            t.fail(format!(
                "program {k}: node `{}` does not rebuild alone",
                n.name
            ));
            continue;
        };
        let (y32, y64) = match (interp::eval(&p32, &ops32), interp::eval(&p64, &ops64)) {
            (Ok(a), Ok(b)) => (flat(&a), flat(&b)),
            (Err(e), _) | (_, Err(e)) => {
                t.fail(format!("program {k}: node `{}` alone: {e}", n.name));
                continue;
            }
        };
        let err: Vec<f64> = y32.iter().zip(&y64).map(|(a, b)| (a - b).abs()).collect();
        let norm = max_abs(&y64);
        // Normwise relative error; an all-zero reference (exact cancellation) has none.
        let rel = if max_abs(&err) == 0.0 || norm == 0.0 {
            0.0
        } else {
            max_abs(&err) / norm
        };
        let site = BudgetSite {
            dims: ops64.iter().map(|o| o.shape().dims().to_vec()).collect(),
            ops: ops64.iter().map(Tensor::to_f64_vec).collect(),
            y: &y64,
        };
        // Per element budget, with 2^-40 |y| for the reference's own rounding.
        let allowed: Option<Vec<f64>> = match &b {
            Budget::Exact => Some(vec![0.0; y64.len()]),
            // Each rounding of a product or quotient may also underflow by ETA32.
            Budget::Relative(c) => {
                Some(y64.iter().map(|y| c * U32 * y.abs() + c * ETA32).collect())
            }
            Budget::Sum { terms, signed } => {
                // S: the primitive on the operands' magnitudes (selecting operands keep signs).
                let abs64: Vec<Tensor> = ops64
                    .iter()
                    .enumerate()
                    .map(|(i, o)| match signed.contains(&i) {
                        true => o.clone(),
                        false => as_dtype(o, DType::F64, f64::abs),
                    })
                    .collect();
                let k = *terms as f64;
                let gamma = k * U32 / (1.0 - k * U32);
                interp::eval(&p64, &abs64)
                    .ok()
                    .map(|s| flat(&s).iter().map(|s| gamma * s + k * ETA32).collect())
            }
            Budget::Formula(f, _) => Some(f(&site)),
            Budget::Measured => None,
        };
        let s = stats.entry(name.to_string()).or_default();
        s.instances += 1;
        s.budget = b.to_string();
        s.max_rel_error_u = s.max_rel_error_u.max(rel / U32);
        if let Some(allowed) = allowed {
            let slack = 2f64.powi(-40) * norm;
            let over = err
                .iter()
                .zip(&allowed)
                .map(|(e, a)| if *e == 0.0 { 0.0 } else { e / (a + slack) })
                .fold(0.0, f64::max);
            s.max_over_budget = s.max_over_budget.max(over);
            t.max_error("local_error_over_budget", over);
            t.check(over <= 1.0, || {
                format!(
                    "program {k}: node `{}` ({name}): error {:e} over its budget ({over})",
                    n.name,
                    max_abs(&err)
                )
            });
        }
    }
}

/// One stage of a chain.
#[derive(Debug, Clone)]
enum Stage {
    MatMul(Vec<f64>, usize, usize),
    Bias(Vec<f64>),
    Scale(f64),
    Tanh,
    Sigmoid,
    Exp,
}

impl Stage {
    fn program(&self, ty: &TensorType) -> Program {
        let mut b = Builder::new();
        let x = b.input("x", ty.clone(), InputKind::Data).expect("fresh");
        let dt = ty.dtype;
        let y = match self {
            Stage::MatMul(w, r, c) => {
                let w = b
                    .constant(Tensor::from_f64s(dt, [*r, *c], w.clone()).expect("r c"))
                    .expect("constant");
                b.matmul(x, w)
            }
            Stage::Bias(v) => {
                let c = b
                    .constant(Tensor::from_f64s(dt, [v.len()], v.clone()).expect("d"))
                    .expect("constant");
                let bb = b.broadcast_rows(c, ty.dims()[0]).expect("rows");
                b.add(x, bb)
            }
            Stage::Scale(c) => b.scale(x, *c),
            Stage::Tanh => b.tanh(x),
            Stage::Sigmoid => b.sigmoid(x),
            Stage::Exp => b.exp(x),
        }
        .expect("stage fits");
        b.finish(&[y]).expect("output")
    }

    /// Lipschitz constant in the ∞-norm on the segments between `a` and `b`, elementwise.
    fn lipschitz(&self, a: &[f64], b: &[f64]) -> f64 {
        let seg = |f: &dyn Fn(f64, f64) -> f64| {
            a.iter()
                .zip(b)
                .map(|(&p, &q)| f(p.min(q), p.max(q)))
                .fold(0.0, f64::max)
        };
        // The point of [lo, hi] nearest 0 maximises tanh' and sigmoid'.
        let nearest0 = |lo: f64, hi: f64| lo.max(0.0).min(hi.max(lo.max(0.0))).clamp(lo, hi);
        match self {
            Stage::MatMul(w, r, c) => (0..*c)
                .map(|j| (0..*r).map(|i| w[i * c + j].abs()).sum::<f64>())
                .fold(0.0, f64::max),
            Stage::Bias(_) => 1.0,
            Stage::Scale(c) => c.abs(),
            Stage::Tanh => seg(&|lo, hi| 1.0 - nearest0(lo, hi).tanh().powi(2)),
            Stage::Sigmoid => seg(&|lo, hi| {
                let s = 1.0 / (1.0 + (-nearest0(lo, hi)).exp());
                s * (1.0 - s)
            }),
            Stage::Exp => seg(&|_, hi| hi.exp()),
        }
    }
}

/// Runs one random chain; returns the observed/bound ratio at its last stage and the number of
/// stages.
fn chain(t: &mut Tally, seed: u64, k: usize) -> (f64, usize) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let (rows, mut d) = (rng.random_range(1..=4), rng.random_range(1..=8));
    let n = rng.random_range(2..=10);
    let grid = |rng: &mut ChaCha8Rng, m: f64| (rng.random_range(-m..=m) * 256.0).round() / 256.0;
    let x: Vec<f64> = (0..rows * d).map(|_| grid(&mut rng, 1.0)).collect();
    let mut z = Tensor::f64([rows, d], x.clone()).expect("x");
    let mut zh = Tensor::f32([rows, d], x.iter().map(|&v| v as f32).collect()).expect("x");
    let (mut bound, mut worst) = (0.0f64, 0.0f64);
    for i in 0..n {
        let mag = max_abs(&z.to_f64_vec());
        let stage = match rng.random_range(0..6) {
            0 => {
                let c = rng.random_range(1..=8);
                let s = 1.0 / (d as f64).sqrt();
                let w = (0..d * c).map(|_| grid(&mut rng, s)).collect();
                let s = Stage::MatMul(w, d, c);
                d = c;
                s
            }
            1 => Stage::Bias((0..d).map(|_| grid(&mut rng, 1.0)).collect()),
            2 => Stage::Scale(grid(&mut rng, 2.0)),
            3 => Stage::Tanh,
            4 => Stage::Sigmoid,
            _ if mag <= 2.0 => Stage::Exp,
            _ => Stage::Tanh,
        };
        let (p64, p32) = (stage.program(&z.ty()), stage.program(&zh.ty()));
        let zh64 = as_dtype(&zh, DType::F64, |v| v);
        let step = (|| {
            let local = interp::eval(&p64, std::slice::from_ref(&zh64))?;
            let next_h = interp::eval(&p32, std::slice::from_ref(&zh))?;
            let next = interp::eval(&p64, std::slice::from_ref(&z))?;
            Ok::<_, interp::EvalError>((local, next_h, next))
        })();
        let (local, next_h, next) = match step {
            Ok(r) => r,
            Err(e) => {
                t.fail(format!("chain {k}: stage {i} {stage:?}: {e}"));
                return (0.0, n);
            }
        };
        let eps = max_abs(
            &flat(&next_h)
                .iter()
                .zip(flat(&local))
                .map(|(a, b)| a - b)
                .collect::<Vec<_>>(),
        );
        let lip = stage.lipschitz(&z.to_f64_vec(), &zh64.to_f64_vec());
        // B_i = ε_i + L_i B_{i-1}, the bound's sum Σ_j ε_j Π_{l>j} L_l unrolled.
        bound = eps + lip * bound;
        z = next.into_iter().next().expect("one output");
        zh = next_h.into_iter().next().expect("one output");
        let observed = max_abs(
            &flat(std::slice::from_ref(&zh))
                .iter()
                .zip(z.to_f64_vec())
                .map(|(a, b)| a - b)
                .collect::<Vec<_>>(),
        );
        let allowed = bound + 2f64.powi(-40) * max_abs(&z.to_f64_vec());
        if allowed > 0.0 && i + 1 == n {
            worst = observed / allowed;
        }
        t.max_error("chain_observed_error", observed);
        t.check(observed <= allowed, || {
            format!("chain {k}: stage {i} ({stage:?}): observed {observed:e} > bound {allowed:e}")
        });
    }
    (worst, n)
}
