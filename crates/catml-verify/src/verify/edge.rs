//! Edge checks:
//! - the floating-point rewrite counterexample (docs/rewrites.md): x reaches
//!   y = (x·10¹⁶ + x·(-10¹⁶)) + reshape(x) through three branches whose cotangent contributions
//!   are 10¹⁶, -10¹⁶ and 1. With the identity reshape the reverse pass adds -10¹⁶ + 10¹⁶ first
//!   and then 1: gradient 1. Without it, 1 arrives first and 1 - 10¹⁶ rounds to -10¹⁶:
//!   gradient 0. The real gradient (exact over rationals, before and after) is 1, and the
//!   rewrites family's bound holds;
//! - every rejection kind of the validator, on hand-written modules and on mutations of
//!   generated ones (each must report the expected kind at the expected place);
//! - runtime rejections: wrong input shapes, counts and dtypes, for eval, the rational
//!   interpreter and derivative programs;
//! - domain violations and non-finite values, caught with the node named (also inside a VJP
//!   program), and derivative rules that are missing or ill-typed;
//! - every row with an i64 kernel: on the integers -6..=6 it equals the row's f64 function
//!   truncated (exact there), add wraps at i64::MAX, and an i64 division by zero names the node.

use std::sync::Arc;

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{json, Value};

use super::generate::{generate, random_inputs, GenConfig};
use super::numeric::Derivatives;
use super::rewrites::largest_value;
use super::{Ctx, FamilyReport, Tally};
use crate::ad::{self, AdError};
use crate::interp::{self, EvalError, RationalError};
use crate::ir::{
    json as lensir, listing, Builder, InputKind, Program, RuleError, TypeError, ValidationError,
    Var,
};
use crate::prim::{CustomPrimitive, Ops};
use crate::tensor::{rational_from_f64, DType, RArray, Rational, Tensor, TensorType};
use crate::transform::rewrite::eliminate_identity_reshapes;

pub(crate) fn run(ctx: &Ctx) -> FamilyReport {
    let n = ctx.level.pick(4, 200, 1000);
    let mut t = ctx.tally(
        "the floating-point rewrite counterexample; every validator rejection kind (hand-written and mutated generated modules); runtime shape, count and dtype rejections; domain violations and non-finite values with the node named; missing and ill-typed derivative rules",
        "reference: 10 edge checks including the floating-point rewrite counterexample; 10 invalid-module and 2 runtime-shape rejections",
        n + 4,
    );
    counterexample(&mut t);
    t.case();
    fixed_modules(&mut t);
    t.case();
    domains(&mut t);
    t.case();
    integers(&mut t);
    t.case();
    rules(&mut t);
    t.case();
    let mut rng = ctx.rng();
    for k in 0..n {
        let seed = rng.random::<u64>();
        let cfg = GenConfig {
            n_nodes: rng.random_range(2..=16),
            ..GenConfig::default()
        };
        match generate(&cfg, seed) {
            Ok(p) => {
                mutations(&mut t, &p, k);
                runtime(&mut t, &p, seed, k);
            }
            Err(e) => t.fail(format!("program {k}: {e}")),
        }
        t.case();
    }
    t.figure("generated_programs_mutated", n);
    t.finish()
}

/// y = (x·10¹⁶ + x·(-10¹⁶)) + r with r = reshape(x) to its own shape, created before the
/// products so that the reverse pass reaches it last.
pub(crate) fn counterexample_program() -> Program {
    let ty = TensorType::new(DType::F64, [1]);
    let mut b = Builder::new();
    let x = b.input("x", ty, InputKind::Data).expect("fresh");
    let mut named = |name: &str, f: &dyn Fn(&mut Builder) -> Result<Var, TypeError>| {
        b.set_name_prefix(name);
        f(&mut b).expect("fits")
    };
    let c16 = |v: f64| Tensor::f64([1], vec![v]).expect("one");
    let big = named("big", &|b| b.constant(c16(1e16)));
    let neg = named("neg", &|b| b.constant(c16(-1e16)));
    let r = named("r", &|b| b.reshape(x, [1]));
    let a = named("a", &|b| b.mul(x, big));
    let c = named("c", &|b| b.mul(x, neg));
    let s = named("s", &|b| b.add(a, c));
    let y = named("y", &|b| b.add(s, r));
    b.finish(&[y]).expect("output")
}

