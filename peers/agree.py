"""Check CatML's `grad` command against JAX (and a NumPy closed form).

Usage: peers/run.sh agree [MODULE] [INPUTS] [--tol TOL]

MODULE is a LensIR module file, INPUTS a JSON map from input name to tensor
({"dtype", "shape", "data": flat row-major}). Both default to the tied
residual block in modules/. The module is evaluated by a small LensIR
interpreter written in JAX, differentiated with jax.vjp in f64 against an
all-ones cotangent (the CLI's default), and compared with CatML's outputs and
gradients. For the tied residual block the hand-derived NumPy closed form is
compared too. Exits 1 if any max abs error exceeds TOL.
"""

import argparse
import json
import os
import pathlib
import subprocess
import sys

import common

common.scrub_blas_env()  # before NumPy is imported, so OpenBLAS sees a clean env

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

jax.config.update("jax_enable_x64", True)  # the reference is computed in f64

DEFAULT_MODULE = common.REPO_ROOT / "modules" / "tied_residual.json"
DEFAULT_INPUTS = common.REPO_ROOT / "modules" / "tied_residual.inputs.json"


# ---------------------------------------------------------------- LensIR in JAX


def _permute(x, attrs):
    return jnp.transpose(x, attrs.get("perm", attrs.get("axes")))


def _sum(x, attrs):
    axes = attrs.get("axes")
    return jnp.sum(x) if axes is None else jnp.sum(x, axis=tuple(axes))


# op name -> f(operands, attrs). Kept to the ops the CLI documents.
OPS = {
    "add": lambda a, _: a[0] + a[1],
    "sub": lambda a, _: a[0] - a[1],
    "mul": lambda a, _: a[0] * a[1],
    "neg": lambda a, _: -a[0],
    "matmul": lambda a, _: a[0] @ a[1],
    "tanh": lambda a, _: jnp.tanh(a[0]),
    "exp": lambda a, _: jnp.exp(a[0]),
    "log": lambda a, _: jnp.log(a[0]),
    "sigmoid": lambda a, _: jax.nn.sigmoid(a[0]),
    "relu": lambda a, _: jnp.maximum(a[0], 0),
    "reciprocal": lambda a, _: 1 / a[0],
    "rsqrt": lambda a, _: jax.lax.rsqrt(a[0]),
    "sum": lambda a, attrs: _sum(a[0], attrs),
    "broadcast_rows": lambda a, attrs: jnp.broadcast_to(a[0], (attrs["rows"], *a[0].shape)),
    "reshape": lambda a, attrs: jnp.reshape(a[0], attrs["shape"]),
    "permute": lambda a, attrs: _permute(a[0], attrs),
    "linear": lambda a, _: a[0] @ a[1].T + a[2],  # x (n,in), W (out,in), b (out,)
}


def output_names(module):
    return [o if isinstance(o, str) else o["name"] for o in module["outputs"]]


def interpret(module):
    """Return f(*inputs) -> tuple of outputs, in module order."""
    names = [i["name"] for i in module["inputs"]]
    for node in module["nodes"]:
        if node["op"] not in OPS:
            sys.exit(f"agree.py: op {node['op']!r} (node {node['name']!r}) is not supported")

    def f(*args):
        env = dict(zip(names, args))
        for node in module["nodes"]:
            operands = [env[n] for n in node["operands"]]
            env[node["name"]] = OPS[node["op"]](operands, node.get("attrs", {}))
        return tuple(env[n] for n in output_names(module))

    return f


def jax_reference(module, inputs):
    """Outputs and input gradients of the module for an all-ones cotangent."""
    names = [i["name"] for i in module["inputs"]]
    outs, vjp = jax.vjp(interpret(module), *(jnp.asarray(inputs[n]) for n in names))
    grads = vjp(tuple(jnp.ones_like(o) for o in outs))
    return (dict(zip(output_names(module), map(np.asarray, outs))),
            dict(zip(names, map(np.asarray, grads))))


# ---------------------------------------------------------------- closed form


def tied_residual_closed_form(inputs):
    """Y = X + tanh(X W + b) W + b and its gradients for dL/dY = ones."""
    X, W, b = inputs["X"], inputs["W"], inputs["b"]
    H = np.tanh(X @ W + b)
    Y = X + H @ W + b
    G = np.ones_like(Y)
    Abar = (G @ W.T) * (1 - H * H)
    return {"Y": Y}, {
        "X": G + Abar @ W.T,
        "W": H.T @ G + X.T @ Abar,
        "b": G.sum(axis=0) + Abar.sum(axis=0),
    }


# ---------------------------------------------------------------- CatML


def tensor(t):
    return np.asarray(t["data"], dtype=np.float64).reshape(t["shape"])


