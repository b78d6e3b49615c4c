use std::collections::HashMap;

use super::primitive::{Prim, TypeError};
use super::program::{Input, InputKind, Node, Program, Var};
use crate::tensor::TensorType;

/// Why a builder refused a declaration.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    #[error("duplicate definition of `{0}`")]
    Duplicate(String),
    #[error("input `{name}`: invalid shape {ty}: dimensions must be positive and the element count must fit")]
    InvalidShape { name: String, ty: TensorType },
    #[error("a program needs at least one output")]
    NoOutputs,
    #[error("{0} is not a value of this builder")]
    UnknownVar(Var),
    #[error(
        "argument {index} has type {found}, the inlined program's input `{name}` has {expected}"
    )]
    InlineType {
        index: usize,
        name: String,
        expected: TensorType,
        found: TensorType,
    },
    #[error("inlining needs {expected} arguments, found {found}")]
    InlineArity { expected: usize, found: usize },
    #[error("{name} ({op}): {source}")]
    Type {
        name: String,
        op: String,
        source: TypeError,
    },
}

#[derive(Debug, Clone)]
enum Slot {
    Input(Input),
    Node(Node),
}

impl Slot {
    fn ty(&self) -> &TensorType {
        match self {
            Slot::Input(i) => &i.ty,
            Slot::Node(n) => &n.ty,
        }
    }

    fn name(&self) -> &str {
        match self {
            Slot::Input(i) => &i.name,
            Slot::Node(n) => &n.name,
        }
    }
}

/// Makes programs. Every node goes through its primitive's type rule, so whatever a builder
/// finishes is well typed. Inputs may be declared at any point (tracing creates parameters as it
/// goes); `finish` puts them first.
///
/// ```
/// use catml_core::ir::{Builder, InputKind};
/// use catml_core::prim::Ops;
/// use catml_core::tensor::{DType, TensorType};
///
/// let mut b = Builder::new();
/// let x = b.input("x", TensorType::new(DType::F64, [2, 3]), InputKind::Data).unwrap();
/// let y = b.tanh(x).unwrap();
/// let p = b.finish(&[y]).unwrap();
/// assert_eq!(p.n_nodes(), 1);
/// ```
#[derive(Debug, Clone, Default)]
pub struct Builder {
    slots: Vec<Slot>,
    names: HashMap<String, Var>,
    tag: Option<String>,
    prefix: String,
    /// For each hint given to [`fresh_name`](Self::fresh_name): a suffix k such that
    /// `hint.1` .. `hint.(k-1)` are all taken (names are never released), so the search for
    /// the next free name starts there instead of at 1.
    next_suffix: HashMap<String, usize>,
}

impl Builder {
    pub fn new() -> Builder {
        Builder {
            prefix: "t".to_string(),
            ..Builder::default()
        }
    }

    /// A builder holding a copy of `p`, whose values keep their numbers.
    pub fn from_program(p: &Program) -> Builder {
        let mut b = Builder::new();
        for i in &p.inputs {
            b.names.insert(i.name.clone(), Var(b.slots.len() as u32));
            b.slots.push(Slot::Input(i.clone()));
        }
        for n in &p.nodes {
            b.names.insert(n.name.clone(), Var(b.slots.len() as u32));
            b.slots.push(Slot::Node(n.clone()));
        }
        b
    }

    /// Whether `v` is a parameter input.
    pub fn is_param(&self, v: Var) -> bool {
        matches!(self.slots.get(v.index()), Some(Slot::Input(i)) if i.kind == InputKind::Param)
    }

    /// Declares an input.
    pub fn input(
        &mut self,
        name: &str,
        ty: TensorType,
        kind: InputKind,
    ) -> Result<Var, BuildError> {
        if ty.shape.checked_numel().is_none() {
            return Err(BuildError::InvalidShape {
                name: name.to_string(),
                ty,
            });
        }
        self.claim(name)?;
        Ok(self.push(Slot::Input(Input {
            name: name.to_string(),
            ty,
            kind,
        })))
    }

    /// Applies a primitive under a fresh name.
    pub fn apply(&mut self, prim: Prim, operands: &[Var]) -> Result<Var, TypeError> {
        self.apply_fresh(&self.prefix.clone(), prim, operands)
    }

    /// Applies a primitive under a name derived from `hint` (the hint itself if it is free).
    pub fn apply_hinted(
        &mut self,
        hint: &str,
        prim: Prim,
        operands: &[Var],
    ) -> Result<Var, TypeError> {
        self.apply_fresh(hint, prim, operands)
    }