fn counterexample(t: &mut Tally) {
    let p = counterexample_program();
    let r = match eliminate_identity_reshapes(&p) {
        Ok(r) => r,
        Err(e) => return t.fail(format!("counterexample: {e}")),
    };
    t.check(r.changes == 1, || {
        format!("counterexample: {} reshapes removed", r.changes)
    });
    let (Ok(before), Ok(after)) = (Derivatives::new(&p), Derivatives::new(&r.program)) else {
        return t.fail("counterexample: vjp failed".to_string());
    };
    let x = [Tensor::f64([1], vec![1.0]).expect("one")];
    let u = [Tensor::f64([1], vec![1.0]).expect("one")];
    let (Ok((y0, g0)), Ok((y1, g1))) = (before.vjp_at(&x, &u), after.vjp_at(&x, &u)) else {
        return t.fail("counterexample: evaluation failed".to_string());
    };
    let (g0, g1) = (g0[0].to_f64_vec()[0], g1[0].to_f64_vec()[0]);
    t.figure("counterexample_f64_gradient_before", g0);
    t.figure("counterexample_f64_gradient_after", g1);
    t.check(y0 == y1, || "counterexample: values differ".to_string());
    t.check(g0 == 1.0 && g1 == 0.0, || {
        format!("counterexample: gradients {g0} before and {g1} after, expected 1 and 0")
    });
    // The real gradient is 1 for both programs.
    let one = || RArray::new(vec![1], vec![Rational::from_integer(1.into())]).expect("one");
    let exact = |d: &Derivatives| {
        interp::eval_rational(&d.vjp.program, &[one(), one()])
            .map(|o| d.vjp.layout.gradient(&o, 0).expect("float").data()[0].clone())
    };
    let (e0, e1) = (exact(&before), exact(&after));
    t.check(
        matches!((&e0, &e1), (Ok(a), Ok(b)) if *a == Rational::from_integer(1.into()) && a == b),
        || format!("counterexample: exact gradients {e0:?} and {e1:?}, expected 1"),
    );
    t.figure("counterexample_exact_gradient", 1);
    // Inside the rewrites family's bound 2^5 N u M.
    let mut args = x.to_vec();
    args.extend(u.iter().cloned());
    if let Ok(m) = largest_value(&before.vjp.program, &args) {
        let bound = 32.0 * before.vjp.program.n_nodes() as f64 * f64::EPSILON / 2.0 * m;
        t.figure("counterexample_rewrite_bound", bound);
        t.check((g0 - g1).abs() <= bound, || {
            format!("counterexample: |{g0} - {g1}| exceeds the rewrite bound {bound}")
        });
    }
}

type Expect = fn(&ValidationError) -> bool;

/// What a mutated module must be rejected with.
type Expectation = Box<dyn Fn(&ValidationError) -> bool>;

