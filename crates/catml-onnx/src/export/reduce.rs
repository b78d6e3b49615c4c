//! The reduction family: sum and reduce_max over axes (all when absent), and the tie-sharing
//! weights of reduce_max's derivative.

use super::families::MapFn;
use super::graph::{Mapped, Site};
use super::proto_build::{attribute, Attr};
use super::ExportError;
use catml_core::prim::names;

type R = Result<Mapped, ExportError>;

pub(crate) const OPS: &[(&str, MapFn)] = &[
    (names::SUM, sum),
    (names::ARGMAX, argmax),
    (names::REDUCE_MAX, reduce_max),
    (names::MAX_WEIGHTS, max_weights),
];

/// The reduced axes as an i64 list (every axis when the attribute is absent).
fn axes(s: &Site) -> Vec<i64> {
    match s.attr_usizes("axes") {
        Some(a) => a.iter().map(|&v| v as i64).collect(),
        None => (0..s.xt[0].rank() as i64).collect(),
    }
}

/// `op` over the axes, keeping them when `keep`; written as the output unless `keep`.
fn reduce(s: &mut Site, op: &str, x: &str, keep: bool) -> Result<String, ExportError> {
    let a = axes(s);
    let attrs = vec![attribute("keepdims", Attr::Int(keep as i64))];
    if a.is_empty() {
        // Nothing reduced: a copy.
        return Ok(if keep {
            s.tmp("Identity", &[x], vec![])
        } else {
            s.emit("Identity", &[x], vec![]);
            s.out.clone()
        });
    }
    let ax = s.const_i64(&a);
    Ok(if keep {
        s.tmp(op, &[x, &ax], attrs)
    } else {
        s.emit(op, &[x, &ax], attrs);
        s.out.clone()
    })
}

/// ArgMax without the axis; ties go to the first index, as in the primitive.
fn argmax(s: &mut Site) -> R {
    let Some(axis) = s.attr_usize("axis") else {
        return Ok(Mapped::Lower);
    };
    let x = s.x[0].clone();
    let attrs = vec![
        attribute("axis", Attr::Int(axis as i64)),
        attribute("keepdims", Attr::Int(0)),
        attribute("select_last_index", Attr::Int(0)),
    ];
    Ok(s.emit("ArgMax", &[&x], attrs))
}

fn sum(s: &mut Site) -> R {
    let x = s.x[0].clone();
    reduce(s, "ReduceSum", &x, false)?;
    Ok(Mapped::Done)
}

fn reduce_max(s: &mut Site) -> R {
    let x = s.x[0].clone();
    reduce(s, "ReduceMax", &x, false)?;
    Ok(Mapped::Done)
}

/// w = [x = max] / #{maximal entries}, slice by slice; [x = m] = 1 - sign(m - x) as m >= x.
fn max_weights(s: &mut Site) -> R {
    let x = s.x[0].clone();
    let m = reduce(s, "ReduceMax", &x, true)?;
    let d = s.tmp("Sub", &[&m, &x], vec![]);
    let sg = s.tmp("Sign", &[&d], vec![]);
    let one = s.const_scalar(1.0, s.dtype());
    let ind = s.tmp("Sub", &[&one, &sg], vec![]);
    let k = reduce(s, "ReduceSum", &ind, true)?;
    Ok(s.emit("Div", &[&ind, &k], vec![]))
}
