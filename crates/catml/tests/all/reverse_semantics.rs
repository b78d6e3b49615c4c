//! The reverse pass's bookkeeping (docs/reverse.md): contributions accumulate at repeated
//! operands and repeated outputs, discarded inputs get the zero response, shared parameters add
//! their per-use cotangents (sharing is the dual of copying), the transforms compose (the chain
//! rule), and gradients group by the tags of the layers that read them.

use crate::common;

use std::collections::BTreeMap;

use catml::ad;
use catml::ir::{Builder, InputKind, Program, Var};
use catml::prim::Ops;
use catml::tensor::Tensor;
use common::{f64t, max_abs, max_abs_diff, random, rng, value_and_grad, value_and_tangent, Mat};

fn t(dims: &[usize], data: &[f64]) -> Tensor {
    Tensor::f64(dims.to_vec(), data.to_vec()).unwrap()
}

#[test]
fn repeated_operand_accumulates() {
    // y = x ⊙ x: both occurrences contribute u ⊙ x, so x̄ = 2 x ⊙ u.
    let mut b = Builder::new();
    let x = b.input("x", f64t(&[3]), InputKind::Data).unwrap();
    let y = b.mul(x, x).unwrap();
    let p = b.finish(&[y]).unwrap();
    let (_, g) = value_and_grad(
        &p,
        &[t(&[3], &[1.5, -2.0, 0.25])],
        &[t(&[3], &[1.0, 3.0, -2.0])],
    );
    assert_eq!(g[0].to_f64_vec(), vec![3.0, -12.0, -1.0]);
}

#[test]
fn repeated_outputs_accumulate_their_seeds() {
    // outputs [y, y] with y = tanh(x): x̄ = (s₀ + s₁) ⊙ (1 - y²).
    let mut b = Builder::new();
    let x = b.input("x", f64t(&[3]), InputKind::Data).unwrap();
    let y = b.tanh(x).unwrap();
    let p = b.finish(&[y, y]).unwrap();
    let xv = t(&[3], &[0.5, -1.0, 2.0]);
    let (s0, s1) = (t(&[3], &[1.0, 2.0, 3.0]), t(&[3], &[-4.0, 0.5, 1.0]));
    let (out, g) = value_and_grad(&p, std::slice::from_ref(&xv), &[s0.clone(), s1.clone()]);
    assert_eq!(out.len(), 2);
    let expected: Vec<f64> = xv
        .to_f64_vec()
        .iter()
        .zip(s0.to_f64_vec().iter().zip(s1.to_f64_vec()))
        .map(|(x, (a, b))| (a + b) * (1.0 - x.tanh() * x.tanh()))
        .collect();
    assert!(max_abs(&g[0].to_f64_vec(), &expected) <= 1e-15);
}

#[test]
fn unused_inputs_get_zero_gradients() {
    let mut b = Builder::new();
    let x = b.input("x", f64t(&[2]), InputKind::Data).unwrap();
    let unused = b.input("z", f64t(&[2, 2]), InputKind::Param).unwrap();
    let _ = unused;
    let y = b.exp(x).unwrap();
    let p = b.finish(&[y]).unwrap();
    let v = ad::vjp(&p).unwrap();
    assert_eq!(v.layout.gradients.len(), 2);
    let (_, g) = value_and_grad(
        &p,
        &[t(&[2], &[0.0, 1.0]), t(&[2, 2], &[5.0, 6.0, 7.0, 8.0])],
        &[t(&[2], &[1.0, 1.0])],
    );
    assert_eq!(g[0].to_f64_vec(), vec![1.0, 1f64.exp()]);
    assert_eq!(g[1], t(&[2, 2], &[0.0; 4]));
}

/// y = tanh(x W₁) W₂ with W₁ and W₂ separate inputs (x, W₁, W₂).
fn untied(rows: usize, d: usize) -> Program {
    let mut b = Builder::new();
    let x = b.input("x", f64t(&[rows, d]), InputKind::Data).unwrap();
    let w1 = b.input("W1", f64t(&[d, d]), InputKind::Param).unwrap();
    let w2 = b.input("W2", f64t(&[d, d]), InputKind::Param).unwrap();
    let a = b.matmul(x, w1).unwrap();
    let h = b.tanh(a).unwrap();
    let y = b.matmul(h, w2).unwrap();
    b.finish(&[y]).unwrap()
}

