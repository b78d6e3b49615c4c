//! First optimiser steps against values computed by hand.

use catml::optim::{clip_by_global_norm, Adam, OptimError, Optimiser, Schedule, Sgd};
use catml::tensor::{Params, Tensor};

fn store(pairs: &[(&str, &[f64])]) -> Params {
    pairs
        .iter()
        .map(|(n, v)| (n.to_string(), Tensor::f64([v.len()], v.to_vec()).unwrap()))
        .collect()
}

fn values(p: &Params, name: &str) -> Vec<f64> {
    p.get(name).unwrap().to_f64_vec()
}

fn close(found: &[f64], expected: &[f64]) {
    assert_eq!(found.len(), expected.len());
    for (f, e) in found.iter().zip(expected) {
        assert!(
            (f - e).abs() < 1e-12,
            "found {found:?}, expected {expected:?}"
        );
    }
}

/// Runs `grads` through a fresh optimiser from `p0`, returning the parameter after each step.
fn trajectory(opt: Optimiser, p0: f64, grads: &[f64]) -> Vec<f64> {
    let mut opt = opt;
    let mut p = store(&[("w", &[p0])]);
    grads
        .iter()
        .map(|&g| {
            opt.step(&mut p, &store(&[("w", &[g])])).unwrap();
            values(&p, "w")[0]
        })
        .collect()
}

#[test]
fn sgd_plain_step() {
    let mut p = store(&[("a", &[1.0, -2.0]), ("b", &[3.0])]);
    let g = store(&[("a", &[0.5, 0.5]), ("b", &[-1.0])]);
    let mut opt = Optimiser::new(Sgd::new(0.1)).unwrap();
    let r = opt.step(&mut p, &g).unwrap();
    close(&values(&p, "a"), &[0.95, -2.05]);
    close(&values(&p, "b"), &[3.1]);
    assert_eq!(r.lr, 0.1);
    assert!((r.grad_norm - 1.5f64.sqrt()).abs() < 1e-15);
    assert_eq!(opt.steps(), 1);
}

#[test]
fn sgd_momentum_first_steps() {
    // b1 = g = 1, p = 1 - 0.1 = 0.9; b2 = 0.9 + 1 = 1.9, p = 0.9 - 0.19 = 0.71.
    let opt = Optimiser::new(Sgd::new(0.1).momentum(0.9)).unwrap();
    close(&trajectory(opt, 1.0, &[1.0, 1.0]), &[0.9, 0.71]);
}

#[test]
fn sgd_nesterov_first_steps() {
    // b1 = 1, d1 = 1 + 0.9 = 1.9, p = 0.81; b2 = 1.9, d2 = 1 + 0.9 * 1.9 = 2.71, p = 0.539.
    let opt = Optimiser::new(Sgd::new(0.1).momentum(0.9).nesterov(true)).unwrap();
    close(&trajectory(opt, 1.0, &[1.0, 1.0]), &[0.81, 0.539]);
}

#[test]
fn sgd_weight_decay_enters_the_gradient() {
    // g' = 0.5 + 0.1 * 2 = 0.7; p = 2 - 0.1 * 0.7 = 1.93.
    let opt = Optimiser::new(Sgd::new(0.1).weight_decay(0.1)).unwrap();
    close(&trajectory(opt, 2.0, &[0.5]), &[1.93]);
    // With momentum the decayed gradient is what the buffer holds: b1 = 0.7, b2 = 0.9 * 0.7 +
    // (0.5 + 0.1 * 1.93) = 1.323, p2 = 1.93 - 0.1323 = 1.7977.
    let opt = Optimiser::new(Sgd::new(0.1).weight_decay(0.1).momentum(0.9)).unwrap();
    close(&trajectory(opt, 2.0, &[0.5, 0.5]), &[1.93, 1.7977]);
}

#[test]
fn sgd_on_f32_rounds_once_to_f32() {
    let mut p = Params::new();
    p.insert("w", Tensor::f32([2], vec![1.0, 0.5]).unwrap());
    let mut g = Params::new();
    g.insert("w", Tensor::f32([2], vec![0.25, -0.5]).unwrap());
    let mut opt = Optimiser::new(Sgd::new(0.5)).unwrap();
    opt.step(&mut p, &g).unwrap();
    assert_eq!(
        p.get("w").unwrap(),
        &Tensor::f32([2], vec![0.875, 0.75]).unwrap()
    );
}

