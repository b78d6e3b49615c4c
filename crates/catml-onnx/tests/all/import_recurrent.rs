//! RNN, GRU and LSTM import: values against the ONNX reference implementation and against
//! scalar recurrences written out here, known sequence lengths, and the refusals.

use crate::common::*;
use catml_core::interp::eval;
use catml_core::tensor::Tensor;
use catml_onnx::proto::{attribute_proto::AttributeType, AttributeProto, NodeProto, TensorProto};
use catml_onnx::{import, OnnxError, Shapes};

/// Imports a one-node model over f32 graph inputs (and initializers) and evaluates it.
pub fn run_node(
    n: NodeProto,
    inputs: &[(&str, Tensor)],
    inits: Vec<TensorProto>,
    opset: i64,
) -> Result<Vec<Tensor>, OnnxError> {
    let infos = inputs
        .iter()
        .map(|(name, t)| {
            let dims: Vec<i64> = t.dims().iter().map(|&d| d as i64).collect();
            value_info(name, 1, &dims)
        })
        .collect();
    let outs = n
        .output
        .iter()
        .filter(|o| !o.is_empty())
        .map(|o| value_info(o, 1, &[]))
        .collect();
    let mut m = model(vec![n], infos, outs, inits);
    m.opset_import[0].version = opset;
    let im = import(&m, &Shapes::new(), None)?;
    let args: Vec<Tensor> = im
        .program
        .inputs()
        .iter()
        .map(|i| match im.params.get(&i.name) {
            Some(t) => t.clone(),
            None => inputs
                .iter()
                .find(|(n, _)| *n == i.name)
                .expect("an input")
                .1
                .clone(),
        })
        .collect();
    Ok(eval(&im.program, &args).expect("evaluates"))
}

pub fn t(dims: &[usize], v: &[f32]) -> Tensor {
    Tensor::f32(dims.to_vec(), v.to_vec()).unwrap()
}

pub fn str_attr(name: &str, v: &str) -> AttributeProto {
    AttributeProto {
        name: name.to_string(),
        r#type: AttributeType::String as i32,
        s: v.as_bytes().to_vec(),
        ..Default::default()
    }
}

fn strs_attr(name: &str, v: &[&str]) -> AttributeProto {
    AttributeProto {
        name: name.to_string(),
        r#type: AttributeType::Strings as i32,
        strings: v.iter().map(|s| s.as_bytes().to_vec()).collect(),
        ..Default::default()
    }
}

pub fn ints_init(name: &str, elem: i32, dims: &[i64], v: &[i64]) -> TensorProto {
    TensorProto {
        name: name.to_string(),
        dims: dims.to_vec(),
        data_type: elem,
        int64_data: if elem == 7 { v.to_vec() } else { vec![] },
        int32_data: if elem == 7 {
            vec![]
        } else {
            v.iter().map(|&x| x as i32).collect()
        },
        ..Default::default()
    }
}

pub fn assert_close(got: &Tensor, dims: &[usize], want: &[f64], what: &str) {
    assert_eq!(got.dims(), dims, "{what}: shape");
    let g = got.to_f64_vec();
    for (k, (a, b)) in g.iter().zip(want).enumerate() {
        assert!((a - b).abs() < 2e-6, "{what}[{k}]: {a} vs {b}");
    }
}

fn with(mut n: NodeProto, attrs: Vec<AttributeProto>) -> NodeProto {
    n.attribute = attrs;
    n
}

