"""Writes the ONNX backend node tests in the suite layout.

    python generate.py OUT_DIR

For each case: OUT_DIR/<case>/model.onnx and OUT_DIR/<case>/test_data_set_N/{input,output}_J.pb,
the layout of onnx's own backend test data. `collect_testcases()` builds the cases from the
operator generators of the installed onnx package, so the data matches its version exactly.
"""

import os
import re
import sys

import numpy as np
import onnx
import onnx.defs
from onnx import numpy_helper
from onnx.backend.test.case.node import collect_testcases


def write_tensor(path, value, name, type_proto):
    if isinstance(value, onnx.TensorProto):
        # Cases whose element types numpy lacks (Cast, CastLike) give their data as protos.
        tensor = onnx.TensorProto()
        tensor.CopyFrom(value)
        tensor.name = name
    elif (
        type_proto is not None
        and type_proto.HasField("tensor_type")
        and not isinstance(value, (list, tuple, dict))
    ):
        try:
            tensor = numpy_helper.from_array(np.asarray(value), name)
        except (NotImplementedError, TypeError, ValueError):
            return False
    else:
        # Sequences, maps and optionals: the runner counts such cases as unsupported.
        return False
    with open(path, "wb") as f:
        f.write(tensor.SerializeToString())
    return True


def snake(name):
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


def operator_of(case, schemas):
    """The operator a case tests: its node's type, or for a function's expanded form the
    operator whose snake-case name is the longest prefix of the case name."""
    nodes = case.model.graph.node
    if len(nodes) == 1:
        return nodes[0].op_type
    name = case.name[len("test_"):]
    best = max(
        (s for s in schemas if name.startswith(snake(s).replace("__", "_"))),
        key=len,
        default=nodes[-1].op_type,
    )
    return best


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    written = 0
    schemas = sorted({s.name for s in onnx.defs.get_all_schemas_with_history() if s.domain in ("", "ai.onnx")})
    for case in collect_testcases():
        if case.kind != "node":
            continue
        case_dir = os.path.join(out, case.name)
        os.makedirs(case_dir, exist_ok=True)
        with open(os.path.join(case_dir, "model.onnx"), "wb") as f:
            f.write(case.model.SerializeToString())
        with open(os.path.join(case_dir, "operator"), "w") as f:
            f.write(operator_of(case, schemas) + "\n")
        graph = case.model.graph
        ok = True
        for n, (inputs, outputs) in enumerate(case.data_sets):
            ds = os.path.join(case_dir, f"test_data_set_{n}")
            os.makedirs(ds, exist_ok=True)
            for j, value in enumerate(inputs):
                t = graph.input[j].type if j < len(graph.input) else None
                ok &= write_tensor(os.path.join(ds, f"input_{j}.pb"), value, graph.input[j].name if j < len(graph.input) else "", t)
            for j, value in enumerate(outputs):
                t = graph.output[j].type if j < len(graph.output) else None
                ok &= write_tensor(os.path.join(ds, f"output_{j}.pb"), value, graph.output[j].name if j < len(graph.output) else "", t)
        if not ok:
            with open(os.path.join(case_dir, "NOT_TENSORS"), "w") as f:
                f.write("inputs or outputs are not plain tensors\n")
        written += 1
    print(f"{written} node cases written to {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
