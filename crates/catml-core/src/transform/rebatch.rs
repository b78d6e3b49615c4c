//! Rebatching: the same program at another batch size. Every data input whose leading
//! dimension is the batch gets the new size; each node that reads them is rebuilt through the
//! builder, so its type rule runs again. An attribute that spells out a node's own output shape
//! (a reshape's `shape`) has its leading dimension replaced too. The result is checked: every
//! value derived from the batch keeps its type with the new leading dimension, every other value
//! keeps its type exactly, and the outputs carry the batch. Anything else is an error naming the
//! node, never a program with a different meaning.
//!
//! A node with a body (a scan) that reads the batch is refused: its body is typed at the old
//! batch and its packed value does not lead with the batch. A node with a body that does not
//! read the batch is kept whole, body and all.
//!
//! Only programs whose rows are independent (each output row reads only its own input row) mean
//! the same thing at every batch size; the checks above cannot see a sum over the batch axis
//! that keeps the batch dimension, so callers rebatch row-wise models.

use serde_json::Value;

use crate::ir::{Builder, InputKind, Program, Registry, TypeError};
use crate::tensor::TensorType;

/// Why a program cannot be run at another batch size.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum RebatchError {
    #[error("no data input has the leading dimension {batch}")]
    NoBatchInput { batch: usize },
    #[error("node `{node}` ({op}): {reason}")]
    Node {
        node: String,
        op: String,
        reason: String,
    },
    #[error("output {index} does not carry the batch dimension")]
    Output { index: usize },
}

/// `ty` with its leading dimension `to`.
fn with_batch(ty: &TensorType, to: usize) -> TensorType {
    let mut dims = ty.dims().to_vec();
    dims[0] = to;
    TensorType::new(ty.dtype, dims)
}

/// The attributes with every integer list equal to `old_dims` given leading dimension `to`;
/// `None` if nothing changed.
fn substitute(attrs: &crate::ir::Attrs, old_dims: &[usize], to: usize) -> Option<crate::ir::Attrs> {
    let spells_shape = |v: &Value| {
        v.as_array().is_some_and(|xs| {
            xs.len() == old_dims.len()
                && xs
                    .iter()
                    .zip(old_dims)
                    .all(|(x, d)| x.as_u64() == Some(*d as u64))
        })
    };
    if old_dims.is_empty() || !attrs.values().any(spells_shape) {
        return None;
    }
    let mut out = attrs.clone();
    for v in out.values_mut() {
        if spells_shape(v) {
            if let Some(first) = v.as_array_mut().and_then(|xs| xs.first_mut()) {
                *first = Value::from(to as u64);
            }
        }
    }
    Some(out)
}

