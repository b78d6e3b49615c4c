//! Every built-in primitive, through both transforms: the adjoint identity
//!   <u, J v> = <Jᵀ u, v>
//! between the JVP program and the independently written VJP program (docs/derivatives.md), on
//! random points of the op's admissible domain, and a central difference of the JVP for the
//! smooth ops.

use crate::common;

use catml::ad;
use catml::interp::{eval, eval_with_report};
use catml::ir::{Builder, InputKind, Program, RuleKind, TypeError, Var};
use catml::prim::{builtins, Ops};
use catml::tensor::{DType, Tensor, TensorType};
use common::{pairing, pairing_scale, rng, uniform, value_and_grad, value_and_tangent, Rng};

/// Rounding-level agreement of the two pairings, relative to Σ|u_i (Jv)_i|.
const ADJOINT_TOL: f64 = 1e-12;
const FD_STEP: f64 = 1e-6;
/// Central differences at step 1e-6 in f64 carry ~1e-10 rounding and O(h²) truncation.
const FD_TOL: f64 = 1e-7;

/// Where an op's inputs are drawn from.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Domain {
    /// [-2, 2)
    Any,
    /// [0.5, 2): log and rsqrt need x > 0.
    Positive,
    /// ±[0.5, 2): reciprocal needs x ≠ 0; relu and step are smooth away from 0.
    AwayFromZero,
    /// Values exactly representable in f32, so a round trip through f32 loses nothing.
    F32Exact,
}

type Build = Box<dyn Fn(&mut Builder, &[Var]) -> Result<Var, TypeError>>;

struct Case {
    name: &'static str,
    inputs: Vec<TensorType>,
    domain: Domain,
    /// Whether a central difference of the forward map checks the JVP: not for declared
    /// responses, nor for convert, whose f32 side cannot resolve a step of 1e-6.
    fd: bool,
    build: Build,
}

fn f64t(dims: &[usize]) -> TensorType {
    TensorType::new(DType::F64, dims.to_vec())
}

fn case(
    name: &'static str,
    inputs: &[&[usize]],
    domain: Domain,
    build: impl Fn(&mut Builder, &[Var]) -> Result<Var, TypeError> + 'static,
) -> Case {
    Case {
        name,
        inputs: inputs.iter().map(|d| f64t(d)).collect(),
        domain,
        fd: true,
        build: Box::new(build),
    }
}

impl Case {
    fn without_fd(self) -> Case {
        Case { fd: false, ..self }
    }
}

