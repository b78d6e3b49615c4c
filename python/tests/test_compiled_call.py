"""Calls of transformed functions answered in the extension: the signature cache, pytree edge
cases, odd arrays and hostile objects, and results that are fresh arrays."""

import collections
import threading

import numpy as np
import pytest

import catml
import catml.numpy as cnp


def loss(p, x):
    return cnp.sum(cnp.tanh(p["w"] @ x + p["b"]) ** 2)


def loss_np(p, x):
    return np.sum(np.tanh(p["w"] @ x + p["b"]) ** 2)


def grad_np(p, x):
    t = np.tanh(p["w"] @ x + p["b"])
    d = 2 * t * (1 - t * t)
    return {"b": d, "w": np.outer(d, x)}


RNG = np.random.default_rng(7)
P = {"w": RNG.normal(size=(3, 2)), "b": RNG.normal(size=3)}
X = RNG.normal(size=2)


def check(value, grads, p=P, x=X):
    np.testing.assert_allclose(value, loss_np(p, x), rtol=1e-12)
    expected = grad_np(p, x)
    assert type(grads) is dict and sorted(grads) == ["b", "w"]
    for k in expected:
        np.testing.assert_allclose(grads[k], expected[k], rtol=1e-12, atol=1e-15)


def test_same_signature_does_not_retrace_and_new_ones_do():
    calls = []

    def f(p, x):
        calls.append(1)
        return loss(p, x)

    vg = catml.value_and_grad(f)
    check(*vg(P, X))
    for _ in range(3):
        check(*vg({"b": P["b"] * 1, "w": P["w"] * 1}, X.copy()))
    assert vg.trace_count() == 1 and len(calls) == 1
    # A new shape, a new dtype and a new structure each trace once.
    p4 = {"w": np.ones((4, 2)), "b": np.ones(4)}
    vg(p4, X)
    vg(p4, X)
    assert vg.trace_count() == 2
    vg({"w": P["w"].astype(np.float32), "b": P["b"].astype(np.float32)}, X.astype(np.float32))
    assert vg.trace_count() == 3
    vg({"w": P["w"], "b": P["b"], "c": None}, X)
    assert vg.trace_count() == 4
    # Back to the first signature: found again, not traced again.
    check(*vg(P, X))
    vg(p4, X)
    check(*vg(P, X))
    assert vg.trace_count() == 4 and len(calls) == 4


def test_grad_and_jit_share_the_cache_machinery():
    g = catml.grad(loss)
    for _ in range(3):
        check(loss_np(P, X), g(P, X))
    assert g.trace_count() == 1
    j = catml.jit(lambda p, x: {"y": p["w"] @ x, "pair": (x, [x * 2.0])})
    for _ in range(2):
        out = j(P, X)
        assert sorted(out) == ["pair", "y"] and type(out["pair"]) is tuple
        assert type(out["pair"][1]) is list
        np.testing.assert_allclose(out["y"], P["w"] @ X)
        np.testing.assert_allclose(out["pair"][1][0], X * 2)
    assert j.trace_count() == 1


def test_argnums_tuple_and_has_aux():
    f = lambda p, x: (loss(p, x), x * 3.0)  # noqa: E731
    vg = catml.value_and_grad(f, argnums=(0, 1), has_aux=True)
    for _ in range(2):
        (value, aux), (gp, gx) = vg(P, X)
        np.testing.assert_allclose(value, loss_np(P, X))
        np.testing.assert_allclose(aux, X * 3)
        np.testing.assert_allclose(gp["w"], grad_np(P, X)["w"])
        assert gx.shape == (2,)
    g = catml.grad(f, has_aux=True)
    for _ in range(2):
        gp, aux = g(P, X)
        np.testing.assert_allclose(gp["b"], grad_np(P, X)["b"])
        np.testing.assert_allclose(aux, X * 3)


def test_python_scalars_and_zero_d_arrays():
    g = catml.grad(lambda a, b, n: a * a * b + n, argnums=(0, 1))
    for _ in range(2):
        ga, gb = g(3.0, np.array(2.0), 1.0)
        assert ga.shape == () and gb.shape == ()
        assert float(ga) == 12.0 and float(gb) == 9.0
    # A float and a 0-d float64 array have the same signature.
    g(np.array(3.0), 2.0, np.array(1.0))
    assert g.trace_count() == 1
    j = catml.jit(lambda x, n, flag: cnp.where(flag, x * n.astype(np.float64), x))
    assert float(j(2.0, 3, True)) == 6.0
    assert float(j(2.0, 4, False)) == 2.0
    assert j.trace_count() == 1


