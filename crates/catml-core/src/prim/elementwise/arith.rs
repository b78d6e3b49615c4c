//! add, sub, neg, mul as rows: equal-shape elementwise ring operations (broadcasting is
//! explicit), with kernels in the operand's own dtype that write into a dying operand's buffer;
//! and div's kernel, of the same kind.
//! add and sub are linear and mul bilinear, so their derivatives are the operations themselves
//! (`BinaryDerivative::Linear`, `BinaryDerivative::Bilinear`); neg's is neg.

use super::row::{
    BinaryDerivative, BinaryRow, BlockFns, RowBudget, Sign, TensorKernel, UnaryDerivative, UnaryRow,
};
use super::unary_rows::base;
use super::{Binary, Domain, Unary};
use crate::ir::{Builder, Fragment, KernelError, Operands, Prim, RuleError, Var};
use crate::prim::dispatch::{
    eval_float, eval_ring, eval_zip, map_block, map_in_place, zip_block, zip_in_place, FloatKernel,
    FloatMapInPlace, FloatZip, RingKernel,
};
use crate::prim::Ops;
use crate::tensor::{kernels, Array, Element, Float, Tensor};

/// Sums the present terms; `None` if all are zero.
pub fn sum_terms(b: &mut Builder, terms: &[Option<Var>]) -> Result<Option<Var>, RuleError> {
    let mut acc: Option<Var> = None;
    for t in terms.iter().flatten() {
        acc = Some(match acc {
            None => *t,
            Some(a) => b.add(a, *t)?,
        });
    }
    Ok(acc)
}

/// The product rule of a bilinear primitive B: dB(x, y) = B(dx, y) + B(x, dy).
pub(crate) fn bilinear_jvp(
    b: &mut Builder,
    prim: Prim,
    x: &[Var],
    dx: &[Option<Var>],
) -> Result<Option<Var>, RuleError> {
    let left = dx[0]
        .map(|d| b.apply(prim.clone(), &[d, x[1]]))
        .transpose()?;
    let right = dx[1].map(|d| b.apply(prim, &[x[0], d])).transpose()?;
    sum_terms(b, &[left, right])
}

macro_rules! ring_zip {
    ($ty:ident, |$a:ident, $b:ident| $body:expr) => {
        struct $ty;
        impl RingKernel for $ty {
            fn ring<T: Element>(&self, x: &[&Array<T>]) -> Result<Array<T>, KernelError> {
                Ok(kernels::zip_with(x[0], x[1], |$a, $b| $body)?)
            }
        }
        impl FloatZip for $ty {
            fn apply<T: Float>(&self, $a: T, $b: T) -> T {
                $body
            }
        }
    };
}

ring_zip!(AddK, |a, b| a + b);
ring_zip!(SubK, |a, b| a - b);
ring_zip!(MulK, |a, b| a * b);

/// x / y on floats. Division is correctly rounded in f32 as in f64, and an f64 quotient of two
/// f32 values rounded to f32 is the f32 quotient (f64 carries more than 2 · 24 + 2 bits), so
/// this kernel gives the bits of div's `f`.
struct DivK;

impl FloatZip for DivK {
    fn apply<T: Float>(&self, a: T, b: T) -> T {
        a / b
    }
}

impl FloatKernel for DivK {
    fn float<T: Float>(&self, x: &[&Array<T>]) -> Result<Array<T>, KernelError> {
        Ok(kernels::zip_copy(x[0], x[1], |a, b| self.apply(a, b))?)
    }
}

/// div's kernel (the row is in `binary_rows`), in place in a dying operand.
pub(super) const DIV_KERNEL: Option<TensorKernel> = Some(TensorKernel {
    borrowed: |x: &[&Tensor]| eval_float(&DivK, x),
    owned: |x: &mut Operands| zip_in_place(&DivK, x),
    block: BlockFns {
        f32: |x, out| zip_block(&DivK, x, out),
        f64: |x, out| zip_block(&DivK, x, out),
    },
});

struct NegK;

impl RingKernel for NegK {
    fn ring<T: Element>(&self, x: &[&Array<T>]) -> Result<Array<T>, KernelError> {
        Ok(x[0].map(|a| -a.clone()))
    }
}

