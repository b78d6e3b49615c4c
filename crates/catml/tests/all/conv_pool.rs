//! Convolution and pooling composites: each kernel against its lowering into the core fragment
//! (forward, JVP, VJP, VJP of VJP) over seeded random shapes and attributes, the adjoint
//! identity, finite differences, exact rational evaluation, hand-computed values, the max-pool
//! tie convention and the rejection messages.

#[path = "conv_pool/cases.rs"]
mod cases;
#[path = "conv_pool/support.rs"]
mod support;

use std::sync::Arc;

use catml::ad::vjp;
use catml::interp::{cost, eval_rational, eval_with_report};
use catml::ir::{json, Builder, InputKind};
use catml::prim::{builtins, Conv1dAttrs, Conv2dAttrs, Ops, Pool2dAttrs};
use catml::tensor::{rational_to_f64, Array, DType, RArray, Rational, Tensor, TensorType};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use cases::{
    all_attribute_conv_cases, conv_case, conv_transpose_cases, fixed_pool_cases, pool_cases,
    transposes_of,
};
use support::{
    check_adjoint, check_against_lowering, check_finite_differences, f64_type, run, Case,
};

const TOL: f64 = 1e-10;

fn rng(seed: u64) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(seed)
}

/// Convolutions and their transposes over random attributes, both ranks, with and without bias.
fn conv_family(rng: &mut ChaCha8Rng, per_rank: usize) -> Vec<Case> {
    let mut out = Vec::new();
    for (spec, case) in all_attribute_conv_cases() {
        out.extend(transposes_of(spec, &case));
        out.push(case);
    }
    for rank in [1, 2] {
        for i in 0..per_rank {
            out.push(conv_case(rng, rank, i % 2 == 0).1);
            out.extend(conv_transpose_cases(rng, rank));
        }
    }
    out
}

#[test]
fn conv_kernels_match_their_lowerings() {
    let mut r = rng(1);
    for case in conv_family(&mut r, 8) {
        check_against_lowering(&case, &mut r, false, TOL);
    }
}

#[test]
fn conv_jvp_and_vjp_are_adjoint() {
    let mut r = rng(2);
    for case in conv_family(&mut r, 8) {
        check_adjoint(&case, &mut r, TOL);
    }
}

#[test]
fn conv_jvp_matches_finite_differences() {
    let mut r = rng(3);
    for case in conv_family(&mut r, 6) {
        // Bilinear maps: the central difference has no truncation error, only rounding.
        check_finite_differences(&case, &mut r, 1e-3, 1e-9);
    }
}

#[test]
fn pool_kernels_match_their_lowerings() {
    let mut r = rng(4);
    for (case, nonsmooth) in fixed_pool_cases() {
        check_against_lowering(&case, &mut r, nonsmooth, TOL);
    }
    for _ in 0..10 {
        for (case, nonsmooth) in pool_cases(&mut r) {
            check_against_lowering(&case, &mut r, nonsmooth, TOL);
        }
    }
}

#[test]
fn pool_jvp_and_vjp_are_adjoint() {
    let mut r = rng(5);
    for (case, _) in fixed_pool_cases() {
        check_adjoint(&case, &mut r, TOL);
    }
    for _ in 0..10 {
        for (case, _) in pool_cases(&mut r) {
            check_adjoint(&case, &mut r, TOL);
        }
    }
}

#[test]
fn pool_jvp_matches_finite_differences() {
    let mut r = rng(6);
    for _ in 0..8 {
        for (case, _) in pool_cases(&mut r) {
            // Piecewise linear: exact away from ties, which random inputs do not hit.
            check_finite_differences(&case, &mut r, 1e-7, 1e-6);
        }
    }
}

/// Small integers as exact rationals and as f64.
fn integer_inputs(case: &Case, seed: u64) -> (Vec<RArray>, Vec<Tensor>) {
    let mut state = seed;
    let mut exact = Vec::new();
    let mut floats = Vec::new();
    for t in &case.inputs {
        let values: Vec<i64> = (0..t.numel())
            .map(|_| {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((state >> 33) % 9) as i64 - 4
            })
            .collect();
        let rationals = values.iter().map(|&v| Rational::from_integer(v.into()));
        exact.push(Array::new(t.shape.clone(), rationals.collect()).unwrap());
        let data = values.iter().map(|&v| v as f64).collect();
        floats.push(Tensor::from_f64s(DType::F64, t.shape.clone(), data).unwrap());
    }
    (exact, floats)
}

