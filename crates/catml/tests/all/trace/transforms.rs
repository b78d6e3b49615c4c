use std::cell::Cell;

use catml::nn::{linear, seeded, Init, Linear};
use catml::tensor::{Params, Tensor};
use catml::trace::{grad, hvp, jvp, trace, value_and_grad, vjp, TraceError, Value};

use super::{f64s, finite_difference_grads, max_param_diff, mlp};

/// A smooth two-layer network with a scalar loss: Σ tanh(linear(tanh(linear(x)))).
fn smooth_loss(x: &Value, rng: &mut catml::nn::ChaCha8Rng) -> Value {
    let h = Linear::new(3)
        .bias_init(Init::Normal { std: 0.5 })
        .apply(x, rng, "enc");
    let y = Linear::new(2)
        .bias_init(Init::Normal { std: 0.5 })
        .apply(&h.tanh(), rng, "dec");
    y.tanh().sum_all()
}

#[test]
fn value_and_grad_agrees_with_central_differences_by_name_and_by_tag() {
    let mut f = value_and_grad(|x: &[Value]| smooth_loss(&x[0], &mut seeded(11)));
    let x = f64s(&[2, 2], &[0.3, -0.7, 1.1, 0.4]);
    let params = f.init(std::slice::from_ref(&x)).unwrap();
    let r = f.call(&params, std::slice::from_ref(&x)).unwrap();

    let traced = f.traced(&[x.ty()]).unwrap().clone();
    let loss = |p: &Params| {
        let args = catml::trace::arguments(&traced.program, p, std::slice::from_ref(&x)).unwrap();
        catml::interp::eval(&traced.program, &args).unwrap()[0].to_f64_vec()[0]
    };
    assert_eq!(r.value.to_f64_vec()[0], loss(&params));
    let fd = finite_difference_grads(&params, loss);
    let err = max_param_diff(&r.grads.params, &fd);
    assert!(err < 1e-8, "max error {err}");

    let tags: Vec<&str> = r.grads.by_tag.keys().map(String::as_str).collect();
    assert_eq!(tags, vec!["dec", "enc"]);
    let enc: Vec<&str> = r.grads.by_tag["enc"].names().collect();
    assert_eq!(enc, vec!["enc.W", "enc.b"]);
    assert_eq!(
        r.grads.by_tag["enc"].get("enc.W"),
        r.grads.params.get("enc.W")
    );
    assert_eq!(r.grads.inputs.len(), 1);
    assert_eq!(r.grads.inputs[0].as_ref().unwrap().dims(), &[2, 2]);
}

#[test]
fn a_transformed_function_traces_once_per_input_types() {
    let traces = Cell::new(0);
    let mut f = value_and_grad(|x: &[Value]| {
        traces.set(traces.get() + 1);
        (&x[0] * &x[0]).sum_all()
    });
    let none = Params::new();
    let a = f.call(&none, &[f64s(&[2], &[1.0, 2.0])]).unwrap();
    let b = f.call(&none, &[f64s(&[2], &[3.0, -1.0])]).unwrap();
    assert_eq!((f.trace_count(), traces.get()), (1, 1));
    assert_eq!(
        a.grads.inputs[0].as_ref().unwrap().to_f64_vec(),
        vec![2.0, 4.0]
    );
    assert_eq!(
        b.grads.inputs[0].as_ref().unwrap().to_f64_vec(),
        vec![6.0, -2.0]
    );
    // New shape: a new trace. New dtype: another. The first types again: cached.
    f.call(&none, &[f64s(&[3], &[1.0, 1.0, 1.0])]).unwrap();
    f.call(&none, &[Tensor::f32([2], vec![1.0, 2.0]).unwrap()])
        .unwrap();
    f.call(&none, &[f64s(&[2], &[0.0, 0.0])]).unwrap();
    assert_eq!((f.trace_count(), traces.get()), (3, 3));
}

