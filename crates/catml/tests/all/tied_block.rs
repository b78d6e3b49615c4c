//! The tied residual block (docs/examples.md): A = X W + b, H = tanh A, Y = X + H W + b, whose
//! one W and one b are each used twice. For a seed G at Y the closed forms are
//!   H̄ = G Wᵀ,  Ā = H̄ ⊙ (1 - H ⊙ H),  X̄ = G + Ā Wᵀ,  W̄ = Hᵀ G + Xᵀ Ā,  b̄ = Σ_r G + Σ_r Ā.
//! The VJP program must agree with them to rounding, and with directional central differences
//! (step 1e-6, tolerance 3e-7), the step and tolerance of its reference figures.

use crate::common;
use crate::workloads::tied_residual_program;

use std::collections::BTreeMap;

use catml::interp::{eval, order_inputs_named};
use catml::ir::{json, Program};
use catml::prim::builtins;
use catml::tensor::{DType, Tensor};
use common::{f64t, max_abs, random, rng, value_and_grad, Mat, Rng};

/// Rounding-level agreement with the closed forms (the reference figure is 4.45e-16).
const CLOSED_FORM_TOL: f64 = 1e-14;
const FD_STEP: f64 = 1e-6;
const FD_TOL: f64 = 3e-7;

fn modules_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../modules")
}

/// (Y, X̄, W̄, b̄) from the closed forms, computed without CatML.
fn closed_form(x: &Mat, w: &Mat, b: &[f64], g: &Mat) -> (Mat, Mat, Mat, Vec<f64>) {
    let bb = Mat::rows_of(b, x.rows);
    let a = x.matmul(w).zip(&bb, |p, q| p + q);
    let h = a.map(f64::tanh);
    let y = x.zip(&h.matmul(w).zip(&bb, |p, q| p + q), |p, q| p + q);
    let h_bar = g.matmul(&w.t());
    let a_bar = h_bar.zip(&h, |hb, hv| hb * (1.0 - hv * hv));
    let x_bar = g.zip(&a_bar.matmul(&w.t()), |p, q| p + q);
    let w_bar = h.t().matmul(g).zip(&x.t().matmul(&a_bar), |p, q| p + q);
    let b_bar: Vec<f64> = g
        .col_sums()
        .iter()
        .zip(a_bar.col_sums())
        .map(|(p, q)| p + q)
        .collect();
    (y, x_bar, w_bar, b_bar)
}

struct Check {
    closed_form_err: f64,
    fd_err: f64,
}

/// Compares the VJP program at `inputs` (X, W, b) and seed `g` with the closed forms, and with
/// three directional central differences of L = <G, Y>.
fn check(p: &Program, inputs: &[Tensor], g: &Tensor, rng: &mut Rng) -> Check {
    let (out, grads) = value_and_grad(p, inputs, std::slice::from_ref(g));
    let (y, x_bar, w_bar, b_bar) = closed_form(
        &Mat::of(&inputs[0]),
        &Mat::of(&inputs[1]),
        &inputs[2].to_f64_vec(),
        &Mat::of(g),
    );
    let closed_form_err = [
        max_abs(&out[0].to_f64_vec(), &y.data),
        max_abs(&grads[0].to_f64_vec(), &x_bar.data),
        max_abs(&grads[1].to_f64_vec(), &w_bar.data),
        max_abs(&grads[2].to_f64_vec(), &b_bar),
    ]
    .into_iter()
    .fold(0.0, f64::max);

    let loss = |args: &[Tensor]| eval(p, args).unwrap()[0].dot(g);
    let mut fd_err: f64 = 0.0;
    for _ in 0..3 {
        let dirs: Vec<Tensor> = inputs.iter().map(|t| random(rng, &t.ty())).collect();
        let shifted = |s: f64| -> Vec<Tensor> {
            inputs
                .iter()
                .zip(&dirs)
                .map(|(t, d)| common::axpy(t, s * FD_STEP, d))
                .collect()
        };
        let fd = (loss(&shifted(1.0)) - loss(&shifted(-1.0))) / (2.0 * FD_STEP);
        let exact = common::pairing(&grads, &dirs);
        fd_err = fd_err.max((fd - exact).abs());
    }
    Check {
        closed_form_err,
        fd_err,
    }
}

#[test]
fn serialized_block_matches_closed_forms() {
    let dir = modules_dir();
    let text = std::fs::read_to_string(dir.join("tied_residual.json")).unwrap();
    let p = json::from_str(&text, builtins()).unwrap();
    let named: BTreeMap<String, Tensor> = serde_json::from_str(
        &std::fs::read_to_string(dir.join("tied_residual.inputs.json")).unwrap(),
    )
    .unwrap();
    let inputs = order_inputs_named(&p, &named).unwrap();
    assert_eq!(
        p.inputs()
            .iter()
            .map(|i| i.name.as_str())
            .collect::<Vec<_>>(),
        ["X", "W", "b"]
    );
    let mut rng = rng(0);
    let g = random(&mut rng, &f64t(&[2, 3]));
    let c = check(&p, &inputs, &g, &mut rng);
    println!(
        "B=2 d=3 module: closed form {:.3e}, fd {:.3e} (tol {FD_TOL:e})",
        c.closed_form_err, c.fd_err
    );
    assert!(
        c.closed_form_err <= CLOSED_FORM_TOL,
        "{}",
        c.closed_form_err
    );
    assert!(c.fd_err <= FD_TOL, "{}", c.fd_err);
}

#[test]
fn thirty_two_random_blocks_match_closed_forms_and_differences() {
    let mut rng = rng(1);
    let (mut worst_cf, mut worst_fd, mut shapes) = (0.0f64, 0.0f64, Vec::new());
    for _ in 0..32 {
        let rows = rand::RngExt::random_range(&mut rng, 1..=3);
        let d = rand::RngExt::random_range(&mut rng, 1..=4);
        let p = tied_residual_program(rows, d, DType::F64);
        let inputs: Vec<Tensor> = p
            .input_types()
            .iter()
            .map(|t| random(&mut rng, t))
            .collect();
        let g = random(&mut rng, &f64t(&[rows, d]));
        let c = check(&p, &inputs, &g, &mut rng);
        assert!(
            c.closed_form_err <= CLOSED_FORM_TOL,
            "B={rows} d={d}: closed form error {}",
            c.closed_form_err
        );
        assert!(c.fd_err <= FD_TOL, "B={rows} d={d}: fd error {}", c.fd_err);
        worst_cf = worst_cf.max(c.closed_form_err);
        worst_fd = worst_fd.max(c.fd_err);
        shapes.push((rows, d));
    }
    // The cases must cover the stated ranges, not one corner of them.
    for r in 1..=3 {
        assert!(shapes.iter().any(|s| s.0 == r), "no case with batch {r}");
    }
    for d in 1..=4 {
        assert!(shapes.iter().any(|s| s.1 == d), "no case with width {d}");
    }
    println!(
        "32 cases, 96 directions: closed form {worst_cf:.3e}, fd {worst_fd:.3e} (tol {FD_TOL:e})"
    );
}
