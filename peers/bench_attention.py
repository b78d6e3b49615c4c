"""Time one multi-head attention block in JAX (jit) and NumPy, and compare with CatML.

Usage: peers/run.sh bench_attention [--quick] [--json FILE] [--rounds N] [--numpy-threads N]
                                    [--gemm FILE]

Workload (f32): self-attention with affine projections, batch 8, sequence 128,
width 128, 4 heads, no mask; weights in (out, in) layout as CatML's `linear`:
  Q, K, V = x Wq^T + bq, x Wk^T + bk, x Wv^T + bv     split into 4 heads of 32
  Y_h = softmax(Q_h K_h^T / sqrt(32)) V_h             heads merged back to width 128
  out = Y Wo^T + bo
Modes: `forward`, and `value_and_grad` of L = sum(out) with respect to every
input. NumPy's backward pass is written by hand and checked against JAX before
timing. CatML's numbers come from
`cargo run --release -q -p catml --example attention_timings`
(override with CATML_TIMINGS_CMD), which prints JSON lines. The table is bench.py's: CatML's
GFLOP/s (the cost interpreter's flops of the program timed over CatML's time) and, with
`--gemm FILE` (the JSON lines of `peers/run.sh gemm --json FILE`), its fraction of the machine's
measured GEMM peak; the GEMM file has no attention products, so the floor columns stay empty.
"""

import argparse
import json
import math
import os
import statistics
import sys

import common

common.scrub_blas_env()  # before NumPy is imported, so OpenBLAS sees a clean env

import bench  # noqa: E402  (shared timing, checking and formatting helpers)
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from threadpoolctl import threadpool_limits  # noqa: E402

BATCH, SEQ, WIDTH, HEADS = 8, 128, 128, 4
HEAD = WIDTH // HEADS
SIZE = f"{BATCH}x{SEQ}x{WIDTH}/{HEADS}"
MODES = ("forward", "value_and_grad")
DEFAULT_CATML_CMD = "cargo run --release -q -p catml --example attention_timings"


def inputs(dtype):
    rng = np.random.default_rng(bench.SEED)
    args = [bench.normal(rng, (BATCH, SEQ, WIDTH), dtype)]
    for _ in "qkvo":
        args.append(bench.normal(rng, (WIDTH, WIDTH), dtype, 1 / math.sqrt(WIDTH)))
        args.append(bench.normal(rng, (WIDTH,), dtype, 1 / math.sqrt(WIDTH)))
    return tuple(args)  # x, Wq, bq, Wk, bk, Wv, bv, Wo, bo


# ---------------------------------------------------------------- JAX


def attention_jax(x, Wq, bq, Wk, bk, Wv, bv, Wo, bo):
    def heads(W, b):
        return (x @ W.T + b).reshape(BATCH, SEQ, HEADS, HEAD).transpose(0, 2, 1, 3)

    q, k, v = heads(Wq, bq), heads(Wk, bk), heads(Wv, bv)
    s = (q @ k.transpose(0, 1, 3, 2)) / jnp.sqrt(jnp.asarray(HEAD, x.dtype))
    p = jax.nn.softmax(s, axis=-1)
    y = (p @ v).transpose(0, 2, 1, 3).reshape(BATCH, SEQ, WIDTH)
    return y @ Wo.T + bo


def jax_callable(mode, nargs):
    if mode == "forward":
        return jax.jit(attention_jax)
    loss = lambda *a: jnp.sum(attention_jax(*a))  # noqa: E731
    return jax.jit(jax.value_and_grad(loss, argnums=tuple(range(nargs))))


# ---------------------------------------------------------------- NumPy
# Written as a NumPy user would for speed: projections as 2-D products over the (B T, D) rows,
# heads as contiguous (B, H, T, d) stacks (NumPy's stacked matmul is slow on transposed views).


def rows(t):
    return t.reshape(BATCH * SEQ, -1)


def split(t):
    """(B T, D) rows -> contiguous (B, H, T, d)."""
    return np.ascontiguousarray(t.reshape(BATCH, SEQ, HEADS, HEAD).transpose(0, 2, 1, 3))


def merge(t):
    """(B, H, T, d) -> (B T, D) rows."""
    return np.ascontiguousarray(t.transpose(0, 2, 1, 3)).reshape(BATCH * SEQ, WIDTH)


def tr(t):
    """Contiguous transpose of the last two axes."""
    return np.ascontiguousarray(t.transpose(0, 1, 3, 2))


def np_forward_parts(x, Wq, bq, Wk, bk, Wv, bv, Wo, bo):
    xr = rows(x)
    q, k, v = split(xr @ Wq.T + bq), split(xr @ Wk.T + bk), split(xr @ Wv.T + bv)
    s = (q @ tr(k)) * x.dtype.type(1 / math.sqrt(HEAD))
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    p = e / e.sum(axis=-1, keepdims=True)
    y = merge(p @ v)
    return xr, q, k, v, p, y, (y @ Wo.T + bo).reshape(BATCH, SEQ, WIDTH)


def np_forward(*args):
    return np_forward_parts(*args)[-1]


