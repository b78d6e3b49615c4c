//! Diagrams as losses: the triangle's closed form, squares, cycles, shared arrows, cross-entropy,
//! row weights, and the rejection of ill-formed diagrams.

use catml::diagram::{
    triangle_gradients, Arrow, Batch, Diagram, DiagramError, Distance, Equation, Path, Supervised,
};
use catml::ir::{Builder, InputKind};
use catml::prim::Ops;
use catml::tensor::{DType, Params, Shape, Tensor, TensorType};

const B: usize = 3;

fn t64(dims: &[usize], v: &[f64]) -> Tensor {
    Tensor::f64(dims.to_vec(), v.to_vec()).unwrap()
}

/// x ↦ act(x Wᵀ + b) from `n_in` to `n_out` features, on batches of `batch`.
fn affine(
    [name, src, dst]: [&str; 3],
    (n_in, n_out): (usize, usize),
    w: &[f64],
    bias: &[f64],
    tanh: bool,
    batch: usize,
) -> Arrow {
    let mut b = Builder::new();
    let ty = |d: &[usize]| TensorType::new(DType::F64, d.to_vec());
    let x = b.input("x", ty(&[batch, n_in]), InputKind::Data).unwrap();
    let wv = b.input("W", ty(&[n_out, n_in]), InputKind::Param).unwrap();
    let bv = b.input("b", ty(&[n_out]), InputKind::Param).unwrap();
    let mut y = b.linear(x, wv, bv).unwrap();
    if tanh {
        y = b.tanh(y).unwrap();
    }
    let mut p = Params::new();
    p.insert("W", t64(&[n_out, n_in], w));
    p.insert("b", t64(&[n_out], bias));
    Arrow::new(name, src, dst, b.finish(&[y]).unwrap(), p).unwrap()
}

fn lin(name: &str, src: &str, dst: &str, dims: (usize, usize), w: &[f64], bias: &[f64]) -> Arrow {
    affine([name, src, dst], dims, w, bias, false, B)
}

/// Row-major (n x k) times (k x m).
fn mm(a: &[f64], b: &[f64], n: usize, k: usize, m: usize) -> Vec<f64> {
    let mut out = vec![0.0; n * m];
    for i in 0..n {
        for j in 0..m {
            out[i * m + j] = (0..k).map(|l| a[i * k + l] * b[l * m + j]).sum();
        }
    }
    out
}

fn transpose(a: &[f64], n: usize, m: usize) -> Vec<f64> {
    (0..m * n).map(|idx| a[(idx % n) * m + idx / n]).collect()
}

/// x Wᵀ + b for x (n x k), W (m x k).
fn apply_affine(x: &[f64], w: &[f64], b: &[f64], n: usize, k: usize, m: usize) -> Vec<f64> {
    let mut y = mm(x, &transpose(w, m, k), n, k, m);
    for (i, v) in y.iter_mut().enumerate() {
        *v += b[i % m];
    }
    y
}

fn col_sums(a: &[f64], n: usize, m: usize) -> Vec<f64> {
    (0..m).map(|j| (0..n).map(|i| a[i * m + j]).sum()).collect()
}

fn close(found: &Tensor, expected: &[f64]) {
    let f = found.to_f64_vec();
    assert_eq!(f.len(), expected.len(), "{f:?} vs {expected:?}");
    for (a, b) in f.iter().zip(expected) {
        assert!((a - b).abs() < 1e-9, "found {f:?}, expected {expected:?}");
    }
}

