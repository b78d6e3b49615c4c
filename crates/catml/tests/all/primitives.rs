//! Numerics of every built-in primitive: f64 eval against hand-computed values, f32 against
//! f64 within a tolerance derived from f32 epsilon, and exact rational eval against f64 eval
//! where the f64 computation is exact (small dyadic values).

use std::sync::Arc;

use catml::interp::{self, RationalError};
use catml::ir::{Builder, InputKind, Program, Var};
use catml::prim::{MatMul, Ops};
use catml::tensor::{rational_from_f64, DType, RArray, Rational, Tensor, TensorType};

type Build = fn(&mut Builder, &[Var], DType) -> Var;

/// One primitive applied to f64 inputs, with its hand-computed result.
struct Case {
    name: &'static str,
    inputs: Vec<(Vec<usize>, Vec<f64>)>,
    build: Build,
    dims: Vec<usize>,
    expected: Vec<f64>,
    /// Exact in f64 and over the rationals (ring operations on small dyadic values); otherwise
    /// compared within a few ulps and not evaluated exactly.
    exact: bool,
    /// Longest sum inside one output element (the f32 error grows with it).
    terms: usize,
}

fn case(
    name: &'static str,
    inputs: &[(&[usize], &[f64])],
    build: Build,
    dims: &[usize],
    expected: &[f64],
) -> Case {
    Case {
        name,
        inputs: inputs
            .iter()
            .map(|(s, d)| (s.to_vec(), d.to_vec()))
            .collect(),
        build,
        dims: dims.to_vec(),
        expected: expected.to_vec(),
        exact: true,
        terms: 1,
    }
}

impl Case {
    fn transcendental(mut self) -> Case {
        self.exact = false;
        self
    }
    fn terms(mut self, n: usize) -> Case {
        self.terms = n;
        self
    }
}

const A23: &[f64] = &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0];