#[test]
fn rational_evaluation_matches_the_float_kernels_on_integers() {
    let mut r = rng(7);
    let mut all = conv_family(&mut r, 3);
    for _ in 0..3 {
        all.extend(pool_cases(&mut r).into_iter().map(|(c, _)| c));
    }
    for (i, case) in all.iter().enumerate() {
        let p = case.kernel_program();
        let (exact, floats) = integer_inputs(case, i as u64 + 1);
        let q = eval_rational(&p, &exact).unwrap().pop().unwrap();
        let f = run(&p, &floats).pop().unwrap().to_f64_vec();
        let q: Vec<f64> = q.data().iter().map(rational_to_f64).collect();
        // Integer sums in f64 are exact; the average's 1/(kH·kW) is rounded once.
        for (a, b) in q.iter().zip(&f) {
            assert!((a - b).abs() <= 1e-12 * (1.0 + a.abs()), "{}", case.label);
        }
    }
}

#[test]
fn f32_kernels_agree_with_f64() {
    let mut r = rng(8);
    for case in conv_family(&mut r, 4) {
        let x64 = case.random_inputs(&mut r);
        let x32: Vec<Tensor> = x64
            .iter()
            .map(|t| Tensor::from_f64s(DType::F32, t.dims().to_vec(), t.to_f64_vec()).unwrap())
            .collect();
        let types32: Vec<TensorType> = x32.iter().map(Tensor::ty).collect();
        let p32 = Case::new(case.prim.clone(), types32, case.label.clone()).kernel_program();
        let y32 = run(&p32, &x32).pop().unwrap();
        let y64 = run(&case.kernel_program(), &x64).pop().unwrap();
        assert_eq!(y32.dtype(), DType::F32);
        support::assert_close(&y32, &y64, 1e-5, &case.label);
    }
}

// ---------------------------------------------------------------- hand-computed values

/// Evaluates `f` on named f64 inputs given as (dims, data).
fn apply(
    inputs: &[(&[usize], Vec<f64>)],
    f: impl FnOnce(&mut Builder, &[catml::ir::Var]) -> catml::ir::Var,
) -> Vec<f64> {
    let mut b = Builder::new();
    let vars: Vec<_> = inputs
        .iter()
        .enumerate()
        .map(|(i, (d, _))| {
            b.input(&format!("x{i}"), f64_type(d), InputKind::Data)
                .unwrap()
        })
        .collect();
    let y = f(&mut b, &vars);
    let p = b.finish(&[y]).unwrap();
    let values: Vec<Tensor> = inputs
        .iter()
        .map(|(d, v)| Tensor::f64(d.to_vec(), v.clone()).unwrap())
        .collect();
    run(&p, &values).pop().unwrap().to_f64_vec()
}

fn one_to(n: usize) -> Vec<f64> {
    (1..=n).map(|v| v as f64).collect()
}

#[test]
fn conv2d_of_a_difference_stencil_with_bias() {
    // y[i, j] = x[i, j] − x[i+1, j+1] + 1 = −5 + 1 for x = 1..16 row-major in 4x4.
    let y = apply(
        &[
            (&[1, 1, 4, 4], one_to(16)),
            (&[1, 1, 2, 2], vec![1., 0., 0., -1.]),
            (&[1], vec![1.]),
        ],
        |b, v| {
            b.conv2d(v[0], v[1], Some(v[2]), Conv2dAttrs::default())
                .unwrap()
        },
    );
    assert_eq!(y, vec![-4.0; 9]);
}

