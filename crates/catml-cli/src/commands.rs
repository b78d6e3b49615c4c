use std::collections::BTreeMap;

use catml::ad;
use catml::interp::{self, order_inputs_named};
use catml::ir::{json, listing, InputKind, Program};
use catml::tensor::{Tensor, TensorType};
use serde::Serialize;
use serde_json::{json, Value};

use crate::io::{is_onnx, read_json, read_module, read_onnx, read_tensor_map};
use crate::Command;

type Result<T> = std::result::Result<T, String>;

/// The inputs in declaration order, each of its declared type; errors name the inputs file.
/// (Checked here, before any derived program sees them, so grad and jvp report `p`'s types.)
fn ordered_inputs(
    p: &Program,
    named: &BTreeMap<String, Tensor>,
    path: &std::path::Path,
) -> Result<Vec<Tensor>> {
    let args = order_inputs_named(p, named).map_err(|e| in_file(path, e))?;
    for (decl, t) in p.inputs().iter().zip(&args) {
        if t.ty() != decl.ty {
            let e = interp::EvalError::InputType {
                name: decl.name.clone(),
                expected: decl.ty.clone(),
                found: t.ty(),
            };
            return Err(in_file(path, e));
        }
    }
    Ok(args)
}

/// An error about the contents of a file, prefixed with its path.
fn in_file(path: &std::path::Path, e: impl std::fmt::Display) -> String {
    format!("{}: {e}", path.display())
}

fn type_json(ty: &TensorType) -> Value {
    json!({"dtype": ty.dtype, "shape": ty.dims()})
}

#[derive(Serialize)]
struct NamedTensor<'a> {
    name: &'a str,
    #[serde(flatten)]
    tensor: &'a Tensor,
}

/// The outputs as named tensors; `names` (an ONNX model's output names) override the
/// program's value names.
fn outputs_json(p: &Program, values: &[Tensor], names: Option<&[String]>) -> Value {
    let named: Vec<NamedTensor> = p
        .outputs()
        .iter()
        .zip(values)
        .enumerate()
        .map(|(k, (&o, t))| NamedTensor {
            name: names
                .and_then(|n| n.get(k))
                .map_or(p.name(o), |s| s.as_str()),
            tensor: t,
        })
        .collect();
    serde_json::to_value(named).expect("serialisable")
}

/// A program, its named inputs, and (for an ONNX model) its output names.
type ModuleInputs = (Program, BTreeMap<String, Tensor>, Option<Vec<String>>);

/// A module and the named inputs a command evaluates it on. For an ONNX model, the input shapes
/// come from the inputs file (binding symbolic dimensions) and the initializers from the model.
fn module_and_inputs(module: &std::path::Path, inputs: &std::path::Path) -> Result<ModuleInputs> {
    let mut named = read_tensor_map(inputs)?;
    if !is_onnx(module) {
        return Ok((read_module(module)?, named, None));
    }
    let shapes: catml_onnx::Shapes = named
        .iter()
        .map(|(k, t)| (k.clone(), t.dims().to_vec()))
        .collect();
    let m = read_onnx(module, &shapes)?;
    for (name, t) in m.params.iter() {
        if named.contains_key(name) {
            return Err(format!(
                "{}: `{name}` is an initializer of the model, not a graph input",
                inputs.display()
            ));
        }
        named.insert(name.to_string(), t.clone());
    }
    Ok((m.program, named, Some(m.outputs)))
}

fn options(allow_non_finite: bool) -> interp::EvalOptions {
    interp::EvalOptions {
        check_non_finite: !allow_non_finite,
    }
}

fn to_text(v: &Value) -> String {
    let mut s = serde_json::to_string_pretty(v).expect("serialisable");
    s.push('\n');
    s
}

