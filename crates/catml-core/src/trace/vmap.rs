//! `vmap` of a model function: the function written for one example, called on a batch.

use std::collections::HashMap;

use super::error::{CallSite, TraceError};
use super::outputs::Outputs;
use super::tracing::{arguments, trace_at, Traced};
use super::value::Value;
use crate::interp;
use crate::ir::Program;
use crate::tensor::{Params, Tensor, TensorType};
use crate::transform::{self, Axis, VmapError};

/// `f` with [`VmapFn::call`] applying it to every example of a batch. See [`vmap`].
pub struct VmapFn<F> {
    f: F,
    in_axes: Vec<Axis>,
    /// By batched input types: the function traced at one example's types, and its batched
    /// program.
    stages: HashMap<Vec<TensorType>, (Traced, Program)>,
    traces: usize,
}

/// The function `f`, written for one example, over a batch: `in_axes[k]` is where data input
/// `k` carries the batch (`None`: the input is shared by every example). Parameters are shared.
/// Every output carries the batch in front (an output that does not depend on the batch is
/// repeated). `f` is traced at one example's types and its program batched by
/// [`transform::vmap`] once per list of input types; later calls only evaluate.
///
/// ```
/// use catml_core::trace::{vmap, Value};
/// use catml_core::tensor::{Params, Tensor};
///
/// // A dot product of one example's vector with a shared vector, over three examples.
/// let mut f = vmap(|v: &[Value]| (&v[0] * &v[1]).sum_all(), &[Some(0), None]);
/// let xs = Tensor::f64([3, 2], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
/// let w = Tensor::f64([2], vec![1.0, -1.0]).unwrap();
/// let y = f.call(&Params::new(), &[xs, w]).unwrap();
/// assert_eq!(y[0].to_f64_vec(), vec![-1.0, -1.0, -1.0]);
/// ```
pub fn vmap<F, O>(f: F, in_axes: &[Axis]) -> VmapFn<F>
where
    F: FnMut(&[Value]) -> O,
    O: Outputs,
{
    VmapFn {
        f,
        in_axes: in_axes.to_vec(),
        stages: HashMap::new(),
        traces: 0,
    }
}

impl<F, O> VmapFn<F>
where
    F: FnMut(&[Value]) -> O,
    O: Outputs,
{
    /// The outputs of `f` for every example, each with the batch in front.
    #[track_caller]
    pub fn call(&mut self, params: &Params, inputs: &[Tensor]) -> Result<Vec<Tensor>, TraceError> {
        let location = std::panic::Location::caller();
        let types = super::staged::types_of(inputs);
        let (_, program) = self.stage(location, &types)?;
        let args = arguments(program, params, inputs)?;
        Ok(interp::eval(program, &args)?)
    }

    /// The batched program at these batched data input types.
    #[track_caller]
    pub fn program(&mut self, types: &[TensorType]) -> Result<&Program, TraceError> {
        Ok(&self.stage(std::panic::Location::caller(), types)?.1)
    }

    /// The initial parameter values (traces at these batched types if not yet traced).
    #[track_caller]
    pub fn init_types(&mut self, types: &[TensorType]) -> Result<Params, TraceError> {
        Ok(self
            .stage(std::panic::Location::caller(), types)?
            .0
            .params
            .clone())
    }

    /// How many times the function has been traced.
    pub fn trace_count(&self) -> usize {
        self.traces
    }

    fn stage(
        &mut self,
        location: CallSite,
        types: &[TensorType],
    ) -> Result<&(Traced, Program), TraceError> {
        if !self.stages.contains_key(types) {
            let (example, size) = example_types(types, &self.in_axes)?;
            let names: Vec<String> = (0..example.len()).map(|i| format!("v{i}")).collect();
            let named: Vec<(&str, TensorType)> = names
                .iter()
                .map(String::as_str)
                .zip(example.iter().cloned())
                .collect();
            self.traces += 1;
            let traced = trace_at(location, &named, |x| (self.f)(x))?;
            let p = &traced.program;
            let mut in_axes = self.in_axes.clone();
            in_axes.resize(p.n_inputs(), None);
            let out_axes = vec![Some(0); p.outputs().len()];
            let program = transform::vmap(p, size, &in_axes, &out_axes)?;
            self.stages.insert(types.to_vec(), (traced, program));
        }
        Ok(&self.stages[types])
    }
}

/// One example's input types and the batch size, from the batched types.
fn example_types(
    types: &[TensorType],
    in_axes: &[Axis],
) -> Result<(Vec<TensorType>, usize), TraceError> {
    if types.len() != in_axes.len() {
        return Err(TraceError::Count {
            what: "data input",
            expected: in_axes.len(),
            found: types.len(),
        });
    }
    let mut size = None;
    let mut example = Vec::with_capacity(types.len());
    for (index, (ty, &axis)) in types.iter().zip(in_axes).enumerate() {
        let Some(axis) = axis else {
            example.push(ty.clone());
            continue;
        };
        if axis >= ty.rank() {
            return Err(VmapError::InAxis {
                name: format!("v{index}"),
                axis,
                rank: ty.rank().saturating_sub(1),
            }
            .into());
        }
        let n = ty.dims()[axis];
        if *size.get_or_insert(n) != n {
            return Err(VmapError::BatchSizes {
                index,
                found: n,
                expected: size.unwrap_or(n),
            }
            .into());
        }
        let mut dims = ty.dims().to_vec();
        dims.remove(axis);
        example.push(TensorType::new(ty.dtype, dims));
    }
    let size = size.ok_or(VmapError::NothingBatched)?;
    Ok((example, size))
}
