"""Runs a spec's training step, written by `catml export SPEC.toml --train-step STEP.onnx`, for
N steps in onnxruntime and compares the parameters and optimiser state with the checkpoint
`catml train SPEC.toml` wrote (N = the checkpoint's step count).

The spec must take one full batch per step: `batch_size` equal to the rows of `data.train`, and
every row holding every object (no empty cells), so each step's batch is the whole file, each
term weighing every row 1/rows. The trainer shuffles the rows inside that batch; the script
takes them in file order, so sums over the batch are added in another order (a rounding
difference only).

The model is checked with `onnx.checker.check_model(full_check=True)`; its initializers are the
spec's starting parameters, the buffers start at zero and `step` at 0.

    python train_step.py SPEC.toml STEP.onnx CHECKPOINT.safetensors

Prints the largest absolute and relative (max |ort - catml| / max |catml| per tensor)
differences; exits 1 if the relative one exceeds 1e-12 (f64) or 1e-5 (f32).
"""

import argparse
import csv
import json
import os
import sys
import tomllib

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

DTYPES = {"f32": np.float32, "f64": np.float64}
SAFETENSORS = {"F32": ("<f4", np.float32), "F64": ("<f8", np.float64), "I64": ("<i8", np.int64)}
TOLERANCE = {np.float32: 1e-5, np.float64: 1e-12}
BUFFERS = ("momentum/", "m/", "v/")


def read_safetensors(path):
    """Every tensor of a safetensors file: 8 bytes of header length, a JSON header, the data."""
    with open(path, "rb") as f:
        data = f.read()
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8 : 8 + n])
    base = 8 + n
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        start, end = t["data_offsets"]
        stored, native = SAFETENSORS[t["dtype"]]
        raw = np.frombuffer(data[base + start : base + end], dtype=stored)
        out[name] = raw.reshape(t["shape"]).astype(native)
    return out


def batch_of(spec, spec_dir):
    """The whole training file as one batch: `data:<object>` and `weight:<term>`."""
    with open(os.path.join(spec_dir, spec["data"]["train"]), newline="") as f:
        rows = list(csv.DictReader(f))
    n = len(rows)
    if n != spec["batch_size"]:
        sys.exit(f"{n} rows but batch_size {spec['batch_size']}: the script needs one full batch per step")
    feeds = {}
    for name, o in spec["objects"].items():
        dtype = DTYPES[o.get("dtype", "f32")]
        if "labels" in o:
            classes = o["shape"][0]
            labels = [int(float(r[o["labels"]])) for r in rows]
            feeds[f"data:{name}"] = np.eye(classes, dtype=dtype)[labels]
        elif "columns" in o:
            cells = [[r[c] for c in o["columns"]] for r in rows]
            if any(c == "" for row in cells for c in row):
                sys.exit(f"object {name}: empty cells; the script needs every row complete")
            feeds[f"data:{name}"] = np.array(cells, dtype=np.float64).astype(dtype).reshape([n] + o["shape"])
    dtype = DTYPES[next(iter(spec["objects"].values())).get("dtype", "f32")]
    terms = [e.get("name", f"equation{i}") for i, e in enumerate(spec.get("equations", []))]
    terms += [s.get("name", f"supervised{i}") for i, s in enumerate(spec.get("supervised", []))]
    for t in terms:
        feeds[f"weight:{t}"] = np.full([n], 1.0 / n, dtype=dtype)
    return feeds


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("spec")
    ap.add_argument("model")
    ap.add_argument("checkpoint")
    a = ap.parse_args()
    with open(a.spec, "rb") as f:
        spec = tomllib.load(f)
    model = onnx.load(a.model)
    onnx.checker.check_model(model, full_check=True)
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    sess = ort.InferenceSession(a.model, opts, providers=["CPUExecutionProvider"])

    batch = batch_of(spec, os.path.dirname(os.path.abspath(a.spec)))
    values = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    params = list(values)
    # Every graph input, those with initializers too (onnxruntime's get_inputs() leaves them
    # out; fed, they override the initializer).
    inputs = [i.name for i in model.graph.input]
    for name in inputs:
        if name.startswith(BUFFERS):
            values[name] = np.zeros_like(values[name.split("/", 1)[1]])
    ckpt = read_safetensors(a.checkpoint)
    steps = int(ckpt["optim/step"])
    outputs = [o.name for o in sess.get_outputs()]
    for k in range(steps):
        feeds = {n: values[n] if n in values else batch.get(n) for n in inputs}
        feeds["step"] = np.array(k, dtype=np.int64)
        got = dict(zip(outputs, sess.run(outputs, feeds)))
        for name, v in got.items():
            if name.startswith("new:"):
                values[name[4:]] = v
        print(f"step {k + 1}: loss {float(got['loss']):.9g}, lr {float(got['lr']):.6g}, "
              f"grad_norm {float(got['grad_norm']):.6g}")

    worst_abs, worst_rel, dtype, compared = 0.0, 0.0, None, 0
    for name, v in values.items():
        key = f"param/{name}" if name in params else f"optim/{name}"
        want = ckpt[key]
        if v.shape != want.shape or v.dtype != want.dtype:
            sys.exit(f"{name}: {v.dtype}{v.shape} but the checkpoint has {want.dtype}{want.shape}")
        err = float(np.max(np.abs(v.astype(np.float64) - want.astype(np.float64))))
        scale = float(np.max(np.abs(want.astype(np.float64))))
        worst_abs = max(worst_abs, err)
        worst_rel = max(worst_rel, err / scale if scale > 0 else err)
        dtype = want.dtype.type
        compared += 1
    missing = [k for k in ckpt if k != "optim/step" and k.split("/", 1)[1] not in values]
    if missing:
        sys.exit(f"the checkpoint holds {missing} which the model does not produce")
    limit = TOLERANCE[dtype]
    print(f"{compared} tensors after {steps} steps ({np.dtype(dtype).name}): max |ort - catml| "
          f"{worst_abs:.3e}, max relative {worst_rel:.3e} (limit {limit:g}); "
          f"onnx {onnx.__version__}, onnxruntime {ort.__version__}")
    return 0 if worst_rel <= limit else 1


if __name__ == "__main__":
    sys.exit(main())
