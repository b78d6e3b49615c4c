//! The public API a newcomer meets first: separate arguments, argnums, parameters from types,
//! retrace reporting, parameters given in one call, derivative output names, `prim::Prim`,
//! and custom primitives without a throwaway registry.

use std::sync::Mutex;

use catml::ad;
use catml::ir::{Builder, InputKind};
use catml::nn::{linear, seeded};
use catml::prim::{self, CustomPrimitive, Ops};
use catml::tensor::{DType, Params, Tensor, TensorType};
use catml::trace::{args, trace, value_and_grad, TraceError, Value};

fn f64t(dims: &[usize]) -> TensorType {
    TensorType::new(DType::F64, dims.to_vec())
}

#[test]
fn separate_arguments_trace_and_too_few_inputs_are_an_error() {
    let traced = trace(
        &[f64t(&[2]), f64t(&[2])],
        args(|x: &Value, y: &Value| x * y),
    )
    .unwrap();
    assert_eq!(traced.program.n_inputs(), 2);
    let e = trace(&[f64t(&[2])], args(|x: &Value, y: &Value| x * y)).unwrap_err();
    assert!(
        matches!(
            e,
            TraceError::Count {
                expected: 2,
                found: 1,
                ..
            }
        ),
        "{e}"
    );
    let three = trace(
        &vec![f64t(&[2]); 3],
        args(|a: &Value, b: &Value, c: &Value| a * b + c),
    );
    assert_eq!(three.unwrap().program.n_nodes(), 2);
}