#[test]
fn triangle_gradients_match_the_closed_form() {
    // E = R^2, S = R^2, D = R^2, batch of 3; all maps affine so every gradient is by hand.
    let (wf, bf) = ([1.0, 2.0, -1.0, 0.5], [0.5, -1.0]);
    let (wg, bg) = ([2.0, 0.0, 1.0, -1.0], [0.0, 1.0]);
    let (wh, bh) = ([0.5, 1.0, 3.0, -2.0], [1.0, 0.0]);
    let f = lin("f", "E", "S", (2, 2), &wf, &bf);
    let g = lin("g", "S", "D", (2, 2), &wg, &bg);
    let h = lin("h", "E", "D", (2, 2), &wh, &bh);
    let xv = [1.0, -1.0, 2.0, 0.5, 0.0, 3.0];
    let x = t64(&[B, 2], &xv);

    let (loss, hg, fg, gg) = triangle_gradients(&h, &f, &g, &x).unwrap();

    let s = apply_affine(&xv, &wf, &bf, B, 2, 2);
    let gs = apply_affine(&s, &wg, &bg, B, 2, 2);
    let hx = apply_affine(&xv, &wh, &bh, B, 2, 2);
    let r: Vec<f64> = hx.iter().zip(&gs).map(|(a, b)| a - b).collect();
    let neg_r: Vec<f64> = r.iter().map(|v| -v).collect();
    assert!((loss - 0.5 * r.iter().map(|v| v * v).sum::<f64>()).abs() < 1e-12);
    // dL/dh-out = r: dW_h = rᵀ x, db_h = Σ r.
    close(
        hg.get("W").unwrap(),
        &mm(&transpose(&r, B, 2), &xv, 2, B, 2),
    );
    close(hg.get("b").unwrap(), &col_sums(&r, B, 2));
    // dL/d(g∘f)-out = -r: dW_g = -rᵀ s, db_g = -Σ r.
    close(
        gg.get("W").unwrap(),
        &mm(&transpose(&neg_r, B, 2), &s, 2, B, 2),
    );
    close(gg.get("b").unwrap(), &col_sums(&neg_r, B, 2));
    // Through g: dL/ds = -r W_g; dW_f = (dL/ds)ᵀ x, db_f = Σ dL/ds.
    let ds = mm(&neg_r, &wg, B, 2, 2);
    close(
        fg.get("W").unwrap(),
        &mm(&transpose(&ds, B, 2), &xv, 2, B, 2),
    );
    close(fg.get("b").unwrap(), &col_sums(&ds, B, 2));
    assert_eq!(hg.len(), 2);
    assert_eq!(fg.len(), 2);
}

#[test]
fn triangle_gradients_are_zero_when_the_triangle_commutes() {
    // h = g ∘ f exactly: W_h = W_g W_f, b_h = W_g b_f + b_g.
    let f = lin("f", "E", "S", (1, 1), &[2.0], &[1.0]);
    let g = lin("g", "S", "D", (1, 1), &[3.0], &[-1.0]);
    let h = lin("h", "E", "D", (1, 1), &[6.0], &[2.0]);
    let x = t64(&[B, 1], &[1.0, 2.0, -3.0]);
    let (loss, hg, fg, gg) = triangle_gradients(&h, &f, &g, &x).unwrap();
    assert_eq!(loss, 0.0);
    for grads in [&hg, &fg, &gg] {
        for (_, t) in grads.iter() {
            assert!(t.to_f64_vec().iter().all(|&v| v == 0.0));
        }
    }
}

/// Objects declared with `n`-dimensional f64 examples.
fn diagram_with(objects: &[(&str, usize)]) -> Diagram {
    let mut d = Diagram::new();
    for &(name, n) in objects {
        d.object(name, TensorType::new(DType::F64, [n])).unwrap();
    }
    d
}

fn ones(n: usize) -> Tensor {
    t64(&[n], &vec![1.0; n])
}

fn batch_of(objects: &[(&str, Tensor)], terms: &[&str]) -> Batch {
    let mut b = Batch::default();
    for (n, t) in objects {
        b.objects.insert(n.to_string(), t.clone());
    }
    for t in terms {
        b.weights.insert(t.to_string(), ones(B));
    }
    b
}

/// Checks every gradient of the compiled loss against central differences.
fn check_against_differences(d: &Diagram, batch: &Batch) {
    let c = d.compile().unwrap();
    let params = d.params();
    let (_, grads) = c.gradients(&params, batch).unwrap();
    assert_eq!(grads.len(), params.len());
    let eps = 1e-6;
    for (name, p) in params.iter() {
        let g = grads.get(name).unwrap().to_f64_vec();
        let pv = p.to_f64_vec();
        for i in 0..pv.len() {
            let at = |delta: f64| {
                let mut q = params.clone();
                let mut v = pv.clone();
                v[i] += delta;
                q.insert(name, t64(p.dims(), &v));
                c.evaluate(&q, batch).unwrap().total
            };
            let fd = (at(eps) - at(-eps)) / (2.0 * eps);
            assert!(
                (fd - g[i]).abs() < 1e-6 * (1.0 + fd.abs()),
                "{name}[{i}]: vjp {} vs differences {fd}",
                g[i]
            );
        }
    }
}

