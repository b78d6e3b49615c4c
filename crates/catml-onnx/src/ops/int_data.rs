//! Integer data through float mappings, when every operand is known at import: the integer
//! data operands are read as f64 (exact below 2^53), the float mapping is evaluated, and each
//! output of the data's type is read back as integers (the storage narrowing then wraps it to
//! the model's width). Only operators whose mappings compute nothing f64 could round on such
//! values are listed, with the bound that makes every intermediate exact; data beyond the bound
//! is refused, never rounded. Semantics: `docs/onnx-import.md`.

use std::sync::Arc;

use crate::ctx::Value;
use crate::konst::{elem, Const, Data};
use crate::ops::output_types::OUTPUT_TYPES;
use crate::proto::NodeProto;
use crate::OnnxError;

/// The largest magnitude of integer data read as f64: differences and sums of two such values
/// (OneHot's `on - off`, TopK's exclusion key) stay below 2^53.
const LIMIT: f64 = (1u64 << 52) as f64;

/// What keeps a mapping's arithmetic exact on integer data.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Bound {
    /// Moves, selections, comparisons and one difference: every |x| ≤ 2^52.
    Each,
    /// Sums of any subset (CumSum as a matrix product): Σ|x| ≤ 2^52.
    Sum,
    /// Products of any prefix (CumProd, one factor at a time): Π max(1, |x|) ≤ 2^52.
    Product,
}

/// (op type, data operands read as f64, bound).
const EXACT: &[(&str, &[usize], Bound)] = &[
    ("Clip", &[0, 1, 2], Bound::Each),
    ("Pad", &[0, 2], Bound::Each),
    ("GatherND", &[0], Bound::Each),
    ("MaxPool", &[0], Bound::Each),
    ("TopK", &[0], Bound::Each),
    ("OneHot", &[2], Bound::Each),
    ("CumSum", &[0], Bound::Sum),
    ("CumProd", &[0], Bound::Product),
];

fn is_int(c: &Const) -> bool {
    !c.is_float() && c.elem != elem::BOOL
}

/// The node's operands with its integer data read as f64, or `None` when the node is not
/// listed or has no integer data. An error when data exceeds the bound.
pub fn as_floats(
    index: usize,
    node: &NodeProto,
    inputs: &[Option<Value>],
) -> Option<Result<Vec<Option<Value>>, OnnxError>> {
    let (_, data, bound) = EXACT
        .iter()
        .find(|(op, _, _)| *op == node.op_type && node.domain.is_empty())?;
    let konst = |i: usize| match inputs.get(i) {
        Some(Some(Value::Const(c))) if is_int(c) => Some(c.clone()),
        _ => None,
    };
    if !data.iter().any(|&i| konst(i).is_some()) {
        return None;
    }
    let refuse = |what: String| OnnxError::Unsupported {
        index,
        name: node.name.clone(),
        op: node.op_type.clone(),
        what,
    };
    let mut out = inputs.to_vec();
    for &i in data.iter() {
        let Some(c) = konst(i) else { continue };
        let v = c.as_i64s();
        let size = match bound {
            Bound::Each => v
                .iter()
                .map(|x| x.unsigned_abs() as f64)
                .fold(0.0, f64::max),
            Bound::Sum => v.iter().map(|x| x.unsigned_abs() as f64).sum(),
            Bound::Product => v
                .iter()
                .map(|x| (x.unsigned_abs() as f64).max(1.0))
                .product(),
        };
        if size > LIMIT {
            return Some(Err(refuse(format!(
                "input {i}: integer data whose {} is {size:e}, beyond 2^52, which the f64 \
                 evaluation of this mapping would not hold exactly",
                match bound {
                    Bound::Each => "largest magnitude",
                    Bound::Sum => "sum of magnitudes",
                    Bound::Product => "product of magnitudes",
                }
            ))));
        }
        let f = Const::floats(
            elem::DOUBLE,
            c.dims.clone(),
            v.iter().map(|&x| x as f64).collect(),
        );
        out[i] = Some(Value::Const(Arc::new(f)));
    }
    Some(Ok(out))
}

/// The outputs that share a relabelled operand's type, read back as i64: each must be an
/// integer within 2^53 (anything else is an error naming the output).
pub fn back(
    index: usize,
    node: &NodeProto,
    relabelled: &[Option<Value>],
    original: &[Option<Value>],
    outs: Vec<Value>,
) -> Result<Vec<Value>, OnnxError> {
    let types = OUTPUT_TYPES
        .iter()
        .find(|(op, _)| *op == node.op_type)
        .map_or(&[][..], |(_, t)| *t);
    let was_int = |j: usize| {
        matches!(
            (original.get(j), relabelled.get(j)),
            (Some(Some(Value::Const(a))), Some(Some(Value::Const(b)))) if is_int(a) && b.is_float()
        )
    };
    outs.into_iter()
        .enumerate()
        .map(|(k, v)| {
            let Some(j) = types.get(k).copied().flatten().filter(|&j| was_int(j)) else {
                return Ok(v);
            };
            let Value::Const(c) = &v else { return Ok(v) };
            let Data::F(xs) = &c.data else {
                return Ok(v);
            };
            let mut ints = Vec::with_capacity(xs.len());
            for (p, &x) in xs.iter().enumerate() {
                if x.fract() != 0.0 || x.abs() > 2.0 * LIMIT {
                    return Err(OnnxError::Node {
                        index,
                        name: node.name.clone(),
                        op: node.op_type.clone(),
                        message: format!(
                            "output {k} element {p} is {x}, not an exact integer of input {j}'s type"
                        ),
                    });
                }
                ints.push(x as i64);
            }
            Ok(Value::Const(Arc::new(Const::ints(
                elem::INT64,
                c.dims.clone(),
                ints,
            ))))
        })
        .collect()
}
