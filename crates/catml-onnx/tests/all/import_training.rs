//! The training-domain optimisers (Adagrad, Adam, Momentum) and the ml-domain Binarizer and
//! ArrayFeatureExtractor, in models that import no default-domain opset: values from the
//! specification's formulas evaluated here in f64; bad arity, attributes and domains refused.

use crate::common::*;
use crate::import_recurrent::{ints_init, str_attr};
use catml_core::tensor::Tensor;
use catml_onnx::proto::{
    AttributeProto, ModelProto, NodeProto, OperatorSetIdProto, ValueInfoProto,
};
use catml_onnx::{import, Shapes};

const TRAINING: &str = "ai.onnx.preview.training";

fn in_domain(domain: &str, mut n: NodeProto, attrs: Vec<AttributeProto>) -> NodeProto {
    n.domain = domain.to_string();
    n.attribute = attrs;
    n
}

/// A model of one node whose only opset is `domain` version `v`.
fn only(domain: &str, v: i64, n: NodeProto, inputs: Vec<ValueInfoProto>) -> ModelProto {
    let outs = n.output.iter().map(|o| value_info(o, 1, &[])).collect();
    let mut m = model(vec![n], inputs, outs, vec![]);
    m.opset_import = vec![OperatorSetIdProto {
        domain: domain.to_string(),
        version: v,
    }];
    m
}

fn close(got: &Tensor, want: &[f64], what: &str) {
    for (k, (a, b)) in got.to_f64_vec().iter().zip(want).enumerate() {
        assert!(
            (a - b).abs() <= 1e-6 * (1.0 + b.abs()),
            "{what}[{k}]: {a} vs {b}"
        );
    }
}

/// R, T, then the named tensors of two elements each.
fn inputs(names: &[&str]) -> Vec<ValueInfoProto> {
    let mut v = vec![value_info("R", 1, &[]), value_info("T", 7, &[])];
    v.extend(names.iter().map(|n| value_info(n, 1, &[2])));
    v
}

#[test]
fn adagrad_follows_its_specification() {
    let (r, decay, eps, lam) = (0.1f64, 0.1f64, 1e-5f64, 0.001f64);
    let n = in_domain(
        TRAINING,
        node("Adagrad", &["R", "T", "X", "G", "H"], &["X2", "H2"]),
        vec![
            float_attr("decay_factor", decay as f32),
            float_attr("epsilon", eps as f32),
            float_attr("norm_coefficient", lam as f32),
        ],
    );
    let m = only(TRAINING, 1, n, inputs(&["X", "G", "H"]));
    let (x, g, h) = ([1.0f64, -2.0], [0.5f64, 0.25], [0.3f64, 0.0]);
    let t = 3i64;
    let got = outputs(
        &m,
        vec![
            f(&[], &[r as f32]),
            Tensor::i64(vec![], vec![t]).unwrap(),
            f(&[2], &[1.0, -2.0]),
            f(&[2], &[0.5, 0.25]),
            f(&[2], &[0.3, 0.0]),
        ],
    );
    // The attributes are f32: compute with their f32 values.
    let (decay, eps, lam) = (decay as f32 as f64, eps as f32 as f64, lam as f32 as f64);
    let rate = r as f32 as f64 / (1.0 + t as f64 * decay);
    let (mut xw, mut hw) = (vec![], vec![]);
    for k in 0..2 {
        let gr = lam * x[k] + g[k];
        let hn = h[k] + gr * gr;
        xw.push(x[k] - rate * gr / (hn.sqrt() + eps));
        hw.push(hn);
    }
    close(&got[0], &xw, "X_new");
    close(&got[1], &hw, "H_new");
}

