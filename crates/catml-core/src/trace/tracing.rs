//! [`trace`]: run a model function once on typed variables and keep what it did as a program.

use std::panic::Location;

use super::context::begin;
use super::error::{CallSite, TraceError};
use super::outputs::Outputs;
use super::value::{lift, Value};
use crate::interp;
use crate::ir::{InputKind, Program};
use crate::tensor::{Params, Tensor, TensorType};

/// What tracing made: a well-typed program, and the initial values of the parameters that the
/// function declared (one entry per parameter input of the program, by name).
#[derive(Debug, Clone)]
pub struct Traced {
    /// What the function did: data inputs first, then parameters, in declaration order.
    pub program: Program,
    /// Each parameter's initial value, by name.
    pub params: Params,
}

impl Traced {
    /// Evaluates the program on these data inputs with the initial parameters.
    pub fn eval(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>, TraceError> {
        let args = arguments(&self.program, &self.params, inputs)?;
        Ok(interp::eval(&self.program, &args)?)
    }

    /// Evaluates the program on these data inputs with the given parameters (a checkpoint's
    /// [`Params::load`], or trained values), in one call. Entries the program does not declare
    /// are ignored; a missing or mistyped parameter is an error naming it.
    ///
    /// ```
    /// use catml_core::tensor::{DType, Params, Tensor, TensorType};
    /// use catml_core::trace::{trace, Value};
    ///
    /// let traced = trace(&[TensorType::new(DType::F64, [2])], |x| {
    ///     let w = Value::param("out.W", Tensor::f64([2], vec![0.0, 0.0]).unwrap());
    ///     (&x[0] * &w).sum_all()
    /// }).unwrap();
    /// let mut trained = Params::new();
    /// trained.insert("out.W", Tensor::f64([2], vec![1.0, 2.0]).unwrap());
    /// let x = Tensor::f64([2], vec![3.0, 4.0]).unwrap();
    /// assert_eq!(traced.call(&trained, &[x]).unwrap()[0].item().unwrap(), 11.0);
    /// ```
    pub fn call(&self, params: &Params, inputs: &[Tensor]) -> Result<Vec<Tensor>, TraceError> {
        let args = arguments(&self.program, params, inputs)?;
        Ok(interp::eval(&self.program, &args)?)
    }

    /// The data inputs' types, in order.
    pub fn data_types(&self) -> Vec<TensorType> {
        self.program
            .inputs()
            .iter()
            .filter(|i| i.kind == InputKind::Data)
            .map(|i| i.ty.clone())
            .collect()
    }
}

/// Every input of `p` in declaration order: data inputs from `inputs` in order, parameters
/// from `params` by name (entries `p` does not declare are ignored).
pub fn arguments(
    p: &Program,
    params: &Params,
    inputs: &[Tensor],
) -> Result<Vec<Tensor>, TraceError> {
    let n_data = p.data_indices().len();
    if inputs.len() != n_data {
        return Err(TraceError::Count {
            what: "data input",
            expected: n_data,
            found: inputs.len(),
        });
    }
    let mut data = inputs.iter();
    p.inputs()
        .iter()
        .map(|input| match input.kind {
            InputKind::Data => Ok(data.next().expect("counted above").clone()),
            InputKind::Param => match params.get(&input.name) {
                None => Err(TraceError::MissingParam {
                    name: input.name.clone(),
                    ty: input.ty.clone(),
                }),
                Some(t) if t.ty() != input.ty => Err(TraceError::ParamType {
                    name: input.name.clone(),
                    expected: input.ty.clone(),
                    found: t.ty(),
                }),
                Some(t) => Ok(t.clone()),
            },
        })
        .collect()
}

/// Traces `f` on data inputs of these types, named `v0, v1, ..`.
///
/// `f` runs once. Each primitive call on its arguments records one node (named `v<n>` in
/// order, as in the tiny MLP's listing in docs/examples.md); each [`Value::param`] becomes a
/// parameter input whose initial value lands in [`Traced::params`]. Tensors that `f` captured from
/// outside become `constant` nodes. The first error raised inside `f` is returned, naming its call
/// site.
///
/// ```
/// use catml_core::trace::trace;
/// use catml_core::tensor::{DType, TensorType};
///
/// let t = TensorType::new(DType::F64, [3]);
/// let traced = trace(&[t], |x| x[0].tanh() * 2.0).unwrap();
/// assert_eq!(traced.program.n_nodes(), 4); // tanh, constant 2, broadcast, mul
/// ```
#[track_caller]
pub fn trace<O: Outputs>(
    inputs: &[TensorType],
    f: impl FnOnce(&[Value]) -> O,
) -> Result<Traced, TraceError> {
    let names: Vec<String> = (0..inputs.len()).map(|i| format!("v{i}")).collect();
    let named: Vec<(&str, TensorType)> = names
        .iter()
        .map(String::as_str)
        .zip(inputs.iter().cloned())
        .collect();
    trace_at(Location::caller(), &named, f)
}

/// As [`trace`], with named data inputs.
#[track_caller]
pub fn trace_named<O: Outputs>(
    inputs: &[(&str, TensorType)],
    f: impl FnOnce(&[Value]) -> O,
) -> Result<Traced, TraceError> {
    trace_at(Location::caller(), inputs, f)
}

pub(crate) fn trace_at<O: Outputs>(
    location: CallSite,
    inputs: &[(&str, TensorType)],
    f: impl FnOnce(&[Value]) -> O,
) -> Result<Traced, TraceError> {
    let (id, guard) = begin();
    let args = super::context::with_current(|r| {
        let r = r.expect("begin pushed a recording");
        inputs
            .iter()
            .map(|(name, ty)| {
                let var = r
                    .builder
                    .input(name, ty.clone(), InputKind::Data)
                    .map_err(|source| TraceError::Build { location, source })?;
                r.n_values += 1;
                Ok(Value::symbol(id, var, ty.clone()))
            })
            .collect::<Result<Vec<_>, TraceError>>()
    })?;
    let returned = f(&args).into_values();
    let lifted = super::context::with_current(|r| {
        let r = r.expect("the recording lives until its guard ends");
        let outs = returned?;
        outs.iter()
            .enumerate()
            .map(|(index, v)| lift(r, location, index, v))
            .collect::<Result<Vec<_>, TraceError>>()
    });
    let recording = guard.end();
    if let Some(e) = recording.first_error {
        return Err(e);
    }
    let outputs = lifted?;
    if outputs.is_empty() {
        return Err(TraceError::NoOutputs { location });
    }
    let program = recording
        .builder
        .finish(&outputs)
        .map_err(|source| TraceError::Build { location, source })?;
    Ok(Traced {
        program,
        params: recording.params,
    })
}
