"""Call overhead of `value_and_grad` on the tiny MLP (x f64[2] -> linear 4 -> relu ->
linear 1 -> sigmoid), from Python: CatML's transform, CatML's gradient program evaluated
directly, the same evaluation looped inside Rust (the floor), and
`jax.jit(jax.value_and_grad)`. The four are timed in turn within each of seven rounds, so
that a disturbance of the machine reaches all of them alike. Prints the best round of each in
µs (the least disturbed), and the overhead of the transform over the Rust floor: the median,
over the rounds, of the difference within a round."""

import statistics
import time

import numpy as np

import catml
import catml.numpy as cnp


def mlp(m, p, x):
    h = m.maximum(p["W1"] @ x + p["b1"], 0.0)
    return m.sum(1.0 / (1.0 + m.exp(-(p["W2"] @ h + p["b2"]))))


def per_call(call, n):
    """µs per call over one round of `n` calls."""
    t = time.perf_counter()
    for _ in range(n):
        call()
    return (time.perf_counter() - t) / n * 1e6


rng = np.random.default_rng(0)
params = {"W1": rng.normal(size=(4, 2)), "b1": rng.normal(size=4),
          "W2": rng.normal(size=(1, 4)), "b2": rng.normal(size=1)}
x = rng.normal(size=2)

vg = catml.value_and_grad(lambda p, x: mlp(cnp, p, x))
program = catml.trace(lambda p, x: mlp(cnp, p, x), params, x)._p
gprog, _ = program.grad([0, 1, 2, 3])
leaves = [params[k] for k in sorted(params)] + [x]
N = 20000
rounds = {
    "catml.value_and_grad (pytree)    ": lambda: per_call(lambda: vg(params, x), N),
    "gradient program eval (flat list)": lambda: per_call(lambda: gprog.eval(leaves), N),
    "the same evaluation, loop in Rust": lambda: gprog.time_eval(leaves, N) * 1e6,
}
try:
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_enable_x64", True)
    jvg = jax.jit(jax.value_and_grad(lambda p, x: mlp(jnp, p, x)))
    jax.block_until_ready(jvg(params, x))
    rounds["jax.jit(jax.value_and_grad)      "] = lambda: per_call(
        lambda: jax.block_until_ready(jvg(params, x)), N // 4)
except ImportError:
    print("jax is not installed: no JAX figure")
for run in rounds.values():  # warm-up
    run()
times = {name: [] for name in rounds}
for _ in range(7):
    for name, run in rounds.items():
        times[name].append(run())
for name, ts in times.items():
    print(f"{name}  {min(ts):7.2f} µs")
vg_times, floor_times = list(times.values())[0], list(times.values())[2]
overhead = statistics.median(v - f for v, f in zip(vg_times, floor_times))
print(f"overhead of value_and_grad over the Rust floor (median within a round): {overhead:.2f} µs")
