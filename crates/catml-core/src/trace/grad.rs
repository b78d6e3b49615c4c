//! `value_and_grad` and `grad` of a model function with one single-element output.

use super::error::{CallSite, TraceError};
use super::grads::{check_scalar, Grads};
use super::outputs::Outputs;
use super::staged::{staged_methods, Staged};
use super::tracing::{arguments, Traced};
use super::value::Value;
use crate::ad::{self, Vjp};
use crate::interp;
use crate::ir::Program;
use crate::tensor::{Params, Tensor, TensorType};

/// A function's value and its gradients.
#[derive(Debug, Clone, PartialEq)]
pub struct ValueAndGrads {
    /// f at the given parameters and inputs.
    pub value: Tensor,
    /// ∇f, by input, parameter name and tag.
    pub grads: Grads,
}

fn compile(location: CallSite, traced: &Traced) -> Result<Vjp, TraceError> {
    check_scalar(location, "grad", &traced.program)?;
    Ok(ad::vjp(&traced.program)?)
}

fn vjp_program(v: &Vjp) -> &Program {
    &v.program
}

/// Evaluates the reverse-mode program with seed 1.
fn run(
    v: &Vjp,
    traced: &Traced,
    params: &Params,
    inputs: &[Tensor],
) -> Result<ValueAndGrads, TraceError> {
    let mut args = arguments(&traced.program, params, inputs)?;
    args.extend(
        traced
            .program
            .output_types()
            .iter()
            .map(|t| Tensor::full(t, 1.0)),
    );
    let (values, report) = interp::eval_with_report(&v.program, &args)?;
    let grads = Grads::collect(
        &traced.program,
        |i| v.gradients[i].map(|k| values[k].clone()),
        report.conventions,
    );
    Ok(ValueAndGrads {
        value: values[0].clone(),
        grads,
    })
}

/// `f` with [`ValueAndGradFn::call`] returning its value and gradients. See [`value_and_grad`].
pub struct ValueAndGradFn<F> {
    staged: Staged<F, Vjp>,
}

/// The value and gradient of a model function whose one output has one element.
///
/// The first call at some input types traces `f`, takes the VJP of the program and caches it;
/// later calls at those types only evaluate. Gradients come back for every data input, for
/// every parameter by name, and by tag.
///
/// ```
/// use catml_core::trace::{value_and_grad, Value};
/// use catml_core::tensor::{Params, Tensor};
///
/// // f(x) = Σ x², so ∇f = 2x.
/// let mut f = value_and_grad(|x: &[Value]| (&x[0] * &x[0]).sum_all());
/// let x = Tensor::f64([3], vec![1.0, -2.0, 0.5]).unwrap();
/// let r = f.call(&Params::new(), &[x]).unwrap();
/// assert_eq!(r.value.to_f64_vec(), vec![5.25]);
/// assert_eq!(r.grads.inputs[0].as_ref().unwrap().to_f64_vec(), vec![2.0, -4.0, 1.0]);
/// ```
pub fn value_and_grad<F, O>(f: F) -> ValueAndGradFn<F>
where
    F: FnMut(&[Value]) -> O,
    O: Outputs,
{
    ValueAndGradFn {
        staged: Staged::new(f),
    }
}

impl<F, O> ValueAndGradFn<F>
where
    F: FnMut(&[Value]) -> O,
    O: Outputs,
{
    staged_methods!(compile, vjp_program);

    /// The value and gradients at these parameters and data inputs.
    #[track_caller]
    pub fn call(
        &mut self,
        params: &Params,
        inputs: &[Tensor],
    ) -> Result<ValueAndGrads, TraceError> {
        let types = super::staged::types_of(inputs);
        let stage = self
            .staged
            .stage(std::panic::Location::caller(), &types, compile)?;
        run(&stage.compiled, &stage.traced, params, inputs)
    }
}

/// `f` with [`GradFn::call`] returning its gradients. See [`grad`].
pub struct GradFn<F> {
    staged: Staged<F, Vjp>,
}

/// The gradient of a model function whose one output has one element; as [`value_and_grad`]
/// without the value.
pub fn grad<F, O>(f: F) -> GradFn<F>
where
    F: FnMut(&[Value]) -> O,
    O: Outputs,
{
    GradFn {
        staged: Staged::new(f),
    }
}

impl<F, O> GradFn<F>
where
    F: FnMut(&[Value]) -> O,
    O: Outputs,
{
    staged_methods!(compile, vjp_program);

    /// The gradients at these parameters and data inputs.
    #[track_caller]
    pub fn call(&mut self, params: &Params, inputs: &[Tensor]) -> Result<Grads, TraceError> {
        let types = super::staged::types_of(inputs);
        let stage = self
            .staged
            .stage(std::panic::Location::caller(), &types, compile)?;
        Ok(run(&stage.compiled, &stage.traced, params, inputs)?.grads)
    }
}
