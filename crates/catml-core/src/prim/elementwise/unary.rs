//! The unary rows with native-precision kernels: exp, log, tanh, sigmoid, relu, heaviside,
//! reciprocal, rsqrt; and the kernels of sqrt, square and abs. Their kernels compute in the
//! operand's own dtype (tanh vectorised), so an f32 result is the f32 library's; the f64 `f` of
//! each row states the same function.
//!
//! Derivatives: exp' = y; log' = 1/x; tanh' applied to u is the fused tanh_pullback(y, u);
//! sigmoid' = y (1 - y); relu' = H(x) with H(0) = 0 (`docs/conventions.md`); H' = 0;
//! reciprocal' = -y²; rsqrt' = -y³/2.

use num_traits::{One, Zero};

use super::row::{BlockFns, RowBudget, TensorKernel, UnaryDerivative, UnaryRow};
use super::unary_rows::base;
use super::{Domain, Interval, Unary};
use crate::ir::{Builder, Fragment, KernelError, Operands, RuleKind, TypeError, Var};
use crate::prim::dispatch::{eval_float, map_block, map_in_place, FloatKernel, FloatMapInPlace};
use crate::prim::Ops;
use crate::tensor::{kernels, Array, Float, Rational, Tensor};

/// A float map of the operand's own dtype, in place or into a copy.
macro_rules! float_map {
    ($ty:ident, |$v:ident| $body:expr) => {
        struct $ty;
        impl FloatKernel for $ty {
            fn float<T: Float>(&self, x: &[&Array<T>]) -> Result<Array<T>, KernelError> {
                Ok(kernels::map_copy(x[0], |d| self.apply_all(d))?)
            }
        }
        impl FloatMapInPlace for $ty {
            fn apply_all<T: Float>(&self, buf: &mut [T]) {
                for v in buf {
                    let $v: T = *v;
                    *v = $body;
                }
            }
            fn apply_from<T: Float>(&self, x: &[T], out: &mut [T]) {
                for (o, &$v) in out.iter_mut().zip(x) {
                    *o = $body;
                }
            }
        }
    };
}

/// The row kernel of a float map.
macro_rules! kernel {
    ($k:ident) => {
        Some(TensorKernel {
            borrowed: |x: &[&Tensor]| eval_float(&$k, x),
            owned: |x: &mut Operands| map_in_place(&$k, x),
            block: BlockFns {
                f32: |x, out| map_block(&$k, x, out),
                f64: |x, out| map_block(&$k, x, out),
            },
        })
    };
}

float_map!(ExpK, |v| v.exp());
float_map!(LogK, |v| v.ln());
float_map!(SigmoidK, |v| {
    if v >= T::zero() {
        T::one() / (T::one() + (-v).exp())
    } else {
        let e = v.exp();
        e / (T::one() + e)
    }
});
float_map!(ReluK, |v| if v > T::zero() { v } else { T::zero() });
float_map!(HeavisideK, |v| if v > T::zero() {
    T::one()
} else {
    T::zero()
});
float_map!(ReciprocalK, |v| T::one() / v);
float_map!(RsqrtK, |v| T::one() / v.sqrt());
float_map!(SqrtK, |v| v.sqrt());
float_map!(SquareK, |v| v * v);
float_map!(AbsK, |v| v.abs());

/// Kernels of rows stated in `unary_rows`. Each operation is correctly rounded (√x, x²) or
/// exact (|x|) in f32 as in f64, and an f64 result rounded to f32 is then the f32 result (f64
/// carries more than 2 · 24 + 2 bits), so the operand's own dtype gives the bits `f` gives.
pub(super) const SQRT_KERNEL: Option<TensorKernel> = kernel!(SqrtK);
pub(super) const SQUARE_KERNEL: Option<TensorKernel> = kernel!(SquareK);
pub(super) const ABS_KERNEL: Option<TensorKernel> = kernel!(AbsK);

struct TanhK;

