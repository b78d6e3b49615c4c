//! A model with every float32 tensor made float64 (inputs, outputs, initializers, constants,
//! casts, normalisation `stash_type`s): the same graph in double precision, for finite-difference checks of derivatives.

use crate::konst::elem;
use crate::proto::attribute_proto::AttributeType;
use crate::proto::{
    type_proto, AttributeProto, GraphProto, ModelProto, TensorProto, ValueInfoProto,
};

fn promote_tensor(t: &mut TensorProto) {
    if t.data_type != elem::FLOAT {
        return;
    }
    t.data_type = elem::DOUBLE;
    if !t.raw_data.is_empty() {
        t.double_data = t
            .raw_data
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64)
            .collect();
        t.raw_data.clear();
    } else {
        t.double_data = t.float_data.iter().map(|&x| x as f64).collect();
        t.float_data.clear();
    }
}

fn promote_info(v: &mut ValueInfoProto) {
    if let Some(type_proto::Value::TensorType(t)) = v.r#type.as_mut().and_then(|t| t.value.as_mut())
    {
        if t.elem_type == elem::FLOAT {
            t.elem_type = elem::DOUBLE;
        }
    }
}

fn promote_graph(g: &mut GraphProto) {
    g.input.iter_mut().for_each(promote_info);
    g.output.iter_mut().for_each(promote_info);
    g.value_info.iter_mut().for_each(promote_info);
    g.initializer.iter_mut().for_each(promote_tensor);
    for n in &mut g.node {
        for a in &mut n.attribute {
            if let Some(t) = a.t.as_mut() {
                promote_tensor(t);
            }
            if n.op_type == "Cast" && a.name == "to" && a.i == elem::FLOAT as i64 {
                a.i = elem::DOUBLE as i64;
            }
            // The precision of normalisation statistics (float32 when absent).
            if a.name == "stash_type" && a.i == elem::FLOAT as i64 {
                a.i = elem::DOUBLE as i64;
            }
        }
        if n.op_type == "LayerNormalization" && !n.attribute.iter().any(|a| a.name == "stash_type")
        {
            n.attribute.push(AttributeProto {
                name: "stash_type".to_string(),
                i: elem::DOUBLE as i64,
                r#type: AttributeType::Int as i32,
                ..AttributeProto::default()
            });
        }
    }
}

/// The model with float32 replaced by float64 throughout the main graph.
pub fn promote_to_f64(model: &ModelProto) -> ModelProto {
    let mut m = model.clone();
    if let Some(g) = m.graph.as_mut() {
        promote_graph(g);
    }
    m
}
