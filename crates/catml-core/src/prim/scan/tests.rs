//! scan against the same steps unrolled: values, JVP and VJP; files; hostile input.

use super::{scan, Scan};
use crate::ad;
use crate::interp::eval;
use crate::ir::{json, listing, Builder, InputKind, Program, Var};
use crate::prim::{builtins, Ops};
use crate::tensor::{DType, Tensor, TensorType};

const T: usize = 4;

fn f(dims: &[usize]) -> TensorType {
    TensorType::new(DType::F64, dims.to_vec())
}

/// One step: c' = tanh(c w + x), y = c' c'.
fn step(b: &mut Builder, c: Var, x: Var, w: Var) -> (Var, Var) {
    let cw = b.mul(c, w).unwrap();
    let a = b.add(cw, x).unwrap();
    let c2 = b.tanh(a).unwrap();
    let y = b.mul(c2, c2).unwrap();
    (c2, y)
}

fn body() -> Program {
    let mut b = Builder::new();
    let c = b.input("c", f(&[3]), InputKind::Data).unwrap();
    let x = b.input("x", f(&[3]), InputKind::Data).unwrap();
    let w = b.input("w", f(&[3]), InputKind::Data).unwrap();
    let (c2, y) = step(&mut b, c, x, w);
    b.finish(&[c2, y]).unwrap()
}

/// (c0, xs, w) -> (final carry, every carry, ys), by a scan or unrolled.
fn program(scanned: bool, reverse: bool, stack: bool) -> Program {
    let mut b = Builder::new();
    let c0 = b.input("c0", f(&[3]), InputKind::Data).unwrap();
    let xs = b.input("xs", f(&[T, 3]), InputKind::Data).unwrap();
    let w = b.input("w", f(&[3]), InputKind::Param).unwrap();
    let outs = if scanned {
        let s = Scan::new(body(), T, 1, 1, 1)
            .unwrap()
            .reversed(reverse)
            .stacking_carries(stack);
        let r = scan(&mut b, s, &[c0], &[xs], &[w]).unwrap();
        vec![r.final_carries[0], r.ys[0]]
    } else {
        let mut c = c0;
        let mut ys = vec![None; T];
        for s in 0..T {
            let t = if reverse { T - 1 - s } else { s };
            let xt = b.gather(xs, 0, vec![t]).unwrap();
            let xt = b.reshape(xt, [3]).unwrap();
            let (c2, y) = step(&mut b, c, xt, w);
            c = c2;
            ys[t] = Some(b.reshape(y, [1, 3]).unwrap());
        }
        let ys: Vec<Var> = ys.into_iter().map(Option::unwrap).collect();
        vec![c, b.concat(&ys, 0).unwrap()]
    };
    // A loss reading both results, so every cotangent path is exercised.
    let s0 = b.sum(outs[0], None).unwrap();
    let s1 = b.sum(outs[1], None).unwrap();
    let l = b.add(s0, s1).unwrap();
    b.finish(&[l, outs[0], outs[1]]).unwrap()
}

fn args() -> Vec<Tensor> {
    vec![
        Tensor::f64([3], vec![0.1, -0.4, 0.7]).unwrap(),
        Tensor::f64(
            [T, 3],
            (0..3 * T).map(|i| (i as f64 * 0.37).sin()).collect(),
        )
        .unwrap(),
        Tensor::f64([3], vec![0.9, -1.2, 0.5]).unwrap(),
    ]
}

fn close(a: &Tensor, b: &Tensor, tol: f64) {
    let (a, b) = (a.to_f64_vec(), b.to_f64_vec());
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(&b) {
        assert!((x - y).abs() <= tol * (1.0 + y.abs()), "{x} vs {y}");
    }
}

#[test]
fn values_equal_the_unrolled_steps_bitwise() {
    for reverse in [false, true] {
        for stack in [false, true] {
            let s = eval(&program(true, reverse, stack), &args()).unwrap();
            let u = eval(&program(false, reverse, false), &args()).unwrap();
            assert_eq!(s, u, "reverse {reverse}, stack {stack}");
        }
    }
}

#[test]
fn gradients_equal_the_unrolled_steps() {
    for reverse in [false, true] {
        for stack in [false, true] {
            let gs = ad::grad(&program(true, reverse, stack)).unwrap();
            let gu = ad::grad(&program(false, reverse, false)).unwrap();
            let (s, u) = (
                eval(&gs.program, &args()).unwrap(),
                eval(&gu.program, &args()).unwrap(),
            );
            for input in 0..3 {
                let (a, b) = (
                    gs.layout.gradient(&s, input).unwrap(),
                    gu.layout.gradient(&u, input).unwrap(),
                );
                close(a, b, 1e-13);
            }
        }
    }
}