#[test]
fn shared_parameter_sums_its_per_use_cotangents() {
    // Tying W₁ = W₂ = W is the diagonal; its dual adds the two cotangents (docs/reverse.md).
    let (rows, d) = (3, 4);
    let untied = untied(rows, d);
    let tied = {
        let mut b = Builder::new();
        let x = b.input("x", f64t(&[rows, d]), InputKind::Data).unwrap();
        let w = b.input("W", f64t(&[d, d]), InputKind::Param).unwrap();
        let y = b.inline(&untied, &[x, w, w]).unwrap();
        b.finish(&y).unwrap()
    };
    let mut rng = rng(3);
    let x = random(&mut rng, &f64t(&[rows, d]));
    let w = random(&mut rng, &f64t(&[d, d]));
    let u = random(&mut rng, &f64t(&[rows, d]));
    let (_, g_untied) = value_and_grad(
        &untied,
        &[x.clone(), w.clone(), w.clone()],
        std::slice::from_ref(&u),
    );
    let (_, g_tied) = value_and_grad(&tied, &[x, w], &[u]);
    let sum: Vec<f64> = g_untied[1]
        .to_f64_vec()
        .iter()
        .zip(g_untied[2].to_f64_vec())
        .map(|(a, b)| a + b)
        .collect();
    assert!(max_abs(&g_tied[1].to_f64_vec(), &sum) <= 1e-15);
    assert_eq!(g_tied[0], g_untied[0]);
}

#[test]
fn transforms_of_a_composite_are_the_composites_of_the_transforms() {
    // f(x, W) = tanh(x W), g(h) = sum_rows(exp(h) ⊙ h); c = g ∘ f.
    let (rows, d) = (2, 3);
    let f = {
        let mut b = Builder::new();
        let x = b.input("x", f64t(&[rows, d]), InputKind::Data).unwrap();
        let w = b.input("W", f64t(&[d, d]), InputKind::Param).unwrap();
        let a = b.matmul(x, w).unwrap();
        let h = b.tanh(a).unwrap();
        b.finish(&[h]).unwrap()
    };
    let g = {
        let mut b = Builder::new();
        let h = b.input("h", f64t(&[rows, d]), InputKind::Data).unwrap();
        let e = b.exp(h).unwrap();
        let m = b.mul(e, h).unwrap();
        let s = b.sum(m, Some(vec![1])).unwrap();
        b.finish(&[s]).unwrap()
    };
    let c = {
        let mut b = Builder::new();
        let x = b.input("x", f64t(&[rows, d]), InputKind::Data).unwrap();
        let w = b.input("W", f64t(&[d, d]), InputKind::Param).unwrap();
        let h = b.inline(&f, &[x, w]).unwrap();
        let y = b.inline(&g, &h).unwrap();
        b.finish(&y).unwrap()
    };
    let mut rng = rng(4);
    let x = random(&mut rng, &f64t(&[rows, d]));
    let w = random(&mut rng, &f64t(&[d, d]));
    let u = random(&mut rng, &f64t(&[rows]));
    let (dx, dw) = (
        random(&mut rng, &f64t(&[rows, d])),
        random(&mut rng, &f64t(&[d, d])),
    );

    // Reverse: vjp(c) = vjp(f) after vjp(g).
    let (yc, gc) = value_and_grad(&c, &[x.clone(), w.clone()], std::slice::from_ref(&u));
    let h = catml::interp::eval(&f, &[x.clone(), w.clone()]).unwrap();
    let (yg, h_bar) = value_and_grad(&g, &h, std::slice::from_ref(&u));
    let (_, gf) = value_and_grad(&f, &[x.clone(), w.clone()], &h_bar);
    assert_eq!(yc, yg);
    assert!(
        max_abs_diff(&gc, &gf) <= 1e-14,
        "{}",
        max_abs_diff(&gc, &gf)
    );

    // Forward: jvp(c) = jvp(g) after jvp(f).
    let (_, tc) = value_and_tangent(&c, &[x.clone(), w.clone()], &[dx.clone(), dw.clone()]);
    let (hf, tf) = value_and_tangent(&f, &[x, w], &[dx, dw]);
    let (_, tg) = value_and_tangent(&g, &hf, &tf);
    assert!(
        max_abs_diff(&tc, &tg) <= 1e-14,
        "{}",
        max_abs_diff(&tc, &tg)
    );
}