fn cases() -> Vec<Case> {
    use Domain::*;
    let mut v = vec![
        case("add", &[&[2, 3], &[2, 3]], Any, |b, x| b.add(x[0], x[1])),
        case("sub", &[&[2, 3], &[2, 3]], Any, |b, x| b.sub(x[0], x[1])),
        case("neg", &[&[2, 3]], Any, |b, x| b.neg(x[0])),
        case("per_example", &[&[3, 2, 3], &[2, 3]], Any, |b, x| {
            let inner = std::sync::Arc::new(catml::prim::Mul);
            let prim = catml::prim::batching::PerExample::new(inner, vec![true, false]);
            b.op(std::sync::Arc::new(prim), &[x[0], x[1]])
        }),
        case("scan", &[&[2], &[3, 2], &[2]], Any, |b, x| {
            // c' = tanh(c w + x_t), y_t = c' c': a carry, an x and a const.
            let t = f64t(&[2]);
            let mut body = Builder::new();
            let c = body.input("c", t.clone(), InputKind::Data).unwrap();
            let xt = body.input("x", t.clone(), InputKind::Data).unwrap();
            let w = body.input("w", t, InputKind::Data).unwrap();
            let cw = body.mul(c, w)?;
            let a = body.add(cw, xt)?;
            let c2 = body.tanh(a)?;
            let y = body.mul(c2, c2)?;
            let body = body.finish(&[c2, y]).unwrap();
            let s = catml::prim::scan::Scan::new(body, 3, 1, 1, 1)?;
            b.op(std::sync::Arc::new(s), &[x[0], x[1], x[2]])
        }),
        case("unpack", &[&[6]], Any, |b, x| {
            let u = catml::prim::scan::Unpack::new(1, [2, 2]);
            b.op(std::sync::Arc::new(u), &[x[0]])
        }),
        case("mul", &[&[2, 3], &[2, 3]], Any, |b, x| b.mul(x[0], x[1])),
        case("exp", &[&[2, 3]], Any, |b, x| b.exp(x[0])),
        case("log", &[&[2, 3]], Positive, |b, x| b.log(x[0])),
        case("tanh", &[&[2, 3]], Any, |b, x| b.tanh(x[0])),
        case("sigmoid", &[&[2, 3]], Any, |b, x| b.sigmoid(x[0])),
        case("relu", &[&[2, 3]], AwayFromZero, |b, x| b.relu(x[0])),
        case("heaviside", &[&[2, 3]], AwayFromZero, |b, x| {
            b.heaviside(x[0])
        }),
        case("reciprocal", &[&[2, 3]], AwayFromZero, |b, x| {
            b.reciprocal(x[0])
        }),
        case("rsqrt", &[&[2, 3]], Positive, |b, x| b.rsqrt(x[0])),
        case("sum all", &[&[2, 3, 4]], Any, |b, x| b.sum(x[0], None)),
        case("sum axis 0", &[&[2, 3, 4]], Any, |b, x| {
            b.sum(x[0], Some(vec![0]))
        }),
        case("sum axis 1", &[&[2, 3, 4]], Any, |b, x| {
            b.sum(x[0], Some(vec![1]))
        }),
        case("sum axes 2,0", &[&[2, 3, 4]], Any, |b, x| {
            b.sum(x[0], Some(vec![2, 0]))
        }),
        case("sum no axes", &[&[2, 3]], Any, |b, x| {
            b.sum(x[0], Some(vec![]))
        }),
        case("sum of a scalar", &[&[]], Any, |b, x| b.sum(x[0], None)),
        case("broadcast rows", &[&[3]], Any, |b, x| {
            b.broadcast(x[0], vec![2, 3], vec![1])
        }),
        case("broadcast scalar", &[&[]], Any, |b, x| {
            b.broadcast(x[0], vec![2, 3], vec![])
        }),
        case("broadcast size-1 dim", &[&[2, 1]], Any, |b, x| {
            b.broadcast(x[0], vec![2, 3], vec![0, 1])
        }),
        case("broadcast size-1 into new axes", &[&[1, 3]], Any, |b, x| {
            b.broadcast(x[0], vec![2, 4, 3], vec![1, 2])
        }),
        case("broadcast keeping a size-1 dim", &[&[1, 3]], Any, |b, x| {
            b.broadcast(x[0], vec![1, 3, 2], vec![0, 1])
        }),
        case("broadcast_rows", &[&[3]], Any, |b, x| {
            b.broadcast_rows(x[0], 4)
        }),
        case("reshape", &[&[2, 3]], Any, |b, x| {
            b.reshape(x[0], vec![3, 2])
        }),
        case("reshape rank up", &[&[6]], Any, |b, x| {
            b.reshape(x[0], vec![1, 2, 3])
        }),
        case("permute", &[&[2, 3, 4]], Any, |b, x| {
            b.permute(x[0], vec![2, 0, 1])
        }),
        case("transpose", &[&[2, 3]], Any, |b, x| b.transpose(x[0])),
        case("gather repeated", &[&[4, 3]], Any, |b, x| {
            b.gather(x[0], 0, vec![1, 1, 3, 0, 1])
        }),
        case("gather axis 1", &[&[2, 3]], Any, |b, x| {
            b.gather(x[0], 1, vec![2, 2, 0])
        }),
        case("scatter_add repeated", &[&[5, 2]], Any, |b, x| {
            b.scatter_add(x[0], 0, vec![0, 3, 0, 1, 3], 4)
        }),
        case("scatter_add axis 1", &[&[2, 3]], Any, |b, x| {
            b.scatter_add(x[0], 1, vec![2, 2, 0], 4)
        }),
        case("concat 2", &[&[2, 3], &[1, 3]], Any, |b, x| b.concat(x, 0)),
        case("concat 3", &[&[2, 1], &[2, 3], &[2, 2]], Any, |b, x| {
            b.concat(x, 1)
        }),
        case("concat with a reused operand", &[&[2, 3]], Any, |b, x| {
            b.concat(&[x[0], x[0]], 1)
        }),
        case("linear 1D", &[&[3], &[4, 3], &[4]], Any, |b, x| {
            b.linear(x[0], x[1], x[2])
        }),
        case("linear 2D", &[&[2, 3], &[4, 3], &[4]], Any, |b, x| {
            b.linear(x[0], x[1], x[2])
        }),
        // A declared response, not the derivative (docs/derivatives.md): no difference check.
        case("stop_gradient", &[&[2, 3]], Any, |b, x| {
            b.stop_gradient(x[0])
        })
        .without_fd(),
        case("constant", &[&[2, 3]], Any, |b, x| {
            let c =
                b.constant(Tensor::f64([2, 3], vec![0.5, -1.0, 2.0, 0.25, 3.0, -0.75]).unwrap())?;
            b.mul(x[0], c)
        }),
    ];
    for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
        // op(A) is (2, 3), op(B) is (3, 4).
        let a: &[usize] = if ta { &[3, 2] } else { &[2, 3] };
        let bm: &[usize] = if tb { &[4, 3] } else { &[3, 4] };
        v.push(case(
            ["matmul", "matmul Aᵀ", "matmul Bᵀ", "matmul AᵀBᵀ"][ta as usize + 2 * tb as usize],
            &[a, bm],
            Any,
            move |b, x| {
                b.op(
                    std::sync::Arc::new(catml::prim::MatMul::new(ta, tb)),
                    &[x[0], x[1]],
                )
            },
        ));
    }
    v.push(Case {
        name: "convert f32 to f64",
        inputs: vec![TensorType::new(DType::F32, [2, 3])],
        domain: F32Exact,
        fd: false,
        build: Box::new(|b, x| b.convert(x[0], DType::F64)),
    });
    v.push(Case {
        name: "convert f64 to f32",
        inputs: vec![f64t(&[2, 3])],
        domain: F32Exact,
        fd: false,
        build: Box::new(|b, x| b.convert(x[0], DType::F32)),
    });
    v.extend(composite_cases());
    v.extend(window_cases());
    v.extend(row_cases());
    v.extend(statistics_and_random_cases());
    v.extend(selection_cases());
    v
}

