//! Builds small ONNX models in memory with the generated protobuf types.
#![allow(dead_code)]

use catml_onnx::proto::{
    attribute_proto::AttributeType, tensor_shape_proto::dimension::Value as Dim,
    tensor_shape_proto::Dimension, type_proto, AttributeProto, GraphProto, ModelProto, NodeProto,
    OperatorSetIdProto, TensorProto, TensorShapeProto, TypeProto, ValueInfoProto,
};

pub fn value_info(name: &str, elem: i32, dims: &[i64]) -> ValueInfoProto {
    ValueInfoProto {
        name: name.to_string(),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: elem,
                shape: Some(TensorShapeProto {
                    dim: dims
                        .iter()
                        .map(|&d| Dimension {
                            value: Some(if d > 0 {
                                Dim::DimValue(d)
                            } else {
                                Dim::DimParam("batch".to_string())
                            }),
                            ..Default::default()
                        })
                        .collect(),
                }),
            })),
            ..Default::default()
        }),
        ..Default::default()
    }
}

pub fn node(op: &str, inputs: &[&str], outputs: &[&str]) -> NodeProto {
    NodeProto {
        op_type: op.to_string(),
        name: format!("{op}_{}", outputs.first().copied().unwrap_or("")),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: outputs.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    }
}

pub fn int_attr(name: &str, v: i64) -> AttributeProto {
    AttributeProto {
        name: name.to_string(),
        r#type: AttributeType::Int as i32,
        i: v,
        ..Default::default()
    }
}

pub fn floats(name: &str, dims: &[i64], data: &[f32]) -> TensorProto {
    TensorProto {
        name: name.to_string(),
        dims: dims.to_vec(),
        data_type: 1,
        float_data: data.to_vec(),
        ..Default::default()
    }
}

pub fn model(
    nodes: Vec<NodeProto>,
    inputs: Vec<ValueInfoProto>,
    outputs: Vec<ValueInfoProto>,
    inits: Vec<TensorProto>,
) -> ModelProto {
    ModelProto {
        ir_version: 8,
        opset_import: vec![OperatorSetIdProto {
            domain: String::new(),
            version: 17,
        }],
        graph: Some(GraphProto {
            name: "g".to_string(),
            node: nodes,
            input: inputs,
            output: outputs,
            initializer: inits,
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// y = relu(x W + b) for x (batch, 2), W (2, 3), b (3).
pub fn dense_relu() -> ModelProto {
    model(
        vec![
            node("MatMul", &["x", "fc.W"], &["h"]),
            node("Add", &["h", "fc.b"], &["z"]),
            node("Relu", &["z"], &["y"]),
        ],
        vec![value_info("x", 1, &[0, 2])],
        vec![value_info("y", 1, &[0, 3])],
        vec![
            floats("fc.W", &[2, 3], &[1.0, -1.0, 0.5, 2.0, 0.0, -0.5]),
            floats("fc.b", &[3], &[0.1, 0.2, -0.3]),
        ],
    )
}

pub fn float_attr(name: &str, v: f32) -> AttributeProto {
    AttributeProto {
        name: name.to_string(),
        r#type: AttributeType::Float as i32,
        f: v,
        ..Default::default()
    }
}

/// An f32 tensor.
pub fn f(dims: &[usize], v: &[f32]) -> catml_core::tensor::Tensor {
    catml_core::tensor::Tensor::f32(dims.to_vec(), v.to_vec()).unwrap()
}

/// The model's outputs for the graph inputs `args` in order (initializers bound by name),
/// evaluated with non-finite values flowing as IEEE arithmetic makes them, as ONNX has them.
pub fn outputs(
    m: &ModelProto,
    args: Vec<catml_core::tensor::Tensor>,
) -> Vec<catml_core::tensor::Tensor> {
    use catml_core::interp::{eval_with_options, EvalOptions};
    let im = catml_onnx::import(m, &catml_onnx::Shapes::new(), None).unwrap();
    let mut given = args.into_iter();
    let args: Vec<_> = im
        .program
        .inputs()
        .iter()
        .map(|i| match im.params.get(&i.name) {
            Some(t) => t.clone(),
            None => given.next().expect("an argument for each graph input"),
        })
        .collect();
    let opts = EvalOptions {
        check_non_finite: false,
        ..EvalOptions::default()
    };
    eval_with_options(&im.program, &args, opts).unwrap()
}

/// The model's first output (see [`outputs`]).
pub fn run(m: &ModelProto, args: Vec<catml_core::tensor::Tensor>) -> catml_core::tensor::Tensor {
    outputs(m, args).remove(0)
}
