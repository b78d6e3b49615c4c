//! Runs the ONNX backend node tests written by `onnx-suite/generate.py` and prints a table per
//! operator (passed, failed, unsupported) and the totals.
//!
//! `cargo run --release -p catml-onnx --example onnx_suite -- SUITE_DIR [--min N] [--table FILE]
//! [--verbose]`: exits 1 if fewer than N cases pass. Tolerances are the suite's: |got - want| <=
//! atol + rtol |want| with rtol 1e-3, atol 1e-7; NaN matches NaN, infinities match themselves.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use catml_core::interp::{eval_with_options, EvalOptions};
use catml_core::tensor::Tensor;
use catml_onnx::{decode_model, elem, import_bound, read_bytes, read_tensor, Bound, Const, Shapes};
use prost::Message;

const RTOL: f64 = 1e-3;
const ATOL: f64 = 1e-7;

#[derive(Debug)]
enum Outcome {
    Pass,
    /// Passed with the integer inputs bound at import (the program specialised to them).
    PassBound,
    Fail(String),
    Unsupported(String),
}

fn read_pb(path: &Path) -> Result<Const, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let t = catml_onnx::proto::TensorProto::decode(bytes.as_slice())
        .map_err(|e| format!("{}: {e}", path.display()))?;
    read_tensor(&t, &path.display().to_string(), None).map_err(|e| e.to_string())
}

fn numbered(dir: &Path, stem: &str) -> Vec<PathBuf> {
    let mut v = Vec::new();
    for j in 0.. {
        let p = dir.join(format!("{stem}_{j}.pb"));
        if !p.exists() {
            break;
        }
        v.push(p);
    }
    v
}

fn close(got: &[f64], want: &[f64]) -> Option<usize> {
    got.iter().zip(want).position(|(&g, &w)| {
        let ok = if w.is_nan() {
            g.is_nan()
        } else if w.is_infinite() {
            g == w
        } else {
            (g - w).abs() <= ATOL + RTOL * w.abs()
        };
        !ok
    })
}

/// Whether an import failed because an operand must be known at import time.
fn needs_known(e: &catml_onnx::OnnxError) -> bool {
    e.to_string().contains("must be known at import time")
}

