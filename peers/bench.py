"""Time the same workloads in JAX (jit) and NumPy, and compare with CatML.

Usage: peers/run.sh bench [--quick] [--only WORKLOAD] [--json FILE] [--gemm FILE]

With `--gemm FILE` (the JSON lines of `peers/run.sh gemm --json FILE`), the table gains the
machine's measured peak and each row's floor: the sum of the best candidate's times for the
row's own matrix products (the forward ones for eval, all of them for value_and_grad).

Workloads, each in f32 and f64, modes `eval` and `value_and_grad`:
  tied_residual  A = X W + b, H = tanh(A), Y = X + H W + b   (L = sum(Y))
  mlp            784-512-512-10 tanh MLP, batch 256           (L = sum(y))

CatML's numbers come from a Rust example printing JSON lines (see README.md).
"""

import argparse
import json
import math
import os
import shlex
import statistics
import subprocess
import sys
import time

import common

common.scrub_blas_env()  # before NumPy is imported, so OpenBLAS sees a clean env

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

# f64 needs x64 mode; f32 arrays stay f32 because every input has an explicit dtype.
jax.config.update("jax_enable_x64", True)

DTYPES = {"f32": np.float32, "f64": np.float64}
MODES = ("eval", "value_and_grad")
SEED = 0
DEFAULT_CATML_CMD = "cargo run --release -q -p catml --example peer_timings"


# ---------------------------------------------------------------- inputs


def normal(rng, shape, dtype, scale=1.0):
    # Draw in f64 then cast, so f32 and f64 runs see the same values.
    return (rng.standard_normal(shape) * scale).astype(dtype)


def tied_residual_inputs(b, d, dtype):
    rng = np.random.default_rng(SEED)
    return (
        normal(rng, (b, d), dtype),
        normal(rng, (d, d), dtype, 1 / math.sqrt(d)),
        normal(rng, (d,), dtype),
    )


MLP_LAYERS = (784, 512, 512, 10)
MLP_BATCH = 256


def mlp_inputs(dtype):
    rng = np.random.default_rng(SEED)
    args = [normal(rng, (MLP_BATCH, MLP_LAYERS[0]), dtype)]
    for n_in, n_out in zip(MLP_LAYERS, MLP_LAYERS[1:]):
        args.append(normal(rng, (n_out, n_in), dtype, 1 / math.sqrt(n_in)))
        args.append(normal(rng, (n_out,), dtype))
    return tuple(args)  # x, W1, b1, W2, b2, W3, b3


# ---------------------------------------------------------------- JAX


def tied_residual_jax(X, W, b):
    H = jnp.tanh(X @ W + b)
    return X + H @ W + b


def mlp_jax(x, W1, b1, W2, b2, W3, b3):
    h1 = jnp.tanh(x @ W1.T + b1)
    h2 = jnp.tanh(h1 @ W2.T + b2)
    return h2 @ W3.T + b3


def jax_callable(f, mode, nargs):
    if mode == "eval":
        return jax.jit(f)
    loss = lambda *a: jnp.sum(f(*a))  # noqa: E731
    return jax.jit(jax.value_and_grad(loss, argnums=tuple(range(nargs))))


# ---------------------------------------------------------------- NumPy


def tied_residual_np_eval(X, W, b):
    H = np.tanh(X @ W + b)
    return X + H @ W + b


def tied_residual_np_vg(X, W, b):
    H = np.tanh(X @ W + b)
    Y = X + H @ W + b
    G = np.ones_like(Y)  # dL/dY for L = sum(Y)
    Hbar = G @ W.T
    Abar = Hbar * (1 - H * H)
    Xbar = G + Abar @ W.T
    Wbar = H.T @ G + X.T @ Abar  # W is used twice: once per use
    bbar = G.sum(axis=0) + Abar.sum(axis=0)
    return Y.sum(), (Xbar, Wbar, bbar)


def mlp_np_eval(x, W1, b1, W2, b2, W3, b3):
    h1 = np.tanh(x @ W1.T + b1)
    h2 = np.tanh(h1 @ W2.T + b2)
    return h2 @ W3.T + b3


def mlp_np_vg(x, W1, b1, W2, b2, W3, b3):
    h1 = np.tanh(x @ W1.T + b1)
    h2 = np.tanh(h1 @ W2.T + b2)
    y = h2 @ W3.T + b3
    gy = np.ones_like(y)
    gW3, gb3 = gy.T @ h2, gy.sum(axis=0)
    ga2 = (gy @ W3) * (1 - h2 * h2)
    gW2, gb2 = ga2.T @ h1, ga2.sum(axis=0)
    ga1 = (ga2 @ W2) * (1 - h1 * h1)
    gW1, gb1 = ga1.T @ x, ga1.sum(axis=0)
    gx = ga1 @ W1
    return y.sum(), (gx, gW1, gb1, gW2, gb2, gW3, gb3)


