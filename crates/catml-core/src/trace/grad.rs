//! `value_and_grad` and `grad` of a model function with one single-element output.

use super::error::{CallSite, TraceError};
use super::grads::{check_scalar, Grads};
use super::outputs::Outputs;
use super::staged::{staged_methods, Options, Stage, Staged};
use super::tracing::{arguments, Traced};
use super::value::Value;
use crate::ad::{self, CheckpointPolicy, Vjp};
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

fn compile(location: CallSite, traced: &Traced, options: &Options) -> Result<Vjp, TraceError> {
    check_scalar(location, "grad", &traced.program)?;
    let p = &traced.program;
    let policy = options.checkpoint.as_ref();
    let Some(argnums) = &options.argnums else {
        return Ok(match policy {
            None => ad::grad(p)?,
            Some(policy) => ad::grad_with(p, policy)?,
        });
    };
    let n_data = p.data_indices().len();
    if let Some(&index) = argnums.iter().find(|&&k| k >= n_data) {
        return Err(TraceError::ArgNum {
            location,
            index,
            inputs: n_data,
        });
    }
    // Data inputs come first in a traced program; parameters are always differentiated.
    let wrt: Vec<usize> = argnums.iter().copied().chain(p.param_indices()).collect();
    Ok(match policy {
        None => ad::grad_of(p, &wrt)?,
        Some(policy) => ad::grad_of_with(p, &wrt, policy)?,
    })
}

fn vjp_program(v: &Vjp) -> &Program {
    &v.program
}

/// Evaluates the gradient program (its seed is 1 inside it).
fn run(
    stage: &Stage<Vjp>,
    params: &Params,
    inputs: &[Tensor],
) -> Result<ValueAndGrads, TraceError> {
    let (v, traced) = (&stage.compiled, &stage.traced);
    let args = arguments(&traced.program, params, inputs)?;
    let (values, report) = stage.eval(&v.program, &args)?;
    let grads = Grads::collect(
        &traced.program,
        |i| v.layout.gradient(&values, i).cloned(),
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

    /// Differentiates only these data inputs (positions, as in `call`'s `inputs`); the
    /// others' entries in [`Grads::inputs`] are `None`. Parameters are always differentiated.
    /// A position past the last data input is an error at the first call.
    pub fn argnums(mut self, argnums: &[usize]) -> Self {
        self.staged
            .set_options(|o| o.argnums = Some(argnums.to_vec()));
        self
    }

    /// Recomputes in the reverse pass what `policy` does not keep ([`ad::grad_with`]): less
    /// memory, the same gradients bit for bit.
    pub fn checkpoint(mut self, policy: CheckpointPolicy) -> Self {
        self.staged.set_options(|o| o.checkpoint = Some(policy));
        self
    }

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
        run(stage, params, inputs)
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

    /// Differentiates only these data inputs (positions, as in `call`'s `inputs`); the
    /// others' entries in [`Grads::inputs`] are `None`. Parameters are always differentiated.
    /// A position past the last data input is an error at the first call.
    pub fn argnums(mut self, argnums: &[usize]) -> Self {
        self.staged
            .set_options(|o| o.argnums = Some(argnums.to_vec()));
        self
    }

    /// Recomputes in the reverse pass what `policy` does not keep ([`ad::grad_with`]): less
    /// memory, the same gradients bit for bit.
    pub fn checkpoint(mut self, policy: CheckpointPolicy) -> Self {
        self.staged.set_options(|o| o.checkpoint = Some(policy));
        self
    }

    /// The gradients at these parameters and data inputs.
    #[track_caller]
    pub fn call(&mut self, params: &Params, inputs: &[Tensor]) -> Result<Grads, TraceError> {
        let types = super::staged::types_of(inputs);
        let stage = self
            .staged
            .stage(std::panic::Location::caller(), &types, compile)?;
        Ok(run(stage, params, inputs)?.grads)
    }
}