#[test]
fn conv2d_box_sum_with_padding_and_stride() {
    // 3x3 ones, padding 1, stride 2 over 1..16 in 4x4: windows centred at (0,0), (0,2),
    // (2,0), (2,2): 1+2+5+6, 2+3+4+6+7+8, 5+6+9+10+13+14, 6+7+8+10+11+12+14+15+16.
    let y = apply(
        &[(&[1, 1, 4, 4], one_to(16)), (&[1, 1, 3, 3], vec![1.; 9])],
        |b, v| {
            let attrs = Conv2dAttrs::default().pad(1).stride([2, 2]);
            b.conv2d(v[0], v[1], None, attrs).unwrap()
        },
    );
    assert_eq!(y, vec![14., 30., 57., 99.]);
}

#[test]
fn conv1d_with_dilation() {
    // y[o] = x[o] + 10 x[o + 2] for x = 1..5.
    let y = apply(
        &[(&[1, 1, 5], one_to(5)), (&[1, 1, 2], vec![1., 10.])],
        |b, v| {
            let attrs = Conv1dAttrs {
                dilation: 2,
                ..Conv1dAttrs::default()
            };
            b.conv1d(v[0], v[1], None, attrs).unwrap()
        },
    );
    assert_eq!(y, vec![31., 42., 53.]);
}

#[test]
fn grouped_conv_keeps_channels_apart() {
    // Two groups of one channel: y = (2·3, 7·5).
    let y = apply(
        &[(&[1, 2, 1, 1], vec![3., 5.]), (&[2, 1, 1, 1], vec![2., 7.])],
        |b, v| {
            b.conv2d(v[0], v[1], None, Conv2dAttrs::default().groups(2))
                .unwrap()
        },
    );
    assert_eq!(y, vec![6., 35.]);
}

#[test]
fn conv2d_gradients_by_hand() {
    // y = conv(x, w) for x 1x1x2x2 = [1 2; 3 4], w 1x1x1x1 = [5], L = Σ y:
    // x̄ = 5 everywhere, w̄ = Σ x = 10, b̄ = 4 (one per pixel).
    let mut b = Builder::new();
    let x = b
        .input("x", f64_type(&[1, 1, 2, 2]), InputKind::Data)
        .unwrap();
    let w = b
        .input("w", f64_type(&[1, 1, 1, 1]), InputKind::Param)
        .unwrap();
    let bias = b.input("b", f64_type(&[1]), InputKind::Param).unwrap();
    let y = b.conv2d(x, w, Some(bias), Conv2dAttrs::default()).unwrap();
    let l = b.sum(y, None).unwrap();
    let p = b.finish(&[l]).unwrap();
    let g = vjp(&p).unwrap();
    let out = run(
        &g.program,
        &[
            Tensor::f64([1, 1, 2, 2], vec![1., 2., 3., 4.]).unwrap(),
            Tensor::f64([1, 1, 1, 1], vec![5.]).unwrap(),
            Tensor::f64([1], vec![0.5]).unwrap(),
            Tensor::scalar(DType::F64, 1.0),
        ],
    );
    assert_eq!(out[0].to_f64_vec(), vec![52.0]); // 5·10 + 4·0.5
    assert_eq!(out[1].to_f64_vec(), vec![5.; 4]);
    assert_eq!(out[2].to_f64_vec(), vec![10.]);
    assert_eq!(out[3].to_f64_vec(), vec![4.]);
}

#[test]
fn pooling_by_hand() {
    let x: (&[usize], Vec<f64>) = (&[1, 1, 4, 4], one_to(16));
    let two = Pool2dAttrs::new([2, 2]);
    let sum = apply(std::slice::from_ref(&x), |b, v| {
        b.sum_pool2d(v[0], two).unwrap()
    });
    assert_eq!(sum, vec![14., 22., 46., 54.]);
    let avg = apply(std::slice::from_ref(&x), |b, v| {
        b.avg_pool2d(v[0], two).unwrap()
    });
    assert_eq!(avg, vec![3.5, 5.5, 11.5, 13.5]);
    let max = apply(std::slice::from_ref(&x), |b, v| {
        b.max_pool2d(v[0], two).unwrap()
    });
    assert_eq!(max, vec![6., 8., 14., 16.]);
    // Padding 1 on every side: the corner window holds x[0, 0] and three padding zeros, and
    // the average still divides by 4.
    let padded = two.pad(1);
    let avg = apply(std::slice::from_ref(&x), |b, v| {
        b.avg_pool2d(v[0], padded).unwrap()
    });
    assert_eq!(&avg[..3], &[0.25, (2. + 3.) / 4., 4. / 4.]);
    let sum = apply(std::slice::from_ref(&x), |b, v| {
        b.sum_pool2d(v[0], padded).unwrap()
    });
    assert_eq!(&sum[..3], &[1., 5., 4.]);
    // Max pooling ignores padding even when the input is negative.
    let neg: Vec<f64> = one_to(16).iter().map(|v| -v).collect();
    let max = apply(&[(&[1, 1, 4, 4], neg)], |b, v| {
        b.max_pool2d(v[0], padded).unwrap()
    });
    assert_eq!(&max[..3], &[-1., -2., -4.]);
}