#[test]
fn a_square_is_an_equation_between_two_paths() {
    // A -f-> B -g-> D and A -p-> C -q-> D.
    let mut d = diagram_with(&[("A", 2), ("B", 3), ("C", 1), ("D", 2)]);
    d.arrow(affine(
        ["f", "A", "B"],
        (2, 3),
        &[0.3, -0.2, 0.5, 0.1, -0.4, 0.2],
        &[0.1, 0.0, -0.1],
        true,
        B,
    ))
    .unwrap();
    d.arrow(affine(
        ["g", "B", "D"],
        (3, 2),
        &[0.2, 0.7, -0.3, 0.5, 0.1, 0.4],
        &[0.0, 0.2],
        false,
        B,
    ))
    .unwrap();
    d.arrow(affine(
        ["p", "A", "C"],
        (2, 1),
        &[0.6, -0.9],
        &[0.3],
        true,
        B,
    ))
    .unwrap();
    d.arrow(affine(
        ["q", "C", "D"],
        (1, 2),
        &[1.5, -0.5],
        &[0.1, 0.1],
        false,
        B,
    ))
    .unwrap();
    d.equation(Equation::new(
        "square",
        Path::of(["f", "g"]),
        Path::of(["p", "q"]),
    ))
    .unwrap();
    let x = t64(&[B, 2], &[0.5, -1.0, 1.5, 0.25, -0.75, 2.0]);
    let batch = batch_of(&[("A", x.clone())], &["square"]);
    // The loss is ½‖g(f(x)) − q(p(x))‖², evaluated path by path.
    let params = d.params();
    let left = d
        .apply(&Path::of(["f", "g"]), &params, &x)
        .unwrap()
        .to_f64_vec();
    let right = d
        .apply(&Path::of(["p", "q"]), &params, &x)
        .unwrap()
        .to_f64_vec();
    let expected: f64 = 0.5
        * left
            .iter()
            .zip(&right)
            .map(|(a, b)| (a - b).powi(2))
            .sum::<f64>();
    let losses = d.compile().unwrap().evaluate(&params, &batch).unwrap();
    assert!((losses.total - expected).abs() < 1e-12);
    assert_eq!(losses.terms[0].0, "square");
    assert_eq!(losses.terms[0].1, losses.total);
    check_against_differences(&d, &batch);
}

#[test]
fn a_cycle_is_asked_to_be_the_identity() {
    // A -f-> B -g-> A close to id(A): r = g(f(x)) - x, dW_g = rᵀ f(x), dW_f = (r W_g)ᵀ x.
    let mut d = diagram_with(&[("A", 2), ("B", 1)]);
    let (wf, wg) = ([1.0, -1.0], [2.0, 0.5]);
    d.arrow(lin("f", "A", "B", (2, 1), &wf, &[0.0])).unwrap();
    d.arrow(lin("g", "B", "A", (1, 2), &wg, &[0.0, 0.0]))
        .unwrap();
    d.equation(Equation::new(
        "cycle",
        Path::of(["f", "g"]),
        Path::identity("A"),
    ))
    .unwrap();
    let xv = [1.0, 2.0, -1.0, 0.0, 3.0, 1.0];
    let batch = batch_of(&[("A", t64(&[B, 2], &xv))], &["cycle"]);
    let (losses, grads) = d.compile().unwrap().gradients(&d.params(), &batch).unwrap();
    let fx = apply_affine(&xv, &wf, &[0.0], B, 2, 1);
    let gfx = apply_affine(&fx, &wg, &[0.0, 0.0], B, 1, 2);
    let r: Vec<f64> = gfx.iter().zip(&xv).map(|(a, b)| a - b).collect();
    assert!((losses.total - 0.5 * r.iter().map(|v| v * v).sum::<f64>()).abs() < 1e-12);
    close(
        grads.get("g.W").unwrap(),
        &mm(&transpose(&r, B, 2), &fx, 2, B, 1),
    );
    let dfx = mm(&r, &transpose(&wg, 2, 1), B, 2, 1);
    close(
        grads.get("f.W").unwrap(),
        &mm(&transpose(&dfx, B, 1), &xv, 1, B, 2),
    );
}

