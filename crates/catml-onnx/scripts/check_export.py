"""Runs the models written by `cargo run --release -p catml-onnx --example export_cases -- DIR`
in onnxruntime and compares them with CatML.

For every case: `onnx.checker.check_model(full_check=True)`; the whole program (forward, VJP,
JVP) against CatML's outputs (f64 programs: max |ort - catml| <= 1e-9 max(1, max |catml|);
programs with f32 values: the same error is reported); every node alone on its actual operands
against the f64 reference, in units of its primitive's budget (at most 1 where a budget is
stated). A model onnxruntime cannot load or run is a failure.

    python check_export.py DIR [--limit N] [--report FILE]

Exits 1 on any failure, after printing a summary.
"""

import argparse
import glob
import json
import os
import sys
import time

import numpy as np
import onnx
import onnxruntime as ort

DTYPES = {"f32": np.float32, "f64": np.float64, "i64": np.int64, "bool": np.bool_}
F64_TOL = 1e-9
U32 = 2.0**-24


def array(t):
    data = [float(v) if isinstance(v, str) else v for v in t["data"]]
    return np.array(data, dtype=DTYPES[t["dtype"]]).reshape(t["shape"])


def session(path):
    model = onnx.load(path)
    onnx.checker.check_model(model, full_check=True)
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    return ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])


def normwise(got, want):
    """max |got - want| / max(1, max |want|): relative for large values, absolute below 1."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    if got.shape != want.shape:
        return float("inf")
    err = np.max(np.abs(got - want)) if got.size else 0.0
    if err == 0.0:
        return 0.0
    return float(err / max(np.max(np.abs(want)), 1.0))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--limit", type=int, default=None, help="only the first N programs")
    ap.add_argument("--report", default=None, help="write the summary as JSON here")
    a = ap.parse_args()
    stems = sorted(p[: -len(".json")] for p in glob.glob(os.path.join(a.dir, "*-*.json"))
                   if not p.endswith(".nodes.json"))
    if a.limit is not None:
        keep = {f"{k:04d}" for k in range(a.limit)}
        stems = [s for s in stems if os.path.basename(s)[:4] in keep]
    start = time.time()
    failures = []
    whole = {"cases": 0, "f64_cases": 0, "f64_max_rel": 0.0, "f32_cases": 0, "f32_max_rel": 0.0}
    per_op = {}
    checked_models = 0
    for stem in stems:
        case = json.load(open(stem + ".json"))
        name = os.path.basename(stem)
        try:
            sess = session(stem + ".onnx")
            checked_models += 1
            feeds = {k: array(v) for k, v in case["inputs"].items()}
            got = sess.run([o["name"] for o in case["outputs"]], feeds)
        except Exception as e:  # a checker or runtime failure is a failed case
            failures.append(f"{name}: {type(e).__name__}: {str(e).splitlines()[0][:300]}")
            continue
        whole["cases"] += 1
        key = "f32" if case["f32_inside"] else "f64"
        whole[key + "_cases"] += 1
        for o, g in zip(case["outputs"], got):
            want = array(o["value"])
            if g.dtype != want.dtype or g.shape != want.shape:
                failures.append(f"{name}: output {o['name']}: {g.dtype}{g.shape} != {want.dtype}{want.shape}")
                continue
            rel = normwise(g, want)
            whole[key + "_max_rel"] = max(whole[key + "_max_rel"], rel)
            if key == "f64" and not rel <= F64_TOL:
                failures.append(f"{name}: output {o['name']}: normwise error {rel:.3e} > {F64_TOL}")
        if not os.path.exists(stem + ".nodes.json"):
            continue
        nodes = json.load(open(stem + ".nodes.json"))
        try:
            sess = session(stem + ".nodes.onnx")
            checked_models += 1
            feeds = {k: array(v) for k, v in nodes["inputs"].items()}
            got = sess.run([c["name"] for c in nodes["checks"]], feeds)
        except Exception as e:
            failures.append(f"{name} nodes: {type(e).__name__}: {str(e).splitlines()[0][:300]}")
            continue
        for c, g in zip(nodes["checks"], got):
            ref = np.asarray(c["reference"], np.float64)
            g64 = np.asarray(g, np.float64).reshape(-1)
            err = np.abs(g64 - ref)
            s = per_op.setdefault(c["op"] + "/" + c["dtype"], {"instances": 0, "max_over_budget": 0.0,
                                                                "measured_max_rel_u": 0.0, "over": 0})
            s["instances"] += 1
            norm = float(np.max(np.abs(ref))) if ref.size else 0.0
            if c["allowed"] is None:
                rel = float(np.max(err)) / norm if norm > 0 else float(np.max(err))
                s["measured_max_rel_u"] = max(s["measured_max_rel_u"], rel / U32)
                continue
            allowed = np.asarray(c["allowed"], np.float64) + 2.0**-40 * norm
            with np.errstate(divide="ignore", invalid="ignore"):
                over = np.where(err == 0.0, 0.0, err / allowed)
            worst = float(np.max(over)) if over.size else 0.0
            s["max_over_budget"] = max(s["max_over_budget"], worst)
            if not worst <= 1.0:
                s["over"] += 1
                failures.append(f"{name} node {c['node']} ({c['op']}, {c['dtype']}): {worst:.3g} times its budget")
    summary = {
        "programs": len({os.path.basename(s)[:4] for s in stems}),
        "models_checked": checked_models,
        "whole": whole,
        "nodes": per_op,
        "failures": len(failures),
        "seconds": round(time.time() - start, 1),
        "onnx": onnx.__version__,
        "onnxruntime": ort.__version__,
    }
    if a.report:
        with open(a.report, "w") as f:
            json.dump({**summary, "failure_list": failures}, f, indent=1)
    print(f"programs {summary['programs']}, models {checked_models} (check_model full_check passed), "
          f"whole-program cases {whole['cases']}: f64 {whole['f64_cases']} (max normwise {whole['f64_max_rel']:.2e}), "
          f"with f32 {whole['f32_cases']} (max normwise {whole['f32_max_rel']:.2e}); {summary['seconds']} s")
    print(f"{'op/dtype':28} {'nodes':>7} {'max/budget':>11} {'over 1':>6}")
    for op, s in sorted(per_op.items()):
        extra = f"  measured only: {s['measured_max_rel_u']:.2f} u" if s["max_over_budget"] == 0 and s["measured_max_rel_u"] else ""
        print(f"{op:28} {s['instances']:7d} {s['max_over_budget']:11.3f} {s['over']:5d}{extra}")
    for f in failures[:40]:
        print("FAIL", f)
    if failures:
        print(f"{len(failures)} failures")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
