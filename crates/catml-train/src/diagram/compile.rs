//! Compiling a diagram to ONE loss program, and its reverse-mode program.
//!
//! Each term is made of the arrows' own programs with the category operations: a path is
//! `then` of its arrows, an equation is `copy ; (left par right)`, and a few builder nodes
//! measure the distance, weight the rows and add the terms. Same-named parameters are one
//! input, so an arrow shared by several paths or terms has one set of weights and its gradients
//! add. `ad::vjp` of that one program gives every arrow's gradients.
//!
//! Inputs of the loss program: `data:<object>` (a batch of each object the terms read, in
//! declaration order), `weight:<term>` (one weight per row, per term), then the parameters
//! `<arrow>.<parameter>`. Outputs: the total `Σ_t weight_t · term_t`, then each term's value
//! `term_t = Σ_rows w_row · distance_row` (unweighted by `weight_t`).

use std::collections::BTreeMap;
use std::sync::OnceLock;

use super::arrow::batched;
use super::distance::{against_data, between_paths, weighted_sum};
use super::{Diagram, DiagramError, Term};
use crate::ad;
use crate::interp;
use crate::ir::{Builder, InputKind, Program, Var};
use crate::prim::Ops;
use crate::tensor::{DType, Params, Tensor, TensorType};

/// One minibatch: a batch of each object a term reads, and each term's row weights.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Batch {
    /// Object name -> `[B, ...]` tensor of the object's batched type.
    pub objects: BTreeMap<String, Tensor>,
    /// Term name -> `[B]` weights (0 for rows the term must ignore).
    pub weights: BTreeMap<String, Tensor>,
}

/// The values of the loss and of each term on one batch.
#[derive(Debug, Clone, PartialEq)]
pub struct Losses {
    pub total: f64,
    /// Term name and value, in the diagram's order.
    pub terms: Vec<(String, f64)>,
}

/// Where an input of a compiled program gets its value.
#[derive(Debug, Clone, PartialEq)]
enum Source {
    Object(String),
    Weight(String),
    Param(String),
}

/// A diagram compiled to its loss program and the program of the loss and its gradients.
#[derive(Debug, Clone)]
pub struct Compiled {
    loss: Program,
    grad: Program,
    terms: Vec<String>,
    loss_inputs: Vec<Source>,
    grad_inputs: Vec<Source>,
    /// Parameter names, in the order of their gradients in the grad program's outputs.
    params: Vec<String>,
    dtype: DType,
    batch: usize,
    /// `loss` and `grad` compiled for evaluation, on first use.
    executables: [OnceLock<interp::Executable>; 2],
}

/// `p` compiled once into `slot`.
fn executable<'a>(
    slot: &'a OnceLock<interp::Executable>,
    p: &Program,
) -> Result<&'a interp::Executable, interp::EvalError> {
    if let Some(exe) = slot.get() {
        return Ok(exe);
    }
    let made = interp::Executable::new(p.clone())?;
    Ok(slot.get_or_init(|| made))
}

/// Inlines `p` reading `data` for its data inputs and, for its parameters, the builder's
/// parameter inputs of the same name (all declared before any node, so no node can take a
/// parameter's name): every use of an arrow reads one set of weights.
fn inline_shared(b: &mut Builder, p: &Program, data: &[Var]) -> Result<Vec<Var>, DiagramError> {
    let mut data = data.iter();
    let args: Vec<Var> = p
        .inputs()
        .iter()
        .map(|input| match input.kind {
            InputKind::Data => *data.next().expect("one data value per data input"),
            InputKind::Param => b.lookup(&input.name).expect("declared up front"),
        })
        .collect();
    b.inline(p, &args).map_err(|source| DiagramError::Build {
        place: "the loss".to_string(),
        source,
    })
}

