//! Building the protobuf messages of an exported model: tensors, attributes, value infos.

use catml_core::tensor::{Tensor, TensorType};

use crate::konst::{code_of, elem};
use crate::proto::{
    attribute_proto::AttributeType, tensor_shape_proto, type_proto, AttributeProto, TensorProto,
    TensorShapeProto, TypeProto, ValueInfoProto,
};

/// A tensor as a `TensorProto` (little-endian raw data; sub-byte elements packed as ONNX
/// packs them).
pub fn tensor_proto(name: &str, t: &Tensor) -> TensorProto {
    let raw: Vec<u8> = match t {
        Tensor::F32(a) => a.data().iter().flat_map(|v| v.to_le_bytes()).collect(),
        Tensor::F64(a) => a.data().iter().flat_map(|v| v.to_le_bytes()).collect(),
        Tensor::I64(a) => a.data().iter().flat_map(|v| v.to_le_bytes()).collect(),
        Tensor::Bool(a) => a.data().iter().map(|&v| u8::from(v)).collect(),
        Tensor::Stored(s) => crate::packed::pack(code_of(s.dtype()), &s.to_le_bytes()),
    };
    TensorProto {
        name: name.to_string(),
        dims: t.dims().iter().map(|&d| d as i64).collect(),
        data_type: code_of(t.dtype()),
        raw_data: raw,
        ..Default::default()
    }
}

/// An i64 tensor of these dims.
pub fn i64_proto(name: &str, dims: &[usize], vals: &[i64]) -> TensorProto {
    TensorProto {
        name: name.to_string(),
        dims: dims.iter().map(|&d| d as i64).collect(),
        data_type: elem::INT64,
        raw_data: vals.iter().flat_map(|v| v.to_le_bytes()).collect(),
        ..Default::default()
    }
}

/// A graph input or output of a fixed tensor type.
pub fn value_info(name: &str, ty: &TensorType) -> ValueInfoProto {
    let dim = ty
        .dims()
        .iter()
        .map(|&d| tensor_shape_proto::Dimension {
            value: Some(tensor_shape_proto::dimension::Value::DimValue(d as i64)),
            ..Default::default()
        })
        .collect();
    ValueInfoProto {
        name: name.to_string(),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: code_of(ty.dtype),
                shape: Some(TensorShapeProto { dim }),
            })),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Node attributes, built by name.
pub enum Attr {
    Int(i64),
    Ints(Vec<i64>),
    Float(f32),
    Str(&'static str),
    Tensor(Box<TensorProto>),
}

pub fn attribute(name: &str, a: Attr) -> AttributeProto {
    let mut p = AttributeProto {
        name: name.to_string(),
        ..Default::default()
    };
    match a {
        Attr::Int(i) => {
            p.r#type = AttributeType::Int as i32;
            p.i = i;
        }
        Attr::Ints(v) => {
            p.r#type = AttributeType::Ints as i32;
            p.ints = v;
        }
        Attr::Float(f) => {
            p.r#type = AttributeType::Float as i32;
            p.f = f;
        }
        Attr::Str(s) => {
            p.r#type = AttributeType::String as i32;
            p.s = s.as_bytes().to_vec();
        }
        Attr::Tensor(t) => {
            p.r#type = AttributeType::Tensor as i32;
            p.t = Some(*t);
        }
    }
    p
}
