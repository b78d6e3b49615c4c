//! Checks shared by the composite tests: a composite's kernel against its lowering (forward,
//! JVP, VJP), the adjoint identity, central finite differences and a second-order check.

#![allow(dead_code)]

use catml::ad::{jvp, vjp};
use catml::interp::eval;
use catml::ir::Fragment;
use catml::ir::Program;
use catml::tensor::{DType, Tensor, TensorType};
use catml::transform::lower;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

pub type Rng = ChaCha8Rng;

pub fn rng(seed: u64) -> Rng {
    ChaCha8Rng::seed_from_u64(seed)
}

/// Uniform values in [-scale, scale).
pub fn random(rng: &mut Rng, ty: &TensorType, scale: f64) -> Tensor {
    let data = (0..ty.numel())
        .map(|_| scale * (2.0 * rng.random::<f64>() - 1.0))
        .collect();
    Tensor::from_f64s(ty.dtype, ty.shape.clone(), data).unwrap()
}

/// Integers in 0..bound.
pub fn indices(rng: &mut Rng, dims: &[usize], bound: usize) -> Tensor {
    let n: usize = dims.iter().product();
    let data = (0..n).map(|_| rng.random_range(0..bound as i64)).collect();
    Tensor::i64(dims.to_vec(), data).unwrap()
}

pub fn f64s(dims: &[usize]) -> TensorType {
    TensorType::new(DType::F64, dims.to_vec())
}

/// max |a - b| <= tol (1 + max |b|), elementwise over equal shapes.
pub fn assert_close(what: &str, a: &Tensor, b: &Tensor, tol: f64) {
    assert_eq!(a.shape(), b.shape(), "{what}: shapes differ");
    let scale = 1.0 + b.to_f64_vec().iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let err = a.max_abs_diff(b);
    assert!(
        err <= tol * scale,
        "{what}: max abs difference {err:e} exceeds {:e}\n  a = {:?}\n  b = {:?}",
        tol * scale,
        a,
        b
    );
}

/// The float inputs' indices.
fn float_inputs(p: &Program) -> Vec<usize> {
    (0..p.n_inputs())
        .filter(|&i| p.inputs()[i].ty.dtype.is_float())
        .collect()
}

/// One random tangent per float input.
pub fn tangents(rng: &mut Rng, p: &Program) -> Vec<Tensor> {
    float_inputs(p)
        .iter()
        .map(|&i| random(rng, &p.inputs()[i].ty, 1.0))
        .collect()
}

/// One random seed per output.
pub fn seeds(rng: &mut Rng, p: &Program) -> Vec<Tensor> {
    p.output_types()
        .iter()
        .map(|t| random(rng, t, 1.0))
        .collect()
}

/// The tangents of the outputs along `v`.
pub fn run_jvp(p: &Program, x: &[Tensor], v: &[Tensor]) -> Vec<Tensor> {
    let j = jvp(p).expect("jvp builds");
    let mut inputs = x.to_vec();
    inputs.extend(v.iter().cloned());
    let out = eval(&j.program, &inputs).expect("jvp evaluates");
    out[j.layout.n_primal_outputs()..].to_vec()
}

/// The cotangents of the float inputs for output seeds `u`.
pub fn run_vjp(p: &Program, x: &[Tensor], u: &[Tensor]) -> Vec<Tensor> {
    let r = vjp(p).expect("vjp builds");
    let mut inputs = x.to_vec();
    inputs.extend(u.iter().cloned());
    let out = eval(&r.program, &inputs).expect("vjp evaluates");
    r.layout
        .gradients
        .iter()
        .map(|g| out[g.index].clone())
        .collect()
}

fn dot_all(a: &[Tensor], b: &[Tensor]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x.dot(y)).sum()
}

/// x + h v on the float inputs.
fn shifted(p: &Program, x: &[Tensor], v: &[Tensor], h: f64) -> Vec<Tensor> {
    let mut out = x.to_vec();
    for (k, &i) in float_inputs(p).iter().enumerate() {
        let data: Vec<f64> = x[i]
            .to_f64_vec()
            .iter()
            .zip(v[k].to_f64_vec())
            .map(|(a, d)| a + h * d)
            .collect();
        out[i] = Tensor::from_f64s(x[i].dtype(), x[i].shape().clone(), data).unwrap();
    }
    out
}

