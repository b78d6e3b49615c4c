//! `vjp` of a model function: outputs and the pullback of given output cotangents.

use super::error::{CallSite, TraceError};
use super::grads::{check_seeds, Grads};
use super::outputs::Outputs;
use super::staged::{staged_methods, Options, Staged};
use super::tracing::{arguments, Traced};
use super::value::Value;
use crate::ad::{self, CheckpointPolicy, Vjp};
use crate::ir::Program;
use crate::tensor::{Params, Tensor, TensorType};

/// A function's outputs and the cotangents of its inputs and parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct VjpOutput {
    /// The function's outputs, in order.
    pub outputs: Vec<Tensor>,
    /// The cotangent of every input and parameter, by input, name and tag.
    pub cotangents: Grads,
}

fn compile(_: CallSite, traced: &Traced, options: &Options) -> Result<Vjp, TraceError> {
    Ok(match &options.checkpoint {
        None => ad::vjp(&traced.program)?,
        Some(policy) => ad::vjp_with(&traced.program, policy)?,
    })
}

fn vjp_program(v: &Vjp) -> &Program {
    &v.program
}

/// `f` with [`VjpFn::call`] pulling cotangents back. See [`vjp`].
pub struct VjpFn<F> {
    staged: Staged<F, Vjp>,
}

/// Reverse mode over a model function with any outputs: given one cotangent per output
/// occurrence, the cotangent of every input and parameter (traced and transformed once per
/// input types, as [`value_and_grad`](super::value_and_grad)).
pub fn vjp<F, O>(f: F) -> VjpFn<F>
where
    F: FnMut(&[Value]) -> O,
    O: Outputs,
{
    VjpFn {
        staged: Staged::new(f),
    }
}

impl<F, O> VjpFn<F>
where
    F: FnMut(&[Value]) -> O,
    O: Outputs,
{
    staged_methods!(compile, vjp_program);

    /// Recomputes in the reverse pass what `policy` does not keep ([`ad::vjp_with`]): less
    /// memory, the same cotangents bit for bit.
    pub fn checkpoint(mut self, policy: CheckpointPolicy) -> Self {
        self.staged.set_options(|o| o.checkpoint = Some(policy));
        self
    }

    /// The outputs at these parameters and inputs, and the pullback of `cotangents`.
    #[track_caller]
    pub fn call(
        &mut self,
        params: &Params,
        inputs: &[Tensor],
        cotangents: &[Tensor],
    ) -> Result<VjpOutput, TraceError> {
        let types = super::staged::types_of(inputs);
        let stage = self
            .staged
            .stage(std::panic::Location::caller(), &types, compile)?;
        let (v, p) = (&stage.compiled, &stage.traced.program);
        let mut args = arguments(p, params, inputs)?;
        check_seeds("cotangent", &p.output_types(), cotangents)?;
        args.extend(cotangents.iter().cloned());
        let (values, report) = stage.eval(&v.program, &args)?;
        let cotangents = Grads::collect(
            p,
            |i| v.layout.gradient(&values, i).cloned(),
            report.conventions,
        );
        Ok(VjpOutput {
            outputs: v.layout.primal_outputs(&values).to_vec(),
            cotangents,
        })
    }
}
