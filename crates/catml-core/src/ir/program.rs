use std::collections::HashMap;
use std::fmt;

use super::primitive::{same_prim, Prim};
use crate::tensor::TensorType;

/// A value of a program: inputs are `v0 .. v(n_inputs-1)`, then one per node in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Var(pub(crate) u32);

impl Var {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for Var {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "v{}", self.0)
    }
}

/// Whether an input is data or a trainable parameter. Parameters are ordinary named inputs:
/// every use of one name reads one value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum InputKind {
    Data,
    Param,
}

/// A named, typed program input.
#[derive(Debug, Clone, PartialEq)]
pub struct Input {
    pub name: String,
    pub ty: TensorType,
    pub kind: InputKind,
}

/// One instruction: `name = prim(operands)`, with its inferred type and optional tag.
#[derive(Debug, Clone)]
pub struct Node {
    pub name: String,
    pub prim: Prim,
    pub operands: Vec<Var>,
    pub tag: Option<String>,
    pub ty: TensorType,
}

impl PartialEq for Node {
    fn eq(&self, other: &Node) -> bool {
        self.name == other.name
            && same_prim(&*self.prim, &*other.prim)
            && self.operands == other.operands
            && self.tag == other.tag
            && self.ty == other.ty
    }
}

/// What defines a value.
#[derive(Debug, Clone, Copy)]
pub enum Def<'a> {
    Input(&'a Input),
    Node(&'a Node),
}

/// A well-typed SSA program: inputs, topologically ordered nodes, and a nonempty list of outputs
/// (repeats allowed). Only a [`Builder`](super::Builder) makes one, so every program is well typed.
#[derive(Debug, Clone, PartialEq)]
pub struct Program {
    pub(crate) inputs: Vec<Input>,
    pub(crate) nodes: Vec<Node>,
    pub(crate) outputs: Vec<Var>,
}

impl Program {
    pub fn inputs(&self) -> &[Input] {
        &self.inputs
    }

    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    pub fn outputs(&self) -> &[Var] {
        &self.outputs
    }

    pub fn n_inputs(&self) -> usize {
        self.inputs.len()
    }

    pub fn n_nodes(&self) -> usize {
        self.nodes.len()
    }

    /// Number of values (inputs and nodes).
    pub fn n_vars(&self) -> usize {
        self.inputs.len() + self.nodes.len()
    }

    /// The value of input `i`.
    pub fn input_var(&self, i: usize) -> Var {
        Var(i as u32)
    }

    /// The value defined by node `i`.
    pub fn node_var(&self, i: usize) -> Var {
        Var((self.inputs.len() + i) as u32)
    }

    /// The node index of a value, if a node defines it.
    pub fn node_idx(&self, v: Var) -> Option<usize> {
        v.index().checked_sub(self.inputs.len())
    }

    pub fn def(&self, v: Var) -> Def<'_> {
        match self.node_idx(v) {
            None => Def::Input(&self.inputs[v.index()]),
            Some(i) => Def::Node(&self.nodes[i]),
        }
    }

    pub fn ty(&self, v: Var) -> &TensorType {
        match self.def(v) {
            Def::Input(i) => &i.ty,
            Def::Node(n) => &n.ty,
        }
    }

    pub fn name(&self, v: Var) -> &str {
        match self.def(v) {
            Def::Input(i) => &i.name,
            Def::Node(n) => &n.name,
        }
    }

    /// The value with this name.
    pub fn var(&self, name: &str) -> Option<Var> {
        (0..self.n_vars())
            .map(|i| Var(i as u32))
            .find(|&v| self.name(v) == name)
    }

    /// Name -> value for every value.
    pub fn names(&self) -> HashMap<&str, Var> {
        (0..self.n_vars())
            .map(|i| (self.name(Var(i as u32)), Var(i as u32)))
            .collect()
    }

    pub fn input_types(&self) -> Vec<TensorType> {
        self.inputs.iter().map(|i| i.ty.clone()).collect()
    }

    /// The name of each output occurrence: its value's name, and for the k-th repeat of one
    /// value (k = 1, 2, ...) that name with `.k` appended.
    ///
    /// ```
    /// use catml_core::ir::{Builder, InputKind};
    /// use catml_core::prim::Ops;
    /// use catml_core::tensor::{DType, TensorType};
    ///
    /// let mut b = Builder::new();
    /// let x = b.input("x", TensorType::new(DType::F64, [2]), InputKind::Data).unwrap();
    /// let y = b.tanh(x).unwrap();
    /// let p = b.finish(&[y, x, y]).unwrap();
    /// assert_eq!(p.output_names(), ["t", "x", "t.1"]);
    /// ```
    pub fn output_names(&self) -> Vec<String> {
        let mut seen: HashMap<Var, usize> = HashMap::new();
        self.outputs
            .iter()
            .map(|&o| {
                let k = seen.entry(o).or_insert(0);
                *k += 1;
                match *k {
                    1 => self.name(o).to_string(),
                    k => format!("{}.{}", self.name(o), k - 1),
                }
            })
            .collect()
    }

    pub fn output_types(&self) -> Vec<TensorType> {
        self.outputs.iter().map(|&v| self.ty(v).clone()).collect()
    }

    /// Indices of the parameter inputs.
    pub fn param_indices(&self) -> Vec<usize> {
        (0..self.inputs.len())
            .filter(|&i| self.inputs[i].kind == InputKind::Param)
            .collect()
    }

    /// The tag a value belongs to: a node's own tag, or for an input the tag of the first node
    /// that reads it.
    pub fn tag_of(&self, v: Var) -> Option<&str> {
        match self.def(v) {
            Def::Node(n) => n.tag.as_deref(),
            Def::Input(_) => self
                .nodes
                .iter()
                .find(|n| n.operands.contains(&v))
                .and_then(|n| n.tag.as_deref()),
        }
    }

    /// For each value, the index of the last node reading it (`None`: no node reads it).
    pub fn last_uses(&self) -> Vec<Option<usize>> {
        let mut last = vec![None; self.n_vars()];
        for (i, n) in self.nodes.iter().enumerate() {
            for &o in &n.operands {
                last[o.index()] = Some(i);
            }
        }
        last
    }
}

impl Program {
    /// The same program without nodes that no output depends on (inputs are all kept).
    pub fn pruned(&self) -> Program {
        self.pruned_map().0
    }

    /// As [`pruned`](Self::pruned), also returning where each value went (`None`: removed).
    pub fn pruned_map(&self) -> (Program, Vec<Option<Var>>) {
        let mut needed = vec![false; self.n_vars()];
        for &o in &self.outputs {
            needed[o.index()] = true;
        }
        for (i, n) in self.nodes.iter().enumerate().rev() {
            if needed[self.inputs.len() + i] {
                for &o in &n.operands {
                    needed[o.index()] = true;
                }
            }
        }
        let n_in = self.inputs.len();
        let mut map: Vec<Option<Var>> = (0..n_in).map(|i| Some(Var(i as u32))).collect();
        let mut nodes = Vec::new();
        for (i, n) in self.nodes.iter().enumerate() {
            if needed[n_in + i] {
                let mut n = n.clone();
                for o in &mut n.operands {
                    *o = map[o.index()].expect("operands of needed nodes are needed");
                }
                map.push(Some(Var((n_in + nodes.len()) as u32)));
                nodes.push(n);
            } else {
                map.push(None);
            }
        }
        let program = Program {
            inputs: self.inputs.clone(),
            nodes,
            outputs: self
                .outputs
                .iter()
                .map(|o| map[o.index()].expect("outputs are needed"))
                .collect(),
        };
        (program, map)
    }
}
