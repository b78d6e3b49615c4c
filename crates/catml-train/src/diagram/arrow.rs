//! Arrows: named models between objects, each a program with one data input and one output plus
//! its own parameter values.

use super::DiagramError;
use crate::ir::{Builder, InputKind, Program};
use crate::tensor::{Params, TensorType};

/// Names of objects, arrows and terms: letters, digits, '_' and '-'.
pub(crate) fn check_name(kind: &'static str, name: &str) -> Result<(), DiagramError> {
    let ok = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_alphanumeric() || c == '_' || c == '-');
    if ok {
        Ok(())
    } else {
        Err(DiagramError::InvalidName {
            kind,
            name: name.to_string(),
        })
    }
}

/// A named model `source -> target`: a program whose one data input is a batch of the source
/// object and whose one output is a batch of the target object, with a value for each of its
/// parameter inputs.
#[derive(Debug, Clone, PartialEq)]
pub struct Arrow {
    name: String,
    source: String,
    target: String,
    program: Program,
    params: Params,
}

impl Arrow {
    /// Checks the program's interface (one data input and one output, both with a leading batch
    /// dimension of the same size) and that `params` holds exactly its parameters, typed.
    pub fn new(
        name: &str,
        source: &str,
        target: &str,
        program: Program,
        params: Params,
    ) -> Result<Arrow, DiagramError> {
        check_name("arrow", name)?;
        let data = program.data_indices();
        if data.len() != 1 || program.outputs().len() != 1 {
            return Err(DiagramError::ArrowInterface {
                arrow: name.to_string(),
                inputs: data.len(),
                outputs: program.outputs().len(),
            });
        }
        let (input, output) = (&program.inputs()[data[0]].ty, &program.output_types()[0]);
        for (end, ty) in [("data input", input), ("output", output)] {
            if ty.rank() == 0 {
                return Err(DiagramError::NoBatch {
                    arrow: name.to_string(),
                    end,
                    ty: ty.clone(),
                });
            }
        }
        if output.dims()[0] != input.dims()[0] {
            return Err(DiagramError::Batch {
                arrow: name.to_string(),
                expected: input.dims()[0],
                found: output.dims()[0],
            });
        }
        for i in program.param_indices() {
            let decl = &program.inputs()[i];
            // Training steps f32 and f64 values; f16, bf16 and the 8-bit floats are storage.
            if decl.ty.dtype.is_floating_point() && !decl.ty.dtype.is_float() {
                return Err(DiagramError::ParamDType {
                    arrow: name.to_string(),
                    name: decl.name.clone(),
                    dtype: decl.ty.dtype,
                });
            }
            match params.get(&decl.name) {
                None => {
                    return Err(DiagramError::MissingParam {
                        arrow: name.to_string(),
                        name: decl.name.clone(),
                    })
                }
                Some(t) if t.ty() != decl.ty => {
                    return Err(DiagramError::ParamType {
                        arrow: name.to_string(),
                        name: decl.name.clone(),
                        expected: decl.ty.clone(),
                        found: t.ty(),
                    })
                }
                Some(_) => {}
            }
        }
        let declared = program.input_index();
        if let Some(extra) = params.names().find(|n| {
            declared
                .get(n)
                .is_none_or(|&i| program.inputs()[i].kind != InputKind::Param)
        }) {
            return Err(DiagramError::ExtraParam {
                arrow: name.to_string(),
                name: extra.to_string(),
            });
        }
        Ok(Arrow {
            name: name.to_string(),
            source: source.to_string(),
            target: target.to_string(),
            program,
            params,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn source(&self) -> &str {
        &self.source
    }

    pub fn target(&self) -> &str {
        &self.target
    }

    pub fn program(&self) -> &Program {
        &self.program
    }

    pub fn params(&self) -> &Params {
        &self.params
    }

    /// The batch size: the leading dimension of the data input.
    pub fn batch(&self) -> usize {
        self.input_type().dims()[0]
    }

    /// The batched type of the data input.
    pub fn input_type(&self) -> &TensorType {
        &self.program.inputs()[self.program.data_indices()[0]].ty
    }

    /// The batched type of the output.
    pub fn output_type(&self) -> TensorType {
        self.program.output_types().remove(0)
    }

    /// The program with every parameter renamed `<arrow>.<parameter>`, so arrows never share
    /// weights by accident and one arrow used twice shares its weights by name.
    pub(crate) fn namespaced(&self) -> Result<Program, DiagramError> {
        let fail = |source| DiagramError::Build {
            place: format!("arrow \"{}\"", self.name),
            source,
        };
        let mut b = Builder::new();
        let args = self
            .program
            .inputs()
            .iter()
            .map(|i| {
                let name = match i.kind {
                    InputKind::Param => format!("{}.{}", self.name, i.name),
                    InputKind::Data => i.name.clone(),
                };
                b.input(&name, i.ty.clone(), i.kind)
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(fail)?;
        let outs = b.inline(&self.program, &args).map_err(fail)?;
        b.finish(&outs).map_err(fail)
    }
}

/// The per-example type of a batched type: the type without its leading dimension.
pub fn per_example(batched: &TensorType) -> TensorType {
    TensorType::new(batched.dtype, batched.dims()[1..].to_vec())
}

/// The batched type of `batch` examples of type `ty`.
pub fn batched(ty: &TensorType, batch: usize) -> TensorType {
    let mut dims = vec![batch];
    dims.extend_from_slice(ty.dims());
    TensorType::new(ty.dtype, dims)
}
