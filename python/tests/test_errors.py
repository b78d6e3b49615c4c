"""Every error path: a catml.Error of the fitting class with the library's one-line message."""

import numpy as np
import pytest

import catml
import catml.numpy as cnp


def test_classes():
    assert issubclass(catml.TypeError, catml.Error) and issubclass(catml.TypeError, TypeError)
    assert issubclass(catml.ValueError, catml.Error) and issubclass(catml.ValueError, ValueError)
    assert issubclass(catml.TracerLeakError, catml.Error)


def test_float64_into_f32_program_names_the_input():
    p = catml.trace(lambda x: x * 2.0, np.ones(3, dtype=np.float32))
    with pytest.raises(TypeError, match=r"input `x` is a float64 array \(f64\[3\]\), the program takes f32\[3\]"):
        p.eval(np.ones(3))


def test_wrong_shape_input():
    p = catml.trace(lambda x: x * 2.0, np.ones(3))
    with pytest.raises(catml.TypeError, match=r"input `x` has type f64\[4\], the program takes f64\[3\]"):
        p.eval(np.ones(4))


def test_unsupported_dtype():
    with pytest.raises(catml.TypeError, match="argument `x` has dtype int32"):
        catml.jit(lambda x: x)(np.ones(3, dtype=np.int32))
    with pytest.raises(catml.TypeError, match="dtype float16"):
        cnp.exp(np.ones(2, dtype=np.float16))


def test_not_an_array():
    with pytest.raises(catml.TypeError, match="argument `x` is a str"):
        catml.jit(lambda x: x)("hello")


def test_mixed_dtypes_are_refused():
    with pytest.raises(catml.TypeError, match=r"add\(f32\[3\], f64\[3\]\)"):
        catml.jit(lambda x, y: x + y)(np.ones(3, dtype=np.float32), np.ones(3))


def test_type_rule_message():
    with pytest.raises(catml.TypeError, match="matmul"):
        catml.jit(lambda a, b: a @ b)(np.ones((2, 3)), np.ones((2, 3)))


def test_shapes_that_do_not_broadcast():
    with pytest.raises(catml.TypeError, match=r"shapes \(3,\), \(4,\) do not broadcast"):
        catml.jit(lambda a, b: a * b)(np.ones(3), np.ones(4))


def test_domain_error_eagerly():
    with pytest.raises(catml.ValueError, match="log"):
        cnp.log(np.array([-1.0, 2.0]))


def test_non_finite_result_names_the_node():
    with pytest.raises(catml.ValueError, match=r"node 0 `v1` \(exp\) produced 1 non-finite value"):
        catml.jit(lambda x: cnp.exp(x))(np.array([1000.0, 1.0]))


def test_tracer_leak():
    leaked = []

    def f(x):
        leaked.append(x)
        return x * 2.0

    catml.jit(f)(np.ones(2))
    with pytest.raises(catml.TracerLeakError, match="cannot leave the trace"):
        leaked[0] + 1.0
    with pytest.raises(catml.TracerLeakError, match="cannot leave the trace"):
        catml.jit(lambda y: y + leaked[0])(np.ones(2))
    with pytest.raises(catml.Error, match="traced value"):
        np.asarray(leaked[0])


def test_python_control_flow_on_a_tracer():
    def f(x):
        if cnp.sum(x) > 0:
            return x
        return -x

    with pytest.raises(catml.TypeError, match="truth value of a traced value"):
        catml.jit(f)(np.ones(2))
    with pytest.raises(catml.TypeError, match="float"):
        catml.jit(lambda x: float(x))(np.ones(()))


def test_user_exceptions_pass_through():
    def f(x):
        raise ZeroDivisionError("mine")

    with pytest.raises(ZeroDivisionError, match="mine"):
        catml.jit(f)(np.ones(2))


def test_grad_of_non_scalar():
    with pytest.raises(catml.TypeError, match=r"grad needs a function with one single-element float output, this one returns \(f64\[3\]\)"):
        catml.grad(lambda x: x * 2.0)(np.ones(3))


def test_grad_of_integer_input():
    with pytest.raises(catml.TypeError, match="only float inputs have gradients"):
        catml.grad(lambda x, i: cnp.sum(x), argnums=1)(np.ones(3), np.ones(3, dtype=np.int64))


def test_argnums_out_of_range():
    with pytest.raises(catml.TypeError, match="argnums names argument 2"):
        catml.grad(lambda x: cnp.sum(x), argnums=2)(np.ones(3))


def test_jvp_tangent_mismatch():
    with pytest.raises(catml.TypeError, match=r"tangent 0 has type f64\[2\], its primal f64\[3\]"):
        catml.jvp(lambda x: x * 2.0, (np.ones(3),), (np.ones(2),))
    with pytest.raises(catml.TypeError, match="tangents have structure"):
        catml.jvp(lambda x: x * 2.0, (np.ones(3),), ([np.ones(3)],))


def test_vjp_cotangent_mismatch():
    _, pull = catml.vjp(lambda x: (x * 2.0, cnp.sum(x)), np.ones(3))
    with pytest.raises(catml.TypeError, match="cotangents have structure"):
        pull(np.ones(3))


def test_indexing_errors():
    with pytest.raises(IndexError, match="out of bounds"):
        catml.jit(lambda x: x[5])(np.ones(3))
    with pytest.raises(IndexError, match="too many indices"):
        catml.jit(lambda x: x[0, 0])(np.ones(3))


def test_load_errors(tmp_path):
    with pytest.raises(catml.ValueError, match="cannot read"):
        catml.load(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{"inputs": [}')
    with pytest.raises(catml.ValueError, match="bad.json"):
        catml.load(bad)
    good = tmp_path / "good.json"
    good.write_text(catml.trace(lambda x: x * 2.0, np.ones(2)).to_json())
    p = catml.load(good)
    with pytest.raises(catml.TypeError, match="unknown input `y`"):
        p.eval(y=np.ones(2))
    with pytest.raises(catml.TypeError, match="missing input `x`"):
        p.grad({}, [np.ones(2)])


def test_unknown_primitive_attributes():
    with pytest.raises(catml.TypeError, match="clip"):
        cnp.clip(np.ones(2), 2.0, 1.0)