fn cases() -> Vec<Case> {
    let ln2 = std::f64::consts::LN_2;
    let ln3 = 3f64.ln();
    vec![
        case(
            "constant",
            &[],
            |b, _, d| {
                b.constant(Tensor::from_f64s(d, [2], vec![0.5, -3.0]).unwrap())
                    .unwrap()
            },
            &[2],
            &[0.5, -3.0],
        ),
        case(
            "add",
            &[(&[3], &[1.0, 2.0, 3.0]), (&[3], &[0.5, -1.0, 4.0])],
            |b, x, _| b.add(x[0], x[1]).unwrap(),
            &[3],
            &[1.5, 1.0, 7.0],
        ),
        case(
            "sub",
            &[(&[3], &[1.0, 2.0, 3.0]), (&[3], &[0.5, -1.0, 4.0])],
            |b, x, _| b.sub(x[0], x[1]).unwrap(),
            &[3],
            &[0.5, 3.0, -1.0],
        ),
        case(
            "neg",
            &[(&[3], &[1.0, -2.5, 0.0])],
            |b, x, _| b.neg(x[0]).unwrap(),
            &[3],
            &[-1.0, 2.5, -0.0],
        ),
        case(
            "mul",
            &[(&[3], &[1.5, 2.0, -3.0]), (&[3], &[2.0, -0.25, 4.0])],
            |b, x, _| b.mul(x[0], x[1]).unwrap(),
            &[3],
            &[3.0, -0.5, -12.0],
        ),
        case(
            "matmul",
            &[
                (&[2, 3], A23),
                (&[3, 2], &[7.0, 8.0, 9.0, 10.0, 11.0, 12.0]),
            ],
            |b, x, _| b.matmul(x[0], x[1]).unwrap(),
            &[2, 2],
            &[58.0, 64.0, 139.0, 154.0],
        )
        .terms(3),
        case(
            "matmul transpose_a",
            &[(&[2, 3], A23), (&[2, 2], &[1.0, 2.0, 3.0, 4.0])],
            |b, x, _| {
                b.op(Arc::new(MatMul::new(true, false)), &[x[0], x[1]])
                    .unwrap()
            },
            &[3, 2],
            &[13.0, 18.0, 17.0, 24.0, 21.0, 30.0],
        )
        .terms(2),
        case(
            "matmul transpose_b",
            &[(&[2, 3], A23), (&[2, 3], &[1.0, 0.0, 1.0, 0.0, 1.0, 0.0])],
            |b, x, _| {
                b.op(Arc::new(MatMul::new(false, true)), &[x[0], x[1]])
                    .unwrap()
            },
            &[2, 2],
            &[4.0, 2.0, 10.0, 5.0],
        )
        .terms(3),
        case(
            "matmul transpose_a transpose_b",
            &[(&[2, 3], A23), (&[3, 2], &[1.0, 0.0, 0.0, 1.0, 1.0, 1.0])],
            |b, x, _| {
                b.op(Arc::new(MatMul::new(true, true)), &[x[0], x[1]])
                    .unwrap()
            },
            &[3, 3],
            &[1.0, 4.0, 5.0, 2.0, 5.0, 7.0, 3.0, 6.0, 9.0],
        )
        .terms(2),
        case(
            "exp",
            &[(&[3], &[0.0, 1.0, ln2])],
            |b, x, _| b.exp(x[0]).unwrap(),
            &[3],
            &[1.0, std::f64::consts::E, 2.0],
        )
        .transcendental(),
        case(
            "log",
            &[(&[3], &[1.0, std::f64::consts::E, 0.5])],
            |b, x, _| b.log(x[0]).unwrap(),
            &[3],
            &[0.0, 1.0, -ln2],
        )
        .transcendental(),
        case(
            "tanh",
            &[(&[4], &[0.0, 1.0, -1.0, 30.0])],
            |b, x, _| b.tanh(x[0]).unwrap(),
            &[4],
            &[0.0, 0.7615941559557649, -0.7615941559557649, 1.0],
        )
        .transcendental(),
        case(
            "sigmoid",
            &[(&[5], &[0.0, ln3, -ln3, 800.0, -800.0])],
            |b, x, _| b.sigmoid(x[0]).unwrap(),
            &[5],
            &[0.5, 0.75, 0.25, 1.0, 0.0],
        )
        .transcendental(),
        case(
            "relu",
            &[(&[4], &[-1.0, 0.0, 2.5, -0.0])],
            |b, x, _| b.relu(x[0]).unwrap(),
            &[4],
            &[0.0, 0.0, 2.5, 0.0],
        ),
        case(
            "heaviside",
            &[(&[4], &[-1.0, 0.0, 2.5, 0.125])],
            |b, x, _| b.heaviside(x[0]).unwrap(),
            &[4],
            &[0.0, 0.0, 1.0, 1.0],
        ),
        case(
            "reciprocal",
            &[(&[3], &[2.0, -4.0, 0.5])],
            |b, x, _| b.reciprocal(x[0]).unwrap(),
            &[3],
            &[0.5, -0.25, 2.0],
        ),
        case(
            "rsqrt",
            &[(&[3], &[4.0, 0.25, 16.0])],
            |b, x, _| b.rsqrt(x[0]).unwrap(),
            &[3],
            &[0.5, 2.0, 0.25],
        )
        .transcendental(),
        case(
            "sum of all axes",
            &[(&[2, 3], A23)],
            |b, x, _| b.sum(x[0], None).unwrap(),
            &[],
            &[21.0],
        )
        .terms(6),
        case(
            "sum over axis 0",
            &[(&[2, 3], A23)],
            |b, x, _| b.sum(x[0], Some(vec![0])).unwrap(),
            &[3],
            &[5.0, 7.0, 9.0],
        )
        .terms(2),
        case(
            "sum over axis 1",
            &[(&[2, 3], A23)],
            |b, x, _| b.sum(x[0], Some(vec![1])).unwrap(),
            &[2],
            &[6.0, 15.0],
        )
        .terms(3),
        case(
            "sum over axes 2 and 0 of a rank-3 tensor",
            &[(&[2, 2, 2], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0])],
            |b, x, _| b.sum(x[0], Some(vec![2, 0])).unwrap(),
            &[2],
            &[14.0, 22.0],
        )
        .terms(4),
        case(
            "broadcast of a scalar",
            &[(&[], &[1.5])],
            |b, x, _| b.broadcast(x[0], [2, 2], vec![]).unwrap(),
            &[2, 2],
            &[1.5, 1.5, 1.5, 1.5],
        ),
        case(
            "broadcast of a row",
            &[(&[3], &[1.0, 2.0, 3.0])],
            |b, x, _| b.broadcast(x[0], [2, 3], vec![1]).unwrap(),
            &[2, 3],
            &[1.0, 2.0, 3.0, 1.0, 2.0, 3.0],
        ),
        case(
            "broadcast of a column",
            &[(&[2], &[1.0, 2.0])],
            |b, x, _| b.broadcast(x[0], [2, 3], vec![0]).unwrap(),
            &[2, 3],
            &[1.0, 1.0, 1.0, 2.0, 2.0, 2.0],
        ),
        case(
            "broadcast of a size-1 axis",
            &[(&[2, 1], &[1.0, 2.0])],
            |b, x, _| b.broadcast(x[0], [2, 2], vec![0, 1]).unwrap(),
            &[2, 2],
            &[1.0, 1.0, 2.0, 2.0],
        ),
        case(
            "broadcast_rows",
            &[(&[3], &[1.0, -2.0, 3.0])],
            |b, x, _| b.broadcast_rows(x[0], 2).unwrap(),
            &[2, 3],
            &[1.0, -2.0, 3.0, 1.0, -2.0, 3.0],
        ),
        case(
            "reshape",
            &[(&[2, 3], A23)],
            |b, x, _| b.reshape(x[0], [3, 1, 2]).unwrap(),
            &[3, 1, 2],
            A23,
        ),
        case(
            "permute (transpose)",
            &[(&[2, 3], A23)],
            |b, x, _| b.permute(x[0], vec![1, 0]).unwrap(),
            &[3, 2],
            &[1.0, 4.0, 2.0, 5.0, 3.0, 6.0],
        ),
        case(
            "permute of rank 3",
            &[(&[1, 2, 3], &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0])],
            |b, x, _| b.permute(x[0], vec![2, 0, 1]).unwrap(),
            &[3, 1, 2],
            &[0.0, 3.0, 1.0, 4.0, 2.0, 5.0],
        ),
        case(
            "gather rows with repeats",
            &[(&[3, 2], A23)],
            |b, x, _| b.gather(x[0], 0, vec![2, 0, 2]).unwrap(),
            &[3, 2],
            &[5.0, 6.0, 1.0, 2.0, 5.0, 6.0],
        ),
        case(
            "gather columns",
            &[(&[3, 2], A23)],
            |b, x, _| b.gather(x[0], 1, vec![1, 1]).unwrap(),
            &[3, 2],
            &[2.0, 2.0, 4.0, 4.0, 6.0, 6.0],
        ),
        case(
            "scatter_add accumulates repeated indices",
            &[(&[3, 2], A23)],
            |b, x, _| b.scatter_add(x[0], 0, vec![1, 0, 1], 2).unwrap(),
            &[2, 2],
            &[3.0, 4.0, 6.0, 8.0],
        )
        .terms(2),
        case(
            "scatter_add leaves unhit entries zero",
            &[(&[2, 2], &[1.0, 2.0, 3.0, 4.0])],
            |b, x, _| b.scatter_add(x[0], 1, vec![2, 0], 4).unwrap(),
            &[2, 4],
            &[2.0, 0.0, 1.0, 0.0, 4.0, 0.0, 3.0, 0.0],
        ),
        case(
            "concat along axis 0",
            &[(&[1, 2], &[1.0, 2.0]), (&[2, 2], &[3.0, 4.0, 5.0, 6.0])],
            |b, x, _| b.concat(&[x[0], x[1]], 0).unwrap(),
            &[3, 2],
            &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
        ),
        case(
            "concat along axis 1",
            &[
                (&[2, 1], &[1.0, 2.0]),
                (&[2, 2], &[3.0, 4.0, 5.0, 6.0]),
                (&[2, 1], &[7.0, 8.0]),
            ],
            |b, x, _| b.concat(&[x[0], x[1], x[2]], 1).unwrap(),
            &[2, 4],
            &[1.0, 3.0, 4.0, 7.0, 2.0, 5.0, 6.0, 8.0],
        ),
        case(
            "convert to the other float type and back",
            &[(&[3], &[0.5, -2.25, 3.0])],
            |b, x, d| {
                let other = if d == DType::F64 {
                    DType::F32
                } else {
                    DType::F64
                };
                let y = b.convert(x[0], other).unwrap();
                b.convert(y, d).unwrap()
            },
            &[3],
            &[0.5, -2.25, 3.0],
        ),
        case(
            "linear of a vector",
            &[
                (&[2], &[1.0, 2.0]),
                (&[3, 2], &[1.0, 0.0, 0.0, 1.0, 1.0, 1.0]),
                (&[3], &[0.5, -0.5, 1.0]),
            ],
            |b, x, _| b.linear(x[0], x[1], x[2]).unwrap(),
            &[3],
            &[1.5, 1.5, 4.0],
        )
        .terms(3),
        case(
            "linear of a batch",
            &[
                (&[2, 2], &[1.0, 2.0, 3.0, -1.0]),
                (&[3, 2], &[1.0, 0.0, 0.0, 1.0, 1.0, 1.0]),
                (&[3], &[0.5, -0.5, 1.0]),
            ],
            |b, x, _| b.linear(x[0], x[1], x[2]).unwrap(),
            &[2, 3],
            &[1.5, 1.5, 4.0, 3.5, -1.5, 3.0],
        )
        .terms(3),
        case(
            "stop_gradient",
            &[(&[2], &[1.25, -7.0])],
            |b, x, _| b.stop_gradient(x[0]).unwrap(),
            &[2],
            &[1.25, -7.0],
        ),
    ]
}