/// The tiny MLP (docs/examples.md): relu(linear_lin1(x)), then sigmoid(linear_lin2(h)); inputs
/// x, W1, b1, W2, b2.
fn mlp(batch: usize, sizes: [usize; 3]) -> Program {
    let [n_in, n_hidden, n_out] = sizes;
    let mut b = Builder::new();
    let x = b.input("x", f64t(&[batch, n_in]), InputKind::Data).unwrap();
    let w1 = b
        .input("W1", f64t(&[n_hidden, n_in]), InputKind::Param)
        .unwrap();
    let b1 = b.input("b1", f64t(&[n_hidden]), InputKind::Param).unwrap();
    let w2 = b
        .input("W2", f64t(&[n_out, n_hidden]), InputKind::Param)
        .unwrap();
    let b2 = b.input("b2", f64t(&[n_out]), InputKind::Param).unwrap();
    let tagged = |b: &mut Builder, tag: &str, x: Var, w: Var, bias: Var| {
        let prev = b.set_tag(Some(tag.to_string()));
        let y = b.linear(x, w, bias).unwrap();
        b.set_tag(prev);
        y
    };
    let z1 = tagged(&mut b, "lin1", x, w1, b1);
    let h = b.relu(z1).unwrap();
    let z2 = tagged(&mut b, "lin2", h, w2, b2);
    let y = b.sigmoid(z2).unwrap();
    b.finish(&[y]).unwrap()
}

#[test]
fn gradients_group_by_the_tags_of_their_layers() {
    let (batch, sizes) = (3, [4, 5, 2]);
    let p = mlp(batch, sizes);
    let mut rng = rng(5);
    let inputs: Vec<Tensor> = p
        .input_types()
        .iter()
        .map(|t| random(&mut rng, t))
        .collect();
    let u = random(&mut rng, &f64t(&[batch, sizes[2]]));
    let (_, grads) = value_and_grad(&p, &inputs, std::slice::from_ref(&u));

    let mut by_tag: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for i in p.param_indices() {
        let tag = p
            .tag_of(p.input_var(i))
            .expect("every parameter is read by a tagged layer");
        by_tag.entry(tag).or_default().push(&p.inputs()[i].name);
    }
    assert_eq!(
        by_tag,
        BTreeMap::from([("lin1", vec!["W1", "b1"]), ("lin2", vec!["W2", "b2"])])
    );
    assert_eq!(p.tag_of(p.input_var(0)), Some("lin1"));

    // The backward nodes that produce a layer's parameter gradients carry the layer's tag.
    let v = ad::vjp(&p).unwrap();
    for (i, tag) in [(1, "lin1"), (2, "lin1"), (3, "lin2"), (4, "lin2")] {
        let out = v.program.outputs()[v.layout.gradient_output(i).unwrap()];
        assert_eq!(
            v.program.tag_of(out),
            Some(tag),
            "gradient of {}",
            p.inputs()[i].name
        );
    }

    // And the values are the MLP's hand-derived backward pass.
    let m: Vec<Mat> = inputs.iter().map(Mat::of).collect();
    let (x, w1, b1, w2, b2) = (&m[0], &m[1], &m[2].data, &m[3], &m[4].data);
    let z1 = x
        .matmul(&w1.t())
        .zip(&Mat::rows_of(b1, batch), |a, b| a + b);
    let h = z1.map(|v| v.max(0.0));
    let z2 = h
        .matmul(&w2.t())
        .zip(&Mat::rows_of(b2, batch), |a, b| a + b);
    let y = z2.map(|v| 1.0 / (1.0 + (-v).exp()));
    let gz2 = Mat::of(&u).zip(&y, |g, s| g * s * (1.0 - s));
    let gh = gz2.matmul(w2);
    let gz1 = gh.zip(&z1, |g, z| if z > 0.0 { g } else { 0.0 });
    let expected = [
        gz1.matmul(w1).data,
        gz1.t().matmul(x).data,
        gz1.col_sums(),
        gz2.t().matmul(&h).data,
        gz2.col_sums(),
    ];
    for (i, e) in expected.iter().enumerate() {
        let err = max_abs(&grads[i].to_f64_vec(), e);
        assert!(
            err <= 1e-14,
            "gradient of {}: error {err}",
            p.inputs()[i].name
        );
    }
}