impl FloatKernel for TanhK {
    fn float<T: Float>(&self, x: &[&Array<T>]) -> Result<Array<T>, KernelError> {
        Ok(kernels::map_copy(x[0], |d| self.apply_all(d))?)
    }
}

impl FloatMapInPlace for TanhK {
    fn apply_all<T: Float>(&self, buf: &mut [T]) {
        T::tanh_assign(buf)
    }
}

fn sigmoid(x: f64) -> f64 {
    if x >= 0.0 {
        1.0 / (1.0 + (-x).exp())
    } else {
        let e = x.exp();
        e / (1.0 + e)
    }
}

fn heaviside(x: f64) -> f64 {
    if x > 0.0 {
        1.0
    } else {
        0.0
    }
}

fn positive_part(x: &Rational) -> Rational {
    if *x > Rational::zero() {
        x.clone()
    } else {
        Rational::zero()
    }
}

fn heaviside_exact(x: &Rational) -> Rational {
    if *x > Rational::zero() {
        Rational::one()
    } else {
        Rational::zero()
    }
}

fn is_zero(x: f64, _: &[f64]) -> bool {
    x == 0.0
}

/// y ⊙ (1 - y)
fn logistic_slope(b: &mut Builder, _: Var, y: Var, _: &[f64]) -> Result<Option<Var>, TypeError> {
    let one = b.full_like(1.0, y)?;
    let c = b.sub(one, y)?;
    b.mul(y, c).map(Some)
}

/// -y ⊙ y
fn neg_square(b: &mut Builder, _: Var, y: Var, _: &[f64]) -> Result<Option<Var>, TypeError> {
    let y2 = b.mul(y, y)?;
    b.neg(y2).map(Some)
}

/// -1/2 y^3
fn rsqrt_slope(b: &mut Builder, _: Var, y: Var, _: &[f64]) -> Result<Option<Var>, TypeError> {
    let y2 = b.mul(y, y)?;
    let y3 = b.mul(y2, y)?;
    b.scale(y3, -0.5).map(Some)
}

/// sigmoid(x) = (1 + tanh(x / 2)) / 2, an identity that stays finite for every x.
fn sigmoid_lower(b: &mut Builder, x: Var, _: &[f64]) -> Result<Var, TypeError> {
    let half = b.scale(x, 0.5)?;
    let t = b.tanh(half)?;
    let t = b.scale(t, 0.5)?;
    let c = b.full_like(0.5, t)?;
    b.add(t, c)
}

/// No generator cap: the operation is defined and bounded for every operand it meets.
const UNCAPPED: f64 = f64::INFINITY;

pub static EXP: UnaryRow = UnaryRow {
    budget: RowBudget::Relative(8.0),
    fragment: Fragment::Core,
    kernel: kernel!(ExpK),
    cap: 2.0,
    weight: 2,
    ..base(
        "exp",
        "e^x",
        |x, _| x.exp(),
        UnaryDerivative::Factor(|_, _, y, _| Ok(Some(y))),
        |x, _| x.increasing(f64::exp),
    )
};

pub static LOG: UnaryRow = UnaryRow {
    domain: |_| Domain::Positive,
    budget: RowBudget::Relative(8.0),
    fragment: Fragment::LoweringExtra(
        "log_softmax and cross_entropy need a logarithm, which the core fragment lacks",
    ),
    kernel: kernel!(LogK),
    cap: UNCAPPED,
    ..base(
        "log",
        "ln x, x > 0",
        |x, _| x.ln(),
        UnaryDerivative::Factor(|b, x, _, _| b.reciprocal(x).map(Some)),
        |x, _| x.increasing(f64::ln),
    )
};

pub static TANH: UnaryRow = UnaryRow {
    budget: RowBudget::Relative(8.0),
    fragment: Fragment::Core,
    kernel: kernel!(TanhK),
    cap: UNCAPPED,
    weight: 2,
    ..base(
        "tanh",
        "tanh x",
        |x, _| x.tanh(),
        // ẏ = ẋ (1 - y²), one fused node.
        UnaryDerivative::Apply(|b, _, y, u, _| b.tanh_pullback(y, u)),
        |x, _| x.increasing(f64::tanh),
    )
};

