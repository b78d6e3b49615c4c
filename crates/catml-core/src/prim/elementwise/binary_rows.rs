//! The binary elementwise rows (operands of one type; broadcasting is explicit).

use super::row::{BinaryDerivative, BinaryRow, Domain, Interval, RowBudget};
use super::unary_rows::UNARY_ROWS;
use crate::ir::{Builder, Fragment, RuleKind, TypeError, Var};
use crate::prim::Ops;

/// ∂(x/y) = (1/y, -z/y).
fn div_d(b: &mut Builder, _: Var, y: Var, z: Var) -> Result<[Option<Var>; 2], TypeError> {
    let r = b.reciprocal(y)?;
    let zr = b.mul(z, r)?;
    Ok([Some(r), Some(b.neg(zr)?)])
}

/// ∂(x^y) = (y x^(y-1) = y z / x, z ln x), for x > 0.
fn pow_d(b: &mut Builder, x: Var, y: Var, z: Var) -> Result<[Option<Var>; 2], TypeError> {
    let r = b.reciprocal(x)?;
    let zr = b.mul(z, r)?;
    let dx = b.mul(y, zr)?;
    let l = b.log(x)?;
    Ok([Some(dx), Some(b.mul(z, l)?)])
}

/// The share of the first operand in max(x, y): H(x - y) plus half at ties,
/// (1 + sign(x - y)) / 2; the second operand gets the rest.
fn max_shares(b: &mut Builder, x: Var, y: Var) -> Result<[Option<Var>; 2], TypeError> {
    let d = b.sub(x, y)?;
    let sign = UNARY_ROWS
        .iter()
        .find(|r| r.name == "sign")
        .copied()
        .expect("sign is a row");
    let s = super::row::apply_unary(b, sign, &[], d)?;
    let half = b.scale(s, 0.5)?;
    let c = b.full_like(0.5, x)?;
    let first = b.add(c, half)?;
    let second = b.sub(c, half)?;
    Ok([Some(first), Some(second)])
}

fn maximum_d(b: &mut Builder, x: Var, y: Var, _: Var) -> Result<[Option<Var>; 2], TypeError> {
    max_shares(b, x, y)
}

fn minimum_d(b: &mut Builder, x: Var, y: Var, _: Var) -> Result<[Option<Var>; 2], TypeError> {
    let [first, second] = max_shares(b, x, y)?;
    Ok([second, first])
}

/// The hull of f at the four corners: bounds f over a box where f is monotone in each operand.
fn corners(x: Interval, y: Interval, f: fn(f64, f64) -> f64) -> Interval {
    let c = [f(x.lo, y.lo), f(x.lo, y.hi), f(x.hi, y.lo), f(x.hi, y.hi)];
    Interval::new(
        c.iter().cloned().fold(f64::INFINITY, f64::min),
        c.iter().cloned().fold(f64::NEG_INFINITY, f64::max),
    )
}

const TIES: RuleKind = RuleKind::Convention("at ties each operand gets half the derivative");

/// Every binary elementwise row.
pub static BINARY_ROWS: &[&BinaryRow] = &[
    &super::arith::ADD,
    &super::arith::SUB,
    &super::arith::MUL,
    &BinaryRow {
        name: "div",
        formula: "x / y, y != 0",
        f: |x, y| x / y,
        exact: Some(|x, y| x / y),
        domains: [Domain::All, Domain::NonZero],
        derivative: BinaryDerivative::Partials(div_d),
        rule: RuleKind::Exact,
        kink: None,
        lower: Some(|b, x, y| {
            let r = b.reciprocal(y)?;
            b.mul(x, r)
        }),
        budget: RowBudget::Relative(1.0),
        fragment: Fragment::Outside,
        kernel: super::arith::DIV_KERNEL,
        int: Some(super::int::div),
        weight: 1,
        caps: [8.0, 8.0],
        range: |x, y| {
            // y lies on one side of 0, at least 0.1 away: 1/y is monotone there.
            x.times(Interval::new(1.0 / y.hi, 1.0 / y.lo))
        },
    },
    &BinaryRow {
        name: "pow",
        formula: "x^y, x > 0",
        f: f64::powf,
        exact: None,
        domains: [Domain::Positive, Domain::All],
        derivative: BinaryDerivative::Partials(pow_d),
        rule: RuleKind::Exact,
        kink: None,
        lower: None,
        budget: RowBudget::Relative(1.0),
        fragment: Fragment::Outside,
        kernel: None,
        int: None,
        weight: 1,
        caps: [4.0, 2.0],
        range: |x, y| corners(x, y, f64::powf),
    },
    &BinaryRow {
        name: "maximum",
        formula: "max(x, y)",
        f: f64::max,
        exact: Some(|x, y| if x >= y { x.clone() } else { y.clone() }),
        domains: [Domain::All, Domain::All],
        derivative: BinaryDerivative::Partials(maximum_d),
        rule: TIES,
        kink: Some(|x, y| x == y),
        lower: None,
        budget: RowBudget::Exact,
        fragment: Fragment::Outside,
        kernel: None,
        int: Some(super::int::maximum),
        weight: 1,
        caps: [64.0, 64.0],
        range: |x, y| Interval::new(x.lo.max(y.lo), x.hi.max(y.hi)),
    },
    &BinaryRow {
        name: "minimum",
        formula: "min(x, y)",
        f: f64::min,
        exact: Some(|x, y| if x <= y { x.clone() } else { y.clone() }),
        domains: [Domain::All, Domain::All],
        derivative: BinaryDerivative::Partials(minimum_d),
        rule: TIES,
        kink: Some(|x, y| x == y),
        lower: None,
        budget: RowBudget::Exact,
        fragment: Fragment::Outside,
        kernel: None,
        int: Some(super::int::minimum),
        weight: 1,
        caps: [64.0, 64.0],
        range: |x, y| Interval::new(x.lo.min(y.lo), x.hi.min(y.hi)),
    },
];