# ---------------------------------------------------------------- cases

# (workload, size string as CatML prints it, input builder, jax fn, numpy fns by mode)
def cases():
    for b, d in ((2, 3), (256, 512)):
        yield ("tied_residual", f"{b}x{d}",
               lambda dt, b=b, d=d: tied_residual_inputs(b, d, dt),
               tied_residual_jax,
               {"eval": tied_residual_np_eval, "value_and_grad": tied_residual_np_vg})
    yield ("mlp", "-".join(map(str, MLP_LAYERS)) + f"/{MLP_BATCH}",
           mlp_inputs, mlp_jax,
           {"eval": mlp_np_eval, "value_and_grad": mlp_np_vg})


# ---------------------------------------------------------------- timing


def check_same(jax_out, np_out, dtype, what):
    """Refuse to time two implementations that compute different things."""
    tol = 1e-3 if dtype == "f32" else 1e-9
    for j, n in zip(jax.tree.leaves(jax_out), jax.tree.leaves(np_out)):
        j, n = np.asarray(j, np.float64), np.asarray(n, np.float64)
        err = np.max(np.abs(j - n) / (1 + np.abs(n)), initial=0.0)
        if j.shape != n.shape or not err <= tol:
            sys.exit(f"JAX and NumPy disagree on {what} {dtype}: "
                     f"shapes {j.shape} vs {n.shape}, max rel err {err:.3g}")


def measure(call, budget, samples):
    """Median seconds per call.

    Small workloads take microseconds, so each sample loops `inner` calls,
    chosen so that all samples together take about `budget` seconds.
    """
    for _ in range(3):  # warm-up: caches, allocator, thread pools
        call()
    t0 = time.perf_counter()
    call()
    once = max(time.perf_counter() - t0, 1e-7)
    inner = max(1, round(budget / samples / once))
    times = []
    for _ in range(samples):
        t0 = time.perf_counter()
        for _ in range(inner):
            call()
        times.append((time.perf_counter() - t0) / inner)
    return statistics.median(times), inner


def run_peers(only, budget, samples):
    records = []
    for workload, size, make_inputs, jf, npfns in cases():
        if only and workload != only:
            continue
        for dtype in DTYPES:
            args = make_inputs(DTYPES[dtype])
            jargs = [jax.device_put(a) for a in args]  # host->device copy excluded
            for mode in MODES:
                jfn = jax_callable(jf, mode, len(args))
                jax.block_until_ready(jfn(*jargs))  # compile excluded from timing
                npfn = npfns[mode]
                check_same(jfn(*jargs), npfn(*args), dtype, f"{workload} {size} {mode}")
                for library, call in (
                    ("jax_jit", lambda: jax.block_until_ready(jfn(*jargs))),
                    ("numpy", lambda: npfn(*args)),
                ):
                    secs, inner = measure(call, budget, samples)
                    records.append(dict(workload=workload, size=size, dtype=dtype,
                                        mode=mode, library=library, seconds=secs,
                                        samples=samples, inner_loops=inner))
                    print(f"  {workload:14} {size:20} {dtype} {mode:15} {library:8}"
                          f" {fmt_time(secs)}", file=sys.stderr)
    return records


# ---------------------------------------------------------------- CatML


def run_catml():
    """Return (records, error). CatML being unavailable is not an error of ours."""
    cmd = os.environ.get("CATML_TIMINGS_CMD", DEFAULT_CATML_CMD)
    print(f"running CatML timings: {cmd}", file=sys.stderr)
    try:
        proc = subprocess.run(shlex.split(cmd), cwd=common.REPO_ROOT,
                              capture_output=True, text=True)
    except OSError as e:
        return [], f"could not run `{cmd}`: {e}"
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr[-2000:])  # the build or run error, for the reader
        return [], f"`{cmd}` exited with status {proc.returncode}"
    records = []
    for line in proc.stdout.splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue  # tolerate stray log lines
        if isinstance(rec, dict) and {"workload", "size", "dtype", "mode", "seconds"} <= rec.keys():
            records.append(rec)
    if not records:
        return [], f"`{cmd}` printed no timing records"
    return records, None


# ---------------------------------------------------------------- report


def fmt_time(s):
    if s is None:
        return "–"
    if s < 1e-3:
        return f"{s * 1e6:.3g} µs"
    if s < 1:
        return f"{s * 1e3:.3g} ms"
    return f"{s:.3g} s"


def fmt_ratio(peer, catml):
    return f"{peer / catml:.2f}" if peer and catml else "–"


def key(r):
    return (r["workload"], r["size"], r["dtype"], r["mode"])


