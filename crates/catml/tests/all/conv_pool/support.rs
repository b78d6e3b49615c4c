//! Checks shared by the convolution and pooling tests: a composite's kernel against its lowering
//! (forward, JVP, VJP, and the VJP's own VJP), the adjoint identity, and finite differences.

use catml::ad::{jvp, vjp};
use catml::interp::eval;
use catml::ir::{Builder, Fragment, InputKind, Prim, Program};
use catml::tensor::{DType, Tensor, TensorType};
use rand::RngExt;
use rand_chacha::ChaCha8Rng;

/// One composite applied to typed operands.
pub struct Case {
    pub prim: Prim,
    pub inputs: Vec<TensorType>,
    pub label: String,
}

impl Case {
    pub fn new(prim: Prim, inputs: Vec<TensorType>, label: impl Into<String>) -> Case {
        Case {
            prim,
            inputs,
            label: label.into(),
        }
    }

    fn declare(&self, b: &mut Builder) -> Vec<catml::ir::Var> {
        self.inputs
            .iter()
            .enumerate()
            .map(|(i, t)| {
                b.input(&format!("x{i}"), t.clone(), InputKind::Data)
                    .unwrap()
            })
            .collect()
    }

    /// The program with one node: the composite and its fast kernel.
    pub fn kernel_program(&self) -> Program {
        let mut b = Builder::new();
        let xs = self.declare(&mut b);
        let y = b
            .apply(self.prim.clone(), &xs)
            .unwrap_or_else(|e| panic!("{}: {e}", self.label));
        b.finish(&[y]).unwrap()
    }

    /// The program made of the composite's lowering, checked to use only core primitives (and
    /// primitives with a labelled convention, such as relu and step, when `nonsmooth` is
    /// allowed).
    pub fn lowered_program(&self, nonsmooth: bool) -> Program {
        let mut b = Builder::new();
        let xs = self.declare(&mut b);
        let y = self
            .prim
            .lower(&mut b, &xs)
            .unwrap_or_else(|| panic!("{}: no lowering", self.label))
            .unwrap_or_else(|e| panic!("{}: lowering failed: {e}", self.label));
        let p = b.finish(&[y]).unwrap();
        for n in p.nodes() {
            let op = n.prim.name();
            let core = n.prim.fragment() == Fragment::Core;
            let labelled = matches!(n.prim.rule(), catml::ir::RuleKind::Convention(_));
            let allowed = core || (nonsmooth && labelled);
            assert!(allowed, "{}: lowering emits `{op}`", self.label);
            if op == "matmul" {
                assert!(
                    n.prim.attrs().is_empty(),
                    "{}: matmul with flags",
                    self.label
                );
            }
        }
        p
    }

    pub fn random_inputs(&self, rng: &mut ChaCha8Rng) -> Vec<Tensor> {
        self.inputs.iter().map(|t| random(rng, t)).collect()
    }
}

/// Uniform values in [-1, 1).
pub fn random(rng: &mut ChaCha8Rng, ty: &TensorType) -> Tensor {
    let data = (0..ty.numel())
        .map(|_| rng.random_range(-1.0..1.0))
        .collect();
    Tensor::from_f64s(ty.dtype, ty.shape.clone(), data).unwrap()
}

pub fn f64_type(dims: &[usize]) -> TensorType {
    TensorType::new(DType::F64, dims.to_vec())
}

pub fn run(p: &Program, inputs: &[Tensor]) -> Vec<Tensor> {
    eval(p, inputs).unwrap_or_else(|e| panic!("eval failed: {e}"))
}

/// |a − b| ≤ tol · (1 + max |b|), elementwise over equal shapes.
pub fn assert_close(a: &Tensor, b: &Tensor, tol: f64, what: &str) {
    assert_eq!(a.dims(), b.dims(), "{what}: shapes");
    let scale = 1.0 + b.to_f64_vec().iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let err = a.max_abs_diff(b);
    assert!(
        err <= tol * scale,
        "{what}: max abs diff {err} (scale {scale})"
    );
}

fn assert_all_close(a: &[Tensor], b: &[Tensor], tol: f64, what: &str) {
    assert_eq!(a.len(), b.len(), "{what}: output counts");
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert_close(x, y, tol, &format!("{what}, output {i}"));
    }
}

