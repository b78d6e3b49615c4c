//! Derivatives of derivatives: the VJP program is an ordinary program, so the transforms apply
//! to it again. A Hessian-vector product of a small tanh network, as forward-over-reverse and
//! as reverse-over-reverse, must match central differences of the gradient; second derivatives
//! of scalar functions must match their closed forms.

use crate::common;

use std::sync::Arc;

use catml::ad;
use catml::interp::eval;
use catml::ir::{Builder, InputKind, Program, TypeError, Var};
use catml::prim::{Constant, Ops};
use catml::tensor::{DType, Tensor};
use common::{axpy, f64t, max_abs, max_abs_diff, ones, random, rng};

/// L(x, W₁, W₂) = sum(tanh(x W₁) W₂), a scalar.
fn tanh_net() -> Program {
    let mut b = Builder::new();
    let x = b.input("x", f64t(&[2, 3]), InputKind::Data).unwrap();
    let w1 = b.input("W1", f64t(&[3, 4]), InputKind::Param).unwrap();
    let w2 = b.input("W2", f64t(&[4, 2]), InputKind::Param).unwrap();
    let a = b.matmul(x, w1).unwrap();
    let h = b.tanh(a).unwrap();
    let z = b.matmul(h, w2).unwrap();
    let l = b.sum(z, None).unwrap();
    b.finish(&[l]).unwrap()
}

/// ∇L at θ, from the VJP program with seed 1.
fn gradient(v: &ad::Vjp, theta: &[Tensor]) -> Vec<Tensor> {
    let mut args = theta.to_vec();
    args.push(Tensor::scalar(DType::F64, 1.0));
    let out = eval(&v.program, &args).unwrap();
    v.layout
        .gradients
        .iter()
        .map(|g| out[g.index].clone())
        .collect()
}

#[test]
fn hessian_vector_products_match_differences_of_the_gradient() {
    let p = tanh_net();
    let v = ad::vjp(&p).unwrap();
    let mut rng = rng(6);
    let theta: Vec<Tensor> = p
        .input_types()
        .iter()
        .map(|t| random(&mut rng, t))
        .collect();
    let dir: Vec<Tensor> = p
        .input_types()
        .iter()
        .map(|t| random(&mut rng, t))
        .collect();
    let seed = Tensor::scalar(DType::F64, 1.0);

    // Forward over reverse: the tangent of ∇L along (dir, 0 for the seed).
    let j = ad::jvp(&v.program).unwrap();
    let mut args = theta.clone();
    args.push(seed.clone());
    args.extend(dir.iter().cloned());
    args.push(Tensor::scalar(DType::F64, 0.0));
    let out = eval(&j.program, &args).unwrap();
    let fwd_rev: Vec<Tensor> = v
        .layout
        .gradients
        .iter()
        .map(|g| out[j.layout.n_primal_outputs() + g.index].clone())
        .collect();

    // Reverse over reverse: the gradient of <dir, ∇L(θ)> with respect to θ.
    let vv = ad::vjp(&v.program).unwrap();
    let mut args = theta.clone();
    args.push(seed);
    args.push(Tensor::scalar(DType::F64, 0.0)); // no weight on L itself
    args.extend(dir.iter().cloned());
    let out = eval(&vv.program, &args).unwrap();
    let rev_rev: Vec<Tensor> = (0..theta.len())
        .map(|i| out[vv.layout.gradient_output(i).unwrap()].clone())
        .collect();

    // Central differences of the gradient.
    let h = 1e-5;
    let shifted = |s: f64| -> Vec<Tensor> {
        theta
            .iter()
            .zip(&dir)
            .map(|(t, d)| axpy(t, s * h, d))
            .collect()
    };
    let (gp, gm) = (gradient(&v, &shifted(1.0)), gradient(&v, &shifted(-1.0)));
    let fd: Vec<Tensor> = gp.iter().zip(&gm).map(|(a, b)| axpy(a, -1.0, b)).collect();
    let fd: Vec<Tensor> = fd
        .iter()
        .map(|t| {
            let d = t.to_f64_vec().iter().map(|v| v / (2.0 * h)).collect();
            Tensor::f64(t.dims().to_vec(), d).unwrap()
        })
        .collect();

    assert!(
        max_abs_diff(&fwd_rev, &rev_rev) <= 1e-13,
        "{}",
        max_abs_diff(&fwd_rev, &rev_rev)
    );
    let err = max_abs_diff(&fwd_rev, &fd);
    assert!(err <= 1e-8, "Hv vs central differences: {err}");
    // The product is not trivially zero.
    assert!(fwd_rev
        .iter()
        .any(|t| t.to_f64_vec().iter().any(|v| v.abs() > 1e-3)));
}

type Unary = fn(&mut Builder, Var) -> Result<Var, TypeError>;

/// x ↦ f'(x) as a program: the VJP program of f with its seed fixed to ones.
fn derivative_program(f: Unary, n: usize) -> Program {
    let primal = {
        let mut b = Builder::new();
        let x = b.input("x", f64t(&[n]), InputKind::Data).unwrap();
        let y = f(&mut b, x).unwrap();
        b.finish(&[y]).unwrap()
    };
    let v = ad::vjp(&primal).unwrap();
    let mut b = Builder::new();
    let x = b.input("x", f64t(&[n]), InputKind::Data).unwrap();
    let seed = b
        .op(Arc::new(Constant::new(ones(&f64t(&[n])))), &[])
        .unwrap();
    let out = b.inline(&v.program, &[x, seed]).unwrap();
    b.finish(&[out[v.layout.gradient_output(0).unwrap()]])
        .unwrap()
}