#[test]
fn relu_at_zero_is_reported_with_the_gradient() {
    // x = 0 and zero biases put every lin1 pre-activation at 0, where relu'(0) = 0 decides.
    let mut f = value_and_grad(|x: &[Value]| mlp(&x[0], &mut seeded(0)));
    let x = Tensor::f32([2], vec![0.0, 0.0]).unwrap();
    let params = f.init(std::slice::from_ref(&x)).unwrap();
    let r = f.call(&params, &[x]).unwrap();
    // The forward relu and the backward pass's step (relu's derivative) both sit at 0.
    let hits: Vec<(&str, usize)> = r
        .grads
        .conventions
        .iter()
        .map(|h| (h.op.as_str(), h.elements))
        .collect();
    assert_eq!(hits, vec![("relu", 4), ("heaviside", 4)]);
    assert_eq!(
        r.grads.conventions[0].convention,
        "convention: relu'(0) = 0"
    );
    // Nothing flows into lin1 through a relu that is off everywhere.
    assert_eq!(
        r.grads.by_tag["lin1"].get("lin1.W").unwrap().to_f64_vec(),
        vec![0.0; 8]
    );
}

#[test]
fn grad_is_value_and_grad_without_the_value() {
    let model = |x: &[Value]| smooth_loss(&x[0], &mut seeded(4));
    let x = f64s(&[1, 2], &[0.5, -0.25]);
    let mut g = grad(model);
    let mut vg = value_and_grad(model);
    let params = g.init(std::slice::from_ref(&x)).unwrap();
    assert_eq!(
        g.call(&params, std::slice::from_ref(&x)).unwrap(),
        vg.call(&params, &[x]).unwrap().grads
    );
}

#[test]
fn jvp_and_vjp_are_adjoint() {
    // <J v, u> = <v, J^T u> for a two-output function of a data input and parameters.
    let model = |x: &[Value]| {
        let mut rng = seeded(9);
        let h = linear(&x[0], 3, &mut rng, "a").tanh();
        vec![h.sigmoid(), (&h * &h).sum_axes(&[1])]
    };
    let x = f64s(&[2, 2], &[0.1, -0.4, 0.8, 0.3]);
    let mut fwd = jvp(model);
    let mut rev = vjp(model);
    let params = fwd.init(std::slice::from_ref(&x)).unwrap();

    let v_x = f64s(&[2, 2], &[1.0, -2.0, 0.5, 0.25]);
    let mut v_p = Params::new();
    v_p.insert("a.W", f64s(&[3, 2], &[0.3, -0.1, 0.2, 0.7, -0.5, 0.4]));
    v_p.insert("a.b", f64s(&[3], &[1.0, 0.0, -1.0]));
    let u = vec![
        f64s(&[2, 3], &[0.2, 0.4, -0.6, 1.0, 0.1, -0.3]),
        f64s(&[2], &[0.7, -1.2]),
    ];

    let j = fwd
        .call(
            &params,
            std::slice::from_ref(&x),
            std::slice::from_ref(&v_x),
            &v_p,
        )
        .unwrap();
    let r = rev.call(&params, &[x], &u).unwrap();
    assert_eq!(j.outputs, r.outputs);
    let lhs: f64 = j.tangents.iter().zip(&u).map(|(t, u)| t.dot(u)).sum();
    let rhs = v_x.dot(r.cotangents.inputs[0].as_ref().unwrap())
        + v_p
            .iter()
            .map(|(n, v)| v.dot(r.cotangents.params.get(n).unwrap()))
            .sum::<f64>();
    assert!(
        (lhs - rhs).abs() < 1e-12 * lhs.abs().max(1.0),
        "{lhs} vs {rhs}"
    );
}

