//! GridSample against values of the ONNX reference implementation (onnx 1.23.2,
//! `onnx/reference/ops/op_grid_sample.py`, run on the same inputs in float64), its derivative
//! with respect to the grid worked out by hand, and hostile attributes and shapes.

use crate::common::*;
use crate::import_recurrent::{run_node, str_attr, t};
use catml_core::tensor::Tensor;
use catml_onnx::proto::{AttributeProto, NodeProto};

fn with(mut n: NodeProto, attrs: Vec<AttributeProto>) -> NodeProto {
    n.attribute = attrs;
    n
}

fn close(got: &Tensor, dims: &[usize], want: &[f64], what: &str) {
    assert_eq!(got.dims(), dims, "{what}: shape");
    for (k, (a, b)) in got.to_f64_vec().iter().zip(want).enumerate() {
        assert!((a - b).abs() < 1e-5, "{what}[{k}]: {a} vs {b}");
    }
}

fn image() -> Tensor {
    t(
        &[1, 1, 3, 3],
        &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0],
    )
}

/// Three points: inside, inside, and outside on both axes (x first, as the grid lists them).
fn grid() -> Tensor {
    t(&[1, 1, 3, 2], &[-1.2, 0.3, 0.45, -0.8, 1.3, 1.7])
}

fn sample(mode: &str, pad: &str, align: i64, opset: i64) -> Vec<f64> {
    let n = with(
        node("GridSample", &["X", "G"], &["Y"]),
        vec![
            str_attr("mode", mode),
            str_attr("padding_mode", pad),
            int_attr("align_corners", align),
        ],
    );
    let got = run_node(n, &[("X", image()), ("G", grid())], vec![], opset).unwrap();
    assert_eq!(got[0].dims(), &[1, 1, 1, 3]);
    got[0].to_f64_vec()
}

#[test]
fn grid_sample_matches_the_reference_in_every_mode_and_padding() {
    #[rustfmt::skip]
    let want: [(&str, &str, i64, [f64; 3]); 18] = [
        ("linear", "zeros", 0, [1.0699999648332579, 2.1399999937415117, 0.0]),
        ("linear", "zeros", 1, [3.919999943971632, 3.050000093132258, 1.8899998283386026]),
        ("linear", "border", 0, [5.3500001430511475, 2.674999952316284, 9.0]),
        ("linear", "border", 1, [4.8999998569488525, 3.050000093132258, 9.0]),
        ("linear", "reflection", 0, [5.3500001430511475, 2.674999952316284, 7.3500001430511475]),
        ("linear", "reflection", 1, [5.0999999329447725, 3.050000093132258, 6.599999904632568]),
        ("cubic", "zeros", 0, [1.0691464842353078, 2.218631056747242, -0.02970265326689514]),
        ("cubic", "zeros", 1, [4.4302282026560285, 3.5590572898874377, 1.9433924443402688]),
        ("cubic", "border", 0, [5.637718141078949, 2.4596692260510196, 9.0]),
        ("cubic", "border", 1, [5.167749583721161, 3.0019087087770835, 9.0]),
        ("cubic", "reflection", 0, [5.517720517296105, 2.3876701143991426, 7.673338925075193]),
        ("cubic", "reflection", 1, [5.365502239763739, 2.7974402671231253, 7.188001249074929]),
        ("nearest", "zeros", 0, [0.0, 3.0, 0.0]),
        ("nearest", "zeros", 1, [4.0, 2.0, 0.0]),
        ("nearest", "border", 0, [4.0, 3.0, 9.0]),
        ("nearest", "border", 1, [4.0, 2.0, 9.0]),
        ("nearest", "reflection", 0, [4.0, 3.0, 6.0]),
        ("nearest", "reflection", 1, [4.0, 2.0, 6.0]),
    ];
    for (mode, pad, align, w) in want {
        let got = sample(mode, pad, align, 20);
        for (k, (a, b)) in got.iter().zip(w).enumerate() {
            assert!(
                (a - b).abs() < 1e-5,
                "{mode} {pad} {align} [{k}]: {a} vs {b}"
            );
        }
    }
    // Opset 16 names linear and cubic bilinear and bicubic.
    let old = sample("bicubic", "zeros", 1, 16);
    let new = sample("cubic", "zeros", 1, 20);
    assert_eq!(old, new);
}

