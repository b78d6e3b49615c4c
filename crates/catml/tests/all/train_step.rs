//! The training step as one program, evaluated step by step on the trainer's own batches,
//! against the trainer: parameters and optimiser state after two epochs (12 steps), for SGD
//! with momentum, Adam and AdamW, with clipping and schedules, in f64 and f32.
//!
//! Tolerances, as max |program − trainer| / max(1, max |trainer|) per tensor: the trainer's
//! optimiser computes each update in f64 and rounds it once to the parameter's dtype, the
//! program computes it in that dtype node by node. In f64 the two differ by a few ulps of
//! 2^-52 per step (3.3e-16 measured, 1e-14 allowed); in f32 by a few ulps of 2^-23 per step,
//! which Adam's division by √v̂ can magnify where v̂ is tiny (3.6e-7 measured, 4e-6 allowed).

use catml::diagram::{Arrow, Diagram, Distance, Equation, Path, Supervised};
use catml::ir::{Builder, InputKind, Program};
use catml::optim::{Adam, Method, Optimiser, Schedule, Sgd};
use catml::prim::Ops;
use catml::tensor::{DType, Params, Tensor, TensorType};
use catml::train::{initialise, Columns, Dataset, Progress, Table, TrainStep, Trainer, STEP};
use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha8Rng;

const B: usize = 8;

/// tanh(x W1ᵀ + b1) W2ᵀ + b2 on batches of B.
fn mlp(dtype: DType, n_in: usize, hidden: usize, n_out: usize) -> Program {
    let ty = |d: &[usize]| TensorType::new(dtype, d.to_vec());
    let mut b = Builder::new();
    let x = b.input("x", ty(&[B, n_in]), InputKind::Data).unwrap();
    let w1 = b
        .input("W1", ty(&[hidden, n_in]), InputKind::Param)
        .unwrap();
    let b1 = b.input("b1", ty(&[hidden]), InputKind::Param).unwrap();
    let w2 = b
        .input("W2", ty(&[n_out, hidden]), InputKind::Param)
        .unwrap();
    let b2 = b.input("b2", ty(&[n_out]), InputKind::Param).unwrap();
    let h = b.linear(x, w1, b1).unwrap();
    let h = b.tanh(h).unwrap();
    let y = b.linear(h, w2, b2).unwrap();
    b.finish(&[y]).unwrap()
}

/// E -> S -> D and E -> D, three supervised terms and the triangle's equation.
fn triangle(dtype: DType) -> Diagram {
    let mut d = Diagram::new();
    d.object("E", TensorType::new(dtype, [2])).unwrap();
    d.object("S", TensorType::new(dtype, [1])).unwrap();
    d.object("D", TensorType::new(dtype, [3])).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    for (name, src, dst, p) in [
        ("f", "E", "S", mlp(dtype, 2, 4, 1)),
        ("g", "S", "D", mlp(dtype, 1, 4, 3)),
        ("h", "E", "D", mlp(dtype, 2, 4, 3)),
    ] {
        let params = initialise(&p, &mut rng);
        d.arrow(Arrow::new(name, src, dst, p, params).unwrap())
            .unwrap();
    }
    d.supervised(Supervised::new("syndrome", Path::of(["f"])))
        .unwrap();
    d.supervised(Supervised::new("g_fit", Path::of(["g"])).loss(Distance::CrossEntropy))
        .unwrap();
    d.supervised(Supervised::new("h_fit", Path::of(["h"])).loss(Distance::CrossEntropy))
        .unwrap();
    d.equation(Equation::new("triangle", Path::of(["h"]), Path::of(["f", "g"])).weight(0.5))
        .unwrap();
    d
}

/// 45 rows (e0, e1, s, d); every third lacks s and every fourth d, so batches weigh terms
/// differently.
fn data(d: &Diagram) -> Dataset {
    let rows = (0..45)
        .map(|i| {
            let k = i as f64;
            let (e0, e1) = ((k * 0.37).sin(), (k * 0.11).cos());
            let s = e0 - e1;
            let class = if s < -0.5 {
                0.0
            } else if s < 0.5 {
                1.0
            } else {
                2.0
            };
            vec![
                Some(e0),
                Some(e1),
                (i % 3 != 0).then_some(s),
                (i % 4 != 0).then_some(class),
            ]
        })
        .collect();
    let table = Table::new(
        "rows",
        ["e0", "e1", "s", "d"].map(String::from).to_vec(),
        rows,
    );
    let bindings = vec![
        ("E".into(), Columns::Values(vec!["e0".into(), "e1".into()])),
        ("S".into(), Columns::Values(vec!["s".into()])),
        (
            "D".into(),
            Columns::Labels {
                column: "d".into(),
                classes: 3,
            },
        ),
    ];
    Dataset::new(&table, &bindings, d).unwrap()
}

fn trainer(dtype: DType, opt: Optimiser) -> Trainer {
    let d = triangle(dtype);
    let train = data(&d);
    let params = d.params();
    Trainer::new(d, params, opt, train, 3).unwrap()
}