/// Hand-written invalid modules, one per rejection kind (and a few variants).
fn fixed_modules(t: &mut Tally) {
    let base = |nodes: Value, outputs: Value| {
        json!({"format": "lensir-module/1",
               "inputs": [{"name": "x", "shape": [2]}, {"name": "m", "shape": [2, 3]}],
               "nodes": nodes, "outputs": outputs})
        .to_string()
    };
    let tanh = json!([{"name": "y", "op": "tanh", "operands": ["x"]}]);
    let with = |f: &dyn Fn(&mut Value)| {
        let mut v: Value = serde_json::from_str(&base(tanh.clone(), json!(["y"]))).expect("json");
        f(&mut v);
        v.to_string()
    };
    let cases: Vec<(&str, String, Expect, usize)> = vec![
        (
            "malformed json",
            "{\"inputs\": [".to_string(),
            |e| matches!(e, ValidationError::Json { .. }),
            1,
        ),
        (
            "trailing characters",
            base(tanh.clone(), json!(["y"])) + " x",
            |e| matches!(e, ValidationError::Json { .. }),
            1,
        ),
        (
            "unknown field",
            with(&|v| v["extra"] = json!(1)),
            |e| matches!(e, ValidationError::Json { .. }),
            1,
        ),
        (
            "wrong field type",
            with(&|v| v["outputs"] = json!("y")),
            |e| matches!(e, ValidationError::Json { .. }),
            1,
        ),
        (
            "unknown format",
            with(&|v| v["format"] = json!("lensir-module/2")),
            |e| matches!(e, ValidationError::Format { .. }),
            1,
        ),
        (
            "zero dimension",
            with(&|v| v["inputs"][0]["shape"] = json!([0])),
            |e| matches!(e, ValidationError::InvalidDim { index: 0, .. }),
            1,
        ),
        (
            "negative dimension",
            with(&|v| v["inputs"][1]["shape"] = json!([2, -3])),
            |e| matches!(e, ValidationError::InvalidDim { index: 1, .. }),
            1,
        ),
        (
            "fractional dimension",
            with(&|v| v["inputs"][0]["shape"] = json!([2.5])),
            |e| matches!(e, ValidationError::InvalidDim { .. }),
            1,
        ),
        (
            "overflowing element count",
            with(&|v| v["inputs"][0]["shape"] = json!([1u64 << 40, 1u64 << 40])),
            |e| matches!(e, ValidationError::TooManyElements { index: 0, .. }),
            1,
        ),
        (
            "duplicate input",
            with(&|v| v["inputs"][1]["name"] = json!("x")),
            |e| matches!(e, ValidationError::Duplicate { .. }),
            1,
        ),
        (
            "node named like an input",
            with(&|v| v["nodes"][0]["name"] = json!("m")),
            |e| matches!(e, ValidationError::Duplicate { .. }),
            0,
        ),
        (
            "parameter that is not an input",
            with(&|v| v["parameters"] = json!(["w"])),
            |e| matches!(e, ValidationError::ParamNotInput { index: 0, .. }),
            1,
        ),
        (
            "parameter listed twice",
            with(&|v| v["parameters"] = json!(["x", "x"])),
            |e| matches!(e, ValidationError::ParamTwice { index: 1, .. }),
            1,
        ),
        (
            "unknown primitive",
            with(&|v| v["nodes"][0]["op"] = json!("tanhh")),
            |e| matches!(e, ValidationError::UnknownPrimitive { index: 0, .. }),
            1,
        ),
        (
            "unknown attribute",
            with(&|v| v["nodes"][0]["attrs"] = json!({"k": 1})),
            |e| matches!(e, ValidationError::Type { index: 0, .. }),
            1,
        ),
        (
            "missing attribute",
            base(
                json!([{"name": "y", "op": "reshape", "operands": ["x"]}]),
                json!(["y"]),
            ),
            |e| matches!(e, ValidationError::Type { index: 0, .. }),
            1,
        ),
        (
            "attribute out of range",
            base(
                json!([{"name": "y", "op": "gather", "operands": ["x"], "attrs": {"axis": 0, "indices": [0, 2]}}]),
                json!(["y"]),
            ),
            |e| matches!(e, ValidationError::Type { index: 0, .. }),
            1,
        ),
        (
            "operand shapes differ",
            base(
                json!([{"name": "y", "op": "add", "operands": ["x", "m"]}]),
                json!(["y"]),
            ),
            |e| matches!(e, ValidationError::Type { index: 0, .. }),
            1,
        ),
        (
            "contraction sizes differ",
            base(
                json!([{"name": "y", "op": "matmul", "operands": ["m", "m"]}]),
                json!(["y"]),
            ),
            |e| matches!(e, ValidationError::Type { index: 0, .. }),
            1,
        ),
        (
            "wrong arity",
            base(
                json!([{"name": "y", "op": "tanh", "operands": ["x", "x"]}]),
                json!(["y"]),
            ),
            |e| matches!(e, ValidationError::Type { index: 0, .. }),
            1,
        ),
        (
            "use before definition",
            base(
                json!([{"name": "y", "op": "tanh", "operands": ["z"]}, {"name": "z", "op": "tanh", "operands": ["x"]}]),
                json!(["y"]),
            ),
            |e| {
                matches!(
                    e,
                    ValidationError::UseBeforeDef {
                        index: 0,
                        defined_at: 1,
                        ..
                    }
                )
            },
            1,
        ),
        (
            "unknown operand",
            base(
                json!([{"name": "y", "op": "tanh", "operands": ["q"]}]),
                json!(["x"]),
            ),
            |e| matches!(e, ValidationError::UnknownOperand { index: 0, .. }),
            1,
        ),
        (
            "no outputs",
            base(tanh.clone(), json!([])),
            |e| matches!(e, ValidationError::NoOutputs),
            1,
        ),
        (
            "unknown output",
            base(tanh.clone(), json!(["y", "q"])),
            |e| matches!(e, ValidationError::UnknownOutput { index: 1, .. }),
            1,
        ),
        // Every violation is reported, downstream uses of a rejected node are not.
        (
            "three violations at once",
            with(&|v| {
                v["nodes"][0]["op"] = json!("nope");
                v["parameters"] = json!(["w"]);
                v["outputs"] = json!(["y", "q"]);
            }),
            |e| matches!(e, ValidationError::UnknownPrimitive { .. }),
            3,
        ),
        (
            "downstream of a rejected node",
            base(
                json!([{"name": "y", "op": "nope", "operands": ["x"]}, {"name": "z", "op": "tanh", "operands": ["y"]}]),
                json!(["z"]),
            ),
            |e| matches!(e, ValidationError::UnknownPrimitive { .. }),
            1,
        ),
    ];
    let registry = crate::prim::builtins();
    let mut kinds = 0;
    for (label, text, expect, count) in &cases {
        kinds += 1;
        match lensir::from_str(text, registry) {
            Ok(_) => t.check(false, || format!("invalid module accepted: {label}")),
            Err(errs) => t.check(
                errs.0.iter().any(expect) && (*count == 0 || errs.0.len() == *count),
                || format!("{label}: unexpected rejection {:?}", errs.0),
            ),
        };
    }
    // Listings.
    let listings: [(&str, &str); 4] = [
        ("listing without header", "inputs:\n x: f64[2]\n"),
        ("listing with a misnumbered instruction", "program(\n  inputs:\n    x: f64[2]\n  instructions:\n    1: y: f64[2] = tanh(x)\n  outputs: y\n)\n"),
        ("listing declaring the wrong type", "program(\n  inputs:\n    x: f64[2]\n  instructions:\n    0: y: f64[3] = tanh(x)\n  outputs: y\n)\n"),
        ("listing without its end", "program(\n  inputs:\n    x: f64[2]\n  instructions:\n    0: y: f64[2] = tanh(x)\n  outputs: y\n"),
    ];
    for (label, text) in listings {
        kinds += 1;
        match listing::parse(text, registry) {
            Ok(_) => t.check(false, || format!("invalid listing accepted: {label}")),
            Err(errs) => t.check(
                errs.0
                    .iter()
                    .any(|e| matches!(e, ValidationError::Listing { .. })),
                || format!("{label}: unexpected rejection {:?}", errs.0),
            ),
        };
    }
    t.figure("hand_written_invalid_modules", kinds);
}

