"""The program API, loading, caching, eager arrays, dtypes and the GIL."""

import json
import threading

import numpy as np
import pytest

import catml
import catml.numpy as cnp

X32 = np.linspace(0.1, 1.2, 6, dtype=np.float32).reshape(2, 3)


def test_trace_program_texts_and_analyses():
    p = catml.trace(lambda w, x: cnp.sum(cnp.tanh(x @ w)), np.ones((3, 2)), np.ones((4, 3)))
    listing = p.listing()
    assert "matmul(x, w)" in listing and "tanh" in listing
    doc = json.loads(p.to_json())
    assert [i["name"] for i in doc["inputs"]] == ["w", "x"]
    assert p.dot().startswith("digraph")
    assert p.params()["total"] == 0
    cost = p.cost()
    assert cost["flops_by_op"]["matmul"] == 2 * 4 * 3 * 2
    assert 0 < cost["executable_peak_live_bytes"] <= cost["peak_live_bytes"]
    np.testing.assert_allclose(p.eval(np.ones((3, 2)), np.ones((4, 3))), 8 * np.tanh(3.0))
    assert [i[0] for i in p.inputs] == ["w", "x"]


def test_pytree_names_inputs():
    p = catml.trace(lambda params, x: params["w"] * x + params["b"][0],
                    {"w": np.ones(2), "b": [np.ones(2)]}, np.ones(2))
    assert [i[0] for i in p.inputs] == ["params.b.0", "params.w", "x"]


def test_f32_stays_f32():
    y = catml.jit(lambda x: cnp.exp(x) * 2.0 + 1)(X32)
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, np.exp(X32) * 2 + 1, rtol=1e-6)
    g = catml.grad(lambda x: cnp.sum(x * x))(X32)
    assert g.dtype == np.float32


def test_dtypes_round_trip():
    b = catml.jit(lambda x: x > 0.5)(X32)
    assert b.dtype == np.bool_ and b.tolist() == (X32 > 0.5).tolist()
    i = catml.jit(lambda x: cnp.argmax(x, axis=1))(X32)
    assert i.dtype == np.int64 and i.tolist() == [2, 2]
    c = catml.jit(lambda x: x.astype(np.float64))(X32)
    assert c.dtype == np.float64


def test_jit_traces_once_per_signature():
    calls = []

    def f(x):
        calls.append(1)
        return x * 2.0

    j = catml.jit(f)
    j(np.ones(3))
    j(np.zeros(3))
    assert j.trace_count() == 1 and len(calls) == 1
    j(np.ones(4))
    assert j.trace_count() == 2
    j(np.ones(3, dtype=np.float32))
    assert j.trace_count() == 3
    g = catml.grad(lambda x: cnp.sum(x))
    g(np.ones(3))
    g(np.ones(3))
    assert g.trace_count() == 1


def test_eager_numpy_functions():
    x = np.array([[1.0, 2.0], [3.0, 4.0]])
    np.testing.assert_allclose(cnp.exp(x), np.exp(x))
    np.testing.assert_allclose(cnp.sum(x, axis=0), [4.0, 6.0])
    np.testing.assert_allclose(cnp.matmul(x, x), x @ x)
    np.testing.assert_allclose(cnp.where(x > 2.0, x, 0.0), np.where(x > 2, x, 0))
    assert isinstance(cnp.tanh(x), np.ndarray)


def test_results_own_fresh_memory():
    x = np.arange(6.0).reshape(2, 3)
    y = catml.jit(lambda x: x)(x)
    assert not np.shares_memory(x, y)
    y[0, 0] = 99.0  # writable, and the input is untouched
    assert x[0, 0] == 0.0


def test_contiguous_inputs_are_read_in_place():
    """An evaluation reads a C-contiguous, aligned float or int64 array where NumPy keeps it;
    other layouts are copied once, and results never alias an input."""
    address = catml._catml._input_address
    for x in [np.arange(12.0).reshape(3, 4), np.ones((5, 7), np.float32),
              np.arange(10, dtype=np.int64)]:
        assert address(x) == x.ctypes.data
    x = np.arange(12.0).reshape(3, 4)
    for copied in [x.T, x[:, ::2], np.asfortranarray(x)]:
        assert address(copied) != copied.ctypes.data
    misaligned = np.frombuffer(bytearray(8 * 4 + 1), dtype=np.float64, count=4, offset=1)
    assert misaligned.ctypes.data % 8 != 0
    assert address(misaligned) != misaligned.ctypes.data
    np.testing.assert_array_equal(catml.jit(lambda v: v * 2.0)(misaligned), misaligned * 2)
    # Misaligned arrays of the other dtypes are copied too (their views need alignment).
    odd = np.frombuffer(bytearray(9), dtype=np.int16, count=4, offset=1)
    assert address(odd) == 0  # a storage dtype: copied, no address to compare
    big = np.random.default_rng(0).normal(size=(1000, 1000))
    y = catml.jit(lambda v: v)(big)
    assert not np.shares_memory(big, y)
    np.testing.assert_array_equal(y, big)


