//! Drawing applications of elementwise rows from the rows themselves: each operand is moderated
//! to the row's cap and moved into the row's domain, attributes are drawn by the row, and the
//! result's interval is the row's range of the operand intervals. A new row needs nothing here.

use std::sync::Arc;

use super::row::{Binary, BinaryRow, Domain, Unary, UnaryRow};
use crate::ir::{Draw, DrawError, Drawn};
use crate::prim::Ops;

/// `x` moderated to `cap` and moved inside `domain` (away from 0 by at least 0.1 where the
/// domain excludes 0 or negative values).
fn fit(d: &mut dyn Draw, x: Drawn, cap: f64, domain: Domain) -> Result<Drawn, DrawError> {
    let x = d.moderate(x, cap)?;
    match domain {
        Domain::All => Ok(x),
        Domain::Above(a) if x.range.lo > a => Ok(x),
        Domain::Positive | Domain::NonNegative | Domain::Above(_) => d.positive(x),
        Domain::NonZero => {
            let p = d.positive(x)?;
            if !d.chance(0.3) {
                return Ok(p);
            }
            d.same(p.range.negated(), |b| b.neg(p.var))
        }
    }
}

pub(super) fn draw_unary(d: &mut dyn Draw, row: &'static UnaryRow) -> Result<Drawn, DrawError> {
    let attrs = {
        let mut u = || d.unit();
        (row.sample_attrs)(&mut u)
    };
    let prim = Unary::new(row, attrs.clone())?;
    let x = d.pick();
    let x = fit(d, x, row.cap, (row.domain)(&attrs))?;
    let var = d.apply(Arc::new(prim), &[x.var])?;
    Ok(Drawn {
        var,
        range: (row.range)(x.range, &attrs),
    })
}

pub(super) fn draw_binary(d: &mut dyn Draw, row: &'static BinaryRow) -> Result<Drawn, DrawError> {
    let x = d.pick();
    let x = fit(d, x, row.caps[0], row.domains[0])?;
    let y = d.partner(x)?;
    let y = fit(d, y, row.caps[1], row.domains[1])?;
    let var = d.apply(Arc::new(Binary::new(row)), &[x.var, y.var])?;
    Ok(Drawn {
        var,
        range: (row.range)(x.range, y.range),
    })
}
