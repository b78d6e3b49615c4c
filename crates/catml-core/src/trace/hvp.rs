//! `hvp` of a scalar model function: Hessian-vector products, forward over reverse.
//!
//! With g(x) = ∇f(x) ([`ad::grad`]: the VJP program with its seed fixed to 1), H v = J_g(x) v: the JVP of
//! the gradient program. Both are program transforms, so this is one program, built once.

use super::error::{CallSite, TraceError};
use super::grads::{check_scalar, tangent_arguments, Grads};
use super::outputs::Outputs;
use super::staged::{staged_methods, Options, Staged};
use super::tracing::{arguments, Traced};
use super::value::Value;
use crate::ad::{self, Jvp, VjpLayout};
use crate::ir::Program;
use crate::tensor::{Params, Tensor, TensorType};

/// The value, the gradient, and the Hessian applied to a direction.
#[derive(Debug, Clone, PartialEq)]
pub struct HvpOutput {
    /// f at the given parameters and inputs.
    pub value: Tensor,
    /// ∇f, by input.
    pub grads: Grads,
    /// The directional derivative ⟨∇f, v⟩.
    pub directional: Tensor,
    /// H v, by input.
    pub hvp: Grads,
}

/// The forward-over-reverse program: the JVP of the gradient program, whose outputs are the
/// value then each float input's gradient ([`ad::grad`]).
#[derive(Debug)]
pub(crate) struct HvpProgram {
    jvp: Jvp,
    grad: VjpLayout,
}

fn compile(location: CallSite, traced: &Traced, _: &Options) -> Result<HvpProgram, TraceError> {
    check_scalar(location, "hvp", &traced.program)?;
    let g = ad::grad(&traced.program)?;
    Ok(HvpProgram {
        jvp: ad::jvp(&g.program)?,
        grad: g.layout,
    })
}

fn hvp_program(h: &HvpProgram) -> &Program {
    &h.jvp.program
}

/// `f` with [`HvpFn::call`] applying its Hessian. See [`hvp`].
pub struct HvpFn<F> {
    staged: Staged<F, HvpProgram>,
}

/// Hessian-vector products of a model function whose one output has one element.
///
/// ```
/// use catml_core::trace::{hvp, Value};
/// use catml_core::tensor::{Params, Tensor};
///
/// // f(x) = Σ x³ / 3: H = diag(2x), so H v = 2 x ⊙ v.
/// let mut f = hvp(|x: &[Value]| (&x[0] * &x[0] * &x[0]).sum_all() * (1.0 / 3.0));
/// let x = Tensor::f64([2], vec![1.0, -3.0]).unwrap();
/// let v = Tensor::f64([2], vec![0.5, 2.0]).unwrap();
/// let r = f.call(&Params::new(), &[x], &[v], &Params::new()).unwrap();
/// assert_eq!(r.hvp.inputs[0].as_ref().unwrap().to_f64_vec(), vec![1.0, -12.0]);
/// ```
pub fn hvp<F, O>(f: F) -> HvpFn<F>
where
    F: FnMut(&[Value]) -> O,
    O: Outputs,
{
    HvpFn {
        staged: Staged::new(f),
    }
}

impl<F, O> HvpFn<F>
where
    F: FnMut(&[Value]) -> O,
    O: Outputs,
{
    staged_methods!(compile, hvp_program);

    /// The value, gradient and H v at these parameters and inputs, along the direction given
    /// by `tangents` (one per data input) and `param_tangents` (missing parameters: 0).
    #[track_caller]
    pub fn call(
        &mut self,
        params: &Params,
        inputs: &[Tensor],
        tangents: &[Tensor],
        param_tangents: &Params,
    ) -> Result<HvpOutput, TraceError> {
        let types = super::staged::types_of(inputs);
        let stage = self
            .staged
            .stage(std::panic::Location::caller(), &types, compile)?;
        let (h, p) = (&stage.compiled, &stage.traced.program);
        let mut args = arguments(p, params, inputs)?;
        args.extend(tangent_arguments(
            p,
            &h.jvp.layout,
            tangents,
            param_tangents,
        )?);
        let (values, report) = stage.eval(&h.jvp.program, &args)?;
        let (gradient, tangent) = (
            h.jvp.layout.primal_outputs(&values),
            h.jvp.layout.tangents(&values),
        );
        Ok(HvpOutput {
            value: gradient[0].clone(),
            grads: Grads::collect(
                p,
                |i| h.grad.gradient(gradient, i).cloned(),
                report.conventions.clone(),
            ),
            directional: tangent[0].clone(),
            hvp: Grads::collect(
                p,
                |i| h.grad.gradient(tangent, i).cloned(),
                report.conventions,
            ),
        })
    }
}