/// The case's program at dtype `d`, and its inputs (rounded to `d`).
fn program(c: &Case, d: DType) -> (Program, Vec<Tensor>) {
    let mut b = Builder::new();
    let mut vars = Vec::new();
    let mut inputs = Vec::new();
    for (i, (shape, data)) in c.inputs.iter().enumerate() {
        let ty = TensorType::new(d, shape.clone());
        vars.push(b.input(&format!("x{i}"), ty, InputKind::Data).unwrap());
        inputs.push(Tensor::from_f64s(d, shape.clone(), data.clone()).unwrap());
    }
    let y = (c.build)(&mut b, &vars, d);
    (b.finish(&[y]).unwrap(), inputs)
}

fn eval_one(p: &Program, inputs: &[Tensor]) -> Tensor {
    let mut out = interp::eval(p, inputs).unwrap();
    assert_eq!(out.len(), 1);
    out.remove(0)
}

/// Composite primitives: their values are checked against their lowerings into the core fragment
/// in `composites.rs` and `conv_pool.rs` (convolution and pooling also against hand-computed
/// values there), so this table holds the core primitives.
const COMPOSITES: &[&str] = &[
    "per_example",
    "attention_probs",
    "avg_pool2d",
    "batch_matmul",
    "conv1d",
    "conv1d_input_grad",
    "conv1d_weight_grad",
    "conv2d",
    "conv2d_input_grad",
    "conv2d_weight_grad",
    "cross_entropy",
    "layer_norm",
    "log_softmax",
    "masked_softmax",
    "max_pool2d",
    "max_pool2d_scatter",
    "max_pool2d_select",
    "max_weights",
    "mse",
    "one_hot",
    "reduce_max",
    "scatter_rows",
    "sdpa",
    "softmax",
    "softmax_pullback",
    "sum_pool2d",
    "sum_pool2d_transpose",
    "take",
    "tanh_pullback",
];

