//! The unary elementwise rows: each operation once, with its derivative written in primitives.
//! Formulas and conventions are those of `docs/ops.md`.

use std::f64::consts::{FRAC_1_SQRT_2, FRAC_2_SQRT_PI, PI};

use num_traits::{One, Signed, Zero};

use super::row::{
    apply_unary, rational, AttrKind, AttrSpec, Domain, Interval, RowBudget, UnaryDerivative,
    UnaryFactor, UnaryRow,
};
use crate::ir::{Builder, Fragment, RuleKind, TypeError, Var};
use crate::prim::Ops;
use crate::tensor::Rational;

const NO_ATTRS: &[AttrSpec] = &[];

fn any(_: &[f64]) -> Domain {
    Domain::All
}

fn no_check(_: &[f64]) -> Result<(), TypeError> {
    Ok(())
}

fn no_attrs(_: &mut dyn FnMut() -> f64) -> Vec<f64> {
    Vec::new()
}

fn zero(_: &mut Builder, _: Var, _: Var, _: &[f64]) -> Result<Option<Var>, TypeError> {
    Ok(None)
}

/// f'(x) = c, a constant.
fn constant_slope(b: &mut Builder, x: Var, c: f64) -> Result<Option<Var>, TypeError> {
    Ok(Some(b.full_like(c, x)?))
}

/// The row `name` among [`UNARY_ROWS`].
fn row(name: &str) -> &'static UnaryRow {
    UNARY_ROWS
        .iter()
        .find(|r| r.name == name)
        .copied()
        .expect("a row of this table")
}

fn sin_d(b: &mut Builder, x: Var, _: Var, _: &[f64]) -> Result<Option<Var>, TypeError> {
    apply_unary(b, row("cos"), &[], x).map(Some)
}

fn cos_d(b: &mut Builder, x: Var, _: Var, _: &[f64]) -> Result<Option<Var>, TypeError> {
    let s = apply_unary(b, row("sin"), &[], x)?;
    b.neg(s).map(Some)
}

/// sqrt'(x) = 1 / (2 y).
fn sqrt_d(b: &mut Builder, _: Var, y: Var, _: &[f64]) -> Result<Option<Var>, TypeError> {
    let r = b.reciprocal(y)?;
    b.scale(r, 0.5).map(Some)
}

/// abs'(x) = sign(x), 0 at 0.
fn abs_d(b: &mut Builder, x: Var, _: Var, _: &[f64]) -> Result<Option<Var>, TypeError> {
    apply_unary(b, row("sign"), &[], x).map(Some)
}

/// erf'(x) = 2/√π e^(-x²).
fn erf_d(b: &mut Builder, x: Var, _: Var, _: &[f64]) -> Result<Option<Var>, TypeError> {
    let x2 = b.mul(x, x)?;
    let n = b.neg(x2)?;
    let e = b.exp(n)?;
    b.scale(e, FRAC_2_SQRT_PI).map(Some)
}

fn square_d(b: &mut Builder, x: Var, _: Var, _: &[f64]) -> Result<Option<Var>, TypeError> {
    b.scale(x, 2.0).map(Some)
}

/// log1p'(x) = 1 / (1 + x).
fn log1p_d(b: &mut Builder, x: Var, _: Var, _: &[f64]) -> Result<Option<Var>, TypeError> {
    let one = b.full_like(1.0, x)?;
    let s = b.add(one, x)?;
    b.reciprocal(s).map(Some)
}

/// expm1'(x) = e^x = y + 1.
fn expm1_d(b: &mut Builder, _: Var, y: Var, _: &[f64]) -> Result<Option<Var>, TypeError> {
    let one = b.full_like(1.0, y)?;
    b.add(y, one).map(Some)
}

/// softplus'(x) = sigmoid(x).
fn softplus_d(b: &mut Builder, x: Var, _: Var, _: &[f64]) -> Result<Option<Var>, TypeError> {
    b.sigmoid(x).map(Some)
}

/// Φ(x) = (1 + erf(x/√2)) / 2 and φ(x) = e^(-x²/2) / √(2π).
fn gelu_exact(x: f64) -> f64 {
    0.5 * x * libm::erfc(-x * FRAC_1_SQRT_2)
}