/// Mutations of a generated module, each with the rejection it must cause.
fn mutations(t: &mut Tally, p: &Program, k: usize) {
    let registry = crate::prim::builtins();
    let text = lensir::to_string(p);
    let base: Value = serde_json::from_str(&text).expect("printed json parses");
    let n = p.n_nodes();
    let mut cases: Vec<(String, Value, Expectation)> = Vec::new();
    let mut mutate =
        |label: &str, f: &dyn Fn(&mut Value), expect: Box<dyn Fn(&ValidationError) -> bool>| {
            let mut v = base.clone();
            f(&mut v);
            cases.push((label.to_string(), v, expect));
        };
    mutate(
        "format",
        &|v| v["format"] = json!("lensir-module/9"),
        Box::new(|e| matches!(e, ValidationError::Format { .. })),
    );
    mutate(
        "no outputs",
        &|v| v["outputs"] = json!([]),
        Box::new(|e| matches!(e, ValidationError::NoOutputs)),
    );
    let n_out = p.outputs().len();
    mutate(
        "unknown output",
        &|v| {
            v["outputs"]
                .as_array_mut()
                .expect("list")
                .push(json!("no such value"))
        },
        Box::new(
            move |e| matches!(e, ValidationError::UnknownOutput { index, .. } if *index == n_out),
        ),
    );
    mutate(
        "parameter not an input",
        &|v| {
            v["parameters"]
                .as_array_mut()
                .expect("list")
                .push(json!("no such value"))
        },
        Box::new(|e| matches!(e, ValidationError::ParamNotInput { .. })),
    );
    mutate(
        "zero dimension",
        &|v| v["inputs"][0]["shape"] = json!([0]),
        Box::new(|e| matches!(e, ValidationError::InvalidDim { index: 0, .. })),
    );
    mutate(
        "missing field",
        &|v| {
            v.as_object_mut().expect("object").remove("nodes");
        },
        Box::new(|e| matches!(e, ValidationError::Json { .. })),
    );
    if n > 0 {
        let last = n - 1;
        mutate(
            "unknown primitive",
            &|v| v["nodes"][last]["op"] = json!("no_such_op"),
            Box::new(
                move |e| matches!(e, ValidationError::UnknownPrimitive { index, .. } if *index == last),
            ),
        );
        let first_input = p.inputs()[0].name.clone();
        mutate(
            "duplicate name",
            &move |v| v["nodes"][last]["name"] = json!(first_input.clone()),
            Box::new(move |e| matches!(e, ValidationError::Duplicate { .. })),
        );
        mutate(
            "unknown attribute",
            &|v| {
                v["nodes"][last]["attrs"] = {
                    let mut a = v["nodes"][last].get("attrs").cloned().unwrap_or(json!({}));
                    a["bogus"] = json!(1);
                    a
                }
            },
            Box::new(move |e| matches!(e, ValidationError::Type { index, .. } if *index == last)),
        );
        if let Some(j) = (0..n).find(|&j| !p.nodes()[j].operands.is_empty()) {
            mutate(
                "unknown operand",
                &move |v| v["nodes"][j]["operands"][0] = json!("no such value"),
                Box::new(
                    move |e| matches!(e, ValidationError::UnknownOperand { index, .. } if *index == j),
                ),
            );
            if j + 1 < n {
                let later = p.nodes()[n - 1].name.clone();
                mutate(
                    "use before definition",
                    &move |v| v["nodes"][j]["operands"][0] = json!(later.clone()),
                    Box::new(
                        move |e| matches!(e, ValidationError::UseBeforeDef { index, .. } if *index == j),
                    ),
                );
            }
        }
    }
    for (label, v, expect) in cases {
        match lensir::from_str(&v.to_string(), registry) {
            Ok(_) => t.check(false, || {
                format!("program {k}: mutation `{label}` accepted")
            }),
            Err(errs) => t.check(errs.0.iter().any(&expect), || {
                format!(
                    "program {k}: mutation `{label}`: unexpected rejection {:?}",
                    errs.0
                )
            }),
        };
        t.count("mutated_invalid_modules", 1);
    }
    if n > 0 {
        // The listing without its first instruction is misnumbered.
        let printed = listing::print(p);
        let lines: Vec<&str> = printed.lines().collect();
        let at = lines
            .iter()
            .position(|l| l.trim_start().starts_with("0: "))
            .expect("node 0");
        let text: String = lines
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != at)
            .map(|(_, l)| format!("{l}\n"))
            .collect();
        let ok = matches!(listing::parse(&text, registry), Err(e) if e.0.iter().any(|e| matches!(e, ValidationError::Listing { .. })));
        t.check(ok, || {
            format!("program {k}: listing without instruction 0 was not rejected as a listing")
        });
        t.count("mutated_invalid_modules", 1);
    }
}

