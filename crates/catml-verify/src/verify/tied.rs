//! The tied residual block (docs/examples.md): for X ∈ R^{B×d}, W ∈ R^{d×d}, b ∈ R^d,
//! A = XW + b, H = tanh A, Y = X + HW + b, with one W and one b each used twice. For a seed G
//! at Y the closed forms are
//!   H̄ = G Wᵀ,  Ā = H̄ ⊙ (1 - H ⊙ H),  X̄ = G + Ā Wᵀ,  W̄ = Hᵀ G + Xᵀ Ā,
//!   b̄ = Σ_r G_{r,:} + Σ_r Ā_{r,:},
//! computed here with plain loops. Over random batch B ∈ 1..=3 and width d ∈ 1..=4 (the
//! reference ranges):
//! - Y and the VJP program's X̄, W̄, b̄ against the closed forms: ‖Δ‖∞ <= 2^5 (d + 2) u S, with
//!   S = max(1, largest closed-form magnitude), in f64 and in f32;
//! - three directional checks per case with the reference method: L(θ) = <G, Y(θ)>,
//!   (L(θ + hV) - L(θ - hV)) / 2h with h = 10⁻⁶ against <θ̄, V>, accepted within 3·10⁻⁷; and
//!   the JVP program's <G, J V> against <θ̄, V> within 2^6 u (‖G‖‖JV‖ + ‖θ̄‖‖V‖).

use rand::RngExt;
use rand_chacha::ChaCha8Rng;

use super::generate::random_tensor;
use super::numeric::{dot2, flat, norm2, perturbed, Derivatives};
use super::{Ctx, FamilyReport, Tally};
use crate::ir::{Builder, InputKind, Program, Var};
use crate::prim::Ops;
use crate::tensor::{DType, Tensor, TensorType};

/// The reference step and tolerance.
const STEP: f64 = 1e-6;
const FD_TOL: f64 = 3e-7;

/// The reference number of cases: maxima over the first ones are reported beside the run's.
const REFERENCE_CASES: usize = 32;

/// The block as a program with `modules/tied_residual.json`'s names (X, W, b; bb, XW, A, H, HW,
/// HWb, Y).
pub(crate) fn tied_block(batch: usize, d: usize, dtype: DType) -> Program {
    let mut b = Builder::new();
    let x = b
        .input("X", TensorType::new(dtype, [batch, d]), InputKind::Data)
        .expect("fresh");
    let w = b
        .input("W", TensorType::new(dtype, [d, d]), InputKind::Param)
        .expect("fresh");
    let bias = b
        .input("b", TensorType::new(dtype, [d]), InputKind::Param)
        .expect("fresh");
    let bb = named(&mut b, "bb", |b| b.broadcast_rows(bias, batch));
    let xw = named(&mut b, "XW", |b| b.matmul(x, w));
    let a = named(&mut b, "A", |b| b.add(xw, bb));
    let h = named(&mut b, "H", |b| b.tanh(a));
    let hw = named(&mut b, "HW", |b| b.matmul(h, w));
    let hwb = named(&mut b, "HWb", |b| b.add(hw, bb));
    let y = named(&mut b, "Y", |b| b.add(x, hwb));
    b.finish(&[y]).expect("one output")
}

/// Applies a builder method with the node named exactly `name`.
fn named(
    b: &mut Builder,
    name: &str,
    f: impl FnOnce(&mut Builder) -> Result<Var, crate::ir::TypeError>,
) -> Var {
    let prefix = b.set_name_prefix(name);
    let v = f(b).expect("the block is well typed");
    b.set_name_prefix(&prefix);
    v
}

/// Row-major matrices as (rows, cols, data).
struct Mat {
    r: usize,
    c: usize,
    v: Vec<f64>,
}

