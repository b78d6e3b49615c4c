//! The importer: walks the graph's nodes in order and emits each through its operator's mapping
//! onto CatML primitives. Values computed only from constants are folded at import time, so
//! shape-computing subgraphs disappear and the program stays fully typed.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;

use catml_core::interp;
use catml_core::ir::{Builder, InputKind, Program, Var};
use catml_core::tensor::{DType, Params, TensorType};

use crate::ctx::{Ctx, Value};
use crate::domains::Opsets;
use crate::konst::{dtype_of, elem, Const};
use crate::proto::{type_proto, GraphProto, ModelProto, ValueInfoProto};
use crate::read::read_tensor;
use crate::{ops, storage, OnnxError};

/// The oldest and newest default-domain opsets the importer reads (onnx 1.23.2 knows 28).
pub const MIN_OPSET: i64 = 7;
pub const MAX_OPSET: i64 = 28;

/// Shapes for graph inputs with symbolic or unknown dimensions, by input name.
pub type Shapes = BTreeMap<String, Vec<usize>>;

/// An imported model: a program, its initializers as parameters, and the ONNX names.
#[derive(Debug, Clone)]
pub struct Imported {
    /// Inputs: the graph inputs (data) in graph order, then one parameter per float
    /// initializer the graph reads, named as in the model.
    pub program: Program,
    /// The initializers' values, keyed by their ONNX names.
    pub params: Params,
    /// The graph outputs' ONNX names, in program output order.
    pub outputs: Vec<String>,
}

/// The default-domain opset a model imports.
pub fn opset_of(model: &ModelProto) -> Result<i64, OnnxError> {
    let mut found = None;
    for (i, o) in model.opset_import.iter().enumerate() {
        if o.domain.is_empty() || o.domain == "ai.onnx" {
            found = Some((i, o.version));
        }
    }
    let unsupported = |what: String| OnnxError::Unsupported {
        index: 0,
        name: String::new(),
        op: "model.opset_import".to_string(),
        what,
    };
    let (i, v) =
        found.ok_or_else(|| unsupported("no opset of the default domain (ai.onnx)".to_string()))?;
    if !(MIN_OPSET..=MAX_OPSET).contains(&v) {
        return Err(unsupported(format!(
            "opset_import[{i}]: opset {v} (supported: {MIN_OPSET} to {MAX_OPSET})"
        )));
    }
    Ok(v)
}

/// Values bound to graph inputs at import time, by input name.
pub type Bound = BTreeMap<String, Const>;

/// Imports a model; `shapes` binds symbolic input dimensions, `dir` is where external tensor
/// data lives (the model's folder).
pub fn import(
    model: &ModelProto,
    shapes: &Shapes,
    dir: Option<&Path>,
) -> Result<Imported, OnnxError> {
    import_bound(model, shapes, &Bound::new(), dir)
}

/// `import` with some graph inputs bound to values: they become constants of the program (not
/// inputs), so what they feed (axes, shapes, integer arithmetic) folds at import. The program
/// is then specialised to those values.
pub fn import_bound(
    model: &ModelProto,
    shapes: &Shapes,
    bound: &Bound,
    dir: Option<&Path>,
) -> Result<Imported, OnnxError> {
    let mut imp = Importer::new(model, shapes, bound, dir)?;
    let graph = model.graph.as_ref().expect("decode_model checks the graph");
    for (index, node) in graph.node.iter().enumerate() {
        imp.node(index, node)?;
    }
    imp.finish(graph)
}

/// Every node the importer cannot take (unsupported operators, attributes, dtypes), all at once.
/// Nodes downstream of an unsupported one are checked by operator name only.
pub fn unsupported_nodes(
    model: &ModelProto,
    shapes: &Shapes,
    dir: Option<&Path>,
) -> Result<Vec<OnnxError>, OnnxError> {
    let mut imp = Importer::new(model, shapes, &Bound::new(), dir)?;
    let graph = model.graph.as_ref().expect("decode_model checks the graph");
    let mut found = Vec::new();
    let mut poisoned: HashSet<&str> = HashSet::new();
    for (index, node) in graph.node.iter().enumerate() {
        let downstream = node.input.iter().any(|i| poisoned.contains(i.as_str()));
        let result = if downstream {
            ops::check_known(index, node, &imp.opsets)
        } else {
            imp.node(index, node)
        };
        if let Err(e) = result {
            if !e.is_unsupported() {
                return Err(e);
            }
            found.push(e);
            poisoned.extend(node.output.iter().map(String::as_str));
        } else if downstream {
            poisoned.extend(node.output.iter().map(String::as_str));
        }
    }
    Ok(found)
}

