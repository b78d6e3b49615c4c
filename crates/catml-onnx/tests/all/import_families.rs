//! LayerNormalization's statistics, the scatters, DFT, Col2Im, CenterCropPad, Compress and
//! RotaryEmbedding import with ONNX semantics (values worked out by hand).

use crate::common::*;
use crate::import_recurrent::{assert_close, ints_init, run_node, str_attr, t};
use catml_core::tensor::DType;
use catml_onnx::proto::{AttributeProto, NodeProto};

fn with(mut n: NodeProto, attrs: Vec<AttributeProto>) -> NodeProto {
    n.attribute = attrs;
    n
}

#[test]
fn layer_norm_gives_mean_and_inverse_deviation_in_the_stash_type() {
    let x = t(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 6.0, 8.0]);
    let inputs = [
        ("X", x),
        ("S", t(&[3], &[1.0, 2.0, 0.5])),
        ("Bi", t(&[3], &[0.0, 1.0, -1.0])),
    ];
    let (m, v) = ([2.0f64, 6.0], [2.0f64 / 3.0, 8.0 / 3.0]);
    let inv: Vec<f64> = v.iter().map(|v| 1.0 / (v + 1e-5).sqrt()).collect();
    let xs = [[1.0, 2.0, 3.0], [4.0, 6.0, 8.0]];
    let mut y = Vec::new();
    for r in 0..2 {
        for (k, (s, b)) in [(1.0, 0.0), (2.0, 1.0), (0.5, -1.0)].iter().enumerate() {
            y.push((xs[r][k] - m[r]) * inv[r] * s + b);
        }
    }
    for (stash, dtype) in [(1, DType::F32), (11, DType::F64)] {
        let n = with(
            node("LayerNormalization", &["X", "S", "Bi"], &["Y", "M", "I"]),
            vec![int_attr("stash_type", stash)],
        );
        let got = run_node(n, &inputs, vec![], 17).unwrap();
        assert_close(&got[0], &[2, 3], &y, "Y");
        assert_close(&got[1], &[2, 1], &m, "Mean");
        assert_close(&got[2], &[2, 1], &inv, "InvStdDev");
        assert_eq!(got[1].dtype(), dtype);
        assert_eq!(got[2].dtype(), dtype);
    }
}

#[test]
fn scatter_elements_reductions_combine_repeated_targets() {
    let data = t(&[1, 5], &[1.0, 2.0, 3.0, 4.0, 5.0]);
    let upd = t(&[1, 2], &[1.1, 2.1]);
    for (red, at1) in [
        ("none", 2.1),
        ("add", 2.0 + 1.1 + 2.1),
        ("mul", 2.0 * 1.1 * 2.1),
        ("max", 2.1),
        ("min", 1.1),
    ] {
        let n = with(
            node("ScatterElements", &["D", "idx", "U"], &["Y"]),
            vec![int_attr("axis", 1), str_attr("reduction", red)],
        );
        let inits = vec![ints_init("idx", 7, &[1, 2], &[1, 1])];
        let got = run_node(n, &[("D", data.clone()), ("U", upd.clone())], inits, 18).unwrap();
        assert_close(&got[0], &[1, 5], &[1.0, at1, 3.0, 4.0, 5.0], red);
    }
    // Negative indices count from the end of the axis.
    let n = with(
        node("ScatterElements", &["D", "idx", "U"], &["Y"]),
        vec![int_attr("axis", 1)],
    );
    let inits = vec![ints_init("idx", 7, &[1, 2], &[-1, 0])];
    let got = run_node(n, &[("D", data), ("U", upd)], inits, 18).unwrap();
    assert_close(&got[0], &[1, 5], &[2.1, 2.0, 3.0, 4.0, 1.1], "negative");
}

#[test]
fn scatter_nd_writes_elements_and_slices() {
    let data = t(&[2, 2], &[1.0, 2.0, 3.0, 4.0]);
    let n = node("ScatterND", &["D", "idx", "U"], &["Y"]);
    let inits = vec![ints_init("idx", 7, &[2, 2], &[0, 1, 1, 0])];
    let got = run_node(
        n,
        &[("D", data.clone()), ("U", t(&[2], &[10.0, 20.0]))],
        inits,
        18,
    )
    .unwrap();
    assert_close(&got[0], &[2, 2], &[1.0, 10.0, 20.0, 4.0], "elements");
    let n = with(
        node("ScatterND", &["D", "idx", "U"], &["Y"]),
        vec![str_attr("reduction", "mul")],
    );
    let inits = vec![ints_init("idx", 7, &[1, 1], &[1])];
    let got = run_node(n, &[("D", data), ("U", t(&[1, 2], &[2.0, 3.0]))], inits, 18).unwrap();
    assert_close(&got[0], &[2, 2], &[1.0, 2.0, 6.0, 12.0], "slice mul");
}