/// Wrong input shapes, counts and dtypes.
fn runtime(t: &mut Tally, p: &Program, seed: u64, k: usize) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let x = random_inputs(p, &mut rng);
    let i = rng.random_range(0..p.n_inputs());
    let name = p.inputs()[i].name.clone();
    let reshaped = |t: &Tensor| {
        let mut dims = t.dims().to_vec();
        dims.push(2);
        Tensor::from_f64s(t.dtype(), dims, [t.to_f64_vec(), t.to_f64_vec()].concat())
            .expect("twice")
    };
    let mut bad = x.clone();
    bad[i] = reshaped(&x[i]);
    t.check(matches!(interp::eval(p, &bad), Err(EvalError::InputType { name: ref n, .. }) if *n == name), || {
        format!("program {k}: wrong shape of `{name}` not rejected")
    });
    let mut bad = x.clone();
    let other = if x[i].dtype() == DType::F64 {
        DType::F32
    } else {
        DType::F64
    };
    bad[i] = Tensor::from_f64s(other, x[i].shape().clone(), x[i].to_f64_vec()).expect("same");
    t.check(matches!(interp::eval(p, &bad), Err(EvalError::InputType { name: ref n, .. }) if *n == name), || {
        format!("program {k}: wrong dtype of `{name}` not rejected")
    });
    t.check(
        matches!(interp::eval(p, &x[1..]), Err(EvalError::InputCount { .. })),
        || format!("program {k}: missing input not rejected"),
    );
    let rx: Vec<RArray> = x
        .iter()
        .enumerate()
        .map(|(j, t)| {
            let t = if j == i { reshaped(t) } else { t.clone() };
            let data = t
                .to_f64_vec()
                .iter()
                .map(|&v| rational_from_f64(v).expect("finite"))
                .collect();
            RArray::new(t.shape().clone(), data).expect("numel")
        })
        .collect();
    t.check(matches!(interp::eval_rational(p, &rx), Err(RationalError::InputShape { name: ref n, .. }) if *n == name), || {
        format!("program {k}: rational eval: wrong shape of `{name}` not rejected")
    });
    if let Ok(v) = ad::vjp(p) {
        let mut args = x.clone();
        args.extend(
            p.output_types()
                .iter()
                .map(|ty| reshaped(&Tensor::zeros(ty))),
        );
        let seed_name = v.program.inputs()[p.n_inputs()].name.clone();
        t.check(matches!(interp::eval(&v.program, &args), Err(EvalError::InputType { name: ref n, .. }) if *n == seed_name), || {
            format!("program {k}: vjp: wrong seed shape not rejected")
        });
    }
    t.count("runtime_rejections", 5);
}

