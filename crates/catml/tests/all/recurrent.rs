//! Unrolled recurrences: values against a direct loop, and derivatives (shared weights, initial
//! state) through `lowering_checks::check`.

use crate::lowering_checks;

use catml::interp::eval;
use catml::ir::{Builder, InputKind, Program};
use catml::prim::recurrent::{elman, gru, ElmanWeights, GruWeights};
use catml::tensor::Tensor;
use lowering_checks::{check, f64s, random, rng};

/// Inputs of a random recurrence: xs (T, B, D), h0 (B, H), then the weights.
fn inputs(seed: u64, tys: &[Vec<usize>]) -> Vec<Tensor> {
    let mut r = rng(seed);
    tys.iter().map(|d| random(&mut r, &f64s(d), 0.8)).collect()
}

fn declare(b: &mut Builder, tys: &[Vec<usize>]) -> Vec<catml::ir::Var> {
    tys.iter()
        .enumerate()
        .map(|(i, d)| {
            let kind = if i < 2 {
                InputKind::Data
            } else {
                InputKind::Param
            };
            b.input(&format!("in{i}"), f64s(d), kind).unwrap()
        })
        .collect()
}

/// row-vector h (len n) times W^T for W (m, n) row-major: sum_j W[i][j] h[j].
fn times_wt(w: &[f64], h: &[f64], m: usize) -> Vec<f64> {
    let n = h.len();
    (0..m)
        .map(|i| (0..n).map(|j| w[i * n + j] * h[j]).sum())
        .collect()
}

fn sigmoid(v: f64) -> f64 {
    1.0 / (1.0 + (-v).exp())
}

/// The states of a recurrence computed by a plain loop, one batch row at a time.
fn reference(x: &[Tensor], sizes: (usize, usize, usize, usize), gated: bool) -> Vec<f64> {
    let (steps, batch, width, hidden) = sizes;
    let v: Vec<Vec<f64>> = x.iter().map(Tensor::to_f64_vec).collect();
    let mut out = vec![0.0; steps * batch * hidden];
    for bi in 0..batch {
        let mut h = v[1][bi * hidden..(bi + 1) * hidden].to_vec();
        for t in 0..steps {
            let xt = &v[0][(t * batch + bi) * width..(t * batch + bi + 1) * width];
            h = if gated {
                let gi: Vec<f64> = times_wt(&v[2], xt, 3 * hidden)
                    .iter()
                    .zip(&v[4])
                    .map(|(a, c)| a + c)
                    .collect();
                let gh: Vec<f64> = times_wt(&v[3], &h, 3 * hidden)
                    .iter()
                    .zip(&v[5])
                    .map(|(a, c)| a + c)
                    .collect();
                (0..hidden)
                    .map(|j| {
                        let r = sigmoid(gi[j] + gh[j]);
                        let z = sigmoid(gi[hidden + j] + gh[hidden + j]);
                        let n = (gi[2 * hidden + j] + r * gh[2 * hidden + j]).tanh();
                        (1.0 - z) * n + z * h[j]
                    })
                    .collect()
            } else {
                let a = times_wt(&v[2], xt, hidden);
                let c = times_wt(&v[3], &h, hidden);
                (0..hidden)
                    .map(|j| (a[j] + c[j] + v[4][j]).tanh())
                    .collect()
            };
            out[(t * batch + bi) * hidden..(t * batch + bi + 1) * hidden].copy_from_slice(&h);
        }
    }
    out
}

fn run(seed: u64, gated: bool) {
    let mut r = rng(seed);
    use rand::RngExt;
    let (steps, batch, width, hidden) = (
        r.random_range(1..=4),
        r.random_range(1..=3),
        r.random_range(1..=3),
        r.random_range(1..=3),
    );
    let g = if gated { 3 } else { 1 };
    let mut tys = vec![
        vec![steps, batch, width],
        vec![batch, hidden],
        vec![g * hidden, width],
        vec![g * hidden, hidden],
        vec![g * hidden],
    ];
    if gated {
        tys.push(vec![3 * hidden]);
    }
    let mut b = Builder::new();
    let v = declare(&mut b, &tys);
    let out = if gated {
        let w = GruWeights {
            w_ih: v[2],
            w_hh: v[3],
            b_ih: v[4],
            b_hh: v[5],
        };
        gru(&mut b, v[0], v[1], &w).unwrap()
    } else {
        let w = ElmanWeights {
            w_ih: v[2],
            w_hh: v[3],
            b: v[4],
        };
        elman(&mut b, v[0], v[1], &w).unwrap()
    };
    let p: Program = b.finish(&[out.states, out.last]).unwrap();
    // One input slot per weight, however many steps read it.
    assert_eq!(p.n_inputs(), tys.len());
    let x = inputs(seed, &tys);
    let got = eval(&p, &x).unwrap();
    let want = reference(&x, (steps, batch, width, hidden), gated);
    let err = got[0]
        .to_f64_vec()
        .iter()
        .zip(&want)
        .fold(0.0f64, |m, (a, b)| m.max((a - b).abs()));
    assert!(err < 1e-12, "states differ from the loop by {err:e}");
    // The last state is the last of the stacked states, exactly.
    assert_eq!(
        got[1].to_f64_vec(),
        got[0].to_f64_vec()[(steps - 1) * batch * hidden..].to_vec()
    );
    check(&p, &x, seed, 1e-9);
}

#[test]
fn elman_matches_a_loop_and_its_derivatives_check() {
    for seed in 0..6 {
        run(seed, false);
    }
}

#[test]
fn gru_matches_a_loop_and_its_derivatives_check() {
    for seed in 10..16 {
        run(seed, true);
    }
}

#[test]
fn recurrences_reject_mismatched_states() {
    let mut b = Builder::new();
    let xs = b.input("xs", f64s(&[3, 2, 4]), InputKind::Data).unwrap();
    let h0 = b.input("h0", f64s(&[5, 2]), InputKind::Data).unwrap();
    let w = b.input("w", f64s(&[2, 4]), InputKind::Param).unwrap();
    let u = b.input("u", f64s(&[2, 2]), InputKind::Param).unwrap();
    let c = b.input("c", f64s(&[2]), InputKind::Param).unwrap();
    let err = elman(
        &mut b,
        xs,
        h0,
        &ElmanWeights {
            w_ih: w,
            w_hh: u,
            b: c,
        },
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "recurrence: initial state must be f64[2, hidden] to fit inputs f64[3, 2, 4], found f64[5, 2]"
    );
}
