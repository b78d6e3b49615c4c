use std::collections::BTreeMap;

use catml::ad;
use catml::interp::{self, order_inputs_named};
use catml::ir::{json, listing, InputKind, Program};
use catml::tensor::{Tensor, TensorType};
use catml::transform;
use serde::Serialize;
use serde_json::{json, Value};

use crate::io::{is_onnx, read_json, read_module, read_onnx, read_tensor_map};
use crate::output::render;
use crate::{Command, ParamArgs};

type Result<T> = std::result::Result<T, String>;

/// The inputs in declaration order, each of its declared type; errors name the inputs file.
/// (Checked here, before any derived program sees them, so grad and jvp report `p`'s types.)
fn ordered_inputs(
    p: &Program,
    named: &BTreeMap<String, Tensor>,
    path: &std::path::Path,
) -> Result<Vec<Tensor>> {
    let args = order_inputs_named(p, named).map_err(|e| {
        let hint = match &e {
            interp::EvalError::ExtraInput { name } => {
                catml::ir::suggest::did_you_mean(name, p.inputs().iter().map(|i| i.name.as_str()))
            }
            _ => String::new(),
        };
        format!("{}{hint}", in_file(path, e))
    })?;
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

/// `p` batched by `catml print --vmap IN_AXES --vmap-size N`, every output batched in front.
fn batched(p: &Program, spec: &str, size: usize) -> Result<Program> {
    let in_axes = transform::parse_axes(spec).map_err(|e| format!("--vmap `{spec}`: {e}"))?;
    let out_axes = vec![Some(0); p.outputs().len()];
    transform::vmap(p, size, &in_axes, &out_axes).map_err(|e| format!("--vmap `{spec}`: {e}"))
}

/// `catml cost --grad --checkpoint POLICY`: the cost of the VJP program under the policy, with
/// the plain VJP program's peak live bytes, flops and residual bytes beside it.
fn checkpointed_cost(p: &Program, module: &std::path::Path, policy: &str) -> Result<String> {
    let parsed: ad::CheckpointPolicy = policy.parse().map_err(|e| format!("--checkpoint: {e}"))?;
    let plain = ad::vjp(p).map_err(|e| in_file(module, e))?;
    let kept = ad::vjp_with(p, &parsed).map_err(|e| in_file(module, e))?;
    let (without, with) = (interp::cost(&plain.program), interp::cost(&kept.program));
    let mut v = serde_json::to_value(&with).expect("serialisable");
    v["residual_bytes"] = kept.residual_bytes().into();
    v["checkpoint"] = json!({
        "policy": parsed.to_string(),
        "peak_live_bytes_without": without.peak_live_bytes,
        "flops_without": without.flops,
        "residual_bytes_without": plain.residual_bytes(),
    });
    Ok(to_text(&v))
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

/// The tangent outputs under the JVP program's names (`tangent.<output>`, after the ONNX output
/// names when given).
fn tangents_json(program_names: &[String], values: &[Tensor], names: Option<&[String]>) -> Value {
    let names: Vec<String> = match names {
        Some(n) => n.iter().map(|o| format!("tangent.{o}")).collect(),
        None => program_names.to_vec(),
    };
    let named: Vec<NamedTensor> = names
        .iter()
        .zip(values)
        .map(|(name, tensor)| NamedTensor { name, tensor })
        .collect();
    serde_json::to_value(named).expect("serialisable")
}

/// A program, its named inputs, and (for an ONNX model) its output names.
type ModuleInputs = (Program, BTreeMap<String, Tensor>, Option<Vec<String>>);

/// A module and the named inputs a command evaluates it on, with the parameters of `--params`.
/// For an ONNX model, the input shapes come from the inputs file (binding symbolic dimensions)
/// and every initializer `--params` does not give comes from the model.
fn module_and_inputs(
    module: &std::path::Path,
    inputs: &std::path::Path,
    params: &ParamArgs,
) -> Result<ModuleInputs> {
    if !is_onnx(module) {
        let p = read_module(module)?;
        let named = inputs_with_params(&p, inputs, params)?;
        return Ok((p, named, None));
    }
    let given = read_tensor_map(inputs)?;
    let shapes: catml_onnx::Shapes = given
        .iter()
        .map(|(k, t)| (k.clone(), t.dims().to_vec()))
        .collect();
    let m = read_onnx(module, &shapes)?;
    for name in m.params.iter().map(|(n, _)| n) {
        if given.contains_key(name) {
            return Err(format!(
                "{}: `{name}` is an initializer of the model, not a graph input",
                inputs.display()
            ));
        }
    }
    let mut named = inputs_with_params(&m.program, inputs, params)?;
    for (name, t) in m.params.iter() {
        named.entry(name.to_string()).or_insert_with(|| t.clone());
    }
    Ok((m.program, named, Some(m.outputs)))
}

fn options(allow_non_finite: bool) -> interp::EvalOptions {
    interp::EvalOptions {
        check_non_finite: !allow_non_finite,
        ..interp::EvalOptions::default()
    }
}

/// An evaluation error in `module`, with the way past the memory budget when that stopped it.
fn eval_failed(module: &std::path::Path, e: interp::EvalError) -> String {
    format!("{}{}", in_file(module, &e), budget_hint(&e))
}

/// `; raise it with --max-memory` when `e` or an error behind it is the memory budget's refusal.
pub fn budget_hint(e: &(dyn std::error::Error + 'static)) -> &'static str {
    let mut at = Some(e);
    while let Some(e) = at {
        if let Some(interp::EvalError::OverBudget { .. }) = e.downcast_ref() {
            return "; raise it with --max-memory";
        }
        at = e.source();
    }
    ""
}

fn to_text(v: &Value) -> String {
    render(v, true)
}

/// The inputs file's tensors, with the parameters of `--params` added; an input given in both
/// is an error.
fn inputs_with_params(
    p: &Program,
    inputs: &std::path::Path,
    params: &ParamArgs,
) -> Result<BTreeMap<String, Tensor>> {
    let mut named = read_tensor_map(inputs)?;
    for (name, t) in module_params(p, params)? {
        if named.contains_key(&name) {
            return Err(format!(
                "input `{name}` is given both in {} and in {}; give each input once",
                inputs.display(),
                params.params.as_ref().expect("params given").display()
            ));
        }
        named.insert(name, t);
    }
    Ok(named)
}

/// The parameters `--params` supplies (none without it).
pub(crate) fn module_params(p: &Program, params: &ParamArgs) -> Result<Vec<(String, Tensor)>> {
    let Some(path) = &params.params else {
        return Ok(Vec::new());
    };
    let store =
        catml::train::module_params(path, p, params.arrow.as_deref()).map_err(|e| e.to_string())?;
    Ok(store
        .iter()
        .map(|(n, t)| (n.to_string(), t.clone()))
        .collect())
}

/// Per tag: its parameters' names, their element count and the 2-norm of their gradients.
fn tag_summaries(p: &Program, grads: &[(usize, &Tensor)]) -> Value {
    let mut by_tag: BTreeMap<String, (Vec<String>, usize, f64)> = BTreeMap::new();
    for &(i, g) in grads {
        if p.inputs()[i].kind != InputKind::Param {
            continue;
        }
        let tag = p.tag_of(p.input_var(i)).unwrap_or("untagged").to_string();
        let e = by_tag.entry(tag).or_default();
        e.0.push(p.inputs()[i].name.clone());
        e.1 += g.numel();
        e.2 += g.to_f64_vec().iter().map(|x| x * x).sum::<f64>();
    }
    by_tag
        .into_iter()
        .map(|(tag, (names, elements, sq))| {
            let summary = json!({"parameters": names, "elements": elements,
                                 "gradient_norm": sq.sqrt()});
            (tag, summary)
        })
        .collect::<serde_json::Map<String, Value>>()
        .into()
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
            vmap,
            vmap_size,
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
            let shown = match (vmap, vmap_size) {
                (Some(spec), Some(size)) => {
                    batched(&shown, &spec, size).map_err(|e| in_file(&module, e))?
                }
                _ => shown,
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
        Command::Cost {
            module,
            grad,
            checkpoint,
            params,
        } => {
            let p = read_module(&module)?;
            // Cost depends on types alone: the parameters are only checked against the module.
            module_params(&p, &params)?;
            if let Some(policy) = checkpoint {
                return checkpointed_cost(&p, &module, &policy);
            }
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
            params,
            pretty,
            allow_non_finite,
            memory,
        } => {
            catml::interp::set_memory_budget(memory.max_memory);
            let (p, named, names) = module_and_inputs(&module, &inputs, &params)?;
            let args = ordered_inputs(&p, &named, &inputs)?;
            let values = interp::eval_with_options(&p, &args, options(allow_non_finite))
                .map_err(|e| eval_failed(&module, e))?;
            Ok(render(
                &json!({ "outputs": outputs_json(&p, &values, names.as_deref()) }),
                pretty,
            ))
        }
        Command::Grad {
            module,
            inputs,
            cotangents,
            params,
            pretty,
            allow_non_finite,
            memory,
        } => {
            catml::interp::set_memory_budget(memory.max_memory);
            let (p, named, names) = module_and_inputs(&module, &inputs, &params)?;
            let mut args = ordered_inputs(&p, &named, &inputs)?;
            let seeds: Vec<Tensor> = match cotangents {
                None => p
                    .output_types()
                    .iter()
                    .map(|t| Tensor::full(t, 1.0))
                    .collect(),
                Some(path) => {
                    let seeds: Vec<Tensor> =
                        read_json(&path, "a JSON array with one tensor per output")?;
                    check_seeds(&p, &seeds)?;
                    seeds
                }
            };
            args.extend(seeds);
            let v = ad::vjp(&p).map_err(|e| in_file(&module, e))?;
            let (values, report) =
                interp::eval_with_report_options(&v.program, &args, options(allow_non_finite))
                    .map_err(|e| eval_failed(&module, e))?;
            let mut gradients = serde_json::Map::new();
            let mut grads = Vec::new();
            for g in &v.layout.gradients {
                let t = serde_json::to_value(&values[g.index]).expect("serialisable");
                grads.push((g.input, &values[g.index]));
                gradients.insert(g.name.clone(), t);
            }
            let conventions: Vec<Value> = report
                .conventions
                .iter()
                .map(|c| json!({"node": c.name, "op": c.op, "convention": c.convention, "elements": c.elements}))
                .collect();
            Ok(render(
                &json!({
                    "outputs": outputs_json(&p, v.layout.primal_outputs(&values), names.as_deref()),
                    "gradients": gradients,
                    "gradients_by_tag": tag_summaries(&p, &grads),
                    "conventions": conventions,
                    "residuals": v.layout.residuals.iter().map(|r| json!({
                        "name": r.name, "dtype": r.ty.dtype, "shape": r.ty.dims(), "bytes": r.bytes(),
                        "kind": if r.is_input { "input" } else { "forward value" },
                    })).collect::<Vec<_>>(),
                    "residual_bytes": v.residual_bytes(),
                }),
                pretty,
            ))
        }
        Command::Dot { module, grad } => crate::dot::run(&module, grad),
        Command::Jvp {
            module,
            inputs,
            tangents,
            params,
            pretty,
            allow_non_finite,
            memory,
        } => {
            catml::interp::set_memory_budget(memory.max_memory);
            let (p, named, names) = module_and_inputs(&module, &inputs, &params)?;
            let mut args = ordered_inputs(&p, &named, &inputs)?;
            let tangent_map = read_tensor_map(&tangents)?;
            let j = ad::jvp(&p).map_err(|e| in_file(&module, e))?;
            // The file names tangents as the JVP program does: `tangent.<input>`.
            let slots: Vec<(&str, &catml::ir::Input)> = j
                .layout
                .tangent_inputs
                .iter()
                .map(|s| {
                    (
                        j.program.inputs()[s.index].name.as_str(),
                        &p.inputs()[s.input],
                    )
                })
                .collect();
            if let Some(extra) = tangent_map
                .keys()
                .find(|k| slots.iter().all(|(name, _)| name != k))
            {
                // A tangent keyed by the plain input name is the likeliest slip.
                let prefixed = format!("tangent.{extra}");
                let hint = if slots.iter().any(|(n, _)| *n == prefixed) {
                    format!(" (did you mean `{prefixed}`?)")
                } else {
                    catml::ir::suggest::did_you_mean(extra, slots.iter().map(|(n, _)| *n))
                };
                return Err(format!(
                    "{}: unknown tangent `{extra}`{hint}",
                    tangents.display()
                ));
            }
            for (name, input) in &slots {
                let t = match tangent_map.get(*name) {
                    Some(t) if t.ty() != input.ty => {
                        return Err(format!(
                            "{}: `{name}` has type {}, expected {}",
                            tangents.display(),
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
                .map_err(|e| eval_failed(&module, e))?;
            let (primal, tangent) = (j.layout.primal_outputs(&values), j.layout.tangents(&values));
            Ok(render(
                &json!({
                    "outputs": outputs_json(&p, primal, names.as_deref()),
                    "tangents": tangents_json(&j.layout.tangents, tangent, names.as_deref()),
                }),
                pretty,
            ))
        }
        Command::Train {
            spec,
            resume,
            quiet,
            memory,
        } => {
            catml::interp::set_memory_budget(memory.max_memory);
            crate::train::run(&spec, resume, quiet)
        }
        Command::Verify {
            seed,
            quick,
            output,
            smoke,
        } => crate::verify::run(seed, quick, smoke, &output),
        Command::Export {
            module,
            onnx,
            train_step,
            opset,
            grad,
            jvp,
            params,
        } => match (train_step, onnx) {
            (Some(out), _) => crate::export::train_step(&module, &out, opset),
            (None, Some(out)) => crate::export::run(&module, &out, opset, grad, jvp, &params),
            (None, None) => Err("export needs --onnx OUT.onnx or --train-step OUT.onnx".into()),
        },
        Command::Ops {
            name,
            json,
            markdown,
        } => ops(name.as_deref(), json, markdown),
    }
}

/// `catml ops`: the registry's catalog as text, JSON or the Markdown page.
fn ops(name: Option<&str>, json: bool, markdown: bool) -> Result<String> {
    use catml::prim::{builtins, catalog};
    let r = builtins();
    if markdown {
        return Ok(catalog::markdown(r));
    }
    let ops = match name {
        None => catalog::catalog(r),
        Some(n) => match catalog::describe(r, n) {
            Some(op) => vec![op],
            None => {
                let hint = catml::ir::suggest::nearest(n, r.names())
                    .map(|s| format!(" (did you mean `{s}`?)"))
                    .unwrap_or_default();
                return Err(format!("no primitive `{n}`{hint}"));
            }
        },
    };
    if json {
        return Ok(serde_json::to_string_pretty(&ops).map_err(|e| e.to_string())? + "\n");
    }
    let mut text = String::new();
    for op in ops {
        text.push_str(&op.name);
        if let Some(f) = &op.formula {
            text.push_str(&format!(": {f}"));
        }
        text.push('\n');
        for a in &op.attrs {
            let d = a
                .default
                .as_ref()
                .map(|d| format!(" = {d}"))
                .unwrap_or_default();
            text.push_str(&format!("  attr {}: {}{d}\n", a.name, a.ty));
        }
        if let Some(d) = &op.domain {
            text.push_str(&format!("  domain: {d}\n"));
        }
        let rule = match &op.convention {
            Some(c) => format!("{}: {c}", op.rule),
            None => op.rule.clone(),
        };
        text.push_str(&format!(
            "  rule: {rule}; exact eval: {}; fragment: {}\n",
            if op.exact_eval { "yes" } else { "no" },
            op.fragment
        ));
    }
    Ok(text)
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
