//! Programs form a category: sequential composition (`then`), products (`par`), identities,
//! the diagonal (`copy`) and the terminal map (`discard`).
//!
//! Parameters follow the Para construction: composing wires outputs into the next program's
//! *data* inputs, while parameter inputs stay inputs of the composite. Parameters with the same
//! name and type are one input (a shared arrow's weights are tied; their gradients add).

use std::collections::HashMap;

use super::{BuildError, Builder, InputKind, Program, Var};
use crate::tensor::TensorType;

/// Why two programs do not compose.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ComposeError {
    #[error("the first program has {outputs} outputs but the second has {inputs} data inputs")]
    Arity { outputs: usize, inputs: usize },
    #[error("output {index} `{output}` has type {found}, which does not fit data input {index} `{input}` of type {expected}")]
    Type {
        index: usize,
        output: String,
        input: String,
        expected: TensorType,
        found: TensorType,
    },
    #[error("parameter `{name}` has type {left} in one program and {right} in the other")]
    ParamConflict {
        name: String,
        left: TensorType,
        right: TensorType,
    },
    #[error(transparent)]
    Build(#[from] BuildError),
}

/// Declares `g`'s parameters in `b`, reusing same-named ones already there.
fn param_args(
    b: &mut Builder,
    g: &Program,
    data: &mut dyn Iterator<Item = Var>,
) -> Result<Vec<Var>, ComposeError> {
    g.inputs()
        .iter()
        .map(|input| match input.kind {
            InputKind::Data => Ok(data.next().expect("data inputs counted by the caller")),
            InputKind::Param => match b.lookup(&input.name) {
                Some(v) if b.is_param(v) => {
                    if *b.ty(v) != input.ty {
                        return Err(ComposeError::ParamConflict {
                            name: input.name.clone(),
                            left: b.ty(v).clone(),
                            right: input.ty.clone(),
                        });
                    }
                    Ok(v)
                }
                _ => {
                    let name = b.fresh_name(&input.name);
                    Ok(b.input(&name, input.ty.clone(), InputKind::Param)?)
                }
            },
        })
        .collect()
}

impl Program {
    /// The data inputs' indices.
    pub fn data_indices(&self) -> Vec<usize> {
        (0..self.n_inputs())
            .filter(|&i| self.inputs()[i].kind == InputKind::Data)
            .collect()
    }

    /// `self` then `g`: `self`'s outputs feed `g`'s data inputs in order.
    ///
    /// ```
    /// use catml_core::ir::{Builder, InputKind, Program};
    /// use catml_core::prim::Ops;
    /// use catml_core::tensor::{DType, TensorType};
    ///
    /// let t = TensorType::new(DType::F64, [3]);
    /// let mut b = Builder::new();
    /// let x = b.input("x", t.clone(), InputKind::Data).unwrap();
    /// let y = b.tanh(x).unwrap();
    /// let f = b.finish(&[y]).unwrap();
    /// let ff = f.then(&f).unwrap();
    /// assert_eq!(ff.n_nodes(), 2);
    /// let id = Program::identity(&[t]).unwrap();
    /// assert_eq!(id.then(&f).unwrap().n_nodes(), f.then(&id).unwrap().n_nodes());
    /// ```
    pub fn then(&self, g: &Program) -> Result<Program, ComposeError> {
        let data = g.data_indices();
        if data.len() != self.outputs().len() {
            return Err(ComposeError::Arity {
                outputs: self.outputs().len(),
                inputs: data.len(),
            });
        }
        for (index, (&o, &i)) in self.outputs().iter().zip(&data).enumerate() {
            let (found, expected) = (self.ty(o), &g.inputs()[i].ty);
            if found != expected {
                return Err(ComposeError::Type {
                    index,
                    output: self.name(o).to_string(),
                    input: g.inputs()[i].name.clone(),
                    expected: expected.clone(),
                    found: found.clone(),
                });
            }
        }
        let mut b = Builder::from_program(self);
        let mut feed = self.outputs().to_vec().into_iter();
        let args = param_args(&mut b, g, &mut feed)?;
        let outs = b.inline(g, &args)?;
        Ok(b.finish_any(&outs)?.0)
    }

    /// `self` and `g` side by side: inputs of both, outputs of both.
    pub fn par(&self, g: &Program) -> Result<Program, ComposeError> {
        let mut b = Builder::from_program(self);
        let fresh: Vec<Var> = g
            .data_indices()
            .iter()
            .map(|&i| {
                let input = &g.inputs()[i];
                let name = b.fresh_name(&input.name);
                b.input(&name, input.ty.clone(), InputKind::Data)
            })
            .collect::<Result<_, _>>()?;
        let args = param_args(&mut b, g, &mut fresh.into_iter())?;
        let mut outs = self.outputs().to_vec();
        outs.extend(b.inline(g, &args)?);
        Ok(b.finish_any(&outs)?.0)
    }

    /// The identity on a list of types: inputs `x0, x1, ..` returned unchanged.
    pub fn identity(types: &[TensorType]) -> Result<Program, BuildError> {
        let mut b = Builder::new();
        let vars = types
            .iter()
            .enumerate()
            .map(|(i, t)| b.input(&format!("x{i}"), t.clone(), InputKind::Data))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(b.finish_any(&vars)?.0)
    }

    /// The diagonal: one input, `n` copies of it as outputs. Its pullback adds.
    pub fn copy(ty: &TensorType, n: usize) -> Result<Program, BuildError> {
        let mut b = Builder::new();
        let x = b.input("x", ty.clone(), InputKind::Data)?;
        Ok(b.finish_any(&vec![x; n])?.0)
    }

    /// The terminal map: inputs of these types and no outputs. Its pullback is zero.
    pub fn discard(types: &[TensorType]) -> Result<Program, BuildError> {
        let mut b = Builder::new();
        for (i, t) in types.iter().enumerate() {
            b.input(&format!("x{i}"), t.clone(), InputKind::Data)?;
        }
        Ok(b.finish_any(&[])?.0)
    }

    /// Input name -> index.
    pub fn input_index(&self) -> HashMap<&str, usize> {
        self.inputs()
            .iter()
            .enumerate()
            .map(|(i, x)| (x.name.as_str(), i))
            .collect()
    }
}