pub fn run(command: Command) -> Result<String> {
    match command {
        Command::Check { module } => {
            let p = read_module(&module)?;
            let inputs: Vec<Value> = p
                .inputs()
                .iter()
                .map(|i| {
                    json!({"name": i.name, "dtype": i.ty.dtype, "shape": i.ty.dims(),
                           "kind": if i.kind == InputKind::Param { "parameter" } else { "data" }})
                })
                .collect();
            let params: Vec<&str> = p
                .param_indices()
                .iter()
                .map(|&i| p.inputs()[i].name.as_str())
                .collect();
            let outputs: Vec<Value> = p
                .outputs()
                .iter()
                .map(|&o| json!({"name": p.name(o), "dtype": p.ty(o).dtype, "shape": p.ty(o).dims()}))
                .collect();
            Ok(to_text(
                &json!({"valid": true, "inputs": inputs, "parameters": params,
                               "nodes": p.n_nodes(), "outputs": outputs}),
            ))
        }
        Command::Print {
            module,
            grad,
            jvp,
            json: as_json,
        } => {
            let p = read_module(&module)?;
            let shown = if grad {
                ad::vjp(&p).map_err(|e| in_file(&module, e))?.program
            } else if jvp {
                ad::jvp(&p).map_err(|e| in_file(&module, e))?.program
            } else {
                p
            };
            Ok(if as_json {
                json::to_string(&shown)
            } else {
                listing::print(&shown)
            })
        }
        Command::Shape { module } => {
            let p = read_module(&module)?;
            let types = interp::shape(&p, &p.input_types()).map_err(|e| in_file(&module, e))?;
            let outputs: Vec<Value> = p
                .outputs()
                .iter()
                .zip(&types)
                .map(|(&o, t)| {
                    let mut v = type_json(t);
                    v["name"] = p.name(o).into();
                    v
                })
                .collect();
            Ok(to_text(&json!({ "outputs": outputs })))
        }
        Command::Params { module } => {
            let p = read_module(&module)?;
            Ok(to_text(
                &serde_json::to_value(interp::params(&p)).expect("serialisable"),
            ))
        }
        Command::Cost { module, grad } => {
            let p = read_module(&module)?;
            let p = if grad {
                ad::vjp(&p).map_err(|e| in_file(&module, e))?.program
            } else {
                p
            };
            Ok(to_text(
                &serde_json::to_value(interp::cost(&p)).expect("serialisable"),
            ))
        }
        Command::Eval {
            module,
            inputs,
            allow_non_finite,
        } => {
            let (p, named, names) = module_and_inputs(&module, &inputs)?;
            let args = ordered_inputs(&p, &named, &inputs)?;
            let values = interp::eval_with_options(&p, &args, options(allow_non_finite))
                .map_err(|e| in_file(&module, e))?;
            Ok(to_text(
                &json!({ "outputs": outputs_json(&p, &values, names.as_deref()) }),
            ))
        }
        Command::Grad {
            module,
            inputs,
            cotangents,
            allow_non_finite,
        } => {
            let (p, named, names) = module_and_inputs(&module, &inputs)?;
            let mut args = ordered_inputs(&p, &named, &inputs)?;
            let seeds: Vec<Tensor> = match cotangents {
                None => p
                    .output_types()
                    .iter()
                    .map(|t| Tensor::full(t, 1.0))
                    .collect(),
                Some(path) => {
                    let seeds: Vec<Tensor> = read_json(&path)?;
                    check_seeds(&p, &seeds)?;
                    seeds
                }
            };
            args.extend(seeds);
            let v = ad::vjp(&p).map_err(|e| in_file(&module, e))?;
            let (values, report) =
                interp::eval_with_report_options(&v.program, &args, options(allow_non_finite))
                    .map_err(|e| in_file(&module, e))?;
            let mut gradients = serde_json::Map::new();
            let mut by_tag: BTreeMap<String, serde_json::Map<String, Value>> = BTreeMap::new();
            for (i, g) in v.gradients.iter().enumerate() {
                let Some(k) = g else { continue };
                let name = &p.inputs()[i].name;
                let t = serde_json::to_value(&values[*k]).expect("serialisable");
                if p.inputs()[i].kind == InputKind::Param {
                    let tag = p.tag_of(p.input_var(i)).unwrap_or("untagged").to_string();
                    by_tag
                        .entry(tag)
                        .or_default()
                        .insert(name.clone(), t.clone());
                }
                gradients.insert(name.clone(), t);
            }
            let conventions: Vec<Value> = report
                .conventions
                .iter()
                .map(|c| json!({"node": c.name, "op": c.op, "convention": c.convention, "elements": c.elements}))
                .collect();
            Ok(to_text(&json!({
                "outputs": outputs_json(&p, &values[..v.n_primal_outputs], names.as_deref()),
                "gradients": gradients,
                "gradients_by_tag": by_tag,
                "conventions": conventions,
                "residuals": v.residuals.iter().map(|r| json!({
                    "name": r.name, "dtype": r.ty.dtype, "shape": r.ty.dims(), "bytes": r.bytes(),
                    "kind": if r.is_input { "input" } else { "forward value" },
                })).collect::<Vec<_>>(),
                "residual_bytes": v.residual_bytes(),
            })))
        }
        Command::Dot { module, grad } => crate::dot::run(&module, grad),
        Command::Jvp {
            module,
            inputs,
            tangents,
            allow_non_finite,
        } => {
            let (p, named, names) = module_and_inputs(&module, &inputs)?;
            let mut args = ordered_inputs(&p, &named, &inputs)?;
            let tangent_map = read_tensor_map(&tangents)?;
            let j = ad::jvp(&p).map_err(|e| in_file(&module, e))?;
            if let Some(extra) = tangent_map
                .keys()
                .find(|k| p.var(k).is_none_or(|v| v.index() >= p.n_inputs()))
            {
                return Err(format!("{}: unknown input `{extra}`", tangents.display()));
            }
            for (i, input) in p.inputs().iter().enumerate() {
                if j.tangent_inputs[i].is_none() {
                    continue;
                }
                let t = match tangent_map.get(&input.name) {
                    Some(t) if t.ty() != input.ty => {
                        return Err(format!(
                            "{}: tangent of `{}` has type {}, expected {}",
                            tangents.display(),
                            input.name,
                            t.ty(),
                            input.ty
                        ))
                    }
                    Some(t) => t.clone(),
                    None => Tensor::zeros(&input.ty),
                };
                args.push(t);
            }
            let values = interp::eval_with_options(&j.program, &args, options(allow_non_finite))
                .map_err(|e| in_file(&module, e))?;
            let (primal, tangent) = values.split_at(j.n_primal_outputs);
            Ok(to_text(&json!({
                "outputs": outputs_json(&p, primal, names.as_deref()),
                "tangents": outputs_json(&p, tangent, names.as_deref()),
            })))
        }
        Command::Train {
            spec,
            resume,
            quiet,
        } => crate::train::run(&spec, resume, quiet),
        Command::Verify {
            seed,
            quick,
            output,
            smoke,
        } => crate::verify::run(seed, quick, smoke, &output),
    }
}

fn check_seeds(p: &Program, seeds: &[Tensor]) -> Result<()> {
    if seeds.len() != p.outputs().len() {
        return Err(format!(
            "cotangents: expected {} tensors (one per output occurrence), found {}",
            p.outputs().len(),
            seeds.len()
        ));
    }
    for (k, (s, t)) in seeds.iter().zip(p.output_types()).enumerate() {
        if s.ty() != t {
            return Err(format!(
                "cotangents[{k}]: has type {}, output `{}` has {t}",
                s.ty(),
                p.name(p.outputs()[k])
            ));
        }
    }
    Ok(())
}
