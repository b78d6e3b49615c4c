//! The graph being written: unique value names, nodes, constants, and the export of one
//! program body, node by node, each through its family's mapping or else its lowering.

use std::collections::{BTreeMap, HashMap, HashSet};

use catml_core::ir::{Attrs, Builder, InputKind, Primitive, Program, Var};
use catml_core::tensor::{DType, Tensor, TensorType};

use super::proto_build::{attribute, i64_proto, tensor_proto, Attr};
use super::{families, ExportError};
use crate::proto::{AttributeProto, NodeProto};

/// How deep lowerings may nest before the export gives up (as `transform::lower`).
const MAX_DEPTH: usize = 16;

/// The nodes written so far and the names they use.
pub(crate) struct Graph {
    pub opset: i64,
    pub nodes: Vec<NodeProto>,
    taken: HashSet<String>,
    /// Primitives exported through their lowering, with how many applications.
    pub lowered: BTreeMap<String, usize>,
    /// Primitives exported as ONNX operators, with how many applications.
    pub native: BTreeMap<String, usize>,
}

impl Graph {
    pub fn new(opset: i64) -> Graph {
        Graph {
            opset,
            nodes: Vec::new(),
            taken: HashSet::new(),
            lowered: BTreeMap::new(),
            native: BTreeMap::new(),
        }
    }

    /// Claims a name; false when it is already used.
    pub fn reserve(&mut self, name: &str) -> bool {
        self.taken.insert(name.to_string())
    }

    /// An unused name: `hint`, else `hint.1`, `hint.2`, ...
    pub fn fresh(&mut self, hint: &str) -> String {
        let hint = if hint.is_empty() { "v" } else { hint };
        if self.reserve(hint) {
            return hint.to_string();
        }
        let mut k = 1;
        loop {
            let n = format!("{hint}.{k}");
            if self.reserve(&n) {
                return n;
            }
            k += 1;
        }
    }

    /// Appends a node writing `outputs`.
    pub fn node(
        &mut self,
        op: &str,
        inputs: &[&str],
        outputs: &[&str],
        attrs: Vec<AttributeProto>,
    ) {
        let name = format!(
            "{}#{}",
            outputs.first().copied().unwrap_or(op),
            self.nodes.len()
        );
        self.nodes.push(NodeProto {
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: outputs.iter().map(|s| s.to_string()).collect(),
            name,
            op_type: op.to_string(),
            attribute: attrs,
            ..Default::default()
        });
    }

    /// A node with one fresh output named after `hint`.
    pub fn op(
        &mut self,
        op: &str,
        inputs: &[&str],
        attrs: Vec<AttributeProto>,
        hint: &str,
    ) -> String {
        let out = self.fresh(hint);
        self.node(op, inputs, &[&out], attrs);
        out
    }

    /// A `Constant` node holding `t` (constants stay nodes, not initializers, so that
    /// initializers are exactly the parameters).
    pub fn constant(&mut self, t: &Tensor, hint: &str) -> String {
        let out = self.fresh(hint);
        self.node(
            "Constant",
            &[],
            &[&out],
            vec![attribute(
                "value",
                Attr::Tensor(Box::new(tensor_proto("", t))),
            )],
        );
        out
    }

    pub fn const_i64(&mut self, vals: &[i64], hint: &str) -> String {
        let out = self.fresh(hint);
        self.node(
            "Constant",
            &[],
            &[&out],
            vec![attribute(
                "value",
                Attr::Tensor(Box::new(i64_proto("", &[vals.len()], vals))),
            )],
        );
        out
    }

    pub fn const_scalar(&mut self, v: f64, dtype: DType, hint: &str) -> String {
        self.constant(&Tensor::scalar(dtype, v), hint)
    }
}

/// What a family's mapping did with one application.
pub(crate) enum Mapped {
    /// It wrote nodes computing the output.
    Done,
    /// It has no operator for this case (an attribute, dtype or opset): use the lowering.
    Lower,
    /// Use the lowering, computed in f64 and rounded once: the primitive's f32 kernel keeps to
    /// a budget its lowering's f32 roundings exceed.
    LowerInF64,
}

/// One application as a mapping sees it.
pub(crate) struct Site<'a> {
    pub g: &'a mut Graph,
    pub prim: &'a dyn Primitive,
    pub attrs: Attrs,
    /// The operands' value names and types.
    pub x: Vec<String>,
    pub xt: Vec<TensorType>,
    /// The output's type and the name it must be written to.
    pub ty: TensorType,
    pub out: String,
}

