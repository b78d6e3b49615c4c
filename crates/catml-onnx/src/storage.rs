//! ONNX values of the storage dtypes (f16, bf16, the 8- and 4-bit floats, int8 ... uint64,
//! int4 ... uint2; `docs/dtypes.md`): a node
//! reads them widened to the dtype they compute in (f32, i64), and each output that shares an
//! input's element type (the operator schema's type constraint) is converted back to it. So an
//! f16 Add rounds to f16 after the f32 sum, and a uint8 Add wraps modulo 256, as ONNX says.

use std::collections::HashMap;
use std::sync::Arc;

use catml_core::ir::{Builder, Var};
use catml_core::prim::Ops;
use catml_core::tensor::{DType, Tensor};

use crate::ctx::Value;
use crate::konst::{code_of, dtype_of, Const};
use crate::ops::output_types::OUTPUT_TYPES;
use crate::proto::NodeProto;

/// The storage dtype of a value, if it has one.
pub fn storage_dtype(b: &Builder, v: &Value) -> Option<DType> {
    let d = match v {
        Value::Var(v) => b.ty(*v).dtype,
        Value::Const(c) => dtype_of(c.elem)?,
    };
    d.is_storage().then_some(d)
}

/// The value in the dtype it computes in: a program value converted once (`widened` remembers
/// it), a known value relabelled (its elements are already held as f64 or i64).
pub fn widen(
    b: &mut Builder,
    widened: &mut HashMap<Var, Var>,
    known: &mut HashMap<Var, Const>,
    v: Value,
) -> Result<Value, String> {
    let Some(d) = storage_dtype(b, &v) else {
        return Ok(v);
    };
    Ok(match v {
        Value::Var(x) => match widened.get(&x) {
            Some(&w) => Value::Var(w),
            None => {
                let w = b.convert(x, d.compute()).map_err(|e| e.to_string())?;
                widened.insert(x, w);
                if let Some(c) = known.get(&x).cloned() {
                    known.insert(w, relabel(c, d.compute()));
                }
                Value::Var(w)
            }
        },
        Value::Const(c) => Value::Const(Arc::new(relabel((*c).clone(), d.compute()))),
    })
}

/// A known value under another dtype of the same element data (f64 or i64).
fn relabel(c: Const, d: DType) -> Const {
    Const {
        elem: code_of(d),
        ..c
    }
}

/// The input whose element type output `k` of the node has, if the schema ties them.
fn typed_by(node: &NodeProto, k: usize) -> Option<usize> {
    OUTPUT_TYPES
        .iter()
        .find(|(name, _)| *name == node.op_type)
        .and_then(|(_, outs)| outs.get(k).copied().flatten())
}

/// Outputs converted back to the storage dtype of the input whose type they share, where the
/// mapping produced that dtype's compute dtype.
pub fn narrow(
    b: &mut Builder,
    node: &NodeProto,
    storage: &[Option<DType>],
    outs: Vec<Value>,
) -> Result<Vec<Value>, String> {
    outs.into_iter()
        .enumerate()
        .map(|(k, v)| {
            let Some(d) = typed_by(node, k).and_then(|j| storage.get(j).copied().flatten()) else {
                return Ok(v);
            };
            match v {
                Value::Var(x) if b.ty(x).dtype == d.compute() => {
                    Ok(Value::Var(b.convert(x, d).map_err(|e| e.to_string())?))
                }
                Value::Const(c) if dtype_of(c.elem) == Some(d.compute()) => {
                    Ok(Value::Const(Arc::new(narrow_const(&c, d)?)))
                }
                v => Ok(v),
            }
        })
        .collect()
}

/// A known value converted to a storage dtype by the tensor layer's `convert` rules.
fn narrow_const(c: &Const, d: DType) -> Result<Const, String> {
    if c.numel() == 0 {
        return Ok(relabel(c.clone(), d));
    }
    let t: Tensor = c.to_tensor()?.convert(d)?;
    Ok(Const::from_tensor(&t))
}
