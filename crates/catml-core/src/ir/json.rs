//! LensIR JSON: `{"format": "lensir-module/1", "inputs": [..], "parameters": [..], "nodes": [..],
//! "outputs": [..]}`. Reading validates through a [`Builder`] and reports every violation.

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::primitive::Attrs;
use super::validate::{ValidationError, ValidationErrors};
use super::{Builder, InputKind, Program, Registry, Var};
use crate::tensor::{DType, Shape, TensorType};

/// The format tag written and accepted. A node's optional `body` (a nested program) needs no
/// new version: every file without one reads as before.
pub const FORMAT: &str = "lensir-module/1";

/// How deep bodies may nest (a body inside a body inside ...): a module nested deeper is
/// refused.
pub const MAX_BODY_DEPTH: usize = 8;

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ModuleJson {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) format: Option<String>,
    pub(crate) inputs: Vec<InputJson>,
    #[serde(default)]
    pub(crate) parameters: Vec<String>,
    pub(crate) nodes: Vec<NodeJson>,
    pub(crate) outputs: Vec<String>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct InputJson {
    pub(crate) name: String,
    pub(crate) shape: Vec<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) dtype: Option<DType>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct NodeJson {
    pub(crate) name: String,
    pub(crate) op: String,
    #[serde(default)]
    pub(crate) operands: Vec<String>,
    #[serde(default, skip_serializing_if = "Attrs::is_empty")]
    pub(crate) attrs: Attrs,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) tag: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) body: Option<Box<ModuleJson>>,
}

/// Parses and validates a LensIR module.
pub fn from_str(text: &str, registry: &Registry) -> Result<Program, ValidationErrors> {
    let mut de = serde_json::Deserializer::from_str(text);
    let module: ModuleJson =
        serde_path_to_error::deserialize(&mut de).map_err(|e| ValidationError::Json {
            path: json_path(e.path()),
            message: super::suggest::serde_message(&e.into_inner().to_string()),
        })?;
    de.end().map_err(|e| ValidationError::Json {
        path: "module".to_string(),
        message: e.to_string(),
    })?;
    build(module, registry)
}

/// A JSON path like `nodes[0].op`, without the segments the parser could not name (a syntax
/// error inside an object has an unknown last key); `module` for the top level.
fn json_path(path: &serde_path_to_error::Path) -> String {
    use serde_path_to_error::Segment;
    let mut out = String::new();
    for segment in path.iter() {
        match segment {
            Segment::Seq { index } => out.push_str(&format!("[{index}]")),
            Segment::Map { key: name } | Segment::Enum { variant: name } => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(name);
            }
            Segment::Unknown => {}
        }
    }
    if out.is_empty() {
        "module".to_string()
    } else {
        out
    }
}

/// Why an input's shape is invalid.
enum BadShape {
    /// A dimension that is not a positive integer (as written).
    Dim(String),
    /// The element count overflows.
    TooLarge,
}

/// A shape as written in JSON, with the dimensions separated like `Shape`'s display.
fn shape_text(dims: &[Value]) -> String {
    let dims: Vec<String> = dims.iter().map(Value::to_string).collect();
    format!("[{}]", dims.join(", "))
}

fn parse_shape(dims: &[Value]) -> Result<Shape, BadShape> {
    let mut out = Vec::with_capacity(dims.len());
    for d in dims {
        match d.as_u64().filter(|&n| n > 0) {
            Some(n) => out.push(usize::try_from(n).map_err(|_| BadShape::TooLarge)?),
            None => return Err(BadShape::Dim(d.to_string())),
        }
    }
    let shape = Shape::new(out);
    match shape.checked_numel() {
        Some(_) => Ok(shape),
        None => Err(BadShape::TooLarge),
    }
}

pub(crate) fn build(m: ModuleJson, registry: &Registry) -> Result<Program, ValidationErrors> {
    build_at(m, registry, 0)
}

/// A node's body as a program, its errors placed under `nodes[index].body`.
fn build_body(
    body: ModuleJson,
    registry: &Registry,
    depth: usize,
    index: usize,
    name: &str,
) -> Result<Program, ValidationError> {
    if depth >= MAX_BODY_DEPTH {
        return Err(ValidationError::BodyTooDeep {
            index,
            name: name.to_string(),
            max: MAX_BODY_DEPTH,
        });
    }
    build_at(body, registry, depth + 1).map_err(|e| ValidationError::Body { index, errors: e.0 })
}