/// One-node programs outside their domains or overflowing; the error must name the node.
fn domains(t: &mut Tally) {
    type Op = fn(&mut Builder, crate::ir::Var) -> Result<crate::ir::Var, crate::ir::TypeError>;
    let unary: [(&str, Op, f64, bool); 9] = [
        ("log of -1", |b, x| b.log(x), -1.0, true),
        ("log of 0", |b, x| b.log(x), 0.0, true),
        ("reciprocal of 0", |b, x| b.reciprocal(x), 0.0, true),
        ("rsqrt of 0", |b, x| b.rsqrt(x), 0.0, true),
        ("rsqrt of -4", |b, x| b.rsqrt(x), -4.0, true),
        ("exp of 800", |b, x| b.exp(x), 800.0, false),
        ("square of 1e200", |b, x| b.mul(x, x), 1e200, false),
        ("1e308 + 1e308", |b, x| b.add(x, x), 1e308, false),
        ("exp of 100 in f32", |b, x| b.exp(x), 100.0, false),
    ];
    for (label, op, value, domain) in unary {
        for dtype in [DType::F64, DType::F32] {
            if label.ends_with("f32") && dtype == DType::F64 {
                continue;
            }
            let mut b = Builder::new();
            let x = b
                .input("x", TensorType::new(dtype, [3]), InputKind::Data)
                .expect("fresh");
            let ok = b.tanh(x).expect("fits");
            let prefix = b.set_name_prefix("bad");
            let y = op(&mut b, x).expect("fits");
            b.set_name_prefix(&prefix);
            let s = b.add(y, ok).expect("fits");
            let p = b.finish(&[s]).expect("output");
            let input = Tensor::from_f64s(dtype, [3], vec![0.5, value, 1.0]).expect("three");
            let r = interp::eval(&p, &[input]);
            let named = match &r {
                Err(EvalError::Kernel {
                    name,
                    source: crate::ir::KernelError::Domain(_),
                    ..
                }) => domain && name == "bad",
                Err(EvalError::NonFinite { name, first, .. }) => {
                    !domain && name == "bad" && *first == 1
                }
                _ => false,
            };
            t.check(named, || format!("{label} ({dtype}): {r:?}"));
        }
    }
    // A backward overflow: rsqrt at 1e-300 is 1e150, its VJP computes y³ = inf.
    let mut b = Builder::new();
    let x = b
        .input("x", TensorType::new(DType::F64, [1]), InputKind::Data)
        .expect("fresh");
    b.set_name_prefix("bad");
    let y = b.rsqrt(x).expect("fits");
    let p = b.finish(&[y]).expect("output");
    let r = ad::vjp(&p).map(|v| {
        interp::eval(
            &v.program,
            &[
                Tensor::f64([1], vec![1e-300]).expect("one"),
                Tensor::f64([1], vec![1.0]).expect("one"),
            ],
        )
    });
    t.check(
        matches!(&r, Ok(Err(EvalError::NonFinite { name, .. })) if name.starts_with("bad.vjp")),
        || format!("backward overflow not named: {r:?}"),
    );
    // Exact evaluation: 1/0 and a non-rational node, named.
    let mut b = Builder::new();
    let x = b
        .input("x", TensorType::new(DType::F64, [2]), InputKind::Data)
        .expect("fresh");
    b.set_name_prefix("bad");
    let y = b.reciprocal(x).expect("fits");
    let p = b.finish(&[y]).expect("output");
    let zero = RArray::new(
        vec![2],
        vec![
            Rational::from_integer(1.into()),
            Rational::from_integer(0.into()),
        ],
    )
    .expect("two");
    let r = interp::eval_rational(&p, std::slice::from_ref(&zero));
    t.check(
        matches!(&r, Err(RationalError::Kernel { name, .. }) if name == "bad"),
        || format!("exact 1/0: {r:?}"),
    );
    let mut b = Builder::new();
    let x = b
        .input("x", TensorType::new(DType::F64, [2]), InputKind::Data)
        .expect("fresh");
    b.set_name_prefix("bad");
    let y = b.exp(x).expect("fits");
    let p = b.finish(&[y]).expect("output");
    let r = interp::eval_rational(&p, &[zero]);
    t.check(
        matches!(&r, Err(RationalError::NotRational { name, .. }) if name == "bad"),
        || format!("exact exp: {r:?}"),
    );
}