struct Importer<'m> {
    b: Builder,
    values: HashMap<String, Value>,
    /// Known values of initializers that became parameters (for operands read statically).
    known: HashMap<Var, Const>,
    /// The opsets the model imports (default domain and others).
    opsets: Opsets,
    params: Params,
    /// Graph inputs of dtypes the tensor layer does not hold (usable only when bound).
    unheld: Vec<(usize, String, i32)>,
    /// Program values of storage dtypes and their widened conversions.
    widened: HashMap<Var, Var>,
    _model: &'m ModelProto,
}

fn value_type(v: &ValueInfoProto, field: &str) -> Result<(i32, Vec<Option<usize>>), OnnxError> {
    let Some(type_proto::Value::TensorType(t)) = v.r#type.as_ref().and_then(|t| t.value.as_ref())
    else {
        return Err(OnnxError::Unsupported {
            index: 0,
            name: v.name.clone(),
            op: "graph input".to_string(),
            what: format!("{field}: only tensor-typed inputs and outputs are supported"),
        });
    };
    let dims = match &t.shape {
        None => {
            return Err(OnnxError::field(
                format!("{field}.type.tensor_type.shape"),
                "is missing; give the input's shape",
            ))
        }
        Some(s) => s
            .dim
            .iter()
            .map(|d| match d.value {
                Some(crate::proto::tensor_shape_proto::dimension::Value::DimValue(n)) if n > 0 => {
                    Some(n as usize)
                }
                _ => None,
            })
            .collect(),
    };
    Ok((t.elem_type, dims))
}