#[test]
fn a_shared_arrow_sums_its_gradients_over_terms() {
    let arrows = || {
        vec![
            affine(
                ["f", "E", "S"],
                (2, 2),
                &[0.5, -0.3, 0.2, 0.8],
                &[0.1, -0.1],
                true,
                B,
            ),
            affine(
                ["g", "S", "D"],
                (2, 3),
                &[0.4, 0.1, -0.6, 0.3, 0.2, 0.9],
                &[0.0, 0.1, 0.2],
                false,
                B,
            ),
            affine(
                ["h", "E", "D"],
                (2, 3),
                &[0.7, -0.2, 0.1, 0.5, -0.4, 0.3],
                &[0.2, 0.0, -0.2],
                false,
                B,
            ),
        ]
    };
    let eq = Equation::new("tri", Path::of(["h"]), Path::of(["f", "g"]));
    let sup = Supervised::new("diag", Path::of(["h"])).loss(Distance::CrossEntropy);
    let build = |with_eq: bool, with_sup: bool| {
        let mut d = diagram_with(&[("E", 2), ("S", 2), ("D", 3)]);
        for a in arrows() {
            d.arrow(a).unwrap();
        }
        if with_eq {
            d.equation(eq.clone()).unwrap();
        }
        if with_sup {
            d.supervised(sup.clone()).unwrap();
        }
        d
    };
    let x = t64(&[B, 2], &[0.5, -1.0, 1.5, 0.25, -0.75, 2.0]);
    let y = t64(&[B, 3], &[0.0, 1.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0]);
    let batch = batch_of(&[("E", x), ("D", y)], &["tri", "diag"]);
    let grads = |d: &Diagram| {
        let c = d.compile().unwrap();
        let mut b = batch.clone();
        b.weights.retain(|k, _| c.term_names().contains(k));
        c.gradients(&d.params(), &b).unwrap()
    };
    let (both_loss, both) = grads(&build(true, true));
    let (eq_loss, only_eq) = grads(&build(true, false));
    let (sup_loss, only_sup) = grads(&build(false, true));
    assert!((both_loss.total - eq_loss.total - sup_loss.total).abs() < 1e-12);
    for name in ["h.W", "h.b"] {
        let sum: Vec<f64> = only_eq
            .get(name)
            .unwrap()
            .to_f64_vec()
            .iter()
            .zip(only_sup.get(name).unwrap().to_f64_vec())
            .map(|(a, b)| a + b)
            .collect();
        close(both.get(name).unwrap(), &sum);
    }
    // f and g appear in the equation only; the supervised term leaves them alone.
    close(
        both.get("f.W").unwrap(),
        &only_eq.get("f.W").unwrap().to_f64_vec(),
    );
    assert!(only_sup.get("f.W").is_none());
    // One parameter input per arrow parameter, however often the arrow is used.
    let d = build(true, true);
    assert_eq!(d.compile().unwrap().param_names().len(), 6);
    check_against_differences(&d, &batch);
}

#[test]
fn cross_entropy_terms_have_their_closed_forms() {
    // One class-score arrow h: E -> D (3 classes), identity-like weights.
    let mut d = diagram_with(&[("E", 3), ("D", 3)]);
    let eye = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0];
    d.arrow(lin("h", "E", "D", (3, 3), &eye, &[0.0; 3]))
        .unwrap();
    d.arrow(lin("k", "E", "D", (3, 3), &eye, &[1.0, 0.0, -1.0]))
        .unwrap();
    d.supervised(Supervised::new("labels", Path::of(["h"])).loss(Distance::CrossEntropy))
        .unwrap();
    d.equation(
        Equation::new("agree", Path::of(["h"]), Path::of(["k"])).distance(Distance::CrossEntropy),
    )
    .unwrap();
    let z = [1.0, 2.0, 3.0, 0.0, 0.0, 0.0, -1.0, 4.0, 1.0];
    let labels = [2usize, 0, 1];
    let mut onehot = vec![0.0; 9];
    for (i, &l) in labels.iter().enumerate() {
        onehot[i * 3 + l] = 1.0;
    }
    let batch = batch_of(
        &[("E", t64(&[B, 3], &z)), ("D", t64(&[B, 3], &onehot))],
        &["labels", "agree"],
    );
    let losses = d.compile().unwrap().evaluate(&d.params(), &batch).unwrap();
    let log_softmax = |row: &[f64]| {
        let lse = row.iter().map(|v| v.exp()).sum::<f64>().ln();
        row.iter().map(|v| v - lse).collect::<Vec<f64>>()
    };
    let ce: f64 = (0..B)
        .map(|i| -log_softmax(&z[i * 3..i * 3 + 3])[labels[i]])
        .sum();
    assert!((losses.terms[0].1 - ce).abs() < 1e-12, "{losses:?} vs {ce}");
    let agree: f64 = (0..B)
        .map(|i| {
            let l = log_softmax(&z[i * 3..i * 3 + 3]);
            let shifted: Vec<f64> = z[i * 3..i * 3 + 3]
                .iter()
                .zip([1.0, 0.0, -1.0])
                .map(|(a, b)| a + b)
                .collect();
            let r = log_softmax(&shifted);
            -(0..3).map(|j| l[j].exp() * r[j]).sum::<f64>()
        })
        .sum();
    assert!((losses.terms[1].1 - agree).abs() < 1e-12);
    check_against_differences(&d, &batch);
}