fn run_case(dir: &Path) -> Outcome {
    if dir.join("NOT_TENSORS").exists() {
        return Outcome::Unsupported("inputs or outputs are sequences, maps or optionals".into());
    }
    let model = match read_bytes(&dir.join("model.onnx")).and_then(|b| decode_model(&b)) {
        Ok(m) => m,
        Err(e) => return Outcome::Fail(e.to_string()),
    };
    let graph = model.graph.as_ref().expect("decoded");
    let inits: Vec<&str> = graph.initializer.iter().map(|t| t.name.as_str()).collect();
    let data_inputs: Vec<&str> = graph
        .input
        .iter()
        .map(|i| i.name.as_str())
        .filter(|n| !inits.contains(n))
        .collect();
    let mut sets: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|r| {
            r.flatten()
                .map(|e| e.path())
                .filter(|p| p.is_dir())
                .collect()
        })
        .unwrap_or_default();
    sets.sort();
    let mut imported: Option<(Vec<Vec<usize>>, catml_onnx::Imported)> = None;
    let mut bind = false;
    let mut bind_vectors = false;
    for set in &sets {
        let inputs: Vec<Const> = match numbered(set, "input").iter().map(|p| read_pb(p)).collect() {
            Ok(v) => v,
            Err(e) => return Outcome::Unsupported(e),
        };
        let wants: Vec<Const> = match numbered(set, "output").iter().map(|p| read_pb(p)).collect() {
            Ok(v) => v,
            Err(e) => return Outcome::Unsupported(e),
        };
        // One import per input signature.
        let sig: Vec<Vec<usize>> = inputs.iter().map(|c| c.dims.clone()).collect();
        if imported.as_ref().is_none_or(|(s, _)| *s != sig) {
            let shapes: Shapes = data_inputs
                .iter()
                .zip(&inputs)
                .map(|(n, c)| (n.to_string(), c.dims.clone()))
                .collect();
            // Integer inputs (axes, shapes, indices) are bound when the program needs them
            // known, or the tensor layer cannot hold them; every data set then re-imports.
            // Operands an operator needs known (scales, roi) may be float vectors: those are
            // bound too when an import says so.
            let binds = |c: &Const, vectors: bool| !c.is_float() || (vectors && c.dims.len() <= 1);
            let bound: Bound = data_inputs
                .iter()
                .zip(&inputs)
                .filter(|(_, c)| bind && binds(c, bind_vectors))
                .map(|(n, c)| (n.to_string(), c.clone()))
                .collect();
            match import_bound(&model, &shapes, &bound, Some(dir)) {
                Ok(m) => imported = Some((if bind { Vec::new() } else { sig }, m)),
                Err(e)
                    if e.is_unsupported()
                        && !bind
                        && inputs.iter().any(|c| binds(c, needs_known(&e))) =>
                {
                    bind = true;
                    let mut last = e;
                    loop {
                        bind_vectors = bind_vectors || needs_known(&last);
                        let bound: Bound = data_inputs
                            .iter()
                            .zip(&inputs)
                            .filter(|(_, c)| binds(c, bind_vectors))
                            .map(|(n, c)| (n.to_string(), c.clone()))
                            .collect();
                        match import_bound(&model, &shapes, &bound, Some(dir)) {
                            Ok(m) => {
                                imported = Some((Vec::new(), m));
                                break;
                            }
                            Err(e) if e.is_unsupported() && !bind_vectors && needs_known(&e) => {
                                last = e
                            }
                            Err(e) if e.is_unsupported() => {
                                return Outcome::Unsupported(e.to_string())
                            }
                            Err(e) => return Outcome::Fail(format!("import: {e}")),
                        }
                    }
                }
                Err(e) if e.is_unsupported() => return Outcome::Unsupported(e.to_string()),
                Err(e) => return Outcome::Fail(format!("import: {e}")),
            }
        }
        let m = &imported.as_ref().expect("imported").1;
        let mut args: Vec<Tensor> = Vec::new();
        for inp in m.program.inputs() {
            if let Some(t) = m.params.get(&inp.name) {
                args.push(t.clone());
                continue;
            }
            let Some(k) = data_inputs.iter().position(|n| *n == inp.name) else {
                return Outcome::Fail(format!("no value for input `{}`", inp.name));
            };
            match inputs.get(k).map(|c| c.to_tensor()) {
                Some(Ok(t)) => args.push(t),
                Some(Err(e)) => return Outcome::Unsupported(format!("input: {e}")),
                None => return Outcome::Fail(format!("no data for input `{}`", inp.name)),
            }
        }
        let got = match eval_with_options(
            &m.program,
            &args,
            EvalOptions {
                check_non_finite: false,
                ..EvalOptions::default()
            },
        ) {
            Ok(v) => v,
            Err(e) => return Outcome::Fail(format!("eval: {e}")),
        };
        if got.len() != wants.len() {
            return Outcome::Fail(format!("{} outputs, expected {}", got.len(), wants.len()));
        }
        for (k, (g, w)) in got.iter().zip(&wants).enumerate() {
            let g_elem = catml_onnx::elem_code(g.dtype());
            if g_elem != w.elem {
                return Outcome::Fail(format!(
                    "output {k}: dtype {}, expected {}",
                    elem::name(g_elem),
                    elem::name(w.elem)
                ));
            }
            if g.dims() != w.dims.as_slice() {
                return Outcome::Fail(format!(
                    "output {k}: shape {:?}, expected {:?}",
                    g.dims(),
                    w.dims
                ));
            }
            if let Some(i) = close(&g.to_f64_vec(), &w.as_f64s()) {
                return Outcome::Fail(format!(
                    "output {k}: element {i} is {}, expected {}",
                    g.to_f64_vec()[i],
                    w.as_f64s()[i]
                ));
            }
        }
    }
    if bind {
        Outcome::PassBound
    } else {
        Outcome::Pass
    }
}

/// What the derivative checks found for one passing case.
enum GradCheck {
    Passed,
    /// Not differentiable at the suite's inputs; passed at a nearby point.
    PassedNearby,
    Failed(String),
    /// No float input reaches a float output, or an operator on the path declares no rule.
    NotDifferentiable(String),
}

