//! The elementwise rows from the outside: values against hand-computed ones, exact rational
//! values, domain and attribute errors naming the node, and the derivative conventions. Their
//! derivatives, lowerings, round trips and f32 budgets are checked by the verification bundle,
//! which draws every row (`verify_bundle.rs`).

use catml::ad::vjp;
use catml::interp::{self, EvalError};
use catml::ir::{json, Builder, InputKind, Program, Var};
use catml::prim::{builtins, Ops, BINARY_ROWS, UNARY_ROWS};
use catml::tensor::{rational_from_f64, DType, RArray, Tensor, TensorType};

fn unary(build: impl Fn(&mut Builder, Var) -> Var, n: usize) -> Program {
    let mut b = Builder::new();
    let x = b
        .input("x", TensorType::new(DType::F64, [n]), InputKind::Data)
        .unwrap();
    let y = build(&mut b, x);
    b.finish(&[y]).unwrap()
}

fn run(p: &Program, xs: &[&[f64]]) -> Result<Vec<f64>, EvalError> {
    let inputs: Vec<Tensor> = xs
        .iter()
        .map(|x| Tensor::f64([x.len()], x.to_vec()).unwrap())
        .collect();
    interp::eval(p, &inputs).map(|y| y[0].to_f64_vec())
}

fn close(a: &[f64], b: &[f64]) {
    for (x, y) in a.iter().zip(b) {
        assert!((x - y).abs() <= 1e-15 * y.abs().max(1.0), "{a:?} vs {b:?}");
    }
}

#[test]
fn unary_rows_give_their_formulas() {
    let x = [-2.5, -0.5, 0.0, 0.5, 2.5];
    type Case = (&'static str, &'static [f64], fn(f64) -> f64);
    let cases: &[Case] = &[
        ("sin", &[], f64::sin),
        ("cos", &[], f64::cos),
        ("abs", &[], f64::abs),
        ("square", &[], |v| v * v),
        ("expm1", &[], f64::exp_m1),
        ("softplus", &[], |v| (1.0 + v.exp()).ln()),
        ("floor", &[], f64::floor),
        ("ceil", &[], f64::ceil),
        ("leaky_relu", &[0.1], |v| if v > 0.0 { v } else { 0.1 * v }),
        ("elu", &[1.0], |v| if v > 0.0 { v } else { v.exp() - 1.0 }),
        ("clip", &[-1.0, 1.0], |v| v.clamp(-1.0, 1.0)),
        ("powi", &[3.0], |v| v * v * v),
    ];
    for (name, attrs, f) in cases {
        let p = unary(|b, x| b.unary_row(name, attrs, x).unwrap(), x.len());
        let want: Vec<f64> = x.iter().map(|v| f(*v)).collect();
        close(&run(&p, &[&x]).unwrap(), &want);
    }
    // Rounding half to even, sign at 0, erf and gelu at known points.
    let p = unary(|b, x| b.round(x).unwrap(), 5);
    assert_eq!(
        run(&p, &[&[-2.5, -1.5, 0.5, 2.5, 3.5]]).unwrap(),
        [-2.0, -2.0, 0.0, 2.0, 4.0]
    );
    let p = unary(|b, x| b.sign(x).unwrap(), 3);
    assert_eq!(run(&p, &[&[-3.0, 0.0, 2.0]]).unwrap(), [-1.0, 0.0, 1.0]);
    let p = unary(|b, x| b.erf(x).unwrap(), 1);
    close(&run(&p, &[&[1.0]]).unwrap(), &[0.842_700_792_949_714_9]);
    let p = unary(|b, x| b.gelu(x, false).unwrap(), 1);
    close(&run(&p, &[&[1.0]]).unwrap(), &[0.841_344_746_068_542_9]);
    let p = unary(|b, x| b.gelu(x, true).unwrap(), 1);
    close(&run(&p, &[&[1.0]]).unwrap(), &[0.841_191_990_608_276_8]);
    // log1p keeps tiny arguments; softplus does not overflow.
    let p = unary(|b, x| b.log1p(x).unwrap(), 1);
    assert_eq!(run(&p, &[&[1e-20]]).unwrap(), [1e-20]);
    let p = unary(|b, x| b.softplus(x).unwrap(), 2);
    assert_eq!(run(&p, &[&[1000.0, -1000.0]]).unwrap()[0], 1000.0);
}

#[test]
fn binary_rows_give_their_formulas() {
    let p = |name: &'static str| {
        let mut b = Builder::new();
        let ty = TensorType::new(DType::F64, [3]);
        let x = b.input("x", ty.clone(), InputKind::Data).unwrap();
        let y = b.input("y", ty, InputKind::Data).unwrap();
        let z = b.binary_row(name, x, y).unwrap();
        b.finish(&[z]).unwrap()
    };
    let (x, y) = ([1.0, 2.0, 9.0], [4.0, 3.0, 0.5]);
    close(
        &run(&p("div"), &[&x, &y]).unwrap(),
        &[0.25, 2.0 / 3.0, 18.0],
    );
    close(&run(&p("pow"), &[&x, &y]).unwrap(), &[1.0, 8.0, 3.0]);
    assert_eq!(run(&p("maximum"), &[&x, &y]).unwrap(), [4.0, 3.0, 9.0]);
    assert_eq!(run(&p("minimum"), &[&x, &y]).unwrap(), [1.0, 2.0, 0.5]);
}