/// One case per elementwise row, from the tables (a new row needs no case here), with the
/// row's example attributes and operands inside its domain and away from its kinks.
fn row_cases() -> Vec<Case> {
    use catml::ir::RuleKind;
    use catml::prim::elementwise::Domain as RowDomain;
    use catml::prim::{BINARY_ROWS, UNARY_ROWS};
    let domain_of = |d: &[RowDomain], kinked: bool| {
        if d.contains(&RowDomain::NonZero) {
            Domain::AwayFromZero
        } else if d.iter().any(|d| *d != RowDomain::All) {
            Domain::Positive
        } else if kinked {
            Domain::AwayFromZero
        } else {
            Domain::Any
        }
    };
    let mut v = Vec::new();
    for row in UNARY_ROWS {
        let attrs = (row.sample_attrs)(&mut || 0.5);
        let domain = domain_of(&[(row.domain)(&attrs)], row.kink.is_some());
        let mut c = case(row.name, &[&[2, 3]], domain, move |b, x| {
            b.unary_row(row.name, &attrs, x[0])
        });
        c.fd = !matches!(row.rule, RuleKind::Declared(_));
        v.push(c);
    }
    for row in BINARY_ROWS {
        let domain = domain_of(&row.domains, row.kink.is_some());
        let mut c = case(row.name, &[&[2, 3], &[2, 3]], domain, move |b, x| {
            b.binary_row(row.name, x[0], x[1])
        });
        c.fd = !matches!(row.rule, RuleKind::Declared(_));
        v.push(c);
    }
    v
}