#[test]
fn dft_forward_inverse_one_sided_and_truncated() {
    let x = t(&[1, 4, 1], &[1.0, 2.0, 3.0, 4.0]);
    let dft = |attrs: Vec<AttributeProto>, x, inputs: &[&str]| {
        let n = with(node("DFT", inputs, &["Y"]), attrs);
        run_node(n, &[("X", x)], vec![], 17).unwrap().remove(0)
    };
    // X_k = Σ x_n e^{-2πikn/4}: 10, -2+2i, -2, -2-2i.
    let spectrum = [10.0, 0.0, -2.0, 2.0, -2.0, 0.0, -2.0, -2.0];
    let got = dft(vec![], x.clone(), &["X"]);
    assert_close(&got, &[1, 4, 2], &spectrum, "forward");
    let got = dft(vec![int_attr("onesided", 1)], x.clone(), &["X"]);
    assert_close(&got, &[1, 3, 2], &spectrum[..6], "onesided");
    let s: Vec<f32> = spectrum.iter().map(|&v| v as f32).collect();
    let got = dft(vec![int_attr("inverse", 1)], t(&[1, 4, 2], &s), &["X"]);
    assert_close(
        &got,
        &[1, 4, 2],
        &[1.0, 0.0, 2.0, 0.0, 3.0, 0.0, 4.0, 0.0],
        "inverse",
    );
    let got = dft(
        vec![int_attr("inverse", 1), int_attr("onesided", 1)],
        t(&[1, 3, 2], &s[..6]),
        &["X"],
    );
    assert_close(&got, &[1, 4, 1], &[1.0, 2.0, 3.0, 4.0], "one-sided inverse");
    // dft_length 2 keeps x_0, x_1: 1 + 2 and 1 - 2.
    let n = node("DFT", &["X", "len"], &["Y"]);
    let got = run_node(n, &[("X", x)], vec![ints_init("len", 7, &[], &[2])], 17).unwrap();
    assert_close(&got[0], &[1, 2, 2], &[3.0, 0.0, -1.0, 0.0], "dft_length");
}

#[test]
fn col2im_sums_overlapping_blocks() {
    // Image 1×3, blocks 1×2 at two places: pixel p gets column entries (b, l) with l + b = p.
    let n = node("Col2Im", &["X", "img", "blk"], &["Y"]);
    let inits = vec![
        ints_init("img", 7, &[2], &[1, 3]),
        ints_init("blk", 7, &[2], &[1, 2]),
    ];
    let got = run_node(
        n,
        &[("X", t(&[1, 2, 2], &[1.0, 2.0, 10.0, 20.0]))],
        inits,
        18,
    )
    .unwrap();
    assert_close(&got[0], &[1, 1, 1, 3], &[1.0, 12.0, 20.0], "col2im");
}

#[test]
fn center_crop_pad_centres_the_window_and_compress_selects() {
    let n = node("CenterCropPad", &["X", "shape"], &["Y"]);
    let got = run_node(
        n.clone(),
        &[("X", t(&[3], &[1.0, 2.0, 3.0]))],
        vec![ints_init("shape", 7, &[1], &[6])],
        18,
    )
    .unwrap();
    assert_close(&got[0], &[6], &[0.0, 1.0, 2.0, 3.0, 0.0, 0.0], "pad");
    let got = run_node(
        n,
        &[("X", t(&[5], &[1.0, 2.0, 3.0, 4.0, 5.0]))],
        vec![ints_init("shape", 7, &[1], &[2])],
        18,
    )
    .unwrap();
    assert_close(&got[0], &[2], &[2.0, 3.0], "crop");
    let n = with(
        node("Compress", &["X", "cond"], &["Y"]),
        vec![int_attr("axis", 0)],
    );
    let got = run_node(
        n,
        &[("X", t(&[3, 2], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]))],
        vec![ints_init("cond", 9, &[3], &[0, 1, 1])],
        17,
    )
    .unwrap();
    assert_close(&got[0], &[2, 2], &[3.0, 4.0, 5.0, 6.0], "compress");
}

