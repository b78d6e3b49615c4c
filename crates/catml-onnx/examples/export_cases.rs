//! Writes the generator's random programs, their reverse-mode and forward-mode programs, as
//! ONNX models with inputs and CatML's outputs, for `scripts/check_export.py` to run in
//! onnxruntime.
//!
//! `cargo run --release -p catml-onnx --example export_cases -- OUT_DIR [--programs N]
//! [--seed S] [--opset N]`
//!
//! For program k and mode m (`fwd`, `vjp`, `jvp`) it writes:
//! - `k-m.onnx` and `k-m.json`: the whole program, its inputs by graph input name and CatML's
//!   outputs;
//! - `k-m.nodes.onnx` and `k-m.nodes.json`: every node of the program alone, reading its actual
//!   operands (as CatML computed them) as graph inputs, with the f64 reference of each node on
//!   those operands and the node's allowed error per element from its primitive's f32 budget
//!   (`Primitive::f32_budget`, as the verification bundle applies it; for f64 nodes the same
//!   model at f64's unit roundoff), or null where the budget is measured only.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use catml_core::ad;
use catml_core::interp;
use catml_core::ir::budget::{ETA32, U32};
use catml_core::ir::{Budget, BudgetSite, Builder, InputKind, Node, Program, Var};
use catml_core::tensor::{DType, Params, Tensor, TensorType};
use catml_onnx::{export, export_jvp, export_vjp, ExportOptions, Exported};
use catml_verify::verify::generate::{generate, random_inputs, GenConfig};
use prost::Message;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{json, Value};

fn main() {
    if let Err(e) = run() {
        eprintln!("export_cases: {e}");
        std::process::exit(1);
    }
}

fn arg<T: std::str::FromStr>(args: &[String], name: &str, default: T) -> Result<T, String> {
    match args.iter().position(|a| a == name) {
        None => Ok(default),
        Some(i) => args
            .get(i + 1)
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| format!("{name} needs a number")),
    }
}

fn run() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let out = PathBuf::from(
        args.first()
            .ok_or("usage: export_cases OUT_DIR [--programs N] [--seed S] [--opset N]")?,
    );
    let n: usize = arg(&args, "--programs", 1000)?;
    let seed: u64 = arg(&args, "--seed", 14)?;
    let opset: i64 = arg(&args, "--opset", catml_onnx::DEFAULT_EXPORT_OPSET)?;
    std::fs::create_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    let opts = ExportOptions { opset };
    let prims: Vec<String> = GenConfig::default()
        .prims
        .into_iter()
        .filter(|n| !catml_onnx::NOT_EXPORTED.contains(&n.as_str()))
        .collect();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut lowered: BTreeMap<String, usize> = BTreeMap::new();
    let mut native: BTreeMap<String, usize> = BTreeMap::new();
    for k in 0..n {
        let dtype = if k % 2 == 0 { DType::F32 } else { DType::F64 };
        let cfg = GenConfig {
            n_nodes: rng.random_range(2..=16),
            dtype,
            prims: prims.clone(),
            ..GenConfig::default()
        };
        let s = rng.random::<u64>();
        let p = generate(&cfg, s).map_err(|e| format!("program {k}: {e}"))?;
        let x = random_inputs(&p, &mut ChaCha8Rng::seed_from_u64(s));
        let mut params = Params::new();
        for (i, v) in p.inputs().iter().zip(&x) {
            if i.kind == InputKind::Param {
                params.insert(i.name.clone(), v.clone());
            }
        }
        for mode in ["fwd", "vjp", "jvp"] {
            let (q, qx, e) = derived(&p, &x, &params, &opts, mode)
                .map_err(|e| format!("program {k} {mode}: {e}"))?;
            for (n, c) in &e.lowered {
                *lowered.entry(n.clone()).or_default() += c;
            }
            for (n, c) in &e.native {
                *native.entry(n.clone()).or_default() += c;
            }
            let stem = out.join(format!("{k:04}-{mode}"));
            write_whole(&stem, &q, &qx, &e, k, mode, s)?;
            write_nodes(&stem, &q, &qx, &opts)?;
        }
    }
    let summary =
        json!({"programs": n, "seed": seed, "opset": opset, "lowered": lowered, "native": native});
    std::fs::write(
        out.join("summary.json"),
        serde_json::to_string_pretty(&summary).unwrap(),
    )
    .map_err(|e| e.to_string())?;
    println!("{}", serde_json::to_string(&summary).unwrap());
    Ok(())
}