/// The gradient of Σ max_pool2d(x) (kernel 2, stride 2) at a 2x2 input, from the kernel form
/// and from the lowered form.
fn max_pool_grads(x: Vec<f64>) -> (Vec<f64>, Vec<f64>, usize) {
    let attrs = Pool2dAttrs::new([2, 2]);
    let case = Case::new(
        Arc::new(catml::prim::MaxPool2d { attrs }),
        vec![f64_type(&[1, 1, 2, 2])],
        "max_pool2d 2x2",
    );
    let input = Tensor::f64([1, 1, 2, 2], x).unwrap();
    let seed = Tensor::f64([1, 1, 1, 1], vec![1.0]).unwrap();
    let grad = |p: &catml::ir::Program| {
        let g = vjp(p).unwrap();
        let (out, report) = eval_with_report(&g.program, &[input.clone(), seed.clone()]).unwrap();
        let ties = report.conventions.iter().map(|c| c.elements).max();
        (out[1].to_f64_vec(), ties.unwrap_or(0))
    };
    let (kernel, ties) = grad(&case.kernel_program());
    let (lowered, _) = grad(&case.lowered_program(true));
    (kernel, lowered, ties)
}

#[test]
fn max_pool_gradient_goes_to_the_maximum() {
    let (kernel, lowered, ties) = max_pool_grads(vec![1., 4., 3., 2.]);
    assert_eq!(kernel, vec![0., 1., 0., 0.]);
    assert_eq!(lowered, kernel);
    assert_eq!(ties, 0);
}

#[test]
fn max_pool_ties_go_to_the_first_maximum_and_are_reported() {
    // [1 3; 3 2]: positions (0,1) and (1,0) tie; (0,1) comes first in row-major order.
    let (kernel, lowered, ties) = max_pool_grads(vec![1., 3., 3., 2.]);
    assert_eq!(kernel, vec![0., 1., 0., 0.]);
    assert_eq!(lowered, kernel);
    assert_eq!(ties, 1);
    let (kernel, lowered, _) = max_pool_grads(vec![7., 7., 7., 7.]);
    assert_eq!(kernel, vec![1., 0., 0., 0.]);
    assert_eq!(lowered, kernel);
}

#[test]
fn max_pool_reports_each_tied_window_under_its_convention() {
    // Three 1x2 windows along a row: [2 2 | 1 5 | 0 0] has two tied windows.
    let mut b = Builder::new();
    let x = b
        .input("x", f64_type(&[1, 1, 1, 6]), InputKind::Data)
        .unwrap();
    let y = b.max_pool2d(x, Pool2dAttrs::new([1, 2])).unwrap();
    let p = b.finish(&[y]).unwrap();
    let input = Tensor::f64([1, 1, 1, 6], vec![2., 2., 1., 5., 0., 0.]).unwrap();
    let (out, report) = eval_with_report(&p, &[input]).unwrap();
    assert_eq!(out[0].to_f64_vec(), vec![2., 5., 0.]);
    assert_eq!(report.conventions.len(), 1);
    let hit = &report.conventions[0];
    assert_eq!((hit.op.as_str(), hit.elements), ("max_pool2d", 2));
    assert_eq!(
        hit.convention,
        "convention: max ties: the derivative goes to the first maximal element in row-major \
         window order"
    );
}

