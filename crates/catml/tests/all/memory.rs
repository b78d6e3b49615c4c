//! The planned peak of live bytes and the memory budget (docs/memory.md): the figures, the
//! refusal before anything is allocated, and that every way of evaluating checks it.

use catml::interp::{self, EvalError, EvalOptions, EvalPlan, Peak};
use catml::ir::{Builder, InputKind, Program};
use catml::prim::Ops;
use catml::tensor::{DType, Tensor, TensorType};
use catml::trace::{trace, value_and_grad, TraceError};

fn f64t(dims: &[usize]) -> TensorType {
    TensorType::new(DType::F64, dims.to_vec())
}

/// x: f64[100] -> s = sum x, t = broadcast s to [100], u = tanh t; outputs u and t, so that u
/// is not written in t's buffer. The input stays live throughout: 800 + 8 (s) + 800 (t), s
/// dies, + 800 (u) = 2400 bytes at u.
fn spread() -> Program {
    let mut b = Builder::new();
    let x = b.input("x", f64t(&[100]), InputKind::Data).unwrap();
    let s = b.sum(x, None).unwrap();
    let t = b.broadcast(s, [100], vec![]).unwrap();
    let u = b.tanh(t).unwrap();
    b.finish(&[u, t]).unwrap()
}

fn x100() -> Tensor {
    Tensor::f64([100], (0..100).map(|i| i as f64 / 100.0).collect()).unwrap()
}

#[test]
fn the_peak_counts_inputs_throughout_and_is_what_cost_reports() {
    let p = spread();
    let peak = EvalPlan::new(&p).unwrap().peak();
    assert_eq!(
        peak,
        Peak {
            bytes: 2400,
            node: Some(2)
        }
    );
    assert_eq!(interp::cost(&p).peak_live_bytes, 2400);
}

/// x: f64[100] -> a = tanh x -> b = exp a -> c = b * x. `exp` and `mul` write in their dying
/// operand's buffer, so only x and a count: 1600 bytes, reached at a. A reshape's value is its
/// operand's buffer: it adds nothing, and `exp` writes in that buffer once neither a nor the
/// reshape is read again; while a is still read, `exp` makes a buffer of its own.
#[test]
fn a_node_writing_in_a_dying_operand_adds_nothing_to_the_peak() {
    let mut b = Builder::new();
    let x = b.input("x", f64t(&[100]), InputKind::Data).unwrap();
    let a = b.tanh(x).unwrap();
    let e = b.exp(a).unwrap();
    let c = b.mul(e, x).unwrap();
    let p = b.finish(&[c]).unwrap();
    let peak = Peak {
        bytes: 1600,
        node: Some(0),
    };
    assert_eq!(EvalPlan::new(&p).unwrap().peak(), peak);
    assert_eq!(interp::cost(&p).peak_live_bytes, 1600);

    let mut b = Builder::new();
    let x = b.input("x", f64t(&[100]), InputKind::Data).unwrap();
    let a = b.tanh(x).unwrap();
    let r = b.reshape(a, [10, 10]).unwrap();
    let e = b.exp(r).unwrap();
    let mut kept = b.clone();
    let p = b.finish(&[e]).unwrap();
    // x and a's buffer, which r shares and e takes over.
    let peak = Peak {
        bytes: 1600,
        node: Some(0),
    };
    assert_eq!(EvalPlan::new(&p).unwrap().peak(), peak);
    assert_eq!(interp::cost(&p).peak_live_bytes, 1600);

    // a is read after e, so e writes a buffer of its own: x, a and e at e.
    let back = kept.reshape(e, [100]).unwrap();
    let y = kept.mul(back, a).unwrap();
    let p = kept.finish(&[y]).unwrap();
    let peak = Peak {
        bytes: 2400,
        node: Some(2),
    };
    assert_eq!(EvalPlan::new(&p).unwrap().peak(), peak);
}

/// A constant's value is the program's and `stop_gradient`'s is its operand's: neither adds to
/// the peak, and the shared buffer lives until its last reader. x: f64[100] -> a = tanh x ->
/// s = stop_gradient a -> m = s * c (c a constant) -> y = m + a.
#[test]
fn shared_and_held_buffers_add_nothing_to_the_peak() {
    let mut b = Builder::new();
    let x = b.input("x", f64t(&[100]), InputKind::Data).unwrap();
    let a = b.tanh(x).unwrap();
    let s = b.stop_gradient(a).unwrap();
    let c = b
        .constant(Tensor::f64([100], vec![0.5; 100]).unwrap())
        .unwrap();
    let m = b.mul(s, c).unwrap();
    let y = b.add(m, a).unwrap();
    let p = b.finish(&[y]).unwrap();
    // x and a (800 each), then m (a is still read), which y's sum then takes over.
    let peak = Peak {
        bytes: 2400,
        node: Some(3),
    };
    assert_eq!(EvalPlan::new(&p).unwrap().peak(), peak);
    assert_eq!(interp::cost(&p).peak_live_bytes, 2400);
    let x = x100();
    let got = interp::eval(&p, std::slice::from_ref(&x)).unwrap()[0].to_f64_vec();
    for (g, v) in got.iter().zip(x.to_f64_vec()) {
        assert!(
            (g - 1.5 * v.tanh()).abs() <= 1e-15,
            "{g} against 1.5 tanh {v}"
        );
    }
}