#[test]
fn cross_entropy_terms_stay_finite_for_scores_far_apart() {
    // Scores 1000 apart: exp of a score minus its row mean would overflow even in f64; the
    // max-shifted log-softmax gives the exact loss of a confident wrong answer, 2000.
    let mut d = diagram_with(&[("E", 2), ("D", 2)]);
    d.arrow(lin("h", "E", "D", (2, 2), &[1.0, 0.0, 0.0, 1.0], &[0.0; 2]))
        .unwrap();
    d.supervised(Supervised::new("labels", Path::of(["h"])).loss(Distance::CrossEntropy))
        .unwrap();
    d.equation(
        Equation::new("agree", Path::of(["h"]), Path::of(["h"])).distance(Distance::CrossEntropy),
    )
    .unwrap();
    let z = [1000.0, -1000.0, 0.0, 0.0, -1000.0, 1000.0];
    let onehot = [0.0, 1.0, 1.0, 0.0, 0.0, 1.0];
    let batch = batch_of(
        &[("E", t64(&[B, 2], &z)), ("D", t64(&[B, 2], &onehot))],
        &["labels", "agree"],
    );
    let c = d.compile().unwrap();
    let losses = c.evaluate(&d.params(), &batch).unwrap();
    // Rows: -log softmax = 2000, ln 2, 0.
    assert!(
        (losses.terms[0].1 - (2000.0 + 2f64.ln())).abs() < 1e-9,
        "{losses:?}"
    );
    // A path against itself: the entropy of each row, 0, ln 2, 0.
    assert!((losses.terms[1].1 - 2f64.ln()).abs() < 1e-12, "{losses:?}");
    let (_, grads) = c.gradients(&d.params(), &batch).unwrap();
    assert!(grads
        .iter()
        .all(|(_, g)| g.to_f64_vec().iter().all(|v| v.is_finite())));
}

#[test]
fn row_weights_select_and_average_rows() {
    let mut d = diagram_with(&[("E", 1), ("D", 1)]);
    d.arrow(lin("h", "E", "D", (1, 1), &[2.0], &[0.0])).unwrap();
    d.supervised(Supervised::new("fit", Path::of(["h"])).weight(4.0))
        .unwrap();
    let mut batch = batch_of(
        &[
            ("E", t64(&[B, 1], &[1.0, 2.0, 3.0])),
            ("D", t64(&[B, 1], &[0.0, 0.0, 1000.0])),
        ],
        &[],
    );
    // Rows 0 and 1 averaged, row 2 (say, unlabelled) ignored: ½ (½·4 + ½·16) = 5.
    batch
        .weights
        .insert("fit".into(), t64(&[B], &[0.5, 0.5, 0.0]));
    let losses = d.compile().unwrap().evaluate(&d.params(), &batch).unwrap();
    assert_eq!(losses.terms, vec![("fit".to_string(), 5.0)]);
    assert_eq!(losses.total, 20.0);
}

