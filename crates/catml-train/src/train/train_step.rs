//! A diagram's whole training step as one program: from the parameters, the optimiser's state,
//! the step counter and a batch to the new parameters, the new state and the loss terms. The
//! gradients are the compiled loss's reverse-mode program, inlined; the schedule, clipping and
//! update are the nodes of `step_update` (formulas in `docs/optimisers.md`).
//!
//! Inputs, in order: the trained parameters `<arrow>.<parameter>` (parameter inputs), the
//! optimiser's buffers under the names its state uses (`momentum/<p>` for SGD with momentum,
//! `m/<p>` and `v/<p>` for Adam and AdamW), `step` (i64 scalar: steps taken so far), then the
//! batch: `data:<object>` and `weight:<term>` as the loss program names them. Outputs, in
//! order: `new:<p>` per parameter, `new:<buffer>` per buffer, `loss`, `loss:<term>` per term,
//! `lr` (the rate this step used) and `grad_norm` (the global norm before clipping), the last
//! two f64 scalars. The counter is not an output: the next step reads `step + 1`.

use std::path::Path as FsPath;

use super::spec::Spec;
use super::step_update::{adam, c64, clip, global_norm, schedule_factor, sgd};
use super::{prepare, TrainError, Trainer};
use crate::diagram::{Batch, Compiled, DiagramError, Losses};
use crate::interp;
use crate::ir::{Builder, InputKind, Program, TypeError, Var};
use crate::optim::{Method, Optimiser};
use crate::prim::Ops;
use crate::tensor::{DType, Params, Tensor, TensorType};

/// The name of the step counter, as in the optimiser's state.
pub const STEP: &str = "step";

/// Where a batch input of the step program gets its value.
#[derive(Debug, Clone, PartialEq)]
enum BatchInput {
    Object(String),
    Weight(String),
}

/// A diagram's training step under an optimiser, as one [`Program`].
///
/// Evaluating it N times from the trainer's starting parameters, zero buffers and
/// `step = 0, 1, ...` on the trainer's batches gives the trainer's parameters and optimiser
/// state after N steps, to rounding: the trainer's optimiser works in f64 and rounds once per
/// value, the program in the parameters' dtype (see `docs/optimisers.md`).
#[derive(Debug, Clone)]
pub struct TrainStep {
    /// The step's program, compiled once: successive steps reuse its buffers.
    step: interp::Executable,
    params: Vec<String>,
    /// The optimiser's buffers, in input order, with their types.
    buffers: Vec<(String, TensorType)>,
    batch: Vec<BatchInput>,
    terms: Vec<String>,
}

fn build_error(source: crate::ir::BuildError) -> TrainError {
    TrainError::Diagram(DiagramError::Build {
        place: "the training step".to_string(),
        source,
    })
}

fn type_error(source: TypeError) -> TrainError {
    TrainError::Diagram(DiagramError::Type {
        place: "the training step".to_string(),
        source,
    })
}

impl TrainStep {
    /// The training step of a compiled diagram under `optimiser` (its method, schedule and
    /// clipping; its step count and buffers are inputs of the program, not part of it).
    pub fn new(compiled: &Compiled, optimiser: &Optimiser) -> Result<TrainStep, TrainError> {
        let grad = compiled.grad_program();
        let params = compiled.param_names().to_vec();
        let mut b = Builder::new();
        let mut args = vec![None; grad.n_inputs()];
        let mut p_vars = Vec::new();
        for i in grad.param_indices() {
            let input = &grad.inputs()[i];
            let v = b
                .input(&input.name, input.ty.clone(), InputKind::Param)
                .map_err(build_error)?;
            args[i] = Some(v);
            p_vars.push((input.name.clone(), v));
        }
        let kinds: &[&str] = match optimiser.method() {
            Method::Sgd(s) if s.momentum != 0.0 => &["momentum/"],
            Method::Sgd(_) => &[],
            Method::Adam(_) => &["m/", "v/"],
        };
        let mut buffers = Vec::new();
        let mut buffer_vars = Vec::new();
        for (name, v) in &p_vars {
            let ty = b.ty(*v).clone();
            let mut vars = Vec::new();
            for kind in kinds {
                let key = format!("{kind}{name}");
                vars.push(
                    b.input(&key, ty.clone(), InputKind::Data)
                        .map_err(build_error)?,
                );
                buffers.push((key, ty.clone()));
            }
            buffer_vars.push(vars);
        }
        let step = b
            .input(STEP, TensorType::scalar(DType::I64), InputKind::Data)
            .map_err(build_error)?;
        let mut batch = Vec::new();
        for (i, input) in grad.inputs().iter().enumerate() {
            if input.kind == InputKind::Param {
                continue;
            }
            let source = if let Some(o) = input.name.strip_prefix("data:") {
                BatchInput::Object(o.to_string())
            } else if let Some(t) = input.name.strip_prefix("weight:") {
                BatchInput::Weight(t.to_string())
            } else {
                return Err(type_error(TypeError::Invalid(format!(
                    "the loss program's input `{}` is neither data nor weights",
                    input.name
                ))));
            };
            batch.push(source);
            args[i] = Some(
                b.input(&input.name, input.ty.clone(), InputKind::Data)
                    .map_err(build_error)?,
            );
        }
        let args: Vec<Var> = args.into_iter().map(|a| a.expect("every input")).collect();
        let out = b.inline(grad, &args).map_err(build_error)?;
        let n_terms = compiled.term_names().len();
        let (losses, grads) = out.split_at(1 + n_terms);
        let update = update_nodes(&mut b, optimiser, step, &p_vars, grads, &buffer_vars)
            .map_err(type_error)?;
        let mut outputs = update.params;
        outputs.extend(update.buffers);
        // Copies, so that each output is its own node even where the total is one term.
        for &v in losses {
            outputs.push(b.stop_gradient(v).map_err(type_error)?);
        }
        outputs.push(update.lr);
        outputs.push(update.grad_norm);
        let terms = compiled.term_names().to_vec();
        for (&v, name) in outputs.iter().zip(output_names(&params, &buffers, &terms)) {
            claim(&mut b, v, &name);
        }
        let program = b.finish(&outputs).map_err(build_error)?;
        let step = TrainStep {
            step: interp::Executable::new(program).map_err(|source| {
                TrainError::Diagram(DiagramError::Eval {
                    place: "the training step".to_string(),
                    source,
                })
            })?,
            params,
            buffers,
            batch,
            terms,
        };
        let got = step.program().output_names();
        if got != step.output_names() {
            return Err(type_error(TypeError::Invalid(format!(
                "outputs named {got:?}, expected {:?}",
                step.output_names()
            ))));
        }
        Ok(step)
    }