/// Primitives whose values are checked by hand in their own files: `statistics.rs` (mean,
/// argmax and batch_norm, the composites also against their lowerings) and `random.rs`.
const OWN_FILES: &[&str] = &[
    // The loop and the reading of its results: values against unrolled steps in catml-core's
    // prim/scan/tests.rs and in scan.rs here.
    "scan",
    "unpack",
    // Comparisons, connectives and where: values in catml-core's prim/compare/tests.rs.
    "equal",
    "less",
    "less_equal",
    "greater",
    "greater_equal",
    "logical_not",
    "logical_and",
    "logical_or",
    "logical_xor",
    "where",
    "argmax",
    "batch_norm",
    "dropout",
    "mean",
    "random_fold_in",
    "random_normal",
    "random_split",
    "random_uniform",
];

#[test]
fn every_builtin_primitive_has_a_case() {
    let mut used: Vec<String> = cases()
        .iter()
        .flat_map(|c| {
            let (p, _) = program(c, DType::F64);
            p.nodes()
                .iter()
                .map(|n| n.prim.name().to_string())
                .collect::<Vec<_>>()
        })
        .collect();
    // Elementwise rows have their values checked from the tables (elementwise_rows.rs).
    let rows =
        |n: &str| catml::prim::unary_row(n).is_some() || catml::prim::binary_row(n).is_some();
    used.retain(|n| !rows(n));
    used.sort();
    used.dedup();
    let registry = catml::prim::builtins();
    for c in COMPOSITES {
        assert!(registry.contains(c), "{c} is not registered");
    }
    let mut all: Vec<String> = registry
        .names()
        .filter(|n| !COMPOSITES.contains(n) && !OWN_FILES.contains(n) && !rows(n))
        .map(String::from)
        .collect();
    all.sort();
    assert_eq!(used, all);
}

