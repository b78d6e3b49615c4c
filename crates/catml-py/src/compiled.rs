//! `Compiled`: a transformed Python function (`jit`, `grad`, `value_and_grad`) whose common call
//! stays in Rust: flatten the arguments, look their signature up among the stages already
//! traced, read the arrays in place, evaluate with the GIL released and rebuild the results'
//! structure. Anything else (a new signature, traced values, leaves that need converting or
//! refusing) goes to the Python function `miss`, which traces, registers the new stage, and
//! answers the call.

use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};

use catml_core::tensor::{Array, DType, Shape, Tensor, TensorType};
use numpy::{PyUntypedArray, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyFloat, PyInt, PyTuple};

use crate::array::{array_tensor, tensor_type, to_numpy, Read};
use crate::errors::{raise, Kind};
use crate::program::PyProgram;
use crate::pytree::{flatten, Tree};

/// What a call returns from the program's outputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Form {
    /// The outputs in the function's output structure.
    Outputs,
    /// `(value, gradient)`.
    ValueAndGrad,
    /// The gradient.
    Grad,
    /// `(gradient, aux)` for a function returning `(value, aux)`.
    GradAux,
}

/// One traced program at one signature and how its outputs become the call's result.
#[pyclass(name = "Stage", module = "catml._catml", frozen)]
pub struct Stage {
    program: Py<PyProgram>,
    form: Form,
    out_tree: Tree,
    /// The program's outputs that make up the function's value (the first ones).
    n_out: usize,
    /// Per differentiated argument: its tree and the outputs holding its leaves' gradients.
    grads: Vec<(Tree, Vec<usize>)>,
    /// One differentiated argument (`argnums` an int): its gradient is not put in a tuple.
    single: bool,
}

#[pymethods]
impl Stage {
    /// A stage of `program`. `form` is `"jit"`, `"value_and_grad"`, `"grad"` or `"grad_aux"`;
    /// `grads` lists per differentiated argument its tree definition and output slots.
    #[new]
    #[pyo3(signature = (program, out_tree, form, n_out=None, grads=Vec::new(), single=true))]
    fn new(
        program: Bound<'_, PyProgram>,
        out_tree: &Bound<'_, PyAny>,
        form: &str,
        n_out: Option<usize>,
        grads: Vec<(Bound<'_, PyAny>, Vec<usize>)>,
        single: bool,
    ) -> PyResult<Stage> {
        let form = match form {
            "jit" => Form::Outputs,
            "value_and_grad" => Form::ValueAndGrad,
            "grad" => Form::Grad,
            "grad_aux" => Form::GradAux,
            other => return Err(raise(Kind::Value, format!("unknown stage form `{other}`"))),
        };
        let n_outputs = program.get().program.outputs().len();
        let n_out = n_out.unwrap_or(n_outputs);
        let out_tree = Tree::from_py(out_tree)?;
        let grads = grads
            .iter()
            .map(|(t, slots)| Ok((Tree::from_py(t)?, slots.clone())))
            .collect::<PyResult<Vec<_>>>()?;
        let fits = out_tree.n_leaves() == n_out
            && n_out <= n_outputs
            && grads
                .iter()
                .all(|(t, s)| t.n_leaves() == s.len() && s.iter().all(|&k| k < n_outputs));
        if !fits || (form != Form::Outputs && grads.is_empty()) {
            return Err(raise(
                Kind::Value,
                "the stage's trees do not fit the program's outputs",
            ));
        }
        Ok(Stage {
            program: program.unbind(),
            form,
            out_tree,
            n_out,
            grads,
            single,
        })
    }

    /// The program evaluated.
    #[getter]
    fn program(&self, py: Python<'_>) -> Py<PyProgram> {
        self.program.clone_ref(py)
    }

    /// Evaluates on NumPy arrays, one per input in order, and returns the call's result.
    fn run<'py>(
        &self,
        py: Python<'py>,
        leaves: Vec<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let program = self.program.get();
        let tensors = program.tensors(&leaves)?;
        self.answer(py, program.run(py, tensors)?)
    }

    /// The call's result from the program's outputs (arrays, or traced values).
    fn rebuild<'py>(
        &self,
        py: Python<'py>,
        outs: Vec<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        if outs.len() != self.program.get().program.outputs().len() {
            return Err(raise(
                Kind::Type,
                "one value per output of the stage's program",
            ));
        }
        self.result(py, &outs)
    }
}

