//! `Program`: a traced or loaded CatML program from Python: its texts and analyses, evaluation
//! on NumPy arrays with the GIL released, and its derivative programs.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use catml_core::ad;
use catml_core::interp;
use catml_core::ir::{self, InputKind, Program};
use catml_core::tensor::{Params, Tensor, TensorType};
use catml_core::trace::Value;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};

use crate::array::{numpy_name, to_numpy, to_tensor, Read};
use crate::errors::{raise, Kind};
use crate::value::PyValue;

/// A well-typed CatML program and the parameter values it was made with (by name).
#[pyclass(name = "Program", module = "catml._catml", frozen)]
pub struct PyProgram {
    pub(crate) program: Arc<Program>,
    pub(crate) params: Params,
    /// The program compiled for evaluation, at the first evaluation.
    executable: OnceLock<interp::Executable>,
}

impl PyProgram {
    pub fn new(program: Program, params: Params) -> PyProgram {
        PyProgram {
            program: Arc::new(program),
            params,
            executable: OnceLock::new(),
        }
    }

    /// The tensors of NumPy arrays, one per input in order, each of the input's type.
    pub(crate) fn tensors(&self, inputs: &[Bound<'_, PyAny>]) -> PyResult<Vec<Tensor>> {
        let p = &self.program;
        if inputs.len() != p.n_inputs() {
            return Err(raise(
                Kind::Type,
                format!(
                    "the program takes {} inputs, found {}",
                    p.n_inputs(),
                    inputs.len()
                ),
            ));
        }
        let mut tensors = Vec::with_capacity(inputs.len());
        for (index, a) in inputs.iter().enumerate() {
            let t = to_tensor(
                a,
                || format!("input `{}`", p.inputs()[index].name),
                Read::InPlace,
            )?;
            check_input(p, index, &t)?;
            tensors.push(t);
        }
        Ok(tensors)
    }

    /// Evaluates on tensors in input order with the GIL released.
    pub(crate) fn run(&self, py: Python<'_>, inputs: Vec<Tensor>) -> PyResult<Vec<Tensor>> {
        let error = |e| raise(Kind::Value, format!("evaluating the program: {e}"));
        let exe = match self.executable.get() {
            Some(exe) => exe,
            None => {
                let made = interp::Executable::new((*self.program).clone()).map_err(error)?;
                self.executable.get_or_init(|| made)
            }
        };
        py.detach(|| exe.run(&inputs, interp::EvalOptions::default()))
            .map_err(error)
    }

    fn outputs<'py>(&self, py: Python<'py>, values: Vec<Tensor>) -> PyResult<Bound<'py, PyList>> {
        let arrays = values
            .into_iter()
            .map(|t| to_numpy(py, t))
            .collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, arrays)
    }
}

/// Checks that `t` has the type input `index` declares; no dtype is converted.
pub(crate) fn check_input(p: &Program, index: usize, t: &Tensor) -> PyResult<()> {
    let input = &p.inputs()[index];
    let found = t.ty();
    if found.dtype != input.ty.dtype {
        return Err(raise(
            Kind::Type,
            format!(
                "input `{}` is a {} array ({found}), the program takes {}: convert it explicitly",
                input.name,
                numpy_name(found.dtype),
                input.ty
            ),
        ));
    }
    if found.shape != input.ty.shape {
        return Err(raise(
            Kind::Type,
            format!(
                "input `{}` has type {found}, the program takes {}",
                input.name, input.ty
            ),
        ));
    }
    Ok(())
}

fn type_tuple<'py>(py: Python<'py>, t: &TensorType) -> PyResult<Bound<'py, PyTuple>> {
    let shape = PyTuple::new(py, t.shape.dims())?;
    PyTuple::new(
        py,
        [
            shape.into_any(),
            t.dtype.as_str().into_pyobject(py)?.into_any(),
        ],
    )
}

