//! `jvp` of a model function: outputs and their tangents along given input tangents.

use super::error::{CallSite, TraceError};
use super::grads::tangent_arguments;
use super::outputs::Outputs;
use super::staged::{staged_methods, Options, Staged};
use super::tracing::{arguments, Traced};
use super::value::Value;
use crate::ad::{self, Jvp};
use crate::ir::Program;
use crate::tensor::{Params, Tensor, TensorType};

/// A function's outputs and their tangents.
#[derive(Debug, Clone, PartialEq)]
pub struct JvpOutput {
    /// The function's outputs, in order.
    pub outputs: Vec<Tensor>,
    /// One per output occurrence.
    pub tangents: Vec<Tensor>,
    /// Nodes where a labelled convention decided the derivative.
    pub conventions: Vec<crate::interp::ConventionHit>,
}

fn compile(_: CallSite, traced: &Traced, _: &Options) -> Result<Jvp, TraceError> {
    Ok(ad::jvp(&traced.program)?)
}

fn jvp_program(j: &Jvp) -> &Program {
    &j.program
}

/// `f` with [`JvpFn::call`] pushing tangents forward. See [`jvp`].
pub struct JvpFn<F> {
    staged: Staged<F, Jvp>,
}

/// Forward mode over a model function: given a tangent per data input (and optionally per
/// parameter), the tangent of every output (traced and transformed once per input types).
pub fn jvp<F, O>(f: F) -> JvpFn<F>
where
    F: FnMut(&[Value]) -> O,
    O: Outputs,
{
    JvpFn {
        staged: Staged::new(f),
    }
}

impl<F, O> JvpFn<F>
where
    F: FnMut(&[Value]) -> O,
    O: Outputs,
{
    staged_methods!(compile, jvp_program);

    /// The outputs and their tangents. `tangents` has one entry per data input (integer
    /// inputs' entries are ignored); parameters missing from `param_tangents` have tangent 0.
    #[track_caller]
    pub fn call(
        &mut self,
        params: &Params,
        inputs: &[Tensor],
        tangents: &[Tensor],
        param_tangents: &Params,
    ) -> Result<JvpOutput, TraceError> {
        let types = super::staged::types_of(inputs);
        let stage = self
            .staged
            .stage(std::panic::Location::caller(), &types, compile)?;
        let (j, p) = (&stage.compiled, &stage.traced.program);
        let mut args = arguments(p, params, inputs)?;
        args.extend(tangent_arguments(p, &j.layout, tangents, param_tangents)?);
        let (values, report) = stage.eval(&j.program, &args)?;
        Ok(JvpOutput {
            outputs: j.layout.primal_outputs(&values).to_vec(),
            tangents: j.layout.tangents(&values).to_vec(),
            conventions: report.conventions,
        })
    }
}