#[test]
fn jvp_agrees_with_a_central_difference_along_the_tangent() {
    let model = |x: &[Value]| smooth_loss(&x[0], &mut seeded(2));
    let x = f64s(&[2, 2], &[0.2, 0.9, -0.3, 0.6]);
    let v = f64s(&[2, 2], &[1.0, -0.5, 0.25, 2.0]);
    let mut f = jvp(model);
    let params = f.init(std::slice::from_ref(&x)).unwrap();
    let j = f
        .call(
            &params,
            std::slice::from_ref(&x),
            std::slice::from_ref(&v),
            &Params::new(),
        )
        .unwrap();
    let traced = trace(&[x.ty()], |a| model(a)).unwrap();
    let at = |s: f64| {
        let xs: Vec<f64> = x
            .to_f64_vec()
            .iter()
            .zip(v.to_f64_vec())
            .map(|(a, b)| a + s * b)
            .collect();
        let args =
            catml::trace::arguments(&traced.program, &params, &[f64s(&[2, 2], &xs)]).unwrap();
        catml::interp::eval(&traced.program, &args).unwrap()[0].to_f64_vec()[0]
    };
    let h = 1e-6;
    let fd = (at(h) - at(-h)) / (2.0 * h);
    let t = j.tangents[0].to_f64_vec()[0];
    assert!((t - fd).abs() < 1e-8, "{t} vs {fd}");
}

#[test]
fn hvp_of_a_cubic_has_its_closed_form_in_inputs_and_parameters() {
    // f(x, w) = Σ w x³: ∂²f/∂x² = diag(6 w x), ∂²f/∂x∂w = diag(3 x²), ∂²f/∂w² = 0.
    let mut f = hvp(|x: &[Value]| {
        let w = Value::param("w", f64s(&[2], &[0.0, 0.0]));
        (&w * &x[0] * &x[0] * &x[0]).sum_all()
    });
    let x = f64s(&[2], &[1.0, -2.0]);
    let mut params = Params::new();
    params.insert("w", f64s(&[2], &[0.5, 3.0]));
    let v = f64s(&[2], &[1.0, 0.5]);
    let mut vw = Params::new();
    vw.insert("w", f64s(&[2], &[2.0, -1.0]));
    let r = f.call(&params, &[x], &[v], &vw).unwrap();
    // value: 0.5 · 1 + 3 · (-8) = -23.5
    assert_eq!(r.value.to_f64_vec(), vec![-23.5]);
    // ∇_x = 3 w x² = [1.5, 36], ∇_w = x³ = [1, -8]
    assert_eq!(
        r.grads.inputs[0].as_ref().unwrap().to_f64_vec(),
        vec![1.5, 36.0]
    );
    assert_eq!(
        r.grads.params.get("w").unwrap().to_f64_vec(),
        vec![1.0, -8.0]
    );
    // (H v)_x = 6 w x v_x + 3 x² v_w = [3 + 6, -18 - 12] = [9, -30]
    assert_eq!(
        r.hvp.inputs[0].as_ref().unwrap().to_f64_vec(),
        vec![9.0, -30.0]
    );
    // (H v)_w = 3 x² v_x = [3, 6]
    assert_eq!(r.hvp.params.get("w").unwrap().to_f64_vec(), vec![3.0, 6.0]);
    // <∇f, v> = 1.5 + 18 + 2 + 8 = 29.5
    assert_eq!(r.directional.to_f64_vec(), vec![29.5]);
}

#[test]
fn missing_and_mistyped_parameters_are_named() {
    let mut f = grad(|x: &[Value]| mlp(&x[0], &mut seeded(0)));
    let x = Tensor::f32([2], vec![1.0, 2.0]).unwrap();
    let mut params = f.init(std::slice::from_ref(&x)).unwrap();
    params.remove("lin2.b");
    let e = f.call(&params, std::slice::from_ref(&x)).unwrap_err();
    assert_eq!(
        e.to_string(),
        "missing parameter `lin2.b` (f32[1]): the traced program declares it"
    );
    params.insert("lin2.b", f64s(&[1], &[0.0]));
    let e = f.call(&params, &[x]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "parameter `lin2.b` has type f64[1], the traced program declares f32[1]"
    );
}

#[test]
fn grad_of_a_function_with_a_vector_output_is_refused_at_the_call() {
    let mut f = grad(|x: &[Value]| x[0].tanh());
    let x = f64s(&[3], &[1.0, 2.0, 3.0]);
    let (e, line) = (f.call(&Params::new(), &[x]).unwrap_err(), line!());
    assert!(matches!(e, TraceError::NotScalar { .. }));
    assert_eq!(e.location().unwrap().line(), line);
    assert!(
        e.to_string()
            .ends_with("grad needs one single-element float output, the function returns (f64[3])"),
        "{e}"
    );
}