/// Convolutions, pooling and the primitives their rules emit, each in a forward program.
fn window_cases() -> Vec<Case> {
    use catml::prim::{
        Conv1dAttrs, Conv2dAttrs, ConvInputGrad, ConvSpec, ConvWeightGrad, MaxPool2dScatter,
        MaxPool2dSelect, Pool2dAttrs, SumPool2dTranspose,
    };
    use std::sync::Arc;
    use Domain::*;
    let pool = Pool2dAttrs::new([2, 2]);
    let spec2: ConvSpec = Conv2dAttrs::default().into();
    let spec1: ConvSpec = Conv1dAttrs::default().into();
    vec![
        case(
            "conv2d",
            &[&[1, 2, 4, 4], &[3, 2, 2, 2], &[3]],
            Any,
            |b, x| b.conv2d(x[0], x[1], Some(x[2]), Conv2dAttrs::default()),
        ),
        case("conv1d", &[&[1, 2, 5], &[3, 2, 2]], Any, |b, x| {
            b.conv1d(x[0], x[1], None, Conv1dAttrs::default())
        }),
        case(
            "conv2d_input_grad",
            &[&[1, 3, 3, 3], &[3, 2, 2, 2]],
            Any,
            move |b, x| ConvInputGrad::new(spec2, [4, 4]).apply(b, x[0], x[1]),
        ),
        case(
            "conv2d_weight_grad",
            &[&[1, 2, 4, 4], &[1, 3, 3, 3]],
            Any,
            move |b, x| ConvWeightGrad::new(spec2, [2, 2]).apply(b, x[0], x[1]),
        ),
        case(
            "conv1d_input_grad",
            &[&[1, 3, 4], &[3, 2, 2]],
            Any,
            move |b, x| ConvInputGrad::new(spec1, [1, 5]).apply(b, x[0], x[1]),
        ),
        case(
            "conv1d_weight_grad",
            &[&[1, 2, 5], &[1, 3, 4]],
            Any,
            move |b, x| ConvWeightGrad::new(spec1, [1, 2]).apply(b, x[0], x[1]),
        ),
        case("sum_pool2d", &[&[1, 2, 4, 4]], Any, move |b, x| {
            b.sum_pool2d(x[0], pool)
        }),
        case("avg_pool2d", &[&[1, 2, 4, 4]], Any, move |b, x| {
            b.avg_pool2d(x[0], pool)
        }),
        // Random draws have no ties, where the first-maximum convention would decide.
        case("max_pool2d", &[&[1, 2, 4, 4]], Any, move |b, x| {
            b.max_pool2d(x[0], pool)
        }),
        case(
            "sum_pool2d_transpose",
            &[&[1, 2, 2, 2]],
            Any,
            move |b, x| {
                let t = SumPool2dTranspose {
                    attrs: pool,
                    input_size: [4, 4],
                };
                b.op(Arc::new(t), &[x[0]])
            },
        ),
        case(
            "max_pool2d_select",
            &[&[1, 2, 4, 4], &[1, 2, 4, 4]],
            Any,
            move |b, x| b.op(Arc::new(MaxPool2dSelect { attrs: pool }), &[x[0], x[1]]),
        ),
        case(
            "max_pool2d_scatter",
            &[&[1, 2, 4, 4], &[1, 2, 2, 2]],
            Any,
            move |b, x| b.op(Arc::new(MaxPool2dScatter { attrs: pool }), &[x[0], x[1]]),
        ),
    ]
}

/// Integer indices as a constant node (the cases' inputs are floats).
fn index_const(b: &mut Builder, dims: &[usize], data: &[i64]) -> Result<Var, TypeError> {
    b.constant(Tensor::i64(dims.to_vec(), data.to_vec()).unwrap())
}

