//! ONNX export: a CatML program (or its reverse- or forward-mode derivative program) as an ONNX
//! `ModelProto`. Every primitive maps onto ONNX operators through its family's mapping
//! (`elementwise`, `structural`, `linalg`, `reduce`, `nn`); a primitive without one is written
//! as its lowering into smaller primitives (`Primitive::lower`), recursively; a primitive with
//! neither is an error naming the node. Parameters with values become initializers (also listed
//! as graph inputs, so a runtime may override them); constants are `Constant` nodes.
//!
//! Names: graph inputs are the program's inputs under their own names; graph outputs are its
//! output occurrences as [`Program::output_names`] gives them. Derivative programs
//! ([`export_vjp`], [`export_jvp`]) follow the contract written in `ONNX.md`: seeds `seed.<k>`,
//! gradients `grad.<input>`, tangent inputs `tangent.<input>`, tangent outputs `tangent.<k>`.
//!
//! ```
//! use catml_core::ir::{Builder, InputKind};
//! use catml_core::prim::Ops;
//! use catml_core::tensor::{DType, Params, TensorType};
//!
//! let mut b = Builder::new();
//! let x = b.input("x", TensorType::new(DType::F32, [2, 3]), InputKind::Data).unwrap();
//! let y = b.softmax(x, 1).unwrap();
//! let p = b.finish(&[y]).unwrap();
//! let e = catml_onnx::export(&p, &Params::new(), &catml_onnx::ExportOptions::default()).unwrap();
//! let g = e.model.graph.as_ref().unwrap();
//! assert_eq!(g.node[0].op_type, "Softmax");
//! assert_eq!(g.output[0].name, p.output_names()[0]);
//! ```

mod elementwise;
mod families;
mod graph;
mod linalg;
mod nn;
mod proto_build;
mod reduce;
mod special;
mod structural;
mod write;

use std::collections::BTreeMap;

use catml_core::ad;
use catml_core::ir::Program;
use catml_core::prim::names;
use catml_core::tensor::{Params, TensorType};

use crate::proto::{GraphProto, ModelProto, OperatorSetIdProto};
use graph::{emit_program, Graph};
use proto_build::{tensor_proto, value_info};

pub use write::write_model;

/// The default-domain opsets the exporter writes (LayerNormalization needs 17, ReduceMax
/// with axes as an input 18; onnxruntime 1.31 runs up to 23).
pub const MIN_EXPORT_OPSET: i64 = 18;
pub const MAX_EXPORT_OPSET: i64 = 23;
/// The opset written unless asked otherwise.
pub const DEFAULT_EXPORT_OPSET: i64 = 21;

/// Primitives with no ONNX mapping and no lowering: a program holding one is refused with
/// [`ExportError::Unexportable`]. Random draws follow CatML's counter-based generator, which no
/// ONNX operator computes; `per_example` is a batching construct that `vmap` removes; `scan`
/// (and `unpack`, which reads it) would need ONNX's `Scan`, not written yet.
pub const NOT_EXPORTED: &[&str] = &[
    names::DROPOUT,
    names::RANDOM_UNIFORM,
    names::RANDOM_NORMAL,
    names::RANDOM_SPLIT,
    names::RANDOM_FOLD_IN,
    names::PER_EXAMPLE,
    names::SCAN,
    names::UNPACK,
];

/// How to export.
#[derive(Debug, Clone)]
pub struct ExportOptions {
    pub opset: i64,
}

impl Default for ExportOptions {
    fn default() -> ExportOptions {
        ExportOptions {
            opset: DEFAULT_EXPORT_OPSET,
        }
    }
}

/// Why a program could not be exported. Nothing is written on error.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ExportError {
    /// A node's primitive has no ONNX mapping and no lowering (or its lowering failed).
    #[error("node {index} `{name}` ({op}): cannot be exported: {why}")]
    Unexportable {
        index: usize,
        name: String,
        op: String,
        why: String,
    },
    /// The opset asked for is outside what the exporter writes.
    #[error("opset {opset} is not supported for export (supported: {MIN_EXPORT_OPSET} to {MAX_EXPORT_OPSET})")]
    Opset { opset: i64 },
    /// A parameter's value does not fit its declared type.
    #[error("parameter `{name}`: value has type {found}, the program declares {expected}")]
    Param {
        name: String,
        expected: TensorType,
        found: TensorType,
    },
    /// Two graph inputs or outputs would share a name.
    #[error("graph {what} name `{name}` is used twice; rename the input or output")]
    NameClash { name: String, what: &'static str },
    /// The derivative program could not be built.
    #[error("{0}")]
    Derivative(String),
    /// The file could not be written.
    #[error("cannot write {path}: {reason}")]
    Write { path: String, reason: String },
}