/// `p` at batch size `to` instead of `from` (see the module docs for what is checked).
/// Primitives whose attributes change are rebuilt from `registry`.
pub fn rebatch(
    p: &Program,
    from: usize,
    to: usize,
    registry: &Registry,
) -> Result<Program, RebatchError> {
    let mut b = Builder::new();
    let mut batched = Vec::with_capacity(p.n_vars());
    let mut vars = Vec::with_capacity(p.n_vars());
    let mut any_batched_input = false;
    for input in p.inputs() {
        let carries = input.kind == InputKind::Data && input.ty.dims().first() == Some(&from);
        any_batched_input |= carries;
        let ty = if carries {
            with_batch(&input.ty, to)
        } else {
            input.ty.clone()
        };
        let v = b
            .input(&input.name, ty, input.kind)
            .map_err(|e| RebatchError::Node {
                node: input.name.clone(),
                op: "input".to_string(),
                reason: e.to_string(),
            })?;
        vars.push(v);
        batched.push(carries);
    }
    if !any_batched_input {
        return Err(RebatchError::NoBatchInput { batch: from });
    }
    for node in p.nodes() {
        let fail = |reason: String| RebatchError::Node {
            node: node.name.clone(),
            op: node.prim.name().to_string(),
            reason,
        };
        let carries = node.operands.iter().any(|v| batched[v.index()]);
        if carries && node.prim.body().is_some() {
            // The body is typed at the old batch, and the node's value need not lead with the
            // batch (a scan packs its results), so no attribute says where the batch sits.
            return Err(fail(format!(
                "it reads the batch and runs a body typed at batch {from}; a node with a body is not rebatched"
            )));
        }
        let operands: Vec<_> = node.operands.iter().map(|v| vars[v.index()]).collect();
        let prim = match substitute(&node.prim.attrs(), node.ty.dims(), to).filter(|_| carries) {
            None => node.prim.clone(),
            Some(attrs) => registry
                .construct(node.prim.name(), &attrs)
                .ok_or_else(|| fail("its attributes name the batch and it is not built in".into()))?
                .map_err(|e: TypeError| fail(e.to_string()))?,
        };
        b.set_tag(node.tag.clone());
        let v = b
            .apply_named(&node.name, prim, &operands)
            .map_err(|e| fail(e.to_string()))?;
        let expected = if carries {
            if node.ty.dims().first() != Some(&from) {
                return Err(fail(format!(
                    "its type {} does not lead with the batch dimension {from}",
                    node.ty
                )));
            }
            with_batch(&node.ty, to)
        } else {
            node.ty.clone()
        };
        if b.ty(v) != &expected {
            return Err(fail(format!(
                "at batch {to} its type is {}, expected {expected}",
                b.ty(v)
            )));
        }
        vars.push(v);
        batched.push(carries);
    }
    if let Some(index) = p.outputs().iter().position(|v| !batched[v.index()]) {
        return Err(RebatchError::Output { index });
    }
    let outputs: Vec<_> = p.outputs().iter().map(|v| vars[v.index()]).collect();
    b.finish(&outputs).map_err(|e| RebatchError::Node {
        node: "outputs".to_string(),
        op: "finish".to_string(),
        reason: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interp;
    use crate::ir::json;
    use crate::tensor::Tensor;

    const MLP: &str = r#"{
      "format": "lensir-module/1",
      "inputs": [
        {"name":"x","shape":[4,2,3],"dtype":"f64"},
        {"name":"W","shape":[5,6],"dtype":"f64"},
        {"name":"b","shape":[5],"dtype":"f64"}
      ],
      "parameters": ["W", "b"],
      "nodes": [
        {"name":"flat","op":"reshape","operands":["x"],"attrs":{"shape":[4,6]}},
        {"name":"h","op":"linear","operands":["flat","W","b"]},
        {"name":"y","op":"tanh","operands":["h"]}
      ],
      "outputs": ["y"]
    }"#;

    fn ramp(n: usize, scale: f64) -> Vec<f64> {
        (0..n)
            .map(|i| ((i * 7 % 11) as f64 - 5.0) * scale)
            .collect()
    }

    #[test]
    fn rows_of_the_rebatched_program_are_rows_of_the_original() {
        let registry = crate::prim::builtins();
        let p = json::from_str(MLP, registry).unwrap();
        let q = rebatch(&p, 4, 3, registry).unwrap();
        assert_eq!(q.inputs()[0].ty.dims(), [3, 2, 3]);
        assert_eq!(q.output_types()[0].dims(), [3, 5]);
        let x = ramp(24, 0.1);
        let w = Tensor::f64([5, 6], ramp(30, 0.05)).unwrap();
        let bias = Tensor::f64([5], ramp(5, 0.01)).unwrap();
        let full = interp::eval(
            &p,
            &[
                Tensor::f64([4, 2, 3], x.clone()).unwrap(),
                w.clone(),
                bias.clone(),
            ],
        )
        .unwrap();
        let part = interp::eval(
            &q,
            &[Tensor::f64([3, 2, 3], x[6..].to_vec()).unwrap(), w, bias],
        )
        .unwrap();
        let (full, part) = (full[0].to_f64_vec(), part[0].to_f64_vec());
        for (a, b) in full[5..].iter().zip(&part) {
            assert!((a - b).abs() < 1e-12, "{a} vs {b}");
        }
    }

    #[test]
    fn a_batch_mixing_node_is_refused_with_its_name() {
        let registry = crate::prim::builtins();
        let text = MLP.replace(
            r#"{"name":"flat","op":"reshape","operands":["x"],"attrs":{"shape":[4,6]}},"#,
            r#"{"name":"pairs","op":"reshape","operands":["x"],"attrs":{"shape":[2,12]}},
               {"name":"flat","op":"reshape","operands":["pairs"],"attrs":{"shape":[4,6]}},"#,
        );
        let p = json::from_str(&text, registry).unwrap();
        let e = rebatch(&p, 4, 3, registry).unwrap_err();
        assert!(e.to_string().starts_with("node `pairs` (reshape)"), "{e}");
    }

    /// A running sum over 3 steps of a carry of `rows` rows, from the data input `c0`
    /// (rows, 2), over the data input `xs` (3, rows, 2).
    fn running_sum(rows: usize) -> Program {
        use crate::prim::scan::{scan, Scan};
        use crate::prim::Ops;
        let ty = TensorType::new(crate::tensor::DType::F64, [rows, 2]);
        let mut body = Builder::new();
        let c = body.input("c", ty.clone(), InputKind::Data).unwrap();
        let x = body.input("x", ty.clone(), InputKind::Data).unwrap();
        let s = body.add(c, x).unwrap();
        let body = body.finish(&[s]).unwrap();
        let mut b = Builder::new();
        let c0 = b.input("c0", ty.clone(), InputKind::Data).unwrap();
        let xs = b
            .input(
                "xs",
                TensorType::new(ty.dtype, [3, rows, 2]),
                InputKind::Data,
            )
            .unwrap();
        let s = Scan::new(body, 3, 1, 1, 0).unwrap();
        let r = scan(&mut b, s, &[c0], &[xs], &[]).unwrap();
        let y = b.tanh(c0).unwrap();
        let out = b.add(r.final_carries[0], y).unwrap();
        b.finish(&[out]).unwrap()
    }

    #[test]
    fn a_scan_that_reads_the_batch_is_refused_with_its_name() {
        let registry = crate::prim::builtins();
        let p = running_sum(4);
        let e = rebatch(&p, 4, 2, registry).unwrap_err();
        let scan_name = &p.nodes()[0].name;
        assert!(
            e.to_string().starts_with(&format!(
                "node `{scan_name}` (scan): it reads the batch and runs a body typed at batch 4"
            )),
            "{e}"
        );
    }

    #[test]
    fn a_program_without_the_batch_is_refused() {
        let registry = crate::prim::builtins();
        let p = json::from_str(MLP, registry).unwrap();
        assert_eq!(
            rebatch(&p, 8, 3, registry).unwrap_err(),
            RebatchError::NoBatchInput { batch: 8 }
        );
    }
}