#[test]
fn a_plan_over_the_budget_is_refused_with_both_figures_and_the_node() {
    let p = spread();
    let name = p.nodes()[2].name.clone();
    let options = |budget| EvalOptions {
        memory_budget: Some(budget),
        ..EvalOptions::default()
    };
    let err = interp::eval_with_options(&p, &[x100()], options(2000)).unwrap_err();
    assert_eq!(
        err,
        EvalError::OverBudget {
            needed: 2400,
            budget: 2000,
            node: Some((2, name.clone(), "tanh".to_string())),
        }
    );
    assert_eq!(
        err.to_string(),
        format!(
            "program needs 2.3 KiB at its peak (node 2 `{name}`, tanh), over the memory budget \
             of 2.0 KiB"
        )
    );
    // At the peak exactly, it runs and agrees with the default evaluation.
    let out = interp::eval_with_options(&p, &[x100()], options(2400)).unwrap();
    assert_eq!(out, interp::eval(&p, &[x100()]).unwrap());
}

#[test]
fn a_plan_is_made_once_and_refused_for_another_program() {
    let p = spread();
    let plan = EvalPlan::new(&p).unwrap();
    let options = EvalOptions::default();
    let expected = interp::eval(&p, &[x100()]).unwrap();
    for _ in 0..3 {
        assert_eq!(
            interp::eval_planned(&p, &plan, &[x100()], options).unwrap(),
            expected
        );
    }
    let mut b = Builder::new();
    let x = b.input("x", f64t(&[100]), InputKind::Data).unwrap();
    let y = b.exp(x).unwrap();
    let other = b.finish(&[y]).unwrap();
    assert_eq!(
        interp::eval_planned(&other, &plan, &[x100()], options),
        Err(EvalError::ForeignPlan)
    );
}

#[test]
fn the_default_budget_refuses_a_program_larger_than_any_machine_at_once() {
    // 1024 values of 16 GiB each (the per-value limit), all outputs: a 16 TiB peak.
    let mut b = Builder::new();
    let x = b.input("x", f64t(&[]), InputKind::Data).unwrap();
    let outs: Vec<_> = (0..1024)
        .map(|_| b.broadcast(x, [1usize << 31], vec![]).unwrap())
        .collect();
    let p = b.finish(&outs).unwrap();
    let start = std::time::Instant::now();
    let err = interp::eval(&p, &[Tensor::scalar(DType::F64, 1.0)]).unwrap_err();
    assert!(start.elapsed() < std::time::Duration::from_secs(5));
    let EvalError::OverBudget { needed, node, .. } = &err else {
        panic!("{err}");
    };
    assert_eq!(*needed, 8 + (1024u64 << 34));
    assert_eq!(node.as_ref().map(|n| n.0), Some(1023));
    assert!(err
        .to_string()
        .starts_with("program needs 16.0 TiB at its peak"));
}

#[test]
fn the_process_budget_reaches_traced_functions() {
    // Values of 2 GiB against a 1 GiB budget: refused before anything is allocated. (Every
    // other test here plans far less than 1 GiB, so the setting cannot disturb them.)
    interp::set_memory_budget(Some(1 << 30));
    assert_eq!(interp::memory_budget(), 1 << 30);
    let x = Tensor::scalar(DType::F64, 0.5);
    let mut f = value_and_grad(|x| x[0].broadcast_to([1usize << 28]).tanh().sum_all());
    let refused = f.call(&Default::default(), std::slice::from_ref(&x));
    let traced = trace(&[f64t(&[])], |x| {
        x[0].broadcast_to([1usize << 28]).sum_all()
    })
    .unwrap();
    let refused_call = traced.eval(std::slice::from_ref(&x));
    interp::set_memory_budget(None);
    for r in [refused.map(|_| ()), refused_call.map(|_| ())] {
        match r {
            Err(TraceError::Eval(EvalError::OverBudget { budget, needed, .. })) => {
                assert_eq!(budget, 1 << 30);
                assert!(needed > 2 << 30, "{needed}");
            }
            other => panic!("expected the budget's refusal, got {other:?}"),
        }
    }
}