struct Scalar {
    name: &'static str,
    f: Unary,
    d1: fn(f64) -> f64,
    d2: fn(f64) -> f64,
    xs: &'static [f64],
}

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

const ANYWHERE: &[f64] = &[-1.7, -0.4, 0.3, 0.9, 2.2];
const POSITIVE: &[f64] = &[0.3, 0.7, 1.1, 1.9, 2.5];

fn scalars() -> Vec<Scalar> {
    vec![
        Scalar {
            name: "tanh",
            f: |b, x| b.tanh(x),
            d1: |x| 1.0 - x.tanh().powi(2),
            d2: |x| -2.0 * x.tanh() * (1.0 - x.tanh().powi(2)),
            xs: ANYWHERE,
        },
        Scalar {
            name: "exp",
            f: |b, x| b.exp(x),
            d1: f64::exp,
            d2: f64::exp,
            xs: ANYWHERE,
        },
        Scalar {
            name: "x*x*x",
            f: |b, x| {
                let x2 = b.mul(x, x)?;
                b.mul(x2, x)
            },
            d1: |x| 3.0 * x * x,
            d2: |x| 6.0 * x,
            xs: ANYWHERE,
        },
        Scalar {
            name: "reciprocal",
            f: |b, x| b.reciprocal(x),
            d1: |x| -1.0 / (x * x),
            d2: |x| 2.0 / (x * x * x),
            xs: &[-1.7, -0.4, 0.3, 0.9, 2.2],
        },
        Scalar {
            name: "sigmoid",
            f: |b, x| b.sigmoid(x),
            d1: |x| sigmoid(x) * (1.0 - sigmoid(x)),
            d2: |x| sigmoid(x) * (1.0 - sigmoid(x)) * (1.0 - 2.0 * sigmoid(x)),
            xs: ANYWHERE,
        },
        Scalar {
            name: "log",
            f: |b, x| b.log(x),
            d1: |x| 1.0 / x,
            d2: |x| -1.0 / (x * x),
            xs: POSITIVE,
        },
        Scalar {
            name: "rsqrt",
            f: |b, x| b.rsqrt(x),
            d1: |x| -0.5 * x.powf(-1.5),
            d2: |x| 0.75 * x.powf(-2.5),
            xs: POSITIVE,
        },
    ]
}

#[test]
fn second_derivatives_of_scalar_functions_match_closed_forms() {
    for s in scalars() {
        let n = s.xs.len();
        let x = Tensor::f64([n], s.xs.to_vec()).unwrap();
        let d = derivative_program(s.f, n);
        let d1 = eval(&d, std::slice::from_ref(&x)).unwrap()[0].to_f64_vec();
        let want1: Vec<f64> = s.xs.iter().map(|&v| (s.d1)(v)).collect();
        let want2: Vec<f64> = s.xs.iter().map(|&v| (s.d2)(v)).collect();
        let scale = |w: &[f64]| w.iter().fold(1.0f64, |m, v| m.max(v.abs()));
        assert!(
            max_abs(&d1, &want1) <= 1e-14 * scale(&want1),
            "{}: f' {d1:?} vs {want1:?}",
            s.name
        );

        // f'' is diagonal, so one reverse and one forward pass with all-ones give it.
        let (_, rev) = common::value_and_grad(&d, std::slice::from_ref(&x), &[ones(&f64t(&[n]))]);
        let (_, fwd) =
            common::value_and_tangent(&d, std::slice::from_ref(&x), &[ones(&f64t(&[n]))]);
        for (mode, got) in [("grad of grad", &rev[0]), ("jvp of grad", &fwd[0])] {
            let got = got.to_f64_vec();
            assert!(
                max_abs(&got, &want2) <= 1e-13 * scale(&want2),
                "{}: {mode} {got:?} vs {want2:?}",
                s.name
            );
        }
    }
}

#[test]
fn third_order_of_the_cube_is_six() {
    // The transforms iterate: d³/dx³ x³ = 6 everywhere.
    let d1 = derivative_program(
        |b, x| {
            let x2 = b.mul(x, x)?;
            b.mul(x2, x)
        },
        3,
    );
    let v = ad::vjp(&d1).unwrap();
    let mut b = Builder::new();
    let x = b.input("x", f64t(&[3]), InputKind::Data).unwrap();
    let seed = b
        .op(Arc::new(Constant::new(ones(&f64t(&[3])))), &[])
        .unwrap();
    let out = b.inline(&v.program, &[x, seed]).unwrap();
    let d2 = b
        .finish(&[out[v.layout.gradient_output(0).unwrap()]])
        .unwrap();
    let xv = Tensor::f64([3], vec![-1.0, 0.5, 2.0]).unwrap();
    let (_, d3) = common::value_and_grad(&d2, std::slice::from_ref(&xv), &[ones(&f64t(&[3]))]);
    assert_eq!(d3[0].to_f64_vec(), vec![6.0; 3]);
}