/// The i64 kernels of the rows against their f64 functions on small integers (where f64 is
/// exact and the truncated quotient is integer division), and the integer edge cases.
fn integers(t: &mut Tally) {
    use crate::prim::{Binary, Unary, BINARY_ROWS, UNARY_ROWS};
    let small: Vec<i64> = (-6..=6).collect();
    let (xs, ys): (Vec<i64>, Vec<i64>) = small
        .iter()
        .flat_map(|&a| small.iter().map(move |&b| (a, b)))
        .unzip();
    let n = xs.len();
    let ty = TensorType::new(DType::I64, [n]);
    let ints = |v: &[i64]| Tensor::i64([v.len()], v.to_vec()).expect("a vector");
    for row in BINARY_ROWS.iter().filter(|r| r.int.is_some()) {
        let keep: Vec<usize> = (0..n)
            .filter(|&i| {
                row.domains[0].contains(xs[i] as f64) && row.domains[1].contains(ys[i] as f64)
            })
            .collect();
        let (a, c): (Vec<i64>, Vec<i64>) = keep.iter().map(|&i| (xs[i], ys[i])).unzip();
        let ty = TensorType::new(DType::I64, [a.len()]);
        let mut b = Builder::new();
        let x = b.input("x", ty.clone(), InputKind::Data).expect("fresh");
        let y = b.input("y", ty, InputKind::Data).expect("fresh");
        let got = b
            .apply(Arc::new(Binary::new(row)), &[x, y])
            .map_err(|e| e.to_string())
            .and_then(|z| b.finish(&[z]).map_err(|e| e.to_string()))
            .and_then(|p| interp::eval(&p, &[ints(&a), ints(&c)]).map_err(|e| e.to_string()));
        let want: Vec<f64> = a
            .iter()
            .zip(&c)
            .map(|(&u, &v)| (row.f)(u as f64, v as f64).trunc())
            .collect();
        t.check(matches!(&got, Ok(o) if o[0].to_f64_vec() == want), || {
            format!("i64 {}: {got:?}", row.name)
        });
    }
    for row in UNARY_ROWS.iter().filter(|r| r.int.is_some()) {
        let mut b = Builder::new();
        let x = b.input("x", ty.clone(), InputKind::Data).expect("fresh");
        let got = b
            .apply(Arc::new(Unary::of(row)), &[x])
            .map_err(|e| e.to_string())
            .and_then(|z| b.finish(&[z]).map_err(|e| e.to_string()))
            .and_then(|p| interp::eval(&p, &[ints(&xs)]).map_err(|e| e.to_string()));
        let want: Vec<f64> = xs.iter().map(|&u| (row.f)(u as f64, &[])).collect();
        t.check(matches!(&got, Ok(o) if o[0].to_f64_vec() == want), || {
            format!("i64 {}: {got:?}", row.name)
        });
    }
    // i64::MAX + 1 wraps; 1 / 0 is a domain error naming the node.
    let mut b = Builder::new();
    let one = TensorType::new(DType::I64, [1]);
    let x = b.input("x", one.clone(), InputKind::Data).expect("fresh");
    let y = b.input("y", one, InputKind::Data).expect("fresh");
    let s = b.add(x, y).expect("fits");
    b.set_name_prefix("bad");
    let q = b.div(x, y).expect("fits");
    let p = b.finish(&[s, q]).expect("outputs");
    let r = interp::eval(&p, &[ints(&[i64::MAX]), ints(&[1])]);
    t.check(
        matches!(&r, Ok(o) if o[0] == ints(&[i64::MIN]) && o[1] == ints(&[i64::MAX])),
        || format!("i64::MAX + 1 and i64::MAX / 1: {r:?}"),
    );
    let r = interp::eval(&p, &[ints(&[1]), ints(&[0])]);
    t.check(
        matches!(&r, Err(EvalError::Kernel { name, source: crate::ir::KernelError::Domain(_), .. }) if name == "bad"),
        || format!("i64 1 / 0: {r:?}"),
    );
}