#[test]
fn f64_eval_matches_hand_computed_values() {
    for c in cases() {
        let (p, inputs) = program(&c, DType::F64);
        let y = eval_one(&p, &inputs);
        assert_eq!(y.dims(), c.dims.as_slice(), "{}", c.name);
        let got = y.to_f64_vec();
        if c.exact {
            assert_eq!(got, c.expected, "{}", c.name);
            // -0.0 == 0.0 above; signs of zeros are part of the value too.
            let signs: Vec<bool> = got.iter().map(|v| v.is_sign_negative()).collect();
            let want: Vec<bool> = c.expected.iter().map(|v| v.is_sign_negative()).collect();
            assert_eq!(signs, want, "{}: signs of zeros", c.name);
        } else {
            for (g, e) in got.iter().zip(&c.expected) {
                let tol = 4.0 * f64::EPSILON * e.abs().max(f64::MIN_POSITIVE);
                assert!(
                    (g - e).abs() <= tol,
                    "{}: {got:?} vs {:?}",
                    c.name,
                    c.expected
                );
            }
        }
    }
}

/// f32 results stay within a few roundings of the f64 results on the same (f32-representable)
/// inputs: |y32 - y64| <= (terms + 2) * eps32 * (|y64| + 1).
#[test]
fn f32_eval_agrees_with_f64_within_epsilon() {
    for c in cases() {
        let (p32, x32) = program(&c, DType::F32);
        let widened: Vec<Tensor> = x32
            .iter()
            .map(|t| Tensor::f64(t.dims().to_vec(), t.to_f64_vec()).unwrap())
            .collect();
        let (p64, _) = program(&c, DType::F64);
        let y32 = eval_one(&p32, &x32);
        let y64 = eval_one(&p64, &widened);
        assert_eq!(y32.dtype(), DType::F32, "{}", c.name);
        assert_eq!(y32.dims(), y64.dims(), "{}", c.name);
        let bound = (c.terms as f64 + 2.0) * f32::EPSILON as f64;
        for (a, b) in y32.to_f64_vec().iter().zip(y64.to_f64_vec()) {
            assert!(
                (a - b).abs() <= bound * (b.abs() + 1.0),
                "{}: f32 {a} vs f64 {b}",
                c.name
            );
        }
    }
}

fn to_rational(t: &Tensor) -> RArray {
    let data = t
        .to_f64_vec()
        .iter()
        .map(|&v| rational_from_f64(v).unwrap())
        .collect();
    RArray::new(t.dims().to_vec(), data).unwrap()
}

#[test]
fn rational_eval_equals_exact_f64_eval() {
    let mut checked = 0;
    for c in cases().into_iter().filter(|c| c.exact) {
        let (p, inputs) = program(&c, DType::F64);
        let y = eval_one(&p, &inputs);
        let exact_inputs: Vec<RArray> = inputs.iter().map(to_rational).collect();
        let r =
            interp::eval_rational(&p, &exact_inputs).unwrap_or_else(|e| panic!("{}: {e}", c.name));
        assert_eq!(r.len(), 1);
        assert_eq!(r[0], to_rational(&y), "{}", c.name);
        checked += 1;
    }
    assert_eq!(
        checked, 34,
        "every exact case is evaluated over the rationals"
    );
}

#[test]
fn rational_reciprocal_is_exact_where_f64_rounds() {
    let mut b = Builder::new();
    let x = b
        .input("x", TensorType::new(DType::F64, [2]), InputKind::Data)
        .unwrap();
    let r = b.reciprocal(x).unwrap();
    let y = b.mul(r, x).unwrap();
    let p = b.finish(&[r, y]).unwrap();
    let three = RArray::new(
        [2],
        vec![
            Rational::from_integer(3.into()),
            Rational::new((-2).into(), 7.into()),
        ],
    )
    .unwrap();
    let out = interp::eval_rational(&p, &[three]).unwrap();
    assert_eq!(
        out[0].data(),
        &[
            Rational::new(1.into(), 3.into()),
            Rational::new((-7).into(), 2.into())
        ]
    );
    let one = Rational::from_integer(1.into());
    assert_eq!(out[1].data(), &[one.clone(), one]);
    // In f64, 1/3 is rounded: the exact value is not the f64 value.
    let f = interp::eval(&p, &[Tensor::f64([2], vec![3.0, -2.0 / 7.0]).unwrap()]).unwrap();
    assert_ne!(
        to_rational(&f[0]).data()[0],
        Rational::new(1.into(), 3.into())
    );
}