#[test]
fn adam_with_two_tensors_and_the_first_step_uncorrected() {
    let (alpha, beta, eps, lam, post) = (0.9f32, 0.99f32, 0.01f32, 0.001f32, 0.05f32);
    let n = in_domain(
        TRAINING,
        node(
            "Adam",
            &["R", "T", "X1", "X2", "G1", "G2", "V1", "V2", "H1", "H2"],
            &["X1n", "X2n", "V1n", "V2n", "H1n", "H2n"],
        ),
        vec![
            float_attr("alpha", alpha),
            float_attr("beta", beta),
            float_attr("epsilon", eps),
            float_attr("norm_coefficient", lam),
            float_attr("norm_coefficient_post", post),
        ],
    );
    let m = only(
        TRAINING,
        1,
        n,
        inputs(&["X1", "X2", "G1", "G2", "V1", "V2", "H1", "H2"]),
    );
    let (a, b, e, l, p) = (
        alpha as f64,
        beta as f64,
        eps as f64,
        lam as f64,
        post as f64,
    );
    let xs = [[1.0, 2.0], [-1.0, 0.5]];
    let gs = [[0.1, -0.2], [0.3, 0.4]];
    let vs = [[0.01, 0.02], [0.0, -0.1]];
    let hs = [[0.5, 0.25], [0.125, 1.0]];
    for t in [0i64, 4] {
        let mut args = vec![f(&[], &[0.5]), Tensor::i64(vec![], vec![t]).unwrap()];
        for group in [&xs, &gs, &vs, &hs] {
            for row in group.iter() {
                args.push(f(&[2], &[row[0] as f32, row[1] as f32]));
            }
        }
        let got = outputs(&m, args);
        let rate = if t > 0 {
            0.5 * (1.0 - b.powi(t as i32)).sqrt() / (1.0 - a.powi(t as i32))
        } else {
            0.5
        };
        for j in 0..2 {
            let (mut xw, mut vw, mut hw) = (vec![], vec![], vec![]);
            for k in 0..2 {
                let gr = l * xs[j][k] + gs[j][k];
                let vn = a * vs[j][k] + (1.0 - a) * gr;
                let hn = b * hs[j][k] + (1.0 - b) * gr * gr;
                xw.push((1.0 - p) * (xs[j][k] - rate * vn / (hn.sqrt() + e)));
                vw.push(vn);
                hw.push(hn);
            }
            close(&got[j], &xw, "X_new");
            close(&got[2 + j], &vw, "V_new");
            close(&got[4 + j], &hw, "H_new");
        }
    }
}

#[test]
fn momentum_standard_and_nesterov_with_t_known_or_a_program_value() {
    let (alpha, beta, lam) = (0.9f32, 0.5f32, 0.01f32);
    let (a, b, l) = (alpha as f64, beta as f64, lam as f64);
    let (x, g, v) = ([1.0f64, -1.0], [0.2f64, 0.4], [0.1f64, 0.0]);
    for mode in ["standard", "nesterov"] {
        for t in [0i64, 2] {
            let n = in_domain(
                TRAINING,
                node("Momentum", &["R", "T", "X", "G", "V"], &["Xn", "Vn"]),
                vec![
                    float_attr("alpha", alpha),
                    float_attr("beta", beta),
                    float_attr("norm_coefficient", lam),
                    str_attr("mode", mode),
                ],
            );
            let bt = if t > 0 { b } else { 1.0 };
            let (mut xw, mut vw) = (vec![], vec![]);
            for k in 0..2 {
                let gr = l * x[k] + g[k];
                let vn = a * v[k] + bt * gr;
                let dir = if mode == "nesterov" { gr + a * vn } else { vn };
                xw.push(x[k] - 0.25 * dir);
                vw.push(vn);
            }
            // T as a graph input (a program value).
            let m = only(TRAINING, 1, n.clone(), inputs(&["X", "G", "V"]));
            let got = outputs(
                &m,
                vec![
                    f(&[], &[0.25]),
                    Tensor::i64(vec![], vec![t]).unwrap(),
                    f(&[2], &[1.0, -1.0]),
                    f(&[2], &[0.2, 0.4]),
                    f(&[2], &[0.1, 0.0]),
                ],
            );
            close(&got[0], &xw, "X_new");
            close(&got[1], &vw, "V_new");
            // T as an initializer (known at import).
            let mut m = m;
            let g = m.graph.as_mut().unwrap();
            g.input.remove(1);
            g.initializer.push(ints_init("T", 7, &[], &[t]));
            let got = outputs(
                &m,
                vec![
                    f(&[], &[0.25]),
                    f(&[2], &[1.0, -1.0]),
                    f(&[2], &[0.2, 0.4]),
                    f(&[2], &[0.1, 0.0]),
                ],
            );
            close(&got[0], &xw, "X_new (T known)");
            close(&got[1], &vw, "V_new (T known)");
        }
    }
}