impl<'m> Importer<'m> {
    fn new(
        model: &'m ModelProto,
        shapes: &Shapes,
        bound: &Bound,
        dir: Option<&Path>,
    ) -> Result<Importer<'m>, OnnxError> {
        let opsets = crate::domains::opsets_of(model)?;
        let graph: &GraphProto = model
            .graph
            .as_ref()
            .ok_or_else(|| OnnxError::field("model.graph", "is missing"))?;
        let mut imp = Importer {
            b: Builder::new(),
            values: HashMap::new(),
            known: HashMap::new(),
            opsets,
            params: Params::new(),
            unheld: Vec::new(),
            widened: HashMap::new(),
            _model: model,
        };
        let init_names: HashSet<&str> = graph.initializer.iter().map(|t| t.name.as_str()).collect();
        if let Some(name) = bound
            .keys()
            .find(|n| !graph.input.iter().any(|i| &i.name == *n))
        {
            return Err(OnnxError::Input {
                name: name.clone(),
                message: "a value was bound but the graph has no such input".to_string(),
            });
        }
        if let Some(name) = shapes
            .keys()
            .find(|n| !graph.input.iter().any(|i| &i.name == *n))
        {
            return Err(OnnxError::Input {
                name: name.clone(),
                message: "a shape was given but the graph has no such input".to_string(),
            });
        }
        for (i, input) in graph.input.iter().enumerate() {
            if init_names.contains(input.name.as_str()) {
                continue;
            }
            let field = format!("graph.input[{i}]");
            if let Some(c) = bound.get(&input.name) {
                imp.values
                    .insert(input.name.clone(), Value::Const(Arc::new(c.clone())));
                continue;
            }
            if input.name.is_empty() {
                return Err(OnnxError::field(format!("{field}.name"), "is empty"));
            }
            let given = shapes.get(&input.name);
            let (code, dims) = match (value_type(input, &field), given) {
                (Ok(t), _) => t,
                (Err(OnnxError::Field { .. }), Some(g)) => {
                    (elem::FLOAT, g.iter().map(|&d| Some(d)).collect())
                }
                (Err(e), _) => return Err(e),
            };
            let Some(dtype) = dtype_of(code) else {
                // Kept out of the program; an error if a node reads it without a bound value.
                imp.unheld.push((i, input.name.clone(), code));
                continue;
            };
            if let Some(g) = given.filter(|g| g.contains(&0) && g.len() == dims.len()) {
                // A zero-sized input has one possible value, known from its type: it imports
                // as that constant (what reads it must accept an empty value).
                if dims.iter().zip(g).all(|(d, &n)| d.is_none_or(|d| d == n)) {
                    let c = if elem::is_integer(code) {
                        Const::ints(code, g.clone(), Vec::new())
                    } else {
                        Const::floats(code, g.clone(), Vec::new())
                    };
                    imp.values
                        .insert(input.name.clone(), Value::Const(Arc::new(c)));
                    continue;
                }
            }
            let dims = bind_dims(&input.name, &dims, given)?;
            if imp.values.contains_key(&input.name) {
                return Err(OnnxError::field(
                    field,
                    format!("duplicate name `{}`", input.name),
                ));
            }
            let ty = TensorType::new(dtype, dims);
            let v =
                imp.b
                    .input(&input.name, ty, InputKind::Data)
                    .map_err(|e| OnnxError::Input {
                        name: input.name.clone(),
                        message: e.to_string(),
                    })?;
            imp.values.insert(input.name.clone(), Value::Var(v));
        }
        for (i, t) in graph.initializer.iter().enumerate() {
            let field = format!("graph.initializer[{i}]");
            if t.name.is_empty() {
                return Err(OnnxError::field(format!("{field}.name"), "is empty"));
            }
            if imp.values.contains_key(&t.name) {
                return Err(OnnxError::field(
                    format!("{field}.name"),
                    format!("duplicate name `{}`", t.name),
                ));
            }
            let c = read_tensor(t, &field, dir)?;
            imp.values.insert(t.name.clone(), Value::Const(Arc::new(c)));
        }
        if !graph.sparse_initializer.is_empty() {
            return Err(OnnxError::field(
                "graph.sparse_initializer",
                "sparse initializers are not supported",
            ));
        }
        Ok(imp)
    }

    /// The value of an operand name: float initializers become parameters at their first use
    /// by a node that is not folded.
    fn node(&mut self, index: usize, node: &crate::proto::NodeProto) -> Result<(), OnnxError> {
        let mut inputs = Vec::with_capacity(node.input.len());
        for name in &node.input {
            if name.is_empty() {
                inputs.push(None);
                continue;
            }
            if let Some((i, _, code)) = self.unheld.iter().find(|u| &u.1 == name) {
                if !self.values.contains_key(name) {
                    return Err(OnnxError::Unsupported {
                        index: *i,
                        name: name.clone(),
                        op: "graph input".to_string(),
                        what: format!(
                            "dtype {} is not held by the CatML tensor layer",
                            elem::name(*code)
                        ),
                    });
                }
            }
            let v = self.values.get(name).cloned().ok_or_else(|| OnnxError::Node {
                index,
                name: node.name.clone(),
                op: node.op_type.clone(),
                message: format!(
                    "input `{name}` is not defined before this node (undefined, or the graph is not in topological order or has a cycle)"
                ),
            })?;
            inputs.push(Some(v));
        }
        for (k, out) in node.output.iter().enumerate() {
            if !out.is_empty() && (self.values.contains_key(out) || node.output[..k].contains(out))
            {
                return Err(OnnxError::Node {
                    index,
                    name: node.name.clone(),
                    op: node.op_type.clone(),
                    message: format!("output `{out}` is defined twice"),
                });
            }
        }
        let (op, version) = ops::lookup(index, node, &self.opsets)?;
        // Float initializers are parameters: never folded away, so they get gradients.
        for (slot, name) in inputs.iter_mut().zip(&node.input) {
            if let Some(Value::Const(c)) = slot {
                if c.is_float() && self.is_initializer_name(name) {
                    let v = self.param(name, &c.clone())?;
                    *slot = Some(Value::Var(v));
                }
            }
        }
        // Storage dtypes compute widened (`storage.rs`).
        let storage: Vec<Option<DType>> = inputs
            .iter()
            .map(|v| v.as_ref().and_then(|v| storage::storage_dtype(&self.b, v)))
            .collect();
        let node_err = |message: String| OnnxError::Node {
            index,
            name: node.name.clone(),
            op: node.op_type.clone(),
            message,
        };
        for slot in inputs.iter_mut() {
            if let Some(v) = slot.take() {
                *slot = Some(
                    storage::widen(&mut self.b, &mut self.widened, &mut self.known, v)
                        .map_err(node_err)?,
                );
            }
        }
        let all_const = inputs
            .iter()
            .flatten()
            .all(|v| matches!(v, Value::Const(_)));
        let outs = if all_const && !ops::is_random(&node.op_type) {
            self.fold(index, node, op, version, &inputs, &storage)?
        } else {
            // Nodes reading an initializer carry its tag (the name before the first `.`), so
            // the parameter is counted and updated under it.
            let tag = node
                .input
                .iter()
                .filter(|n| self.is_initializer_name(n))
                .find_map(|n| n.split_once('.').map(|(t, _)| t.to_string()));
            let old_tag = self.b.set_tag(tag);
            let mut ctx = Ctx::new(&mut self.b, node, index, version, inputs, &self.known)
                .with_storage(storage.clone());
            let prefix = node.output.first().cloned().unwrap_or_default();
            let old = ctx
                .b
                .set_name_prefix(if prefix.is_empty() { "t" } else { &prefix });
            let outs = op(&mut ctx);
            ctx.b.set_name_prefix(&old);
            self.b.set_tag(old_tag);
            outs?
        };
        let outs = storage::narrow(&mut self.b, node, &storage, outs).map_err(node_err)?;
        for (name, v) in node.output.iter().zip(outs) {
            if !name.is_empty() {
                self.values.insert(name.clone(), v);
            }
        }
        Ok(())
    }

    fn is_initializer_name(&self, name: &str) -> bool {
        self._model
            .graph
            .as_ref()
            .is_some_and(|g| g.initializer.iter().any(|t| t.name == name))
    }

    /// The parameter input of a float initializer (declared once, on first use).
    fn param(&mut self, name: &str, c: &Const) -> Result<Var, OnnxError> {
        if let Some(v) = self.b.lookup(name) {
            return Ok(v);
        }
        let t = c.to_tensor().map_err(|m| OnnxError::Input {
            name: name.to_string(),
            message: m,
        })?;
        let v = self
            .b
            .input(name, t.ty(), InputKind::Param)
            .map_err(|e| OnnxError::Input {
                name: name.to_string(),
                message: e.to_string(),
            })?;
        self.known.insert(v, c.clone());
        self.params.insert(name, t);
        Ok(v)
    }

    /// Runs an operator on known values: natively for integer and shape arithmetic, else as a
    /// small program evaluated now.
    fn fold(
        &mut self,
        index: usize,
        node: &crate::proto::NodeProto,
        op: ops::OpFn,
        opset: i64,
        inputs: &[Option<Value>],
        storage: &[Option<DType>],
    ) -> Result<Vec<Value>, OnnxError> {
        let consts: Vec<Option<Arc<Const>>> = inputs
            .iter()
            .map(|v| match v {
                Some(Value::Const(c)) => Some(c.clone()),
                _ => None,
            })
            .collect();
        if let Some(r) = crate::fold::fold(index, node, opset, &consts) {
            return r.map(|cs| cs.into_iter().map(|c| Value::Const(Arc::new(c))).collect());
        }
        // Integer data of exact data-movement mappings computes in f64 (`ops/int_data.rs`).
        if let Some(floats) = ops::int_data::as_floats(index, node, inputs) {
            let floats = floats?;
            let outs = self.fold_program(index, node, op, opset, &floats, storage)?;
            return ops::int_data::back(index, node, &floats, inputs, outs);
        }
        self.fold_program(index, node, op, opset, inputs, storage)
    }

    /// Runs the mapping on known values as a small program evaluated now.
    fn fold_program(
        &mut self,
        index: usize,
        node: &crate::proto::NodeProto,
        op: ops::OpFn,
        opset: i64,
        inputs: &[Option<Value>],
        storage: &[Option<DType>],
    ) -> Result<Vec<Value>, OnnxError> {
        let mut scratch = Builder::new();
        let no_known = HashMap::new();
        let mut ctx = Ctx::new(&mut scratch, node, index, opset, inputs.to_vec(), &no_known)
            .with_storage(storage.to_vec());
        let outs = op(&mut ctx)?;
        let err = |m: String| OnnxError::Node {
            index,
            name: node.name.clone(),
            op: node.op_type.clone(),
            message: format!("folding constants: {m}"),
        };
        let vars: Vec<Var> = outs
            .iter()
            .filter_map(|v| match v {
                Value::Var(v) => Some(*v),
                Value::Const(_) => None,
            })
            .collect();
        if vars.is_empty() {
            return Ok(outs);
        }
        let p = scratch.finish(&vars).map_err(|e| err(e.to_string()))?;
        // Constants may be infinite (masks of -inf): folding computes what the model does.
        let options = interp::EvalOptions {
            check_non_finite: false,
            ..interp::EvalOptions::default()
        };
        let vals = interp::eval_with_options(&p, &[], options).map_err(|e| err(e.to_string()))?;
        let mut it = vals.into_iter();
        Ok(outs
            .into_iter()
            .map(|v| match v {
                Value::Var(_) => Value::Const(Arc::new(Const::from_tensor(
                    &it.next().expect("one per var"),
                ))),
                c => c,
            })
            .collect())
    }

    fn finish(mut self, graph: &GraphProto) -> Result<Imported, OnnxError> {
        let mut outs = Vec::new();
        let mut names = Vec::new();
        for (i, o) in graph.output.iter().enumerate() {
            let v = self.values.get(&o.name).cloned().ok_or_else(|| {
                OnnxError::field(
                    format!("graph.output[{i}]"),
                    format!("`{}` is not computed by the graph", o.name),
                )
            })?;
            let var = match v {
                Value::Var(v) => v,
                Value::Const(c) => {
                    if c.is_float() && self.is_initializer_name(&o.name) {
                        self.param(&o.name, &c)?
                    } else {
                        let t = c.to_tensor().map_err(|m| OnnxError::Unsupported {
                            index: i,
                            name: o.name.clone(),
                            op: "graph output".to_string(),
                            what: m,
                        })?;
                        let old = self.b.set_name_prefix(&o.name);
                        let v = catml_core::prim::Ops::constant(&mut self.b, t).map_err(|e| {
                            OnnxError::field(format!("graph.output[{i}]"), e.to_string())
                        })?;
                        self.b.set_name_prefix(&old);
                        v
                    }
                }
            };
            outs.push(var);
            names.push(o.name.clone());
        }
        if outs.is_empty() {
            return Err(OnnxError::field("graph.output", "is empty"));
        }
        let program = self
            .b
            .finish(&outs)
            .map_err(|e| OnnxError::field("graph", e.to_string()))?;
        Ok(Imported {
            program,
            params: self.params,
            outputs: names,
        })
    }
}

