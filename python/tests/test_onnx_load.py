"""`catml.load` on ONNX models: initializers become stored parameters, and the program
evaluates and differentiates like a traced one."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import catml


def write_mlp(path, w, b):
    """y = relu(x @ w + b), x float32 (2, 3), with w and b as initializers."""
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["xw"]),
         helper.make_node("Add", ["xw", "b"], ["z"]),
         helper.make_node("Relu", ["z"], ["y"])],
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


def test_an_onnx_model_evaluates_and_differentiates(tmp_path):
    rng = np.random.default_rng(0)
    w = rng.normal(size=(3, 4)).astype(np.float32)
    b = rng.normal(size=4).astype(np.float32)
    x = rng.normal(size=(2, 3)).astype(np.float32)
    write_mlp(tmp_path / "mlp.onnx", w, b)
    p = catml.load(tmp_path / "mlp.onnx")
    assert [(n, s, d, k) for n, s, d, k in p.inputs] == [
        ("x", (2, 3), "f32", "data"), ("w", (3, 4), "f32", "param"), ("b", (4,), "f32", "param")]
    z = x @ w + b
    y = p.eval(x=x)
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, np.maximum(z, 0), rtol=1e-6)
    # The pullback of ones through relu: the mask of z > 0, times w^T for x, x^T for w.
    g = p.grad({"x": x}, np.ones((2, 4), np.float32))
    mask = (z > 0).astype(np.float32)
    np.testing.assert_allclose(g["x"], mask @ w.T, rtol=1e-6)
    np.testing.assert_allclose(g["w"], x.T @ mask, rtol=1e-6)
    np.testing.assert_allclose(g["b"], mask.sum(axis=0), rtol=1e-6)


def test_a_malformed_onnx_file_is_a_value_error_naming_it(tmp_path):
    path = tmp_path / "broken.onnx"
    path.write_bytes(b"\x0a\xff\xff\xff\xff\x0f not a model")
    with pytest.raises(catml.ValueError, match="broken.onnx"):
        catml.load(path)


def test_an_unsupported_operator_is_named(tmp_path):
    graph = helper.make_graph(
        [helper.make_node("Unique", ["x"], ["y"])], "u",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None])])
    path = tmp_path / "unique.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    with pytest.raises(catml.Error, match="Unique"):
        catml.load(path)
