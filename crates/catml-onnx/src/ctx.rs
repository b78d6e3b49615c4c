//! What an operator mapping sees: the node, its operands (program values or known constants),
//! its attributes, and the builder to emit into.

use std::collections::HashMap;
use std::sync::Arc;

use catml_core::ir::{Builder, Var};
use catml_core::prim::Ops;
use catml_core::tensor::{DType, TensorType};

use crate::konst::{code_of, dtype_of, elem, Const};
use crate::proto::{attribute_proto::AttributeType, AttributeProto, NodeProto};
use crate::read::read_tensor;
use crate::OnnxError;

/// An ONNX value during import: a program value, or a value known at import time.
#[derive(Debug, Clone)]
pub enum Value {
    Var(Var),
    Const(Arc<Const>),
}

/// One node's view of the import.
pub struct Ctx<'a> {
    pub b: &'a mut Builder,
    pub node: &'a NodeProto,
    pub index: usize,
    pub opset: i64,
    inputs: Vec<Option<Value>>,
    known: &'a HashMap<Var, Const>,
    /// Each input's storage dtype before it was widened (`storage.rs`), where it had one.
    storage: Vec<Option<DType>>,
}

pub type R<T> = Result<T, OnnxError>;

/// Runs a builder call, then turns its type error into an error of the node.
#[macro_export]
#[doc(hidden)]
macro_rules! t {
    ($c:ident, $e:expr) => {{
        let r = $e;
        r.map_err(|er| $c.err(er.to_string()))
    }};
}

