//! Applying a scan: the node, and `unpack` nodes that read its results.

use std::sync::Arc;

use super::primitive::{Piece, Scan};
use super::unpack::Unpack;
use crate::ir::{Builder, TypeError, Var};
use crate::prim::Ops;

/// A scan's results as values.
#[derive(Debug, Clone)]
pub struct ScanResults {
    /// The node's packed value.
    pub value: Var,
    /// Each carry after the last step.
    pub final_carries: Vec<Var>,
    /// Each carry after every step, stacked (T, ...) in step order (`None` when the scan keeps
    /// only the final carries).
    pub carries: Option<Vec<Var>>,
    /// Each y, stacked (T, ...).
    pub ys: Vec<Var>,
}

/// Applies `s` to (init.., xs.., consts..) and reads every result out of its value.
///
/// ```
/// use catml_core::interp::eval;
/// use catml_core::ir::{Builder, InputKind};
/// use catml_core::prim::scan::{scan, Scan};
/// use catml_core::prim::Ops;
/// use catml_core::tensor::{DType, Tensor, TensorType};
///
/// // A running sum: c' = c + x_t, y_t = c'.
/// let f = TensorType::new(DType::F64, [2]);
/// let mut body = Builder::new();
/// let c = body.input("c", f.clone(), InputKind::Data).unwrap();
/// let x = body.input("x", f.clone(), InputKind::Data).unwrap();
/// let s = body.add(c, x).unwrap();
/// let body = body.finish(&[s]).unwrap();
///
/// let mut b = Builder::new();
/// let c0 = b.input("c0", f, InputKind::Data).unwrap();
/// let xs = b.input("xs", TensorType::new(DType::F64, [3, 2]), InputKind::Data).unwrap();
/// let r = scan(&mut b, Scan::new(body, 3, 1, 1, 0).unwrap(), &[c0], &[xs], &[]).unwrap();
/// let carries = r.carries.unwrap()[0];
/// let p = b.finish(&[r.final_carries[0], carries]).unwrap();
/// let out = eval(&p, &[
///     Tensor::f64([2], vec![0.0, 10.0]).unwrap(),
///     Tensor::f64([3, 2], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap(),
/// ]).unwrap();
/// assert_eq!(out[0].to_f64_vec(), vec![9.0, 22.0]);
/// assert_eq!(out[1].to_f64_vec(), vec![1.0, 12.0, 4.0, 16.0, 9.0, 22.0]);
/// ```
pub fn scan(
    b: &mut Builder,
    s: Scan,
    init: &[Var],
    xs: &[Var],
    consts: &[Var],
) -> Result<ScanResults, TypeError> {
    let operands: Vec<Var> = init.iter().chain(xs).chain(consts).copied().collect();
    let value = b.op(Arc::new(s.clone()), &operands)?;
    let mut results = ScanResults {
        value,
        final_carries: Vec::new(),
        carries: s.stack_carries.then(Vec::new),
        ys: Vec::new(),
    };
    for (piece, at, ty) in s.layout() {
        match piece {
            Piece::Carry(_) if s.stack_carries => {
                let all = b.op(Arc::new(Unpack::new(at, ty.shape.clone())), &[value])?;
                let row = ty.numel() / s.length;
                let last = if s.reverse { 0 } else { s.length - 1 };
                let fin = b.op(
                    Arc::new(Unpack::new(at + last * row, ty.dims()[1..].to_vec())),
                    &[value],
                )?;
                results.carries.as_mut().expect("kept").push(all);
                results.final_carries.push(fin);
            }
            Piece::Carry(_) => {
                let fin = b.op(Arc::new(Unpack::new(at, ty.shape.clone())), &[value])?;
                results.final_carries.push(fin);
            }
            Piece::Y(_) => {
                let y = b.op(Arc::new(Unpack::new(at, ty.shape.clone())), &[value])?;
                results.ys.push(y);
            }
        }
    }
    Ok(results)
}
