//! Where each part of a derivative program sits: its seeds, its primal outputs, and each
//! input's gradient (reverse mode) or tangent (forward mode), with the names they carry.
//!
//! Reverse mode, from [`vjp`](super::vjp) or [`grad`](super::grad):
//! - inputs: the primal program's inputs, then one seed `seed.<k>` per output occurrence
//!   (none in `grad`, whose seed is fixed to 1 inside the program);
//! - outputs: the primal outputs (their own values), then `grad.<input>` for each float input.
//!
//! Forward mode, from [`jvp`](super::jvp):
//! - inputs: the primal inputs, then `tangent.<input>` for each float input;
//! - outputs: the primal outputs, then `tangent.<output>` for each output occurrence (an
//!   output that is an input has that input's tangent, the tangent input itself, as its
//!   tangent);
//! - the tangent of an inner node `h` is named `h.dot`.
//!
//! A repeated output's later occurrences are named `<output>.<k>` (k = 1, 2, ...), as
//! [`Program::output_names`](crate::ir::Program::output_names) gives them. A derived name
//! already taken by a primal value (an input named `tangent.x`, say) gets the next free `.<k>`
//! suffix; the layout records the names as given.
//!
//! ```
//! use catml_core::ad;
//! use catml_core::ir::{Builder, InputKind};
//! use catml_core::prim::Ops;
//! use catml_core::tensor::{DType, Tensor, TensorType};
//!
//! let t = TensorType::new(DType::F64, [2]);
//! let mut b = Builder::new();
//! let x = b.input("x", t.clone(), InputKind::Data).unwrap();
//! let w = b.input("W", t, InputKind::Param).unwrap();
//! let y = b.mul(x, w).unwrap();
//! let l = b.sum(y, None).unwrap();
//! let p = b.finish(&[l]).unwrap();
//!
//! let v = ad::vjp(&p).unwrap();
//! assert_eq!(v.layout.seeds, vec![2]); // input 2 of the VJP program is `seed.0`
//! assert_eq!(v.program.inputs()[2].name, "seed.0");
//! let gw = v.layout.gradient_named("W").unwrap();
//! assert_eq!(v.program.name(v.program.outputs()[gw.index]), "grad.W");
//!
//! let x_val = Tensor::f64([2], vec![3.0, 4.0]).unwrap();
//! let w_val = Tensor::f64([2], vec![0.5, 2.0]).unwrap();
//! let one = Tensor::f64([], vec![1.0]).unwrap();
//! let out = catml_core::interp::eval(&v.program, &[x_val.clone(), w_val, one]).unwrap();
//! assert_eq!(v.layout.primal_outputs(&out)[0].item().unwrap(), 9.5);
//! assert_eq!(v.layout.gradient_by_name(&out, "W").unwrap(), &x_val); // d(x·W)/dW = x
//! ```

use crate::ir::{Builder, InputKind, Program, Var};
use crate::prim::Ops;
use crate::tensor::TensorType;

/// A forward value the reverse pass reads (a residual of the tape).
#[derive(Debug, Clone, PartialEq)]
pub struct Residual {
    pub name: String,
    pub ty: TensorType,
    /// True for program inputs (saved as given), false for computed forward values.
    pub is_input: bool,
}

impl Residual {
    pub fn bytes(&self) -> usize {
        self.ty.bytes()
    }
}

/// One input of the primal program that has a derivative slot in a derivative program.
#[derive(Debug, Clone, PartialEq)]
pub struct Slot {
    /// Its index among the primal program's inputs.
    pub input: usize,
    /// Its name in the primal program (`W1`).
    pub name: String,
    pub kind: InputKind,
    /// For a parameter: the tag of the first node reading it, as `interp::params` counts it.
    pub tag: Option<String>,
    /// Reverse mode: the index of its gradient among the outputs. Forward mode: the index of
    /// its tangent among the inputs.
    pub index: usize,
}

/// The layout of a reverse-mode program (see the [module docs](self)).
#[derive(Debug, Clone, PartialEq)]
pub struct VjpLayout {
    pub n_primal_inputs: usize,
    /// The program input index of each output occurrence's seed (empty when fixed to 1).
    pub seeds: Vec<usize>,
    /// The names of the primal output occurrences, which come first among the outputs.
    pub outputs: Vec<String>,
    /// One per float input of the primal program, in input order; `index` is the output.
    pub gradients: Vec<Slot>,
    /// The forward values read by the backward nodes.
    pub residuals: Vec<Residual>,
}

