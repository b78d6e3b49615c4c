//! The elementwise family: arithmetic, the unary maps and the rows of `prim::elementwise`.
//! Most are one ONNX operator of the same name; the rest are short compositions.

use catml_core::prim::names;
use catml_core::tensor::DType;

use super::families::MapFn;
use super::graph::{Mapped, Site};
use super::proto_build::{attribute, Attr};
use super::special::one_plus_erf_graph;
use super::ExportError;

type R = Result<Mapped, ExportError>;

/// Primitives that are exactly one ONNX operator on the same operands.
pub(crate) const SAME: &[(&str, &str)] = &[
    (names::ADD, "Add"),
    (names::SUB, "Sub"),
    (names::MUL, "Mul"),
    (names::DIV, "Div"),
    (names::NEG, "Neg"),
    (names::EXP, "Exp"),
    (names::LOG, "Log"),
    (names::TANH, "Tanh"),
    (names::SIGMOID, "Sigmoid"),
    (names::RELU, "Relu"),
    (names::RECIPROCAL, "Reciprocal"),
    (names::SQRT, "Sqrt"),
    (names::ABS, "Abs"),
    (names::SIGN, "Sign"),
    (names::FLOOR, "Floor"),
    (names::CEIL, "Ceil"),
    (names::ROUND, "Round"),
    (names::POW, "Pow"),
    (names::MAXIMUM, "Max"),
    (names::MINIMUM, "Min"),
    (names::EQUAL, "Equal"),
    (names::LESS, "Less"),
    (names::LESS_EQUAL, "LessOrEqual"),
    (names::GREATER, "Greater"),
    (names::GREATER_EQUAL, "GreaterOrEqual"),
    (names::LOGICAL_NOT, "Not"),
    (names::LOGICAL_AND, "And"),
    (names::LOGICAL_OR, "Or"),
    (names::LOGICAL_XOR, "Xor"),
    (names::WHERE, "Where"),
];

/// The others, written as short compositions.
pub(crate) const OPS: &[(&str, MapFn)] = &[
    (names::SIN, sin),
    (names::COS, cos),
    (names::SOFTPLUS, softplus),
    (names::RSQRT, rsqrt),
    (names::SQUARE, square),
    (names::LOG1P, log1p),
    (names::EXPM1, expm1),
    (names::HEAVISIDE, step),
    (names::LEAKY_RELU, leaky_relu),
    (names::ELU, elu),
    (names::GELU, gelu),
    (names::CLIP, clip),
    (names::POWI, powi),
];

pub(crate) fn same(s: &mut Site) -> R {
    let op = SAME
        .iter()
        .find(|(n, _)| *n == s.prim.name())
        .map(|(_, o)| *o)
        .expect("every `same` entry has its operator");
    let x: Vec<String> = s.x.clone();
    let refs: Vec<&str> = x.iter().map(String::as_str).collect();
    Ok(s.emit(op, &refs, vec![]))
}

/// 1 / √x
fn rsqrt(s: &mut Site) -> R {
    let x = s.x[0].clone();
    let r = s.tmp("Sqrt", &[&x], vec![]);
    Ok(s.emit("Reciprocal", &[&r], vec![]))
}

fn square(s: &mut Site) -> R {
    let x = s.x[0].clone();
    Ok(s.emit("Mul", &[&x, &x], vec![]))
}

/// `f` applied in f64 to an f32 operand and rounded once, as the kernel does (for
/// compositions whose f32 rounding would exceed the primitive's budget); f64 operands directly.
pub(super) fn in_f64(s: &mut Site, f: impl FnOnce(&mut Site, &str, DType) -> String) -> R {
    let x = s.x[0].clone();
    if s.dtype() != DType::F32 {
        let y = f(s, &x, s.dtype());
        return Ok(s.emit("Identity", &[&y], vec![]));
    }
    let x64 = s.cast(&x, DType::F64);
    let y = f(s, &x64, DType::F64);
    Ok(s.emit_cast(&y))
}

/// ln(1 + x): ONNX has no log1p.
fn log1p(s: &mut Site) -> R {
    in_f64(s, |s, x, d| {
        let one = s.const_scalar(1.0, d);
        let a = s.tmp("Add", &[&one, x], vec![]);
        s.tmp("Log", &[&a], vec![])
    })
}

/// e^x - 1: ONNX has no expm1.
fn expm1(s: &mut Site) -> R {
    in_f64(s, |s, x, d| {
        let one = s.const_scalar(1.0, d);
        let e = s.tmp("Exp", &[x], vec![]);
        s.tmp("Sub", &[&e, &one], vec![])
    })
}

