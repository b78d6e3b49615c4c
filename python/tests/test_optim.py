"""The optimisers' update rules on pytrees, checked against the formulas step by step."""

import numpy as np
import pytest

import catml
import catml.numpy as cnp


def test_adam_two_steps_by_hand():
    opt = catml.optim.Adam(lr=0.1)
    p = {"w": np.array([1.0, -2.0])}
    g = {"w": np.array([0.5, 0.25])}
    s = opt.init(p)
    p1, s = opt.update(p, g, s)
    # Step 1: m_hat = g, v_hat = g^2, so each weight moves by lr * g / (|g| + eps).
    np.testing.assert_allclose(p1["w"], [1.0 - 0.1, -2.0 - 0.1], rtol=1e-7)
    p2, s = opt.update(p1, g, s)
    m = 0.9 * 0.1 * g["w"] + 0.1 * g["w"]
    v = 0.999 * 0.001 * g["w"] ** 2 + 0.001 * g["w"] ** 2
    want = p1["w"] - 0.1 * (m / (1 - 0.81)) / (np.sqrt(v / (1 - 0.999 ** 2)) + 1e-8)
    np.testing.assert_allclose(p2["w"], want, rtol=1e-12)


def test_sgd_momentum_and_nesterov():
    p, g = [np.array([1.0])], [np.array([2.0])]
    opt = catml.optim.SGD(lr=0.5, momentum=0.9)
    s = opt.init(p)
    p1, s = opt.update(p, g, s)
    p2, s = opt.update(p1, g, s)
    assert p1[0].tolist() == [0.0] and p2[0].tolist() == [-1.9]  # b = 2, then 0.9 * 2 + 2
    nest = catml.optim.SGD(lr=0.5, momentum=0.9, nesterov=True)
    q1, _ = nest.update(p, g, nest.init(p))
    assert q1[0].tolist() == [1.0 - 0.5 * (2.0 + 0.9 * 2.0)]


def test_training_reduces_the_loss():
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(16, 3)), rng.normal(size=(16, 1))
    params = {"w": rng.normal(size=(3, 1)), "b": np.zeros(1)}

    def loss(p, x, y):
        return cnp.mean((x @ p["w"] + p["b"] - y) ** 2)

    step = catml.jit(catml.value_and_grad(loss))
    opt = catml.optim.Adam(lr=0.05)
    state = opt.init(params)
    first, _ = step(params, x, y)
    for _ in range(200):
        value, grads = step(params, x, y)
        params, state = opt.update(params, grads, state)
    best = np.linalg.lstsq(np.c_[x, np.ones(16)], y, rcond=None)[0]
    best_loss = np.mean((np.c_[x, np.ones(16)] @ best - y) ** 2)
    assert value < first and value - best_loss < 1e-3


def test_mismatched_gradients():
    opt = catml.optim.SGD(lr=0.1)
    with pytest.raises(catml.TypeError, match="gradients have structure"):
        opt.update({"w": np.ones(2)}, [np.ones(2)], opt.init({"w": np.ones(2)}))
