//! Drawing applications of elementwise rows from the rows themselves: each operand is moderated
//! to the row's cap and moved into the row's domain, attributes are drawn by the row, and the
//! result's interval is the row's range of the operand intervals. A new row needs nothing here.

use std::sync::Arc;

use rand::RngExt;

use super::{Choice, Gen, GenError, Interval, Val};
use crate::prim::elementwise::{Binary, BinaryRow, Domain, Unary, UnaryRow};
use crate::prim::{BINARY_ROWS, UNARY_ROWS};

/// The names of every elementwise row.
pub(super) fn names() -> impl Iterator<Item = &'static str> {
    UNARY_ROWS
        .iter()
        .map(|r| r.name)
        .chain(BINARY_ROWS.iter().map(|r| r.name))
}

/// The generator choice for the row `name`, if it is one.
pub(super) fn choice(name: &str) -> Option<Choice<'static>> {
    UNARY_ROWS
        .iter()
        .find(|r| r.name == name)
        .map(Choice::Unary)
        .or_else(|| {
            BINARY_ROWS
                .iter()
                .find(|r| r.name == name)
                .map(Choice::Binary)
        })
}

/// `x` moderated to `cap` and moved inside `domain` (away from 0 by at least 0.1 where the
/// domain excludes 0 or negative values).
fn fit(g: &mut Gen, x: Val, cap: f64, domain: Domain) -> Result<Val, GenError> {
    let x = g.moderate(x, cap)?;
    match domain {
        Domain::All => Ok(x),
        Domain::Above(a) if x.range.lo > a => Ok(x),
        Domain::Positive | Domain::NonNegative | Domain::Above(_) => g.positive(x),
        Domain::NonZero => {
            let p = g.positive(x)?;
            if !g.chance(0.3) {
                return Ok(p);
            }
            let var = g.op(|b| crate::prim::Ops::neg(b, p.var))?;
            Ok(Val {
                var,
                range: p.range.negated(),
            })
        }
    }
}

pub(super) fn gen_unary(g: &mut Gen, row: &'static UnaryRow) -> Result<Val, GenError> {
    let attrs = {
        let mut u = || g.rng.random::<f64>();
        (row.sample_attrs)(&mut u)
    };
    let prim = Unary::new(row, attrs.clone()).map_err(g.err())?;
    let x = g.pick();
    let x = fit(g, x, row.cap, (row.domain)(&attrs))?;
    let var = g.apply(Arc::new(prim), &[x.var])?;
    let range: Interval = (row.range)(x.range, &attrs);
    Ok(Val { var, range })
}

pub(super) fn gen_binary(g: &mut Gen, row: &'static BinaryRow) -> Result<Val, GenError> {
    let x = g.pick();
    let x = fit(g, x, row.caps[0], row.domains[0])?;
    let y = g.partner(x)?;
    let y = fit(g, y, row.caps[1], row.domains[1])?;
    let var = g.apply(Arc::new(Binary::new(row)), &[x.var, y.var])?;
    Ok(Val {
        var,
        range: (row.range)(x.range, y.range),
    })
}
