//! Imported programs compute what the ONNX graph means, with initializers as parameters that
//! receive gradients under their ONNX names.

use crate::common::*;
use catml_core::ad;
use catml_core::interp::{self, EvalOptions};
use catml_core::ir::InputKind;
use catml_core::tensor::Tensor;
use catml_onnx::{import, Shapes};

fn shapes(name: &str, dims: &[usize]) -> Shapes {
    [(name.to_string(), dims.to_vec())].into_iter().collect()
}

#[test]
fn dense_relu_evaluates_and_binds_the_batch_dimension() {
    let m = import(&dense_relu(), &shapes("x", &[2, 2]), None).unwrap();
    let p = &m.program;
    assert_eq!(m.outputs, vec!["y".to_string()]);
    let kinds: Vec<(&str, InputKind)> = p
        .inputs()
        .iter()
        .map(|i| (i.name.as_str(), i.kind))
        .collect();
    assert_eq!(
        kinds,
        vec![
            ("x", InputKind::Data),
            ("fc.W", InputKind::Param),
            ("fc.b", InputKind::Param)
        ]
    );
    assert_eq!(p.tag_of(p.input_var(1)), Some("fc"));
    let x = Tensor::f32([2, 2], vec![1.0, 2.0, -1.0, 0.5]).unwrap();
    let args = vec![
        x,
        m.params.get("fc.W").unwrap().clone(),
        m.params.get("fc.b").unwrap().clone(),
    ];
    let y = interp::eval(p, &args).unwrap();
    // Row 0: [1 + 4, -1 + 0, 0.5 - 1] + b = [5.1, -0.8, -0.8] -> relu.
    // Row 1: [-1 + 1, 1 + 0, -0.5 - 0.25] + b = [0.1, 1.2, -1.05] -> relu.
    let want = [5.1f32, 0.0, 0.0, 0.1, 1.2, 0.0];
    let got = y[0].as_f32().unwrap().data();
    for (g, w) in got.iter().zip(want) {
        assert!((g - w).abs() < 1e-6, "{got:?}");
    }
    // Gradients reach both initializers under their ONNX names.
    let v = ad::vjp(p).unwrap();
    let mut vargs = args.clone();
    vargs.push(Tensor::full(&y[0].ty(), 1.0));
    let vals = interp::eval(&v.program, &vargs).unwrap();
    let gb = v.layout.gradient(&vals, 2).unwrap();
    // d(sum y)/db = number of rows where each unit is active: [2, 1, 0].
    assert_eq!(gb.to_f64_vec(), vec![2.0, 1.0, 0.0]);
}

#[test]
fn symbolic_dimensions_need_a_shape() {
    let e = import(&dense_relu(), &Shapes::new(), None).unwrap_err();
    assert_eq!(
        e.to_string(),
        "input `x`: dim 0 is symbolic or zero; give its shape (NAME=2x3...)"
    );
}

#[test]
fn shape_subgraphs_fold_at_import() {
    // y = Reshape(x, Concat(Shape(x)[0:1], [-1])): the shape arithmetic disappears.
    let mut slice = node("Slice", &["s", "zero", "one"], &["s0"]);
    slice.name = "slice".to_string();
    let mut cat = node("Concat", &["s0", "minus1"], &["target"]);
    cat.attribute.push(int_attr("axis", 0));
    let ints = |name: &str, v: &[i64]| catml_onnx::proto::TensorProto {
        name: name.to_string(),
        dims: vec![v.len() as i64],
        data_type: 7,
        int64_data: v.to_vec(),
        ..Default::default()
    };
    let m = model(
        vec![
            node("Shape", &["x"], &["s"]),
            slice,
            cat,
            node("Reshape", &["x", "target"], &["y"]),
        ],
        vec![value_info("x", 1, &[2, 3, 4])],
        vec![value_info("y", 1, &[2, 12])],
        vec![ints("zero", &[0]), ints("one", &[1]), ints("minus1", &[-1])],
    );
    let imp = import(&m, &Shapes::new(), None).unwrap();
    assert_eq!(imp.program.n_nodes(), 1, "only the reshape remains");
    assert_eq!(imp.program.output_types()[0].dims(), &[2, 12]);
}

#[test]
fn non_finite_values_flow_when_allowed() {
    let m = model(
        vec![node("Log", &["x"], &["y"])],
        vec![value_info("x", 11, &[2])],
        vec![value_info("y", 11, &[2])],
        vec![],
    );
    let imp = import(&m, &Shapes::new(), None).unwrap();
    let x = Tensor::f64([2], vec![f64::INFINITY, 1.0]).unwrap();
    assert!(interp::eval(&imp.program, std::slice::from_ref(&x)).is_err());
    let y = interp::eval_with_options(
        &imp.program,
        &[x],
        EvalOptions {
            check_non_finite: false,
            ..EvalOptions::default()
        },
    )
    .unwrap();
    assert_eq!(y[0].to_f64_vec(), vec![f64::INFINITY, 0.0]);
}
