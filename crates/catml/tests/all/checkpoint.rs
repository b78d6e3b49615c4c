//! Checkpoint policies: the VJP program under each policy gives bitwise the same outputs as the
//! plain one, keeps what the policy says, and lowers `peak_live_bytes` (3x and more on a
//! 32-layer MLP under the √n schedule; the tiny transformer too).
#![allow(clippy::duplicate_mod)]

use catml::ad::{self, CheckpointPolicy, Vjp};
use catml::interp::{cost, eval};
use catml::ir::{Builder, InputKind, Program};
use catml::nn::seeded;
use catml::prim::Ops;
use catml::tensor::{DType, Params, Tensor, TensorType};
use catml::trace::{value_and_grad, Value};

#[path = "../../examples/tiny_transformer.rs"]
#[allow(dead_code)]
mod tiny_transformer;

#[path = "../../benches/support/checkpoint_workload.rs"]
mod checkpoint_workload;

use checkpoint_workload::{arguments, mlp, mlp_data};

const WIDTH: usize = 64;
/// Rows enough that activations, not the parameters and their gradients, fill the memory.
const BATCH: usize = 1024;
const LAYERS: usize = 32;

fn bits(values: &[Tensor]) -> Vec<Vec<u64>> {
    values
        .iter()
        .map(|t| t.to_f64_vec().iter().map(|x| x.to_bits()).collect())
        .collect()
}

fn peak(v: &Vjp) -> u64 {
    cost(&v.program).peak_live_bytes
}

fn policies(names: &[&str]) -> Vec<CheckpointPolicy> {
    vec![
        CheckpointPolicy::NothingSaveable,
        CheckpointPolicy::Dots,
        CheckpointPolicy::save_only_these_names(names.iter().copied()),
        CheckpointPolicy::SqrtSegments,
    ]
}

#[test]
fn a_32_layer_mlp_needs_a_third_of_the_memory_under_the_sqrt_schedule_with_the_same_gradients() {
    let (p, params) = mlp(LAYERS, WIDTH, BATCH);
    let args = arguments(&p, &params, &mlp_data(WIDTH, BATCH));
    let plain = ad::grad(&p).unwrap();
    let want = bits(&eval(&plain.program, &args).unwrap());
    // Every fourth layer's output, by tag (`l3`, `l7`, ...): the layers' own nodes.
    let every_fourth: Vec<String> = (3..LAYERS).step_by(4).map(|l| format!("l{l}")).collect();
    let names: Vec<&str> = every_fourth.iter().map(String::as_str).collect();
    for policy in policies(&names) {
        let v = ad::grad_with(&p, &policy).unwrap();
        assert_eq!(bits(&eval(&v.program, &args).unwrap()), want, "{policy}");
        assert_eq!(
            v.layout,
            ad::VjpLayout {
                residuals: v.layout.residuals.clone(),
                ..plain.layout.clone()
            }
        );
    }
    let sqrt = ad::grad_with(&p, &CheckpointPolicy::SqrtSegments).unwrap();
    let (before, after) = (peak(&plain), peak(&sqrt));
    assert!(
        before >= 3 * after,
        "peak live bytes {before} without, {after} under the √n schedule"
    );
    assert!(plain.residual_bytes() >= 3 * sqrt.residual_bytes());
    // Recomputing costs at most one more forward pass.
    let (f0, f1) = (cost(&plain.program).flops, cost(&sqrt.program).flops);
    let forward = cost(&p).flops;
    assert!(
        f1 > f0 && f1 <= f0 + forward,
        "flops {f0} -> {f1}, forward {forward}"
    );
}

#[test]
fn the_tiny_transformer_needs_less_memory_under_the_sqrt_schedule_with_the_same_gradients() {
    let batch = 16;
    let (_, loss, params) = tiny_transformer::build(batch);
    let data: Vec<Tensor> = tiny_transformer::sample(&mut seeded(5), batch)
        .into_iter()
        .map(|(_, t)| t)
        .collect();
    let args = arguments(&loss, &params, &data);
    let plain = ad::grad(&loss).unwrap();
    let want = bits(&eval(&plain.program, &args).unwrap());
    for policy in policies(&["l0.att", "l1.att"]) {
        let v = ad::grad_with(&loss, &policy).unwrap();
        assert_eq!(bits(&eval(&v.program, &args).unwrap()), want, "{policy}");
    }
    let sqrt = ad::grad_with(&loss, &CheckpointPolicy::SqrtSegments).unwrap();
    let (before, after) = (peak(&plain), peak(&sqrt));
    // Two blocks leave little to cut: about 1.34x at this batch.
    assert!(
        10 * before >= 13 * after,
        "peak live bytes {before} without, {after} under the √n schedule"
    );
}

/// x -> tanh x -> ... (n times) -> sum, with the i-th tanh named `h<i>`.
fn tanh_chain(n: usize) -> Program {
    let mut b = Builder::new();
    let mut h = b
        .input("x", TensorType::new(DType::F64, [8]), InputKind::Data)
        .unwrap();
    for i in 1..=n {
        b.set_name_prefix(&format!("h{i}"));
        h = b.tanh(h).unwrap();
    }
    b.set_name_prefix("loss");
    let l = b.sum(h, None).unwrap();
    b.finish(&[l]).unwrap()
}

fn residual_names(v: &Vjp) -> Vec<&str> {
    v.layout.residuals.iter().map(|r| r.name.as_str()).collect()
}

