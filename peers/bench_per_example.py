"""Time per-example gradients of the digits CNN in JAX (jit of vmap of value_and_grad) and
compare with CatML's vmap of its gradient program.

Usage: peers/run.sh bench_per_example [--quick] [--json FILE]

Workload: the network of crates/catml/examples/digits_cnn.rs (conv 1->16 3x3 pad 1, relu,
max pool 2, conv 16->32 3x3 pad 1, relu, max pool 2, linear 128->10), the mean cross-entropy of
one example (x (1, 1, 8, 8), one label), f32. Per-example loss and gradients of every
parameter for a batch of 32 examples: jax.jit(jax.vmap(jax.value_and_grad(loss),
in_axes=(None, 0, 0))).

CatML's numbers come from `cargo run --release -q -p catml --example per_example_timings`
(override with CATML_PER_EXAMPLE_TIMINGS_CMD), which prints JSON lines.
"""

import argparse
import json
import os
import shlex
import subprocess
import sys

import common

common.scrub_blas_env()  # before NumPy is imported, so OpenBLAS sees a clean env

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402

from bench import fmt_ratio, fmt_time, measure, normal  # noqa: E402

WORKLOAD, SIZE, DTYPE, MODE = "digits_cnn", "batch 32", "f32", "per_example_grad"
BATCH = 32
DEFAULT_CATML_CMD = "cargo run --release -q -p catml --example per_example_timings"


def params():
    rng = np.random.default_rng(0)
    return {
        "conv1.W": normal(rng, (16, 1, 3, 3), np.float32, 1 / 3),
        "conv1.b": np.zeros(16, np.float32),
        "conv2.W": normal(rng, (32, 16, 3, 3), np.float32, 1 / 12),
        "conv2.b": np.zeros(32, np.float32),
        "out.W": normal(rng, (10, 128), np.float32, 1 / np.sqrt(128)),
        "out.b": np.zeros(10, np.float32),
    }


def batch():
    x = ((np.arange(BATCH * 64) * 31) % 17 / 17).astype(np.float32).reshape(BATCH, 1, 1, 8, 8)
    y = (np.arange(BATCH) % 10).reshape(BATCH, 1)
    return x, y


def conv(x, w, b):
    y = lax.conv_general_dilated(x, w, window_strides=(1, 1), padding=((1, 1), (1, 1)),
                                 dimension_numbers=("NCHW", "OIHW", "NCHW"))
    return y + b[None, :, None, None]


def pool(x):
    return lax.reduce_window(x, -jnp.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")


def loss(p, x, y):
    """Mean cross-entropy of one example: x (1, 1, 8, 8), y (1,)."""
    h = pool(jax.nn.relu(conv(x, p["conv1.W"], p["conv1.b"])))
    h = pool(jax.nn.relu(conv(h, p["conv2.W"], p["conv2.b"])))
    logits = h.reshape(h.shape[0], -1) @ p["out.W"].T + p["out.b"]
    logp = jax.nn.log_softmax(logits, axis=-1)
    return -jnp.mean(jnp.take_along_axis(logp, y[:, None], axis=1))


def run_jax(budget, samples):
    p = jax.device_put(params())
    x, y = (jax.device_put(a) for a in batch())
    fn = jax.jit(jax.vmap(jax.value_and_grad(loss), in_axes=(None, 0, 0)))
    values, grads = jax.block_until_ready(fn(p, x, y))  # compile excluded from timing
    assert values.shape == (BATCH,) and grads["conv1.W"].shape == (BATCH, 16, 1, 3, 3)
    secs, inner = measure(lambda: jax.block_until_ready(fn(p, x, y)), budget, samples)
    print(f"  {WORKLOAD} {SIZE} {DTYPE} {MODE} jax_jit {fmt_time(secs)}", file=sys.stderr)
    return dict(workload=WORKLOAD, size=SIZE, dtype=DTYPE, mode=MODE, library="jax_jit",
                seconds=secs, samples=samples, inner_loops=inner)


def run_catml():
    """Return (record, error)."""
    cmd = os.environ.get("CATML_PER_EXAMPLE_TIMINGS_CMD", DEFAULT_CATML_CMD)
    print(f"running CatML timings: {cmd}", file=sys.stderr)
    try:
        proc = subprocess.run(shlex.split(cmd), cwd=common.REPO_ROOT, capture_output=True,
                              text=True)
    except OSError as e:
        return None, f"could not run `{cmd}`: {e}"
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr[-2000:])
        return None, f"`{cmd}` exited with status {proc.returncode}"
    for line in proc.stdout.splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(rec, dict) and rec.get("mode") == MODE and "seconds" in rec:
            return rec, None
    return None, f"`{cmd}` printed no timing record"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer, shorter samples")
    ap.add_argument("--json", metavar="FILE", help="also write raw results as JSON")
    args = ap.parse_args()
    budget, samples = (0.2, 5) if args.quick else (1.5, 15)
    machine = common.machine_info()
    jax_rec = run_jax(budget, samples)
    catml, err = run_catml()
    print("# per-example gradients of the digits CNN: CatML vmap(grad) vs jax.vmap(jax.grad)")
    print()
    print(f"- machine: {machine['nproc']} cores, {machine['cpu']}")
    print(f"- jax {machine['jax']} (jaxlib {machine['jaxlib']}), CPU backend, jit; "
          "compile time excluded")
    print(f"- date: {machine['date']}")
    print("- times are the median wall seconds per call (32 examples); ratio = JAX / CatML")
    if err:
        print(f"- CatML timings unavailable: {err}")
    print()
    c = catml["seconds"] if catml else None
    print("| workload | size | dtype | CatML | JAX jit | JAX/CatML |")
    print("|---|---|---|--:|--:|--:|")
    print(f"| {WORKLOAD} | {SIZE} | {DTYPE} | {fmt_time(c)} | {fmt_time(jax_rec['seconds'])} "
          f"| {fmt_ratio(jax_rec['seconds'], c)} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": machine, "peers": [jax_rec], "catml": catml,
                       "catml_error": err}, f, indent=2)
            f.write("\n")


if __name__ == "__main__":
    main()