    /// Applies under the free name for `hint`; the next search for this hint starts after it,
    /// so naming n nodes from one hint is linear, not quadratic.
    fn apply_fresh(&mut self, hint: &str, prim: Prim, operands: &[Var]) -> Result<Var, TypeError> {
        let (name, k) = self.free_name(hint);
        let v = self.apply_as(name, prim, operands)?;
        if k > 0 {
            self.next_suffix.insert(hint.to_string(), k + 1);
        }
        Ok(v)
    }

    /// Applies a primitive under exactly this name.
    pub fn apply_named(
        &mut self,
        name: &str,
        prim: Prim,
        operands: &[Var],
    ) -> Result<Var, BuildError> {
        if self.names.contains_key(name) {
            return Err(BuildError::Duplicate(name.to_string()));
        }
        let op = prim.name().to_string();
        self.apply_as(name.to_string(), prim, operands)
            .map_err(|source| BuildError::Type {
                name: name.to_string(),
                op,
                source,
            })
    }

    fn apply_as(&mut self, name: String, prim: Prim, operands: &[Var]) -> Result<Var, TypeError> {
        let mut types = Vec::with_capacity(operands.len());
        for &v in operands {
            match self.slots.get(v.index()) {
                Some(s) => types.push(s.ty().clone()),
                None => {
                    return Err(TypeError::Invalid(format!(
                        "{v} is not a value of this builder"
                    )))
                }
            }
        }
        let ty = crate::ir::infer_type(prim.as_ref(), &types)?;
        if ty.shape.checked_numel().is_none() {
            return Err(TypeError::Invalid(format!(
                "result type {ty} has an invalid shape"
            )));
        }
        self.names
            .insert(name.clone(), Var(self.slots.len() as u32));
        Ok(self.push(Slot::Node(Node {
            name,
            prim,
            operands: operands.to_vec(),
            tag: self.tag.clone(),
            ty,
        })))
    }

    fn push(&mut self, s: Slot) -> Var {
        self.slots.push(s);
        Var((self.slots.len() - 1) as u32)
    }

    fn claim(&mut self, name: &str) -> Result<(), BuildError> {
        if self.names.contains_key(name) {
            return Err(BuildError::Duplicate(name.to_string()));
        }
        self.names
            .insert(name.to_string(), Var(self.slots.len() as u32));
        Ok(())
    }

    /// Renames node `v` to `hint` (or its next free `hint.k`); false, changing nothing, if
    /// `v` is an input or not a value of this builder.
    pub fn rename_node(&mut self, v: Var, hint: &str) -> bool {
        if !matches!(self.slots.get(v.index()), Some(Slot::Node(_))) {
            return false;
        }
        let (name, _) = self.free_name(hint);
        let Some(Slot::Node(n)) = self.slots.get_mut(v.index()) else {
            return false;
        };
        let old = std::mem::replace(&mut n.name, name.clone());
        self.names.remove(&old);
        self.names.insert(name, v);
        true
    }

    /// `hint` if no value has that name yet, else `hint.1`, `hint.2`, ...
    pub fn fresh_name(&self, hint: &str) -> String {
        self.free_name(hint).0
    }

    /// The free name for `hint` and its suffix (0: the hint itself).
    fn free_name(&self, hint: &str) -> (String, usize) {
        if !self.names.contains_key(hint) {
            return (hint.to_string(), 0);
        }
        let start = self.next_suffix.get(hint).copied().unwrap_or(1);
        (start..)
            .map(|k| (format!("{hint}.{k}"), k))
            .find(|(n, _)| !self.names.contains_key(n))
            .expect("unbounded")
    }

    /// The tag given to nodes made from now on (as the tiny MLP's `tag=lin1`).
    pub fn set_tag(&mut self, tag: Option<String>) -> Option<String> {
        std::mem::replace(&mut self.tag, tag)
    }

    pub fn tag(&self) -> Option<&str> {
        self.tag.as_deref()
    }

    /// The stem of fresh node names made from now on.
    pub fn set_name_prefix(&mut self, prefix: &str) -> String {
        std::mem::replace(&mut self.prefix, prefix.to_string())
    }

    pub fn ty(&self, v: Var) -> &TensorType {
        self.slots[v.index()].ty()
    }

    pub fn name(&self, v: Var) -> &str {
        self.slots[v.index()].name()
    }

    pub fn lookup(&self, name: &str) -> Option<Var> {
        self.names.get(name).copied()
    }

