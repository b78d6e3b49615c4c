//! `catml export`: a module, or its derivative program, written as an ONNX model.

use std::path::Path;

use catml::tensor::Params;
use catml_onnx::Exported;
use serde_json::{json, Map, Value};

use crate::commands::module_params;
use crate::io::{given_shapes, is_onnx, read_module, read_onnx};
use crate::output::render;
use crate::ParamArgs;

/// Exports and writes the model; prints what was written.
pub fn run(
    module: &Path,
    out: &Path,
    opset: i64,
    grad: bool,
    jvp: bool,
    params: &ParamArgs,
) -> Result<String, String> {
    // The module's own parameter values (an ONNX model's initializers), then `--params`.
    let (p, mut values) = if is_onnx(module) {
        let m = read_onnx(module, &given_shapes())?;
        (m.program, m.params)
    } else {
        (read_module(module)?, Params::new())
    };
    for (name, t) in module_params(&p, params)? {
        values.insert(name, t);
    }
    let opts = catml_onnx::ExportOptions { opset };
    let exported = if grad {
        catml_onnx::export_vjp(&p, &values, &opts)
    } else if jvp {
        catml_onnx::export_jvp(&p, &values, &opts)
    } else {
        catml_onnx::export(&p, &values, &opts)
    }
    .map_err(|e| format!("{}: {e}", module.display()))?;
    let mut report = write(&exported, out, opset)?;
    let g = exported
        .model
        .graph
        .as_ref()
        .expect("export writes a graph");
    let initialized: Vec<&str> = g.initializer.iter().map(|t| t.name.as_str()).collect();
    let missing: Vec<&str> = p
        .param_indices()
        .iter()
        .map(|&i| p.inputs()[i].name.as_str())
        .filter(|n| !initialized.contains(n))
        .collect();
    report.insert("initializers".into(), json!(initialized));
    report.insert("parameters_without_values".into(), json!(missing));
    Ok(render(&Value::Object(report), true))
}

/// Writes the model and describes it: the file, opset, node count, graph inputs and outputs,
/// and the primitives written as their lowerings.
fn write(exported: &Exported, out: &Path, opset: i64) -> Result<Map<String, Value>, String> {
    catml_onnx::write_model(&exported.model, out).map_err(|e| e.to_string())?;
    let g = exported
        .model
        .graph
        .as_ref()
        .expect("export writes a graph");
    let names = |v: &[catml_onnx::proto::ValueInfoProto]| -> Vec<String> {
        v.iter().map(|i| i.name.clone()).collect()
    };
    let mut report = Map::new();
    report.insert("written".into(), json!(out.display().to_string()));
    report.insert("opset".into(), json!(opset));
    report.insert("nodes".into(), json!(g.node.len()));
    report.insert("inputs".into(), json!(names(&g.input)));
    report.insert("outputs".into(), json!(names(&g.output)));
    report.insert("lowered".into(), json!(exported.lowered));
    Ok(report)
}

/// `catml export SPEC.toml --train-step OUT.onnx`: the spec's whole training step as one
/// model, its starting parameters as initializers; prints what was written.
pub fn train_step(spec: &Path, out: &Path, opset: i64) -> Result<String, String> {
    let (step, start) = catml::train::TrainStep::of_spec(spec).map_err(|e| e.to_string())?;
    let opts = catml_onnx::ExportOptions { opset };
    let exported = catml_onnx::export(step.program(), &start, &opts)
        .map_err(|e| format!("{}: training step: {e}", spec.display()))?;
    let mut report = write(&exported, out, opset)?;
    report.insert("parameters".into(), json!(step.param_names()));
    let state: Vec<&str> = step.buffer_names().chain(["step"]).collect();
    report.insert("state".into(), json!(state));
    Ok(render(&Value::Object(report), true))
}