impl Site<'_> {
    /// Writes the final node, producing the output name.
    pub fn emit(&mut self, op: &str, inputs: &[&str], attrs: Vec<AttributeProto>) -> Mapped {
        let out = self.out.clone();
        self.g.node(op, inputs, &[&out], attrs);
        Mapped::Done
    }

    /// An intermediate node, named after the output.
    pub fn tmp(&mut self, op: &str, inputs: &[&str], attrs: Vec<AttributeProto>) -> String {
        let hint = format!("{}/{}", self.out, op);
        self.g.op(op, inputs, attrs, &hint)
    }

    /// `v` converted to `to` by an intermediate Cast node.
    pub fn cast(&mut self, v: &str, to: DType) -> String {
        self.tmp("Cast", &[v], cast_to(to))
    }

    /// Writes the final node: `v` converted to the output's dtype.
    pub fn emit_cast(&mut self, v: &str) -> Mapped {
        let to = cast_to(self.dtype());
        self.emit("Cast", &[v], to)
    }

    pub fn const_i64(&mut self, vals: &[i64]) -> String {
        let hint = format!("{}/const", self.out);
        self.g.const_i64(vals, &hint)
    }

    pub fn const_scalar(&mut self, v: f64, dtype: DType) -> String {
        let hint = format!("{}/const", self.out);
        self.g.const_scalar(v, dtype, &hint)
    }

    pub fn dtype(&self) -> DType {
        self.ty.dtype
    }

    pub fn attr_usize(&self, key: &str) -> Option<usize> {
        self.attrs
            .get(key)
            .and_then(|v| v.as_u64())
            .map(|v| v as usize)
    }

    pub fn attr_f64(&self, key: &str) -> Option<f64> {
        self.attrs.get(key).and_then(|v| v.as_f64())
    }

    pub fn attr_bool(&self, key: &str) -> bool {
        self.attrs
            .get(key)
            .and_then(|v| v.as_bool())
            .unwrap_or(false)
    }

    pub fn attr_usizes(&self, key: &str) -> Option<Vec<usize>> {
        self.attrs
            .get(key)?
            .as_array()?
            .iter()
            .map(|v| v.as_u64().map(|u| u as usize))
            .collect()
    }

    /// A padding attribute [[lo, hi], ...].
    pub fn attr_pads(&self, key: &str) -> Option<Vec<[usize; 2]>> {
        self.attrs
            .get(key)?
            .as_array()?
            .iter()
            .map(|p| {
                let p = p.as_array()?;
                Some([p.first()?.as_u64()? as usize, p.get(1)?.as_u64()? as usize])
            })
            .collect()
    }
}

/// Cast's attribute for a conversion to `to`.
fn cast_to(to: DType) -> Vec<AttributeProto> {
    vec![attribute("to", Attr::Int(crate::konst::code_of(to) as i64))]
}

/// The place of the program node being exported, for errors.
#[derive(Clone)]
pub(crate) struct NodePlace {
    pub index: usize,
    pub name: String,
    pub op: String,
}

/// Exports `p`'s nodes reading `inputs` (one value name per program input); output occurrence
/// k is written to `outputs[k]`. Inner value names are the program's own where free.
pub(crate) fn emit_program(
    g: &mut Graph,
    p: &Program,
    inputs: &[String],
    outputs: &[String],
    prefix: &str,
    place: Option<&NodePlace>,
    depth: usize,
) -> Result<(), ExportError> {
    let mut names: Vec<String> = inputs.to_vec();
    // The first output occurrence of each node value takes its output name directly.
    let mut direct: HashMap<Var, usize> = HashMap::new();
    for (k, &o) in p.outputs().iter().enumerate() {
        if o.index() >= p.n_inputs() {
            direct.entry(o).or_insert(k);
        }
    }
    for (i, node) in p.nodes().iter().enumerate() {
        let v = p.node_var(i);
        let out = match direct.get(&v) {
            Some(&k) => outputs[k].clone(),
            None => g.fresh(&format!("{prefix}{}", node.name)),
        };
        let here = place.cloned().unwrap_or_else(|| NodePlace {
            index: i,
            name: node.name.clone(),
            op: node.prim.name().to_string(),
        });
        let operand_names: Vec<String> = node
            .operands
            .iter()
            .map(|o| names[o.index()].clone())
            .collect();
        let operand_types: Vec<TensorType> =
            node.operands.iter().map(|o| p.ty(*o).clone()).collect();
        export_node(
            g,
            node.prim.as_ref(),
            operand_names,
            operand_types,
            node.ty.clone(),
            out.clone(),
            &here,
            depth,
        )?;
        names.push(out);
    }
    for (k, &o) in p.outputs().iter().enumerate() {
        let have = &names[o.index()];
        if *have != outputs[k] {
            let src = have.clone();
            g.node("Identity", &[&src], &[&outputs[k]], vec![]);
        }
    }
    Ok(())
}