/// A deterministic pseudo-random tensor of `t`'s type with entries in [-1, 1).
fn direction(t: &Tensor, seed: &mut u64) -> Tensor {
    let data: Vec<f64> = (0..t.numel())
        .map(|_| {
            *seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((*seed >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
        })
        .collect();
    Tensor::from_f64s(t.dtype(), t.shape().clone(), data).expect("same shape")
}

fn dot(a: &[Tensor], b: &[Tensor]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x.dot(y)).sum()
}

/// The case promoted to f64: the adjoint identity <vjp(u), v> = <u, jvp(v)> and central
/// differences of <u, f(x + h v)> against <u, jvp(v)>, over every float input and initializer.
fn grad_check(dir: &Path) -> GradCheck {
    use catml_core::ad;
    let Ok(model) = read_bytes(&dir.join("model.onnx")).and_then(|b| decode_model(&b)) else {
        return GradCheck::NotDifferentiable("unreadable".into());
    };
    let model = catml_onnx::promote_to_f64(&model);
    let set = dir.join("test_data_set_0");
    let Ok(inputs) = numbered(&set, "input")
        .iter()
        .map(|p| read_pb(p))
        .collect::<Result<Vec<_>, _>>()
    else {
        return GradCheck::NotDifferentiable("inputs".into());
    };
    let graph = model.graph.as_ref().expect("decoded");
    let inits: Vec<&str> = graph.initializer.iter().map(|t| t.name.as_str()).collect();
    let names: Vec<&str> = graph
        .input
        .iter()
        .map(|i| i.name.as_str())
        .filter(|n| !inits.contains(n))
        .collect();
    let shapes: Shapes = names
        .iter()
        .zip(&inputs)
        .map(|(n, c)| (n.to_string(), c.dims.clone()))
        .collect();
    // Integer inputs are bound at import when the program needs them known, as in the run.
    let m = match catml_onnx::import(&model, &shapes, Some(dir)) {
        Ok(m) => m,
        Err(e) if e.is_unsupported() => {
            let bound: Bound = names
                .iter()
                .zip(&inputs)
                .filter(|(_, c)| !c.is_float())
                .map(|(n, c)| (n.to_string(), c.clone()))
                .collect();
            match import_bound(&model, &shapes, &bound, Some(dir)) {
                Ok(m) => m,
                Err(e) => return GradCheck::NotDifferentiable(e.to_string()),
            }
        }
        Err(e) => return GradCheck::NotDifferentiable(e.to_string()),
    };
    let p = &m.program;
    let mut args = Vec::new();
    for inp in p.inputs() {
        if let Some(t) = m.params.get(&inp.name) {
            args.push(t.clone());
            continue;
        }
        let k = names
            .iter()
            .position(|n| *n == inp.name)
            .expect("graph input");
        let mut c = inputs[k].clone();
        if c.elem == elem::FLOAT {
            c.elem = elem::DOUBLE;
        }
        match c.to_tensor() {
            Ok(t) => args.push(t),
            Err(e) => return GradCheck::NotDifferentiable(e),
        }
    }
    let float_in = p.inputs().iter().any(|i| i.ty.dtype.is_float());
    let float_out = p.output_types().iter().any(|t| t.dtype.is_float());
    if !float_in || !float_out {
        return GradCheck::NotDifferentiable("no float input and output".into());
    }
    let (j, v) = match (ad::jvp(p), ad::vjp(p)) {
        (Ok(j), Ok(v)) => (j, v),
        (Err(e), _) | (_, Err(e)) => return GradCheck::NotDifferentiable(e.to_string()),
    };
    let Ok(y) = catml_core::interp::eval(p, &args) else {
        return GradCheck::NotDifferentiable("forward value not finite".into());
    };
    let mut seed = 0x5eed;
    let dirs: Vec<Option<Tensor>> = p
        .inputs()
        .iter()
        .zip(&args)
        .map(|(i, a)| i.ty.dtype.is_float().then(|| direction(a, &mut seed)))
        .collect();
    let us: Vec<Tensor> = y
        .iter()
        .map(|t| {
            if t.dtype().is_float() {
                direction(t, &mut seed)
            } else {
                Tensor::zeros(&t.ty())
            }
        })
        .collect();
    let at = Probe {
        p,
        j: &j,
        v: &v,
        dirs: &dirs,
        us: &us,
    };
    let Err(m) = at.check(&args) else {
        return GradCheck::Passed;
    };
    if at.smooth(&args) {
        return GradCheck::Failed(m);
    }
    // Not differentiable at the suite's point (a kink, a tie, a jump, a domain edge): the
    // derivative programs are checked at a nearby point where the function is smooth.
    for _ in 0..8 {
        let xs: Vec<Tensor> = args
            .iter()
            .zip(&dirs)
            .map(|(a, d)| match d {
                Some(_) => at.shift(a, &direction(a, &mut seed), 1e-2),
                None => a.clone(),
            })
            .collect();
        if catml_core::interp::eval(p, &xs).is_err() || !at.smooth(&xs) {
            continue;
        }
        return match at.check(&xs) {
            Ok(()) => GradCheck::PassedNearby,
            Err(near) => {
                GradCheck::Failed(format!("{near} (at a nearby point; at the suite's: {m})"))
            }
        };
    }
    GradCheck::Failed(format!("{m}; no smooth point found near the suite's"))
}

/// A case's derivative programs and the directions they are checked along.
struct Probe<'a> {
    p: &'a catml_core::ir::Program,
    j: &'a catml_core::ad::Jvp,
    v: &'a catml_core::ad::Vjp,
    /// One direction per float input (None for the others), one cotangent per output.
    dirs: &'a [Option<Tensor>],
    us: &'a [Tensor],
}