impl Stage {
    fn answer<'py>(&self, py: Python<'py>, values: Vec<Tensor>) -> PyResult<Bound<'py, PyAny>> {
        let outs = values
            .into_iter()
            .map(|t| to_numpy(py, t))
            .collect::<PyResult<Vec<_>>>()?;
        self.result(py, &outs)
    }

    fn result<'py>(
        &self,
        py: Python<'py>,
        outs: &[Bound<'py, PyAny>],
    ) -> PyResult<Bound<'py, PyAny>> {
        let value = self
            .out_tree
            .unflatten(py, &mut outs[..self.n_out].iter().cloned())?;
        if self.form == Form::Outputs {
            return Ok(value);
        }
        let mut grads = self
            .grads
            .iter()
            .map(|(tree, slots)| tree.unflatten(py, &mut slots.iter().map(|&k| outs[k].clone())))
            .collect::<PyResult<Vec<_>>>()?;
        let grad = if self.single && grads.len() == 1 {
            grads.pop().expect("one gradient")
        } else {
            PyTuple::new(py, grads)?.into_any()
        };
        Ok(match self.form {
            Form::ValueAndGrad => PyTuple::new(py, [value, grad])?.into_any(),
            Form::Grad => grad,
            Form::GradAux => PyTuple::new(py, [grad, value.get_item(1)?])?.into_any(),
            Form::Outputs => unreachable!("returned above"),
        })
    }
}

/// A stage with the signature it was traced at.
struct Entry {
    trees: Vec<Tree>,
    types: Vec<TensorType>,
    stage: Py<Stage>,
}

impl Entry {
    /// The tensors of `args` when they have this entry's signature, made of exact containers
    /// and plain leaves (`None` otherwise: the caller flattens them in full).
    fn matched(&self, args: &Bound<'_, PyTuple>) -> Option<Vec<Tensor>> {
        if args.len() != self.trees.len() {
            return None;
        }
        let mut tensors = Vec::with_capacity(self.types.len());
        let mut leaf = |x: &Bound<'_, PyAny>| {
            let Some(ty) = self.types.get(tensors.len()) else {
                return false;
            };
            match typed_tensor(x, ty) {
                Some(t) => {
                    tensors.push(t);
                    true
                }
                None => false,
            }
        };
        let all = self
            .trees
            .iter()
            .zip(args.iter())
            .all(|(t, a)| t.matches(&a, &mut leaf));
        (all && tensors.len() == self.types.len()).then_some(tensors)
    }
}

/// A transformed function: stages by signature, and the Python function that handles a call
/// no stage answers (`miss(compiled, args)`).
#[pyclass(name = "Compiled", module = "catml._catml", frozen, dict)]
pub struct Compiled {
    miss: Py<PyAny>,
    entries: Mutex<HashMap<u64, Vec<Arc<Entry>>>>,
    /// The stage of the last call, tried first: a loop calls with one signature.
    last: Mutex<Option<Arc<Entry>>>,
}

/// The tensor of a leaf the common call takes as it is: a NumPy array (exactly `ndarray`) of
/// float32, float64, int64 or bool, or a Python float, int (fitting i64) or bool. Anything
/// else is left to the Python path, which converts it or refuses it with its name.
fn plain_tensor(leaf: &Bound<'_, PyAny>) -> Option<Tensor> {
    if let Some(array) = exact_array(leaf) {
        return plain_array(array, Shape::from(array.shape()));
    }
    if leaf.is_exact_instance_of::<PyFloat>() {
        return Some(Tensor::F64(Array::scalar(leaf.extract::<f64>().ok()?)));
    }
    if leaf.is_exact_instance_of::<PyBool>() {
        return Some(Tensor::Bool(Array::scalar(leaf.extract::<bool>().ok()?)));
    }
    if leaf.is_exact_instance_of::<PyInt>() {
        return Some(Tensor::I64(Array::scalar(leaf.extract::<i64>().ok()?)));
    }
    None
}

/// `leaf` as a NumPy array, when it is exactly an `ndarray`.
fn exact_array<'a, 'py>(leaf: &'a Bound<'py, PyAny>) -> Option<&'a Bound<'py, PyUntypedArray>> {
    // SAFETY: exactly an `ndarray`, checked first.
    leaf.is_exact_instance_of::<PyUntypedArray>()
        .then(|| unsafe { leaf.cast_unchecked::<PyUntypedArray>() })
}

/// The tensor of an array of dimensions `dims`, read in place, when its dtype is one the
/// common call takes (f32, f64, i64, bool); `None` otherwise.
fn plain_array(array: &Bound<'_, PyUntypedArray>, dims: Shape) -> Option<Tensor> {
    let t = array_tensor(array, dims, String::new, Read::InPlace).ok()?;
    matches!(
        t.dtype(),
        DType::F32 | DType::F64 | DType::I64 | DType::Bool
    )
    .then_some(t)
}

/// The tensor of a leaf that `plain_tensor` takes, when it has the type `ty`; `None` otherwise.
/// An array's dimensions are compared before anything is made, and its tensor takes the shape
/// of `ty`.
fn typed_tensor(leaf: &Bound<'_, PyAny>, ty: &TensorType) -> Option<Tensor> {
    let t = match exact_array(leaf) {
        Some(array) => {
            if array.shape() != ty.shape.dims() {
                return None;
            }
            plain_array(array, ty.shape.clone())?
        }
        None => plain_tensor(leaf)?,
    };
    (t.dtype() == ty.dtype && t.dims() == ty.shape.dims()).then_some(t)
}