/// An exported model and what the export did.
#[derive(Debug, Clone)]
pub struct Exported {
    pub model: ModelProto,
    /// Primitives written as their lowering (no ONNX operator for them, or not for these
    /// attributes), with how many applications.
    pub lowered: BTreeMap<String, usize>,
    /// Primitives written as ONNX operators, with how many applications.
    pub native: BTreeMap<String, usize>,
}

/// Exports `p`; parameters found in `params` become initializers.
pub fn export(p: &Program, params: &Params, opts: &ExportOptions) -> Result<Exported, ExportError> {
    let inputs: Vec<String> = p.inputs().iter().map(|i| i.name.clone()).collect();
    export_named(p, params, opts, &inputs, &output_names(p))
}

/// The reverse-mode program of `p` (`ad::vjp`): inputs are `p`'s inputs, then `seed.<k>` per
/// output occurrence; outputs are `p`'s outputs, then `grad.<input>` per float input.
pub fn export_vjp(
    p: &Program,
    params: &Params,
    opts: &ExportOptions,
) -> Result<Exported, ExportError> {
    let v = ad::vjp(p).map_err(|e| ExportError::Derivative(e.to_string()))?;
    let l = &v.layout;
    let q = &v.program;
    let mut inputs: Vec<Option<String>> = vec![None; q.n_inputs()];
    for (i, input) in p.inputs().iter().enumerate() {
        inputs[i] = Some(input.name.clone());
    }
    for (k, &s) in l.seeds.iter().enumerate() {
        inputs[s] = Some(format!("seed.{k}"));
    }
    let mut outputs: Vec<Option<String>> = vec![None; q.outputs().len()];
    for (k, name) in output_names(p).into_iter().enumerate() {
        outputs[k] = Some(name);
    }
    for g in &l.gradients {
        outputs[g.index] = Some(format!("grad.{}", g.name));
    }
    let (inputs, outputs) = complete(inputs, outputs, "reverse-mode")?;
    export_named(q, params, opts, &inputs, &outputs)
}

/// The forward-mode program of `p` (`ad::jvp`): inputs are `p`'s inputs, then
/// `tangent.<input>` per float input; outputs are `p`'s outputs, then `tangent.<k>` per output
/// occurrence.
pub fn export_jvp(
    p: &Program,
    params: &Params,
    opts: &ExportOptions,
) -> Result<Exported, ExportError> {
    let j = ad::jvp(p).map_err(|e| ExportError::Derivative(e.to_string()))?;
    let l = &j.layout;
    let q = &j.program;
    let mut inputs: Vec<Option<String>> = vec![None; q.n_inputs()];
    for (i, input) in p.inputs().iter().enumerate() {
        inputs[i] = Some(input.name.clone());
    }
    for t in &l.tangent_inputs {
        inputs[t.index] = Some(format!("tangent.{}", t.name));
    }
    let mut outputs: Vec<Option<String>> = vec![None; q.outputs().len()];
    let n = l.n_primal_outputs();
    for (k, name) in output_names(p).into_iter().enumerate() {
        outputs[k] = Some(name);
    }
    for k in 0..l.tangents.len() {
        outputs[n + k] = Some(format!("tangent.{k}"));
    }
    let (inputs, outputs) = complete(inputs, outputs, "forward-mode")?;
    export_named(q, params, opts, &inputs, &outputs)
}