impl Diagram {
    /// Compiles the terms to one loss program and differentiates it once.
    pub fn compile(&self) -> Result<Compiled, DiagramError> {
        if self.terms().is_empty() {
            return Err(DiagramError::NoTerms);
        }
        let batch = self.batch().ok_or(DiagramError::NoArrows)?;
        let dtype = self.dtype().expect("arrows have objects");
        let ty_fail = |place: &str| {
            let place = place.to_string();
            move |source| DiagramError::Type { place, source }
        };

        // Which objects the terms read.
        let mut read = vec![false; self.objects().count()];
        let object_pos = |name: &str| {
            self.objects()
                .position(|(n, _)| n == name)
                .expect("resolved")
        };
        for t in self.terms() {
            match t {
                Term::Equation(e) => {
                    read[object_pos(&self.resolve(&e.left).expect("checked").source)] = true
                }
                Term::Supervised(s) => {
                    let ends = self.resolve(&s.path).expect("checked");
                    read[object_pos(&ends.source)] = true;
                    read[object_pos(&ends.target)] = true;
                }
            }
        }

        let mut b = Builder::new();
        let mut sources = Vec::new();
        let mut object_vars = BTreeMap::new();
        let build = |source| DiagramError::Build {
            place: "the loss".to_string(),
            source,
        };
        for ((name, ty), _) in self.objects().zip(&read).filter(|(_, &r)| r) {
            let v = b
                .input(&format!("data:{name}"), batched(ty, batch), InputKind::Data)
                .map_err(build)?;
            object_vars.insert(name.to_string(), v);
            sources.push(Source::Object(name.to_string()));
        }
        let mut weight_vars = Vec::new();
        for t in self.terms() {
            let v = b
                .input(
                    &format!("weight:{}", t.name()),
                    TensorType::new(dtype, [batch]),
                    InputKind::Data,
                )
                .map_err(build)?;
            weight_vars.push(v);
            sources.push(Source::Weight(t.name().to_string()));
        }

        // The parameters of every arrow a term uses, in order of first use.
        for t in self.terms() {
            let paths = match t {
                Term::Equation(e) => vec![&e.left, &e.right],
                Term::Supervised(s) => vec![&s.path],
            };
            for name in paths.into_iter().flat_map(|p| p.arrows()) {
                let i = self
                    .arrows()
                    .iter()
                    .position(|a| a.name() == name)
                    .expect("resolved");
                for input in self.programs[i].inputs() {
                    if input.kind == InputKind::Param && b.lookup(&input.name).is_none() {
                        b.input(&input.name, input.ty.clone(), InputKind::Param)
                            .map_err(build)?;
                    }
                }
            }
        }

        let mut values = Vec::new();
        for (t, &w) in self.terms().iter().zip(&weight_vars) {
            let place = format!("term \"{}\"", t.name());
            b.set_name_prefix(t.name());
            let rows = match t {
                Term::Equation(e) => {
                    let l = self.path_program(&e.left)?;
                    let r = self.path_program(&e.right)?;
                    let src = self.resolve(&e.left).expect("checked").source;
                    let compose = |source| DiagramError::Compose {
                        place: place.clone(),
                        source,
                    };
                    let ty = batched(self.object_type(&src).expect("resolved"), batch);
                    let pair = Program::copy(&ty, 2)
                        .map_err(|source| DiagramError::Build {
                            place: place.clone(),
                            source,
                        })?
                        .then(&l.par(&r).map_err(compose)?)
                        .map_err(compose)?;
                    let lr = inline_shared(&mut b, &pair, &[object_vars[&src]])?;
                    b.set_name_prefix(t.name());
                    between_paths(&mut b, e.distance, lr[0], lr[1]).map_err(ty_fail(&place))?
                }
                Term::Supervised(s) => {
                    let p = self.path_program(&s.path)?;
                    let ends = self.resolve(&s.path).expect("checked");
                    let out = inline_shared(&mut b, &p, &[object_vars[&ends.source]])?;
                    b.set_name_prefix(t.name());
                    against_data(&mut b, s.loss, out[0], object_vars[&ends.target])
                        .map_err(ty_fail(&place))?
                }
            };
            values.push(weighted_sum(&mut b, rows, w).map_err(ty_fail(&place))?);
        }
        b.set_name_prefix("loss");
        let mut total: Option<Var> = None;
        for (t, &v) in self.terms().iter().zip(&values) {
            let scaled = if t.weight() == 1.0 {
                v
            } else {
                b.scale(v, t.weight()).map_err(ty_fail("the loss"))?
            };
            total = Some(match total {
                None => scaled,
                Some(acc) => b.add(acc, scaled).map_err(ty_fail("the loss"))?,
            });
        }
        let mut outputs = vec![total.expect("at least one term")];
        outputs.extend(&values);
        let loss = b.finish(&outputs).map_err(build)?;

        let mut loss_inputs = sources;
        let mut params = Vec::new();
        for i in loss.param_indices() {
            let name = loss.inputs()[i].name.clone();
            loss_inputs.push(Source::Param(name.clone()));
            params.push(name);
        }

        // The gradient of the loss, keeping the terms and the parameters' gradients.
        let v = ad::grad(&loss)?;
        let mut keep: Vec<Var> = v.layout.primal_outputs(v.program.outputs()).to_vec();
        for i in loss.param_indices() {
            keep.push(
                *v.layout
                    .gradient(v.program.outputs(), i)
                    .expect("parameters are float"),
            );
        }
        let grad = Builder::from_program(&v.program)
            .finish(&keep)
            .map_err(build)?
            .pruned();
        let grad_inputs = loss_inputs.clone();
        debug_assert_eq!(grad_inputs.len(), grad.n_inputs());
        Ok(Compiled {
            loss,
            grad,
            terms: self.terms().iter().map(|t| t.name().to_string()).collect(),
            loss_inputs,
            grad_inputs,
            params,
            dtype,
            batch,
            executables: Default::default(),
        })
    }
}