#[test]
fn each_policy_keeps_what_it_says() {
    let p = tanh_chain(9);
    // Without a policy the backward part reads every tanh's result.
    let plain = ad::vjp(&p).unwrap();
    let all: Vec<String> = (1..=9).rev().map(|i| format!("h{i}")).collect();
    assert_eq!(residual_names(&plain), all);
    // Nothing: the backward part recomputes from the input.
    let nothing = ad::vjp_with(&p, &CheckpointPolicy::NothingSaveable).unwrap();
    assert_eq!(residual_names(&nothing), ["x"]);
    // Names: the named values, and the input for the segment before the first.
    let named = CheckpointPolicy::save_only_these_names(["h3", "h6"]);
    let v = ad::vjp_with(&p, &named).unwrap();
    let mut got = residual_names(&v);
    got.sort_unstable();
    assert_eq!(got, ["h3", "h6", "x"]);
    // √9 = 3: cuts after h3, h6 and h9; h9 is read by the forward `sum` after it.
    let v = ad::vjp_with(&p, &CheckpointPolicy::SqrtSegments).unwrap();
    let mut got = residual_names(&v);
    got.sort_unstable();
    assert_eq!(got, ["h3", "h6", "h9", "x"]);
    // Dots: a chain without contractions keeps nothing.
    let v = ad::vjp_with(&p, &CheckpointPolicy::Dots).unwrap();
    assert_eq!(residual_names(&v), ["x"]);
}

#[test]
fn dots_keeps_the_matrix_products() {
    let mut b = Builder::new();
    let t = TensorType::new(DType::F64, [3, 3]);
    let x = b.input("x", t.clone(), InputKind::Data).unwrap();
    let w = b.input("w", t, InputKind::Param).unwrap();
    b.set_name_prefix("m");
    let m = b.matmul(x, w).unwrap();
    b.set_name_prefix("a");
    let a = b.tanh(m).unwrap();
    b.set_name_prefix("m2");
    let m2 = b.matmul(a, w).unwrap();
    b.set_name_prefix("a2");
    let a2 = b.tanh(m2).unwrap();
    let l = b.sum(a2, None).unwrap();
    let p = b.finish(&[l]).unwrap();
    let v = ad::vjp_with(&p, &CheckpointPolicy::Dots).unwrap();
    let mut got = residual_names(&v);
    got.sort_unstable();
    // The tanh results are rebuilt from the products; the inputs are read as they are.
    assert_eq!(got, ["m", "m2", "w", "x"]);
    let args = [
        Tensor::f64([3, 3], (0..9).map(|i| i as f64 / 7.0).collect()).unwrap(),
        Tensor::f64([3, 3], (0..9).map(|i| (i as f64).cos()).collect()).unwrap(),
        Tensor::f64([], vec![1.0]).unwrap(),
    ];
    let plain = ad::vjp(&p).unwrap();
    assert_eq!(
        bits(&eval(&v.program, &args).unwrap()),
        bits(&eval(&plain.program, &args).unwrap())
    );
}

#[test]
fn recomputed_values_are_made_once_and_just_before_their_first_backward_reader() {
    let p = tanh_chain(4);
    let v = ad::vjp_with(&p, &CheckpointPolicy::NothingSaveable).unwrap();
    let names: Vec<&str> = v.program.nodes().iter().map(|n| n.name.as_str()).collect();
    let remat: Vec<&&str> = names.iter().filter(|n| n.contains(".remat")).collect();
    assert_eq!(remat, [&"h1.remat", &"h2.remat", &"h3.remat", &"h4.remat"]);
    // The forward part ends with the loss; the copies come after the first backward node.
    let loss = names.iter().position(|n| *n == "loss").unwrap();
    let first = names.iter().position(|n| *n == "h1.remat").unwrap();
    assert!(first > loss + 1, "{names:?}");
}

#[test]
fn value_and_grad_takes_a_policy() {
    let f = |x: &[Value]| {
        let mut h = x[0].clone();
        for _ in 0..12 {
            h = h.tanh();
        }
        h.sum_all()
    };
    let x = Tensor::f64([16], (0..16).map(|i| i as f64 / 10.0).collect()).unwrap();
    let mut plain = value_and_grad(f);
    let mut sqrt = value_and_grad(f).checkpoint(CheckpointPolicy::SqrtSegments);
    let types = [x.ty()];
    let before = cost(plain.program(&types).unwrap()).peak_live_bytes;
    let after = cost(sqrt.program(&types).unwrap()).peak_live_bytes;
    assert!(after < before, "{after} >= {before}");
    let (a, b) = (
        plain
            .call(&Params::new(), std::slice::from_ref(&x))
            .unwrap(),
        sqrt.call(&Params::new(), &[x]).unwrap(),
    );
    assert_eq!(a, b);
    let g = |r: &catml::trace::ValueAndGrads| bits(&[r.grads.inputs[0].clone().unwrap()]);
    assert_eq!(g(&a), g(&b));
}

#[test]
fn policies_read_and_print_as_text() {
    for text in ["nothing", "dots", "sqrt", "names:a,b.c"] {
        let p: CheckpointPolicy = text.parse().unwrap();
        assert_eq!(p.to_string(), text);
    }
    for bad in ["", "all", "names:", "names:a,,b", "sqrt2"] {
        let e = bad.parse::<CheckpointPolicy>().unwrap_err();
        assert!(e.to_string().contains(&format!("`{bad}`")), "{e}");
    }
}