impl VjpLayout {
    pub fn n_primal_outputs(&self) -> usize {
        self.outputs.len()
    }

    /// The output index of primal input `input`'s gradient (`None` for integer inputs).
    pub fn gradient_output(&self, input: usize) -> Option<usize> {
        self.gradients
            .iter()
            .find(|g| g.input == input)
            .map(|g| g.index)
    }

    /// The gradient slot of the primal input named `name`.
    pub fn gradient_named(&self, name: &str) -> Option<&Slot> {
        self.gradients.iter().find(|g| g.name == name)
    }

    /// The primal outputs among the program's output values.
    pub fn primal_outputs<'a, T>(&self, values: &'a [T]) -> &'a [T] {
        &values[..self.outputs.len()]
    }

    /// Primal input `input`'s gradient among the program's output values.
    pub fn gradient<'a, T>(&self, values: &'a [T], input: usize) -> Option<&'a T> {
        self.gradient_output(input).map(|k| &values[k])
    }

    /// The gradient of the primal input named `name` among the program's output values.
    pub fn gradient_by_name<'a, T>(&self, values: &'a [T], name: &str) -> Option<&'a T> {
        self.gradient_named(name).map(|g| &values[g.index])
    }

    pub fn residual_bytes(&self) -> usize {
        self.residuals.iter().map(Residual::bytes).sum()
    }
}

/// The layout of a forward-mode program (see the [module docs](self)).
#[derive(Debug, Clone, PartialEq)]
pub struct JvpLayout {
    pub n_primal_inputs: usize,
    /// One per float input of the primal program, in input order; `index` is the input.
    pub tangent_inputs: Vec<Slot>,
    /// The names of the primal output occurrences, which come first among the outputs.
    pub outputs: Vec<String>,
    /// The names of the tangent outputs (`tangent.<output>`), one per output occurrence.
    pub tangents: Vec<String>,
}

impl JvpLayout {
    pub fn n_primal_outputs(&self) -> usize {
        self.outputs.len()
    }

    /// The program input index of primal input `input`'s tangent (`None` for integer inputs).
    pub fn tangent_input(&self, input: usize) -> Option<usize> {
        self.tangent_inputs
            .iter()
            .find(|t| t.input == input)
            .map(|t| t.index)
    }

    /// The primal outputs among the program's output values.
    pub fn primal_outputs<'a, T>(&self, values: &'a [T]) -> &'a [T] {
        &values[..self.outputs.len()]
    }

    /// The tangents of the outputs among the program's output values, in output order.
    pub fn tangents<'a, T>(&self, values: &'a [T]) -> &'a [T] {
        &values[self.outputs.len()..]
    }
}

/// The slot of each float input of `p`, with `index(k)` for the k-th such input.
pub(crate) fn slots(p: &Program, index: impl Fn(usize) -> usize) -> Vec<Slot> {
    p.inputs()
        .iter()
        .enumerate()
        .filter(|(_, i)| i.ty.dtype.is_float())
        .enumerate()
        .map(|(k, (i, input))| Slot {
            input: i,
            name: input.name.clone(),
            kind: input.kind,
            tag: match input.kind {
                InputKind::Param => p.tag_of(p.input_var(i)).map(str::to_string),
                InputKind::Data => None,
            },
            index: index(k),
        })
        .collect()
}

/// Gives each derived output its own value named `names[k]`: a value that already carries
/// that name is kept; a node made by the transform (index >= `first_derived`) that no earlier
/// output took is renamed; anything else (an input, a forward value, a value already named) is
/// copied by an identity reshape, tagged `tags[k]`.
pub(crate) fn name_outputs(
    b: &mut Builder,
    vars: &mut [Var],
    names: &[String],
    tags: &[Option<String>],
    first_derived: usize,
) -> Result<(), crate::ir::TypeError> {
    let mut taken = std::collections::HashSet::new();
    for ((v, name), tag) in vars.iter_mut().zip(names).zip(tags) {
        if b.name(*v) == name && !taken.contains(v) {
            taken.insert(*v);
            continue;
        }
        if v.index() >= first_derived && !taken.contains(v) && b.rename_node(*v, name) {
            taken.insert(*v);
            continue;
        }
        let prefix = b.set_name_prefix(name);
        let saved = b.set_tag(tag.clone());
        let shape = b.ty(*v).shape.clone();
        let copy = b.reshape(*v, shape);
        b.set_name_prefix(&prefix);
        b.set_tag(saved);
        *v = copy?;
        taken.insert(*v);
    }
    Ok(())
}