const GELU_K: f64 = 0.797_884_560_802_865_4; // √(2/π)
const GELU_C: f64 = 0.044_715;

fn gelu_tanh(x: f64) -> f64 {
    0.5 * x * (1.0 + (GELU_K * (x + GELU_C * x * x * x)).tanh())
}

/// gelu'(x) = Φ(x) + x φ(x); with the tanh form t = tanh(k(x + c x³)):
/// (1 + t)/2 + x (1 - t²) k (1 + 3c x²) / 2.
fn gelu_d(b: &mut Builder, x: Var, _: Var, a: &[f64]) -> Result<Option<Var>, TypeError> {
    if a[0] != 0.0 {
        let x2 = b.mul(x, x)?;
        let x3 = b.mul(x2, x)?;
        let c3 = b.scale(x3, GELU_C)?;
        let inner = b.add(x, c3)?;
        let z = b.scale(inner, GELU_K)?;
        let t = b.tanh(z)?;
        let one = b.full_like(1.0, x)?;
        let p = b.add(one, t)?;
        let half_p = b.scale(p, 0.5)?;
        let t2 = b.mul(t, t)?;
        let q = b.sub(one, t2)?;
        let cx2 = b.scale(x2, 3.0 * GELU_C)?;
        let r = b.add(one, cx2)?;
        let qr = b.mul(q, r)?;
        let xqr = b.mul(x, qr)?;
        let s = b.scale(xqr, 0.5 * GELU_K)?;
        return b.add(half_p, s).map(Some);
    }
    let xs = b.scale(x, FRAC_1_SQRT_2)?;
    let e = apply_unary(b, row("erf"), &[], xs)?;
    let one = b.full_like(1.0, x)?;
    let p = b.add(one, e)?;
    let cdf = b.scale(p, 0.5)?;
    let x2 = b.mul(x, x)?;
    let n = b.scale(x2, -0.5)?;
    let g = b.exp(n)?;
    let pdf = b.scale(g, 1.0 / (2.0 * PI).sqrt())?;
    let xp = b.mul(x, pdf)?;
    b.add(cdf, xp).map(Some)
}

/// The tanh form written in core primitives.
fn gelu_lower(b: &mut Builder, x: Var, a: &[f64]) -> Result<Var, TypeError> {
    if a[0] == 0.0 {
        // The erf form has no expansion in the core fragment; it stays a gelu node.
        let p = std::sync::Arc::new(super::row::Unary::new(row("gelu"), a.to_vec())?);
        return b.op(p, &[x]);
    }
    let x2 = b.mul(x, x)?;
    let x3 = b.mul(x2, x)?;
    let c3 = b.scale(x3, GELU_C)?;
    let inner = b.add(x, c3)?;
    let z = b.scale(inner, GELU_K)?;
    let t = b.tanh(z)?;
    let one = b.full_like(1.0, x)?;
    let p = b.add(one, t)?;
    let xp = b.mul(x, p)?;
    b.scale(xp, 0.5)
}

/// leaky_relu'(x) = 1 for x > 0, else alpha: alpha + (1 - alpha) H(x).
fn leaky_d(b: &mut Builder, x: Var, _: Var, a: &[f64]) -> Result<Option<Var>, TypeError> {
    let h = b.heaviside(x)?;
    let s = b.scale(h, 1.0 - a[0])?;
    let c = b.full_like(a[0], x)?;
    b.add(s, c).map(Some)
}

/// elu'(x) = 1 for x > 0, else alpha e^x = y + alpha: H(x) + (1 - H(x)) (y + alpha).
fn elu_d(b: &mut Builder, x: Var, y: Var, a: &[f64]) -> Result<Option<Var>, TypeError> {
    let h = b.heaviside(x)?;
    let c = b.full_like(a[0], y)?;
    let neg = b.add(y, c)?;
    let one = b.full_like(1.0, x)?;
    let off = b.sub(one, h)?;
    let t = b.mul(off, neg)?;
    b.add(h, t).map(Some)
}

/// clip'(x) = 1 strictly inside (min, max), else 0: H(x - min) H(max - x).
fn clip_d(b: &mut Builder, x: Var, _: Var, a: &[f64]) -> Result<Option<Var>, TypeError> {
    let lo = b.full_like(a[0], x)?;
    let hi = b.full_like(a[1], x)?;
    let above = b.sub(x, lo)?;
    let below = b.sub(hi, x)?;
    let h1 = b.heaviside(above)?;
    let h2 = b.heaviside(below)?;
    b.mul(h1, h2).map(Some)
}