fn build_at(
    mut m: ModuleJson,
    registry: &Registry,
    depth: usize,
) -> Result<Program, ValidationErrors> {
    let mut errors = Vec::new();
    if let Some(f) = &m.format {
        if f != FORMAT {
            errors.push(ValidationError::Format { found: f.clone() });
        }
    }
    // Each node's body: absent, built, or refused (the node is then not built either).
    let mut bodies: Vec<Result<Option<Program>, ()>> = Vec::with_capacity(m.nodes.len());
    for (index, node) in m.nodes.iter_mut().enumerate() {
        bodies.push(match node.body.take() {
            None => Ok(None),
            Some(body) => match build_body(*body, registry, depth, index, &node.name) {
                Ok(p) => Ok(Some(p)),
                Err(e) => {
                    errors.push(e);
                    Err(())
                }
            },
        });
    }

    // Where each name is first defined, to tell duplicates and use-before-definition apart.
    let mut first_def: HashMap<&str, String> = HashMap::new();
    let mut node_pos: HashMap<&str, usize> = HashMap::new();
    for (i, n) in m.nodes.iter().enumerate() {
        node_pos.entry(n.name.as_str()).or_insert(i);
    }
    let input_names: HashSet<&str> = m.inputs.iter().map(|i| i.name.as_str()).collect();
    let mut params = HashSet::new();
    for (index, p) in m.parameters.iter().enumerate() {
        if !input_names.contains(p.as_str()) {
            errors.push(ValidationError::ParamNotInput {
                index,
                name: p.clone(),
            });
        } else if !params.insert(p.as_str()) {
            errors.push(ValidationError::ParamTwice {
                index,
                name: p.clone(),
            });
        }
    }

    let mut b = Builder::new();
    // Names whose definition was rejected: their uses are not reported again.
    let mut poisoned: HashSet<&str> = HashSet::new();
    for (index, input) in m.inputs.iter().enumerate() {
        let place = format!("inputs[{index}]");
        if let Some(first) = first_def.get(input.name.as_str()) {
            errors.push(ValidationError::Duplicate {
                place,
                name: input.name.clone(),
                first: first.clone(),
            });
            continue;
        }
        first_def.insert(&input.name, place);
        let shape = match parse_shape(&input.shape) {
            Ok(s) => s,
            Err(bad) => {
                let shape = shape_text(&input.shape);
                errors.push(match bad {
                    BadShape::Dim(dim) => ValidationError::InvalidDim {
                        index,
                        name: input.name.clone(),
                        dim,
                        shape,
                    },
                    BadShape::TooLarge => ValidationError::TooManyElements {
                        index,
                        name: input.name.clone(),
                        shape,
                        max: Shape::MAX_NUMEL,
                    },
                });
                poisoned.insert(&input.name);
                continue;
            }
        };
        let kind = if params.contains(input.name.as_str()) {
            InputKind::Param
        } else {
            InputKind::Data
        };
        let ty = TensorType::new(input.dtype.unwrap_or(DType::F64), shape);
        b.input(&input.name, ty, kind)
            .expect("name and shape checked above");
    }

    for (index, node) in m.nodes.iter().enumerate() {
        let place = format!("nodes[{index}]");
        if let Some(first) = first_def.get(node.name.as_str()) {
            errors.push(ValidationError::Duplicate {
                place,
                name: node.name.clone(),
                first: first.clone(),
            });
            continue;
        }
        first_def.insert(&node.name, place);
        let mut operands = Vec::with_capacity(node.operands.len());
        let mut ok = true;
        for operand in &node.operands {
            if let Some(v) = b.lookup(operand) {
                operands.push(v);
                continue;
            }
            ok = false;
            if poisoned.contains(operand.as_str()) {
                continue;
            }
            errors.push(match node_pos.get(operand.as_str()) {
                Some(&defined_at) if !input_names.contains(operand.as_str()) => {
                    ValidationError::UseBeforeDef {
                        index,
                        name: node.name.clone(),
                        operand: operand.clone(),
                        defined_at,
                    }
                }
                _ => ValidationError::UnknownOperand {
                    index,
                    name: node.name.clone(),
                    operand: operand.clone(),
                },
            });
        }
        let Ok(body) = bodies[index].clone() else {
            poisoned.insert(&node.name);
            continue;
        };
        let prim = match registry.construct_with_body(&node.op, &node.attrs, body) {
            None => {
                errors.push(ValidationError::UnknownPrimitive {
                    index,
                    name: node.name.clone(),
                    op: node.op.clone(),
                    suggestion: super::suggest::nearest(&node.op, registry.names())
                        .map(str::to_string),
                });
                None
            }
            Some(Err(source)) => {
                errors.push(ValidationError::Type {
                    index,
                    name: node.name.clone(),
                    op: node.op.clone(),
                    source,
                });
                None
            }
            Some(Ok(p)) => Some(p),
        };
        let applied = match prim {
            Some(prim) if ok => {
                b.set_tag(node.tag.clone());
                match b.apply_named(&node.name, prim, &operands) {
                    Ok(_) => true,
                    Err(super::BuildError::Type { source, .. }) => {
                        errors.push(ValidationError::Type {
                            index,
                            name: node.name.clone(),
                            op: node.op.clone(),
                            source,
                        });
                        false
                    }
                    Err(e) => unreachable!("names are checked before applying: {e}"),
                }
            }
            _ => false,
        };
        if !applied {
            poisoned.insert(&node.name);
        }
    }

    let mut outputs = Vec::with_capacity(m.outputs.len());
    if m.outputs.is_empty() {
        errors.push(ValidationError::NoOutputs);
    }
    for (index, name) in m.outputs.iter().enumerate() {
        match b.lookup(name) {
            Some(v) => outputs.push(v),
            None if poisoned.contains(name.as_str()) => {}
            None => errors.push(ValidationError::UnknownOutput {
                index,
                name: name.clone(),
            }),
        }
    }
    if !errors.is_empty() {
        return Err(ValidationErrors(errors));
    }
    Ok(b.finish(&outputs).expect("outputs checked above"))
}