/// One application: its family's operator, else its lowering, else an error naming the node.
#[allow(clippy::too_many_arguments)]
fn export_node(
    g: &mut Graph,
    prim: &dyn Primitive,
    x: Vec<String>,
    xt: Vec<TensorType>,
    ty: TensorType,
    out: String,
    place: &NodePlace,
    depth: usize,
) -> Result<(), ExportError> {
    if let Some(map) = families::lookup(prim.name()) {
        let mut site = Site {
            g,
            prim,
            attrs: prim.attrs(),
            x: x.clone(),
            xt: xt.clone(),
            ty: ty.clone(),
            out: out.clone(),
        };
        match map(&mut site)? {
            Mapped::Done => {
                *g.native.entry(prim.name().to_string()).or_default() += 1;
                return Ok(());
            }
            Mapped::Lower => {}
            Mapped::LowerInF64 if ty.dtype == DType::F32 => {
                let wide = |t: &TensorType| match t.dtype {
                    DType::F32 => TensorType::new(DType::F64, t.shape.clone()),
                    _ => t.clone(),
                };
                let hint = format!("{out}/f64");
                let x64: Vec<String> = x
                    .iter()
                    .zip(&xt)
                    .map(|(v, t)| match t.dtype {
                        DType::F32 => g.op("Cast", &[v], cast_to(DType::F64), &hint),
                        _ => v.clone(),
                    })
                    .collect();
                let xt64: Vec<TensorType> = xt.iter().map(wide).collect();
                let y64 = g.fresh(&hint);
                lower(g, prim, x64, xt64, wide(&ty), y64.clone(), place, depth)?;
                g.node("Cast", &[&y64], &[&out], cast_to(DType::F32));
                return Ok(());
            }
            Mapped::LowerInF64 => {}
        }
    }
    lower(g, prim, x, xt, ty, out, place, depth)
}

/// One application as its lowering, or an error naming the node.
#[allow(clippy::too_many_arguments)]
fn lower(
    g: &mut Graph,
    prim: &dyn Primitive,
    x: Vec<String>,
    xt: Vec<TensorType>,
    ty: TensorType,
    out: String,
    place: &NodePlace,
    depth: usize,
) -> Result<(), ExportError> {
    let unexportable = |why: String| ExportError::Unexportable {
        index: place.index,
        name: place.name.clone(),
        op: place.op.clone(),
        why,
    };
    if depth >= MAX_DEPTH {
        return Err(unexportable(format!(
            "`{}` is still expanding after {depth} nested lowerings",
            prim.name()
        )));
    }
    let mut sb = Builder::new();
    let mut args = Vec::with_capacity(xt.len());
    for (k, t) in xt.iter().enumerate() {
        let v = sb
            .input(&format!("x{k}"), t.clone(), InputKind::Data)
            .map_err(|e| unexportable(e.to_string()))?;
        args.push(v);
    }
    let Some(result) = prim.lower(&mut sb, &args) else {
        return Err(unexportable(format!(
            "primitive `{}` has no ONNX operator and no lowering",
            prim.name()
        )));
    };
    let y = result.map_err(|e| unexportable(format!("lowering `{}`: {e}", prim.name())))?;
    if sb.ty(y) != &ty {
        return Err(unexportable(format!(
            "lowering `{}` gives {}, expected {ty}",
            prim.name(),
            sb.ty(y)
        )));
    }
    let sub = sb
        .finish(&[y])
        .map_err(|e| unexportable(e.to_string()))?
        .pruned();
    *g.lowered.entry(prim.name().to_string()).or_default() += 1;
    let prefix = format!("{out}/");
    emit_program(g, &sub, &x, &[out], &prefix, Some(place), depth + 1)
}