#[test]
fn cotangents_must_match_the_outputs() {
    let mut f = vjp(|x: &[Value]| vec![x[0].tanh(), x[0].sum_all()]);
    let x = f64s(&[2], &[1.0, 2.0]);
    let e = f
        .call(
            &Params::new(),
            std::slice::from_ref(&x),
            &[f64s(&[2], &[1.0, 1.0])],
        )
        .unwrap_err();
    assert_eq!(e.to_string(), "expected 2 cotangents, found 1");
    let e = f
        .call(
            &Params::new(),
            &[x],
            &[f64s(&[2], &[1.0, 1.0]), f64s(&[1], &[1.0])],
        )
        .unwrap_err();
    assert_eq!(e.to_string(), "cotangent 1 has type f64[1], expected f64[]");
}

#[test]
fn a_tracing_error_surfaces_from_the_transformed_call() {
    let mut f = value_and_grad(|x: &[Value]| x[0].matmul(&x[0]).sum_all());
    let e = f
        .call(&Params::new(), &[f64s(&[2, 3], &[0.0; 6])])
        .unwrap_err();
    assert!(matches!(e, TraceError::Type { .. }));
    assert_eq!(e.location().unwrap().file(), file!());
}

#[test]
fn hvp_of_a_network_agrees_with_central_differences_of_its_gradient() {
    let model = |x: &[Value]| smooth_loss(&x[0], &mut seeded(6));
    let x = f64s(&[2, 2], &[0.4, -0.2, 0.7, 1.3]);
    let mut h = hvp(model);
    let mut g = grad(model);
    let params = h.init(std::slice::from_ref(&x)).unwrap();
    // The direction: every parameter and the input at once.
    let v_x = f64s(&[2, 2], &[0.3, 1.0, -0.6, 0.2]);
    let v_p: Params = params
        .iter()
        .enumerate()
        .map(|(k, (name, t))| {
            let data = (0..t.numel())
                .map(|i| ((i + k) as f64 * 0.7).sin())
                .collect();
            (
                name.to_string(),
                Tensor::f64(t.dims().to_vec(), data).unwrap(),
            )
        })
        .collect();
    let r = h
        .call(
            &params,
            std::slice::from_ref(&x),
            std::slice::from_ref(&v_x),
            &v_p,
        )
        .unwrap();

    let mut shifted = |s: f64| {
        let along = |a: &Tensor, d: &Tensor| {
            let data = a
                .to_f64_vec()
                .iter()
                .zip(d.to_f64_vec())
                .map(|(a, d)| a + s * d)
                .collect();
            Tensor::f64(a.dims().to_vec(), data).unwrap()
        };
        let p: Params = params
            .iter()
            .map(|(n, t)| (n.to_string(), along(t, v_p.get(n).unwrap())))
            .collect();
        g.call(&p, &[along(&x, &v_x)]).unwrap()
    };
    let eps = 1e-5;
    let (plus, minus) = (shifted(eps), shifted(-eps));
    let fd = |a: &Tensor, b: &Tensor| {
        let data = a
            .to_f64_vec()
            .iter()
            .zip(b.to_f64_vec())
            .map(|(a, b)| (a - b) / (2.0 * eps))
            .collect();
        Tensor::f64(a.dims().to_vec(), data).unwrap()
    };
    let fd_params: Params = plus
        .params
        .iter()
        .map(|(n, t)| (n.to_string(), fd(t, minus.params.get(n).unwrap())))
        .collect();
    let err = max_param_diff(&r.hvp.params, &fd_params);
    assert!(err < 1e-7, "parameters: max error {err}");
    let fd_x = fd(
        plus.inputs[0].as_ref().unwrap(),
        minus.inputs[0].as_ref().unwrap(),
    );
    let err_x = r.hvp.inputs[0].as_ref().unwrap().max_abs_diff(&fd_x);
    assert!(err_x < 1e-7, "input: max error {err_x}");
    assert_eq!(h.trace_count(), 1);
}
