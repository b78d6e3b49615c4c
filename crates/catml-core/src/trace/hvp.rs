//! `hvp` of a scalar model function: Hessian-vector products, forward over reverse.
//!
//! With g(x) = ∇f(x) (the VJP program with its seed fixed to 1), H v = J_g(x) v: the JVP of
//! the gradient program. Both are program transforms, so this is one program, built once.

use super::error::{CallSite, OperandTypes, TraceError};
use super::grads::{check_scalar, tangent_arguments, Grads};
use super::outputs::Outputs;
use super::staged::{staged_methods, Staged};
use super::tracing::{arguments, Traced};
use super::value::Value;
use crate::ad::{self, Jvp};
use crate::interp;
use crate::ir::{Builder, Program, Var};
use crate::prim::Ops;
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

/// The forward-over-reverse program and where each input's gradient sits in its outputs.
#[derive(Debug)]
pub(crate) struct HvpProgram {
    jvp: Jvp,
    /// For each input of the traced program: the index of its gradient among the outputs of
    /// the gradient program (output 0 is the value).
    grad_outputs: Vec<Option<usize>>,
}

/// g: the traced program's inputs to (value, gradient of each float input), seed fixed to 1.
fn gradient_program(
    location: CallSite,
    p: &Program,
) -> Result<(Program, Vec<Option<usize>>), TraceError> {
    let build = |source| TraceError::Build { location, source };
    let v = ad::vjp(p)?;
    let mut b = Builder::new();
    let mut args: Vec<Var> = p
        .inputs()
        .iter()
        .map(|i| b.input(&i.name, i.ty.clone(), i.kind))
        .collect::<Result<_, _>>()
        .map_err(build)?;
    b.set_name_prefix("seed");
    let seed_ty = p.output_types()[0].clone();
    let seed = b.full(1.0, &seed_ty).map_err(|source| TraceError::Type {
        location,
        op: "full".to_string(),
        operands: OperandTypes(vec![seed_ty]),
        source,
    })?;
    args.push(seed);
    let outs = b.inline(&v.program, &args).map_err(build)?;
    let mut g_outputs = vec![outs[0]];
    let mut grad_outputs = Vec::with_capacity(p.n_inputs());
    for slot in &v.gradients {
        grad_outputs.push(slot.map(|k| {
            g_outputs.push(outs[k]);
            g_outputs.len() - 1
        }));
    }
    Ok((b.finish(&g_outputs).map_err(build)?, grad_outputs))
}

fn compile(location: CallSite, traced: &Traced) -> Result<HvpProgram, TraceError> {
    check_scalar(location, "hvp", &traced.program)?;
    let (g, grad_outputs) = gradient_program(location, &traced.program)?;
    Ok(HvpProgram {
        jvp: ad::jvp(&g)?,
        grad_outputs,
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
            &h.jvp.tangent_inputs,
            tangents,
            param_tangents,
        )?);
        let (values, report) = interp::eval_with_report(&h.jvp.program, &args)?;
        let n = h.jvp.n_primal_outputs;
        let pick = |offset: usize| {
            let values = &values;
            move |i: usize| h.grad_outputs[i].map(|k| values[offset + k].clone())
        };
        Ok(HvpOutput {
            value: values[0].clone(),
            grads: Grads::collect(p, pick(0), report.conventions.clone()),
            directional: values[n].clone(),
            hvp: Grads::collect(p, pick(n), report.conventions),
        })
    }
}
