//! The diagram: objects, arrows between them, and the loss terms over its paths. Every
//! declaration is checked as it is made, so a diagram that exists is well formed.

use super::arrow::{batched, check_name};
use super::path::Ends;
use super::{Arrow, DiagramError, Distance, Equation, Path, PathError, Supervised, Term};
use crate::interp;
use crate::ir::{InputKind, Program};
use crate::tensor::{DType, Params, Tensor, TensorType};

/// Objects (named spaces with a per-example type), arrows (named models), and terms.
///
/// Batch convention: an object's type is the type of ONE example (`f32[8]`); an arrow's program
/// maps a batch of B examples of its source (`f32[B, 8]`) to a batch of its target, row i of the
/// output depending on row i of the input only. Every arrow of a diagram has the same B, its
/// batch size.
#[derive(Debug, Clone, Default)]
pub struct Diagram {
    objects: Vec<(String, TensorType)>,
    arrows: Vec<Arrow>,
    /// Each arrow's program with its parameters named `<arrow>.<parameter>`.
    pub(crate) programs: Vec<Program>,
    terms: Vec<Term>,
    batch: Option<usize>,
    dtype: Option<DType>,
}

impl Diagram {
    pub fn new() -> Diagram {
        Diagram::default()
    }

    fn check_dtype(&mut self, place: String, dtype: DType) -> Result<(), DiagramError> {
        match self.dtype {
            Some(expected) if expected != dtype => Err(DiagramError::DType {
                place,
                expected,
                found: dtype,
            }),
            _ => {
                self.dtype = Some(dtype);
                Ok(())
            }
        }
    }

    /// Declares an object with its per-example type.
    pub fn object(&mut self, name: &str, ty: TensorType) -> Result<(), DiagramError> {
        check_name("object", name)?;
        if self.object_type(name).is_some() {
            return Err(DiagramError::Duplicate {
                kind: "object",
                name: name.to_string(),
            });
        }
        if !ty.dtype.is_float() {
            return Err(DiagramError::ObjectDType {
                name: name.to_string(),
                ty,
            });
        }
        self.check_dtype(format!("object \"{name}\""), ty.dtype)?;
        self.objects.push((name.to_string(), ty));
        Ok(())
    }

    /// Adds an arrow between declared objects; its program's types must be the objects' batched
    /// types, at the diagram's batch size.
    pub fn arrow(&mut self, arrow: Arrow) -> Result<(), DiagramError> {
        let name = arrow.name().to_string();
        if self.arrow_named(&name).is_some() {
            return Err(DiagramError::Duplicate {
                kind: "arrow",
                name,
            });
        }
        let ends = [
            ("data input", arrow.source(), arrow.input_type().clone()),
            ("output", arrow.target(), arrow.output_type()),
        ];
        for (side, object, found) in ends {
            // A module written for one example: say so rather than misread its first axis.
            if self.object_type(object) == Some(&found) {
                let expected = match self.batch {
                    Some(b) => batched(&found, b).to_string(),
                    None => format!("{}[B, {}] with B the batch size", found.dtype, {
                        let dims: Vec<String> = found.dims().iter().map(usize::to_string).collect();
                        dims.join(", ")
                    }),
                };
                return Err(DiagramError::Unbatched {
                    arrow: name,
                    side,
                    object: object.to_string(),
                    expected,
                    found,
                });
            }
        }
        let batch = arrow.batch();
        if let Some(expected) = self.batch {
            if expected != batch {
                return Err(DiagramError::Batch {
                    arrow: name,
                    expected,
                    found: batch,
                });
            }
        }
        let ends = [
            (
                "source",
                "data input",
                arrow.source(),
                arrow.input_type().clone(),
            ),
            ("target", "output", arrow.target(), arrow.output_type()),
        ];
        for (end, side, object, found) in ends {
            let Some(ty) = self.object_type(object) else {
                return Err(DiagramError::UnknownObject {
                    arrow: name,
                    end,
                    object: object.to_string(),
                });
            };
            let expected = batched(ty, batch);
            if found != expected {
                return Err(DiagramError::ArrowType {
                    arrow: name,
                    end,
                    side,
                    object: object.to_string(),
                    expected,
                    found,
                });
            }
        }
        let program = arrow.namespaced()?;
        self.batch = Some(batch);
        self.arrows.push(arrow);
        self.programs.push(program);
        Ok(())
    }

    fn new_term(&self, kind: &str, name: &str, weight: f64) -> Result<String, DiagramError> {
        check_name("term", name)?;
        if self.terms.iter().any(|t| t.name() == name) {
            return Err(DiagramError::Duplicate {
                kind: "term",
                name: name.to_string(),
            });
        }
        let label = format!("{kind} \"{name}\"");
        if !weight.is_finite() || weight < 0.0 {
            return Err(DiagramError::Weight {
                term: label,
                weight,
            });
        }
        Ok(label)
    }

    fn resolve_in(&self, term: &str, side: &'static str, p: &Path) -> Result<Ends, DiagramError> {
        self.resolve(p).map_err(|source| DiagramError::Path {
            term: term.to_string(),
            side,
            source,
        })
    }

    fn check_cross_entropy(
        &self,
        term: &str,
        d: Distance,
        object: &str,
    ) -> Result<(), DiagramError> {
        let ty = self.object_type(object).expect("resolved");
        if d == Distance::CrossEntropy && ty.rank() != 1 {
            return Err(DiagramError::CrossEntropyRank {
                term: term.to_string(),
                object: object.to_string(),
                ty: ty.clone(),
            });
        }
        Ok(())
    }

