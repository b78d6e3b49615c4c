"""Time conv2d in JAX (jit) and NumPy (im2col), and compare with CatML.

Usage: peers/run.sh bench_conv [--quick] [--json FILE] [--gemm FILE]

Workload: x (32, 3, 32, 32), w (16, 3, 3, 3), b (16,), f32, stride 1, padding 1,
y = conv2d(x, w) + b (NCHW / OIHW). Modes:
  forward         y
  value_and_grad  L = sum(y) and its gradient with respect to x, w and b

CatML's numbers come from `cargo run --release -q -p catml --example conv_timings`
(override with CATML_CONV_TIMINGS_CMD), which prints JSON lines. The wall-time table gives
CatML's GFLOP/s (the cost interpreter's flops of the program timed over CatML's time) and, with
`--gemm FILE` (the JSON lines of `peers/run.sh gemm --json FILE`), its fraction of the machine's
measured GEMM peak.
"""

import argparse
import json
import os
import shlex
import subprocess
import sys
import time

import common

common.scrub_blas_env()  # before NumPy is imported, so OpenBLAS sees a clean env

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402

from bench import (check_same, fmt_ratio, fmt_time, gemm_floors, measure, normal,  # noqa: E402
                   print_peaks, rate_cells)

WORKLOAD, SIZE, DTYPE = "conv2d", "32x3x32x32/16x3x3", "f32"
N, C, H, W, O, K, PAD = 32, 3, 32, 32, 16, 3, 1
MODES = ("forward", "value_and_grad")
DEFAULT_CATML_CMD = "cargo run --release -q -p catml --example conv_timings"


def inputs():
    rng = np.random.default_rng(0)
    x = normal(rng, (N, C, H, W), np.float32)
    w = normal(rng, (O, C, K, K), np.float32, 1 / np.sqrt(C * K * K))
    b = normal(rng, (O,), np.float32)
    return x, w, b


# ---------------------------------------------------------------- JAX


def conv_jax(x, w, b):
    y = lax.conv_general_dilated(x, w, window_strides=(1, 1), padding=((PAD, PAD), (PAD, PAD)),
                                 dimension_numbers=("NCHW", "OIHW", "NCHW"))
    return y + b[None, :, None, None]


def jax_callable(mode):
    if mode == "forward":
        return jax.jit(conv_jax)
    loss = lambda *a: jnp.sum(conv_jax(*a))  # noqa: E731
    return jax.jit(jax.value_and_grad(loss, argnums=(0, 1, 2)))


# ---------------------------------------------------------------- NumPy


def im2col(x):
    """Patches of the zero-padded input as rows: (N·H·W, C·K·K)."""
    xp = np.pad(x, ((0, 0), (0, 0), (PAD, PAD), (PAD, PAD)))
    win = np.lib.stride_tricks.sliding_window_view(xp, (K, K), axis=(2, 3))  # N, C, H, W, K, K
    return win.transpose(0, 2, 3, 1, 4, 5).reshape(N * H * W, C * K * K)


def conv_np(x, w, b):
    cols = im2col(x)
    y = cols @ w.reshape(O, -1).T + b  # (N·H·W, O)
    return y.reshape(N, H, W, O).transpose(0, 3, 1, 2), cols


def forward_np(x, w, b):
    return conv_np(x, w, b)[0]


def value_and_grad_np(x, w, b):
    y, cols = conv_np(x, w, b)
    g = np.ones((N * H * W, O), dtype=y.dtype)  # dL/dy for L = sum(y), as rows
    gb = g.sum(axis=0)
    gw = (g.T @ cols).reshape(w.shape)
    gcols = (g @ w.reshape(O, -1)).reshape(N, H, W, C, K, K)
    # col2im: each tap's patch gradient goes back to the positions that tap read.
    gxp = np.zeros((N, C, H + 2 * PAD, W + 2 * PAD), dtype=x.dtype)
    for kh in range(K):
        for kw in range(K):
            gxp[:, :, kh:kh + H, kw:kw + W] += gcols[:, :, :, :, kh, kw].transpose(0, 3, 1, 2)
    gx = gxp[:, :, PAD:PAD + H, PAD:PAD + W]
    return y.sum(), (gx, gw, gb)


NUMPY = {"forward": forward_np, "value_and_grad": value_and_grad_np}


# ---------------------------------------------------------------- runs


def measure_with_cpu(call, budget, samples):
    """bench.measure, plus process CPU seconds (all threads) per call over every call made:
    on a shared machine CPU time moves much less than wall time."""
    c0 = time.process_time()
    secs, inner = measure(call, budget, samples)
    calls = 4 + samples * inner  # measure's 3 warm-ups and 1 probe, then the samples
    return secs, inner, (time.process_time() - c0) / calls