#[test]
fn argnums_differentiates_only_the_chosen_inputs_and_checks_its_positions() {
    let loss = |x: &Value, y: &Value| {
        let d = linear(x, 1, &mut seeded(0), "out") - y;
        (&d * &d).sum_all()
    };
    let (x, y) = (
        Tensor::f64([2, 3], vec![0.5, 1.0, -1.0, 2.0, 0.0, 1.0]).unwrap(),
        Tensor::f64([2, 1], vec![1.0, -1.0]).unwrap(),
    );
    let mut all = value_and_grad(args(loss));
    let params = all.init_types(&[x.ty(), y.ty()]).unwrap();
    let full = all.call(&params, &[x.clone(), y.clone()]).unwrap();
    let mut some = value_and_grad(args(loss)).argnums(&[0]);
    let r = some.call(&params, &[x.clone(), y.clone()]).unwrap();
    assert_eq!(r.value, full.value);
    assert_eq!(r.grads.inputs[0], full.grads.inputs[0]);
    assert_eq!(r.grads.inputs[1], None);
    assert!(full.grads.inputs[1].is_some());
    assert_eq!(r.grads.params, full.grads.params);
    // The label's cotangent is not computed: the program is smaller.
    let types = [x.ty(), y.ty()];
    assert!(some.program(&types).unwrap().n_nodes() < all.program(&types).unwrap().n_nodes());
    let mut bad = value_and_grad(args(loss)).argnums(&[2]);
    let e = bad.call(&params, &[x, y]).unwrap_err();
    assert!(
        matches!(
            e,
            TraceError::ArgNum {
                index: 2,
                inputs: 2,
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn parameters_come_from_input_types_alone_and_are_used_in_one_call() {
    let mut f = value_and_grad(|v: &[Value]| linear(&v[0], 2, &mut seeded(3), "lin").sum_all());
    let params = f.init_types(&[f64t(&[4])]).unwrap();
    assert_eq!(params.names().collect::<Vec<_>>(), ["lin.W", "lin.b"]);
    let traced = trace(&[f64t(&[4])], |v| linear(&v[0], 2, &mut seeded(3), "lin")).unwrap();
    assert_eq!(traced.params, params);
    let trained = params.map(|_, t| t.map_f64(|_| 1.0));
    let x = Tensor::f64([4], vec![1.0, 2.0, 3.0, 4.0]).unwrap();
    let y = traced.call(&trained, std::slice::from_ref(&x)).unwrap();
    assert_eq!(y[0].to_f64_vec(), vec![11.0, 11.0]);
    let mut missing = trained.clone();
    missing.remove("lin.b");
    assert!(matches!(
        traced.call(&missing, &[x]),
        Err(TraceError::MissingParam { ref name, .. }) if name == "lin.b"
    ));
}

/// Collects `catml::trace` log records whose call site is this file: one logger serves the
/// whole test binary, and other modules' tests retrace at the same time.
struct Capture(Mutex<Vec<String>>);

impl log::Log for Capture {
    fn enabled(&self, m: &log::Metadata) -> bool {
        m.target() == "catml::trace"
    }
    fn log(&self, r: &log::Record) {
        let line = format!("{}", r.args());
        if self.enabled(r.metadata()) && line.contains("api.rs") {
            self.0.lock().unwrap().push(format!("{} {line}", r.level()));
        }
    }
    fn flush(&self) {}
}

static LOGGED: Capture = Capture(Mutex::new(Vec::new()));

#[test]
fn a_retrace_for_new_input_types_is_counted_and_logged() {
    log::set_logger(&LOGGED).unwrap();
    log::set_max_level(log::LevelFilter::Debug);
    let mut f = value_and_grad(|v: &[Value]| (&v[0] * &v[0]).sum_all());
    let p = Params::new();
    f.call(&p, &[Tensor::f64([2], vec![1.0, 2.0]).unwrap()])
        .unwrap();
    f.call(&p, &[Tensor::f64([2], vec![3.0, 4.0]).unwrap()])
        .unwrap();
    assert_eq!(f.trace_count(), 1);
    assert!(LOGGED.0.lock().unwrap().is_empty());
    f.call(&p, &[Tensor::f64([3], vec![1.0, 2.0, 3.0]).unwrap()])
        .unwrap();
    assert_eq!(f.trace_count(), 2);
    let logged = LOGGED.0.lock().unwrap().clone();
    assert_eq!(logged.len(), 1, "{logged:?}");
    assert!(
        logged[0].starts_with("DEBUG ") && logged[0].contains("(f64[3])"),
        "{logged:?}"
    );
    let site = logged[0].split("api.rs:").nth(1).unwrap_or("");
    assert!(
        site.starts_with(|c: char| c.is_ascii_digit()),
        "names the call site's line: {logged:?}"
    );
}

#[test]
fn derivative_programs_name_their_outputs_after_what_they_are() {
    let t = f64t(&[2]);
    let mut b = Builder::new();
    let x = b.input("x", t.clone(), InputKind::Data).unwrap();
    let w = b.input("W1", t.clone(), InputKind::Param).unwrap();
    let u = b.input("unused", t, InputKind::Param).unwrap();
    let _ = u;
    let y = b.add(x, w).unwrap(); // both gradients are the seed itself
    let p = b.finish(&[y, y]).unwrap();
    let v = ad::vjp(&p).unwrap();
    let names: Vec<&str> = v.program.inputs().iter().map(|i| i.name.as_str()).collect();
    assert_eq!(names, ["x", "W1", "unused", "seed.0", "seed.1"]);
    assert_eq!(
        v.program.output_names(),
        ["t", "t.1", "grad.x", "grad.W1", "grad.unused"]
    );
    assert_eq!(v.layout.outputs, ["t", "t.1"]);
    assert_eq!(v.layout.seeds, [3, 4]);
    let g = v.layout.gradient_named("W1").unwrap();
    assert_eq!((g.input, g.index, g.kind), (1, 3, InputKind::Param));
    // Seeds 1 and 2: every gradient is their sum; the unused parameter's is zero.
    let ones = |c: f64| Tensor::f64([2], vec![c, c]).unwrap();
    let out = catml::interp::eval(
        &v.program,
        &[ones(0.0), ones(0.0), ones(0.0), ones(1.0), ones(2.0)],
    )
    .unwrap();
    assert_eq!(v.layout.gradient_by_name(&out, "x"), Some(&ones(3.0)));
    assert_eq!(v.layout.gradient_by_name(&out, "W1"), Some(&ones(3.0)));
    assert_eq!(v.layout.gradient_by_name(&out, "unused"), Some(&ones(0.0)));

    let j = ad::jvp(&p).unwrap();
    assert_eq!(j.layout.tangents, ["tangent.t", "tangent.t.1"]);
    assert_eq!(j.program.output_names()[2..], ["tangent.t", "tangent.t.1"]);
    assert_eq!(j.layout.tangent_input(1), Some(4));
    let names: Vec<&str> = j.program.inputs().iter().map(|i| i.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "x",
            "W1",
            "unused",
            "tangent.x",
            "tangent.W1",
            "tangent.unused"
        ]
    );

    // The gradient program has no seed inputs and the same gradients at seed 1.
    let g = ad::grad(&p).unwrap();
    assert!(g.layout.seeds.is_empty());
    assert_eq!(g.program.n_inputs(), 3);
    let out = catml::interp::eval(&g.program, &[ones(0.0), ones(0.0), ones(0.0)]).unwrap();
    assert_eq!(g.layout.gradient_by_name(&out, "W1"), Some(&ones(1.0)));
}

/// Derived names already held by a primal value take the next free `.<k>`; an output that is an
/// input has the tangent input itself as its tangent, under that input's tangent name.
#[test]
fn jvp_names_avoid_the_primal_names() {
    let t = f64t(&[2]);
    let mut b = Builder::new();
    let x = b.input("x", t.clone(), InputKind::Data).unwrap();
    let taken = b.input("tangent.x", t.clone(), InputKind::Data).unwrap();
    let z = b.input("z", t, InputKind::Data).unwrap();
    let y = b.mul(x, taken).unwrap();
    let named = b
        .apply_named("tangent.t", std::sync::Arc::new(prim::Neg), &[y])
        .unwrap();
    let p = b.finish(&[y, named, z]).unwrap();
    assert_eq!(p.output_names(), ["t", "tangent.t", "z"]);
    let j = ad::jvp(&p).unwrap();
    let inputs: Vec<&str> = j.program.inputs().iter().map(|i| i.name.as_str()).collect();
    assert_eq!(
        inputs,
        [
            "x",
            "tangent.x",
            "z",
            "tangent.x.1",
            "tangent.tangent.x",
            "tangent.z"
        ]
    );
    assert_eq!(
        j.layout.tangents,
        ["tangent.t.1", "tangent.tangent.t", "tangent.z"]
    );
    assert_eq!(j.program.output_names()[3..], j.layout.tangents[..]);
    // d(x * x')= dx * x' + x * dx'; -d(...); dz.
    let v = |a: f64, b: f64| Tensor::f64([2], vec![a, b]).unwrap();
    let out = catml::interp::eval(
        &j.program,
        &[
            v(1.0, 2.0),
            v(3.0, 4.0),
            v(5.0, 6.0),
            v(1.0, 0.0),
            v(0.0, 1.0),
            v(7.0, 8.0),
        ],
    )
    .unwrap();
    assert_eq!(
        j.layout.tangents(&out),
        [v(3.0, 2.0), v(-3.0, -2.0), v(7.0, 8.0)]
    );
}

#[test]
fn prim_is_reachable_from_prim_and_custom_primitives_need_no_throwaway_registry() {
    let neg: prim::Prim = std::sync::Arc::new(prim::Neg);
    let same: catml::ir::Prim = neg.clone();
    assert_eq!(same.name(), "neg");
    let double = CustomPrimitive::new(
        "double",
        |t| Ok(t[0].clone()),
        |x| Ok(x[0].map_f64(|v| 2.0 * v)),
    )
    .with_vjp(|b, _x, _y, u| Ok(vec![Some(b.scale(u, 2.0)?)]));
    let handle = double.into_prim();
    let mut b = Builder::new();
    let x = b.input("x", f64t(&[2]), InputKind::Data).unwrap();
    let y = b.apply(handle.clone(), &[x]).unwrap();
    let p = b.finish(&[y]).unwrap();
    let registry = prim::registry().with(handle);
    let text = catml::ir::json::to_string(&p);
    let back = catml::ir::json::from_str(&text, &registry).unwrap();
    let out = catml::interp::eval(&back, &[Tensor::f64([2], vec![1.0, -3.0]).unwrap()]).unwrap();
    assert_eq!(out[0].to_f64_vec(), vec![2.0, -6.0]);
    assert!(registry.contains("tanh"), "the built-ins stay");
    assert!(
        !prim::builtins().contains("double"),
        "the shared built-ins are not changed"
    );
}

#[test]
fn a_large_tensor_prints_its_edges_and_item_reads_one_element() {
    let t = Tensor::f64([100, 100], (0..10_000).map(f64::from).collect()).unwrap();
    assert!(format!("{t:?}").len() < 400);
    assert!(t
        .to_string()
        .starts_with("f64[100, 100] [[0.0, 1.0, 2.0, ..., 97.0, 98.0, 99.0],"));
    assert!(t.item().is_err());
    assert_eq!(Tensor::f64([1, 1], vec![2.5]).unwrap().item().unwrap(), 2.5);
}