/// The softmax, normalisation, attention, loss and runtime-index composites.
fn composite_cases() -> Vec<Case> {
    use catml::prim::AttentionMask;
    use Domain::*;
    vec![
        case("softmax", &[&[2, 3]], Any, |b, x| b.softmax(x[0], 1)),
        case("log_softmax", &[&[3, 2]], Any, |b, x| {
            b.log_softmax(x[0], 0)
        }),
        // Random draws have no ties, where the convention would decide.
        case("reduce_max", &[&[2, 3]], Any, |b, x| {
            b.reduce_max(x[0], Some(vec![1]))
        }),
        case("max_weights times x", &[&[2, 3]], Any, |b, x| {
            let w = b.max_weights(x[0], None)?;
            b.mul(w, x[0])
        }),
        case("softmax_pullback", &[&[2, 3], &[2, 3]], Any, |b, x| {
            b.softmax_pullback(x[0], x[1], 1, 0.5)
        }),
        case("tanh_pullback", &[&[2, 3], &[2, 3]], Any, |b, x| {
            b.tanh_pullback(x[0], x[1])
        }),
        case("masked_softmax causal", &[&[1, 2, 2, 3]], Any, |b, x| {
            b.masked_softmax(x[0], AttentionMask::causal(), 0.5)
        }),
        case("batch_matmul", &[&[2, 2, 3], &[2, 3, 4]], Any, |b, x| {
            b.batch_matmul(x[0], x[1], false, false)
        }),
        case(
            "batch_matmul AᵀBᵀ",
            &[&[2, 3, 2], &[2, 4, 3]],
            Any,
            |b, x| b.batch_matmul(x[0], x[1], true, true),
        ),
        case(
            "attention_probs with key lengths",
            &[&[2, 1, 3, 2], &[2, 1, 3, 2]],
            Any,
            |b, x| {
                let mask = AttentionMask::none().with_key_lengths(vec![2, 3]);
                b.attention_probs(x[0], x[1], mask)
            },
        ),
        case(
            "sdpa causal",
            &[&[1, 2, 3, 2], &[1, 2, 4, 2], &[1, 2, 4, 3]],
            Any,
            |b, x| b.sdpa(x[0], x[1], x[2], AttentionMask::causal()),
        ),
        case("layer_norm affine", &[&[2, 3], &[3], &[3]], Any, |b, x| {
            b.layer_norm(x[0], vec![1], 0.1, Some((x[1], x[2])))
        }),
        case("cross_entropy", &[&[3, 4]], Any, |b, x| {
            let labels = index_const(b, &[3], &[1, 3, 1])?;
            b.cross_entropy(x[0], labels)
        }),
        case("mse", &[&[2, 3], &[2, 3]], Any, |b, x| b.mse(x[0], x[1])),
        case("take repeated", &[&[4, 2]], Any, |b, x| {
            let idx = index_const(b, &[2, 3], &[3, 0, 3, 1, 1, 2])?;
            b.take(x[0], idx)
        }),
        case("scatter_rows repeated", &[&[3, 2]], Any, |b, x| {
            let idx = index_const(b, &[3], &[2, 0, 2])?;
            b.scatter_rows(x[0], idx, 4)
        }),
        case("one_hot times x", &[&[3, 4]], Any, |b, x| {
            let idx = index_const(b, &[3], &[0, 3, 3])?;
            let o = b.one_hot(idx, 4, DType::F64)?;
            b.mul(o, x[0])
        }),
    ]
}

fn program(c: &Case) -> Program {
    let mut b = Builder::new();
    let xs: Vec<Var> = c
        .inputs
        .iter()
        .enumerate()
        .map(|(i, t)| {
            b.input(&format!("x{i}"), t.clone(), InputKind::Data)
                .unwrap()
        })
        .collect();
    let y = (c.build)(&mut b, &xs).unwrap_or_else(|e| panic!("{}: {e}", c.name));
    b.finish(&[y]).unwrap()
}