def run_peers(budget, samples):
    args = inputs()
    jargs = [jax.device_put(a) for a in args]
    records = []
    for mode in MODES:
        jfn = jax_callable(mode)
        jax.block_until_ready(jfn(*jargs))  # compile excluded from timing
        npfn = NUMPY[mode]
        check_same(jfn(*jargs), npfn(*args), DTYPE, f"{WORKLOAD} {SIZE} {mode}")
        for library, call in (
            ("jax_jit", lambda: jax.block_until_ready(jfn(*jargs))),
            ("numpy", lambda: npfn(*args)),
        ):
            secs, inner, cpu = measure_with_cpu(call, budget, samples)
            records.append(dict(workload=WORKLOAD, size=SIZE, dtype=DTYPE, mode=mode,
                                library=library, seconds=secs, cpu_seconds=cpu,
                                samples=samples, inner_loops=inner))
            print(f"  {WORKLOAD} {SIZE} {DTYPE} {mode:15} {library:8} {fmt_time(secs)}"
                  f" (cpu {fmt_time(cpu)})", file=sys.stderr)
    return records


def run_catml(quick):
    """Return (records, error)."""
    cmd = os.environ.get("CATML_CONV_TIMINGS_CMD",
                         DEFAULT_CATML_CMD + (" -- --quick" if quick else ""))
    print(f"running CatML timings: {cmd}", file=sys.stderr)
    try:
        proc = subprocess.run(shlex.split(cmd), cwd=common.REPO_ROOT, capture_output=True,
                              text=True)
    except OSError as e:
        return [], f"could not run `{cmd}`: {e}"
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr[-2000:])
        return [], f"`{cmd}` exited with status {proc.returncode}"
    records = []
    for line in proc.stdout.splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(rec, dict) and {"workload", "size", "dtype", "mode", "seconds"} <= rec.keys():
            records.append(rec)
    if not records:
        return [], f"`{cmd}` printed no timing records"
    return records, None


def report(machine, peers, catml, catml_error, gemm=None):
    print("# conv2d: CatML vs peers")
    print()
    print(f"- machine: {machine['nproc']} cores, {machine['cpu']}")
    print(f"- python {machine['python']}, numpy {machine['numpy']}, "
          f"jax {machine['jax']} (jaxlib {machine['jaxlib']}), CPU backend")
    print(f"- BLAS (NumPy): {machine['blas']}")
    print(f"- date: {machine['date']}")
    print("- times are the median wall seconds per call; JAX compile time excluded")
    print("- ratios = peer time / CatML time, so > 1 means CatML is faster")
    if catml_error:
        print(f"- CatML timings unavailable: {catml_error}")
    peaks = gemm_floors(gemm)[1] if gemm else {}
    if peaks:
        print_peaks(peaks)
    print()
    table(peers, catml, "seconds", peaks)
    print()
    print("CPU time per call (user + system, all threads):")
    print()
    table(peers, catml, "cpu_seconds")


def table(peers, catml, field, peaks=None):
    """One row per workload and mode; with `peaks` (a dict, possibly empty) also CatML's GFLOP/s
    and its fraction of the dtype's peak."""
    rows, flops = {}, {}
    key = lambda r: (r["workload"], r["size"], r["dtype"], r["mode"])  # noqa: E731
    for r in peers:
        rows.setdefault(key(r), {})[r["library"]] = r.get(field)
    for r in catml:
        rows.setdefault(key(r), {})["catml"] = r.get(field)
        flops[key(r)] = r.get("flops")
    rates = peaks is not None
    print("| workload | size | dtype | mode | CatML | JAX jit | NumPy | JAX/CatML | NumPy/CatML |"
          + (" GFLOP/s | of peak |" if rates else ""))
    print("|---|---|---|---|--:|--:|--:|--:|--:|" + ("--:|--:|" if rates else ""))
    for k, t in rows.items():
        workload, size, dtype, mode = k
        c, j, n = t.get("catml"), t.get("jax_jit"), t.get("numpy")
        line = (f"| {workload} | {size} | {dtype} | {mode} | {fmt_time(c)} | {fmt_time(j)} "
                f"| {fmt_time(n)} | {fmt_ratio(j, c)} | {fmt_ratio(n, c)} |")
        if rates:
            line += " {} | {} |".format(*rate_cells(flops.get(k), c, peaks.get(dtype)))
        print(line)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="fewer, shorter samples")
    p.add_argument("--json", metavar="FILE", help="also write raw results as JSON")
    p.add_argument("--gemm", metavar="FILE",
                   help="JSON lines of `peers/run.sh gemm --json`: adds CatML's fraction of peak")
    args = p.parse_args()
    budget, samples = (0.2, 5) if args.quick else (1.5, 15)

    machine = common.machine_info()
    peers = run_peers(budget, samples)
    catml, catml_error = run_catml(args.quick)
    if catml_error:
        print(f"CatML timings unavailable: {catml_error}", file=sys.stderr)
    report(machine, peers, catml, catml_error, args.gemm)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": machine, "peers": peers, "catml": catml,
                       "catml_error": catml_error}, f, indent=2)
            f.write("\n")


if __name__ == "__main__":
    main()