/// powi'(x) = n x^(n-1).
fn powi_d(b: &mut Builder, x: Var, _: Var, a: &[f64]) -> Result<Option<Var>, TypeError> {
    let n = a[0];
    if n == 0.0 {
        return Ok(None);
    }
    if n == 1.0 {
        return constant_slope(b, x, 1.0);
    }
    let p = apply_unary(b, row("powi"), &[n - 1.0], x)?;
    b.scale(p, n).map(Some)
}

fn powi(x: f64, n: i32) -> f64 {
    x.powi(n)
}

fn powi_exact(x: &Rational, n: i32) -> Rational {
    let p = num_traits::pow(x.clone(), n.unsigned_abs() as usize);
    if n < 0 {
        p.recip()
    } else {
        p
    }
}

fn check_clip(a: &[f64]) -> Result<(), TypeError> {
    if a[0] > a[1] {
        return Err(TypeError::attr(
            "min",
            format!("{} is above max {}", a[0], a[1]),
        ));
    }
    Ok(())
}

fn check_alpha(a: &[f64]) -> Result<(), TypeError> {
    if a[0] < 0.0 {
        return Err(TypeError::attr(
            "alpha",
            format!("{} is negative, expected alpha >= 0", a[0]),
        ));
    }
    Ok(())
}

/// Rounds half to even, exactly.
fn round_half_even(x: &Rational) -> Rational {
    let f = x.floor();
    let d = x - &f;
    let half = Rational::new(1.into(), 2.into());
    if d > half || (d == half && !(f.to_integer() % 2u8).is_zero()) {
        f + Rational::one()
    } else {
        f
    }
}

fn sign_exact(x: &Rational) -> Rational {
    if x.is_zero() {
        Rational::zero()
    } else {
        x.signum()
    }
}

fn whole(_: Interval, _: &[f64]) -> Interval {
    Interval::symmetric(1.0)
}

const ALPHA: &[AttrSpec] = &[AttrSpec {
    name: "alpha",
    kind: AttrKind::Float,
    default: Some(0.01),
}];

const ELU_ALPHA: &[AttrSpec] = &[AttrSpec {
    name: "alpha",
    kind: AttrKind::Float,
    default: Some(1.0),
}];

const DECLARED_ZERO: RuleKind =
    RuleKind::Declared("piecewise constant: derivative 0 everywhere, undefined at the jumps");

/// Base fields of a smooth row with no attributes whose derivative is a factor; rows override
/// what differs.
pub(super) const fn smooth(
    name: &'static str,
    formula: &'static str,
    f: fn(f64, &[f64]) -> f64,
    derivative: UnaryFactor,
    range: fn(Interval, &[f64]) -> Interval,
) -> UnaryRow {
    base(name, formula, f, UnaryDerivative::Factor(derivative), range)
}

/// Base fields of a smooth row with no attributes; rows override what differs.
pub(super) const fn base(
    name: &'static str,
    formula: &'static str,
    f: fn(f64, &[f64]) -> f64,
    derivative: UnaryDerivative,
    range: fn(Interval, &[f64]) -> Interval,
) -> UnaryRow {
    UnaryRow {
        name,
        formula,
        attrs: NO_ATTRS,
        check: no_check,
        f,
        exact: None,
        domain: any,
        derivative,
        rule: RuleKind::Exact,
        kink: None,
        lower: None,
        budget: RowBudget::Relative(1.0),
        fragment: Fragment::Outside,
        kernel: None,
        int: None,
        cap: 4.0,
        weight: 1,
        range,
        sample_attrs: no_attrs,
    }
}

/// Base fields of a piecewise-constant row (derivative 0, declared), exact over rationals.
const fn stepwise(
    name: &'static str,
    formula: &'static str,
    f: fn(f64, &[f64]) -> f64,
    exact: fn(&Rational, &[f64]) -> Rational,
) -> UnaryRow {
    UnaryRow {
        exact: Some(exact),
        rule: DECLARED_ZERO,
        budget: RowBudget::Exact,
        cap: 64.0,
        ..smooth(name, formula, f, zero, |x, _| {
            x.increasing(f64::floor).hull(x.increasing(f64::ceil))
        })
    }
}