/// Dimensions of a graph input: declared ones, with unknown ones taken from `given`.
fn bind_dims(
    name: &str,
    declared: &[Option<usize>],
    given: Option<&Vec<usize>>,
) -> Result<Vec<usize>, OnnxError> {
    let err = |m: String| OnnxError::Input {
        name: name.to_string(),
        message: m,
    };
    match given {
        Some(g) => {
            if g.len() != declared.len() {
                return Err(err(format!(
                    "given shape {g:?} has rank {}, the model declares rank {}",
                    g.len(),
                    declared.len()
                )));
            }
            for (k, (d, &n)) in declared.iter().zip(g).enumerate() {
                if let Some(d) = d {
                    if *d != n {
                        return Err(err(format!("given dim {k} is {n}, the model declares {d}")));
                    }
                }
                if n == 0 {
                    return Err(OnnxError::Unsupported {
                        index: 0,
                        name: name.to_string(),
                        op: "graph input".to_string(),
                        what: format!("dim {k} is 0: CatML tensors have positive dims"),
                    });
                }
            }
            Ok(g.clone())
        }
        None => declared
            .iter()
            .enumerate()
            .map(|(k, d)| {
                d.ok_or_else(|| {
                    err(format!(
                        "dim {k} is symbolic or zero; give its shape (NAME=2x3...)"
                    ))
                })
            })
            .collect(),
    }
}