/// The program of `mode`, its arguments (seeds and tangents made up), and its export.
fn derived(
    p: &Program,
    x: &[Tensor],
    params: &Params,
    opts: &ExportOptions,
    mode: &str,
) -> Result<(Program, Vec<Tensor>, Exported), String> {
    let pattern = |ty: &TensorType, k: usize| {
        let d = (0..ty.numel())
            .map(|j| 1.0 - 0.125 * ((j + 3 * k) % 7) as f64)
            .collect();
        Tensor::from_f64s(ty.dtype, ty.shape.clone(), d).expect("numel")
    };
    let mut qx = x.to_vec();
    Ok(match mode {
        "fwd" => (
            p.clone(),
            qx,
            export(p, params, opts).map_err(|e| e.to_string())?,
        ),
        "vjp" => {
            let v = ad::vjp(p).map_err(|e| e.to_string())?;
            for (k, ty) in p.output_types().iter().enumerate() {
                qx.push(pattern(ty, k));
            }
            (
                v.program,
                qx,
                export_vjp(p, params, opts).map_err(|e| e.to_string())?,
            )
        }
        _ => {
            let j = ad::jvp(p).map_err(|e| e.to_string())?;
            for (k, s) in j.layout.tangent_inputs.iter().enumerate() {
                qx.push(pattern(&p.inputs()[s.input].ty, k));
            }
            (
                j.program,
                qx,
                export_jvp(p, params, opts).map_err(|e| e.to_string())?,
            )
        }
    })
}

fn tensor_json(t: &Tensor) -> Value {
    serde_json::to_value(t).expect("serialisable")
}

fn write(path: &Path, bytes: &[u8]) -> Result<(), String> {
    std::fs::write(path, bytes).map_err(|e| format!("{}: {e}", path.display()))
}

fn with_ext(stem: &Path, ext: &str) -> PathBuf {
    PathBuf::from(format!("{}{ext}", stem.display()))
}

fn write_whole(
    stem: &Path,
    q: &Program,
    qx: &[Tensor],
    e: &Exported,
    k: usize,
    mode: &str,
    seed: u64,
) -> Result<(), String> {
    let want = interp::eval(q, qx).map_err(|e| e.to_string())?;
    let g = e.model.graph.as_ref().expect("graph");
    let inputs: serde_json::Map<String, Value> = g
        .input
        .iter()
        .zip(qx)
        .map(|(i, t)| (i.name.clone(), tensor_json(t)))
        .collect();
    let outputs: Vec<Value> = g
        .output
        .iter()
        .zip(&want)
        .map(|(o, t)| json!({"name": o.name, "value": tensor_json(t)}))
        .collect();
    let f32_inside = q.inputs().iter().any(|i| i.ty.dtype == DType::F32)
        || q.nodes().iter().any(|n| n.ty.dtype == DType::F32);
    write(&with_ext(stem, ".onnx"), &e.model.encode_to_vec())?;
    let doc = json!({"program": k, "mode": mode, "seed": seed, "f32_inside": f32_inside,
                     "lowered": e.lowered.keys().collect::<Vec<_>>(),
                     "inputs": inputs, "outputs": outputs});
    write(&with_ext(stem, ".json"), doc.to_string().as_bytes())
}

/// Every var's value.
fn all_values(q: &Program, qx: &[Tensor]) -> Result<Vec<Tensor>, String> {
    let b = Builder::from_program(q);
    let all: Vec<Var> = (0..q.n_vars())
        .map(|i| {
            if i < q.n_inputs() {
                q.input_var(i)
            } else {
                q.node_var(i - q.n_inputs())
            }
        })
        .collect();
    let w = b.finish(&all).map_err(|e| e.to_string())?;
    interp::eval(&w, qx).map_err(|e| e.to_string())
}

fn widened(t: &Tensor) -> Tensor {
    match t.dtype() {
        DType::F32 => {
            Tensor::from_f64s(DType::F64, t.shape().clone(), t.to_f64_vec()).expect("same shape")
        }
        _ => t.clone(),
    }
}

/// `node`'s primitive alone on operands of these types.
fn single(node: &Node, types: &[TensorType]) -> Result<Program, String> {
    let mut b = Builder::new();
    let xs: Vec<Var> = types
        .iter()
        .enumerate()
        .map(|(i, ty)| b.input(&format!("x{i}"), ty.clone(), InputKind::Data))
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    let y = b.apply(node.prim.clone(), &xs).map_err(|e| e.to_string())?;
    b.finish(&[y]).map_err(|e| e.to_string())
}