fn draw(rng: &mut Rng, ty: &TensorType, domain: Domain) -> Tensor {
    match domain {
        Domain::Any => uniform(rng, ty, -2.0, 2.0),
        Domain::Positive => uniform(rng, ty, 0.5, 2.0),
        Domain::AwayFromZero => {
            let mag = uniform(rng, ty, 0.5, 2.0).to_f64_vec();
            let sign = uniform(rng, ty, -1.0, 1.0).to_f64_vec();
            let data = mag.iter().zip(sign).map(|(m, s)| m.copysign(s)).collect();
            Tensor::from_f64s(ty.dtype, ty.shape.clone(), data).unwrap()
        }
        Domain::F32Exact => {
            let data = uniform(rng, ty, -2.0, 2.0)
                .to_f64_vec()
                .iter()
                .map(|&v| v as f32 as f64)
                .collect();
            Tensor::from_f64s(ty.dtype, ty.shape.clone(), data).unwrap()
        }
    }
}

/// The adjoint identity at three random points, and the central difference of the JVP.
fn check(c: &Case, rng: &mut Rng) {
    let p = program(c);
    let out_ty = p.output_types()[0].clone();
    let tangent_domain = if c.domain == Domain::F32Exact {
        Domain::F32Exact
    } else {
        Domain::Any
    };
    for _ in 0..3 {
        let x: Vec<Tensor> = c.inputs.iter().map(|t| draw(rng, t, c.domain)).collect();
        let v: Vec<Tensor> = c
            .inputs
            .iter()
            .map(|t| draw(rng, t, tangent_domain))
            .collect();
        let u = vec![draw(rng, &out_ty, tangent_domain)];

        let (y_fwd, jv) = value_and_tangent(&p, &x, &v);
        let (y_rev, jtu) = value_and_grad(&p, &x, &u);
        let y = eval(&p, &x).unwrap();
        assert_eq!(y_fwd, y, "{}: the JVP program's primal output", c.name);
        assert_eq!(y_rev, y, "{}: the VJP program's primal output", c.name);

        let (lhs, rhs) = (pairing(&u, &jv), pairing(&jtu, &v));
        let scale = pairing_scale(&u, &jv)
            .max(pairing_scale(&jtu, &v))
            .max(1e-300);
        assert!(
            (lhs - rhs).abs() <= ADJOINT_TOL * scale,
            "{}: <u, Jv> = {lhs} but <Jᵀu, v> = {rhs}",
            c.name
        );

        if c.fd {
            let shifted = |s: f64| -> Vec<Tensor> {
                x.iter()
                    .zip(&v)
                    .map(|(t, d)| common::axpy(t, s * FD_STEP, d))
                    .collect()
            };
            let plus = eval(&p, &shifted(1.0)).unwrap()[0].to_f64_vec();
            let minus = eval(&p, &shifted(-1.0)).unwrap()[0].to_f64_vec();
            for (k, (exact, (a, b))) in jv[0]
                .to_f64_vec()
                .iter()
                .zip(plus.iter().zip(&minus))
                .enumerate()
            {
                let fd = (a - b) / (2.0 * FD_STEP);
                assert!(
                    (fd - exact).abs() <= FD_TOL * (1.0 + exact.abs()),
                    "{}: element {k}: jvp {exact}, central difference {fd}",
                    c.name
                );
            }
        }
    }
}

#[test]
fn adjoint_identity_and_differences_for_every_primitive() {
    let mut rng = rng(2);
    let table = cases();
    for c in &table {
        check(c, &mut rng);
    }
    // The table covers the whole built-in registry.
    for name in builtins().names() {
        let covered = table
            .iter()
            .any(|c| program(c).nodes().iter().any(|n| n.prim.name() == name));
        assert!(covered, "no adjoint case exercises `{name}`");
    }
}

#[test]
fn rule_labels() {
    let mut b = Builder::new();
    let x = b.input("x", f64t(&[2]), InputKind::Data).unwrap();
    let y = b.relu(x).unwrap();
    let s = b.heaviside(x).unwrap();
    let z = b.stop_gradient(x).unwrap();
    let e = b.exp(x).unwrap();
    let p = b.finish(&[y, s, z, e]).unwrap();
    let kinds: Vec<RuleKind> = p.nodes().iter().map(|n| n.prim.rule()).collect();
    assert!(
        matches!(kinds[0], RuleKind::Convention(_)),
        "relu: {:?}",
        kinds[0]
    );
    assert!(
        matches!(kinds[1], RuleKind::Convention(_)),
        "step: {:?}",
        kinds[1]
    );
    assert!(
        matches!(kinds[2], RuleKind::Declared(_)),
        "stop_gradient: {:?}",
        kinds[2]
    );
    assert_eq!(kinds[3], RuleKind::Exact);
}

