//! Random smooth tensor graphs: the generator's smooth entries, checked at random points
//! in f64 and in f32 with the independent JVP and VJP programs.
//!
//! With x the inputs, v a tangent, u an output seed (all uniform in [-1, 1]), Jv from the JVP
//! program and Jᵀu from the VJP program:
//! - adjoint test: e_adj = |<u, Jv> - <Jᵀu, v>| / (‖u‖₂ max(‖Jv‖₂, τ) + max(‖Jᵀu‖₂, κ) ‖v‖₂),
//!   with inner products in twice the working precision (Dot2) and τ (κ) the largest magnitude
//!   of any tangent (cotangent) the JVP (VJP) program computes: the rounding of Jv is relative
//!   to the terms that formed it, and under cancellation (an output x - log(exp(x)), whose
//!   Jacobian is zero) Jv is rounding noise far below them. Accepted if e_adj <= 2^6 · u_dtype;
//!   graphs where ‖Jv‖₂ < 2^-20 τ (cancelled or vanishing derivatives) are counted;
//! - directional check: the fourth-order central difference of the f64 program,
//!   D = [8(f(x+hv) - f(x-hv)) - (f(x+2hv) - f(x-2hv))] / (12h) with h = 2^-12 (the power of
//!   two below u^(1/5)/2, where truncation O(h⁴) and rounding O(u/h) balance), discrepancy
//!   e_dir = ‖D - Jv‖∞ / max(1, ‖Jv‖∞, ‖f(x)‖∞) (the rounding of D scales with f);
//!   accepted in f64 if e_dir <= 2^10 · u^(4/5). For f32, Jv is the f32 JVP program's and D the
//!   f64 twin's (the same graph with the same constants, exact in both) at the same point,
//!   accepted if e_dir <= 2^10 · u_f32;
//! - in f64 also the reference run's second-order difference (f(x+hv) - f(x-hv)) / 2h with
//!   h = 2·10⁻⁶ and e = ‖D - Jv‖∞ / max(1, ‖Jv‖∞), with its threshold 2·10⁻⁶;
//! - the primal outputs of the JVP and VJP programs equal eval's, bitwise.
//!
//! Maxima over the first 201 graphs (the reference sample size) are reported beside the run's.
//!
//! A pairing check alone is insufficient (incorrect maps can be adjoints of each other;
//! docs/derivatives.md), which is why the directional check is there too.

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::generate::{generate, random_inputs, random_tensor, GenConfig};
use super::numeric::{dot2, flat, max_abs, norm2, perturbed, unit, Derivatives};
use super::{Ctx, FamilyReport, Level, Progress, Tally};
use crate::tensor::{DType, Tensor};

/// Options of the smooth-graph family (tests run it on their own primitives).
#[derive(Debug, Clone)]
pub struct SmoothOptions {
    pub graphs: usize,
    /// The generator's base configuration; sizes are drawn per graph, dtype set per pass.
    pub gen: GenConfig,
    pub dtypes: Vec<DType>,
    pub seed: u64,
}

impl SmoothOptions {
    pub fn new(graphs: usize, seed: u64) -> SmoothOptions {
        SmoothOptions {
            graphs,
            gen: GenConfig::default().smooth(),
            dtypes: vec![DType::F64, DType::F32],
            seed,
        }
    }
}

/// Adjoint acceptance: 2^6 u.
pub fn adjoint_tol(dtype: DType) -> f64 {
    64.0 * unit(dtype)
}

/// Directional step of the f64 central difference: 2^-12.
pub const FD_STEP: f64 = 1.0 / 4096.0;

/// Directional acceptance: 2^10 u^(4/5) for f64 (the difference's own accuracy), 2^10 u for f32
/// (the f32 JVP against the f64 difference).
pub fn directional_tol(dtype: DType) -> f64 {
    match dtype {
        DType::F32 => 1024.0 * unit(dtype),
        _ => 1024.0 * unit(dtype).powf(0.8),
    }
}

/// The reference run's step and threshold.
const REFERENCE_STEP: f64 = 2e-6;
const REFERENCE_THRESHOLD: f64 = 2e-6;