impl Probe<'_> {
    const H: f64 = 1e-6;

    /// a + s d, elementwise.
    fn shift(&self, a: &Tensor, d: &Tensor, s: f64) -> Tensor {
        let data = a
            .to_f64_vec()
            .iter()
            .zip(d.to_f64_vec())
            .map(|(x, v)| x + s * v)
            .collect();
        Tensor::from_f64s(a.dtype(), a.shape().clone(), data).expect("same shape")
    }

    /// <u, f(xs + s h v)>, or None where f is not defined.
    fn value(&self, xs: &[Tensor], s: f64) -> Option<f64> {
        let moved: Vec<Tensor> = xs
            .iter()
            .zip(self.dirs)
            .map(|(a, d)| match d {
                Some(d) => self.shift(a, d, s * Self::H),
                None => a.clone(),
            })
            .collect();
        let y = catml_core::interp::eval(self.p, &moved).ok()?;
        Some(dot(self.us, &y))
    }

    /// f is smooth at xs along v: defined on both sides, with one-sided differences that agree
    /// (no kink) and do not grow as the step shrinks (no jump).
    fn smooth(&self, xs: &[Tensor]) -> bool {
        let at = |s: f64| self.value(xs, s);
        let (Some(m), Some(z), Some(p), Some(q)) = (at(-1.0), at(0.0), at(1.0), at(0.25)) else {
            return false;
        };
        let (right, left, near) = (
            (p - z) / Self::H,
            (z - m) / Self::H,
            (q - z) / (Self::H / 4.0),
        );
        let agree = |a: f64, b: f64| (a - b).abs() <= 1e-3 * (1.0 + a.abs() + b.abs());
        agree(right, left) && agree(right, near)
    }

    /// The adjoint identity <vjp(u), v> = <u, jvp(v)> and central differences of <u, f> along
    /// v against <u, jvp(v)>, at xs.
    fn check(&self, xs: &[Tensor]) -> Result<(), String> {
        let p = self.p;
        let mut jargs = xs.to_vec();
        for (i, d) in self.dirs.iter().enumerate() {
            if self.j.layout.tangent_input(i).is_some() {
                jargs.push(
                    d.clone()
                        .unwrap_or_else(|| Tensor::zeros(&p.inputs()[i].ty)),
                );
            }
        }
        let jv = catml_core::interp::eval(&self.j.program, &jargs)
            .map_err(|_| "jvp evaluation".to_string())?;
        let tangents = self.j.layout.tangents(&jv);
        let mut vargs = xs.to_vec();
        vargs.extend(self.us.iter().cloned());
        let vv = catml_core::interp::eval(&self.v.program, &vargs)
            .map_err(|_| "vjp evaluation".to_string())?;
        let ut: f64 = self
            .us
            .iter()
            .zip(tangents)
            .filter(|(u, _)| u.dtype().is_float())
            .map(|(u, t)| u.dot(t))
            .sum();
        let gv: f64 = self
            .dirs
            .iter()
            .enumerate()
            .filter_map(|(i, d)| Some(self.v.layout.gradient(&vv, i)?.dot(d.as_ref()?)))
            .sum();
        if (ut - gv).abs() > 1e-9 * (1.0 + ut.abs() + gv.abs()) {
            return Err(format!("adjoint: <u, Jv> = {ut}, <J^T u, v> = {gv}"));
        }
        let (Some(yp), Some(ym)) = (self.value(xs, 1.0), self.value(xs, -1.0)) else {
            return Err("perturbed value not finite".into());
        };
        let fd = (yp - ym) / (2.0 * Self::H);
        if (fd - ut).abs() > 1e-4 * (1.0 + fd.abs().max(ut.abs())) {
            return Err(format!("finite differences {fd}, jvp {ut}"));
        }
        Ok(())
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(root) = args.first().map(PathBuf::from) else {
        eprintln!("usage: onnx_suite SUITE_DIR [--min N] [--table FILE] [--verbose]");
        std::process::exit(2);
    };
    let flag = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
    };
    let min: Option<usize> = flag("--min").and_then(|v| v.parse().ok());
    let verbose = args.iter().any(|a| a == "--verbose");
    let mut cases: Vec<PathBuf> = std::fs::read_dir(&root)
        .expect("suite directory")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("model.onnx").exists())
        .collect();
    cases.sort();
    let mut table: BTreeMap<String, [usize; 3]> = BTreeMap::new();
    let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
    let mut totals = [0usize; 3];
    let mut bound_passes = 0usize;
    // Gradient checks of passing cases: passed, failed, not differentiable, and how many of
    // the passes are at a nearby point.
    let mut grads = [0usize; 4];
    for dir in &cases {
        let op = std::fs::read_to_string(dir.join("operator"))
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "?".to_string());
        let outcome = std::panic::catch_unwind(|| run_case(dir))
            .unwrap_or_else(|_| Outcome::Fail("panicked".to_string()));
        let name = dir.file_name().unwrap_or_default().to_string_lossy();
        if matches!(outcome, Outcome::Pass | Outcome::PassBound) {
            match std::panic::catch_unwind(|| grad_check(dir))
                .unwrap_or_else(|_| GradCheck::Failed("panicked".into()))
            {
                GradCheck::Passed => grads[0] += 1,
                GradCheck::PassedNearby => {
                    if verbose {
                        eprintln!("GRAD NEARBY {name}: not differentiable at the suite's inputs");
                    }
                    grads[0] += 1;
                    grads[3] += 1
                }
                GradCheck::Failed(m) => {
                    if verbose {
                        eprintln!("GRAD FAIL {name}: {m}");
                    }
                    grads[1] += 1
                }
                GradCheck::NotDifferentiable(m) => {
                    if verbose {
                        eprintln!("GRAD SKIP {name}: {m}");
                    }
                    grads[2] += 1
                }
            }
        }
        let k = match &outcome {
            Outcome::Pass => 0,
            Outcome::PassBound => {
                bound_passes += 1;
                0
            }
            Outcome::Fail(m) => {
                if verbose {
                    eprintln!("FAIL {name}: {m}");
                }
                1
            }
            Outcome::Unsupported(m) => {
                if verbose {
                    eprintln!("UNSUPPORTED {name}: {m}");
                }
                let short = m.split("unsupported: ").nth(1).unwrap_or(m);
                *reasons.entry(short.chars().take(90).collect()).or_default() += 1;
                2
            }
        };
        table.entry(op).or_default()[k] += 1;
        totals[k] += 1;
    }
    let mut text = String::from(
        "| operator | passed | failed | unsupported |\n| --- | ---: | ---: | ---: |\n",
    );
    for (op, [p, f, u]) in &table {
        text.push_str(&format!("| {op} | {p} | {f} | {u} |\n"));
    }
    let n = cases.len();
    text.push_str(&format!(
        "| **total** | **{}** | **{}** | **{}** |\n\n{} of {n} cases pass ({:.1}%); {bound_passes} of them \
         with their integer inputs bound at import.\n",
        totals[0],
        totals[1],
        totals[2],
        totals[0],
        100.0 * totals[0] as f64 / n.max(1) as f64
    ));
    text.push_str(&format!(
        "\nGradient checks (f64: adjoint identity and central differences, integer inputs bound \
         as in the run) on the {} passing cases: {} passed, {} failed, {} without a \
         differentiable float path. {} of the passes are at a nearby point: at the suite's \
         inputs those functions are not differentiable (one-sided differences disagree or one \
         side is undefined: kinks, ties, jumps, domain edges).\n",
        totals[0], grads[0], grads[1], grads[2], grads[3]
    ));
    if let Some(path) = flag("--table") {
        if let Err(e) = std::fs::write(path, &text) {
            eprintln!("cannot write {path}: {e}");
            std::process::exit(2);
        }
    } else {
        print!("{text}");
    }
    if verbose {
        let mut r: Vec<_> = reasons.into_iter().collect();
        r.sort_by_key(|e| std::cmp::Reverse(e.1));
        for (m, c) in r.iter().take(40) {
            eprintln!("{c:5} {m}");
        }
    }
    println!(
        "onnx node suite: {} passed, {} failed, {} unsupported; gradient checks: {} passed, {} failed",
        totals[0], totals[1], totals[2], grads[0], grads[1]
    );
    if let Some(min) = min {
        if totals[0] < min {
            eprintln!("pass count {} dropped below the recorded {min}", totals[0]);
            std::process::exit(1);
        }
    }
}