def np_value_and_grad(x, Wq, bq, Wk, bk, Wv, bv, Wo, bo):
    xr, q, k, v, p, y, out = np_forward_parts(x, Wq, bq, Wk, bk, Wv, bv, Wo, bo)
    g = np.ones((BATCH * SEQ, WIDTH), x.dtype)  # dL/dout for L = sum(out)
    gWo, gbo = g.T @ y, g.sum(axis=0)
    gy = split(g @ Wo)
    gp = gy @ tr(v)
    gv = tr(p) @ gy
    gs = p * (gp - (gp * p).sum(axis=-1, keepdims=True))
    gs *= x.dtype.type(1 / math.sqrt(HEAD))
    gq, gk, gv = merge(gs @ k), merge(tr(gs) @ q), merge(gv)
    grads = []
    gx = np.zeros_like(xr)
    for gt, W in ((gq, Wq), (gk, Wk), (gv, Wv)):
        grads += [gt.T @ xr, gt.sum(axis=0)]
        gx += gt @ W
    return out.sum(), (gx.reshape(x.shape), *grads, gWo, gbo)


NUMPY = {"forward": np_forward, "value_and_grad": np_value_and_grad}


# ---------------------------------------------------------------- run


def run_peers(budget, samples, numpy_threads):
    records = []
    args = inputs(np.float32)
    jargs = [jax.device_put(a) for a in args]  # host->device copy excluded
    for mode in MODES:
        jfn = jax_callable(mode, len(args))
        jax.block_until_ready(jfn(*jargs))  # compile excluded from timing
        npfn = NUMPY[mode]
        bench.check_same(jfn(*jargs), npfn(*args), "f32", f"attention {SIZE} {mode}")
        for library, call in (
            ("jax_jit", lambda: jax.block_until_ready(jfn(*jargs))),
            ("numpy", lambda: npfn(*args)),
        ):
            limit = numpy_threads if library == "numpy" else None
            with threadpool_limits(limits=limit, user_api="blas"):
                secs, inner = bench.measure(call, budget, samples)
            records.append(dict(workload="attention", size=SIZE, dtype="f32", mode=mode,
                                library=library, seconds=secs, samples=samples,
                                inner_loops=inner))
            print(f"  attention {SIZE} f32 {mode:15} {library:8} {bench.fmt_time(secs)}",
                  file=sys.stderr)
    return records


def median_over_rounds(rounds):
    """One record per (mode, library) with the median seconds over the rounds."""
    by_key = {}
    for records in rounds:
        for r in records:
            by_key.setdefault((r["mode"], r.get("library")), []).append(r)
    out = []
    for recs in by_key.values():
        r = dict(recs[0])
        r["seconds"] = statistics.median(x["seconds"] for x in recs)
        r["rounds"] = [x["seconds"] for x in recs]
        out.append(r)
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="fewer, shorter samples")
    p.add_argument("--json", metavar="FILE", help="also write raw results as JSON")
    p.add_argument("--rounds", type=int, default=1, metavar="N",
                   help="alternate peers and CatML N times, reporting medians (default 1)")
    p.add_argument("--numpy-threads", type=int, metavar="N",
                   help="limit NumPy's BLAS to N threads (default: its own choice); on a "
                        "busy machine OpenBLAS's spinning threads can slow it many times over")
    p.add_argument("--gemm", metavar="FILE",
                   help="JSON lines of `peers/run.sh gemm --json`: adds CatML's fraction of peak")
    args = p.parse_args()
    budget, samples = (0.3, 5) if args.quick else (1.5, 15)

    machine = common.machine_info()
    if args.numpy_threads:
        machine["blas"] += f", limited to {args.numpy_threads} thread(s) for NumPy"
    os.environ.setdefault("CATML_TIMINGS_CMD",
                          DEFAULT_CATML_CMD + (" -- --quick" if args.quick else ""))
    # On a shared machine the load changes from minute to minute: alternate the peers and
    # CatML for several rounds and keep each figure's median over the rounds.
    rounds_peers, rounds_catml, catml_error = [], [], None
    for r in range(args.rounds):
        print(f"round {r + 1} of {args.rounds}", file=sys.stderr)
        rounds_peers.append(run_peers(budget, samples, args.numpy_threads))
        catml, catml_error = bench.run_catml()
        rounds_catml.append([c for c in catml if c["workload"] == "attention"])
        if catml_error:
            print(f"CatML timings unavailable: {catml_error}", file=sys.stderr)
    peers, catml = median_over_rounds(rounds_peers), median_over_rounds(rounds_catml)
    bench.report(machine, peers, catml, catml_error, "attention", args.gemm)
    if args.rounds > 1:
        print()
        print(f"Each figure is the median over {args.rounds} alternating rounds; per round:")
        print()
        for r in peers + catml:
            times = ", ".join(bench.fmt_time(t) for t in r["rounds"])
            print(f"- {r['mode']}, {r.get('library', 'catml')}: {times}")

    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": machine, "peers": peers, "catml": catml,
                       "catml_error": catml_error}, f, indent=2)
            f.write("\n")


if __name__ == "__main__":
    main()