/// atan'(x) = 1 / (1 + x²).
fn atan_d(b: &mut Builder, x: Var, _: Var, _: &[f64]) -> Result<Option<Var>, TypeError> {
    let x2 = b.mul(x, x)?;
    let one = b.full_like(1.0, x)?;
    let s = b.add(one, x2)?;
    b.reciprocal(s).map(Some)
}

/// Every unary elementwise row.
pub static UNARY_ROWS: &[&UnaryRow] = &[
    &super::unary::EXP,
    &super::unary::LOG,
    &super::unary::TANH,
    &super::unary::SIGMOID,
    &super::unary::RELU,
    &super::unary::HEAVISIDE,
    &super::unary::RECIPROCAL,
    &super::unary::RSQRT,
    &super::arith::NEG,
    &smooth("sin", "sin x", |x, _| x.sin(), sin_d, whole),
    &smooth("cos", "cos x", |x, _| x.cos(), cos_d, whole),
    &smooth(
        "atan",
        "arctan x",
        |x, _| x.atan(),
        atan_d,
        |x, _| x.increasing(f64::atan),
    ),
    &UnaryRow {
        domain: |_| Domain::NonNegative,
        kernel: super::unary::SQRT_KERNEL,
        ..smooth(
            "sqrt",
            "√x, x >= 0",
            |x, _| x.sqrt(),
            sqrt_d,
            |x, _| x.increasing(f64::sqrt),
        )
    },
    &UnaryRow {
        exact: Some(|x, _| x.abs()),
        int: Some(super::int::abs),
        rule: RuleKind::Convention("abs'(0) = 0"),
        kink: Some(|x, _| x == 0.0),
        budget: RowBudget::Exact,
        kernel: super::unary::ABS_KERNEL,
        ..smooth(
            "abs",
            "|x|",
            |x, _| x.abs(),
            abs_d,
            |x, _| Interval::new(0.0, x.mag()),
        )
    },
    &UnaryRow {
        exact: Some(|x, _| sign_exact(x)),
        int: Some(super::int::sign),
        rule: RuleKind::Declared("sign' = 0: piecewise constant, undefined at 0"),
        budget: RowBudget::Exact,
        ..smooth(
            "sign",
            "-1, 0 or 1",
            |x, _| if x == 0.0 { 0.0 } else { x.signum() },
            zero,
            whole,
        )
    },
    &smooth(
        "erf",
        "2/√π ∫_0^x e^(-t²) dt",
        |x, _| libm::erf(x),
        erf_d,
        |x, _| x.increasing(libm::erf),
    ),
    &UnaryRow {
        exact: Some(|x, _| x * x),
        int: Some(super::int::square),
        lower: Some(|b, x, _| b.mul(x, x)),
        cap: 8.0,
        kernel: super::unary::SQUARE_KERNEL,
        ..smooth("square", "x²", |x, _| x * x, square_d, |x, _| x.square())
    },
    &UnaryRow {
        domain: |_| Domain::Above(-1.0),
        ..smooth(
            "log1p",
            "ln(1 + x), x > -1",
            |x, _| x.ln_1p(),
            log1p_d,
            |x, _| x.increasing(f64::ln_1p),
        )
    },
    &UnaryRow {
        lower: Some(|b, x, _| {
            let e = b.exp(x)?;
            let one = b.full_like(-1.0, e)?;
            b.add(e, one)
        }),
        cap: 2.0,
        ..smooth(
            "expm1",
            "e^x - 1",
            |x, _| x.exp_m1(),
            expm1_d,
            |x, _| x.increasing(f64::exp_m1),
        )
    },
    &smooth(
        "softplus",
        "ln(1 + e^x), as max(x, 0) + ln(1 + e^-|x|)",
        |x, _| x.max(0.0) + (-x.abs()).exp().ln_1p(),
        softplus_d,
        |x, _| x.increasing(|v| v.max(0.0) + (-v.abs()).exp().ln_1p()),
    ),
    &stepwise("floor", "⌊x⌋", |x, _| x.floor(), |x, _| x.floor()),
    &stepwise("ceil", "⌈x⌉", |x, _| x.ceil(), |x, _| x.ceil()),
    &stepwise(
        "round",
        "x rounded to the nearest integer, half to even",
        |x, _| x.round_ties_even(),
        |x, _| round_half_even(x),
    ),
    &UnaryRow {
        attrs: &[AttrSpec {
            name: "approximate",
            kind: AttrKind::Bool,
            default: Some(0.0),
        }],
        lower: Some(gelu_lower),
        sample_attrs: |u| vec![if u() < 0.5 { 0.0 } else { 1.0 }],
        ..smooth(
            "gelu",
            "x Φ(x); approximate: 0.5 x (1 + tanh(√(2/π) (x + 0.044715 x³)))",
            |x, a| {
                if a[0] != 0.0 {
                    gelu_tanh(x)
                } else {
                    gelu_exact(x)
                }
            },
            gelu_d,
            |x, _| Interval::new(-0.2, x.hi.max(0.0)),
        )
    },
    &UnaryRow {
        attrs: ALPHA,
        check: check_alpha,
        exact: Some(|x, a| {
            if x.is_positive() {
                x.clone()
            } else {
                x * rational(a[0])
            }
        }),
        rule: RuleKind::Convention("leaky_relu'(0) = alpha"),
        kink: Some(|x, _| x == 0.0),
        sample_attrs: |u| vec![u()],
        ..smooth(
            "leaky_relu",
            "x for x > 0, else alpha x",
            |x, a| if x > 0.0 { x } else { a[0] * x },
            leaky_d,
            |x, a| x.increasing(|v| if v > 0.0 { v } else { a[0] * v }),
        )
    },
    &UnaryRow {
        attrs: ELU_ALPHA,
        check: check_alpha,
        rule: RuleKind::Convention("elu'(0) = alpha"),
        kink: Some(|x, _| x == 0.0),
        sample_attrs: |u| vec![2.0 * u()],
        ..smooth(
            "elu",
            "x for x > 0, else alpha (e^x - 1)",
            |x, a| if x > 0.0 { x } else { a[0] * x.exp_m1() },
            elu_d,
            |x, a| x.increasing(|v| if v > 0.0 { v } else { a[0] * v.exp_m1() }),
        )
    },
    &UnaryRow {
        attrs: &[
            AttrSpec {
                name: "min",
                kind: AttrKind::Float,
                default: None,
            },
            AttrSpec {
                name: "max",
                kind: AttrKind::Float,
                default: None,
            },
        ],
        check: check_clip,
        exact: Some(|x, a| {
            let (lo, hi) = (rational(a[0]), rational(a[1]));
            if *x < lo {
                lo
            } else if *x > hi {
                hi
            } else {
                x.clone()
            }
        }),
        rule: RuleKind::Convention("clip' = 0 at min and max"),
        kink: Some(|x, a| x == a[0] || x == a[1]),
        budget: RowBudget::Relative(1.0),
        sample_attrs: |u| {
            let lo = -2.0 * u();
            vec![lo, lo + 3.0 * u()]
        },
        ..smooth(
            "clip",
            "min(max(x, min), max)",
            |x, a| x.max(a[0]).min(a[1]),
            clip_d,
            |x, a| x.increasing(|v| v.max(a[0]).min(a[1])),
        )
    },
    &UnaryRow {
        attrs: &[AttrSpec {
            name: "n",
            kind: AttrKind::Integer,
            default: None,
        }],
        exact: Some(|x, a| powi_exact(x, a[0] as i32)),
        domain: |a| {
            if a[0] < 0.0 {
                Domain::NonZero
            } else {
                Domain::All
            }
        },
        cap: 2.0,
        sample_attrs: |u| vec![(u() * 7.0).floor() - 2.0],
        ..smooth(
            "powi",
            "x^n for an integer n (x != 0 when n < 0)",
            |x, a| powi(x, a[0] as i32),
            powi_d,
            |x, a| {
                let n = a[0] as i32;
                if n >= 0 {
                    Interval::symmetric(x.mag().max(1.0).powi(n))
                } else {
                    // Operands stay at least 0.1 away from 0.
                    Interval::symmetric(10f64.powi(-n))
                }
            },
        )
    },
];