impl<'a> Ctx<'a> {
    pub fn new(
        b: &'a mut Builder,
        node: &'a NodeProto,
        index: usize,
        opset: i64,
        inputs: Vec<Option<Value>>,
        known: &'a HashMap<Var, Const>,
    ) -> Ctx<'a> {
        Ctx {
            b,
            node,
            index,
            opset,
            inputs,
            known,
            storage: Vec::new(),
        }
    }

    /// The same view, told which inputs were widened from which storage dtypes.
    pub fn with_storage(mut self, storage: Vec<Option<DType>>) -> Ctx<'a> {
        self.storage = storage;
        self
    }

    /// The ONNX element type an input had in the model (a storage dtype before widening).
    pub fn model_elem(&self, i: usize) -> R<i32> {
        match self.storage.get(i).copied().flatten() {
            Some(d) => Ok(code_of(d)),
            None => Ok(self.elem_dims(i)?.0),
        }
    }

    // Errors.

    pub fn err(&self, message: impl Into<String>) -> OnnxError {
        OnnxError::Node {
            index: self.index,
            name: self.node.name.clone(),
            op: self.node.op_type.clone(),
            message: message.into(),
        }
    }

    pub fn unsupported(&self, what: impl Into<String>) -> OnnxError {
        OnnxError::Unsupported {
            index: self.index,
            name: self.node.name.clone(),
            op: self.node.op_type.clone(),
            what: what.into(),
        }
    }

    // Operands.

    pub fn n_inputs(&self) -> usize {
        self.inputs.len()
    }

    pub fn has(&self, i: usize) -> bool {
        matches!(self.inputs.get(i), Some(Some(_)))
    }

    pub fn value(&self, i: usize) -> R<&Value> {
        self.inputs
            .get(i)
            .and_then(Option::as_ref)
            .ok_or_else(|| self.err(format!("input {i} is required")))
    }

    /// The operand as a program value (a known value becomes a constant node).
    pub fn var(&mut self, i: usize) -> R<Var> {
        match self.value(i)?.clone() {
            Value::Var(v) => Ok(v),
            Value::Const(c) => {
                let t = c
                    .to_tensor()
                    .map_err(|m| self.unsupported(format!("input {i}: {m}")))?;
                let v = self.b.constant(t).map_err(|e| self.err(e.to_string()))?;
                self.inputs[i] = Some(Value::Var(v));
                Ok(v)
            }
        }
    }

    /// The operand's value if it is known at import time (constants and initializers).
    pub fn known(&self, i: usize) -> Option<Const> {
        match self.inputs.get(i)?.as_ref()? {
            Value::Const(c) => Some((**c).clone()),
            Value::Var(v) => self.known.get(v).cloned(),
        }
    }

    /// A known operand, required (shapes, axes, pads given as inputs).
    pub fn need_known(&self, i: usize, what: &str) -> R<Const> {
        self.known(i).ok_or_else(|| {
            self.unsupported(format!("{what} (input {i}) must be known at import time"))
        })
    }

    /// ONNX element type code and dims of an operand.
    pub fn elem_dims(&self, i: usize) -> R<(i32, Vec<usize>)> {
        Ok(match self.value(i)? {
            Value::Var(v) => {
                let ty = self.b.ty(*v);
                (code_of(ty.dtype), ty.dims().to_vec())
            }
            Value::Const(c) => (c.elem, c.dims.clone()),
        })
    }

    pub fn dims(&self, i: usize) -> R<Vec<usize>> {
        Ok(self.elem_dims(i)?.1)
    }

    pub fn rank(&self, i: usize) -> R<usize> {
        Ok(self.dims(i)?.len())
    }

    /// The CatML dtype of an operand, or unsupported.
    pub fn dtype(&self, i: usize) -> R<DType> {
        let code = self.elem_dims(i)?.0;
        dtype_of(code).ok_or_else(|| {
            self.unsupported(format!(
                "input {i} has dtype {}, which the CatML tensor layer does not hold",
                elem::name(code)
            ))
        })
    }

    /// A float operand as a program value.
    pub fn fvar(&mut self, i: usize) -> R<Var> {
        let d = self.dtype(i)?;
        if !d.is_float() {
            return Err(self.unsupported(format!(
                "input {i} has dtype {d}; this mapping needs a float"
            )));
        }
        self.var(i)
    }

    /// Operand `i` as a program value of a float dtype or i64 (the integer types compute in
    /// i64, `storage.rs`); `ordered` refuses uint64, whose values past 2^63 wrap to negative
    /// i64 values, for mappings that order, divide or take signs.
    pub fn nvar(&mut self, i: usize, ordered: bool) -> R<Var> {
        let d = self.dtype(i)?;
        if d == DType::I64 {
            if ordered && self.model_elem(i)? == crate::konst::elem::UINT64 {
                return Err(self.unsupported(format!(
                    "input {i} is uint64, which this mapping would order as i64 (values past \
                     2^63 wrap to negative)"
                )));
            }
            return self.var(i);
        }
        self.fvar(i)
    }

    // Attributes.

    pub fn attr(&self, name: &str) -> Option<&'a AttributeProto> {
        self.node.attribute.iter().find(|a| a.name == name)
    }

    fn attr_field(&self, name: &str) -> String {
        format!("attribute `{name}`")
    }

    fn check_kind(&self, a: &AttributeProto, kind: AttributeType) -> R<()> {
        if !a.ref_attr_name.is_empty() {
            return Err(self.unsupported(format!(
                "{}: reference attributes",
                self.attr_field(&a.name)
            )));
        }
        // Writers that leave `type` unset are accepted; a set type must match.
        if a.r#type != 0 && a.r#type != kind as i32 {
            return Err(self.err(format!(
                "{} has type {}, expected {}",
                self.attr_field(&a.name),
                AttributeType::try_from(a.r#type)
                    .map(|t| t.as_str_name())
                    .unwrap_or("unknown"),
                kind.as_str_name()
            )));
        }
        Ok(())
    }

    pub fn int_opt(&self, name: &str) -> R<Option<i64>> {
        match self.attr(name) {
            None => Ok(None),
            Some(a) => {
                self.check_kind(a, AttributeType::Int)?;
                Ok(Some(a.i))
            }
        }
    }

    pub fn int(&self, name: &str, default: i64) -> R<i64> {
        Ok(self.int_opt(name)?.unwrap_or(default))
    }

    pub fn float(&self, name: &str, default: f32) -> R<f32> {
        match self.attr(name) {
            None => Ok(default),
            Some(a) => {
                self.check_kind(a, AttributeType::Float)?;
                Ok(a.f)
            }
        }
    }

    pub fn ints(&self, name: &str) -> R<Option<Vec<i64>>> {
        match self.attr(name) {
            None => Ok(None),
            Some(a) => {
                self.check_kind(a, AttributeType::Ints)?;
                Ok(Some(a.ints.clone()))
            }
        }
    }

    pub fn floats(&self, name: &str) -> R<Option<Vec<f32>>> {
        match self.attr(name) {
            None => Ok(None),
            Some(a) => {
                self.check_kind(a, AttributeType::Floats)?;
                Ok(Some(a.floats.clone()))
            }
        }
    }

    pub fn string(&self, name: &str, default: &str) -> R<String> {
        match self.attr(name) {
            None => Ok(default.to_string()),
            Some(a) => {
                self.check_kind(a, AttributeType::String)?;
                String::from_utf8(a.s.clone())
                    .map_err(|_| self.err(format!("{} is not UTF-8", self.attr_field(name))))
            }
        }
    }

    pub fn strings(&self, name: &str) -> R<Option<Vec<String>>> {
        match self.attr(name) {
            None => Ok(None),
            Some(a) => {
                self.check_kind(a, AttributeType::Strings)?;
                a.strings
                    .iter()
                    .map(|s| {
                        String::from_utf8(s.clone()).map_err(|_| {
                            self.err(format!("{} is not UTF-8", self.attr_field(name)))
                        })
                    })
                    .collect::<R<Vec<_>>>()
                    .map(Some)
            }
        }
    }

    pub fn tensor_attr(&self, name: &str) -> R<Option<Const>> {
        match self.attr(name) {
            None => Ok(None),
            Some(a) => {
                self.check_kind(a, AttributeType::Tensor)?;
                let t = a
                    .t
                    .as_ref()
                    .ok_or_else(|| self.err(format!("{} has no tensor", self.attr_field(name))))?;
                let field = format!(
                    "node {} `{}` attribute `{name}`",
                    self.index, self.node.name
                );
                read_tensor(t, &field, None).map(Some)
            }
        }
    }

    /// An axis attribute or operand normalised against `rank` (negative counts from the end).
    pub fn axis(&self, axis: i64, rank: usize) -> R<usize> {
        let r = rank as i64;
        let a = if axis < 0 { axis + r } else { axis };
        if a < 0 || a >= r.max(1) {
            return Err(self.err(format!("axis {axis} is out of range for rank {rank}")));
        }
        Ok(a as usize)
    }

    // Emitting.

    pub fn ty(&self, v: Var) -> TensorType {
        self.b.ty(v).clone()
    }

    /// `v` broadcast (numpy rules, leading axes added) to `dims`. The core broadcasts floats
    /// and i64; a bool goes through f32 and back (exact).
    pub fn expand_to(&mut self, v: Var, dims: &[usize]) -> R<Var> {
        let ty = self.ty(v);
        if ty.dims() == dims {
            return Ok(v);
        }
        let r = ty.rank();
        if r > dims.len() {
            return Err(self.err(format!("cannot broadcast {ty} to {dims:?}")));
        }
        let offset = dims.len() - r;
        let map: Vec<usize> = (offset..dims.len()).collect();
        match ty.dtype {
            DType::Bool => {
                let f = self
                    .b
                    .convert(v, DType::F32)
                    .map_err(|e| self.err(e.to_string()))?;
                let f = self
                    .b
                    .broadcast(f, dims.to_vec(), map)
                    .map_err(|e| self.err(e.to_string()))?;
                self.b
                    .convert(f, DType::Bool)
                    .map_err(|e| self.err(e.to_string()))
            }
            _ => self
                .b
                .broadcast(v, dims.to_vec(), map)
                .map_err(|e| self.err(e.to_string())),
        }
    }

    /// A constant of float `dtype` with the given elements (row-major).
    pub fn constant_of(&mut self, dtype: DType, dims: &[usize], data: Vec<f64>) -> R<Var> {
        let t = catml_core::tensor::Tensor::from_f64s(dtype, dims.to_vec(), data)
            .map_err(|e| self.err(e.to_string()))?;
        self.b.constant(t).map_err(|e| self.err(e.to_string()))
    }

    /// A scalar constant of `dtype` broadcast to `dims` (a whole constant for i64 and bool,
    /// which the core does not broadcast).
    pub fn full(&mut self, value: f64, dtype: DType, dims: &[usize]) -> R<Var> {
        let ty = TensorType::new(dtype, dims.to_vec());
        let r = if dtype.is_float() {
            self.b.full(value, &ty)
        } else {
            self.b
                .constant(catml_core::tensor::Tensor::full(&ty, value))
        };
        r.map_err(|e| self.err(e.to_string()))
    }
}

/// The numpy broadcast of two shapes.
pub fn broadcast_dims(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let n = a.len().max(b.len());
    let mut out = vec![0; n];
    for (k, o) in out.iter_mut().enumerate() {
        let da = if k + a.len() >= n {
            a[k + a.len() - n]
        } else {
            1
        };
        let db = if k + b.len() >= n {
            b[k + b.len() - n]
        } else {
            1
        };
        *o = if da == db || db == 1 {
            da
        } else if da == 1 {
            db
        } else {
            return None;
        };
    }
    Some(out)
}