    /// Number of values so far.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Copies `p`'s nodes in, reading `args` for its inputs; returns its outputs' values.
    pub fn inline(&mut self, p: &Program, args: &[Var]) -> Result<Vec<Var>, BuildError> {
        if args.len() != p.n_inputs() {
            return Err(BuildError::InlineArity {
                expected: p.n_inputs(),
                found: args.len(),
            });
        }
        let mut map: Vec<Var> = Vec::with_capacity(p.n_vars());
        for (index, (input, &a)) in p.inputs.iter().zip(args).enumerate() {
            let found = self
                .slots
                .get(a.index())
                .ok_or(BuildError::UnknownVar(a))?
                .ty();
            if *found != input.ty {
                return Err(BuildError::InlineType {
                    index,
                    name: input.name.clone(),
                    expected: input.ty.clone(),
                    found: found.clone(),
                });
            }
            map.push(a);
        }
        for n in &p.nodes {
            let operands: Vec<Var> = n.operands.iter().map(|o| map[o.index()]).collect();
            let saved = n.tag.as_ref().map(|t| self.set_tag(Some(t.clone())));
            let v = self
                .apply_fresh(&n.name, n.prim.clone(), &operands)
                .map_err(|source| BuildError::Type {
                    name: self.fresh_name(&n.name),
                    op: n.prim.name().to_string(),
                    source,
                })?;
            if let Some(t) = saved {
                self.set_tag(t);
            }
            map.push(v);
        }
        Ok(p.outputs.iter().map(|o| map[o.index()]).collect())
    }

    /// Finishes the program with these outputs: inputs first, in declaration order, then nodes.
    pub fn finish(self, outputs: &[Var]) -> Result<Program, BuildError> {
        self.finish_mapped(outputs).map(|(p, _)| p)
    }

    /// As [`finish`](Self::finish), also returning where each builder value went.
    pub fn finish_mapped(self, outputs: &[Var]) -> Result<(Program, Vec<Var>), BuildError> {
        if outputs.is_empty() {
            return Err(BuildError::NoOutputs);
        }
        self.finish_any(outputs)
    }

    /// Finishes allowing no outputs: the morphisms into the terminal object (`discard`).
    pub(crate) fn finish_any(self, outputs: &[Var]) -> Result<(Program, Vec<Var>), BuildError> {
        if let Some(&bad) = outputs.iter().find(|o| o.index() >= self.slots.len()) {
            return Err(BuildError::UnknownVar(bad));
        }
        let n_inputs = self
            .slots
            .iter()
            .filter(|s| matches!(s, Slot::Input(_)))
            .count();
        let mut map = vec![Var(0); self.slots.len()];
        let (mut next_input, mut next_node) = (0u32, n_inputs as u32);
        for (i, s) in self.slots.iter().enumerate() {
            map[i] = match s {
                Slot::Input(_) => {
                    next_input += 1;
                    Var(next_input - 1)
                }
                Slot::Node(_) => {
                    next_node += 1;
                    Var(next_node - 1)
                }
            };
        }
        let mut inputs = Vec::with_capacity(n_inputs);
        let mut nodes = Vec::with_capacity(self.slots.len() - n_inputs);
        for s in self.slots {
            match s {
                Slot::Input(i) => inputs.push(i),
                Slot::Node(mut n) => {
                    for o in &mut n.operands {
                        *o = map[o.index()];
                    }
                    nodes.push(n);
                }
            }
        }
        let outputs = outputs.iter().map(|o| map[o.index()]).collect();
        Ok((
            Program {
                inputs,
                nodes,
                outputs,
            },
            map,
        ))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::prim::Ops;
    use crate::tensor::DType;

    #[test]
    fn fresh_names_skip_taken_names_and_failed_applications() {
        let mut b = Builder::new();
        let x = b
            .input("x", TensorType::new(DType::F64, [2]), InputKind::Data)
            .unwrap();
        let m = b
            .input("m", TensorType::new(DType::F64, [3]), InputKind::Data)
            .unwrap();
        b.apply_named("t.1", Arc::new(crate::prim::Neg), &[x])
            .unwrap();
        let t = b.tanh(x).unwrap();
        assert!(b.add(x, m).is_err());
        let t2 = b.exp(t).unwrap();
        let t3 = b.exp(t2).unwrap();
        let names: Vec<&str> = [t, t2, t3].iter().map(|&v| b.name(v)).collect();
        assert_eq!(names, ["t", "t.2", "t.3"]);
        assert_eq!(b.fresh_name("t"), "t.4");
        assert_eq!(b.fresh_name("u"), "u");
    }
}