#[test]
fn stop_gradient_has_the_zero_response() {
    // y = x ⊙ stop_gradient(x): forward x², but the declared response lets only the first
    // occurrence through, so x̄ = u ⊙ x rather than 2 u ⊙ x.
    let mut b = Builder::new();
    let x = b.input("x", f64t(&[3]), InputKind::Data).unwrap();
    let s = b.stop_gradient(x).unwrap();
    let y = b.mul(x, s).unwrap();
    let p = b.finish(&[y]).unwrap();
    let xv = Tensor::f64([3], vec![1.5, -2.0, 0.5]).unwrap();
    let u = Tensor::f64([3], vec![1.0, 2.0, -1.0]).unwrap();
    let (_, g) = value_and_grad(&p, std::slice::from_ref(&xv), std::slice::from_ref(&u));
    assert_eq!(g[0].to_f64_vec(), vec![1.5, -4.0, -0.5]);

    // Alone, stop_gradient gives a zero gradient and a zero tangent.
    let mut b = Builder::new();
    let x = b.input("x", f64t(&[3]), InputKind::Data).unwrap();
    let s = b.stop_gradient(x).unwrap();
    let p = b.finish(&[s]).unwrap();
    let (_, g) = value_and_grad(&p, std::slice::from_ref(&xv), std::slice::from_ref(&u));
    assert_eq!(g[0].to_f64_vec(), vec![0.0; 3]);
    let (_, t) = value_and_tangent(&p, std::slice::from_ref(&xv), std::slice::from_ref(&u));
    assert_eq!(t[0].to_f64_vec(), vec![0.0; 3]);
}

#[test]
fn relu_at_exact_zeros_reports_the_convention() {
    let mut b = Builder::new();
    let x = b.input("x", f64t(&[2, 3]), InputKind::Data).unwrap();
    let y = b.relu(x).unwrap();
    let p = b.finish(&[y]).unwrap();
    let relu_name = p.nodes()[0].name.clone();
    let relu_rule = p.nodes()[0].prim.rule().to_string();
    let v = ad::vjp(&p).unwrap();
    let xv = Tensor::f64([2, 3], vec![0.0, 1.0, -1.0, 0.0, 0.0, 2.0]).unwrap();
    let seed = Tensor::full(&f64t(&[2, 3]), 1.0);
    let (out, report) = eval_with_report(&v.program, &[xv, seed]).unwrap();
    // relu'(0) = 0 by the convention, so the three zeros get no gradient.
    let g = out[v.layout.gradient_output(0).unwrap()].to_f64_vec();
    assert_eq!(g, vec![0.0, 1.0, 0.0, 0.0, 0.0, 1.0]);
    let hit = report
        .conventions
        .iter()
        .find(|h| h.op == "relu")
        .unwrap_or_else(|| panic!("no relu hit in {:?}", report.conventions));
    assert_eq!(hit.name, relu_name);
    assert_eq!(hit.elements, 3);
    assert_eq!(hit.convention, relu_rule);
    // Away from zero nothing is reported.
    let xv = Tensor::f64([2, 3], vec![0.5, 1.0, -1.0, 0.25, -3.0, 2.0]).unwrap();
    let seed = Tensor::full(&f64t(&[2, 3]), 1.0);
    let (_, report) = eval_with_report(&v.program, &[xv, seed]).unwrap();
    assert!(report.conventions.is_empty(), "{:?}", report.conventions);
}