#[test]
fn grid_sample_volumetric_matches_the_reference() {
    let x = t(&[1, 1, 2, 2, 2], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]);
    let g = t(&[1, 1, 1, 2, 3], &[0.2, -0.3, 0.6, -0.9, 0.5, -0.1]);
    for (align, want) in [
        (0, [5.489999925643204, 2.760000177621844]),
        (1, [5.499999916553495, 4.349999905005098]),
    ] {
        let n = with(
            node("GridSample", &["X", "G"], &["Y"]),
            vec![int_attr("align_corners", align)],
        );
        let got = run_node(n, &[("X", x.clone()), ("G", g.clone())], vec![], 20).unwrap();
        close(&got[0], &[1, 1, 1, 1, 2], &want, "volumetric");
    }
}

#[test]
fn grid_sample_differentiates_through_the_input_and_the_grid() {
    use catml_core::ad;
    use catml_core::interp::eval;
    // On [[1, 2], [3, 4]] with align_corners, bilinear sampling is 1 + x + 2y at pixel
    // position (x, y) = (g + 1)/2: dY/dg_x = 1/2, dY/dg_y = 1; dY/dX are the four weights.
    let n = with(
        node("GridSample", &["X", "G"], &["Y"]),
        vec![int_attr("align_corners", 1)],
    );
    let m = model(
        vec![n],
        vec![
            value_info("X", 1, &[1, 1, 2, 2]),
            value_info("G", 1, &[1, 1, 1, 2]),
        ],
        vec![value_info("Y", 1, &[])],
        vec![],
    );
    let mut m = m;
    m.opset_import[0].version = 20;
    let im = catml_onnx::import(&m, &catml_onnx::Shapes::new(), None).unwrap();
    let x = t(&[1, 1, 2, 2], &[1.0, 2.0, 3.0, 4.0]);
    let g = t(&[1, 1, 1, 2], &[-0.5, 0.2]);
    let y = eval(&im.program, &[x.clone(), g.clone()]).unwrap();
    // x = 0.25, y = 0.6: 1 + 0.25 + 1.2.
    close(&y[0], &[1, 1, 1, 1], &[2.45], "value");
    let v = ad::vjp(&im.program).unwrap();
    let u = t(&[1, 1, 1, 1], &[1.0]);
    let out = eval(&v.program, &[x, g, u]).unwrap();
    let dx = v.layout.gradient(&out, 0).unwrap();
    close(
        dx,
        &[1, 1, 2, 2],
        &[0.75 * 0.4, 0.25 * 0.4, 0.75 * 0.6, 0.25 * 0.6],
        "dX",
    );
    let dg = v.layout.gradient(&out, 1).unwrap();
    close(dg, &[1, 1, 1, 2], &[0.5, 1.0], "dgrid");
}

#[test]
fn grid_sample_refuses_bad_attributes_and_shapes_naming_the_node() {
    let run = |attrs: Vec<AttributeProto>, x: Tensor, g: Tensor, opset: i64| {
        let n = with(node("GridSample", &["X", "G"], &["Y"]), attrs);
        run_node(n, &[("X", x), ("G", g)], vec![], opset).unwrap_err()
    };
    let e = run(vec![str_attr("mode", "bilinear")], image(), grid(), 20);
    assert!(
        e.to_string().contains("GridSample") && e.to_string().contains("`mode`"),
        "{e}"
    );
    let e = run(vec![str_attr("mode", "linear")], image(), grid(), 16);
    assert!(e.to_string().contains("`mode`"), "{e}");
    let e = run(vec![str_attr("padding_mode", "wrap")], image(), grid(), 20);
    assert!(e.to_string().contains("`padding_mode`"), "{e}");
    // The grid's last axis must have one coordinate per spatial axis.
    let e = run(vec![], image(), t(&[1, 1, 2, 3], &[0.0; 6]), 20);
    assert!(e.to_string().contains("grid has shape"), "{e}");
    // A batch the input lacks.
    let e = run(vec![], image(), t(&[2, 1, 1, 2], &[0.0; 4]), 20);
    assert!(e.to_string().contains("grid has shape"), "{e}");
    // Opset 16 takes 4-D inputs only.
    let x3 = t(&[1, 1, 2, 2, 2], &[0.0; 8]);
    let e = run(vec![], x3, t(&[1, 1, 1, 1, 3], &[0.0; 3]), 16);
    assert!(e.to_string().contains("opset 16"), "{e}");
}