#[test]
fn adam_first_two_steps_with_bias_correction() {
    // t = 1: m = 0.05, v = 0.00025, m̂ = 0.5, v̂ = 0.25: p = 1 - 0.1 * 0.5 / (0.5 + 1e-8).
    // t = 2 (g = 0.25): m = 0.045 + 0.025 = 0.07, v = 0.00024975 + 0.0000625 = 0.00031225,
    // m̂ = 0.07 / 0.19, v̂ = 0.00031225 / 0.001999.
    let p1 = 1.0 - 0.1 * 0.5 / (0.5 + 1e-8);
    let p2 = p1 - 0.1 * (0.07 / 0.19) / ((0.00031225f64 / 0.001999).sqrt() + 1e-8);
    let opt = Optimiser::new(Adam::new(0.1)).unwrap();
    close(&trajectory(opt, 1.0, &[0.5, 0.25]), &[p1, p2]);
    assert!((p1 - 0.900000002).abs() < 1e-15);
    assert!((p2 - 0.806782040477).abs() < 1e-11);
}

#[test]
fn adamw_decay_is_decoupled_from_the_moments() {
    // Zero gradient, weight decay 0.1, lr 0.1, p = 1.
    // Adam + L2: g' = 0.1 p = 0.1, and the first step moves by lr · ĝ/|ĝ| ≈ 0.1: p ≈ 0.9.
    let l2 = Optimiser::new(Adam::new(0.1).weight_decay(0.1)).unwrap();
    let p_l2 = trajectory(l2, 1.0, &[0.0])[0];
    close(&[p_l2], &[1.0 - 0.1 * 0.1 / (0.1 + 1e-8)]);
    // AdamW: p ← p (1 - lr λ) = 0.99, and the moments of a zero gradient move nothing.
    let w = Optimiser::new(Adam::adamw(0.1, 0.1)).unwrap();
    close(&trajectory(w, 1.0, &[0.0]), &[0.99]);
    // With a gradient the two differ too: AdamW = decay, then the plain Adam step.
    let w = Optimiser::new(Adam::adamw(0.1, 0.1)).unwrap();
    close(
        &trajectory(w, 1.0, &[0.5]),
        &[0.99 - 0.1 * 0.5 / (0.5 + 1e-8)],
    );
    let l2 = Optimiser::new(Adam::new(0.1).weight_decay(0.1)).unwrap();
    close(
        &trajectory(l2, 1.0, &[0.5]),
        &[1.0 - 0.1 * 0.6 / (0.6 + 1e-8)],
    );
}

#[test]
fn clipping_scales_to_the_global_norm() {
    let mut g = store(&[("a", &[3.0]), ("b", &[4.0])]);
    assert_eq!(clip_by_global_norm(&mut g, 10.0), 5.0);
    close(&values(&g, "a"), &[3.0]);
    assert_eq!(clip_by_global_norm(&mut g, 1.0), 5.0);
    close(&values(&g, "a"), &[0.6]);
    close(&values(&g, "b"), &[0.8]);
    // Inside the optimiser: SGD with lr 1 moves by the clipped gradient.
    let mut p = store(&[("a", &[0.0]), ("b", &[0.0])]);
    let mut opt = Optimiser::new(Sgd::new(1.0))
        .unwrap()
        .with_clip(1.0)
        .unwrap();
    let r = opt
        .step(&mut p, &store(&[("a", &[3.0]), ("b", &[4.0])]))
        .unwrap();
    assert!(r.clipped);
    assert_eq!(r.grad_norm, 5.0);
    close(&values(&p, "a"), &[-0.6]);
    close(&values(&p, "b"), &[-0.8]);
}