/// The reference number of graphs: maxima over the first ones are reported beside the run's.
const REFERENCE_GRAPHS: usize = 201;

pub(crate) fn run(ctx: &Ctx) -> FamilyReport {
    let graphs = ctx.level.pick(12, 2010, 10050);
    let opts = SmoothOptions::new(graphs, ctx.seed);
    smooth_family(ctx, &opts)
}

/// Runs the smooth-graph family with these options.
pub fn run_smooth(opts: &SmoothOptions, progress: &dyn Progress) -> FamilyReport {
    let ctx = Ctx {
        name: "smooth_graphs",
        seed: opts.seed,
        level: Level::Quick,
        progress,
    };
    smooth_family(&ctx, opts)
}

fn smooth_family(ctx: &Ctx, opts: &SmoothOptions) -> FamilyReport {
    let mut t = ctx.tally(
        "generated smooth graphs: adjoint test <u, Jv> = <J^T u, v> with the independent JVP and VJP programs, fourth-order central differences against Jv, in f64 and f32",
        "reference: 201 smooth tensor graphs, 603 directional/adjoint checks; max normalised adjoint error 4.30e-16, relative directional discrepancy 4.45e-10 (step and threshold 2e-6)",
        opts.graphs,
    );
    t.figure("graphs", opts.graphs);
    t.figure(
        "adjoint_error",
        "|<u,Jv> - <J^T u,v>| / (|u|_2 max(|Jv|_2, tau) + max(|J^T u|_2, kappa) |v|_2), Dot2 inner products, tau (kappa) the largest tangent (cotangent) magnitude the JVP (VJP) program computes",
    );
    t.figure(
        "directional_discrepancy",
        "|D - Jv|_inf / max(1, |Jv|_inf, |f(x)|_inf), D the fourth-order central difference of the f64 program with h = 2^-12",
    );
    t.figure("fd_step", FD_STEP);
    for &dt in &opts.dtypes {
        t.figure(&format!("{dt}_adjoint_tolerance"), adjoint_tol(dt));
        t.figure(&format!("{dt}_directional_tolerance"), directional_tol(dt));
    }
    t.figure("f64_reference_step_and_threshold", REFERENCE_STEP);
    let mut rng = ctx.rng();
    let mut nodes = 0usize;
    for g in 0..opts.graphs {
        let seed = rng.random::<u64>();
        let mut cfg = opts.gen.clone();
        cfg.n_nodes = rng.random_range(3..=cfg.n_nodes.max(3) * 2);
        cfg.n_inputs = rng.random_range(1..=cfg.n_inputs.max(1));
        let derivs = |dt: DType| -> Result<Derivatives, String> {
            let mut c = cfg.clone();
            c.dtype = dt;
            let p = generate(&c, seed).map_err(|e| e.to_string())?;
            Derivatives::new(&p).map_err(|e| e.to_string())
        };
        let twin = match derivs(DType::F64) {
            Ok(d) => d,
            Err(e) => {
                t.fail(format!("graph {g} (seed {seed}): {e}"));
                t.case();
                continue;
            }
        };
        nodes += twin.program.n_nodes();
        for &dt in &opts.dtypes {
            let d = if dt == DType::F64 {
                Ok(twin.clone())
            } else {
                derivs(dt)
            };
            match d {
                Ok(d) => check_graph(&mut t, &d, &twin, dt, seed, g),
                Err(e) => t.fail(format!("graph {g} (seed {seed}, {dt}): {e}")),
            }
        }
        t.case();
    }
    t.figure("total_nodes", nodes);
    t.finish()
}

/// The same tensors in f64 (exact).
fn widened(x: &[Tensor]) -> Vec<Tensor> {
    x.iter()
        .map(|t| Tensor::from_f64s(DType::F64, t.shape().clone(), t.to_f64_vec()).expect("same"))
        .collect()
}