/// The allowed error per element of one application at f32 (`None`: measured only).
fn allowed(node: &Node, ops64: &[Tensor], y64: &[f64]) -> Result<Option<Vec<f64>>, String> {
    let types: Vec<TensorType> = ops64.iter().map(Tensor::ty).collect();
    let b = node.prim.f32_budget(&types, &node.ty);
    Ok(match &b {
        Budget::Exact => Some(vec![0.0; y64.len()]),
        Budget::Relative(c) => Some(y64.iter().map(|y| c * U32 * y.abs() + c * ETA32).collect()),
        Budget::Sum { terms, signed } => {
            let abs64: Vec<Tensor> = ops64
                .iter()
                .enumerate()
                .map(|(i, o)| {
                    if signed.contains(&i) || !o.dtype().is_float() {
                        o.clone()
                    } else {
                        o.map_f64(f64::abs)
                    }
                })
                .collect();
            let k = *terms as f64;
            let gamma = k * U32 / (1.0 - k * U32);
            let s = interp::eval(&single(node, &types)?, &abs64).map_err(|e| e.to_string())?;
            Some(
                s[0].to_f64_vec()
                    .iter()
                    .map(|s| gamma * s + k * ETA32)
                    .collect(),
            )
        }
        Budget::Formula(f, _) => {
            let site = BudgetSite {
                dims: ops64.iter().map(|o| o.dims().to_vec()).collect(),
                ops: ops64.iter().map(Tensor::to_f64_vec).collect(),
                y: y64,
            };
            Some(f(&site))
        }
        Budget::Measured => None,
    })
}

/// Every node with operands, alone, on its actual operands; the reference and allowed error.
fn write_nodes(
    stem: &Path,
    q: &Program,
    qx: &[Tensor],
    opts: &ExportOptions,
) -> Result<(), String> {
    let values = all_values(q, qx)?;
    let mut b = Builder::new();
    let mut args: Vec<Tensor> = Vec::new();
    let mut outs: Vec<Var> = Vec::new();
    let mut checks: Vec<Value> = Vec::new();
    for (i, node) in q.nodes().iter().enumerate() {
        if node.operands.is_empty() {
            continue;
        }
        let mut xs = Vec::new();
        for (j, o) in node.operands.iter().enumerate() {
            let v = b
                .input(&format!("n{i}.{j}"), q.ty(*o).clone(), InputKind::Data)
                .map_err(|e| e.to_string())?;
            xs.push(v);
            args.push(values[o.index()].clone());
        }
        let y = b.apply(node.prim.clone(), &xs).map_err(|e| e.to_string())?;
        outs.push(y);
        let ops64: Vec<Tensor> = node
            .operands
            .iter()
            .map(|o| widened(&values[o.index()]))
            .collect();
        let types64: Vec<TensorType> = ops64.iter().map(Tensor::ty).collect();
        let y64 = interp::eval(&single(node, &types64)?, &ops64).map_err(|e| e.to_string())?;
        let yv = y64[0].to_f64_vec();
        let mut allow = allowed(node, &ops64, &yv)?;
        // f64 nodes: the same model at f64's unit roundoff.
        if node.ty.dtype == DType::F64 && node.operands.iter().all(|o| q.ty(*o).dtype != DType::F32)
        {
            let scale = DType::F64.unit_roundoff() / U32;
            allow = allow.map(|a| a.iter().map(|v| v * scale).collect());
        }
        checks.push(
            json!({"node": node.name, "op": node.prim.name(), "dtype": node.ty.dtype,
                           "reference": yv, "allowed": allow}),
        );
    }
    if outs.is_empty() {
        return Ok(());
    }
    let split = b.finish(&outs).map_err(|e| e.to_string())?;
    let e = export(&split, &Params::new(), opts).map_err(|e| format!("nodes: {e}"))?;
    let g = e.model.graph.as_ref().expect("graph");
    let inputs: serde_json::Map<String, Value> = g
        .input
        .iter()
        .zip(&args)
        .map(|(i, t)| (i.name.clone(), tensor_json(t)))
        .collect();
    for (c, o) in checks.iter_mut().zip(&g.output) {
        c["name"] = o.name.clone().into();
    }
    write(&with_ext(stem, ".nodes.onnx"), &e.model.encode_to_vec())?;
    let doc = json!({"inputs": inputs, "checks": checks});
    write(&with_ext(stem, ".nodes.json"), doc.to_string().as_bytes())
}