#[test]
fn schedules_give_their_factors() {
    let step = Schedule::Step {
        every: 2,
        gamma: 0.5,
    };
    let f: Vec<f64> = (0..5).map(|t| step.factor(t)).collect();
    assert_eq!(f, vec![1.0, 1.0, 0.5, 0.5, 0.25]);
    let cos = Schedule::Cosine {
        warmup: 2,
        total: 6,
        floor: 0.0,
    };
    let f: Vec<f64> = [0, 1, 2, 3, 4, 6, 10]
        .iter()
        .map(|&t| cos.factor(t))
        .collect();
    close(
        &f,
        &[0.5, 1.0, 1.0, 0.5 + 0.25 * 2f64.sqrt(), 0.5, 0.0, 0.0],
    );
    let floored = Schedule::Cosine {
        warmup: 0,
        total: 4,
        floor: 0.2,
    };
    close(&[floored.factor(2), floored.factor(9)], &[0.6, 0.2]);
    assert_eq!(Schedule::Constant.factor(1_000_000), 1.0);
}

#[test]
fn the_optimiser_follows_its_schedule() {
    // SGD lr 1, gradient 1 each step, step schedule halving every 2 steps: moves 1, 1, 0.5, 0.5.
    let opt = Optimiser::new(Sgd::new(1.0))
        .unwrap()
        .with_schedule(Schedule::Step {
            every: 2,
            gamma: 0.5,
        })
        .unwrap();
    close(&trajectory(opt, 0.0, &[1.0; 4]), &[-1.0, -2.0, -2.5, -3.0]);
}

#[test]
fn state_round_trips_through_safetensors_and_continues_identically() {
    let grads = [0.5, -0.25, 1.0, 0.125];
    let make = || Optimiser::new(Adam::adamw(0.05, 0.01)).unwrap();
    let straight = trajectory(make(), 1.0, &grads);

    let mut opt = make();
    let mut p = store(&[("w", &[1.0])]);
    for &g in &grads[..2] {
        opt.step(&mut p, &store(&[("w", &[g])])).unwrap();
    }
    let bytes = opt.state().to_safetensors().unwrap();
    let mut resumed = make();
    resumed
        .load_state(Params::from_safetensors(&bytes).unwrap())
        .unwrap();
    assert_eq!(resumed.steps(), 2);
    assert_eq!(resumed, opt);
    for &g in &grads[2..] {
        resumed.step(&mut p, &store(&[("w", &[g])])).unwrap();
    }
    assert_eq!(values(&p, "w")[0].to_bits(), straight[3].to_bits());
    let names: Vec<String> = resumed.state().names().map(str::to_string).collect();
    assert_eq!(names, vec!["m/w", "step", "v/w"]);
}

#[test]
fn mistakes_are_typed_errors_with_their_messages() {
    let e = Optimiser::new(Sgd::new(0.1).nesterov(true)).unwrap_err();
    assert_eq!(
        e.to_string(),
        "optimiser momentum: nesterov needs a positive momentum, found 0"
    );
    let e = Optimiser::new(Adam::new(0.1).betas(1.0, 0.999)).unwrap_err();
    assert_eq!(e.to_string(), "optimiser beta1: must be in [0, 1), found 1");

    let mut opt = Optimiser::new(Sgd::new(0.1)).unwrap();
    let mut p = store(&[("w", &[1.0]), ("b", &[0.0])]);
    let e = opt.step(&mut p, &store(&[("w", &[1.0])])).unwrap_err();
    assert_eq!(e, OptimError::MissingGradient { name: "b".into() });
    assert_eq!(e.to_string(), "parameter `b` has no gradient");
    let e = opt
        .step(
            &mut p,
            &store(&[("w", &[1.0]), ("b", &[1.0]), ("q", &[1.0])]),
        )
        .unwrap_err();
    assert_eq!(e.to_string(), "gradient `q` names no parameter");
    let e = opt
        .step(&mut p, &store(&[("w", &[1.0, 2.0]), ("b", &[1.0])]))
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "gradient `w` has type f64[2], its parameter has f64[1]"
    );
    // Nothing moved.
    assert_eq!(values(&p, "w"), vec![1.0]);
    assert_eq!(opt.steps(), 0);

    let mut bad = Params::new();
    bad.insert("m/w", Tensor::f64([1], vec![0.0]).unwrap());
    let e = opt.load_state(bad).unwrap_err();
    assert_eq!(
        e.to_string(),
        "optimiser state `step`: expected an i64 scalar, found nothing"
    );
}
