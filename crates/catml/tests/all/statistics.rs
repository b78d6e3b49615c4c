//! mean, argmax and batch_norm: values against hand-computed ones, exact means, each composite
//! against its lowering (derivatives, adjoint identity, central differences), and bad
//! attributes and domains as errors naming the node.

use crate::lowering_checks::{check, f64s, random, rng};

use catml::ad::vjp;
use catml::interp;
use catml::ir::{json, Builder, InputKind, Program};
use catml::prim::{builtins, BatchNorm, BatchNormMode, BatchNormOutput, Ops};
use catml::tensor::{rational_from_f64, DType, RArray, Tensor};

fn one_input(
    dims: &[usize],
    f: impl Fn(&mut Builder, catml::ir::Var) -> catml::ir::Var,
) -> Program {
    let mut b = Builder::new();
    let x = b.input("x", f64s(dims), InputKind::Data).unwrap();
    let y = f(&mut b, x);
    b.finish(&[y]).unwrap()
}

fn eval1(p: &Program, x: Vec<f64>, dims: &[usize]) -> Tensor {
    interp::eval(p, &[Tensor::f64(dims.to_vec(), x).unwrap()])
        .unwrap()
        .remove(0)
}

#[test]
fn mean_averages_over_its_axes() {
    let x = vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
    let rows = one_input(&[2, 3], |b, x| b.mean(x, Some(vec![1])).unwrap());
    assert_eq!(eval1(&rows, x.clone(), &[2, 3]).to_f64_vec(), [2.0, 5.0]);
    let cols = one_input(&[2, 3], |b, x| b.mean(x, Some(vec![0])).unwrap());
    assert_eq!(
        eval1(&cols, x.clone(), &[2, 3]).to_f64_vec(),
        [2.5, 3.5, 4.5]
    );
    let all = one_input(&[2, 3], |b, x| b.mean(x, None).unwrap());
    let y = eval1(&all, x, &[2, 3]);
    assert_eq!((y.dims().to_vec(), y.to_f64_vec()), (vec![], vec![3.5]));
}

#[test]
fn mean_is_exact_over_rationals() {
    // (1 + 1 + 2) / 3 = 4/3, which no float holds.
    let p = one_input(&[3], |b, x| b.mean(x, None).unwrap());
    let x: Vec<_> = [1.0, 1.0, 2.0]
        .iter()
        .map(|v| rational_from_f64(*v).unwrap())
        .collect();
    let y = interp::eval_rational(&p, &[RArray::new([3], x).unwrap()]).unwrap();
    let want = rational_from_f64(4.0).unwrap() / rational_from_f64(3.0).unwrap();
    assert_eq!(y[0].data(), [want]);
}

#[test]
fn mean_matches_its_lowering_and_differences() {
    for (seed, axes) in [(1, Some(vec![0, 2])), (2, None), (3, Some(vec![1]))] {
        let d = [2, 3, 4];
        let p = one_input(&d, |b, x| b.mean(x, axes.clone()).unwrap());
        let mut r = rng(700 + seed);
        check(&p, &[random(&mut r, &f64s(&d), 2.0)], seed, 1e-9);
    }
}

#[test]
fn argmax_picks_the_first_largest_position() {
    let x = vec![1.0, 3.0, 3.0, 5.0, 0.0, 5.0];
    let along_rows = one_input(&[2, 3], |b, x| b.argmax(x, 1).unwrap());
    let y = eval1(&along_rows, x.clone(), &[2, 3]);
    assert_eq!((y.dtype(), y.to_f64_vec()), (DType::I64, vec![1.0, 0.0]));
    let down = one_input(&[2, 3], |b, x| b.argmax(x, 0).unwrap());
    assert_eq!(eval1(&down, x, &[2, 3]).to_f64_vec(), [1.0, 0.0, 1.0]);
}

#[test]
fn argmax_passes_no_gradient() {
    // y = one_hot(argmax x) · x: the gradient is the one-hot row, nothing through argmax.
    let p = one_input(&[1, 3], |b, x| {
        let k = b.argmax(x, 1).unwrap();
        let o = b.one_hot(k, 3, DType::F64).unwrap();
        b.mul(o, x).unwrap()
    });
    let v = vjp(&p).unwrap();
    let x = Tensor::f64([1, 3], vec![0.5, 2.0, -1.0]).unwrap();
    let u = Tensor::f64([1, 3], vec![1.0, 1.0, 1.0]).unwrap();
    let out = interp::eval(&v.program, &[x, u]).unwrap();
    assert_eq!(
        v.layout.gradient(&out, 0).unwrap().to_f64_vec(),
        [0.0, 1.0, 0.0]
    );
}

/// (x, scale, bias) of a [N, C, ...] batch.
fn bn_program(dims: &[usize], epsilon: f64) -> Program {
    let c = dims[1];
    let mut b = Builder::new();
    let x = b.input("x", f64s(dims), InputKind::Data).unwrap();
    let g = b.input("scale", f64s(&[c]), InputKind::Param).unwrap();
    let be = b.input("bias", f64s(&[c]), InputKind::Param).unwrap();
    let (y, m, v) = b.batch_norm_train(x, g, be, epsilon).unwrap();
    b.finish(&[y, m, v]).unwrap()
}