#[pymethods]
impl PyProgram {
    /// The inputs as `(name, shape, dtype, kind)` with kind `"data"` or `"param"`.
    fn inputs<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let items = self
            .program
            .inputs()
            .iter()
            .map(|i| {
                let kind = match i.kind {
                    InputKind::Data => "data",
                    InputKind::Param => "param",
                };
                (
                    i.name.clone(),
                    i.ty.shape.dims().to_vec(),
                    i.ty.dtype.as_str(),
                    kind,
                )
            })
            .collect::<Vec<_>>();
        PyList::new(py, items)
    }

    /// The outputs' `(shape, dtype)`.
    fn output_types<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let items = self
            .program
            .output_types()
            .iter()
            .map(|t| type_tuple(py, t))
            .collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, items)
    }

    /// The outputs' names.
    fn output_names(&self) -> Vec<String> {
        self.program.output_names()
    }

    /// Evaluates on NumPy arrays, one per input in order; returns one array per output.
    fn eval<'py>(
        &self,
        py: Python<'py>,
        inputs: Vec<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyList>> {
        let values = self.run(py, self.tensors(&inputs)?)?;
        self.outputs(py, values)
    }

    /// Seconds per evaluation on `inputs`, over `n` evaluations in one loop in Rust, with no
    /// Python in between: the floor that the call overhead from Python is measured against.
    fn time_eval(&self, py: Python<'_>, inputs: Vec<Bound<'_, PyAny>>, n: usize) -> PyResult<f64> {
        let tensors = self.tensors(&inputs)?;
        self.run(py, tensors.clone())?;
        let start = std::time::Instant::now();
        for _ in 0..n {
            self.run(py, tensors.clone())?;
        }
        Ok(start.elapsed().as_secs_f64() / n.max(1) as f64)
    }

    /// Evaluates on inputs by name; parameters not given take the program's stored values.
    fn eval_named<'py>(
        &self,
        py: Python<'py>,
        inputs: &Bound<'py, PyDict>,
    ) -> PyResult<Bound<'py, PyList>> {
        let p = &self.program;
        let mut named = BTreeMap::new();
        for (k, v) in inputs.iter() {
            let name: String = k.extract()?;
            let Some(index) = p.inputs().iter().position(|i| i.name == name) else {
                let known: Vec<&str> = p.inputs().iter().map(|i| i.name.as_str()).collect();
                return Err(raise(
                    Kind::Type,
                    format!(
                        "unknown input `{name}`: the program's inputs are {}",
                        known.join(", ")
                    ),
                ));
            };
            let t = to_tensor(&v, || format!("input `{name}`"), Read::InPlace)?;
            check_input(p, index, &t)?;
            named.insert(name, t);
        }
        for i in p.inputs() {
            if i.kind == InputKind::Param && !named.contains_key(&i.name) {
                if let Some(t) = self.params.get(&i.name) {
                    named.insert(i.name.clone(), t.clone());
                }
            }
        }
        let ordered = p
            .inputs()
            .iter()
            .map(|i| {
                named.remove(&i.name).ok_or_else(|| {
                    raise(Kind::Type, format!("missing input `{}` ({})", i.name, i.ty))
                })
            })
            .collect::<PyResult<Vec<_>>>()?;
        let values = self.run(py, ordered)?;
        self.outputs(py, values)
    }

    /// The stored parameter values by name (initializers of a loaded ONNX model).
    fn stored_params<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for (name, t) in self.params.iter() {
            d.set_item(name, to_numpy(py, t.clone())?)?;
        }
        Ok(d)
    }

    /// The CatML listing (the text `catml print` shows).
    fn listing(&self) -> String {
        ir::listing::print(&self.program)
    }

    /// LensIR JSON.
    fn to_json(&self) -> String {
        ir::json::to_string(&self.program)
    }

    /// A Graphviz DOT picture.
    fn dot(&self) -> String {
        ir::dot::program(&self.program)
    }

    /// Parameter counts: `{"total": n, "by_tag": {...}, "params": [(name, elements, tag)]}`.
    fn params<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let c = interp::params(&self.program);
        let d = PyDict::new(py);
        d.set_item("total", c.total)?;
        d.set_item("by_tag", c.by_tag.into_pyobject(py)?)?;
        let items: Vec<(String, usize, Option<String>)> = c
            .params
            .into_iter()
            .map(|p| (p.name, p.elements, p.tag))
            .collect();
        d.set_item("params", items)?;
        Ok(d)
    }

    /// Flops and bytes of one evaluation.
    fn cost<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let c = interp::cost(&self.program);
        let d = PyDict::new(py);
        d.set_item("flops", c.flops)?;
        d.set_item("bytes_read", c.bytes_read)?;
        d.set_item("bytes_written", c.bytes_written)?;
        d.set_item("peak_live_bytes", c.peak_live_bytes)?;
        d.set_item("executable_peak_live_bytes", c.executable_peak_live_bytes)?;
        d.set_item("flops_by_op", c.flops_by_op.into_pyobject(py)?)?;
        Ok(d)
    }

    /// The gradient program of the first output (one float element) with respect to the
    /// inputs at `wrt` (all float inputs if `None`): `(program, slots)`, where `slots[i]` is
    /// the output index of input i's gradient or `None`. Its outputs start with the primal
    /// outputs.
    #[pyo3(signature = (wrt=None))]
    fn grad(&self, wrt: Option<Vec<usize>>) -> PyResult<(PyProgram, Vec<Option<usize>>)> {
        let p = &self.program;
        let out = p.output_types();
        if out.is_empty() || out[0].numel() != 1 || !out[0].dtype.is_float() {
            let types: Vec<String> = out.iter().map(ToString::to_string).collect();
            return Err(raise(
                Kind::Type,
                format!(
                    "grad needs a function with one single-element float output, this one returns ({})",
                    types.join(", ")
                ),
            ));
        }
        let g = match wrt {
            None => ad::grad(p),
            Some(w) => ad::grad_of(p, &w),
        }
        .map_err(|e| raise(Kind::Value, format!("differentiating the program: {e}")))?;
        let slots = (0..p.n_inputs())
            .map(|i| g.layout.gradient_output(i))
            .collect();
        Ok((PyProgram::new(g.program, self.params.clone()), slots))
    }

    /// The reverse-mode program: inputs are the primal inputs then one seed per output;
    /// outputs the primal outputs then gradients. Returns `(program, slots)` as `grad`.
    fn vjp(&self) -> PyResult<(PyProgram, Vec<Option<usize>>)> {
        let v = ad::vjp(&self.program)
            .map_err(|e| raise(Kind::Value, format!("differentiating the program: {e}")))?;
        let slots = (0..self.program.n_inputs())
            .map(|i| v.layout.gradient_output(i))
            .collect();
        Ok((PyProgram::new(v.program, self.params.clone()), slots))
    }

    /// The forward-mode program: inputs are the primal inputs then one tangent per float
    /// input; outputs the primal outputs then one tangent per output. Returns
    /// `(program, slots)`, `slots[i]` the input index of input i's tangent or `None`.
    fn jvp(&self) -> PyResult<(PyProgram, Vec<Option<usize>>)> {
        let j = ad::jvp(&self.program)
            .map_err(|e| raise(Kind::Value, format!("differentiating the program: {e}")))?;
        let slots = (0..self.program.n_inputs())
            .map(|i| j.layout.tangent_input(i))
            .collect();
        Ok((PyProgram::new(j.program, self.params.clone()), slots))
    }

    /// Applies the program to values node by node: inside a trace this records the nodes
    /// (so transforms compose), outside it evaluates them.
    fn call(&self, args: Vec<PyRef<'_, PyValue>>) -> PyResult<Vec<PyValue>> {
        let args: Vec<&Value> = args.iter().map(|v| &v.value).collect();
        Value::call(&self.program, &args)
            .into_iter()
            .map(PyValue::checked)
            .collect()
    }

    fn __repr__(&self) -> String {
        format!(
            "<catml.Program: {} inputs, {} nodes, {} outputs>",
            self.program.n_inputs(),
            self.program.n_nodes(),
            self.program.outputs().len()
        )
    }
}
