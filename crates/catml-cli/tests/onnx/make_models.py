"""Writes the small ONNX models the CLI tests read (onnx==1.23.2): python make_models.py"""

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

W = np.array([[1.0, -1.0, 0.5], [2.0, 0.0, -0.5]], dtype=np.float32)
B = np.array([0.1, 0.2, -0.3], dtype=np.float32)

dense = helper.make_graph(
    [
        helper.make_node("MatMul", ["x", "fc.W"], ["h"]),
        helper.make_node("Add", ["h", "fc.b"], ["z"]),
        helper.make_node("Relu", ["z"], ["y"]),
    ],
    "dense_relu",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 2])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])],
    [numpy_helper.from_array(W, "fc.W"), numpy_helper.from_array(B, "fc.b")],
)
onnx.save(helper.make_model(dense, opset_imports=[helper.make_opsetid("", 17)]), "dense_relu.onnx")

log = helper.make_graph(
    [helper.make_node("Log", ["x"], ["y"])],
    "log",
    [helper.make_tensor_value_info("x", TensorProto.DOUBLE, [2])],
    [helper.make_tensor_value_info("y", TensorProto.DOUBLE, [2])],
)
onnx.save(helper.make_model(log, opset_imports=[helper.make_opsetid("", 17)]), "log.onnx")

bad = helper.make_graph(
    [
        helper.make_node("FancyOp", ["x"], ["a"]),
        helper.make_node("Unique", ["x"], ["b"]),
        helper.make_node("Add", ["a", "b"], ["y"]),
    ],
    "unsupported",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
)
onnx.save(helper.make_model(bad, opset_imports=[helper.make_opsetid("", 17)]), "unsupported.onnx")