fn sig(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

#[test]
fn lstm_with_peepholes_matches_the_reference_over_two_steps() {
    let n = with(
        node(
            "LSTM",
            &["X", "W", "R", "B", "", "h0", "c0", "P"],
            &["Y", "Y_h", "Y_c"],
        ),
        vec![int_attr("hidden_size", 1)],
    );
    let inputs = [
        ("X", t(&[2, 1, 1], &[0.5, -1.0])),
        ("W", t(&[1, 4, 1], &[0.3, -0.2, 0.4, 0.6])),
        ("R", t(&[1, 4, 1], &[0.1, 0.2, -0.3, 0.5])),
        (
            "B",
            t(&[1, 8], &[0.05, -0.1, 0.2, 0.0, 0.01, 0.02, -0.03, 0.04]),
        ),
        ("h0", t(&[1, 1, 1], &[0.2])),
        ("c0", t(&[1, 1, 1], &[-0.4])),
        ("P", t(&[1, 3], &[0.7, -0.5, 0.25])),
    ];
    let got = run_node(n, &inputs, vec![], 22).unwrap();
    // The ONNX reference implementation's values.
    assert_close(&got[0], &[2, 1, 1, 1], &[-0.009006937, -0.1271542], "Y");
    assert_close(&got[1], &[1, 1, 1], &[-0.1271542], "Y_h");
    assert_close(&got[2], &[1, 1, 1], &[-0.2318337], "Y_c");
    // The same two steps written out (gates i, o, f, c; peepholes i, o, f).
    let (mut h, mut c) = (0.2f64, -0.4f64);
    let f32s = |v: &[f32]| v.iter().map(|&x| x as f64).collect::<Vec<_>>();
    let (w, r) = (f32s(&[0.3, -0.2, 0.4, 0.6]), f32s(&[0.1, 0.2, -0.3, 0.5]));
    let b = f32s(&[0.05, -0.1, 0.2, 0.0, 0.01, 0.02, -0.03, 0.04]);
    let p = f32s(&[0.7, -0.5, 0.25]);
    for x in [0.5, -1.0] {
        let pre = |k: usize| w[k] * x + r[k] * h + b[k] + b[4 + k];
        let i = sig(pre(0) + p[0] * c);
        let f = sig(pre(2) + p[2] * c);
        c = f * c + i * pre(3).tanh();
        let o = sig(pre(1) + p[1] * c);
        h = o * c.tanh();
    }
    assert!((got[1].to_f64_vec()[0] - h).abs() < 1e-6);
    assert!((got[2].to_f64_vec()[0] - c).abs() < 1e-6);
}

#[test]
fn lstm_input_forget_and_clip_follow_their_definitions() {
    let n = with(
        node("LSTM", &["X", "W", "R"], &["", "Y_h", "Y_c"]),
        vec![
            int_attr("hidden_size", 1),
            int_attr("input_forget", 1),
            float_attr("clip", 0.5),
            str_attr("direction", "reverse"),
        ],
    );
    let (w, r) = ([2.0, -0.2, 0.4, 1.5], [0.1, 0.2, -0.3, 0.5]);
    let xs = [0.8f32, -0.6];
    let inputs = [
        ("X", t(&[2, 1, 1], &xs)),
        ("W", t(&[1, 4, 1], &w.map(|v: f64| v as f32))),
        ("R", t(&[1, 4, 1], &r.map(|v: f64| v as f32))),
    ];
    let got = run_node(n, &inputs, vec![], 22).unwrap();
    // Reverse: step x[1] first; gate inputs clipped to [-0.5, 0.5]; forget = 1 - input.
    let clip = |v: f64| v.clamp(-0.5, 0.5);
    let (mut h, mut c) = (0.0f64, 0.0f64);
    for &x in xs.iter().rev() {
        let x = x as f64;
        let pre = |k: usize| w[k] * x + r[k] * h;
        let i = sig(clip(pre(0)));
        let g = clip(pre(3)).tanh();
        c = (1.0 - i) * c + i * g;
        let o = sig(clip(pre(1)));
        h = o * c.tanh();
    }
    assert_close(&got[0], &[1, 1, 1], &[h], "Y_h");
    assert_close(&got[1], &[1, 1, 1], &[c], "Y_c");
}

#[test]
fn gru_bidirectional_batch_first_in_both_reset_forms() {
    let r: Vec<f32> = (0..24).map(|k| -0.5 + 1.1 * k as f32 / 23.0).collect();
    let b: Vec<f32> = (0..24).map(|k| -0.2 + 0.5 * k as f32 / 23.0).collect();
    let inputs = [
        ("X", t(&[1, 2, 1], &[1.0, -0.5])),
        (
            "W",
            t(
                &[2, 6, 1],
                &[
                    0.2, -0.1, 0.3, 0.4, 0.5, -0.6, -0.3, 0.2, 0.1, -0.4, 0.6, 0.5,
                ],
            ),
        ),
        ("R", t(&[2, 6, 2], &r)),
        ("B", t(&[2, 12], &b)),
        ("h0", t(&[1, 2, 2], &[0.1, -0.2, 0.3, 0.05])),
    ];
    // The ONNX reference implementation's values, (B, T, D, H) and (B, D, H).
    for (lbr, y, yh) in [
        (
            1,
            [
                0.2408906,
                -0.421935,
                0.5018054,
                0.3528367,
                -0.09323512,
                -0.08394139,
                0.2249034,
                0.1358023,
            ],
            [-0.09323512, -0.08394139, 0.5018054, 0.3528367],
        ),
        (
            0,
            [
                0.2445988,
                -0.4154902,
                0.5443339,
                0.3991705,
                -0.0875234,
                -0.06887192,
                0.2687864,
                0.1702945,
            ],
            [-0.0875234, -0.06887192, 0.5443339, 0.3991705],
        ),
    ] {
        let n = with(
            node("GRU", &["X", "W", "R", "B", "", "h0"], &["Y", "Y_h"]),
            vec![
                int_attr("hidden_size", 2),
                str_attr("direction", "bidirectional"),
                int_attr("layout", 1),
                int_attr("linear_before_reset", lbr),
            ],
        );
        let got = run_node(n, &inputs, vec![], 22).unwrap();
        assert_close(&got[0], &[1, 2, 2, 2], &y, "Y");
        assert_close(&got[1], &[1, 2, 2], &yh, "Y_h");
    }
}

#[test]
fn rnn_known_sequence_lengths_hold_the_state_and_zero_the_output() {
    // Batch 2 with lengths 3 and 1; relu activation; both directions.
    let n = with(
        node("RNN", &["X", "W", "R", "", "lens"], &["Y", "Y_h"]),
        vec![
            int_attr("hidden_size", 1),
            str_attr("direction", "bidirectional"),
            strs_attr("activations", &["Relu", "Tanh"]),
        ],
    );
    let xs = [[1.0f64, 2.0], [0.5, -1.0], [-0.25, 3.0]]; // [t][b]
    let x: Vec<f32> = xs.iter().flatten().map(|&v| v as f32).collect();
    let inputs = [
        ("X", t(&[3, 2, 1], &x)),
        ("W", t(&[2, 1, 1], &[0.5, -0.7])),
        ("R", t(&[2, 1, 1], &[0.9, 0.4])),
    ];
    let inits = vec![ints_init("lens", 6, &[2], &[3, 1])];
    let got = run_node(n, &inputs, inits, 22).unwrap();
    let lens = [3, 1];
    let mut y = vec![0.0; 3 * 2 * 2]; // (T, D, B, 1)
    let mut yh = [0.0; 4]; // (D, B, 1)
    for b in 0..2 {
        let mut h = 0.0f64;
        for (t, x) in xs.iter().enumerate().take(lens[b]) {
            h = (0.5 * x[b] + 0.9 * h).max(0.0);
            y[t * 4 + b] = h;
        }
        yh[b] = h;
        let mut h = 0.0f64;
        for t in (0..lens[b]).rev() {
            h = (-0.7 * xs[t][b] + 0.4 * h).tanh();
            y[t * 4 + 2 + b] = h;
        }
        yh[2 + b] = h;
    }
    assert_close(&got[0], &[3, 2, 2, 1], &y, "Y");
    assert_close(&got[1], &[2, 2, 1], &yh, "Y_h");
}

#[test]
fn recurrent_refusals_name_the_node_and_what_is_unsupported() {
    let inputs = [
        ("X", t(&[2, 1, 1], &[1.0, 2.0])),
        ("W", t(&[1, 1, 1], &[0.5])),
        ("R", t(&[1, 1, 1], &[0.5])),
    ];
    let err = |attrs: Vec<AttributeProto>| {
        let n = with(node("RNN", &["X", "W", "R"], &["Y"]), attrs);
        run_node(n, &inputs, vec![], 22).unwrap_err()
    };
    let e = err(vec![strs_attr("activations", &["Gelu"])]);
    assert!(e.is_unsupported(), "{e}");
    assert!(
        e.to_string().contains("RNN_Y") && e.to_string().contains("activation function `gelu`"),
        "{e}"
    );
    let e = err(vec![str_attr("direction", "sideways")]);
    assert!(e.to_string().contains("direction \"sideways\""), "{e}");
    let e = err(vec![int_attr("hidden_size", 3)]);
    assert!(e.to_string().contains("hidden_size is 3"), "{e}");
    // Sequence lengths given at run time cannot shape the unrolled program.
    let n = node("GRU", &["X", "W", "R", "", "lens"], &["Y"]);
    let mut m = model(
        vec![n],
        vec![
            value_info("X", 1, &[2, 1, 1]),
            value_info("W", 1, &[1, 3, 1]),
            value_info("R", 1, &[1, 3, 1]),
            value_info("lens", 7, &[1]),
        ],
        vec![value_info("Y", 1, &[])],
        vec![],
    );
    m.opset_import[0].version = 22;
    let e = import(&m, &Shapes::new(), None).unwrap_err();
    assert!(e.is_unsupported(), "{e}");
    assert!(
        e.to_string()
            .contains("sequence_lens (input 4) must be known at import time"),
        "{e}"
    );
}