#[test]
fn batch_norm_training_uses_the_batch_statistics() {
    // Channel 0 holds 1, 3 (mean 2, variance 1); channel 1 holds 10, 14 (mean 12, variance 4).
    let scale = Tensor::f64([2], vec![2.0, 1.0]).unwrap();
    let bias = Tensor::f64([2], vec![0.0, 1.0]).unwrap();
    let e: f64 = 1e-5;
    let (r1, r4) = (1.0 / (1.0 + e).sqrt(), 1.0 / (4.0 + e).sqrt());
    // [N, C] and [N, C, S] layouts: the same channels.
    for (dims, x, want) in [
        (
            vec![2, 2],
            vec![1.0, 10.0, 3.0, 14.0],
            vec![-2.0 * r1, 1.0 - 2.0 * r4, 2.0 * r1, 1.0 + 2.0 * r4],
        ),
        (
            vec![1, 2, 2],
            vec![1.0, 3.0, 10.0, 14.0],
            vec![-2.0 * r1, 2.0 * r1, 1.0 - 2.0 * r4, 1.0 + 2.0 * r4],
        ),
    ] {
        let p = bn_program(&dims, e);
        let xt = Tensor::f64(dims.clone(), x).unwrap();
        let out = interp::eval(&p, &[xt, scale.clone(), bias.clone()]).unwrap();
        for (g, w) in out[0].to_f64_vec().iter().zip(&want) {
            assert!((g - w).abs() <= 1e-15, "{:?} vs {want:?}", out[0]);
        }
        assert_eq!(out[1].to_f64_vec(), [2.0, 12.0]);
        assert_eq!(out[2].to_f64_vec(), [1.0, 4.0]);
    }
}

#[test]
fn batch_norm_inference_uses_the_given_statistics() {
    let mut b = Builder::new();
    let f = |b: &mut Builder, n: &str, d: &[usize]| b.input(n, f64s(d), InputKind::Data).unwrap();
    let x = f(&mut b, "x", &[1, 2]);
    let ins: Vec<_> = ["scale", "bias", "mean", "var"]
        .iter()
        .map(|n| f(&mut b, n, &[2]))
        .collect();
    let y = b
        .batch_norm_infer(x, [ins[0], ins[1], ins[2], ins[3]], 1e-5)
        .unwrap();
    let p = b.finish(&[y]).unwrap();
    let t = |v: Vec<f64>| Tensor::f64([v.len()], v).unwrap();
    let args = |var: Vec<f64>| {
        vec![
            Tensor::f64([1, 2], vec![1.0, 10.0]).unwrap(),
            t(vec![1.0, 3.0]),
            t(vec![0.5, 0.0]),
            t(vec![0.0, 10.0]),
            t(var),
        ]
    };
    let y = interp::eval(&p, &args(vec![4.0, 0.0])).unwrap();
    assert_eq!(y[0].to_f64_vec(), [1.0 / 4.00001f64.sqrt() + 0.5, 0.0]);
    // A negative variance is outside the domain: an error naming the node.
    let e = interp::eval(&p, &args(vec![4.0, -1.0]))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("batch_norm") && e.contains("variance -1 at channel 1"),
        "{e}"
    );
}

#[test]
fn batch_norm_matches_its_lowering_and_differences() {
    for (seed, dims) in [
        (1u64, vec![3, 2]),
        (2, vec![2, 3, 2]),
        (3, vec![2, 2, 2, 2]),
    ] {
        let mut r = rng(800 + seed);
        let c = dims[1];
        let xs = vec![
            random(&mut r, &f64s(&dims), 2.0),
            random(&mut r, &f64s(&[c]), 1.5),
            random(&mut r, &f64s(&[c]), 1.0),
        ];
        check(&bn_program(&dims, 0.1), &xs, seed, 1e-8);
    }
    // Inference mode, every operand differentiated; the variance kept positive.
    let dims = [3, 2, 2];
    let mut b = Builder::new();
    let x = b.input("x", f64s(&dims), InputKind::Data).unwrap();
    let ins: Vec<_> = ["scale", "bias", "mean", "var"]
        .iter()
        .map(|n| b.input(n, f64s(&[2]), InputKind::Data).unwrap())
        .collect();
    let y = b
        .batch_norm_infer(x, [ins[0], ins[1], ins[2], ins[3]], 1e-5)
        .unwrap();
    let p = b.finish(&[y]).unwrap();
    let mut r = rng(810);
    let mut xs = vec![random(&mut r, &f64s(&dims), 2.0)];
    for _ in 0..3 {
        xs.push(random(&mut r, &f64s(&[2]), 1.0));
    }
    xs.push(Tensor::f64([2], vec![0.75, 1.5]).unwrap());
    check(&p, &xs, 4, 1e-8);
}