def test_bool_inputs_take_any_nonzero_byte_as_true():
    """A bool array may hold bytes other than 0 and 1 (a uint8 array viewed as bool); NumPy
    reads every nonzero byte as true, and so does CatML."""
    mask = np.array([0, 2, 1, 255, 0, 7], dtype=np.uint8).view(bool).reshape(2, 3)
    x = np.arange(6.0).reshape(2, 3)
    f = catml.jit(lambda m, x: cnp.where(m, x, -1.0))
    for _ in range(2):
        np.testing.assert_array_equal(f(mask, x), np.where(mask, x, -1.0))
    np.testing.assert_array_equal(f(mask[:, ::2], x[:, ::2]), np.where(mask, x, -1.0)[:, ::2])


def test_small_results_are_arrays_that_own_their_memory():
    """Results of any rank and dtype come back as C-contiguous, writable arrays owning their
    elements; int64 inputs of either NumPy spelling ('l' and 'q') are read, a byte-swapped
    float64 array is refused, on the first call and on the calls after it."""
    f = catml.jit(lambda x: (x > 1.5, cnp.sum(x), x.reshape(1, 2, 2), x * 2.0))
    for _ in range(2):
        outs = f(np.arange(4.0))
        assert [(r.dtype, r.shape) for r in outs] == [
            (np.dtype(bool), (4,)), (np.dtype(np.float64), ()),
            (np.dtype(np.float64), (1, 2, 2)), (np.dtype(np.float64), (4,))]
        for r in outs:
            assert r.flags.owndata and r.base is None
            assert r.flags.c_contiguous and r.flags.writeable
        np.testing.assert_array_equal(outs[3], [0.0, 2.0, 4.0, 6.0])
    double = catml.jit(lambda x: x * 2)
    for code in ["l", "q"]:
        for _ in range(2):
            np.testing.assert_array_equal(double(np.arange(3, dtype=code)), [0, 2, 4])
    for _ in range(2):
        with pytest.raises(TypeError, match="has dtype >f8"):
            double(np.arange(3.0).astype(">f8"))


def test_non_contiguous_input():
    x = np.arange(12.0).reshape(3, 4)[:, ::2]
    np.testing.assert_allclose(catml.jit(lambda x: x * 2.0)(x), x * 2)
    np.testing.assert_allclose(catml.jit(lambda x: x * 2.0)(np.asfortranarray(x)), x * 2)


def test_load_json_and_listing(tmp_path):
    p = catml.trace(lambda x, y: (cnp.sum(x * y), x * 2.0), np.ones(3), np.ones(3))
    path = tmp_path / "m.json"
    path.write_text(p.to_json())
    q = catml.load(path)
    s, d = q.eval(x=np.array([1.0, 2.0, 3.0]), y=np.array([2.0, 2.0, 2.0]))
    assert s == 12.0 and d.tolist() == [2.0, 4.0, 6.0]
    lst = tmp_path / "m.catml"
    lst.write_text(p.listing())
    assert catml.load(str(lst)).eval(x=np.ones(3), y=np.ones(3))[0] == 3.0
    g = q.grad({"x": np.array([1.0, 2.0, 3.0]), "y": np.array([5.0, 6.0, 7.0])},
               [np.array(1.0), np.ones(3)])
    assert g["x"].tolist() == [7.0, 8.0, 9.0] and g["y"].tolist() == [1.0, 2.0, 3.0]
    (s, d), (ts, td) = q.jvp({"x": np.ones(3), "y": np.full(3, 2.0)}, {"x": np.array([1.0, 0, 0])})
    assert ts == 2.0 and td.tolist() == [2.0, 0.0, 0.0]


def test_eval_releases_the_gil():
    """Another Python thread runs while an evaluation is under way: it counts only while the
    main thread is inside the call, which it could not do if the call held the GIL."""
    x = np.random.default_rng(0).normal(size=(300, 300))
    f = catml.jit(lambda x: cnp.sum(cnp.tanh(x @ x @ x @ x @ x @ x)))
    f(x)
    ticks = [0]
    inside = threading.Event()
    done = threading.Event()

    def count():
        while not done.is_set():
            if inside.is_set():
                ticks[0] += 1

    t = threading.Thread(target=count)
    t.start()
    try:
        for _ in range(5):
            inside.set()
            f(x)
            inside.clear()
    finally:
        done.set()
        t.join()
    assert ticks[0] > 1000
