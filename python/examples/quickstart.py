"""A tiny MLP in NumPy style, traced once, differentiated and evaluated by CatML."""

import numpy as np

import catml
import catml.numpy as cnp


def loss(params, x, y):
    h = cnp.tanh(x @ params["w1"] + params["b1"])
    return cnp.mean((h @ params["w2"] - y) ** 2)


rng = np.random.default_rng(0)
params = {"w1": rng.normal(size=(2, 4)), "b1": np.zeros(4), "w2": rng.normal(size=(4, 1))}
x, y = rng.normal(size=(8, 2)), rng.normal(size=(8, 1))

print(catml.trace(loss, params, x, y).listing())  # the program: matmul, add, tanh, ...
step = catml.jit(lambda p, x, y: catml.value_and_grad(loss)(p, x, y))
for i in range(100):
    value, grads = step(params, x, y)  # traced once, then only evaluated
    params = {k: params[k] - 0.1 * grads[k] for k in params}
print(f"loss {float(value):.4f} after 100 steps")