#[test]
fn tangents_equal_the_unrolled_steps() {
    for reverse in [false, true] {
        let js = ad::jvp(&program(true, reverse, true)).unwrap();
        let ju = ad::jvp(&program(false, reverse, false)).unwrap();
        let mut a = args();
        a.extend([
            Tensor::f64([3], vec![1.0, 0.5, -0.3]).unwrap(),
            Tensor::f64(
                [T, 3],
                (0..3 * T).map(|i| (i as f64 * 0.11).cos()).collect(),
            )
            .unwrap(),
            Tensor::f64([3], vec![0.2, 0.1, -0.7]).unwrap(),
        ]);
        let (s, u) = (
            eval(&js.program, &a).unwrap(),
            eval(&ju.program, &a).unwrap(),
        );
        for k in 3..6 {
            close(&s[k], &u[k], 1e-13);
        }
    }
}

#[test]
fn files_round_trip_with_the_body() {
    let p = program(true, true, true);
    let text = json::to_string(&p);
    assert!(text.contains("\"format\": \"lensir-module/1\"") && text.contains("\"body\""));
    assert_eq!(json::from_str(&text, builtins()).unwrap(), p);
    let l = listing::print(&p);
    assert!(l.contains("\n      program(\n"), "{l}");
    assert_eq!(listing::parse(&l, builtins()).unwrap(), p);
}

#[test]
fn hostile_bodies_are_errors_naming_the_place() {
    let p = program(true, false, true);
    let text = json::to_string(&p);
    let cases = [
        (
            text.replace("\"op\":\"tanh\"", "\"op\":\"tanhh\""),
            "nodes[0].body.nodes[2] `t.2`: unknown primitive `tanhh`",
        ),
        (
            text.replace("\"op\":\"tanh\"", "\"op\":7"),
            "nodes[0].body.nodes[2].op",
        ),
        (
            text.replace("\"length\":4", "\"length\":0"),
            "a scan runs at least one step",
        ),
        (text.replace("\"length\":4", "\"length\":5"), "operand 1"),
        (
            text.replace("\"carries\":1", "\"carries\":2"),
            "body: takes 3 inputs, expected 4",
        ),
    ];
    for (bad, needle) in cases {
        let e = json::from_str(&bad, builtins()).unwrap_err().to_string();
        assert!(e.contains(needle), "{e}\n expected: {needle}");
    }
    // A carry that leaves with another type.
    let mut b = Builder::new();
    let c = b.input("c", f(&[3]), InputKind::Data).unwrap();
    let total = b.sum(c, None).unwrap();
    let e = Scan::new(b.finish(&[total]).unwrap(), 2, 1, 0, 0)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("carry 0 enters as f64[3] (input `c`) but leaves as f64[]"),
        "{e}"
    );
    // A body on a primitive that takes none, and a scan without one.
    let no_body = text.replace("\"op\":\"scan\"", "\"op\":\"add\"");
    assert!(json::from_str(&no_body, builtins())
        .unwrap_err()
        .to_string()
        .contains("takes no `body`"));
    // No operands at all, and a body of no inputs whose output is a constant.
    let empty = r#"{"inputs":[{"name":"x","shape":[1]}],"nodes":[{"name":"s","op":"scan","operands":[],"attrs":{"length":2,"carries":0,"xs":0,"consts":0},"body":{"inputs":[],"nodes":[{"name":"k","op":"constant","attrs":{"value":{"shape":[],"data":[1.0]}}}],"outputs":["k"]}}],"outputs":["s"]}"#;
    let e = json::from_str(empty, builtins()).unwrap_err().to_string();
    assert!(
        e.contains("nodes[0]") && e.contains("body: takes no inputs"),
        "{e}"
    );
    // Bodies nested past the bound.
    let mut nested =
        String::from(r#"{"inputs":[{"name":"x","shape":[1]}],"nodes":[],"outputs":["x"]}"#);
    for _ in 0..12 {
        nested = format!(
            r#"{{"inputs":[{{"name":"x","shape":[1]}}],"nodes":[{{"name":"s","op":"scan","operands":["x"],"attrs":{{"length":1,"carries":1,"xs":0,"consts":0}},"body":{nested}}}],"outputs":["x"]}}"#
        );
    }
    let e = json::from_str(&nested, builtins()).unwrap_err().to_string();
    assert!(e.contains("bodies nest deeper than 8 levels"), "{e}");
}
