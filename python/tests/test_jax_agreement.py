"""CatML and JAX (x64) agree on values, grad, jvp and vjp of the same functions.

Each case is written once against a NumPy-like module `m`, run with `catml.numpy` and with
`jax.numpy`, at a fixed random point and along fixed random directions.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import catml
import catml.numpy as cnp
import catml.nn.functional as F

RNG = np.random.default_rng(7)
X = RNG.uniform(0.5, 1.5, size=(3, 4))
DX = RNG.normal(size=(3, 4))
ROW = RNG.normal(size=(4,))

CASES = {
    "exp": lambda m, x: m.exp(x),
    "log": lambda m, x: m.log(x),
    "tanh": lambda m, x: m.tanh(x),
    "sin": lambda m, x: m.sin(x),
    "cos": lambda m, x: m.cos(x),
    "tan": lambda m, x: m.tan(x),
    "sqrt": lambda m, x: m.sqrt(x),
    "abs": lambda m, x: m.abs(x - 1.0),
    "square": lambda m, x: m.square(x),
    "log1p": lambda m, x: m.log1p(x),
    "expm1": lambda m, x: m.expm1(x),
    "arctan": lambda m, x: m.arctan(x),
    "maximum": lambda m, x: m.maximum(x, 1.0),
    "minimum": lambda m, x: m.minimum(x, m.sin(x) + 0.5),
    "where": lambda m, x: m.where(x > 1.0, x, x * x),
    "sum_all": lambda m, x: m.sum(x * x),
    "sum_axis0": lambda m, x: m.sum(m.exp(x), axis=0),
    "sum_keepdims": lambda m, x: x / m.sum(x, axis=1, keepdims=True),
    "mean_axis1": lambda m, x: m.mean(x * x, axis=1),
    "max_axis0": lambda m, x: m.max(x * 3.0, axis=0),
    "min_all": lambda m, x: m.min(x),
    "var": lambda m, x: m.var(x, axis=1),
    "std": lambda m, x: m.std(x),
    "matmul": lambda m, x: x @ x.T,
    "matmul_vec": lambda m, x: m.matmul(x, m.sin(x[0])),
    "dot": lambda m, x: m.dot(x[0], x[1]),
    "reshape": lambda m, x: m.tanh(m.reshape(x, (2, 6))),
    "transpose": lambda m, x: m.transpose(x) * 2.0 + x.T,
    "concatenate": lambda m, x: m.concatenate([x, x * x], axis=1),
    "stack": lambda m, x: m.stack([x, m.exp(x)], axis=0),
    "zeros_like": lambda m, x: m.zeros_like(x) + x * 2.0,
    "ones_like": lambda m, x: m.ones_like(x) / x,
    "powi": lambda m, x: x ** 3,
    "pow_float": lambda m, x: x ** 2.5,
    "div": lambda m, x: 1.0 / (1.0 + x),
    "neg": lambda m, x: -x * x,
    "broadcast_row": lambda m, x: x * m.asarray(ROW) if m is jnp else x * ROW,
    "getitem_slice": lambda m, x: x[1:, ::2],
    "getitem_int": lambda m, x: m.exp(x[0]),
    "getitem_none": lambda m, x: x[..., None] * x[:, None, :],
    "clip": lambda m, x: m.clip(x, 0.8, 1.2),
    "squeeze_expand": lambda m, x: m.squeeze(m.expand_dims(x, 0), 0) * 2.0,
    "swapaxes": lambda m, x: m.swapaxes(x, 0, 1) ** 2,
    "outer": lambda m, x: m.outer(x[0], x[1]),
    "compose": lambda m, x: m.sum(m.tanh(x @ x.T) ** 2, axis=1) / m.mean(x),
}


def run_catml(name):
    return lambda x: CASES[name](cnp, x)


def run_jax(name):
    return lambda x: CASES[name](jnp, x)


def cot_for(shape):
    return np.asarray(np.random.default_rng(11).normal(size=shape))


@pytest.mark.parametrize("name", sorted(CASES))
def test_value(name):
    got = catml.jit(run_catml(name))(X)
    want = jax.jit(run_jax(name))(X)
    assert isinstance(got, np.ndarray)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", sorted(CASES))
def test_grad(name):
    c = cot_for(jax.eval_shape(run_jax(name), X).shape)
    got = catml.grad(lambda x: cnp.sum(run_catml(name)(x) * c))(X)
    want = jax.grad(lambda x: jnp.sum(run_jax(name)(x) * c))(X)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", sorted(CASES))
def test_jvp(name):
    y, t = catml.jvp(run_catml(name), (X,), (DX,))
    wy, wt = jax.jvp(run_jax(name), (X,), (DX,))
    np.testing.assert_allclose(y, wy, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(t, wt, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", sorted(CASES))
def test_vjp(name):
    y, pull = catml.vjp(run_catml(name), X)
    wy, wpull = jax.vjp(run_jax(name), X)
    c = cot_for(np.shape(wy))
    np.testing.assert_allclose(y, wy, rtol=1e-12, atol=1e-12)
    (g,) = pull(c)
    (wg,) = wpull(c)
    np.testing.assert_allclose(g, wg, rtol=1e-10, atol=1e-12)


def mlp(params, x):
    h = x
    for layer in params["layers"]:
        h = h @ layer["w"] + layer["b"]
        h = (cnp if isinstance(h, (catml.Tracer,)) else jnp).tanh(h)
    return ((h - 0.5) ** 2).sum() * params["scale"]


def make_params(rng):
    return {
        "layers": [
            {"w": rng.normal(size=(4, 5)), "b": rng.normal(size=(5,))},
            {"w": rng.normal(size=(5, 2)), "b": rng.normal(size=(2,))},
        ],
        "scale": np.float64(0.5),
    }


def test_pytree_value_and_grad():
    params = make_params(np.random.default_rng(3))
    x = np.random.default_rng(4).normal(size=(6, 4))
    v, g = catml.value_and_grad(mlp)(params, x)
    wv, wg = jax.value_and_grad(mlp)(params, x)
    np.testing.assert_allclose(v, wv, rtol=1e-12)
    assert set(g) == {"layers", "scale"} and len(g["layers"]) == 2
    for a, b in zip(jax.tree_util.tree_leaves(g), jax.tree_util.tree_leaves(wg)):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_argnums_tuple_and_has_aux():
    def f(a, b, k):
        return cnp.sum(a * b) + k * 0.0, {"aux": a + 1.0}

    def fj(a, b, k):
        return jnp.sum(a * b) + k * 0.0, {"aux": a + 1.0}

    a, b = X, X[::-1]
    (v, aux), (ga, gb) = catml.value_and_grad(f, argnums=(0, 1), has_aux=True)(a, b, 2.0)
    (wv, waux), (wga, wgb) = jax.value_and_grad(fj, argnums=(0, 1), has_aux=True)(a, b, 2.0)
    np.testing.assert_allclose(v, wv)
    np.testing.assert_allclose(aux["aux"], waux["aux"])
    np.testing.assert_allclose(ga, wga)
    np.testing.assert_allclose(gb, wgb)


def scalar_f(m, x):
    return m.sum(m.sin(x) * m.exp(x) + x ** 3) / 3.0


def test_hvp_and_hessian():
    x = X[0]
    v = DX[0]
    got = catml.hvp(lambda x: scalar_f(cnp, x), (x,), (v,))
    want = jax.jvp(jax.grad(lambda x: scalar_f(jnp, x)), (x,), (v,))[1]
    np.testing.assert_allclose(got[0], want, rtol=1e-10)
    h = catml.hessian(lambda x: scalar_f(cnp, x))(x)
    np.testing.assert_allclose(h, jax.hessian(lambda x: scalar_f(jnp, x))(x), rtol=1e-10)


def test_grad_of_grad():
    f = lambda x: cnp.sum(cnp.sin(x) * x)  # noqa: E731
    fj = lambda x: jnp.sum(jnp.sin(x) * x)  # noqa: E731
    x = np.array(0.7)
    g2 = catml.grad(catml.grad(f))(x)
    np.testing.assert_allclose(g2, jax.grad(jax.grad(fj))(x), rtol=1e-12)
    g3 = catml.grad(catml.grad(catml.grad(f)))(x)
    np.testing.assert_allclose(g3, jax.grad(jax.grad(jax.grad(fj)))(x), rtol=1e-12)


def test_jit_of_grad_and_pytree_jvp():
    params = make_params(np.random.default_rng(5))
    x = np.random.default_rng(6).normal(size=(2, 4))
    g = catml.jit(catml.grad(mlp))(params, x)
    wg = jax.grad(mlp)(params, x)
    for a, b in zip(jax.tree_util.tree_leaves(g), jax.tree_util.tree_leaves(wg)):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
    tangents = jax.tree_util.tree_map(lambda a: np.ones_like(a), params)
    y, t = catml.jvp(lambda p: mlp(p, x), (params,), (tangents,))
    wy, wt = jax.jvp(lambda p: mlp(p, x), (params,), (tangents,))
    np.testing.assert_allclose(y, wy, rtol=1e-12)
    np.testing.assert_allclose(t, wt, rtol=1e-10)


NN_X = np.random.default_rng(8).normal(size=(2, 3, 6, 6))
NN_W = np.random.default_rng(9).normal(size=(4, 3, 3, 3))
NN_B = np.random.default_rng(10).normal(size=(4,))


def jax_conv(x, w, b):
    y = jax.lax.conv_general_dilated(x, w, (1, 1), [(1, 1), (1, 1)])
    return y + b[None, :, None, None]


NN_CASES = {
    "conv2d": (lambda x: F.conv2d(x, NN_W, NN_B, padding=1), lambda x: jax_conv(x, NN_W, NN_B)),
    "max_pool2d": (lambda x: F.max_pool2d(x, 2),
                   lambda x: jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")),
    "avg_pool2d": (lambda x: F.avg_pool2d(x, 2),
                   lambda x: jax.lax.reduce_window(x, 0.0, jax.lax.add, (1, 1, 2, 2), (1, 1, 2, 2), "VALID") / 4),
    "softmax": (lambda x: F.softmax(x, axis=-1), lambda x: jax.nn.softmax(x, axis=-1)),
    "log_softmax": (lambda x: F.log_softmax(x, axis=1), lambda x: jax.nn.log_softmax(x, axis=1)),
    "gelu": (lambda x: F.gelu(x), lambda x: jax.nn.gelu(x, approximate=False)),
    "gelu_tanh": (lambda x: F.gelu(x, approximate=True), lambda x: jax.nn.gelu(x, approximate=True)),
    "sigmoid": (lambda x: F.sigmoid(x), jax.nn.sigmoid),
    "layer_norm": (lambda x: F.layer_norm(x, (6, 6)),
                   lambda x: (x - x.mean((2, 3), keepdims=True)) / jnp.sqrt(x.var((2, 3), keepdims=True) + 1e-5)),
    "mse": (lambda x: F.mse(x, np.ones_like(NN_X)), lambda x: jnp.mean((x - 1.0) ** 2)),
}


@pytest.mark.parametrize("name", sorted(NN_CASES))
def test_nn_value_and_vjp(name):
    f, fj = NN_CASES[name]
    y, pull = catml.vjp(f, NN_X)
    wy, wpull = jax.vjp(fj, NN_X)
    np.testing.assert_allclose(y, wy, rtol=1e-10, atol=1e-12)
    c = cot_for(np.shape(wy))
    np.testing.assert_allclose(pull(c)[0], wpull(c)[0], rtol=1e-9, atol=1e-12)


def test_linear_and_cross_entropy():
    x = np.random.default_rng(1).normal(size=(5, 3))
    w = np.random.default_rng(2).normal(size=(4, 3))
    b = np.random.default_rng(3).normal(size=(4,))
    labels = np.array([0, 3, 1, 2, 3], dtype=np.int64)

    def loss(w, b):
        return F.cross_entropy(F.linear(x, w, b), labels)

    def loss_j(w, b):
        z = x @ w.T + b
        return -jnp.mean(jax.nn.log_softmax(z)[jnp.arange(5), labels])

    v, g = catml.value_and_grad(loss, argnums=(0, 1))(w, b)
    wv, wg = jax.value_and_grad(loss_j, argnums=(0, 1))(w, b)
    np.testing.assert_allclose(v, wv, rtol=1e-12)
    np.testing.assert_allclose(g[0], wg[0], rtol=1e-10)
    np.testing.assert_allclose(g[1], wg[1], rtol=1e-10)
