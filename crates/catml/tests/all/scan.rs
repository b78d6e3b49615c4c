//! Recurrent layers as one scan node: the same values and gradients as the unrolled steps, a
//! program whose size does not grow with T, and training at T = 1000.

use catml::ad;
use catml::interp::eval;
use catml::ir::Program;
use catml::nn::{seeded, Gru, Linear, Rnn};
use catml::optim::{Adam, Optimiser};
use catml::tensor::{DType, Params, Tensor, TensorType};
use catml::trace::trace_named;

/// The loss mean((W h_T + b - target)^2) of a GRU or Elman cell over (t, batch, 2) inputs.
fn loss(
    t: usize,
    batch: usize,
    hidden: usize,
    gru: bool,
    unrolled: bool,
    dt: DType,
) -> (Program, Params) {
    let xs = ("xs", TensorType::new(dt, [t, batch, 2]));
    let h0 = ("h0", TensorType::new(dt, [batch, hidden]));
    let target = ("target", TensorType::new(dt, [batch, 1]));
    let traced = trace_named(&[xs, h0, target], |v| {
        let mut rng = seeded(3);
        let h = if gru {
            let g = Gru::new(hidden);
            let g = if unrolled { g.unrolled() } else { g };
            g.apply(&v[0], &v[1], &mut rng, "rec")
        } else {
            let r = Rnn::new(hidden);
            let r = if unrolled { r.unrolled() } else { r };
            r.apply(&v[0], &v[1], &mut rng, "rec")
        };
        // Both the last state and every state feed the loss.
        let all = h.all.sum_all().scale(1e-3);
        &Linear::new(1).apply(&h.last, &mut rng, "out").mse(&v[2]) + &all
    })
    .unwrap();
    (traced.program, traced.params)
}

/// Inputs of the adding problem (values and markers), zero h0, and the marked sums.
fn data(t: usize, batch: usize, hidden: usize, dt: DType, seed: u64) -> Vec<Tensor> {
    let mut xs = vec![0.0; t * batch * 2];
    let mut ys = vec![0.0; batch];
    let mut s = seed;
    let mut next = || {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (s >> 11) as f64 / (1u64 << 53) as f64
    };
    for b in 0..batch {
        let marks = [
            (next() * (t / 2) as f64) as usize,
            t / 2 + (next() * (t / 2) as f64) as usize,
        ];
        for step in 0..t {
            let v = next();
            xs[(step * batch + b) * 2] = v;
            if marks.contains(&step) {
                xs[(step * batch + b) * 2 + 1] = 1.0;
                ys[b] += v;
            }
        }
    }
    let make = |dims: Vec<usize>, v: Vec<f64>| match dt {
        DType::F32 => Tensor::f32(dims, v.into_iter().map(|x| x as f32).collect()).unwrap(),
        _ => Tensor::f64(dims, v).unwrap(),
    };
    vec![
        make(vec![t, batch, 2], xs),
        make(vec![batch, hidden], vec![0.0; batch * hidden]),
        make(vec![batch, 1], ys),
    ]
}

fn arguments(p: &Program, params: &Params, data: &[Tensor]) -> Vec<Tensor> {
    let mut args = data.to_vec();
    for i in p.param_indices() {
        args.push(params.get(&p.inputs()[i].name).unwrap().clone());
    }
    args
}

#[test]
fn scanned_cells_match_the_unrolled_cells() {
    for gru in [true, false] {
        let (t, batch, hidden) = (5, 3, 4);
        let (s, params) = loss(t, batch, hidden, gru, false, DType::F64);
        let (u, _) = loss(t, batch, hidden, gru, true, DType::F64);
        let args = arguments(&s, &params, &data(t, batch, hidden, DType::F64, 7));
        // The same operations in the same order: the same bits.
        assert_eq!(eval(&s, &args).unwrap(), eval(&u, &args).unwrap());
        // Gradients add the same terms, but a carry's cotangent from later steps and from
        // the stacked states are added in another order: equal to 1e-13 relative.
        let (gs, gu) = (ad::grad(&s).unwrap(), ad::grad(&u).unwrap());
        let (vs, vu) = (
            eval(&gs.program, &args).unwrap(),
            eval(&gu.program, &args).unwrap(),
        );
        for i in 0..s.n_inputs() {
            let (a, b) = (gs.layout.gradient(&vs, i), gu.layout.gradient(&vu, i));
            let (Some(a), Some(b)) = (a, b) else { continue };
            for (x, y) in a.to_f64_vec().iter().zip(b.to_f64_vec()) {
                assert!(
                    (x - y).abs() <= 1e-13 * (1.0 + y.abs()),
                    "gru {gru}, input {i}: {x} vs {y}"
                );
            }
        }
    }
}

#[test]
fn a_scanned_gru_program_does_not_grow_with_t() {
    let (short, _) = loss(10, 2, 4, true, false, DType::F32);
    let (long, _) = loss(1000, 2, 4, true, false, DType::F32);
    assert_eq!(short.n_nodes(), long.n_nodes());
    let (gs, gl) = (ad::grad(&short).unwrap(), ad::grad(&long).unwrap());
    assert_eq!(gs.program.n_nodes(), gl.program.n_nodes());
    let (unrolled, _) = loss(10, 2, 4, true, true, DType::F32);
    assert!(unrolled.n_nodes() > short.n_nodes());
}

#[test]
fn a_scanned_gru_trains_at_t_1000() {
    let (t, batch, hidden) = (1000, 4, 4);
    let (p, mut params) = loss(t, batch, hidden, true, false, DType::F32);
    let g = ad::grad(&p).unwrap();
    let batch_data = data(t, batch, hidden, DType::F32, 1);
    let mut opt = Optimiser::new(Adam::new(1e-2)).unwrap();
    let mut losses = Vec::new();
    for _ in 0..3 {
        let out = eval(&g.program, &arguments(&p, &params, &batch_data)).unwrap();
        losses.push(out[0].to_f64_vec()[0]);
        let mut grads = Params::new();
        for i in p.param_indices() {
            let name = &p.inputs()[i].name;
            grads.insert(name, g.layout.gradient(&out, i).unwrap().clone());
        }
        opt.step(&mut params, &grads).unwrap();
    }
    assert!(losses[2] < losses[0], "losses {losses:?}");
}

#[test]
fn a_checkpoint_policy_recomputes_a_scans_carries_with_equal_gradients() {
    use catml::ad::CheckpointPolicy;
    let (t, batch, hidden) = (20, 3, 4);
    let (p, params) = loss(t, batch, hidden, true, false, DType::F64);
    let args = arguments(&p, &params, &data(t, batch, hidden, DType::F64, 11));
    let plain = ad::grad(&p).unwrap();
    let scan_value = |v: &ad::Vjp| {
        v.layout.residuals.iter().any(|r| {
            p.nodes()
                .iter()
                .any(|n| n.name == r.name && n.prim.name() == "scan")
        })
    };
    // Without a policy the backward scan reads the forward scan's stacked carries.
    assert!(scan_value(&plain));
    let want = eval(&plain.program, &args).unwrap();
    for policy in [CheckpointPolicy::NothingSaveable, CheckpointPolicy::Dots] {
        let v = ad::grad_with(&p, &policy).unwrap();
        // The scan is run again in the backward part instead: its value is no residual.
        assert!(!scan_value(&v), "{policy:?} kept the scan's value");
        assert_eq!(eval(&v.program, &args).unwrap(), want, "{policy:?}");
    }
}