#[test]
fn training_nodes_refuse_bad_arity_attributes_and_domains() {
    let err = |m: &ModelProto| import(m, &Shapes::new(), None).unwrap_err().to_string();
    // Momentum has no default for its attributes.
    let n = in_domain(
        TRAINING,
        node("Momentum", &["R", "T", "X", "G", "V"], &["Xn", "Vn"]),
        vec![float_attr("alpha", 0.9), float_attr("beta", 0.1)],
    );
    let e = err(&only(TRAINING, 1, n, inputs(&["X", "G", "V"])));
    assert!(
        e.contains("Momentum") && e.contains("norm_coefficient"),
        "{e}"
    );
    // Inputs not 2 + 3n.
    let n = in_domain(
        TRAINING,
        node("Adagrad", &["R", "T", "X", "G"], &["Xn", "Hn"]),
        vec![],
    );
    let e = err(&only(TRAINING, 1, n, inputs(&["X", "G"])));
    assert!(e.contains("Adagrad") && e.contains("4 inputs"), "{e}");
    // A version of the domain the importer does not know.
    let n = in_domain(
        TRAINING,
        node("Adagrad", &["R", "T", "X", "G", "H"], &["Xn", "Hn"]),
        vec![],
    );
    let e = err(&only(TRAINING, 2, n, inputs(&["X", "G", "H"])));
    assert!(e.contains("version 2"), "{e}");
    // A default-domain node in a model that imports only the training domain.
    let m = only(
        TRAINING,
        1,
        node("Relu", &["X"], &["Y"]),
        vec![value_info("X", 1, &[2])],
    );
    let e = err(&m);
    assert!(e.contains("no opset of the default domain"), "{e}");
    // A training node in a model that does not import the training domain.
    let n = in_domain(
        TRAINING,
        node("Adagrad", &["R", "T", "X", "G", "H"], &["Xn", "Hn"]),
        vec![],
    );
    let mut m = only(TRAINING, 1, n, inputs(&["X", "G", "H"]));
    m.opset_import[0].domain = "ai.onnx.ml".to_string();
    let e = err(&m);
    assert!(e.contains("imports no opset of domain"), "{e}");
}

#[test]
fn binarizer_and_array_feature_extractor() {
    const ML: &str = "ai.onnx.ml";
    let n = in_domain(
        ML,
        node("Binarizer", &["X"], &["Y"]),
        vec![float_attr("threshold", 1.0)],
    );
    let m = only(ML, 1, n, vec![value_info("X", 1, &[4])]);
    let got = outputs(&m, vec![f(&[4], &[0.5, 1.0, 1.5, -3.0])]);
    assert_eq!(got[0].to_f64_vec(), [0.0, 0.0, 1.0, 0.0]);
    // Indices along the last axis; a 1-D input gives one row.
    let n = in_domain(
        ML,
        node("ArrayFeatureExtractor", &["X", "i"], &["Y"]),
        vec![],
    );
    let mut m = only(ML, 1, n, vec![value_info("X", 1, &[2, 3])]);
    m.graph
        .as_mut()
        .unwrap()
        .initializer
        .push(ints_init("i", 7, &[2], &[2, -3]));
    let got = outputs(&m, vec![f(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0])]);
    assert_eq!(got[0].dims(), &[2, 2]);
    assert_eq!(got[0].to_f64_vec(), [3.0, 1.0, 6.0, 4.0]);
    let n = in_domain(
        ML,
        node("ArrayFeatureExtractor", &["X", "i"], &["Y"]),
        vec![],
    );
    let mut m = only(ML, 1, n, vec![value_info("X", 1, &[3])]);
    m.graph
        .as_mut()
        .unwrap()
        .initializer
        .push(ints_init("i", 7, &[1], &[1]));
    let got = outputs(&m, vec![f(&[3], &[7.0, 8.0, 9.0])]);
    assert_eq!(got[0].dims(), &[1, 1]);
    assert_eq!(got[0].to_f64_vec(), [8.0]);
    // An index past the axis.
    let n = in_domain(
        ML,
        node("ArrayFeatureExtractor", &["X", "i"], &["Y"]),
        vec![],
    );
    let mut m = only(ML, 1, n, vec![value_info("X", 1, &[3])]);
    m.graph
        .as_mut()
        .unwrap()
        .initializer
        .push(ints_init("i", 7, &[1], &[3]));
    let e = import(&m, &Shapes::new(), None).unwrap_err().to_string();
    assert!(
        e.contains("ArrayFeatureExtractor") && e.contains("out of range"),
        "{e}"
    );
}