def gemm_floors(path):
    """(floors, peaks) from the GEMM candidates' JSON lines: floors[(workload, dtype, mode)] is
    the sum over the mode's products of the fastest candidate's seconds, peaks[dtype] the best
    GFLOP/s on the large square product."""
    best = {}  # (workload, dtype, product) -> (seconds, forward, flops)
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            k = (r["workload"], r["dtype"], r["product"])
            flops = 2 * r["m"] * r["k"] * r["n"]
            if k not in best or r["seconds"] < best[k][0]:
                best[k] = (r["seconds"], r["forward"], flops)
    floors, peaks = {}, {}
    for (workload, dtype, _), (secs, forward, flops) in best.items():
        if workload == "peak":
            peaks[dtype] = flops / secs / 1e9
            continue
        for mode in MODES:
            if mode == "value_and_grad" or forward:
                k = (workload, dtype, mode)
                floors[k] = floors.get(k, 0.0) + secs
    return floors, peaks


def print_peaks(peaks):
    print("- measured GEMM peak (2048-square, best candidate): "
          + ", ".join(f"{d} {g:.1f} GFLOP/s" for d, g in sorted(peaks.items())))


def rate_cells(flops, seconds, peak):
    """The GFLOP/s and "of peak" cells of a row doing `flops` in `seconds`; "–" where a figure is
    missing (no flops, no time, or no measured peak)."""
    gflops = flops / seconds / 1e9 if flops and seconds else None
    return (f"{gflops:.1f}" if gflops else "–",
            f"{gflops / peak:.0%}" if gflops and peak else "–")


def report(machine, peers, catml, catml_error, only, gemm=None):
    print("# CatML vs peers")
    print()
    print(f"- machine: {machine['nproc']} cores, {machine['cpu']}")
    print(f"- python {machine['python']}, numpy {machine['numpy']}, "
          f"jax {machine['jax']} (jaxlib {machine['jaxlib']}), CPU backend")
    print(f"- BLAS (NumPy): {machine['blas']}")
    print(f"- date: {machine['date']}")
    print("- times are the median seconds per call; JAX compile time excluded")
    print("- ratios = peer time / CatML time, so > 1 means CatML is faster")
    if catml_error:
        print(f"- CatML timings unavailable: {catml_error}")
    print()

    rows = {}  # keep peers' order, then any extra CatML rows
    flops = {}
    for r in peers:
        rows.setdefault(key(r), {})[r["library"]] = r["seconds"]
    for r in catml:
        if not only or r["workload"] == only:
            rows.setdefault(key(r), {})["catml"] = r["seconds"]
            flops[key(r)] = r.get("flops")

    floors, peaks = gemm_floors(gemm) if gemm else ({}, {})

    def floor_of(k):
        workload, size, dtype, mode = k
        # The GEMM products are those of the large sizes; the 2x3 rows have no floor.
        return floors.get((workload, dtype, mode)) if size != "2x3" else None

    has_floor = any(floor_of(k) is not None for k in rows)
    if peaks:
        print_peaks(peaks)
    if has_floor:
        print("- floor: the row's own matrix products at the best candidate's time; "
              "CatML/floor 1.00 means nothing but the products")
    if peaks or has_floor:
        print()

    print("| workload | size | dtype | mode | CatML | JAX jit | NumPy | JAX/CatML | NumPy/CatML "
          "| GFLOP/s | of peak | floor | CatML/floor |")
    print("|---|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
    for k, t in rows.items():
        workload, size, dtype, mode = k
        c, j, n = t.get("catml"), t.get("jax_jit"), t.get("numpy")
        gflops, of_peak = rate_cells(flops.get(k), c, peaks.get(dtype))
        floor = floor_of(k)
        print(f"| {workload} | {size} | {dtype} | {mode} | {fmt_time(c)} | {fmt_time(j)} "
              f"| {fmt_time(n)} | {fmt_ratio(j, c)} | {fmt_ratio(n, c)} "
              f"| {gflops} | {of_peak} | {fmt_time(floor)} | {fmt_ratio(c, floor)} |")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="fewer, shorter samples")
    p.add_argument("--only", choices=("tied_residual", "mlp"), help="run one workload")
    p.add_argument("--json", metavar="FILE", help="also write raw results as JSON")
    p.add_argument("--gemm", metavar="FILE",
                   help="JSON lines of `peers/run.sh gemm --json`: adds peak and floor columns")
    args = p.parse_args()

    # About 1.5 s per measurement normally; the quick mode is for smoke tests.
    budget, samples = (0.2, 5) if args.quick else (1.5, 15)

    machine = common.machine_info()
    peers = run_peers(args.only, budget, samples)
    catml, catml_error = run_catml()
    if catml_error:
        print(f"CatML timings unavailable: {catml_error}", file=sys.stderr)
    report(machine, peers, catml, catml_error, args.only, args.gemm)

    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": machine, "peers": peers, "catml": catml,
                       "catml_error": catml_error}, f, indent=2)
            f.write("\n")


if __name__ == "__main__":
    main()