/// The graph output names of `p`'s output occurrences: [`Program::output_names`], where a
/// repeated output's `<name>.<k>` that another value already has takes the next free `k`.
pub fn output_names(p: &Program) -> Vec<String> {
    let mut taken: std::collections::HashSet<String> =
        p.inputs().iter().map(|i| i.name.clone()).collect();
    let mut first: std::collections::HashSet<catml_core::ir::Var> = Default::default();
    for &o in p.outputs() {
        if o.index() >= p.n_inputs() {
            taken.insert(p.name(o).to_string());
        }
    }
    let mut names = Vec::new();
    for (k, name) in p.output_names().into_iter().enumerate() {
        let o = p.outputs()[k];
        let own = p.name(o).to_string();
        let name = if first.insert(o) {
            own
        } else {
            let mut n = name;
            let mut j = 1;
            while taken.contains(&n) {
                n = format!("{own}.{j}");
                j += 1;
            }
            n
        };
        taken.insert(name.clone());
        names.push(name);
    }
    names
}

/// Every slot named, or the derivative program has a part the layout does not describe.
fn complete(
    inputs: Vec<Option<String>>,
    outputs: Vec<Option<String>>,
    mode: &str,
) -> Result<(Vec<String>, Vec<String>), ExportError> {
    let all = |v: Vec<Option<String>>, what: &str| {
        v.into_iter()
            .enumerate()
            .map(|(k, n)| {
                n.ok_or_else(|| {
                    ExportError::Derivative(format!(
                        "the {mode} program's {what} {k} has no place in its layout"
                    ))
                })
            })
            .collect::<Result<Vec<_>, _>>()
    };
    Ok((all(inputs, "input")?, all(outputs, "output")?))
}

/// The ONNX IR version that goes with an opset (onnx's `helper.VERSION_TABLE`).
fn ir_version(opset: i64) -> i64 {
    match opset {
        ..=18 => 8,
        19 | 20 => 9,
        21 | 22 => 10,
        _ => 11,
    }
}

/// Exports `p` with these graph input and output names (one per input, one per output
/// occurrence).
fn export_named(
    p: &Program,
    params: &Params,
    opts: &ExportOptions,
    inputs: &[String],
    outputs: &[String],
) -> Result<Exported, ExportError> {
    if !(MIN_EXPORT_OPSET..=MAX_EXPORT_OPSET).contains(&opts.opset) {
        return Err(ExportError::Opset { opset: opts.opset });
    }
    let mut g = Graph::new(opts.opset);
    for name in inputs {
        if !g.reserve(name) {
            return Err(ExportError::NameClash {
                name: name.clone(),
                what: "input",
            });
        }
    }
    for (k, name) in outputs.iter().enumerate() {
        // An output that is an input, under the input's own name, is that graph input.
        let o = p.outputs()[k];
        let is_that_input = o.index() < p.n_inputs() && inputs[o.index()] == *name;
        let repeated = outputs[..k].contains(name);
        if repeated || (!is_that_input && !g.reserve(name)) {
            return Err(ExportError::NameClash {
                name: name.clone(),
                what: "output",
            });
        }
    }
    emit_program(&mut g, p, inputs, outputs, "", None, 0)?;
    let mut initializer = Vec::new();
    for (i, input) in p.inputs().iter().enumerate() {
        if input.kind != catml_core::ir::InputKind::Param {
            continue;
        }
        let Some(t) = params.get(&input.name) else {
            continue;
        };
        if t.ty() != input.ty {
            return Err(ExportError::Param {
                name: input.name.clone(),
                expected: input.ty.clone(),
                found: t.ty(),
            });
        }
        initializer.push(tensor_proto(&inputs[i], t));
    }
    let graph = GraphProto {
        name: "catml".to_string(),
        node: std::mem::take(&mut g.nodes),
        initializer,
        input: p
            .inputs()
            .iter()
            .zip(inputs)
            .map(|(i, n)| value_info(n, &i.ty))
            .collect(),
        output: p
            .outputs()
            .iter()
            .zip(outputs)
            .map(|(&o, n)| value_info(n, p.ty(o)))
            .collect(),
        ..Default::default()
    };
    let model = ModelProto {
        ir_version: ir_version(opts.opset),
        opset_import: vec![OperatorSetIdProto {
            domain: String::new(),
            version: opts.opset,
        }],
        producer_name: "catml".to_string(),
        producer_version: env!("CARGO_PKG_VERSION").to_string(),
        graph: Some(graph),
        ..Default::default()
    };
    Ok(Exported {
        model,
        lowered: g.lowered,
        native: g.native,
    })
}