/// Missing and ill-typed derivative rules are errors naming the node.
fn rules(t: &mut Tally) {
    let same = |x: &[TensorType]| Ok(x[0].clone());
    let ident = |x: &[&Tensor]| Ok(x[0].clone());
    let build = |prim: CustomPrimitive| {
        let mut b = Builder::new();
        let x = b
            .input("x", TensorType::new(DType::F64, [2]), InputKind::Data)
            .expect("fresh");
        b.set_name_prefix("custom");
        let y = b.apply(Arc::new(prim), &[x]).expect("fits");
        b.finish(&[y]).expect("output")
    };
    let bare = build(CustomPrimitive::new("bare", same, ident));
    t.check(matches!(ad::vjp(&bare), Err(AdError::Rule { ref name, source: RuleError::Missing { mode: "vjp", .. }, .. }) if name == "custom"), || "missing vjp rule not reported".to_string());
    t.check(matches!(ad::jvp(&bare), Err(AdError::Rule { ref name, source: RuleError::Missing { mode: "jvp", .. }, .. }) if name == "custom"), || "missing jvp rule not reported".to_string());
    let wrong_type = build(
        CustomPrimitive::new("wrong_type", same, ident)
            .with_vjp(|b, _x, _y, _u| Ok(vec![Some(b.zeros(&TensorType::new(DType::F64, [3]))?)])),
    );
    t.check(
        matches!(ad::vjp(&wrong_type), Err(AdError::RuleType { ref name, .. }) if name == "custom"),
        || "ill-typed cotangent not reported".to_string(),
    );
    let wrong_count = build(
        CustomPrimitive::new("wrong_count", same, ident)
            .with_vjp(|_b, _x, _y, u| Ok(vec![Some(u), Some(u)])),
    );
    t.check(
        matches!(ad::vjp(&wrong_count), Err(AdError::Build(ref m)) if m.contains("custom")),
        || "wrong cotangent count not reported".to_string(),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `modules/rewrite_counterexample*.json` are the counterexample before and after the rewrite.
    #[test]
    fn rewrite_counterexample_modules() {
        let registry = crate::prim::builtins();
        let before = lensir::from_str(
            include_str!("../../data/rewrite_counterexample.json"),
            registry,
        )
        .unwrap();
        let after = lensir::from_str(
            include_str!("../../data/rewrite_counterexample.rewritten.json"),
            registry,
        )
        .unwrap();
        assert_eq!(before, counterexample_program());
        assert_eq!(eliminate_identity_reshapes(&before).unwrap().program, after);
        let one = [Tensor::f64([1], vec![1.0]).unwrap()];
        let grad = |p: &Program| {
            let d = Derivatives::new(p).unwrap();
            d.vjp_at(&one, &one).unwrap().1[0].to_f64_vec()[0]
        };
        assert_eq!((grad(&before), grad(&after)), (1.0, 0.0));
    }
}