def test_non_contiguous_and_misaligned_arrays():
    vg = catml.value_and_grad(loss)
    x_strided = np.arange(4.0)[::2] * 0.3
    raw = np.zeros(2 * 8 + 1, dtype=np.uint8)
    x_misaligned = raw[1:].view(np.float64)
    x_misaligned[:] = X
    assert not x_misaligned.flags.aligned
    w_fortran = np.asfortranarray(P["w"])
    for _ in range(2):
        check(*vg({"w": w_fortran, "b": P["b"]}, X))
        check(*vg(P, x_strided), x=np.ascontiguousarray(x_strided))
        check(*vg(P, x_misaligned))
    assert vg.trace_count() == 1


def test_ragged_lists_and_int_keys_are_trees():
    f = lambda xs: cnp.sum(xs[0][0] * xs[0][1]) + cnp.sum(xs[1][0])  # noqa: E731
    g = catml.grad(f)
    a, b, c = np.ones(2), np.full(2, 3.0), np.ones(3)
    for _ in range(2):
        out = g([[a, b], [c]])
        assert type(out) is list and len(out[0]) == 2 and len(out[1]) == 1
        np.testing.assert_allclose(out[0][0], b)
        np.testing.assert_allclose(out[1][0], np.ones(3))
    h = catml.grad(lambda d: d[1] * d[2] * 2.0)
    out = h({2: 5.0, 1: 3.0})
    assert out == {1: 10.0, 2: 6.0}
    assert list(out) == [1, 2]


def test_dict_subclasses_use_their_iteration_and_indexing():
    class OddKeys(dict):
        def keys(self):
            return ["nonsense"]

    g = catml.grad(loss)
    for _ in range(2):
        check(loss_np(P, X), g(OddKeys(P), X))
    check(loss_np(P, X), g(collections.OrderedDict(reversed(list(P.items()))), X))
    assert g.trace_count() == 1

    class Lying(dict):
        def __iter__(self):
            return iter(["w", "b", "missing"])

    with pytest.raises(catml.TypeError, match="Lying argument could not be read as a dict"):
        g(Lying(P), X)


def test_hostile_leaves_and_keys_give_typed_errors():
    g = catml.grad(loss)
    with pytest.raises(catml.TypeError, match="keys of a dict argument cannot be sorted"):
        g({"w": P["w"], 1: P["b"]}, X)

    class BadArray:
        def __array__(self, dtype=None, copy=None):
            raise RuntimeError("no numbers here")

    with pytest.raises(catml.TypeError, match=r"argument `x` is a BadArray"):
        g(P, BadArray())
    Point = collections.namedtuple("Point", "x y")
    with pytest.raises(catml.TypeError, match=r"argument `x` is a Point"):
        g(P, Point(1.0, 2.0))
    with pytest.raises(catml.TypeError, match=r"argument `p.b` has dtype float16"):
        g({"w": P["w"], "b": P["b"].astype(np.float16)}, X)
    with pytest.raises(catml.TypeError, match="its leaf 1 is i64"):
        catml.grad(lambda d: d["a"] * 2.0)({"a": 1.0, "n": 2})
    with pytest.raises(catml.ValueError, match="argument `n` is the int 2361183241434822606848"):
        catml.jit(lambda n: n + 1)(2 ** 71)
    with pytest.raises(TypeError):
        g(P, x=X)
    # The cache still answers after the refusals.
    check(loss_np(P, X), g(P, X))


def test_results_are_fresh_arrays():
    j = catml.jit(lambda x, y: (x, x + 0.0, y.reshape(-1)))
    x = np.arange(6.0)
    y = np.arange(2000.0).reshape(40, 50)
    for _ in range(2):
        a, b, c = j(x, y)
        for out, src in ((a, x), (b, x), (c, y)):
            assert not np.shares_memory(out, src)
            np.testing.assert_array_equal(out.reshape(src.shape), src)
        assert a.flags.writeable and c.flags.writeable
        a[:] = -1.0
        c[:] = -1.0
    np.testing.assert_array_equal(x, np.arange(6.0))
    first, second = j(x, y), j(x, y)
    assert not np.shares_memory(first[1], second[1])


def test_traced_arguments_record_into_the_outer_trace():
    g = catml.grad(loss)
    outer = catml.jit(lambda p, x: g(p, x)["w"] * 2.0)
    for _ in range(2):
        np.testing.assert_allclose(outer(P, X), 2 * grad_np(P, X)["w"])
    gg = catml.grad(lambda x: catml.grad(lambda y: cnp.sum(y ** 3))(x).sum())
    np.testing.assert_allclose(gg(np.array([1.0, 2.0])), [6.0, 12.0])


def test_threads_share_one_cache():
    vg = catml.value_and_grad(loss)
    vg(P, X)
    errors = []

    def work():
        try:
            for _ in range(200):
                check(*vg(P, X))
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and vg.trace_count() == 1


def test_wraps_the_function():
    def named(p, x):
        """Doc."""
        return loss(p, x)

    vg = catml.value_and_grad(named)
    assert vg.__name__ == "named" and vg.__doc__ == "Doc." and vg.__wrapped__ is named