/// max |a − b| / max(1, max |b|) over one tensor.
fn normwise(a: &Tensor, b: &Tensor) -> f64 {
    let (a, b) = (a.to_f64_vec(), b.to_f64_vec());
    assert_eq!(a.len(), b.len());
    let err = a
        .iter()
        .zip(&b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f64::max);
    let scale = b.iter().map(|y| y.abs()).fold(1.0, f64::max);
    err / scale
}

/// Runs the step program alongside the trainer for `epochs` epochs; returns the worst
/// normwise difference of parameters and state, after checking names, steps and losses.
fn follow(dtype: DType, opt: Optimiser, epochs: usize) -> f64 {
    let mut t = trainer(dtype, opt);
    let step = TrainStep::of_trainer(&t).unwrap();
    let mut params: Params = step
        .param_names()
        .iter()
        .map(|n| (n.clone(), t.params().get(n).unwrap().clone()))
        .collect();
    let mut state = step.initial_state();
    let progress = Progress::new(0, false);
    for _ in 0..epochs {
        let batches = t.next_epoch_batches();
        let mut loss_sum = 0.0;
        for b in &batches {
            loss_sum += step.run(&mut params, &mut state, b).unwrap().total;
        }
        let m = t.epoch(&progress).unwrap();
        let mean = loss_sum / batches.len() as f64;
        assert!(
            (mean - m.loss).abs() <= 1e-4 * m.loss.abs().max(1.0),
            "epoch loss {mean} vs the trainer's {}",
            m.loss
        );
    }
    let want = t.optimiser().state();
    assert_eq!(
        state.names().collect::<Vec<_>>(),
        want.names().collect::<Vec<_>>()
    );
    assert_eq!(
        state.get(STEP).unwrap().as_i64().unwrap().data(),
        want.get(STEP).unwrap().as_i64().unwrap().data()
    );
    let mut worst: f64 = 0.0;
    for (name, p) in params.iter() {
        assert_eq!(p.dtype(), dtype);
        worst = worst.max(normwise(p, t.params().get(name).unwrap()));
    }
    for (name, s) in state.iter().filter(|(n, _)| *n != STEP) {
        worst = worst.max(normwise(s, want.get(name).unwrap()));
    }
    // The parameters moved: the comparison is not between two starting points.
    let start = trainer(dtype, t.optimiser().clone());
    let moved = params
        .iter()
        .map(|(n, p)| normwise(p, start.params().get(n).unwrap()))
        .fold(0.0, f64::max);
    assert!(moved > 1e-3, "the parameters barely moved ({moved})");
    worst
}

fn configs() -> Vec<(&'static str, Optimiser)> {
    vec![
        (
            "sgd, momentum, weight decay, step schedule",
            Optimiser::new(Sgd::new(0.1).momentum(0.9).weight_decay(1e-3))
                .unwrap()
                .with_schedule(Schedule::Step {
                    every: 4,
                    gamma: 0.5,
                })
                .unwrap(),
        ),
        (
            "sgd, nesterov, clipping",
            Optimiser::new(Sgd::new(0.05).momentum(0.8).nesterov(true))
                .unwrap()
                .with_clip(0.1)
                .unwrap(),
        ),
        (
            "adam, L2 decay, clipping, cosine schedule",
            Optimiser::new(Adam::new(0.02).weight_decay(1e-2))
                .unwrap()
                .with_clip(0.2)
                .unwrap()
                .with_schedule(Schedule::Cosine {
                    warmup: 3,
                    total: 10,
                    floor: 0.1,
                })
                .unwrap(),
        ),
        (
            "adamw, cosine schedule without warm-up",
            Optimiser::new(Adam::adamw(0.02, 0.05).betas(0.8, 0.95))
                .unwrap()
                .with_schedule(Schedule::Cosine {
                    warmup: 0,
                    total: 8,
                    floor: 0.2,
                })
                .unwrap(),
        ),
    ]
}

#[test]
fn the_step_program_follows_the_trainer_in_f64() {
    for (what, opt) in configs() {
        let worst = follow(DType::F64, opt, 2);
        println!("f64, {what}: {worst:.2e}");
        assert!(worst <= 1e-14, "{what}: f64 differs by {worst:e}");
    }
}

#[test]
fn the_step_program_follows_the_trainer_in_f32() {
    for (what, opt) in configs() {
        let worst = follow(DType::F32, opt, 2);
        println!("f32, {what}: {worst:.2e}");
        assert!(worst <= 4e-6, "{what}: f32 differs by {worst:e}");
    }
}