def load_inputs(module, path):
    raw = json.loads(pathlib.Path(path).read_text())
    inputs = {}
    for decl in module["inputs"]:
        name = decl["name"]
        if name not in raw:
            sys.exit(f"agree.py: inputs file has no tensor for input {name!r}")
        inputs[name] = tensor(raw[name])
        if "shape" in decl and list(inputs[name].shape) != list(decl["shape"]):
            sys.exit(f"agree.py: input {name!r} has shape {list(inputs[name].shape)}, "
                     f"module declares {decl['shape']}")
    return inputs


def run_catml(module_path, inputs_path):
    """Run `catml grad` and return (outputs, gradients) as dicts of f64 arrays."""
    args = ["grad", str(module_path), "--inputs", str(inputs_path)]
    if os.environ.get("CATML_BIN"):
        cmd = [os.environ["CATML_BIN"], *args]
    else:
        cmd = ["cargo", "run", "--release", "-q", "-p", "catml-cli", "--", *args]
    print(f"running: {' '.join(cmd)}")
    try:
        proc = subprocess.run(cmd, cwd=common.REPO_ROOT, capture_output=True, text=True)
    except OSError as e:
        return None, f"could not run CatML: {e}"
    if proc.returncode != 0:
        return None, f"CatML exited with status {proc.returncode}:\n{proc.stderr[-2000:]}"
    try:
        result = json.loads(proc.stdout)
        outputs = {o["name"]: tensor(o) for o in result["outputs"]}
        grads = {n: tensor(t) for n, t in result["gradients"].items()}
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as e:
        return None, f"could not parse CatML's output ({e}):\n{proc.stdout[:500]}"
    return (outputs, grads), None


# ---------------------------------------------------------------- compare


def max_err(a, b):
    if a is None or b is None:
        return None
    if a.shape != b.shape:
        return float("inf")  # a shape mismatch is a disagreement, never a pass
    return float(np.max(np.abs(a - b), initial=0.0))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("module", nargs="?", default=DEFAULT_MODULE)
    p.add_argument("inputs", nargs="?", default=DEFAULT_INPUTS)
    p.add_argument("--tol", type=float, default=1e-12, help="max abs error allowed")
    args = p.parse_args()
    module_path = pathlib.Path(args.module).resolve()
    inputs_path = pathlib.Path(args.inputs).resolve()
    for path in (module_path, inputs_path):
        if not path.exists():
            sys.exit(f"agree.py: {path} does not exist")

    module = json.loads(module_path.read_text())
    inputs = load_inputs(module, inputs_path)

    # Rows: (kind, name, jax value, closed-form value or None).
    jax_outs, jax_grads = jax_reference(module, inputs)
    np_outs, np_grads = {}, {}
    if module_path.name.startswith("tied_residual"):
        np_outs, np_grads = tied_residual_closed_form(inputs)
    rows = [("output", n, v, np_outs.get(n)) for n, v in jax_outs.items()]
    rows += [("grad", n, v, np_grads.get(n)) for n, v in jax_grads.items()]

    catml, error = run_catml(module_path, inputs_path)
    cat_outs, cat_grads = catml or ({}, {})

    print()
    print("| tensor | shape | CatML vs JAX | CatML vs NumPy | JAX vs NumPy |")
    print("|---|---|--:|--:|--:|")
    worst, compared = 0.0, 0
    for kind, name, j, n in rows:
        c = (cat_outs if kind == "output" else cat_grads).get(name)
        errs = [max_err(c, j), max_err(c, n), max_err(j, n)]
        found = [e for e in errs if e is not None]
        worst, compared = max([worst, *found]), compared + len(found)
        cells = ["–" if e is None else f"{e:.3g}" for e in errs]
        label = name if kind == "output" else f"d/d{name}"
        print(f"| {label} | {list(j.shape)} | {' | '.join(cells)} |")

    # The CLI may return gradients only for some inputs (e.g. parameters), but
    # never for names the module does not have.
    missing_outs = set(jax_outs) - set(cat_outs)
    unknown = (set(cat_outs) - set(jax_outs)) | (set(cat_grads) - set(jax_grads))
    print()
    failed = False
    if error:
        print(f"CatML unavailable: {error}")
        failed = True
    elif missing_outs or unknown:
        print(f"CatML output names differ: missing {sorted(missing_outs)}, "
              f"unexpected {sorted(unknown)}")
        failed = True
    if catml and not cat_grads:
        print("CatML returned no gradients")
        failed = True
    if compared:
        print(f"worst max abs error: {worst:.3g} (tolerance {args.tol:g})")
    failed = failed or not worst <= args.tol
    print("FAIL" if failed else "OK: CatML agrees with the peers")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