    /// The training step of a trainer's diagram and optimiser.
    pub fn of_trainer(trainer: &Trainer) -> Result<TrainStep, TrainError> {
        TrainStep::new(trainer.compiled(), trainer.optimiser())
    }

    /// The training step of the run a spec file describes, and the trained parameters that run
    /// starts from (read or seeded exactly as `catml train` does).
    pub fn of_spec(path: &FsPath) -> Result<(TrainStep, Params), TrainError> {
        let text = std::fs::read_to_string(path).map_err(|e| TrainError::Output {
            path: path.display().to_string(),
            reason: e.to_string(),
        })?;
        let in_spec = |source| TrainError::Spec {
            path: path.display().to_string(),
            source,
        };
        let spec = Spec::parse(&text).map_err(in_spec)?;
        let base = path.parent().unwrap_or(FsPath::new("."));
        let run = prepare(&spec, base).map_err(in_spec)?;
        let step = TrainStep::of_trainer(&run.trainer)?;
        let params = step
            .params
            .iter()
            .map(|n| {
                let t = run.trainer.params().get(n).expect("trained").clone();
                (n.clone(), t)
            })
            .collect();
        Ok((step, params))
    }

    pub fn program(&self) -> &Program {
        self.step.program()
    }

    /// The trained parameters, in input order.
    pub fn param_names(&self) -> &[String] {
        &self.params
    }

    /// The optimiser's buffer names, in input order.
    pub fn buffer_names(&self) -> impl Iterator<Item = &str> {
        self.buffers.iter().map(|(n, _)| n.as_str())
    }

    /// The program's output names, in order (see the module docs).
    pub fn output_names(&self) -> Vec<String> {
        output_names(&self.params, &self.buffers, &self.terms)
    }

    /// The optimiser state before the first step: `step` 0 and zero buffers.
    pub fn initial_state(&self) -> Params {
        let mut s: Params = self
            .buffers
            .iter()
            .map(|(n, ty)| (n.clone(), Tensor::zeros(ty)))
            .collect();
        s.insert(STEP, Tensor::i64(vec![], vec![0]).expect("scalar"));
        s
    }

    /// Evaluates one step: replaces the parameters and buffers with their new values, advances
    /// `step` by one, and returns the loss and its terms on the batch. On error nothing
    /// changes.
    pub fn run(
        &self,
        params: &mut Params,
        state: &mut Params,
        batch: &Batch,
    ) -> Result<Losses, TrainError> {
        let inputs = self.inputs(params, state, batch)?;
        let t = state_step(state)?;
        let out = self.step.run(&inputs, interp::EvalOptions::default());
        // Without the inputs' hold on the old values, replacing them below frees their buffers.
        drop(inputs);
        let out = out.map_err(|source| {
            TrainError::Diagram(DiagramError::Eval {
                place: "the training step".to_string(),
                source,
            })
        })?;
        let (n, k) = (self.params.len(), self.buffers.len());
        // The values replaced serve the next step's buffers.
        for (name, t) in self.params.iter().zip(&out[..n]) {
            self.step.recycle(params.insert(name.clone(), t.clone()));
        }
        for ((name, _), t) in self.buffers.iter().zip(&out[n..n + k]) {
            self.step.recycle(state.insert(name.clone(), t.clone()));
        }
        state.insert(STEP, Tensor::i64(vec![], vec![t + 1]).expect("scalar"));
        let scalar = |t: &Tensor| t.to_f64_vec()[0];
        Ok(Losses {
            total: scalar(&out[n + k]),
            terms: self
                .terms
                .iter()
                .zip(&out[n + k + 1..])
                .map(|(name, t)| (name.clone(), scalar(t)))
                .collect(),
        })
    }