/// `Distance::Mse` with rows averaged is the `mse` primitive (the mean over all elements);
/// `Distance::SquaredError` is ½ Σ per row, averaged over rows.
#[test]
fn the_mse_distance_is_the_mse_primitive_and_squared_error_half_the_row_sum() {
    let w = [0.5, -1.0, 2.0, 0.25, 1.5, -0.75];
    let bias = [0.1, -0.2, 0.3];
    let x = [1.0, 2.0, -1.0, 0.5, 3.0, -2.0];
    let target = [0.0, 1.0, 2.0, -1.0, 0.5, 0.25, 1.0, 1.0, -3.0];
    let y = apply_affine(&x, &w, &bias, B, 2, 3);
    let mut batch = batch_of(
        &[("E", t64(&[B, 2], &x)), ("D", t64(&[B, 3], &target))],
        &[],
    );
    batch
        .weights
        .insert("fit".into(), t64(&[B], &[1.0 / 3.0; 3]));

    let mut b = Builder::new();
    let ty = TensorType::new(DType::F64, [B, 3]);
    let a = b.input("a", ty.clone(), InputKind::Data).unwrap();
    let t = b.input("t", ty, InputKind::Data).unwrap();
    let m = b.mse(a, t).unwrap();
    let primitive = catml::interp::eval(
        &b.finish(&[m]).unwrap(),
        &[t64(&[B, 3], &y), t64(&[B, 3], &target)],
    )
    .unwrap()[0]
        .item()
        .unwrap();
    let half_row_sums: f64 = y
        .iter()
        .zip(&target)
        .map(|(a, b)| 0.5 * (a - b) * (a - b))
        .sum::<f64>()
        / B as f64;

    for (distance, want) in [
        (Distance::Mse, primitive),
        (Distance::SquaredError, half_row_sums),
    ] {
        let mut d = diagram_with(&[("E", 2), ("D", 3)]);
        d.arrow(lin("h", "E", "D", (2, 3), &w, &bias)).unwrap();
        d.supervised(Supervised::new("fit", Path::of(["h"])).loss(distance))
            .unwrap();
        let losses = d.compile().unwrap().evaluate(&d.params(), &batch).unwrap();
        assert!(
            (losses.total - want).abs() < 1e-12,
            "{distance:?}: {} vs {want}",
            losses.total
        );
        check_against_differences(&d, &batch);
    }
    assert!((primitive - half_row_sums * 2.0 / 3.0).abs() < 1e-12);
}

fn err(r: Result<(), DiagramError>) -> String {
    r.unwrap_err().to_string()
}

#[test]
fn ill_formed_diagrams_are_rejected_with_their_reasons() {
    let mut d = diagram_with(&[("E", 2), ("S", 2), ("D", 3)]);
    d.arrow(lin("f", "E", "S", (2, 2), &[0.0; 4], &[0.0; 2]))
        .unwrap();
    d.arrow(lin("g", "S", "D", (2, 3), &[0.0; 6], &[0.0; 3]))
        .unwrap();
    d.arrow(lin("h", "E", "D", (2, 3), &[0.0; 6], &[0.0; 3]))
        .unwrap();

    assert_eq!(
        err(d.equation(Equation::new("e", Path::of(["h"]), Path::of(["f", "q"])))),
        "equation \"e\": right: unknown arrow \"q\""
    );
    assert_eq!(
        err(d.equation(Equation::new("e", Path::of(["h"]), Path::of(["g", "f"])))),
        "equation \"e\": right: arrow \"f\" starts at \"E\" but \"g\" ends at \"D\": the path does not compose"
    );
    assert_eq!(
        err(d.equation(Equation::new("e", Path::of(["h"]), Path::of(["f"])))),
        "equation \"e\": the left path goes \"E\" -> \"D\" but the right path goes \"E\" -> \"S\": an equation's paths share both ends"
    );
    assert_eq!(
        err(d.equation(Equation::new("e", Path::of(["h"]), Path::identity("Q")))),
        "equation \"e\": right: unknown object \"Q\""
    );
    assert_eq!(
        err(d.equation(Equation::new(
            "e",
            Path::of(Vec::<String>::new()),
            Path::of(["h"])
        ))),
        "equation \"e\": left: the path has no arrows (an identity path names its object)"
    );
    assert_eq!(
        err(d.supervised(
            Supervised::new("s", Path::of(["f"]))
                .loss(Distance::CrossEntropy)
                .weight(-1.0)
        )),
        "supervised \"s\": weight must be finite and non-negative, found -1"
    );
    d.supervised(Supervised::new("s", Path::of(["f"]))).unwrap();
    assert_eq!(
        err(d.supervised(Supervised::new("s", Path::of(["h"])))),
        "duplicate term \"s\""
    );
    assert_eq!(
        err(d.arrow(lin("k", "E", "Q", (2, 3), &[0.0; 6], &[0.0; 3]))),
        "arrow \"k\": unknown target object \"Q\""
    );
    assert_eq!(
        err(d.arrow(lin("k", "E", "S", (2, 3), &[0.0; 6], &[0.0; 3]))),
        "arrow \"k\": target object \"S\" has batch type f64[3, 2], the program's output has f64[3, 3]"
    );
    assert_eq!(
        err(d.arrow(affine(
            ["k", "E", "D"],
            (2, 3),
            &[0.0; 6],
            &[0.0; 3],
            false,
            5
        ))),
        "arrow \"k\": batch size 5 differs from the diagram's 3"
    );
    assert_eq!(
        err(d.arrow(lin("f", "E", "S", (2, 2), &[0.0; 4], &[0.0; 2]))),
        "duplicate arrow \"f\""
    );
    assert_eq!(
        err(d.object("E", TensorType::new(DType::F64, [1]))),
        "duplicate object \"E\""
    );
    assert_eq!(
        err(d.object("M", TensorType::new(DType::F32, [1]))),
        "object \"M\": dtype f32 differs from the diagram's f64"
    );
    assert_eq!(
        err(d.object("a b", TensorType::new(DType::F64, [1]))),
        "object name \"a b\": expected letters, digits, '_' or '-'"
    );
    let mut m = diagram_with(&[("E", 2), ("M", 1)]);
    m.object("Img", TensorType::new(DType::F64, [2, 2]))
        .unwrap();
    m.arrow(lin("sq", "E", "E", (2, 2), &[0.0; 4], &[0.0; 2]))
        .unwrap();
    let mut b = Builder::new();
    let x = b
        .input("x", TensorType::new(DType::F64, [B, 2]), InputKind::Data)
        .unwrap();
    let y = b.reshape(x, [B, 2, 1]).unwrap();
    let y = b.permute(y, vec![0, 2, 1]).unwrap();
    let y = b.reshape(y, [B, 1, 2]).unwrap();
    let y = b.broadcast(y, [B, 2, 2], vec![0, 1, 2]).unwrap();
    m.arrow(Arrow::new("img", "E", "Img", b.finish(&[y]).unwrap(), Params::new()).unwrap())
        .unwrap();
    assert_eq!(
        err(m.equation(
            Equation::new("e", Path::of(["img"]), Path::of(["img"])).distance(Distance::CrossEntropy)
        )),
        "equation \"e\": cross-entropy needs objects of per-example rank 1 (class scores), \"Img\" has f64[2, 2]"
    );
    assert_eq!(
        Diagram::new().compile().unwrap_err().to_string(),
        "the diagram has no terms: add an equation or a supervised term"
    );
}