#[test]
fn clipping_and_schedules_change_the_program() {
    // The same optimiser without clipping and schedule takes other steps: the comparison
    // above would notice if the program ignored them.
    let plain = Optimiser::new(Adam::new(0.02).weight_decay(1e-2)).unwrap();
    let full = configs().remove(2).1;
    assert!(matches!(full.method(), Method::Adam(_)));
    let a = trainer(DType::F64, plain);
    let b = trainer(DType::F64, full);
    let (pa, pb) = (
        TrainStep::of_trainer(&a).unwrap(),
        TrainStep::of_trainer(&b).unwrap(),
    );
    let batch = &a.next_epoch_batches()[0];
    let mut params: Params = pa
        .param_names()
        .iter()
        .map(|n| (n.clone(), a.params().get(n).unwrap().clone()))
        .collect();
    let mut other = params.clone();
    let (mut sa, mut sb) = (pa.initial_state(), pb.initial_state());
    // The first batch's gradient norm exceeds the clipping norm 0.2, so clipping acts.
    let out = catml::interp::eval(pb.program(), &pb.inputs(&params, &sb, batch).unwrap()).unwrap();
    let norm = out.last().unwrap().to_f64_vec()[0];
    assert!(norm > 0.2, "gradient norm {norm}");
    pa.run(&mut params, &mut sa, batch).unwrap();
    pb.run(&mut other, &mut sb, batch).unwrap();
    let differ = params
        .iter()
        .any(|(n, p)| normwise(p, other.get(n).unwrap()) > 1e-6);
    assert!(differ);
}

#[test]
fn the_step_program_names_its_inputs_and_outputs() {
    let opt = Optimiser::new(Adam::new(0.01)).unwrap();
    let t = trainer(DType::F32, opt);
    let step = TrainStep::of_trainer(&t).unwrap();
    let p = step.program();
    let inputs: Vec<&str> = p.inputs().iter().map(|i| i.name.as_str()).collect();
    assert_eq!(inputs[0], step.param_names()[0]);
    assert!(inputs.contains(&format!("m/{}", step.param_names()[0]).as_str()));
    assert!(inputs.contains(&"step"));
    assert!(inputs.contains(&"data:E"));
    assert!(inputs.contains(&"weight:triangle"));
    let outputs = p.output_names();
    assert_eq!(outputs, step.output_names());
    assert_eq!(outputs[0], format!("new:{}", step.param_names()[0]));
    assert!(outputs.contains(&"loss:triangle".to_string()));
    assert_eq!(outputs[outputs.len() - 2..], ["lr", "grad_norm"]);
}

#[test]
fn a_bad_state_is_refused_and_changes_nothing() {
    let opt = Optimiser::new(Sgd::new(0.1).momentum(0.5)).unwrap();
    let t = trainer(DType::F64, opt);
    let step = TrainStep::of_trainer(&t).unwrap();
    let batch = &t.next_epoch_batches()[0];
    let mut params: Params = step
        .param_names()
        .iter()
        .map(|n| (n.clone(), t.params().get(n).unwrap().clone()))
        .collect();
    let before = params.clone();
    let mut state = step.initial_state();
    let buffer = step.buffer_names().next().unwrap().to_string();
    state.remove(&buffer);
    let e = step.run(&mut params, &mut state, batch).unwrap_err();
    assert!(e.to_string().contains(&buffer), "{e}");
    let mut state = step.initial_state();
    state.insert(STEP, Tensor::i64(vec![], vec![-1]).unwrap());
    let e = step.run(&mut params, &mut state, batch).unwrap_err();
    assert!(e.to_string().contains("step"), "{e}");
    assert_eq!(params, before);
}

#[test]
fn the_rate_output_is_the_schedule_at_every_step() {
    let schedules = [
        Schedule::Constant,
        Schedule::Step {
            every: 3,
            gamma: 0.7,
        },
        Schedule::Step {
            every: 2,
            gamma: 0.0,
        },
        Schedule::Cosine {
            warmup: 4,
            total: 20,
            floor: 0.1,
        },
        Schedule::Cosine {
            warmup: 0,
            total: 9,
            floor: 0.0,
        },
    ];
    for schedule in schedules {
        let opt = Optimiser::new(Sgd::new(0.3))
            .unwrap()
            .with_schedule(schedule)
            .unwrap();
        let t = trainer(DType::F64, opt.clone());
        let step = TrainStep::of_trainer(&t).unwrap();
        let batch = &t.next_epoch_batches()[0];
        let params: Params = step
            .param_names()
            .iter()
            .map(|n| (n.clone(), t.params().get(n).unwrap().clone()))
            .collect();
        let lr_at = step.output_names().iter().position(|n| n == "lr").unwrap();
        for k in 0..30 {
            let mut state = step.initial_state();
            state.insert(STEP, Tensor::i64(vec![], vec![k]).unwrap());
            let inputs = step.inputs(&params, &state, batch).unwrap();
            let out = catml::interp::eval(step.program(), &inputs).unwrap();
            let lr = out[lr_at].to_f64_vec()[0];
            let want = 0.3 * schedule.factor(k as u64);
            assert!(
                (lr - want).abs() <= 1e-15 * want.abs().max(1e-300) + 1e-300,
                "{schedule:?} at step {k}: {lr} vs {want}"
            );
        }
    }
}