/// Central differences of `f` along `v`.
fn central(
    p: &Program,
    f: impl Fn(&[Tensor]) -> Vec<Tensor>,
    x: &[Tensor],
    v: &[Tensor],
    h: f64,
) -> Vec<Tensor> {
    let plus = f(&shifted(p, x, v, h));
    let minus = f(&shifted(p, x, v, -h));
    plus.iter()
        .zip(&minus)
        .map(|(a, b)| {
            let d = a
                .to_f64_vec()
                .iter()
                .zip(b.to_f64_vec())
                .map(|(s, t)| (s - t) / (2.0 * h))
                .collect();
            Tensor::from_f64s(a.dtype(), a.shape().clone(), d).unwrap()
        })
        .collect()
}

/// What `check` verified, for tests that want to look further.
pub struct Checked {
    pub lowered: Program,
}

/// Every check of a composite program on f64 inputs `x` (integer inputs are held fixed):
/// 1. the lowering uses only the core fragment and the documented extras;
/// 2. eval(p) = eval(lower(p));
/// 3. jvp and vjp of p equal those of lower(p);
/// 4. <u, J v> = <J^T u, v>;
/// 5. J v equals central differences;
/// 6. second order: the jvp of the vjp program equals central differences of the vjp.
pub fn check(p: &Program, x: &[Tensor], seed: u64, tol: f64) -> Checked {
    let mut r = rng(seed);
    let low = lower(p).expect("lowering succeeds");
    for n in low.nodes() {
        assert!(
            n.prim.fragment() != Fragment::Outside,
            "lowering left `{}`, outside the core fragment and its extras",
            n.prim.name()
        );
    }

    let y = eval(p, x).expect("kernel evaluates");
    let yl = eval(&low, x).expect("lowering evaluates");
    for (k, (a, b)) in y.iter().zip(&yl).enumerate() {
        assert_close(&format!("forward output {k}"), a, b, tol);
    }

    let v = tangents(&mut r, p);
    let u = seeds(&mut r, p);
    let jv = run_jvp(p, x, &v);
    let jv_low = run_jvp(&low, x, &v);
    for (k, (a, b)) in jv.iter().zip(&jv_low).enumerate() {
        assert_close(&format!("jvp output {k}: kernel vs lowering"), a, b, tol);
    }
    let ju = run_vjp(p, x, &u);
    let ju_low = run_vjp(&low, x, &u);
    for (k, (a, b)) in ju.iter().zip(&ju_low).enumerate() {
        assert_close(&format!("vjp input {k}: kernel vs lowering"), a, b, tol);
    }

    let lhs = dot_all(&u, &jv);
    let rhs = dot_all(&ju, &v);
    assert!(
        (lhs - rhs).abs() <= tol * (1.0 + lhs.abs()),
        "adjoint identity: <u, Jv> = {lhs} but <J^T u, v> = {rhs}"
    );

    let fd = central(p, |z| eval(p, z).unwrap(), x, &v, 1e-6);
    for (k, (a, b)) in jv.iter().zip(&fd).enumerate() {
        assert_close(
            &format!("jvp output {k} vs central differences"),
            a,
            b,
            1e-5,
        );
    }

    // Second order: the reverse program's own derivative, by its rules and by differences.
    let w = tangents(&mut r, p);
    let grad = |z: &[Tensor]| run_vjp(p, z, &u);
    let back = vjp(p).expect("vjp builds").program;
    let mut xu = x.to_vec();
    xu.extend(u.iter().cloned());
    let mut wz: Vec<Tensor> = w.clone();
    wz.extend(u.iter().map(|t| Tensor::zeros(&t.ty())));
    let j2 = jvp(&back).expect("jvp of vjp builds");
    let mut inputs = xu.clone();
    inputs.extend(wz);
    let out = eval(&j2.program, &inputs).expect("jvp of vjp evaluates");
    let r2 = vjp(p).unwrap();
    let second: Vec<Tensor> = r2
        .layout
        .gradients
        .iter()
        .map(|g| out[j2.layout.n_primal_outputs() + g.index].clone())
        .collect();
    let fd2 = central(p, grad, x, &w, 1e-5);
    for (k, (a, b)) in second.iter().zip(&fd2).enumerate() {
        assert_close(&format!("second order, input {k}"), a, b, 1e-4);
    }
    Checked { lowered: low }
}
