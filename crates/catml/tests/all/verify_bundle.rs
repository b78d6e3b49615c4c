//! The verification bundle passes on the library, gives one results file per seed, and fails
//! when a derivative rule is wrong.

use std::sync::Arc;

use catml::ir::{Builder, KernelError, Prim, RuleError, Var};
use catml::prim::{CustomPrimitive, Ops};
use catml::tensor::{Tensor, TensorType};
use catml::verify::generate::{Interval, UnaryEntry};
use catml::verify::{self, run_smooth, Config, Level, NoProgress, SmoothOptions};

fn smoke(seed: u64, threads: usize) -> verify::Results {
    let mut c = Config::new(seed, Level::Smoke);
    c.threads = threads;
    verify::run(&c, &NoProgress)
}

#[test]
fn every_family_passes_at_smoke_level() {
    let r = smoke(1, 2);
    assert_eq!(
        r.families
            .iter()
            .map(|f| f.name.as_str())
            .collect::<Vec<_>>(),
        verify::family_names()
    );
    for f in &r.families {
        assert!(f.cases > 0 && f.checks > 0, "{} ran nothing", f.name);
        assert!(f.passed(), "{}: {:?}", f.name, f.failure_examples);
    }
    assert!(r.passed);
    assert_eq!(r.failures, 0);
    assert_eq!(r.checks, r.families.iter().map(|f| f.checks).sum::<u64>());
}

/// The results as JSON without wall times.
fn without_timings(r: &verify::Results) -> serde_json::Value {
    let mut v = serde_json::to_value(r).unwrap();
    v.as_object_mut().unwrap().remove("wall_time_s");
    for f in v["families"].as_array_mut().unwrap() {
        f.as_object_mut().unwrap().remove("wall_time_s");
    }
    v
}

#[test]
fn one_seed_gives_one_results_file_apart_from_timings() {
    let (a, b) = (smoke(7, 2), smoke(7, 1));
    assert_eq!(without_timings(&a), without_timings(&b));
    assert_eq!(a.to_json().lines().count(), b.to_json().lines().count());
    assert_ne!(without_timings(&a), without_timings(&smoke(8, 2)));
    assert_eq!(a.rustc, verify::RUSTC_VERSION);
    assert!(a.rustc.starts_with("rustc "), "{}", a.rustc);
}

/// tanh with the given forward and reverse slopes in terms of y = tanh x.
fn tanh_with(name: &str, jvp_slope: fn(f64) -> f64, vjp_slope: fn(f64) -> f64) -> Prim {
    fn map(t: &Tensor, f: impl Fn(f64) -> f64) -> Tensor {
        Tensor::from_f64s(
            t.dtype(),
            t.shape().clone(),
            t.to_f64_vec().into_iter().map(f).collect(),
        )
        .unwrap()
    }
    fn slope(b: &mut Builder, y: Var, s: fn(f64) -> f64) -> Result<Var, RuleError> {
        // s is affine or quadratic in y: read it off at 0, 1 and -1.
        let (c0, c1, cm) = (s(0.0), s(1.0), s(-1.0));
        let (a2, a1) = ((c1 + cm) / 2.0 - c0, (c1 - cm) / 2.0);
        let yy = b.mul(y, y)?;
        let q = b.scale(yy, a2)?;
        let l = b.scale(y, a1)?;
        let c = b.full_like(c0, y)?;
        let ql = b.add(q, l)?;
        Ok(b.add(ql, c)?)
    }
    let prim = CustomPrimitive::new(
        name,
        |t: &[TensorType]| Ok(t[0].clone()),
        |x: &[&Tensor]| -> Result<Tensor, KernelError> { Ok(map(x[0], f64::tanh)) },
    )
    .with_jvp(move |b, _x, y, dx| match dx[0] {
        Some(d) => {
            let s = slope(b, y, jvp_slope)?;
            Ok(Some(b.mul(d, s)?))
        }
        None => Ok(None),
    })
    .with_vjp(move |b, _x, y, u| {
        let s = slope(b, y, vjp_slope)?;
        Ok(vec![Some(b.mul(u, s)?)])
    });
    Arc::new(prim)
}

fn smooth_with(prim: Prim) -> verify::FamilyReport {
    let mut opts = SmoothOptions::new(40, 99);
    opts.gen = opts
        .gen
        .with_prims(&["add", "mul", "matmul", "sum", "reshape"]);
    opts.gen.extra_unary = vec![UnaryEntry {
        prim,
        cap: 4.0,
        range: |i: Interval| i.increasing(f64::tanh),
    }];
    run_smooth(&opts, &NoProgress)
}

fn right(y: f64) -> f64 {
    1.0 - y * y
}

fn wrong(y: f64) -> f64 {
    1.0 - y
}

#[test]
fn a_correct_custom_rule_passes() {
    let r = smooth_with(tanh_with("tanh_custom", right, right));
    assert!(r.checks > 100, "{r:?}");
    assert!(r.passed(), "{:?}", r.failure_examples);
}

#[test]
fn a_wrong_vjp_rule_fails_the_adjoint_test() {
    let r = smooth_with(tanh_with("tanh_wrong_vjp", right, wrong));
    assert!(r.failures > 0);
    assert!(
        r.failure_examples
            .iter()
            .all(|e| e.contains("adjoint_error")),
        "{:?}",
        r.failure_examples
    );
    assert!(r.max_errors["f64_adjoint_error"] > 1e-3);
}

#[test]
fn consistent_but_wrong_rules_pass_the_pairing_and_fail_the_directional_check() {
    // A pairing check alone is insufficient (docs/derivatives.md): the directional check
    // catches consistent but wrong rules.
    let r = smooth_with(tanh_with("tanh_wrong_both", wrong, wrong));
    assert!(r.failures > 0);
    assert!(r.max_errors["f64_adjoint_error"] <= 64.0 * f64::EPSILON / 2.0);
    assert!(
        r.failure_examples.iter().all(|e| e.contains("directional")),
        "{:?}",
        r.failure_examples
    );
}

#[test]
fn every_primitive_says_truly_whether_it_is_rational() {
    use catml::tensor::{RArray, Rational};
    use catml::verify::generate::{all_names, generate, GenConfig};
    for name in all_names() {
        let cfg = GenConfig::default().with_prims(&[&name]);
        let p = (0..20)
            .filter_map(|seed| generate(&cfg, seed).ok())
            .find(|p| p.nodes().iter().any(|n| n.prim.name() == name))
            .unwrap_or_else(|| panic!("{name}: no generated program applies it"));
        let n = p.nodes().iter().find(|n| n.prim.name() == name).unwrap();
        // Ones of the operands' shapes: whether a rational kernel exists, not its domain.
        let ones: Vec<RArray> = n
            .operands
            .iter()
            .map(|o| {
                let ty = p.ty(*o);
                RArray::new(
                    ty.dims().to_vec(),
                    vec![Rational::from_integer(1.into()); ty.numel()],
                )
                .unwrap()
            })
            .collect();
        let refs: Vec<&RArray> = ones.iter().collect();
        let has = n.prim.eval_rational(&refs).is_some();
        assert_eq!(
            has,
            n.prim.has_rational_eval(),
            "{name}: has_rational_eval disagrees with eval_rational"
        );
    }
}
