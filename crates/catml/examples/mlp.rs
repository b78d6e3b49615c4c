//! The tiny MLP (docs/examples.md), end to end: trace it once, print the program, read its
//! output shape and parameter counts without data, then take gradients by tag and check them
//! against central finite differences.
//!
//! `cargo run -p catml --example mlp`

use std::process::ExitCode;

use catml::interp;
use catml::ir::listing;
use catml::nn::{linear, seeded, ChaCha8Rng};
use catml::tensor::{DType, Params, Tensor, TensorType};
use catml::trace::{arguments, trace, value_and_grad, Traced, Value};

/// The model, written once: it runs eagerly on tensors and records inside a trace.
fn model(x: &Value, rng: &mut ChaCha8Rng) -> Value {
    let h = linear(x, 4, rng, "lin1");
    let h = h.relu();
    let y = linear(&h, 1, rng, "lin2");
    y.sigmoid()
}

fn show(t: &Tensor) -> String {
    let items: Vec<String> = t.to_f64_vec().iter().map(|v| format!("{v:+.5}")).collect();
    format!("[{}]", items.join(", "))
}

/// ∂f/∂θ_i ≈ (f(θ + h e_i) - f(θ - h e_i)) / 2h for every parameter element, with f the
/// traced program's output. Returns the largest difference from `grads`.
fn max_finite_difference_error(
    traced: &Traced,
    params: &Params,
    x: &Tensor,
    grads: &Params,
) -> f64 {
    let f = |p: &Params| -> f64 {
        let args =
            arguments(&traced.program, p, std::slice::from_ref(x)).expect("all parameters given");
        interp::eval(&traced.program, &args).expect("finite")[0].to_f64_vec()[0]
    };
    let h = 1e-6;
    let mut worst: f64 = 0.0;
    for (name, t) in params.iter() {
        let base = t.to_f64_vec();
        let g = grads
            .get(name)
            .expect("a gradient per parameter")
            .to_f64_vec();
        for i in 0..base.len() {
            let at = |delta: f64| {
                let mut data = base.clone();
                data[i] += delta;
                let mut p = params.clone();
                p.insert(
                    name,
                    Tensor::f64(t.dims().to_vec(), data).expect("same shape"),
                );
                f(&p)
            };
            let fd = (at(h) - at(-h)) / (2.0 * h);
            worst = worst.max((fd - g[i]).abs());
        }
    }
    worst
}

fn main() -> Result<ExitCode, Box<dyn std::error::Error>> {
    // Trace: the types of x0 = zeros((2,)) are all tracing needs.
    let x_type = TensorType::new(DType::F64, [2]);
    let mut rng = seeded(0);
    let traced = trace(&[x_type], |x| model(&x[0], &mut rng))?;
    println!("{}", listing::print(&traced.program));

    // Shapes, from the type rules alone.
    let p = &traced.program;
    let out = interp::shape(p, &p.input_types())?;
    println!("output type (shape interpreter, no data): {}", out[0]);

    // Parameter counts by tag.
    let count = interp::params(p);
    let parts: Vec<String> = count
        .by_tag
        .iter()
        .map(|(t, n)| format!("{t} {n}"))
        .collect();
    println!("parameters: {} = {}", count.total, parts.join(" + "));

    // Gradients by tag: traced once, transformed once, then evaluated.
    let mut f = value_and_grad(|x: &[Value]| model(&x[0], &mut seeded(0)));
    let x = Tensor::f64([2], vec![0.5, -1.0])?;
    let params = f.init(std::slice::from_ref(&x))?;
    let r = f.call(&params, std::slice::from_ref(&x))?;
    println!("\nf(x) at x = {}: {}", show(&x), show(&r.value));
    for (tag, grads) in &r.grads.by_tag {
        println!("gradients of tag {tag}:");
        for (name, g) in grads.iter() {
            println!("  d f / d {name:<7} = {}", show(g));
        }
    }
    if !r.grads.conventions.is_empty() {
        println!("conventions used: {:?}", r.grads.conventions);
    }

    let err = max_finite_difference_error(&traced, &params, &x, &r.grads.params);
    println!("\nmax |reverse mode - central difference| over 17 parameters: {err:.2e}");

    // At x = 0 with zero biases every ReLU sits at its kink: the report says so.
    let zero = Tensor::f64([2], vec![0.0, 0.0])?;
    let at_zero = f.call(&params, &[zero])?;
    for hit in &at_zero.grads.conventions {
        println!(
            "at x = 0: node `{}` ({}) decided {} elements by {}",
            hit.name, hit.op, hit.elements, hit.convention
        );
    }
    println!("traces of the model: {}", f.trace_count());

    let ok = out[0] == TensorType::new(DType::F64, [1])
        && count.total == 17
        && count.by_tag.get("lin1") == Some(&12)
        && count.by_tag.get("lin2") == Some(&5)
        && err < 1e-8
        && f.trace_count() == 1;
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        eprintln!("mlp: a check failed");
        ExitCode::FAILURE
    })
}