/// A program as the LensIR module structure (bodies included, no format tag).
pub(crate) fn module_json(p: &Program) -> ModuleJson {
    ModuleJson {
        format: None,
        inputs: p.inputs().iter().map(input_json).collect(),
        parameters: p
            .param_indices()
            .iter()
            .map(|&i| p.inputs()[i].name.clone())
            .collect(),
        nodes: p.nodes().iter().map(|n| node_json(p, n)).collect(),
        outputs: p.outputs().iter().map(|&o| p.name(o).to_string()).collect(),
    }
}

fn input_json(i: &super::Input) -> InputJson {
    InputJson {
        name: i.name.clone(),
        shape: i.ty.dims().iter().map(|&d| Value::from(d)).collect(),
        dtype: Some(i.ty.dtype),
    }
}

fn node_json(p: &Program, n: &super::Node) -> NodeJson {
    NodeJson {
        name: n.name.clone(),
        op: n.prim.name().to_string(),
        operands: n.operands.iter().map(|&o| p.name(o).to_string()).collect(),
        attrs: n.prim.attrs(),
        tag: n.tag.clone(),
        body: n.prim.body().map(|b| Box::new(module_json(b))),
    }
}

/// Whether any node of `p` holds a nested program.
pub fn has_bodies(p: &Program) -> bool {
    p.nodes().iter().any(|n| n.prim.body().is_some())
}

/// Writes a program as a LensIR module (pretty-printed, one node per line; a node's body is
/// written whole on its node's line).
pub fn to_string(p: &Program) -> String {
    let inputs: Vec<String> = p
        .inputs()
        .iter()
        .map(|i| serde_json::to_string(&input_json(i)).expect("serialisable"))
        .collect();
    let params: Vec<String> = p
        .param_indices()
        .iter()
        .map(|&i| serde_json::to_string(&p.inputs()[i].name).expect("serialisable"))
        .collect();
    let nodes: Vec<String> = p
        .nodes()
        .iter()
        .map(|n| serde_json::to_string(&node_json(p, n)).expect("serialisable"))
        .collect();
    let outputs: Vec<String> = p
        .outputs()
        .iter()
        .map(|&o| serde_json::to_string(p.name(o)).expect("serialisable"))
        .collect();
    let list = |items: &[String]| {
        if items.is_empty() {
            "[]".to_string()
        } else {
            format!("[\n    {}\n  ]", items.join(",\n    "))
        }
    };
    format!(
        "{{\n  \"format\": \"{FORMAT}\",\n  \"inputs\": {},\n  \"parameters\": [{}],\n  \"nodes\": {},\n  \"outputs\": [{}]\n}}\n",
        list(&inputs),
        params.join(", "),
        list(&nodes),
        outputs.join(", ")
    )
}

/// The value each output name refers to, for callers that address outputs by name.
pub fn output_names(p: &Program) -> Vec<(String, Var)> {
    p.outputs()
        .iter()
        .map(|&o| (p.name(o).to_string(), o))
        .collect()
}