#[test]
fn rotary_embedding_rotates_halves_or_interleaved_pairs() {
    let inputs = [
        ("X", t(&[1, 1, 1, 4], &[1.0, 2.0, 3.0, 4.0])),
        ("C", t(&[1, 1, 2], &[0.6, 0.0])),
        ("S", t(&[1, 1, 2], &[0.8, 1.0])),
    ];
    let n = node("RotaryEmbedding", &["X", "C", "S"], &["Y"]);
    let got = run_node(n, &inputs, vec![], 23).unwrap();
    // Pairs (1, 3) and (2, 4): (c x1 - s x2, s x1 + c x2).
    let want = [0.6 - 0.8 * 3.0, -4.0, 0.8 + 0.6 * 3.0, 2.0];
    assert_close(&got[0], &[1, 1, 1, 4], &want, "halves");
    let n = with(
        node("RotaryEmbedding", &["X", "C", "S"], &["Y"]),
        vec![int_attr("interleaved", 1)],
    );
    let got = run_node(n, &inputs, vec![], 23).unwrap();
    // Pairs (1, 2) and (3, 4).
    let want = [0.6 - 0.8 * 2.0, 0.8 + 0.6 * 2.0, -4.0, 3.0];
    assert_close(&got[0], &[1, 1, 1, 4], &want, "interleaved");
}

#[test]
fn windows_are_known_values() {
    for (op, periodic, size, want) in [
        ("HannWindow", 1, 4, vec![0.0, 0.5, 1.0, 0.5]),
        ("HannWindow", 0, 3, vec![0.0, 1.0, 0.0]),
        ("HammingWindow", 1, 2, vec![4.0 / 46.0, 1.0]),
        ("BlackmanWindow", 1, 2, vec![0.0, 0.42 + 0.5 + 0.08]),
    ] {
        let n = with(
            node(op, &["size"], &["Y"]),
            vec![int_attr("periodic", periodic)],
        );
        let got = run_node(n, &[], vec![ints_init("size", 7, &[], &[size])], 17).unwrap();
        assert_close(&got[0], &[size as usize], &want, op);
    }
}

#[test]
fn affine_grid_maps_the_normalised_grid() {
    // x' = 2x + 1, y' = y over the corner-aligned 2×2 grid (x along width first).
    let n = with(
        node("AffineGrid", &["T", "size"], &["Y"]),
        vec![int_attr("align_corners", 1)],
    );
    let got = run_node(
        n,
        &[("T", t(&[1, 2, 3], &[2.0, 0.0, 1.0, 0.0, 1.0, 0.0]))],
        vec![ints_init("size", 7, &[4], &[1, 1, 2, 2])],
        20,
    )
    .unwrap();
    let want = [-1.0, -1.0, 3.0, -1.0, -1.0, 1.0, 3.0, 1.0];
    assert_close(&got[0], &[1, 2, 2, 2], &want, "grid");
}

#[test]
fn gather_nd_reverse_sequence_swiglu_and_mvn() {
    let data: Vec<f32> = (0..8).map(|v| v as f32).collect();
    let n = with(
        node("GatherND", &["D", "idx"], &["Y"]),
        vec![int_attr("batch_dims", 1)],
    );
    let got = run_node(
        n,
        &[("D", t(&[2, 2, 2], &data))],
        vec![ints_init("idx", 7, &[2, 1], &[1, 0])],
        13,
    )
    .unwrap();
    assert_close(&got[0], &[2, 2], &[2.0, 3.0, 4.0, 5.0], "gather_nd");
    let n = with(
        node("ReverseSequence", &["X", "lens"], &["Y"]),
        vec![int_attr("time_axis", 0), int_attr("batch_axis", 1)],
    );
    let got = run_node(
        n,
        &[("X", t(&[4, 2], &data))],
        vec![ints_init("lens", 7, &[2], &[4, 2])],
        10,
    )
    .unwrap();
    let want = [6.0, 3.0, 4.0, 1.0, 2.0, 5.0, 0.0, 7.0];
    assert_close(&got[0], &[4, 2], &want, "reverse_sequence");
    let n = with(
        node("SwiGLU", &["A", "B"], &["Y"]),
        vec![AttributeProto {
            name: "alpha".into(),
            r#type: 1,
            f: 0.5,
            ..Default::default()
        }],
    );
    let got = run_node(
        n,
        &[("A", t(&[2], &[1.0, -2.0])), ("B", t(&[2], &[3.0, 0.5]))],
        vec![],
        17,
    )
    .unwrap();
    let sig = |x: f64| 1.0 / (1.0 + (-x).exp());
    let want = [sig(0.5) * 3.0, -2.0 * sig(-1.0) * 0.5];
    assert_close(&got[0], &[2], &want, "swiglu");
    let n = node("MeanVarianceNormalization", &["X"], &["Y"]);
    let got = run_node(
        n,
        &[("X", t(&[1, 2, 1, 2], &[1.0, 3.0, 2.0, 6.0]))],
        vec![],
        13,
    )
    .unwrap();
    assert_close(&got[0], &[1, 2, 1, 2], &[-1.0, 1.0, -1.0, 1.0], "mvn");
}