impl Compiled {
    /// The loss program (see the module docs for its inputs and outputs).
    pub fn loss_program(&self) -> &Program {
        &self.loss
    }

    /// The loss, its terms, then the gradient of each parameter (in
    /// [`param_names`](Self::param_names) order), from the loss program's inputs ([`ad::grad`]:
    /// the loss's seed is 1 inside it).
    pub fn grad_program(&self) -> &Program {
        &self.grad
    }

    pub fn term_names(&self) -> &[String] {
        &self.terms
    }

    /// The parameters the loss reads, `<arrow>.<parameter>`.
    pub fn param_names(&self) -> &[String] {
        &self.params
    }

    pub fn batch(&self) -> usize {
        self.batch
    }

    pub fn dtype(&self) -> DType {
        self.dtype
    }

    fn inputs(
        &self,
        p: &Program,
        sources: &[Source],
        params: &Params,
        batch: &Batch,
    ) -> Result<Vec<Tensor>, DiagramError> {
        sources
            .iter()
            .zip(p.inputs())
            .map(|(s, decl)| {
                let (what, name, found) = match s {
                    Source::Object(n) => ("object", n, batch.objects.get(n)),
                    Source::Weight(n) => ("weights of term", n, batch.weights.get(n)),
                    Source::Param(n) => {
                        return params
                            .get(n)
                            .cloned()
                            .ok_or_else(|| DiagramError::MissingValue {
                                name: n.clone(),
                                ty: decl.ty.clone(),
                            })
                    }
                };
                let t = found.ok_or_else(|| DiagramError::MissingData {
                    what,
                    name: name.clone(),
                })?;
                if t.ty() != decl.ty {
                    return Err(DiagramError::DataType {
                        what,
                        name: name.clone(),
                        expected: decl.ty.clone(),
                        found: t.ty(),
                    });
                }
                Ok(t.clone())
            })
            .collect()
    }

    fn losses(&self, out: &[Tensor]) -> Losses {
        let scalar = |t: &Tensor| t.to_f64_vec()[0];
        Losses {
            total: scalar(&out[0]),
            terms: self
                .terms
                .iter()
                .zip(&out[1..=self.terms.len()])
                .map(|(n, t)| (n.clone(), scalar(t)))
                .collect(),
        }
    }

    /// The loss and its terms on one batch.
    pub fn evaluate(&self, params: &Params, batch: &Batch) -> Result<Losses, DiagramError> {
        let inputs = self.inputs(&self.loss, &self.loss_inputs, params, batch)?;
        let options = interp::EvalOptions::default();
        let out = executable(&self.executables[0], &self.loss)
            .and_then(|exe| exe.run(&inputs, options))
            .map_err(|source| DiagramError::Eval {
                place: "the loss".to_string(),
                source,
            })?;
        Ok(self.losses(&out))
    }

    /// The loss, its terms and the gradient of every parameter (named as in `params`).
    pub fn gradients(
        &self,
        params: &Params,
        batch: &Batch,
    ) -> Result<(Losses, Params), DiagramError> {
        let inputs = self.inputs(&self.grad, &self.grad_inputs, params, batch)?;
        let options = interp::EvalOptions::default();
        let out = executable(&self.executables[1], &self.grad)
            .and_then(|exe| exe.run(&inputs, options))
            .map_err(|source| DiagramError::Eval {
                place: "the loss gradient".to_string(),
                source,
            })?;
        let n = 1 + self.terms.len();
        let grads = self
            .params
            .iter()
            .cloned()
            .zip(out[n..].iter().cloned())
            .collect();
        Ok((self.losses(&out), grads))
    }
}