#[test]
fn arrows_check_their_programs_and_parameters() {
    let ty = |d: &[usize]| TensorType::new(DType::F64, d.to_vec());
    let mut b = Builder::new();
    let x = b.input("x", ty(&[B, 2]), InputKind::Data).unwrap();
    let y = b.input("y", ty(&[B, 2]), InputKind::Data).unwrap();
    let s = b.add(x, y).unwrap();
    let two_inputs = b.finish(&[s]).unwrap();
    assert_eq!(
        Arrow::new("a", "E", "E", two_inputs, Params::new())
            .unwrap_err()
            .to_string(),
        "arrow \"a\": expected one data input and one output, found 2 data inputs and 1 outputs"
    );
    let mut b = Builder::new();
    let x = b.input("x", ty(&[B, 2]), InputKind::Data).unwrap();
    let w = b.input("W", ty(&[2, 2]), InputKind::Param).unwrap();
    let c = b.input("c", ty(&[2]), InputKind::Param).unwrap();
    let y = b.linear(x, w, c).unwrap();
    let p = b.finish(&[y]).unwrap();
    let mut params = Params::new();
    params.insert("W", t64(&[2, 2], &[0.0; 4]));
    assert_eq!(
        Arrow::new("a", "E", "E", p.clone(), params.clone())
            .unwrap_err()
            .to_string(),
        "arrow \"a\": parameter `c` has no value"
    );
    params.insert("c", t64(&[3], &[0.0; 3]));
    assert_eq!(
        Arrow::new("a", "E", "E", p.clone(), params.clone())
            .unwrap_err()
            .to_string(),
        "arrow \"a\": parameter `c` has a value of type f64[3], expected f64[2]"
    );
    params.insert("c", t64(&[2], &[0.0; 2]));
    params.insert("x", t64(&[B, 2], &[0.0; 6]));
    assert_eq!(
        Arrow::new("a", "E", "E", p, params)
            .unwrap_err()
            .to_string(),
        "arrow \"a\": value `x` is not a parameter of the program"
    );
    // A half-precision parameter (an imported model's, say) is storage, not trained.
    let mut b = Builder::new();
    let x = b.input("x", ty(&[B, 2]), InputKind::Data).unwrap();
    let h = b
        .input("h", TensorType::new(DType::F16, vec![2]), InputKind::Param)
        .unwrap();
    let h64 = b.convert(h, DType::F64).unwrap();
    let h64 = b.broadcast_rows(h64, B).unwrap();
    let y = b.add(x, h64).unwrap();
    let p = b.finish(&[y]).unwrap();
    let mut params = Params::new();
    let half = Tensor::from_f64s(DType::F16, Shape::new(vec![2]), vec![1.0, 2.0]).unwrap();
    params.insert("h", half);
    assert_eq!(
        Arrow::new("a", "E", "E", p, params)
            .unwrap_err()
            .to_string(),
        "arrow \"a\": parameter `h` has the storage dtype f16; training updates f32 and f64 \
         parameters (convert it first)"
    );
}

