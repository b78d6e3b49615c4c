//! The linear-algebra family: matmul and linear as Gemm, batch_matmul as MatMul.

use super::families::MapFn;
use super::graph::{Mapped, Site};
use super::proto_build::{attribute, Attr};
use super::ExportError;
use catml_core::prim::names;

type R = Result<Mapped, ExportError>;

pub(crate) const OPS: &[(&str, MapFn)] = &[
    (names::MATMUL, matmul),
    (names::BATCH_MATMUL, batch_matmul),
    (names::LINEAR, linear),
];

fn flags(s: &Site) -> (i64, i64) {
    (
        s.attr_bool("transpose_a") as i64,
        s.attr_bool("transpose_b") as i64,
    )
}

/// op(A) op(B) with Gemm's transA / transB.
fn matmul(s: &mut Site) -> R {
    let (a, b) = (s.x[0].clone(), s.x[1].clone());
    let (ta, tb) = flags(s);
    Ok(s.emit(
        "Gemm",
        &[&a, &b],
        vec![
            attribute("transA", Attr::Int(ta)),
            attribute("transB", Attr::Int(tb)),
        ],
    ))
}

/// The last two axes swapped.
fn swap_last(s: &mut Site, x: &str, rank: usize) -> String {
    let mut perm: Vec<i64> = (0..rank as i64).collect();
    perm.swap(rank - 2, rank - 1);
    s.tmp("Transpose", &[x], vec![attribute("perm", Attr::Ints(perm))])
}

fn batch_matmul(s: &mut Site) -> R {
    let (mut a, mut b) = (s.x[0].clone(), s.x[1].clone());
    let r = s.xt[0].rank();
    let (ta, tb) = flags(s);
    if ta != 0 {
        a = swap_last(s, &a, r);
    }
    if tb != 0 {
        b = swap_last(s, &b, r);
    }
    Ok(s.emit("MatMul", &[&a, &b], vec![]))
}

/// x W^T + b for a batch of rows as one Gemm; a single row through the lowering.
fn linear(s: &mut Site) -> R {
    if s.xt[0].rank() != 2 {
        return Ok(Mapped::Lower);
    }
    let (x, w, b) = (s.x[0].clone(), s.x[1].clone(), s.x[2].clone());
    Ok(s.emit(
        "Gemm",
        &[&x, &w, &b],
        vec![attribute("transB", Attr::Int(1))],
    ))
}
