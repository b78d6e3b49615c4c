//! atan, erf and the erf form of gelu, which the exporter writes as f64 arithmetic: exported,
//! imported again and evaluated, they agree with CatML's kernels over every branch of their
//! range reductions, at the branch edges, far out, and on NaN and the infinities.

use catml_core::interp::{eval_with_options, EvalOptions};
use catml_core::ir::{Builder, InputKind};
use catml_core::prim::Ops;
use catml_core::tensor::{DType, Params, Shape, Tensor, TensorType};
use catml_onnx::{decode_model, export, import, ExportOptions, Shapes};
use prost::Message;

/// Branch edges of the compositions, their neighbours, and a sweep over [-30, 30].
fn points() -> Vec<f64> {
    let edges = [
        0.0,
        1e-300,
        3.7e-9,
        0.4375,
        0.6875,
        1.1875,
        2.4375,
        0.84375,
        1.25,
        1.0 / 0.35,
        6.0,
        28.0,
    ];
    let mut v = Vec::new();
    for e in edges {
        for x in [e, e * (1.0 + 1e-15), e * (1.0 - 1e-15), 2.0 * e + 0.01] {
            v.push(x);
            v.push(-x);
        }
    }
    v.extend((0..=600).map(|k| -30.0 + 0.1 * k as f64 + 0.003));
    v.extend([1e10, -1e10, 1e300, -1e300]);
    v
}

/// f(x) by the kernel and by import(export(f)) on the same values, with non-finite values
/// allowed through.
fn both(f: &str, dtype: DType, xs: &[f64]) -> (Vec<f64>, Vec<f64>) {
    let mut b = Builder::new();
    let x = b
        .input("x", TensorType::new(dtype, [xs.len()]), InputKind::Data)
        .unwrap();
    let y = match f {
        "gelu" => b.gelu(x, false),
        _ => b.unary_row(f, &[], x),
    }
    .unwrap();
    let p = b.finish(&[y]).unwrap();
    let e = export(&p, &Params::new(), &ExportOptions::default()).unwrap();
    let ops: Vec<&str> = e
        .model
        .graph
        .as_ref()
        .unwrap()
        .node
        .iter()
        .map(|n| n.op_type.as_str())
        .collect();
    assert!(
        !ops.contains(&"Atan") && !ops.contains(&"Erf"),
        "{f}: {ops:?}"
    );
    let model = decode_model(&e.model.encode_to_vec()).unwrap();
    let q = import(&model, &Shapes::new(), None).unwrap().program;
    let arg = Tensor::from_f64s(dtype, Shape::new(vec![xs.len()]), xs.to_vec()).unwrap();
    let loose = EvalOptions {
        check_non_finite: false,
        ..EvalOptions::default()
    };
    let want = eval_with_options(&p, std::slice::from_ref(&arg), loose).unwrap();
    let got = eval_with_options(&q, &[arg], loose).unwrap();
    (got[0].to_f64_vec(), want[0].to_f64_vec())
}

/// Every element within `ulps` units in the last place of the kernel's value (NaN where it is).
fn assert_close(f: &str, dtype: DType, xs: &[f64], ulps: f64) {
    let (got, want) = both(f, dtype, xs);
    let eps = match dtype {
        DType::F32 => f32::EPSILON as f64,
        _ => f64::EPSILON,
    };
    let tiny = match dtype {
        DType::F32 => f32::from_bits(1) as f64,
        _ => f64::from_bits(1),
    };
    for ((x, g), w) in xs.iter().zip(&got).zip(&want) {
        if g == w {
            continue;
        }
        if w.is_nan() {
            assert!(g.is_nan(), "{f} {dtype}({x}) = {g}, kernel NaN");
            continue;
        }
        assert!(
            (g - w).abs() <= ulps * eps * w.abs() + tiny,
            "{f} {dtype}({x}) = {g:e}, kernel {w:e}"
        );
    }
}

#[test]
fn atan_erf_and_gelu_compositions_agree_with_the_kernels() {
    let xs = points();
    for f in ["atan", "erf", "gelu"] {
        // f64: the same algorithm in a different order of roundings, a few ulps.
        assert_close(f, DType::F64, &xs, 4.0);
        // f32: computed in f64 and rounded once, as the kernel: within one ulp.
        let xs32: Vec<f64> = xs.iter().map(|&x| x as f32 as f64).collect();
        assert_close(f, DType::F32, &xs32, 1.0);
    }
}

#[test]
fn atan_erf_and_gelu_compositions_keep_nan_and_the_infinities() {
    let xs = [f64::NAN, f64::INFINITY, f64::NEG_INFINITY];
    for dtype in [DType::F32, DType::F64] {
        let (atan, _) = both("atan", dtype, &xs);
        assert!(atan[0].is_nan());
        assert_eq!(
            &atan[1..],
            &[std::f64::consts::FRAC_PI_2, -std::f64::consts::FRAC_PI_2].map(|v| {
                if dtype == DType::F32 {
                    v as f32 as f64
                } else {
                    v
                }
            })
        );
        let (erf, _) = both("erf", dtype, &xs);
        assert!(erf[0].is_nan());
        assert_eq!(&erf[1..], &[1.0, -1.0]);
        let (gelu, _) = both("gelu", dtype, &xs);
        assert!(gelu[0].is_nan());
        assert_eq!(gelu[1], f64::INFINITY);
        // -inf · (1 + erf(-inf)) = -inf · 0 is NaN, as in the kernel's IEEE arithmetic.
        let (_, kernel) = both("gelu", dtype, &xs);
        assert_eq!(gelu[2].is_nan(), kernel[2].is_nan());
    }
}