pub static SIGMOID: UnaryRow = UnaryRow {
    budget: RowBudget::Relative(8.0),
    kernel: kernel!(SigmoidK),
    lower: Some(sigmoid_lower),
    cap: UNCAPPED,
    ..base(
        "sigmoid",
        "1 / (1 + e^-x)",
        |x, _| sigmoid(x),
        UnaryDerivative::Factor(logistic_slope),
        |x, _| x.increasing(sigmoid),
    )
};

pub static RELU: UnaryRow = UnaryRow {
    exact: Some(|x, _| positive_part(x)),
    rule: RuleKind::Convention("relu'(0) = 0"),
    kink: Some(is_zero),
    budget: RowBudget::Exact,
    kernel: kernel!(ReluK),
    cap: UNCAPPED,
    ..base(
        "relu",
        "max(x, 0)",
        |x, _| if x > 0.0 { x } else { 0.0 },
        UnaryDerivative::Factor(|b, x, _, _| b.heaviside(x).map(Some)),
        |x, _| x.increasing(|v| v.max(0.0)),
    )
};

/// The Heaviside step with H(0) = 0: ReLU's derivative. Its own derivative is zero (exact away
/// from 0; at 0 the convention decides, and evaluations there are reported).
pub static HEAVISIDE: UnaryRow = UnaryRow {
    exact: Some(|x, _| heaviside_exact(x)),
    rule: RuleKind::Convention("H(0) = 0, so relu'(0) = 0"),
    kink: Some(is_zero),
    budget: RowBudget::Exact,
    kernel: kernel!(HeavisideK),
    cap: UNCAPPED,
    ..base(
        "heaviside",
        "1 for x > 0, else 0",
        |x, _| heaviside(x),
        UnaryDerivative::Factor(|_, _, _, _| Ok(None)),
        |x, _| x.increasing(heaviside),
    )
};

pub static RECIPROCAL: UnaryRow = UnaryRow {
    exact: Some(|x, _| x.recip()),
    domain: |_| Domain::NonZero,
    budget: RowBudget::Relative(1.0),
    fragment: Fragment::Core,
    kernel: kernel!(ReciprocalK),
    cap: UNCAPPED,
    ..base(
        "reciprocal",
        "1 / x, x != 0",
        |x, _| 1.0 / x,
        UnaryDerivative::Factor(neg_square),
        // Operands lie on one side of 0.
        |x, _| Interval::new(1.0 / x.hi, 1.0 / x.lo),
    )
};

pub static RSQRT: UnaryRow = UnaryRow {
    domain: |_| Domain::Positive,
    budget: RowBudget::Relative(2.0),
    fragment: Fragment::Core,
    kernel: kernel!(RsqrtK),
    cap: UNCAPPED,
    ..base(
        "rsqrt",
        "1 / √x, x > 0",
        |x, _| 1.0 / x.sqrt(),
        UnaryDerivative::Factor(rsqrt_slope),
        |x, _| Interval::new(1.0 / x.hi.sqrt(), 1.0 / x.lo.sqrt()),
    )
};

/// The primitives of these rows, by the names the builder methods and tests use.
#[allow(non_upper_case_globals)]
pub const Exp: Unary = Unary::of(&EXP);
#[allow(non_upper_case_globals)]
pub const Log: Unary = Unary::of(&LOG);
#[allow(non_upper_case_globals)]
pub const Tanh: Unary = Unary::of(&TANH);
#[allow(non_upper_case_globals)]
pub const Sigmoid: Unary = Unary::of(&SIGMOID);
#[allow(non_upper_case_globals)]
pub const Relu: Unary = Unary::of(&RELU);
#[allow(non_upper_case_globals)]
pub const Heaviside: Unary = Unary::of(&HEAVISIDE);
#[allow(non_upper_case_globals)]
pub const Reciprocal: Unary = Unary::of(&RECIPROCAL);
#[allow(non_upper_case_globals)]
pub const Rsqrt: Unary = Unary::of(&RSQRT);
