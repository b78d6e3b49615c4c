//! Programs form a category, and eval, shape and the reverse pass respect it
//! (docs/categories.md: interpreters as functors, derivatives reverse composition). Every law
//! is checked on 256 generated programs over the whole primitive set.

use crate::support;

use catml::ad;
use catml::interp;
use catml::ir::{InputKind, Program};
use catml::tensor::{Tensor, TensorType};
use proptest::prelude::*;
use support::{chains, inputs_by_name, prefixed, programs, small, unit, value_for, with_data};

fn config() -> ProptestConfig {
    ProptestConfig {
        // At least 256; PROPTEST_CASES raises it.
        cases: ProptestConfig::default().cases.max(256),
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

fn eval(p: &Program, x: &[Tensor]) -> Vec<Tensor> {
    interp::eval(p, x).unwrap_or_else(|e| panic!("eval: {e}\n{}", catml::ir::listing::print(p)))
}

fn data_types(p: &Program) -> Vec<TensorType> {
    p.data_indices()
        .iter()
        .map(|&i| p.inputs()[i].ty.clone())
        .collect()
}

/// Gradients of every input of `p` at x with seeds u, by input name.
fn gradients(p: &Program, x: &[Tensor], u: &[Tensor]) -> Vec<(String, Vec<f64>)> {
    let v = ad::vjp(p).expect("vjp");
    let mut args = x.to_vec();
    args.extend(u.iter().cloned());
    let out = eval(&v.program, &args);
    v.layout
        .gradients
        .iter()
        .map(|g| (g.name.clone(), out[g.index].to_f64_vec()))
        .collect()
}

proptest! {
    #![proptest_config(config())]

    /// (f;g);h and f;(g;h) evaluate equally.
    #[test]
    fn then_is_associative(ps in chains(small(), 3)) {
        let (f, g, h) = (&ps[0], &ps[1], &ps[2]);
        let left = f.then(g).unwrap().then(h).unwrap();
        let right = f.then(&g.then(h).unwrap()).unwrap();
        prop_assert_eq!(left.inputs(), right.inputs());
        prop_assert_eq!(eval(&left, &inputs_by_name(&left)), eval(&right, &inputs_by_name(&right)));
    }

    /// id;f = f = f;id, evaluated.
    #[test]
    fn identities_are_units(f in programs(small())) {
        let x = inputs_by_name(&f);
        let id_in = Program::identity(&data_types(&f)).unwrap();
        let id_out = Program::identity(&f.output_types()).unwrap();
        let y = eval(&f, &x);
        // id;f has id's data inputs then f's parameters, in f's order (data come first in f).
        prop_assert_eq!(&eval(&id_in.then(&f).unwrap(), &x), &y);
        prop_assert_eq!(&eval(&f.then(&id_out).unwrap(), &x), &y);
        prop_assert_eq!(eval(&id_out, &y), y);
    }

    /// eval(f;g) = eval(g) ∘ eval(f) and shape(f;g) = shape(g) ∘ shape(f): the interpreters are
    /// functors.
    #[test]
    fn eval_and_shape_are_functors(ps in chains(small(), 2)) {
        let (f, g) = (&ps[0], &ps[1]);
        let fg = f.then(g).unwrap();
        let y = eval(f, &inputs_by_name(f));
        prop_assert_eq!(eval(&fg, &inputs_by_name(&fg)), eval(g, &with_data(g, &y)));
        let tf = interp::shape(f, &f.input_types()).unwrap();
        let tg_args: Vec<TensorType> = {
            let mut data = tf.iter();
            g.inputs().iter().map(|i| match i.kind {
                InputKind::Data => data.next().unwrap().clone(),
                InputKind::Param => i.ty.clone(),
            }).collect()
        };
        prop_assert_eq!(
            interp::shape(&fg, &fg.input_types()).unwrap(),
            interp::shape(g, &tg_args).unwrap()
        );
    }

    /// shape(eval(p, x)) = shape(p, shape(x)), for programs and their derivative programs.
    #[test]
    fn shape_is_natural(p in programs(small())) {
        let j = ad::jvp(&p).unwrap().program;
        let v = ad::vjp(&p).unwrap().program;
        for q in [&p, &j, &v] {
            let x = inputs_by_name(q);
            let observed: Vec<TensorType> = eval(q, &x).iter().map(Tensor::ty).collect();
            let types: Vec<TensorType> = x.iter().map(Tensor::ty).collect();
            prop_assert_eq!(observed, interp::shape(q, &types).unwrap());
        }
    }

    /// f⊗g evaluates to (eval f, eval g); ⊗ is associative with the empty identity as unit,
    /// and (f⊗g);(f'⊗g') = (f;f')⊗(g;g').
    #[test]
    fn par_laws(fs in chains(prefixed("f"), 2), gs in chains(prefixed("g"), 2), h in programs(prefixed("h."))) {
        let (f, f2, g, g2) = (&fs[0], &fs[1], &gs[0], &gs[1]);
        let fg = f.par(g).unwrap();
        let mut want = eval(f, &inputs_by_name(f));
        want.extend(eval(g, &inputs_by_name(g)));
        prop_assert_eq!(&eval(&fg, &inputs_by_name(&fg)), &want);
        let left = fg.par(&h).unwrap();
        let right = f.par(&g.par(&h).unwrap()).unwrap();
        prop_assert_eq!(eval(&left, &inputs_by_name(&left)), eval(&right, &inputs_by_name(&right)));
        let unit = f.par(&Program::identity(&[]).unwrap()).unwrap();
        prop_assert_eq!(eval(&unit, &inputs_by_name(&unit)), eval(f, &inputs_by_name(f)));
        let lhs = fg.then(&f2.par(g2).unwrap()).unwrap();
        let rhs = f.then(f2).unwrap().par(&g.then(g2).unwrap()).unwrap();
        prop_assert_eq!(eval(&lhs, &inputs_by_name(&lhs)), eval(&rhs, &inputs_by_name(&rhs)));
    }

    /// vjp(f;g) = vjp(f) ∘ vjp(g): the composite's gradients equal g's pullback followed by f's.
    #[test]
    fn reverse_pass_is_contravariant(ps in chains(small(), 2)) {
        let (f, g) = (&ps[0], &ps[1]);
        let fg = f.then(g).unwrap();
        let u: Vec<Tensor> = fg.output_types().iter().enumerate()
            .map(|(k, ty)| value_for(&format!("seed{k}"), ty)).collect();
        let composite = gradients(&fg, &inputs_by_name(&fg), &u);
        // g's pullback at y = f(x), then f's pullback of g's data-input cotangents.
        let x = inputs_by_name(f);
        let y = eval(f, &x);
        let g_grads = gradients(g, &with_data(g, &y), &u);
        let ybar: Vec<Tensor> = g.data_indices().iter().zip(f.output_types())
            .map(|(&i, ty)| Tensor::from_f64s(ty.dtype, ty.shape.clone(), g_grads[i].1.clone()).unwrap())
            .collect();
        let mut sequential = gradients(f, &x, &ybar);
        sequential.extend(g.param_indices().iter().map(|&i| g_grads[i].clone()));
        let tol = 256.0 * unit(&fg);
        for (name, want) in &sequential {
            let got = &composite.iter().find(|(n, _)| n == name).expect("same inputs").1;
            let scale = want.iter().fold(1.0f64, |m, v| m.max(v.abs()));
            let diff = got.iter().zip(want).fold(0.0f64, |m, (a, b)| m.max((a - b).abs()));
            prop_assert!(diff <= tol * scale, "{}: differs by {:e} (scale {:e})", name, diff, scale);
        }
    }

    /// The pullback of the copy Δ: A -> A^n adds the seeds; the discard's is zero, also after f.
    #[test]
    fn copy_pullback_adds_and_discard_pullback_is_zero(f in programs(small()), n in 1usize..4) {
        for ty in f.output_types() {
            let copy = Program::copy(&ty, n).unwrap();
            let x = value_for("x", &ty);
            let u: Vec<Tensor> = (0..n).map(|k| value_for(&format!("u{k}"), &ty)).collect();
            let g = &gradients(&copy, std::slice::from_ref(&x), &u)[0].1;
            let sum = (1..n).fold(u[0].to_f64_vec(), |acc, k| {
                acc.iter().zip(u[k].to_f64_vec()).map(|(a, b)| {
                    // Sum in the dtype, as the pullback does.
                    if ty.dtype == catml::tensor::DType::F32 { (*a as f32 + b as f32) as f64 } else { a + b }
                }).collect()
            });
            prop_assert_eq!(g, &sum);
        }
        let gone = f.then(&Program::discard(&f.output_types()).unwrap()).unwrap();
        prop_assert!(gone.outputs().is_empty());
        for (name, g) in gradients(&gone, &inputs_by_name(&gone), &[]) {
            prop_assert!(g.iter().all(|&v| v == 0.0), "{} has a nonzero gradient", name);
        }
        let d = Program::discard(&data_types(&f)).unwrap();
        let x: Vec<Tensor> = data_types(&f).iter().map(|ty| value_for("d", ty)).collect();
        for (name, g) in gradients(&d, &x, &[]) {
            prop_assert!(g.iter().all(|&v| v == 0.0), "discard: {} has a nonzero gradient", name);
        }
    }
}
