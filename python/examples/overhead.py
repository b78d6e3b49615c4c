"""Call overhead of `value_and_grad` on the tiny MLP (x f64[2] -> linear 4 -> relu ->
linear 1 -> sigmoid), from Python: CatML's transform, CatML's gradient program evaluated
directly, the same evaluation looped inside Rust (the floor), and
`jax.jit(jax.value_and_grad)`. Prints the best of seven rounds in µs (the least disturbed by
other work on the machine), and the overhead of the transform over the Rust floor."""

import time

import numpy as np

import catml
import catml.numpy as cnp


def mlp(m, p, x):
    h = m.maximum(p["W1"] @ x + p["b1"], 0.0)
    return m.sum(1.0 / (1.0 + m.exp(-(p["W2"] @ h + p["b2"]))))


def timed(call, n=20000, rounds=7):
    for _ in range(1000):
        call()
    out = []
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(n):
            call()
        out.append((time.perf_counter() - t) / n * 1e6)
    return min(out)


rng = np.random.default_rng(0)
params = {"W1": rng.normal(size=(4, 2)), "b1": rng.normal(size=4),
          "W2": rng.normal(size=(1, 4)), "b2": rng.normal(size=1)}
x = rng.normal(size=2)

vg = catml.value_and_grad(lambda p, x: mlp(cnp, p, x))
vg_time = timed(lambda: vg(params, x))
print(f"catml.value_and_grad (pytree)      {vg_time:7.2f} µs")
program = catml.trace(lambda p, x: mlp(cnp, p, x), params, x)._p
gprog, _ = program.grad([0, 1, 2, 3])
leaves = [params[k] for k in sorted(params)] + [x]
print(f"gradient program eval (flat list)  {timed(lambda: gprog.eval(leaves)):7.2f} µs")
floor = min(gprog.time_eval(leaves, 20000) * 1e6 for _ in range(7))
print(f"the same evaluation, loop in Rust    {floor:7.2f} µs")
print(f"overhead of value_and_grad over the Rust floor: {vg_time - floor:.2f} µs")
try:
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_enable_x64", True)
    jvg = jax.jit(jax.value_and_grad(lambda p, x: mlp(jnp, p, x)))
    jax.block_until_ready(jvg(params, x))
    print(f"jax.jit(jax.value_and_grad)        "
          f"{timed(lambda: jax.block_until_ready(jvg(params, x)), n=5000):7.2f} µs")
except ImportError:
    print("jax is not installed: no JAX figure")