/// A hash of the trees and each leaf's dtype and dimensions.
fn signature_hash<'a>(
    py: Python<'_>,
    trees: &[Tree],
    types: impl Iterator<Item = (DType, &'a [usize])>,
) -> PyResult<u64> {
    let mut h = DefaultHasher::new();
    trees.len().hash(&mut h);
    for t in trees {
        t.hash_into(py, &mut h)?;
    }
    for (dtype, dims) in types {
        dtype.hash(&mut h);
        dims.hash(&mut h);
    }
    Ok(h.finish())
}

impl Compiled {
    /// The stage of this signature, if one was traced.
    fn find(&self, py: Python<'_>, trees: &[Tree], tensors: &[Tensor]) -> Option<Arc<Entry>> {
        let hash = signature_hash(py, trees, tensors.iter().map(|t| (t.dtype(), t.dims()))).ok()?;
        self.bucket(hash).into_iter().find(|e| {
            e.types.len() == tensors.len()
                && e.types
                    .iter()
                    .zip(tensors)
                    .all(|(ty, t)| t.dtype() == ty.dtype && t.dims() == ty.shape.dims())
                && same_trees(py, &e.trees, trees)
        })
    }

    /// The entries of one hash. Copied out: comparing keys may run Python code (a key's
    /// `__eq__`), which must not happen under the lock another thread may wait on with the GIL.
    fn bucket(&self, hash: u64) -> Vec<Arc<Entry>> {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries.get(&hash).cloned().unwrap_or_default()
    }
}

fn same_trees(py: Python<'_>, a: &[Tree], b: &[Tree]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(a, b)| a.same(py, b))
}

#[pymethods]
impl Compiled {
    #[new]
    fn new(miss: Py<PyAny>) -> Compiled {
        Compiled {
            miss,
            entries: Mutex::new(HashMap::new()),
            last: Mutex::new(None),
        }
    }

    /// Registers `stage` for arguments of these tree definitions and leaf types
    /// (`(shape, dtype)` each).
    fn insert(
        &self,
        py: Python<'_>,
        trees: Vec<Bound<'_, PyAny>>,
        types: Vec<(Vec<usize>, String)>,
        stage: Py<Stage>,
    ) -> PyResult<()> {
        let trees = trees
            .iter()
            .map(Tree::from_py)
            .collect::<PyResult<Vec<_>>>()?;
        let types = types
            .into_iter()
            .map(|(s, d)| tensor_type(s, &d))
            .collect::<PyResult<Vec<_>>>()?;
        let program = &stage.get().program.get().program;
        let fits = types.len() == program.n_inputs()
            && types.iter().zip(program.inputs()).all(|(t, i)| *t == i.ty)
            && trees.iter().map(Tree::n_leaves).sum::<usize>() == types.len();
        if !fits {
            return Err(raise(
                Kind::Value,
                "the signature does not fit the stage's program inputs",
            ));
        }
        let hash = signature_hash(py, &trees, types.iter().map(|t| (t.dtype, t.shape.dims())))?;
        let entry = Arc::new(Entry {
            trees,
            types,
            stage,
        });
        let replaced: Vec<Arc<Entry>> = self
            .bucket(hash)
            .into_iter()
            .filter(|e| e.types == entry.types && same_trees(py, &e.trees, &entry.trees))
            .collect();
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let same = entries.entry(hash).or_default();
        same.retain(|e| !replaced.iter().any(|r| Arc::ptr_eq(r, e)));
        same.push(entry);
        Ok(())
    }

    /// The number of signatures registered.
    fn __len__(&self) -> usize {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries.values().map(Vec::len).sum()
    }

    #[pyo3(signature = (*args))]
    fn __call__<'py>(
        slf: &Bound<'py, Self>,
        args: &Bound<'py, PyTuple>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let this = slf.get();
        let last = this.last.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let hit = last.and_then(|e| Some((e.matched(args)?, e)));
        let (tensors, entry) = match hit {
            Some(hit) => hit,
            None => {
                let mut leaves = Vec::new();
                let trees = args
                    .iter()
                    .map(|a| flatten(&a, &mut leaves))
                    .collect::<PyResult<Vec<_>>>()?;
                let tensors: Option<Vec<Tensor>> = leaves.iter().map(plain_tensor).collect();
                let found = tensors.and_then(|t| {
                    let entry = this.find(py, &trees, &t)?;
                    Some((t, entry))
                });
                let Some((tensors, entry)) = found else {
                    return this.miss.bind(py).call1((slf, args));
                };
                *this.last.lock().unwrap_or_else(|e| e.into_inner()) = Some(entry.clone());
                (tensors, entry)
            }
        };
        // The entry's types are the program's input types (checked when it was inserted).
        let stage = entry.stage.get();
        let values = stage.program.get().run(py, tensors)?;
        stage.answer(py, values)
    }

    fn __get__<'py>(
        slf: &Bound<'py, Self>,
        instance: &Bound<'py, PyAny>,
        _owner: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        // A method: bound to its instance as functions are.
        if instance.is_none() {
            return Ok(slf.clone().into_any());
        }
        let types = py_types(slf.py())?;
        types.call1((slf, instance))
    }
}

fn py_types(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    py.import("types")?.getattr("MethodType")
}