/// Means, argmax, batch normalisation and the random primitives (keys are constants).
fn statistics_and_random_cases() -> Vec<Case> {
    use catml::prim::random::threefry::key_tensor;
    use catml::prim::Distribution;
    use Domain::*;
    let key = |b: &mut Builder| b.constant(key_tensor([7, 0x9E37_79B9]));
    vec![
        case("mean all", &[&[2, 3, 4]], Any, |b, x| b.mean(x[0], None)),
        case("mean axes 2,0", &[&[2, 3, 4]], Any, |b, x| {
            b.mean(x[0], Some(vec![2, 0]))
        }),
        // argmax is piecewise constant: one_hot of it times x sees x's derivative through the
        // product only.
        case("argmax as one_hot times x", &[&[3, 4]], Any, |b, x| {
            let k = b.argmax(x[0], 1)?;
            let o = b.one_hot(k, 4, DType::F64)?;
            b.mul(o, x[0])
        }),
        case(
            "batch_norm training y",
            &[&[3, 2, 2], &[2], &[2]],
            Any,
            |b, x| Ok(b.batch_norm_train(x[0], x[1], x[2], 0.1)?.0),
        ),
        case(
            "batch_norm training mean",
            &[&[3, 2], &[2], &[2]],
            Any,
            |b, x| Ok(b.batch_norm_train(x[0], x[1], x[2], 0.1)?.1),
        ),
        case(
            "batch_norm training var",
            &[&[3, 2, 2], &[2], &[2]],
            Any,
            |b, x| Ok(b.batch_norm_train(x[0], x[1], x[2], 0.1)?.2),
        ),
        case(
            "batch_norm inference",
            &[&[3, 2, 2], &[2], &[2], &[2], &[2]],
            Any,
            |b, x| {
                // A variance >= 1/2: v² + 1/2.
                let sq = b.mul(x[4], x[4])?;
                let half = b.full_like(0.5, sq)?;
                let var = b.add(sq, half)?;
                b.batch_norm_infer(x[0], [x[1], x[2], x[3], var], 1e-5)
            },
        ),
        case("random_uniform times x", &[&[2, 3]], Any, move |b, x| {
            let k = key(b)?;
            let u = b.random(k, Distribution::Uniform, &f64t(&[2, 3]))?;
            b.mul(u, x[0])
        }),
        case("random_normal times x", &[&[2, 3]], Any, move |b, x| {
            let k = key(b)?;
            let k = b.random_fold_in(k, 3)?;
            let z = b.random(k, Distribution::Normal, &f64t(&[2, 3]))?;
            b.mul(z, x[0])
        }),
        case("dropout of a split key", &[&[4, 5]], Any, move |b, x| {
            let k = key(b)?;
            let keys = b.random_split(k, 3)?;
            let one = b.gather(keys, 0, vec![1])?;
            let k1 = b.reshape(one, [2])?;
            b.dropout(k1, x[0], 0.5)
        }),
    ]
}

/// Comparisons and connectives carry no derivative; a selection on them carries x's and y's:
/// where(c, x, y) routes each element to the chosen operand.
fn selection_cases() -> Vec<Case> {
    use catml::prim::compare::{Comparison, LogicalOp};
    use Domain::*;
    let mut v: Vec<Case> = [
        Comparison::Equal,
        Comparison::Less,
        Comparison::LessEqual,
        Comparison::Greater,
        Comparison::GreaterEqual,
    ]
    .into_iter()
    .map(|c| {
        case(c.name(), &[&[2, 3], &[2, 3]], Any, move |b, x| {
            let m = b.compare(c, x[0], x[1])?;
            b.select(m, x[0], x[1])
        })
    })
    .collect();
    for op in [
        LogicalOp::Not,
        LogicalOp::And,
        LogicalOp::Or,
        LogicalOp::Xor,
    ] {
        v.push(case(op.name(), &[&[2, 3], &[2, 3]], Any, move |b, x| {
            let p = b.compare(Comparison::Less, x[0], x[1])?;
            let n = b.neg(x[1])?;
            let q = b.compare(Comparison::Greater, x[0], n)?;
            let m = match op {
                LogicalOp::Not => b.logical_not(p)?,
                LogicalOp::And => b.logical_and(p, q)?,
                LogicalOp::Or => b.logical_or(p, q)?,
                LogicalOp::Xor => b.logical_xor(p, q)?,
            };
            b.select(m, x[0], x[1])
        }));
    }
    v
}