/// max(x, 0) + ln(1 + e^-|x|) in f64 (onnxruntime has no double Softplus, and its float one
/// is not within the kernel's budget).
fn softplus(s: &mut Site) -> R {
    in_f64(s, |s, x, d| {
        let one = s.const_scalar(1.0, d);
        let p = s.tmp("Relu", &[x], vec![]);
        let a = s.tmp("Abs", &[x], vec![]);
        let na = s.tmp("Neg", &[&a], vec![]);
        let e = s.tmp("Exp", &[&na], vec![]);
        let l1 = s.tmp("Add", &[&one, &e], vec![]);
        let l = s.tmp("Log", &[&l1], vec![]);
        s.tmp("Add", &[&p, &l], vec![])
    })
}

fn sin(s: &mut Site) -> R {
    in_f64(s, |s, x, _| s.tmp("Sin", &[x], vec![]))
}

fn cos(s: &mut Site) -> R {
    in_f64(s, |s, x, _| s.tmp("Cos", &[x], vec![]))
}

/// H(x) = [x > 0] = relu(sign(x)), exact.
fn step(s: &mut Site) -> R {
    let x = s.x[0].clone();
    let sg = s.tmp("Sign", &[&x], vec![]);
    Ok(s.emit("Relu", &[&sg], vec![]))
}

fn alpha(s: &Site) -> f64 {
    s.attr_f64("alpha").unwrap_or(0.0)
}

/// relu(x) + alpha min(x, 0), in f64 (one rounding of the product, as the kernel).
fn leaky_relu(s: &mut Site) -> R {
    let a = alpha(s);
    in_f64(s, |s, x, d| {
        let zero = s.const_scalar(0.0, d);
        let ac = s.const_scalar(a, d);
        let p = s.tmp("Relu", &[x], vec![]);
        let n = s.tmp("Min", &[x, &zero], vec![]);
        let an = s.tmp("Mul", &[&n, &ac], vec![]);
        s.tmp("Add", &[&p, &an], vec![])
    })
}

/// relu(x) + alpha (e^min(x, 0) - 1), in f64.
fn elu(s: &mut Site) -> R {
    let a = alpha(s);
    in_f64(s, |s, x, d| {
        let zero = s.const_scalar(0.0, d);
        let one = s.const_scalar(1.0, d);
        let ac = s.const_scalar(a, d);
        let p = s.tmp("Relu", &[x], vec![]);
        let n = s.tmp("Min", &[x, &zero], vec![]);
        let e = s.tmp("Exp", &[&n], vec![]);
        let em = s.tmp("Sub", &[&e, &one], vec![]);
        let an = s.tmp("Mul", &[&em, &ac], vec![]);
        s.tmp("Add", &[&p, &an], vec![])
    })
}

/// The erf form x (1 + erf(x / √2)) / 2 is composed in f64 (`special`), with 1 + erf taken
/// as erfc for negative x. The tanh form of f32 operands goes through Gelu (an operator from
/// opset 20) in f64 and is rounded once (the float Gelu exceeds the kernel's budget);
/// otherwise it is the row's lowering.
fn gelu(s: &mut Site) -> R {
    if s.attr_bool("approximate") {
        if s.g.opset >= 20 && s.dtype() == DType::F32 {
            return in_f64(s, |s, x, _| {
                s.tmp(
                    "Gelu",
                    &[x],
                    vec![attribute("approximate", Attr::Str("tanh"))],
                )
            });
        }
        return Ok(Mapped::Lower);
    }
    in_f64(s, |s, x, d| {
        let r = s.const_scalar(std::f64::consts::FRAC_1_SQRT_2, d);
        let half = s.const_scalar(0.5, d);
        let z = s.tmp("Mul", &[x, &r], vec![]);
        let p = one_plus_erf_graph(s, &z, d);
        let h = s.tmp("Mul", &[x, &half], vec![]);
        s.tmp("Mul", &[&h, &p], vec![])
    })
}

fn clip(s: &mut Site) -> R {
    let x = s.x[0].clone();
    let d = s.dtype();
    let lo = s.const_scalar(s.attr_f64("min").unwrap_or(f64::NEG_INFINITY), d);
    let hi = s.const_scalar(s.attr_f64("max").unwrap_or(f64::INFINITY), d);
    Ok(s.emit("Clip", &[&x, &lo, &hi], vec![]))
}

/// x^n for an integer n: Pow with the exponent as a constant of the operand's dtype; f32 in
/// f64 and rounded once (onnxruntime's float Pow exceeds the kernel's budget).
fn powi(s: &mut Site) -> R {
    let n = s.attrs.get("n").and_then(|v| v.as_i64()).unwrap_or(1);
    in_f64(s, |s, x, d| {
        let e = s.const_scalar(n as f64, d);
        s.tmp("Pow", &[x, &e], vec![])
    })
}