#[test]
fn batch_statistics_are_exact_over_rationals_and_y_has_no_exact_eval() {
    let p = bn_program(&[3, 1], 1e-5);
    let r = |v: &[f64]| -> RArray {
        let d: Vec<_> = v.iter().map(|x| rational_from_f64(*x).unwrap()).collect();
        RArray::new([v.len()], d).unwrap()
    };
    let x = r(&[0.0, 1.0, 1.0]).reshaped([3, 1].into());
    let one = r(&[1.0]);
    assert!(interp::eval_rational(&p, &[x.clone(), one.clone(), one.clone()]).is_err());
    let names = |p: &Program| {
        p.nodes()
            .iter()
            .map(|n| n.prim.has_rational_eval())
            .collect::<Vec<_>>()
    };
    assert_eq!(names(&p), [false, true, true]);
    // The statistics alone: mean 2/3, variance 2/9.
    let mut b = Builder::new();
    let xv = b.input("x", f64s(&[3, 1]), InputKind::Data).unwrap();
    let g = b.input("g", f64s(&[1]), InputKind::Data).unwrap();
    let stat = |b: &mut Builder, output| {
        let p = BatchNorm::new(1e-5, BatchNormMode::Training, output);
        b.op(std::sync::Arc::new(p), &[xv, g, g]).unwrap()
    };
    let m = stat(&mut b, BatchNormOutput::Mean);
    let v = stat(&mut b, BatchNormOutput::Var);
    let q = b.finish(&[m, v]).unwrap();
    let out = interp::eval_rational(&q, &[x, one]).unwrap();
    let frac = |a: f64, b: f64| rational_from_f64(a).unwrap() / rational_from_f64(b).unwrap();
    assert_eq!(out[0].data(), [frac(2.0, 3.0)]);
    assert_eq!(out[1].data(), [frac(2.0, 9.0)]);
}

fn module(node: &str, dims: &[usize], extra_inputs: &str, operands: &str) -> String {
    format!(
        r#"{{"inputs": [{{"name": "x", "shape": {dims:?}}}{extra_inputs}],
          "nodes": [{{"name": "bad", {node}, "operands": [{operands}]}}], "outputs": ["bad"]}}"#
    )
}

#[test]
fn bad_attributes_are_errors_naming_the_node() {
    let c = r#", {"name": "s", "shape": [2]}, {"name": "b", "shape": [2]}"#;
    let xsb = r#""x", "s", "b""#;
    let cases = [
        (
            module(
                r#""op": "mean", "attrs": {"axes": [2]}"#,
                &[2, 2],
                "",
                r#""x""#,
            ),
            "axes",
        ),
        (
            module(
                r#""op": "mean", "attrs": {"axes": [0, 0]}"#,
                &[2, 2],
                "",
                r#""x""#,
            ),
            "axes",
        ),
        (
            module(
                r#""op": "argmax", "attrs": {"axis": 2}"#,
                &[2, 2],
                "",
                r#""x""#,
            ),
            "axis",
        ),
        (module(r#""op": "argmax""#, &[2, 2], "", r#""x""#), "axis"),
        (
            module(
                r#""op": "batch_norm", "attrs": {"epsilon": 0}"#,
                &[2, 2],
                c,
                xsb,
            ),
            "epsilon",
        ),
        (
            module(
                r#""op": "batch_norm", "attrs": {"mode": "train"}"#,
                &[2, 2],
                c,
                xsb,
            ),
            "mode",
        ),
        (
            module(
                r#""op": "batch_norm", "attrs": {"mode": "inference", "output": "mean"}"#,
                &[2, 2],
                c,
                xsb,
            ),
            "output",
        ),
        (
            module(
                r#""op": "batch_norm", "attrs": {"output": "std"}"#,
                &[2, 2],
                c,
                xsb,
            ),
            "output",
        ),
        (
            module(
                r#""op": "batch_norm", "attrs": {"mode": "inference"}"#,
                &[2, 2],
                c,
                xsb,
            ),
            "5 (x, scale, bias, mean, var)",
        ),
        (module(r#""op": "batch_norm""#, &[2], c, xsb), "rank >= 2"),
        (
            module(r#""op": "batch_norm""#, &[2, 3], c, xsb),
            "one per channel",
        ),
    ];
    for (text, what) in cases {
        let e = json::from_str(&text, builtins()).unwrap_err().to_string();
        assert!(e.contains("`bad`") && e.contains(what), "{what}: {e}");
    }
}

#[test]
fn every_new_statistic_round_trips_its_attributes() {
    let p = bn_program(&[2, 2], 0.5);
    let text = json::to_string(&p);
    for want in [
        r#""epsilon":0.5,"mode":"training""#,
        r#""output":"mean""#,
        r#""output":"var""#,
    ] {
        assert!(text.contains(want), "{want} in {text}");
    }
    assert_eq!(json::from_str(&text, builtins()).unwrap(), p);
}