impl Mat {
    fn at(&self, i: usize, j: usize) -> f64 {
        self.v[i * self.c + j]
    }
    fn from(t: &Tensor, r: usize, c: usize) -> Mat {
        Mat {
            r,
            c,
            v: t.to_f64_vec(),
        }
    }
    /// op(A) op(B) with optional transposes.
    fn mm(a: &Mat, ta: bool, b: &Mat, tb: bool) -> Mat {
        let (m, k) = if ta { (a.c, a.r) } else { (a.r, a.c) };
        let n = if tb { b.r } else { b.c };
        let mut v = vec![0.0; m * n];
        for i in 0..m {
            for j in 0..n {
                v[i * n + j] = (0..k)
                    .map(|t| {
                        let x = if ta { a.at(t, i) } else { a.at(i, t) };
                        let y = if tb { b.at(j, t) } else { b.at(t, j) };
                        x * y
                    })
                    .sum();
            }
        }
        Mat { r: m, c: n, v }
    }
}

/// Closed forms: (Y, X̄, W̄, b̄).
fn closed_forms(x: &Mat, w: &Mat, b: &[f64], g: &Mat) -> [Vec<f64>; 4] {
    let (rows, d) = (x.r, x.c);
    let xw = Mat::mm(x, false, w, false);
    let h: Vec<f64> = (0..rows * d).map(|k| (xw.v[k] + b[k % d]).tanh()).collect();
    let h = Mat {
        r: rows,
        c: d,
        v: h,
    };
    let hw = Mat::mm(&h, false, w, false);
    let y: Vec<f64> = (0..rows * d).map(|k| x.v[k] + hw.v[k] + b[k % d]).collect();
    let hbar = Mat::mm(g, false, w, true);
    let abar = Mat {
        r: rows,
        c: d,
        v: (0..rows * d)
            .map(|k| hbar.v[k] * (1.0 - h.v[k] * h.v[k]))
            .collect(),
    };
    let aw = Mat::mm(&abar, false, w, true);
    let xbar: Vec<f64> = (0..rows * d).map(|k| g.v[k] + aw.v[k]).collect();
    let (htg, xta) = (Mat::mm(&h, true, g, false), Mat::mm(x, true, &abar, false));
    let wbar: Vec<f64> = (0..d * d).map(|k| htg.v[k] + xta.v[k]).collect();
    let bbar: Vec<f64> = (0..d)
        .map(|j| {
            (0..rows).map(|r| g.at(r, j)).sum::<f64>()
                + (0..rows).map(|r| abar.at(r, j)).sum::<f64>()
        })
        .collect();
    [y, xbar, wbar, bbar]
}

pub(crate) fn run(ctx: &Ctx) -> FamilyReport {
    let n = ctx.level.pick(4, 320, 1600);
    let mut t = ctx.tally(
        "the tied residual block against its closed forms (f64 and f32) over random batch 1..=3 and width 1..=4, three directional finite-difference checks per case",
        "reference: 32 tied-block cases, max abs error 4.45e-16; 96 directional FD checks (step 1e-6, tolerance 3e-7), max discrepancy 4.45e-10",
        n,
    );
    t.figure("cases", n);
    t.figure("fd_step", STEP);
    t.figure("fd_tolerance", FD_TOL);
    t.figure(
        "closed_form_tolerance",
        "2^5 (d+2) u max(1, |closed form|_inf)",
    );
    let mut rng = ctx.rng();
    for k in 0..n {
        let (batch, d) = (rng.random_range(1..=3), rng.random_range(1..=4));
        check_case(&mut t, &mut rng, batch, d, k);
        t.case();
    }
    t.finish()
}

