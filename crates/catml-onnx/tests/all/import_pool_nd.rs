//! Pooling over three spatial axes and with dilations (`ops/pool_nd.rs`): values and the
//! max-pool derivative worked out by hand, and a window wholly in the padding refused.

use crate::common::*;
use crate::import_recurrent::{assert_close, run_node, t};
use catml_onnx::proto::{attribute_proto::AttributeType, AttributeProto, NodeProto};

fn ints(name: &str, v: &[i64]) -> AttributeProto {
    AttributeProto {
        name: name.to_string(),
        r#type: AttributeType::Ints as i32,
        ints: v.to_vec(),
        ..Default::default()
    }
}

fn with(mut n: NodeProto, attrs: Vec<AttributeProto>) -> NodeProto {
    n.attribute = attrs;
    n
}

#[test]
fn dilated_and_volumetric_pools_take_their_windows() {
    // Dilation 2: windows {0, 2}, {1, 3}, {2, 4}.
    let n = with(
        node("MaxPool", &["X"], &["Y"]),
        vec![ints("kernel_shape", &[2]), ints("dilations", &[2])],
    );
    let x = t(&[1, 1, 5], &[1.0, 5.0, 2.0, 4.0, 3.0]);
    let got = run_node(n, &[("X", x)], vec![], 18).unwrap();
    assert_close(&got[0], &[1, 1, 3], &[2.0, 5.0, 3.0], "max");
    // 2×2×2 windows of stride 2 over a padding of 1 hold one input element each.
    let x: Vec<f32> = (1..=8).map(|v| v as f32).collect();
    let x = t(&[1, 1, 2, 2, 2], &x);
    for (include, scale) in [(0, 1.0), (1, 0.125)] {
        let n = with(
            node("AveragePool", &["X"], &["Y"]),
            vec![
                ints("kernel_shape", &[2, 2, 2]),
                ints("strides", &[2, 2, 2]),
                ints("pads", &[1, 1, 1, 1, 1, 1]),
                int_attr("count_include_pad", include),
            ],
        );
        let got = run_node(n, &[("X", x.clone())], vec![], 18).unwrap();
        let want: Vec<f64> = (1..=8).map(|v| v as f64 * scale).collect();
        assert_close(&got[0], &[1, 1, 2, 2, 2], &want, "average");
    }
    let n = with(
        node("AveragePool", &["X"], &["Y"]),
        vec![ints("kernel_shape", &[2, 2, 2])],
    );
    let got = run_node(n, &[("X", x)], vec![], 18).unwrap();
    assert_close(&got[0], &[1, 1, 1, 1, 1], &[4.5], "average of all");
    // LpPool, p = 2, over the corners of a 3×3 image.
    let x: Vec<f32> = (1..=9).map(|v| v as f32).collect();
    let n = with(
        node("LpPool", &["X"], &["Y"]),
        vec![ints("kernel_shape", &[2, 2]), ints("dilations", &[2, 2])],
    );
    let got = run_node(n, &[("X", t(&[1, 1, 3, 3], &x))], vec![], 18).unwrap();
    assert_close(&got[0], &[1, 1, 1, 1], &[140f64.sqrt()], "lp");
}

#[test]
fn dilated_max_pool_sends_the_derivative_to_each_window_maximum() {
    use catml_core::ad;
    use catml_core::interp::eval;
    // Taps o + 2j - 2 over [3, 1, 2] padded by 2: windows {x0}, {x1}, {x0, x2}, {x1}, {x2}.
    let n = with(
        node("MaxPool", &["X"], &["Y"]),
        vec![
            ints("kernel_shape", &[2]),
            ints("dilations", &[2]),
            ints("pads", &[2, 2]),
        ],
    );
    let mut m = model(
        vec![n],
        vec![value_info("X", 1, &[1, 1, 3])],
        vec![value_info("Y", 1, &[])],
        vec![],
    );
    m.opset_import[0].version = 18;
    let im = catml_onnx::import(&m, &catml_onnx::Shapes::new(), None).unwrap();
    let x = t(&[1, 1, 3], &[3.0, 1.0, 2.0]);
    let y = eval(&im.program, std::slice::from_ref(&x)).unwrap();
    assert_close(&y[0], &[1, 1, 5], &[3.0, 1.0, 3.0, 1.0, 2.0], "values");
    let v = ad::vjp(&im.program).unwrap();
    let u = t(&[1, 1, 5], &[1.0, 10.0, 100.0, 1000.0, 10000.0]);
    let out = eval(&v.program, &[x, u]).unwrap();
    let g = v.layout.gradient(&out, 0).unwrap();
    assert_close(g, &[1, 1, 3], &[101.0, 1010.0, 10000.0], "dX");
}

#[test]
fn a_max_window_wholly_in_the_padding_is_refused() {
    let n = with(
        node("MaxPool", &["X"], &["Y"]),
        vec![
            ints("kernel_shape", &[1]),
            ints("dilations", &[2]),
            ints("pads", &[1, 0]),
        ],
    );
    let e = run_node(n, &[("X", t(&[1, 1, 3], &[1.0, 2.0, 3.0]))], vec![], 18).unwrap_err();
    assert!(e.is_unsupported(), "{e}");
    assert!(
        e.to_string().contains("MaxPool") && e.to_string().contains("padding"),
        "{e}"
    );
    // Dilations of the wrong length.
    let n = with(
        node("AveragePool", &["X"], &["Y"]),
        vec![ints("kernel_shape", &[2, 2, 2]), ints("dilations", &[2, 2])],
    );
    let x = t(&[1, 1, 2, 2, 2], &[0.0; 8]);
    let e = run_node(n, &[("X", x)], vec![], 18).unwrap_err();
    assert!(e.to_string().contains("`dilations`"), "{e}");
}