impl FloatMapInPlace for NegK {
    fn apply_all<T: Float>(&self, buf: &mut [T]) {
        for v in buf {
            *v = -*v;
        }
    }
    fn apply_from<T: Float>(&self, x: &[T], out: &mut [T]) {
        for (o, &v) in out.iter_mut().zip(x) {
            *o = -v;
        }
    }
}

/// The row kernel of a ring zip, in place in a dying operand.
macro_rules! zip_kernel {
    ($k:ident) => {
        Some(TensorKernel {
            borrowed: |x: &[&Tensor]| eval_zip(&$k, x),
            owned: |x: &mut Operands| zip_in_place(&$k, x),
            block: BlockFns {
                f32: |x, out| zip_block(&$k, x, out),
                f64: |x, out| zip_block(&$k, x, out),
            },
        })
    };
}

/// The base of a ring row: exact over rationals, defined everywhere.
const fn ring(
    name: &'static str,
    formula: &'static str,
    f: fn(f64, f64) -> f64,
    exact: fn(&crate::tensor::Rational, &crate::tensor::Rational) -> crate::tensor::Rational,
    derivative: BinaryDerivative,
) -> BinaryRow {
    BinaryRow {
        name,
        formula,
        f,
        exact: Some(exact),
        domains: [Domain::All, Domain::All],
        derivative,
        rule: crate::ir::RuleKind::Exact,
        kink: None,
        lower: None,
        budget: RowBudget::Relative(1.0),
        fragment: Fragment::Outside,
        kernel: None,
        int: None,
        caps: [64.0, 64.0],
        weight: 1,
        range: |x, y| x.plus(y),
    }
}

/// x + y; pullback (u, u).
pub static ADD: BinaryRow = BinaryRow {
    fragment: Fragment::Core,
    kernel: zip_kernel!(AddK),
    int: Some(super::int::add),
    weight: 3,
    ..ring(
        "add",
        "x + y",
        |x, y| x + y,
        |x, y| x + y,
        BinaryDerivative::Linear([Sign::Plus, Sign::Plus]),
    )
};

/// x - y; pullback (u, -u).
pub static SUB: BinaryRow = BinaryRow {
    kernel: zip_kernel!(SubK),
    int: Some(super::int::sub),
    weight: 2,
    // x + (-1) y
    lower: Some(|b, x, y| {
        let n = b.scale(y, -1.0)?;
        b.add(x, n)
    }),
    range: |x, y| x.minus(y),
    ..ring(
        "sub",
        "x - y",
        |x, y| x - y,
        |x, y| x - y,
        BinaryDerivative::Linear([Sign::Plus, Sign::Minus]),
    )
};

/// x ⊙ y; pullback (u ⊙ y, u ⊙ x).
pub static MUL: BinaryRow = BinaryRow {
    fragment: Fragment::Core,
    kernel: zip_kernel!(MulK),
    int: Some(super::int::mul),
    caps: [4.0, 4.0],
    weight: 3,
    range: |x, y| x.times(y),
    ..ring(
        "mul",
        "x ⊙ y",
        |x, y| x * y,
        |x, y| x * y,
        BinaryDerivative::Bilinear,
    )
};

/// -x; pullback -u.
pub static NEG: UnaryRow = UnaryRow {
    exact: Some(|x, _| -x),
    int: Some(super::int::neg),
    budget: RowBudget::Exact,
    kernel: Some(TensorKernel {
        borrowed: |x: &[&Tensor]| eval_ring(&NegK, x),
        owned: |x: &mut Operands| map_in_place(&NegK, x),
        block: BlockFns {
            f32: |x, out| map_block(&NegK, x, out),
            f64: |x, out| map_block(&NegK, x, out),
        },
    }),
    // (-1) x
    lower: Some(|b, x, _| b.scale(x, -1.0)),
    cap: f64::INFINITY,
    ..base(
        "neg",
        "-x",
        |x, _| -x,
        UnaryDerivative::Apply(|b, _, _, u, _| b.neg(u)),
        |x, _| x.negated(),
    )
};

/// The primitives of these rows, by the names the builder methods and tests use.
#[allow(non_upper_case_globals)]
pub const Add: Binary = Binary::new(&ADD);
#[allow(non_upper_case_globals)]
pub const Sub: Binary = Binary::new(&SUB);
#[allow(non_upper_case_globals)]
pub const Mul: Binary = Binary::new(&MUL);
#[allow(non_upper_case_globals)]
pub const Neg: Unary = Unary::of(&NEG);