#[test]
fn domain_violations_name_the_node() {
    let cases: &[(&str, &[f64], f64)] = &[
        ("sqrt", &[], -1.0),
        ("log1p", &[], -1.0),
        ("powi", &[-1.0], 0.0),
    ];
    for (name, attrs, bad) in cases {
        let p = unary(|b, x| b.unary_row(name, attrs, x).unwrap(), 2);
        let e = run(&p, &[&[1.0, *bad]]).unwrap_err().to_string();
        assert!(e.contains(name) && e.contains("element 1"), "{e}");
    }
    let mut b = Builder::new();
    let ty = TensorType::new(DType::F64, [1]);
    let x = b.input("x", ty.clone(), InputKind::Data).unwrap();
    let y = b.input("y", ty, InputKind::Data).unwrap();
    let z = b.div(x, y).unwrap();
    let p = b.finish(&[z]).unwrap();
    let e = run(&p, &[&[1.0], &[0.0]]).unwrap_err().to_string();
    assert!(e.contains("div") && e.contains("nonzero"), "{e}");
}

#[test]
fn refused_attributes_are_errors_naming_the_key() {
    let module = |op: &str, attrs: &str| {
        format!(
            r#"{{"inputs": [{{"name": "x", "shape": [2]}}],
                "nodes": [{{"name": "y", "op": "{op}", "operands": ["x"], "attrs": {attrs}}}],
                "outputs": ["y"]}}"#
        )
    };
    for (op, attrs, key) in [
        ("clip", r#"{"min": 2, "max": 1}"#, "min"),
        ("clip", r#"{"min": 0}"#, "max"),
        ("leaky_relu", r#"{"alpha": -1}"#, "alpha"),
        ("powi", r#"{"n": 1.5}"#, "n"),
        ("gelu", r#"{"approximate": 1}"#, "approximate"),
        ("sin", r#"{"alpha": 1}"#, "alpha"),
    ] {
        let e = json::from_str(&module(op, attrs), builtins())
            .unwrap_err()
            .to_string();
        assert!(e.contains(key) && e.contains("nodes[0]"), "{op}: {e}");
    }
    // Attributes round-trip through JSON with their own types.
    let p = json::from_str(&module("gelu", r#"{"approximate": true}"#), builtins()).unwrap();
    let again = json::from_str(&json::to_string(&p), builtins()).unwrap();
    assert_eq!(json::to_string(&p), json::to_string(&again));
}

#[test]
fn exact_rows_evaluate_over_the_rationals() {
    let x = [-2.5, -0.5, 0.0, 1.5, 2.5];
    for row in UNARY_ROWS.iter().filter(|r| r.exact.is_some()) {
        let mut half = || 0.5;
        let attrs = (row.sample_attrs)(&mut half);
        // The points of x inside the row's domain (reciprocal and log exclude some).
        let domain = (row.domain)(&attrs);
        let xs: Vec<f64> = x.iter().copied().filter(|&v| domain.contains(v)).collect();
        let p = unary(|b, v| b.unary_row(row.name, &attrs, v).unwrap(), xs.len());
        let exact = RArray::new(
            vec![xs.len()],
            xs.iter().map(|v| rational_from_f64(*v).unwrap()).collect(),
        )
        .unwrap();
        let r = interp::eval_rational(&p, &[exact]).unwrap();
        let f = run(&p, &[&xs]).unwrap();
        let back: Vec<f64> = r[0]
            .data()
            .iter()
            .map(catml::tensor::rational_to_f64)
            .collect();
        assert_eq!(back, f, "{}", row.name);
    }
    assert!(BINARY_ROWS.iter().any(|r| r.exact.is_some()));
}

#[test]
fn ties_of_maximum_split_the_cotangent_evenly() {
    let mut b = Builder::new();
    let ty = TensorType::new(DType::F64, [2]);
    let x = b.input("x", ty.clone(), InputKind::Data).unwrap();
    let y = b.input("y", ty, InputKind::Data).unwrap();
    let z = b.maximum(x, y).unwrap();
    let p = b.finish(&[z]).unwrap();
    let g = vjp(&p).unwrap();
    let t = |v: &[f64]| Tensor::f64([2], v.to_vec()).unwrap();
    let out = interp::eval(
        &g.program,
        &[t(&[1.0, 3.0]), t(&[1.0, 2.0]), t(&[1.0, 1.0])],
    )
    .unwrap();
    let n = out.len();
    assert_eq!(out[n - 2].to_f64_vec(), [0.5, 1.0]);
    assert_eq!(out[n - 1].to_f64_vec(), [0.5, 0.0]);
}