fn check_graph(t: &mut Tally, d: &Derivatives, twin: &Derivatives, dt: DType, seed: u64, g: usize) {
    let p = &d.program;
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x5eed);
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
    let at = || format!("graph {g} (seed {seed}, {dt}, {} nodes)", p.n_nodes());
    let (y, jv) = match d.jvp_at(&x, &v) {
        Ok(r) => r,
        Err(e) => return t.fail(format!("{}: jvp: {e}", at())),
    };
    let (y2, jtu) = match d.vjp_at(&x, &u) {
        Ok(r) => r,
        Err(e) => return t.fail(format!("{}: vjp: {e}", at())),
    };
    let y0 = match d.eval(&x) {
        Ok(r) => r,
        Err(e) => return t.fail(format!("{}: eval: {e}", at())),
    };
    let bits = |a: &[Tensor]| flat(a).iter().map(|v| v.to_bits()).collect::<Vec<_>>();
    t.check(bits(&y) == bits(&y0) && bits(&y2) == bits(&y0), || {
        format!(
            "{}: primal outputs of the derivative programs differ from eval",
            at()
        )
    });
    // Adjoint test.
    let (uf, jvf, jtuf, vf) = (flat(&u), flat(&jv), flat(&jtu), flat(&v));
    let scales = (
        d.derivative_scale(&d.jvp.program, &d.jvp_args(&x, &v)),
        d.derivative_scale(&d.vjp.program, &d.vjp_args(&x, &u)),
    );
    let (tau, kappa) = match scales {
        (Ok(a), Ok(b)) => (a, b),
        (Err(e), _) | (_, Err(e)) => return t.fail(format!("{}: {e}", at())),
    };
    if norm2(&jvf) < tau * 2f64.powi(-20) {
        t.count(&format!("{dt}_graphs_with_vanishing_derivatives"), 1);
    }
    let num = (dot2(&uf, &jvf) - dot2(&jtuf, &vf)).abs();
    let den = norm2(&uf) * norm2(&jvf).max(tau) + norm2(&jtuf).max(kappa) * norm2(&vf);
    let e_adj = if num == 0.0 { 0.0 } else { num / den };
    t.check_le(&format!("{dt}_adjoint_error"), e_adj, adjoint_tol(dt), at);
    if g < REFERENCE_GRAPHS {
        t.max_error(&format!("{dt}_adjoint_error_first_201_graphs"), e_adj);
    }
    // Directional check, fourth order, on the f64 twin at the same point.
    let h = FD_STEP;
    let (x64, v64) = (widened(&x), widened(&v));
    let f = |s: f64| twin.eval(&perturbed(&x64, &v64, s)).map(|y| flat(&y));
    let fd4 = (|| -> Result<Vec<f64>, crate::interp::EvalError> {
        let (p1, m1, p2, m2) = (f(h)?, f(-h)?, f(2.0 * h)?, f(-2.0 * h)?);
        Ok((0..p1.len())
            .map(|i| (8.0 * (p1[i] - m1[i]) - (p2[i] - m2[i])) / (12.0 * h))
            .collect())
    })();
    match fd4 {
        Ok(dv) => {
            let diff: Vec<f64> = dv.iter().zip(&jvf).map(|(a, b)| a - b).collect();
            let scale = max_abs(&jvf).max(max_abs(&flat(&y))).max(1.0);
            let e_dir = max_abs(&diff) / scale;
            t.check_le(
                &format!("{dt}_directional_discrepancy"),
                e_dir,
                directional_tol(dt),
                at,
            );
        }
        Err(e) => t.fail(format!("{}: perturbed eval: {e}", at())),
    }
    if dt == DType::F64 {
        // The reference run's second-order difference, for comparison.
        match (f(REFERENCE_STEP), f(-REFERENCE_STEP)) {
            (Ok(p1), Ok(m1)) => {
                let diff: Vec<f64> = (0..p1.len())
                    .map(|i| (p1[i] - m1[i]) / (2.0 * REFERENCE_STEP) - jvf[i])
                    .collect();
                let e = max_abs(&diff) / max_abs(&jvf).max(1.0);
                t.check_le(
                    "f64_directional_discrepancy_reference_method",
                    e,
                    REFERENCE_THRESHOLD,
                    at,
                );
                if g < REFERENCE_GRAPHS {
                    t.max_error(
                        "f64_directional_discrepancy_reference_method_first_201_graphs",
                        e,
                    );
                }
            }
            (Err(e), _) | (_, Err(e)) => t.fail(format!("{}: perturbed eval: {e}", at())),
        }
    }
}
