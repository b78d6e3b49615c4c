//! The tiny MLP (docs/examples.md), a model become data: four instructions, read by the shape
//! interpreter without data, counted by the parameter fold, and checked for naturality:
//! shape(eval(p, x)) == shape(p, shape(x)).

use std::sync::Arc;

use catml::interp;
use catml::ir::{listing, Builder, InputKind, Prim, Program, Var};
use catml::prim::{Linear, Relu, Sigmoid};
use catml::tensor::{DType, Tensor, TensorType};

fn f64_type(dims: &[usize]) -> TensorType {
    TensorType::new(DType::F64, dims.to_vec())
}

fn node(b: &mut Builder, name: &str, prim: Prim, operands: &[Var]) -> Var {
    b.apply_named(name, prim, operands).unwrap()
}

/// x -> linear(lin1) -> relu -> linear(lin2) -> sigmoid, parameters declared as tracing
/// meets them.
fn mlp() -> Program {
    let mut b = Builder::new();
    let x = b.input("x", f64_type(&[2]), InputKind::Data).unwrap();
    let w1 = b
        .input("lin1.W", f64_type(&[4, 2]), InputKind::Param)
        .unwrap();
    let b1 = b.input("lin1.b", f64_type(&[4]), InputKind::Param).unwrap();
    b.set_tag(Some("lin1".into()));
    let v1 = node(&mut b, "v1", Arc::new(Linear), &[x, w1, b1]);
    b.set_tag(None);
    let v2 = node(&mut b, "v2", Arc::new(Relu), &[v1]);
    let w2 = b
        .input("lin2.W", f64_type(&[1, 4]), InputKind::Param)
        .unwrap();
    let b2 = b.input("lin2.b", f64_type(&[1]), InputKind::Param).unwrap();
    b.set_tag(Some("lin2".into()));
    let v3 = node(&mut b, "v3", Arc::new(Linear), &[v2, w2, b2]);
    b.set_tag(None);
    let v4 = node(&mut b, "v4", Arc::new(Sigmoid), &[v3]);
    b.finish(&[v4]).unwrap()
}

const LISTING: &str = "program(
  inputs:
    x: f64[2]
    lin1.W: f64[4, 2] param
    lin1.b: f64[4] param
    lin2.W: f64[1, 4] param
    lin2.b: f64[1] param
  instructions:
    0: v1: f64[4] = linear(x, lin1.W, lin1.b) tag=lin1
    1: v2: f64[4] = relu(v1)
    2: v3: f64[1] = linear(v2, lin2.W, lin2.b) tag=lin2
    3: v4: f64[1] = sigmoid(v3)
  outputs: v4
)
";

#[test]
fn listing_has_four_instructions() {
    let p = mlp();
    assert_eq!(p.n_nodes(), 4);
    assert_eq!(listing::print(&p), LISTING);
    let parsed = listing::parse(LISTING, catml::prim::builtins()).unwrap();
    assert_eq!(parsed, p);
}

#[test]
fn shape_interpreter_gives_f64_1_without_data() {
    let p = mlp();
    let types = interp::shape(&p, &p.input_types()).unwrap();
    assert_eq!(types, vec![f64_type(&[1])]);
}

#[test]
fn parameters_total_17_split_12_and_5() {
    let count = interp::params(&mlp());
    assert_eq!(count.total, 17);
    assert_eq!(count.by_tag.len(), 2);
    assert_eq!(count.by_tag["lin1"], 12);
    assert_eq!(count.by_tag["lin2"], 5);
    let per_param: Vec<(&str, usize, Option<&str>)> = count
        .params
        .iter()
        .map(|i| (i.name.as_str(), i.elements, i.tag.as_deref()))
        .collect();
    assert_eq!(
        per_param,
        [
            ("lin1.W", 8, Some("lin1")),
            ("lin1.b", 4, Some("lin1")),
            ("lin2.W", 4, Some("lin2")),
            ("lin2.b", 1, Some("lin2")),
        ]
    );
}

fn inputs(x: [f64; 2], scale: f64) -> Vec<Tensor> {
    vec![
        Tensor::f64([2], x.to_vec()).unwrap(),
        Tensor::f64(
            [4, 2],
            [1.0, 0.0, 0.0, 1.0, 1.0, 1.0, -1.0, -1.0]
                .map(|v| v * scale)
                .to_vec(),
        )
        .unwrap(),
        Tensor::f64([4], vec![0.0; 4]).unwrap(),
        Tensor::f64([1, 4], vec![1.0, -1.0, 0.5, 2.0]).unwrap(),
        Tensor::f64([1], vec![-0.5]).unwrap(),
    ]
}

#[test]
fn evaluates_to_the_hand_computed_value() {
    // h = relu([1, 2, 3, -3]) = [1, 2, 3, 0]; y = 1 - 2 + 1.5 + 0 - 0.5 = 0; sigmoid(0) = 1/2.
    let out = interp::eval(&mlp(), &inputs([1.0, 2.0], 1.0)).unwrap();
    assert_eq!(out, vec![Tensor::f64([1], vec![0.5]).unwrap()]);
    // x = 0: every hidden unit is 0, y = -0.5.
    let out = interp::eval(&mlp(), &inputs([0.0, 0.0], 1.0)).unwrap();
    let expected = 1.0 / (1.0 + 0.5f64.exp());
    assert!((out[0].to_f64_vec()[0] - expected).abs() < 1e-15);
}

#[test]
fn naturality_holds_for_several_inputs() {
    let p = mlp();
    for (x, scale) in [
        ([0.0, 0.0], 1.0),
        ([1.0, 2.0], 1.0),
        ([-3.0, 0.5], 2.0),
        ([100.0, -100.0], 0.1),
        ([1e-3, 7.0], -1.0),
    ] {
        let args = inputs(x, scale);
        let arg_types: Vec<TensorType> = args.iter().map(Tensor::ty).collect();
        let values = interp::eval(&p, &args).unwrap();
        let value_types: Vec<TensorType> = values.iter().map(Tensor::ty).collect();
        assert_eq!(
            value_types,
            interp::shape(&p, &arg_types).unwrap(),
            "x = {x:?}"
        );
        let y = values[0].to_f64_vec()[0];
        assert!((0.0..=1.0).contains(&y), "sigmoid output {y} for x = {x:?}");
    }
}

/// The shape functor re-derives types at other input types: a batch of 5 flows through.
#[test]
fn shape_interpreter_follows_a_batch() {
    let p = mlp();
    let mut types = p.input_types();
    types[0] = f64_type(&[5, 2]);
    assert_eq!(interp::shape(&p, &types).unwrap(), vec![f64_type(&[5, 1])]);
}