#[test]
fn convert_to_f32_rounds_to_nearest() {
    let mut b = Builder::new();
    let x = b
        .input("x", TensorType::new(DType::F64, [2]), InputKind::Data)
        .unwrap();
    let y = b.convert(x, DType::F32).unwrap();
    let p = b.finish(&[y]).unwrap();
    let y = eval_one(&p, &[Tensor::f64([2], vec![0.1, 1.0 + 1e-12]).unwrap()]);
    assert_eq!(y, Tensor::f32([2], vec![0.1f32, 1.0]).unwrap());
    assert_eq!(y.to_f64_vec(), [0.10000000149011612, 1.0]);
}

#[test]
fn convert_from_i64_is_exact() {
    let mut b = Builder::new();
    let k = b
        .input("k", TensorType::new(DType::I64, [3]), InputKind::Data)
        .unwrap();
    let y = b.convert(k, DType::F64).unwrap();
    let p = b.finish(&[y]).unwrap();
    let k = Tensor::i64([3], vec![3, -2, 1 << 40]).unwrap();
    assert_eq!(
        eval_one(&p, &[k]),
        Tensor::f64([3], vec![3.0, -2.0, (1u64 << 40) as f64]).unwrap()
    );
}

#[test]
fn non_rational_primitive_is_named() {
    let mut b = Builder::new();
    let x = b
        .input("x", TensorType::new(DType::F64, [2]), InputKind::Data)
        .unwrap();
    let sq = b.mul(x, x).unwrap();
    let t = b.tanh(sq).unwrap();
    let e = b.exp(t).unwrap();
    let p = b.finish(&[e]).unwrap();
    let x = to_rational(&Tensor::f64([2], vec![0.5, 1.0]).unwrap());
    let err = interp::eval_rational(&p, &[x]).unwrap_err();
    assert_eq!(
        err,
        RationalError::NotRational {
            index: 1,
            name: "t.1".into(),
            op: "tanh".into()
        }
    );
    assert_eq!(
        err.to_string(),
        "node 1 `t.1` (tanh) is not a rational operation"
    );
}

#[test]
fn transcendental_primitives_are_not_rational() {
    for c in cases().into_iter().filter(|c| !c.exact) {
        let (p, inputs) = program(&c, DType::F64);
        let exact: Vec<RArray> = inputs.iter().map(to_rational).collect();
        match interp::eval_rational(&p, &exact) {
            Err(RationalError::NotRational { index: 0, op, .. }) => {
                assert_eq!(op, p.nodes()[0].prim.name(), "{}", c.name)
            }
            other => panic!("{}: expected NotRational, found {other:?}", c.name),
        }
    }
}

#[test]
fn rational_domain_and_shape_errors() {
    let mut b = Builder::new();
    let x = b
        .input("x", TensorType::new(DType::F64, [2]), InputKind::Data)
        .unwrap();
    let r = b.reciprocal(x).unwrap();
    let p = b.finish(&[r]).unwrap();
    let zero = to_rational(&Tensor::f64([2], vec![1.0, 0.0]).unwrap());
    let err = interp::eval_rational(&p, &[zero]).unwrap_err();
    assert!(
        matches!(err, RationalError::Kernel { index: 0, .. }),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "node 0 `t` (reciprocal): outside the admissible domain: reciprocal of 0 at element 1, expected a nonzero value"
    );
    let wrong = to_rational(&Tensor::f64([3], vec![1.0, 2.0, 3.0]).unwrap());
    let err = interp::eval_rational(&p, &[wrong]).unwrap_err();
    assert_eq!(err.to_string(), "input `x` has shape [3], expected [2]");
}

/// A constant made in code may hold an infinity; exact evaluation reports it, naming the node.
#[test]
fn rational_eval_of_a_non_finite_constant_is_an_error() {
    let mut b = Builder::new();
    let c = b
        .constant(Tensor::f64([2], vec![1.0, f64::NEG_INFINITY]).unwrap())
        .unwrap();
    let p = b.finish(&[c]).unwrap();
    let err = interp::eval_rational(&p, &[]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "node 0 `t` (constant): outside the admissible domain: constant -inf at element 1 is not finite, so not rational"
    );
}