#[test]
fn batches_are_checked_against_the_loss_program() {
    let mut d = diagram_with(&[("E", 1), ("D", 1)]);
    d.arrow(lin("h", "E", "D", (1, 1), &[2.0], &[0.0])).unwrap();
    d.supervised(Supervised::new("fit", Path::of(["h"])))
        .unwrap();
    let c = d.compile().unwrap();
    let names: Vec<&str> = c
        .loss_program()
        .inputs()
        .iter()
        .map(|i| i.name.as_str())
        .collect();
    assert_eq!(names, vec!["data:E", "data:D", "weight:fit", "h.W", "h.b"]);
    let batch = batch_of(&[("E", t64(&[B, 1], &[1.0, 2.0, 3.0]))], &["fit"]);
    assert_eq!(
        c.evaluate(&d.params(), &batch).unwrap_err().to_string(),
        "batch: missing object \"D\""
    );
    let batch = batch_of(
        &[
            ("E", t64(&[B, 1], &[1.0, 2.0, 3.0])),
            ("D", t64(&[1, B], &[1.0, 2.0, 3.0])),
        ],
        &["fit"],
    );
    assert_eq!(
        c.evaluate(&d.params(), &batch).unwrap_err().to_string(),
        "batch: object \"D\" has type f64[1, 3], expected f64[3, 1]"
    );
    assert_eq!(
        c.evaluate(
            &Params::new(),
            &batch_of(
                &[
                    ("E", t64(&[B, 1], &[0.0; 3])),
                    ("D", t64(&[B, 1], &[0.0; 3]))
                ],
                &["fit"]
            )
        )
        .unwrap_err()
        .to_string(),
        "parameters: missing `h.W` (f64[1, 1])"
    );
}

/// A module written for one example is named as unbatched, with the type to declare, rather
/// than having its first axis read as a batch size.
#[test]
fn an_unbatched_module_is_named_as_such() {
    let ty = TensorType::new(DType::F64, [2]);
    let unbatched = || {
        let mut b = Builder::new();
        let x = b.input("x", ty.clone(), InputKind::Data).unwrap();
        let y = b.tanh(x).unwrap();
        b.finish(&[y]).unwrap()
    };
    let mut d = Diagram::new();
    d.object("E", ty.clone()).unwrap();
    d.object("S", ty.clone()).unwrap();
    let a = Arrow::new("f", "E", "S", unbatched(), Default::default()).unwrap();
    assert_eq!(
        d.arrow(a).unwrap_err().to_string(),
        "arrow \"f\": its data input f64[2] is one example of object \"E\", without a batch \
         dimension; a diagram's arrows take batches, so declare it f64[B, 2] with B the batch size"
    );
    // Once the diagram has a batch size, the message gives the exact type.
    let mut b = Builder::new();
    let x = b
        .input("x", TensorType::new(DType::F64, [3, 2]), InputKind::Data)
        .unwrap();
    let y = b.tanh(x).unwrap();
    let batched = b.finish(&[y]).unwrap();
    d.arrow(Arrow::new("g", "E", "S", batched, Default::default()).unwrap())
        .unwrap();
    let a = Arrow::new("h", "S", "E", unbatched(), Default::default()).unwrap();
    assert_eq!(
        d.arrow(a).unwrap_err().to_string(),
        "arrow \"h\": its data input f64[2] is one example of object \"S\", without a batch \
         dimension; a diagram's arrows take batches, so declare it f64[3, 2]"
    );
}