    /// The program's inputs from named values, each checked against its declared type.
    pub fn inputs(
        &self,
        params: &Params,
        state: &Params,
        batch: &Batch,
    ) -> Result<Vec<Tensor>, TrainError> {
        let mut batch_sources = self.batch.iter();
        self.program()
            .inputs()
            .iter()
            .map(|decl| {
                let (what, found) = if decl.kind == InputKind::Param {
                    ("parameter", params.get(&decl.name))
                } else if decl.name == STEP || self.buffers.iter().any(|(n, _)| *n == decl.name) {
                    ("optimiser state", state.get(&decl.name))
                } else {
                    match batch_sources.next().expect("one source per batch input") {
                        BatchInput::Object(o) => ("object", batch.objects.get(o)),
                        BatchInput::Weight(t) => ("weights of term", batch.weights.get(t)),
                    }
                };
                let t = found.ok_or_else(|| {
                    TrainError::Diagram(DiagramError::MissingData {
                        what,
                        name: decl.name.clone(),
                    })
                })?;
                if t.ty() != decl.ty {
                    return Err(TrainError::Diagram(DiagramError::DataType {
                        what,
                        name: decl.name.clone(),
                        expected: decl.ty.clone(),
                        found: t.ty(),
                    }));
                }
                Ok(t.clone())
            })
            .collect()
    }
}

/// `new:<p>`, `new:<buffer>`, `loss`, `loss:<term>`, `lr`, `grad_norm`.
fn output_names(
    params: &[String],
    buffers: &[(String, TensorType)],
    terms: &[String],
) -> Vec<String> {
    let mut names: Vec<String> = params.iter().map(|p| format!("new:{p}")).collect();
    names.extend(buffers.iter().map(|(n, _)| format!("new:{n}")));
    names.push("loss".to_string());
    names.extend(terms.iter().map(|t| format!("loss:{t}")));
    names.push("lr".to_string());
    names.push("grad_norm".to_string());
    names
}

/// Gives node `v` exactly `name`, moving a node of the loss that holds it to `<name>.0`; an
/// input holding it leaves `v` as `<name>.k`, which the caller's check of the names reports.
fn claim(b: &mut Builder, v: Var, name: &str) {
    if b.name(v) == name {
        return;
    }
    if let Some(holder) = b.lookup(name) {
        b.rename_node(holder, &format!("{name}.0"));
    }
    b.rename_node(v, name);
}

/// The state's step counter, a non-negative i64 scalar.
fn state_step(state: &Params) -> Result<i64, TrainError> {
    match state.get(STEP).and_then(|t| t.as_i64()) {
        Some(a) if a.dims().is_empty() && a.data()[0] >= 0 => Ok(a.data()[0]),
        _ => Err(TrainError::Optim(crate::optim::OptimError::State {
            name: STEP.to_string(),
            expected: "a non-negative i64 scalar".to_string(),
            found: state
                .get(STEP)
                .map_or("nothing".to_string(), |t| t.ty().to_string()),
        })),
    }
}

/// The update's values: new parameters and buffers (in input order), rate and norm.
struct Update {
    params: Vec<Var>,
    buffers: Vec<Var>,
    lr: Var,
    grad_norm: Var,
}

/// The schedule, clipping and method applied to every parameter.
fn update_nodes(
    b: &mut Builder,
    optimiser: &Optimiser,
    step: Var,
    params: &[(String, Var)],
    grads: &[Var],
    buffers: &[Vec<Var>],
) -> Result<Update, TypeError> {
    let t = b.convert(step, DType::F64)?;
    let factor = schedule_factor(b, optimiser.schedule(), t)?;
    let base = match optimiser.method() {
        Method::Sgd(s) => s.lr,
        Method::Adam(a) => a.lr,
    };
    let base = c64(b, base)?;
    let lr = b.mul(base, factor)?;
    let grad_norm = global_norm(b, grads)?;
    let grads = match optimiser.clip() {
        Some(c) => clip(b, grads, grad_norm, c)?,
        None => grads.to_vec(),
    };
    let one = c64(b, 1.0)?;
    let t1 = b.add(t, one)?;
    let (mut new_params, mut new_buffers) = (Vec::new(), Vec::new());
    for (((_, p), &g), bufs) in params.iter().zip(&grads).zip(buffers) {
        match optimiser.method() {
            Method::Sgd(s) => {
                let (np, nb) = sgd(b, s, lr, (*p, g, bufs.first().copied()))?;
                new_params.push(np);
                new_buffers.extend(nb);
            }
            Method::Adam(a) => {
                let [np, m, v] = adam(b, a, (lr, t1), [*p, g, bufs[0], bufs[1]])?;
                new_params.push(np);
                new_buffers.extend([m, v]);
            }
        }
    }
    Ok(Update {
        params: new_params,
        buffers: new_buffers,
        lr,
        grad_norm,
    })
}
