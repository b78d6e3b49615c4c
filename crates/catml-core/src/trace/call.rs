//! [`Value::call`]: a program used as a function of values, so a model written on a `Builder`
//! (the attention and recurrence builders of `prim`) runs eagerly and records inside a trace
//! like any operation.

use std::panic::Location;

use super::context::tag_scope;
use super::error::TraceError;
use super::value::{apply_at, Value};
use crate::ir::{BuildError, Program};

impl Value {
    /// Applies `p` to `args`, one value per input of `p` in order, node by node: outside a
    /// trace each node is evaluated with the eager checks, inside one each node is recorded
    /// (keeping its tag; untagged nodes take the current tag). The results are `p`'s outputs.
    ///
    /// Arguments must have exactly the types of `p`'s inputs; otherwise every result is a
    /// failed value naming the first argument that does not fit.
    ///
    /// ```
    /// use catml_core::ir::{Builder, InputKind};
    /// use catml_core::prim::Ops;
    /// use catml_core::tensor::{DType, Tensor, TensorType};
    /// use catml_core::trace::Value;
    ///
    /// let mut b = Builder::new();
    /// let x = b.input("x", TensorType::new(DType::F64, [2]), InputKind::Data).unwrap();
    /// let y = b.tanh(x).unwrap();
    /// let p = b.finish(&[y]).unwrap();
    ///
    /// let x = Value::from(Tensor::f64([2], vec![0.0, 1.0]).unwrap());
    /// let y = Value::call(&p, &[&x]).remove(0).into_tensor().unwrap();
    /// assert_eq!(y.to_f64_vec()[1], 1f64.tanh());
    /// ```
    #[track_caller]
    pub fn call(p: &Program, args: &[&Value]) -> Vec<Value> {
        let location = Location::caller();
        if let Err(source) = check_arguments(p, args) {
            let e = TraceError::Build { location, source };
            return vec![Value::failed(e); p.outputs().len()];
        }
        let mut vals: Vec<Value> = args.iter().map(|&v| v.clone()).collect();
        vals.reserve(p.n_nodes());
        for n in p.nodes() {
            let operands: Vec<&Value> = n.operands.iter().map(|o| &vals[o.index()]).collect();
            let _tag = n.tag.as_deref().map(tag_scope);
            let v = apply_at(location, n.prim.clone(), &operands);
            vals.push(v);
        }
        p.outputs()
            .iter()
            .map(|o| vals[o.index()].clone())
            .collect()
    }
}

/// One argument per input, each of the input's type (a failed argument passes its error on
/// through the nodes, so only types that are known are compared).
fn check_arguments(p: &Program, args: &[&Value]) -> Result<(), BuildError> {
    if args.len() != p.n_inputs() {
        return Err(BuildError::InlineArity {
            expected: p.n_inputs(),
            found: args.len(),
        });
    }
    for (index, (input, v)) in p.inputs().iter().zip(args).enumerate() {
        match v.ty() {
            Ok(found) if found != input.ty => {
                return Err(BuildError::InlineType {
                    index,
                    name: input.name.clone(),
                    expected: input.ty.clone(),
                    found,
                })
            }
            _ => {}
        }
    }
    Ok(())
}