// ---------------------------------------------------------------- costs and serialisation

#[test]
fn conv_flops_count_two_per_multiply_add_plus_bias() {
    let mut b = Builder::new();
    let x = b
        .input("x", f64_type(&[32, 3, 32, 32]), InputKind::Data)
        .unwrap();
    let w = b
        .input("w", f64_type(&[16, 3, 3, 3]), InputKind::Param)
        .unwrap();
    let bias = b.input("b", f64_type(&[16]), InputKind::Param).unwrap();
    let y = b
        .conv2d(x, w, Some(bias), Conv2dAttrs::default().pad(1))
        .unwrap();
    let p = b.finish(&[y]).unwrap();
    let outputs = 32 * 16 * 32 * 32;
    assert_eq!(cost(&p).flops, outputs * (2 * 27 + 1));
}

#[test]
fn every_composite_rebuilds_from_its_attributes() {
    let mut r = rng(9);
    let mut all = conv_family(&mut r, 2);
    all.extend(pool_cases(&mut r).into_iter().map(|(c, _)| c));
    for case in all {
        let prim = &case.prim;
        let rebuilt = builtins()
            .construct(prim.name(), &prim.attrs())
            .unwrap_or_else(|| panic!("`{}` is not registered", prim.name()))
            .unwrap_or_else(|e| panic!("{}: {e}", case.label));
        assert!(catml::ir::same_prim(&**prim, &*rebuilt), "{}", case.label);
    }
}

#[test]
fn conv_gradient_programs_round_trip_through_lensir_json() {
    let mut r = rng(10);
    let (_, case) = conv_case(&mut r, 2, true);
    let g = vjp(&vjp(&case.kernel_program()).unwrap().program).unwrap();
    let text = json::to_string(&g.program);
    let back = json::from_str(&text, builtins()).unwrap();
    assert_eq!(back, g.program);
    assert!(text.contains("conv2d_input_grad") && text.contains("conv2d_weight_grad"));
}

// ---------------------------------------------------------------- rejections