/// Kernel and lowering agree on values, JVP, VJP, and the VJP of the VJP.
pub fn check_against_lowering(case: &Case, rng: &mut ChaCha8Rng, nonsmooth: bool, tol: f64) {
    let kp = case.kernel_program();
    let lp = case.lowered_program(nonsmooth);
    let label = &case.label;
    let x = case.random_inputs(rng);
    assert_all_close(
        &run(&kp, &x),
        &run(&lp, &x),
        tol,
        &format!("{label}: forward"),
    );

    let (kj, lj) = (jvp(&kp).unwrap(), jvp(&lp).unwrap());
    let args = [x.clone(), case.random_inputs(rng)].concat();
    let (a, b) = (run(&kj.program, &args), run(&lj.program, &args));
    assert_all_close(&a, &b, tol, &format!("{label}: jvp"));

    let (kv, lv) = (vjp(&kp).unwrap(), vjp(&lp).unwrap());
    let seed = random(rng, &kp.output_types()[0]);
    let args = [x.clone(), vec![seed]].concat();
    let (a, b) = (run(&kv.program, &args), run(&lv.program, &args));
    assert_all_close(&a, &b, tol, &format!("{label}: vjp"));

    // The derivative program is differentiable again, through each form's own rules.
    let (kvv, lvv) = (vjp(&kv.program).unwrap(), vjp(&lv.program).unwrap());
    let seeds: Vec<Tensor> = kv
        .program
        .output_types()
        .iter()
        .map(|t| random(rng, t))
        .collect();
    let args2 = [args, seeds].concat();
    let (a, b) = (run(&kvv.program, &args2), run(&lvv.program, &args2));
    assert_all_close(&a, &b, tol, &format!("{label}: vjp of vjp"));
}

/// ⟨u, J v⟩ = ⟨Jᵀ u, v⟩ between the kernel form's JVP and VJP programs.
pub fn check_adjoint(case: &Case, rng: &mut ChaCha8Rng, tol: f64) {
    let p = case.kernel_program();
    let x = case.random_inputs(rng);
    let v = case.random_inputs(rng);
    let u = random(rng, &p.output_types()[0]);
    let j = jvp(&p).unwrap();
    let jv = run(&j.program, &[x.clone(), v.clone()].concat())
        .pop()
        .unwrap();
    let r = vjp(&p).unwrap();
    let grads = run(&r.program, &[x, vec![u.clone()]].concat());
    let left = u.dot(&jv);
    let right: f64 = grads[1..].iter().zip(&v).map(|(g, v)| g.dot(v)).sum();
    let scale = 1.0 + left.abs().max(right.abs());
    assert!(
        (left - right).abs() <= tol * scale,
        "{}: <u, Jv> = {left} but <J^T u, v> = {right}",
        case.label
    );
}

/// Central differences (f(x + hv) − f(x − hv)) / 2h against the JVP.
pub fn check_finite_differences(case: &Case, rng: &mut ChaCha8Rng, h: f64, tol: f64) {
    let p = case.kernel_program();
    let x = case.random_inputs(rng);
    let v = case.random_inputs(rng);
    let shifted = |sign: f64| -> Vec<Tensor> {
        x.iter()
            .zip(&v)
            .map(|(a, d)| {
                let data = a
                    .to_f64_vec()
                    .iter()
                    .zip(d.to_f64_vec())
                    .map(|(a, d)| a + sign * h * d)
                    .collect();
                Tensor::from_f64s(a.dtype(), a.dims().to_vec(), data).unwrap()
            })
            .collect()
    };
    let plus = run(&p, &shifted(1.0)).pop().unwrap().to_f64_vec();
    let minus = run(&p, &shifted(-1.0)).pop().unwrap().to_f64_vec();
    let fd: Vec<f64> = plus
        .iter()
        .zip(&minus)
        .map(|(a, b)| (a - b) / (2.0 * h))
        .collect();
    let j = jvp(&p).unwrap();
    let jv = run(&j.program, &[x, v].concat()).pop().unwrap();
    let fd = Tensor::from_f64s(jv.dtype(), jv.dims().to_vec(), fd).unwrap();
    assert_close(
        &fd,
        &jv,
        tol,
        &format!("{}: finite differences", case.label),
    );
}