    /// Adds an equation between two paths with the same ends.
    pub fn equation(&mut self, eq: Equation) -> Result<(), DiagramError> {
        let term = self.new_term("equation", &eq.name, eq.weight)?;
        let l = self.resolve_in(&term, "left", &eq.left)?;
        let r = self.resolve_in(&term, "right", &eq.right)?;
        if l != r {
            return Err(DiagramError::Ends {
                term,
                left_source: l.source,
                left_target: l.target,
                right_source: r.source,
                right_target: r.target,
            });
        }
        self.check_cross_entropy(&term, eq.distance, &l.target)?;
        self.terms.push(Term::Equation(eq));
        Ok(())
    }

    /// Adds a supervised term on a path.
    pub fn supervised(&mut self, s: Supervised) -> Result<(), DiagramError> {
        let term = self.new_term("supervised", &s.name, s.weight)?;
        let ends = self.resolve_in(&term, "path", &s.path)?;
        self.check_cross_entropy(&term, s.loss, &ends.target)?;
        self.terms.push(Term::Supervised(s));
        Ok(())
    }

    /// The ends of a path, if its arrows exist and compose.
    pub fn resolve(&self, path: &Path) -> Result<Ends, PathError> {
        match path {
            Path::Identity(o) => match self.object_type(o) {
                Some(_) => Ok(Ends {
                    source: o.clone(),
                    target: o.clone(),
                }),
                None => Err(PathError::UnknownObject { name: o.clone() }),
            },
            Path::Arrows(names) => {
                let mut ends: Option<Ends> = None;
                for (index, name) in names.iter().enumerate() {
                    let a = self
                        .arrow_named(name)
                        .ok_or_else(|| PathError::UnknownArrow {
                            index,
                            name: name.clone(),
                        })?;
                    ends = Some(match ends {
                        None => Ends {
                            source: a.source().to_string(),
                            target: a.target().to_string(),
                        },
                        Some(e) if e.target == a.source() => Ends {
                            source: e.source,
                            target: a.target().to_string(),
                        },
                        Some(e) => {
                            return Err(PathError::DoesNotCompose {
                                index,
                                prev: names[index - 1].clone(),
                                next: name.clone(),
                                expected: e.target,
                                found: a.source().to_string(),
                            })
                        }
                    });
                }
                ends.ok_or(PathError::Empty)
            }
        }
    }

    /// The program of a path: `then` of its arrows' programs (parameters named
    /// `<arrow>.<parameter>`), or the identity.
    pub fn path_program(&self, path: &Path) -> Result<Program, DiagramError> {
        let place = format!("path {path}");
        let ends = self.resolve(path).map_err(|source| DiagramError::Path {
            term: place.clone(),
            side: "path",
            source,
        })?;
        let batch = self.batch.ok_or(DiagramError::NoArrows)?;
        let ty = batched(self.object_type(&ends.source).expect("resolved"), batch);
        let mut p = Program::identity(&[ty]).map_err(|source| DiagramError::Build {
            place: place.clone(),
            source,
        })?;
        for name in path.arrows() {
            let i = self.arrow_index(name).expect("resolved");
            p = p
                .then(&self.programs[i])
                .map_err(|source| DiagramError::Compose {
                    place: place.clone(),
                    source,
                })?;
        }
        Ok(p)
    }

    /// Applies a path to a batch `x` of its source, reading parameters by name from `params`.
    pub fn apply(&self, path: &Path, params: &Params, x: &Tensor) -> Result<Tensor, DiagramError> {
        let p = self.path_program(path)?;
        let inputs = p
            .inputs()
            .iter()
            .map(|i| match i.kind {
                InputKind::Data => Ok(x.clone()),
                InputKind::Param => {
                    params
                        .get(&i.name)
                        .cloned()
                        .ok_or_else(|| DiagramError::MissingValue {
                            name: i.name.clone(),
                            ty: i.ty.clone(),
                        })
                }
            })
            .collect::<Result<Vec<_>, _>>()?;
        let mut out = interp::eval(&p, &inputs).map_err(|source| DiagramError::Eval {
            place: format!("path {path}"),
            source,
        })?;
        Ok(out.remove(0))
    }

    /// Every arrow's parameter values, named `<arrow>.<parameter>`.
    pub fn params(&self) -> Params {
        self.arrows
            .iter()
            .flat_map(|a| {
                a.params()
                    .iter()
                    .map(move |(n, t)| (format!("{}.{n}", a.name()), t.clone()))
            })
            .collect()
    }

    pub fn objects(&self) -> impl Iterator<Item = (&str, &TensorType)> {
        self.objects.iter().map(|(n, t)| (n.as_str(), t))
    }

    /// The per-example type of an object.
    pub fn object_type(&self, name: &str) -> Option<&TensorType> {
        self.objects.iter().find(|(n, _)| n == name).map(|(_, t)| t)
    }

    pub fn arrows(&self) -> &[Arrow] {
        &self.arrows
    }

    fn arrow_index(&self, name: &str) -> Option<usize> {
        self.arrows.iter().position(|a| a.name() == name)
    }

    pub fn arrow_named(&self, name: &str) -> Option<&Arrow> {
        self.arrow_index(name).map(|i| &self.arrows[i])
    }

    pub fn terms(&self) -> &[Term] {
        &self.terms
    }

    /// The batch size shared by every arrow (`None` before the first arrow).
    pub fn batch(&self) -> Option<usize> {
        self.batch
    }

    /// The float type shared by every object (`None` before the first object).
    pub fn dtype(&self) -> Option<DType> {
        self.dtype
    }
}

/// One arrow's parameters out of a diagram-wide store, under their own names.
pub fn arrow_params(all: &Params, arrow: &str) -> Params {
    let prefix = format!("{arrow}.");
    all.iter()
        .filter_map(|(n, t)| {
            n.strip_prefix(&prefix)
                .map(|rest| (rest.to_string(), t.clone()))
        })
        .collect()
}