#[test]
fn lrn_sums_squares_over_the_channel_window() {
    // size 2: channel c's window is c - 0 ..= c + 1.
    let n = with(
        node("LRN", &["X"], &["Y"]),
        vec![
            int_attr("size", 2),
            AttributeProto {
                name: "alpha".into(),
                r#type: 1,
                f: 0.5,
                ..Default::default()
            },
            AttributeProto {
                name: "beta".into(),
                r#type: 1,
                f: 1.0,
                ..Default::default()
            },
        ],
    );
    let got = run_node(n, &[("X", t(&[1, 3, 1, 1], &[1.0, 2.0, 3.0]))], vec![], 13).unwrap();
    // y_c = x_c / (1 + 0.5 / 2 · Σ x²)
    let want = [
        1.0 / (1.0 + 0.25 * 5.0),
        2.0 / (1.0 + 0.25 * 13.0),
        3.0 / (1.0 + 0.25 * 9.0),
    ];
    assert_close(&got[0], &[1, 3, 1, 1], &want, "lrn");
}

#[test]
fn topk_takes_values_and_indices_and_differentiates_through_the_values() {
    use catml_core::ad;
    use catml_core::interp::eval;
    use catml_core::tensor::Tensor;
    let x = t(&[2, 3], &[3.0, 1.0, 2.0, 5.0, 5.0, 4.0]);
    let inits = || vec![ints_init("k", 7, &[1], &[2])];
    let n = node("TopK", &["X", "k"], &["V", "I"]);
    let mut m = model(
        vec![n],
        vec![value_info("X", 1, &[2, 3])],
        vec![value_info("V", 1, &[]), value_info("I", 7, &[])],
        inits(),
    );
    m.opset_import[0].version = 11;
    let im = catml_onnx::import(&m, &catml_onnx::Shapes::new(), None).unwrap();
    let got = eval(&im.program, std::slice::from_ref(&x)).unwrap();
    assert_close(&got[0], &[2, 2], &[3.0, 2.0, 5.0, 5.0], "values");
    // Ties go to the lower index.
    assert_eq!(got[1].as_i64().unwrap().data(), &[0, 2, 0, 1]);
    // Smallest along axis 0.
    let n = with(
        node("TopK", &["X", "k"], &["V"]),
        vec![int_attr("axis", 0), int_attr("largest", 0)],
    );
    let got = run_node(n, &[("X", x.clone())], inits(), 11).unwrap();
    assert_close(
        &got[0],
        &[2, 3],
        &[3.0, 1.0, 2.0, 5.0, 5.0, 4.0],
        "smallest",
    );
    // d(Σ u ⊙ values)/dx puts u at the chosen positions.
    let n = node("TopK", &["X", "k"], &["V"]);
    let mut m = model(
        vec![n],
        vec![value_info("X", 1, &[2, 3])],
        vec![value_info("V", 1, &[])],
        inits(),
    );
    m.opset_import[0].version = 11;
    let im = catml_onnx::import(&m, &catml_onnx::Shapes::new(), None).unwrap();
    let v = ad::vjp(&im.program).unwrap();
    let u = Tensor::f32(vec![2, 2], vec![10.0, 100.0, 1.0, 2.0]).unwrap();
    let out = eval(&v.program, &[x, u]).unwrap();
    let g = v.layout.gradient(&out, 0).unwrap();
    assert_eq!(g.to_f64_vec(), vec![10.0, 0.0, 100.0, 1.0, 2.0, 0.0]);
}