fn check_case(t: &mut Tally, rng: &mut ChaCha8Rng, batch: usize, d: usize, k: usize) {
    let at = || format!("case {k} (B = {batch}, d = {d})");
    for dtype in [DType::F64, DType::F32] {
        let p = tied_block(batch, d, dtype);
        let dv = match Derivatives::new(&p) {
            Ok(dv) => dv,
            Err(e) => return t.fail(format!("{}: {e}", at())),
        };
        let x: Vec<Tensor> = p
            .inputs()
            .iter()
            .map(|i| random_tensor(&i.ty, rng, 1.0))
            .collect();
        let g = random_tensor(&p.output_types()[0], rng, 1.0);
        let (y, grads) = match dv.vjp_at(&x, std::slice::from_ref(&g)) {
            Ok(r) => r,
            Err(e) => return t.fail(format!("{}: vjp: {e}", at())),
        };
        let want = closed_forms(
            &Mat::from(&x[0], batch, d),
            &Mat::from(&x[1], d, d),
            &x[2].to_f64_vec(),
            &Mat::from(&g, batch, d),
        );
        let got = [
            y[0].to_f64_vec(),
            grads[0].to_f64_vec(),
            grads[1].to_f64_vec(),
            grads[2].to_f64_vec(),
        ];
        let names = ["Y", "X_bar", "W_bar", "b_bar"];
        for ((name, got), want) in names.iter().zip(&got).zip(&want) {
            let err = got
                .iter()
                .zip(want)
                .map(|(a, b)| (a - b).abs())
                .fold(0.0, f64::max);
            let scale = want.iter().fold(1.0f64, |m, v| m.max(v.abs()));
            let tol = 32.0 * (d + 2) as f64 * dtype.unit_roundoff() * scale;
            t.check_le(&format!("{dtype}_closed_form_abs_error"), err, tol, || {
                format!("{}: {dtype} {name}", at())
            });
            if k < REFERENCE_CASES {
                t.max_error(
                    &format!("{dtype}_closed_form_abs_error_first_32_cases"),
                    err,
                );
            }
        }
        if dtype == DType::F64 {
            let first = k < REFERENCE_CASES;
            directional(t, rng, &dv, &x, &g, &grads, &|| (at(), first));
        }
    }
}

fn directional(
    t: &mut Tally,
    rng: &mut ChaCha8Rng,
    dv: &Derivatives,
    x: &[Tensor],
    g: &Tensor,
    grads: &[Tensor],
    case: &dyn Fn() -> (String, bool),
) {
    let at = || case().0;
    let first = case().1;
    let gf = g.to_f64_vec();
    let loss = |s: f64, v: &[Tensor]| {
        dv.eval(&perturbed(x, v, s))
            .map(|y| dot2(&gf, &y[0].to_f64_vec()))
    };
    for _ in 0..3 {
        let v: Vec<Tensor> = x
            .iter()
            .map(|xi| random_tensor(&xi.ty(), rng, 1.0))
            .collect();
        let pairing = dot2(&flat(grads), &flat(&v));
        match (loss(STEP, &v), loss(-STEP, &v)) {
            (Ok(lp), Ok(lm)) => {
                let fd = (lp - lm) / (2.0 * STEP);
                t.check_le(
                    "f64_fd_abs_discrepancy",
                    (fd - pairing).abs(),
                    FD_TOL,
                    || format!("{}: directional check", at()),
                );
                if first {
                    t.max_error(
                        "f64_fd_abs_discrepancy_first_32_cases",
                        (fd - pairing).abs(),
                    );
                }
            }
            (Err(e), _) | (_, Err(e)) => t.fail(format!("{}: {e}", at())),
        }
        match dv.jvp_at(x, &v) {
            Ok((_, jv)) => {
                let jvf = jv[0].to_f64_vec();
                let lhs = dot2(&gf, &jvf);
                let den = norm2(&gf) * norm2(&jvf) + norm2(&flat(grads)) * norm2(&flat(&v));
                let e = if lhs == pairing {
                    0.0
                } else {
                    (lhs - pairing).abs() / den
                };
                t.check_le("f64_adjoint_error", e, 64.0 * f64::EPSILON / 2.0, || {
                    format!("{}: <G, JV> against <grad, V>", at())
                });
            }
            Err(e) => t.fail(format!("{}: jvp: {e}", at())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_block_is_the_tied_residual_module() {
        let text = include_str!("../../data/tied_residual.json");
        let module = crate::ir::json::from_str(text, crate::prim::builtins()).unwrap();
        assert_eq!(module, tied_block(2, 3, DType::F64));
    }
}
