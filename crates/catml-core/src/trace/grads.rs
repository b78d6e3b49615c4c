//! Derivatives read back by input: data inputs by position, parameters by name and by tag.

use std::collections::BTreeMap;

use super::error::{CallSite, OperandTypes, TraceError};
use crate::ad::JvpLayout;
use crate::interp::ConventionHit;
use crate::ir::{InputKind, Program};
use crate::tensor::{Params, Tensor, TensorType};

/// One derivative per input of a traced program (gradients, or Hessian-vector products).
#[derive(Debug, Clone, PartialEq)]
pub struct Grads {
    /// One per data input, in order (`None` for integer inputs, which have no derivative).
    pub inputs: Vec<Option<Tensor>>,
    /// One per parameter, by name.
    pub params: Params,
    /// The parameters' entries grouped by the tag of the first node reading each parameter
    /// (`"untagged"` when that node has none), as `interp::params` counts them.
    pub by_tag: BTreeMap<String, Params>,
    /// Nodes where a labelled convention decided the derivative (ReLU at exactly 0), from the
    /// evaluation that produced these values.
    pub conventions: Vec<ConventionHit>,
}

impl Grads {
    /// Reads one derivative per input of `p`: `of_input(i)` for input `i` (`None`: none).
    pub(crate) fn collect(
        p: &Program,
        mut of_input: impl FnMut(usize) -> Option<Tensor>,
        conventions: Vec<ConventionHit>,
    ) -> Grads {
        let mut grads = Grads {
            inputs: Vec::new(),
            params: Params::new(),
            by_tag: BTreeMap::new(),
            conventions,
        };
        for (i, input) in p.inputs().iter().enumerate() {
            let g = of_input(i);
            match input.kind {
                InputKind::Data => grads.inputs.push(g),
                InputKind::Param => {
                    let Some(g) = g else { continue };
                    let tag = p.tag_of(p.input_var(i)).unwrap_or("untagged");
                    grads
                        .by_tag
                        .entry(tag.to_string())
                        .or_default()
                        .insert(input.name.clone(), g.clone());
                    grads.params.insert(input.name.clone(), g);
                }
            }
        }
        grads
    }

    /// The largest absolute entry over every input and parameter (a size for tolerances).
    pub fn max_abs(&self) -> f64 {
        let inputs = self.inputs.iter().flatten();
        let params = self.params.iter().map(|(_, t)| t);
        inputs
            .chain(params)
            .flat_map(|t| t.to_f64_vec())
            .fold(0.0, |m, v| m.max(v.abs()))
    }
}

/// `p` has one float output of one element (what `grad` and `hvp` differentiate).
pub(crate) fn check_scalar(
    location: CallSite,
    what: &'static str,
    p: &Program,
) -> Result<(), TraceError> {
    let outputs = p.output_types();
    match outputs.as_slice() {
        [t] if t.dtype.is_float() && t.numel() == 1 => Ok(()),
        _ => Err(TraceError::NotScalar {
            location,
            what,
            outputs: OperandTypes(outputs),
        }),
    }
}

/// Seeds (cotangents or tangents) match the expected types in number and type.
pub(crate) fn check_seeds(
    what: &'static str,
    expected: &[TensorType],
    found: &[Tensor],
) -> Result<(), TraceError> {
    if expected.len() != found.len() {
        return Err(TraceError::Count {
            what,
            expected: expected.len(),
            found: found.len(),
        });
    }
    for (index, (e, t)) in expected.iter().zip(found).enumerate() {
        if t.ty() != *e {
            return Err(TraceError::SeedType {
                what,
                index,
                expected: e.clone(),
                found: t.ty(),
            });
        }
    }
    Ok(())
}

/// Tangents for every input of `p` that `layout` gives a slot: data inputs from `tangents`
/// in order, parameters from `param_tangents` by name (missing: zero).
pub(crate) fn tangent_arguments(
    p: &Program,
    layout: &JvpLayout,
    tangents: &[Tensor],
    param_tangents: &Params,
) -> Result<Vec<Tensor>, TraceError> {
    let data: Vec<TensorType> = p
        .inputs()
        .iter()
        .filter(|i| i.kind == InputKind::Data)
        .map(|i| i.ty.clone())
        .collect();
    check_seeds("tangent", &data, tangents)?;
    let mut data = tangents.iter();
    let mut out = Vec::new();
    for (i, input) in p.inputs().iter().enumerate() {
        let given = match input.kind {
            InputKind::Data => data.next().cloned(),
            InputKind::Param => match param_tangents.get(&input.name) {
                Some(t) if t.ty() != input.ty => {
                    return Err(TraceError::ParamType {
                        name: format!("{} (tangent)", input.name),
                        expected: input.ty.clone(),
                        found: t.ty(),
                    })
                }
                other => other.cloned(),
            },
        };
        if layout.tangent_input(i).is_some() {
            out.push(given.unwrap_or_else(|| Tensor::zeros(&input.ty)));
        }
    }
    Ok(out)
}