/// The type error of applying `f` to inputs of these dims.
fn rejection(
    dims: &[&[usize]],
    f: impl FnOnce(&mut Builder, &[catml::ir::Var]) -> Result<catml::ir::Var, catml::ir::TypeError>,
) -> String {
    let mut b = Builder::new();
    let vars: Vec<_> = dims
        .iter()
        .enumerate()
        .map(|(i, d)| {
            b.input(&format!("x{i}"), f64_type(d), InputKind::Data)
                .unwrap()
        })
        .collect();
    match f(&mut b, &vars) {
        Ok(_) => panic!("accepted"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn conv_rejects_bad_shapes_and_attributes() {
    let conv2d = |a: Conv2dAttrs| {
        move |b: &mut Builder, v: &[catml::ir::Var]| b.conv2d(v[0], v[1], v.get(2).copied(), a)
    };
    let d = Conv2dAttrs::default();
    let cases: Vec<(Vec<&[usize]>, Conv2dAttrs, &str)> = vec![
        (
            vec![&[1, 1, 2, 2], &[1, 1, 3, 3]],
            d,
            "kernel extent 3 (kernel 3, dilation 1) is larger than the padded input 2 \
             (size 2 + padding 0 + 0) on axis H",
        ),
        (
            vec![&[1, 1, 5, 4], &[1, 1, 3, 3]],
            d.dilation([1, 2]),
            "kernel extent 5 (kernel 3, dilation 2) is larger than the padded input 4 \
             (size 4 + padding 0 + 0) on axis W",
        ),
        (
            vec![&[1, 3, 4, 4], &[2, 1, 1, 1]],
            d.groups(2),
            "attribute `groups`: input channels 3 are not divisible by groups 2",
        ),
        (
            vec![&[1, 4, 4, 4], &[3, 2, 1, 1]],
            d.groups(2),
            "attribute `groups`: output channels 3 are not divisible by groups 2",
        ),
        (
            vec![&[1, 4, 4, 4], &[2, 4, 1, 1]],
            d.groups(2),
            "operand 1 has type f64[2, 4, 1, 1], expected weight dim 1 = input channels / \
             groups = 4 / 2 = 2",
        ),
        (
            vec![&[1, 1, 4, 4], &[1, 1, 1, 1]],
            d.stride([0, 1]),
            "attribute `stride`: must be positive on axis H, found 0",
        ),
        (
            vec![&[1, 1, 4, 4], &[1, 1, 1, 1]],
            d.dilation([1, 0]),
            "attribute `dilation`: must be positive on axis W, found 0",
        ),
        (
            vec![&[1, 1, 4, 4], &[1, 1, 1, 1]],
            d.groups(0),
            "attribute `groups`: must be positive, found 0",
        ),
        (
            vec![&[1, 1, 4], &[1, 1, 1, 1]],
            d,
            "operand 0 has type f64[1, 1, 4], expected a float (N, C, H, W) input (rank 4)",
        ),
        (
            vec![&[1, 1, 4, 4], &[1, 1, 1, 1], &[2]],
            d,
            "operand 2 has type f64[2], expected a bias f64[1] (one per output channel)",
        ),
    ];
    for (dims, attrs, expected) in cases {
        assert_eq!(
            rejection(&dims, conv2d(attrs)),
            expected,
            "{dims:?} {attrs:?}"
        );
    }
    let conv1d = rejection(&[&[1, 2, 3], &[1, 2, 2]], |b, v| {
        let attrs = Conv1dAttrs {
            stride: 0,
            ..Conv1dAttrs::default()
        };
        b.conv1d(v[0], v[1], None, attrs)
    });
    assert_eq!(
        conv1d,
        "attribute `stride`: must be positive on axis W, found 0"
    );
}

#[test]
fn pooling_rejects_bad_attributes() {
    let x: &[usize] = &[1, 1, 3, 3];
    let sum = rejection(&[x], |b, v| b.sum_pool2d(v[0], Pool2dAttrs::new([4, 1])));
    assert_eq!(
        sum,
        "kernel extent 4 (kernel 4, dilation 1) is larger than the padded input 3 (size 3 + \
         padding 0 + 0) on axis H"
    );
    let zero = rejection(&[x], |b, v| {
        b.avg_pool2d(v[0], Pool2dAttrs::new([2, 2]).stride([1, 0]))
    });
    assert_eq!(
        zero,
        "attribute `stride`: must be positive on axis W, found 0"
    );
    let kernel = rejection(&[x], |b, v| b.sum_pool2d(v[0], Pool2dAttrs::new([0, 2])));
    assert_eq!(
        kernel,
        "attribute `kernel`: must be positive on axis H, found 0"
    );
    let max = rejection(&[x], |b, v| {
        b.max_pool2d(v[0], Pool2dAttrs::new([2, 2]).padding([[0, 0], [2, 0]]))
    });
    assert_eq!(
        max,
        "attribute `padding`: max pooling needs padding below the kernel size 2 on each side of \
         axis W so that every window holds input, found [2, 0]"
    );
}

#[test]
fn registry_rejects_malformed_attributes() {
    let build = |name: &str, attrs: serde_json::Value| -> String {
        match builtins().construct(name, attrs.as_object().unwrap()) {
            Some(Err(e)) => e.to_string(),
            Some(Ok(p)) => panic!("accepted {p:?}"),
            None => panic!("unknown {name}"),
        }
    };
    assert_eq!(
        build("conv2d", serde_json::json!({"stride": [1]})),
        "attribute `stride`: expected 2 entries, found 1"
    );
    assert_eq!(
        build("conv1d", serde_json::json!({"padding": [1, 1]})),
        "attribute `padding`: expected 1 pairs [before, after] of non-negative integers, found \
         [1,1]"
    );
    assert_eq!(
        build("conv2d", serde_json::json!({"group": 2})),
        "attribute `group`: unknown attribute"
    );
    assert_eq!(
        build("max_pool2d", serde_json::json!({"stride": [1, 1]})),
        "attribute `kernel`: missing"
    );
    assert_eq!(
        build("conv2d_input_grad", serde_json::json!({})),
        "attribute `input_size`: missing"
    );
}
