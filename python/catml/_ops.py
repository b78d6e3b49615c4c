"""Operations on traced values and arrays, each one or a few CatML primitives.

Inside a trace they record nodes; on NumPy arrays they run at once and return arrays. Shapes
broadcast as in NumPy (by explicit `broadcast` nodes). Dtypes never change silently: a Python
scalar takes the dtype of the array it meets, and two arrays of different dtypes are refused
by the primitive's type rule.
"""

from __future__ import annotations

import builtins
import json
from typing import Any, Optional, Sequence, Tuple, Union

import numpy as np

from . import _catml
from ._tracer import CATML_OF, NUMPY_OF, Tracer

Axis = Union[None, int, Sequence[int]]

_SCALARS = (bool, int, float)

def _is_scalar(x: Any) -> bool:
    return isinstance(x, _SCALARS) and not isinstance(x, np.generic)

def _dtype(x: Any) -> Optional[str]:
    """The CatML dtype of a tracer or array; None for a Python scalar."""
    if isinstance(x, Tracer):
        return x._v.dtype
    if _is_scalar(x):
        return None
    d = np.asarray(x).dtype
    if d not in CATML_OF:
        raise _catml.TypeError(
            f"an operand has dtype {d}; CatML takes float32, float64, int64 or bool arrays "
            "(convert explicitly)")
    return CATML_OF[d]

def _scalar_dtype(x: Any, like: Optional[str]) -> str:
    if isinstance(x, bool):
        return "bool"
    if like is not None and like != "bool" and not (isinstance(x, float) and like == "i64"):
        return like
    return "i64" if isinstance(x, int) else "f64"

def value(x: Any, like: Optional[str] = None) -> "_catml.Value":
    """The CatML value of `x`: a tracer's own, otherwise a constant (copied)."""
    if isinstance(x, Tracer):
        return x._v
    if _is_scalar(x):
        return _catml.constant(np.asarray(x, dtype=NUMPY_OF[_scalar_dtype(x, like)]))
    _dtype(x)
    return _catml.constant(np.asarray(x))

def wrap(v: "_catml.Value") -> Any:
    """A tracer inside a trace, a NumPy array outside."""
    return Tracer(v) if v.is_traced else v.numpy()

def apply(name: str, operands: Sequence["_catml.Value"], **attrs: Any) -> "_catml.Value":
    return _catml.apply(name, json.dumps(attrs), list(operands))

def _shape(x: Any) -> Tuple[int, ...]:
    if isinstance(x, Tracer):
        return x.shape
    return np.shape(x)

def _broadcast(v: "_catml.Value", shape: Tuple[int, ...]) -> "_catml.Value":
    """`v` broadcast to `shape` by NumPy's rule (trailing axes align, size 1 stretches)."""
    have = tuple(v.shape)
    if have == tuple(shape):
        return v
    offset = len(shape) - len(have)
    kept = [i for i, d in enumerate(have) if d == shape[offset + i]]
    if len(kept) != len(have):
        v = apply("reshape", [v], shape=[have[i] for i in kept])
    return apply("broadcast", [v], shape=list(shape), dims=[offset + i for i in kept])

def _operands(*xs: Any) -> Tuple[list, Tuple[int, ...]]:
    """Values of `xs` broadcast to their common shape."""
    like = next((d for d in map(_dtype, xs) if d is not None), None)
    try:
        shape = np.broadcast_shapes(*(_shape(x) for x in xs))
    except ValueError:
        shapes = ", ".join(str(_shape(x)) for x in xs)
        raise _catml.TypeError(f"shapes {shapes} do not broadcast together") from None
    return [_broadcast(value(x, like), shape) for x in xs], shape

def _binary(name: str, x: Any, y: Any) -> Any:
    vs, _ = _operands(x, y)
    return wrap(apply(name, vs))

def _unary(name: str, x: Any, **attrs: Any) -> Any:
    return wrap(apply(name, [value(x)], **attrs))

def _axes(x: Any, axis: Axis) -> Optional[list]:
    rank = len(_shape(x))
    if axis is None:
        return None
    axes = [axis] if isinstance(axis, int) else list(axis)
    out = []
    for a in axes:
        if not -rank <= a < rank:
            raise _catml.ValueError(f"axis {a} is out of range for a value of rank {rank}")
        out.append(a % rank)
    return sorted(set(out))

def _keep(x: Any, r: Any, axes: Optional[list], keepdims: bool) -> Any:
    if not keepdims:
        return r
    shape = [1 if axes is None or i in axes else d for i, d in enumerate(_shape(x))]
    return reshape(r, shape)

# Elementwise arithmetic.
def add(x, y): return _binary("add", x, y)
def subtract(x, y): return _binary("sub", x, y)
def multiply(x, y): return _binary("mul", x, y)
def divide(x, y): return _binary("div", x, y)
def maximum(x, y): return _binary("maximum", x, y)
def minimum(x, y): return _binary("minimum", x, y)
def negative(x): return _unary("neg", x)
def exp(x): return _unary("exp", x)
def expm1(x): return _unary("expm1", x)
def log(x): return _unary("log", x)
def log1p(x): return _unary("log1p", x)
def tanh(x): return _unary("tanh", x)
def sin(x): return _unary("sin", x)
def cos(x): return _unary("cos", x)
def tan(x): return divide(sin(x), cos(x))
def arctan(x): return _unary("atan", x)
def sqrt(x): return _unary("sqrt", x)
def abs(x): return _unary("abs", x)
def sign(x): return _unary("sign", x)
def floor(x): return _unary("floor", x)
def ceil(x): return _unary("ceil", x)
def round(x): return _unary("round", x)
def square(x): return _unary("square", x)
def reciprocal(x): return _unary("reciprocal", x)
def clip(x, a_min, a_max): return _unary("clip", x, min=float(a_min), max=float(a_max))
absolute = abs
true_divide = divide

def power(x: Any, y: Any) -> Any:
    """x ** y: an integer exponent is `powi` (any x); otherwise `pow` (x > 0)."""
    if isinstance(y, (int, np.integer)) and not isinstance(y, bool):
        return _unary("powi", x, n=int(y))
    if isinstance(y, float) and y.is_integer() and builtins.abs(y) < 2**31:
        return _unary("powi", x, n=int(y))
    return _binary("pow", x, y)

# Comparisons and connectives (bool results).
def equal(x, y): return _binary("equal", x, y)
def not_equal(x, y): return logical_not(equal(x, y))
def less(x, y): return _binary("less", x, y)
def less_equal(x, y): return _binary("less_equal", x, y)
def greater(x, y): return _binary("greater", x, y)
def greater_equal(x, y): return _binary("greater_equal", x, y)
def logical_and(x, y): return _binary("logical_and", x, y)
def logical_or(x, y): return _binary("logical_or", x, y)
def logical_xor(x, y): return _binary("logical_xor", x, y)
def logical_not(x): return _unary("logical_not", x)

def where(condition: Any, x: Any, y: Any) -> Any:
    """x where `condition` holds, else y (the condition has the result's shape)."""
    vs, shape = _operands(x, y)
    c = value(condition)
    if tuple(c.shape) != tuple(shape):
        c = _broadcast(c, shape)
    return wrap(apply("where", [c, *vs]))

# Reductions.
def sum(x: Any, axis: Axis = None, keepdims: bool = False) -> Any:
    axes = _axes(x, axis)
    r = wrap(apply("sum", [value(x)], **({} if axes is None else {"axes": axes})))
    return _keep(x, r, axes, keepdims)

def mean(x: Any, axis: Axis = None, keepdims: bool = False) -> Any:
    axes = _axes(x, axis)
    r = wrap(apply("mean", [value(x)], **({} if axes is None else {"axes": axes})))
    return _keep(x, r, axes, keepdims)

def max(x: Any, axis: Axis = None, keepdims: bool = False) -> Any:
    axes = _axes(x, axis)
    r = wrap(apply("reduce_max", [value(x)], **({} if axes is None else {"axes": axes})))
    return _keep(x, r, axes, keepdims)

def min(x: Any, axis: Axis = None, keepdims: bool = False) -> Any:
    return negative(max(negative(x), axis, keepdims))

amax = max
amin = min

def var(x: Any, axis: Axis = None, keepdims: bool = False) -> Any:
    centred = subtract(x, mean(x, axis, keepdims=True))
    return mean(square(centred), axis, keepdims)

def std(x: Any, axis: Axis = None, keepdims: bool = False) -> Any:
    return sqrt(var(x, axis, keepdims))

def argmax(x: Any, axis: Optional[int] = None) -> Any:
    if axis is None:
        return _unary("argmax", reshape(x, (-1,)), axis=0)
    return _unary("argmax", x, axis=_axes(x, axis)[0])

def argmin(x: Any, axis: Optional[int] = None) -> Any:
    return argmax(negative(x), axis)

# Shapes and layout.
def reshape(x: Any, shape: Union[int, Sequence[int]]) -> Any:
    shape = [shape] if isinstance(shape, int) else [int(d) for d in shape]
    n = int(np.prod(_shape(x), dtype=np.int64))
    if shape.count(-1) == 1:
        rest = int(np.prod([d for d in shape if d != -1], dtype=np.int64))
        if rest == 0 or n % rest:
            raise _catml.ValueError(f"cannot reshape {_shape(x)} into {tuple(shape)}")
        shape[shape.index(-1)] = n // rest
    return _unary("reshape", x, shape=shape)

def transpose(x: Any, axes: Optional[Sequence[int]] = None) -> Any:
    rank = len(_shape(x))
    perm = list(range(rank))[::-1] if axes is None else [a % rank for a in axes]
    if rank < 2 and axes is None:
        return wrap(value(x))
    return _unary("permute", x, perm=perm)

def swapaxes(x: Any, a: int, b: int) -> Any:
    perm = list(range(len(_shape(x))))
    perm[a], perm[b] = perm[b], perm[a]
    return transpose(x, perm)

def expand_dims(x: Any, axis: int) -> Any:
    shape = list(_shape(x))
    shape.insert(axis % (len(shape) + 1), 1)
    return reshape(x, shape)

def squeeze(x: Any, axis: Axis = None) -> Any:
    shape = _shape(x)
    drop = [i for i, d in enumerate(shape) if d == 1] if axis is None else _axes(x, axis)
    return reshape(x, [d for i, d in enumerate(shape) if i not in drop])

def ravel(x: Any) -> Any:
    return reshape(x, (-1,))

def broadcast_to(x: Any, shape: Sequence[int]) -> Any:
    return wrap(_broadcast(value(x), tuple(shape)))

def concatenate(xs: Sequence[Any], axis: int = 0) -> Any:
    like = next((d for d in map(_dtype, xs) if d is not None), None)
    vs = [value(x, like) for x in xs]
    rank = len(vs[0].shape)
    return wrap(apply("concat", vs, axis=axis % rank))

def stack(xs: Sequence[Any], axis: int = 0) -> Any:
    return concatenate([expand_dims(x, axis) for x in xs], axis)

def astype(x: Any, dtype: Any) -> Any:
    d = np.dtype(dtype)
    if d not in CATML_OF:
        raise _catml.TypeError(f"CatML has no dtype {d}")
    if _dtype(x) == CATML_OF[d]:
        return wrap(value(x))
    return _unary("convert", x, dtype=CATML_OF[d])

def _full(x: Any, fill: float, dtype: Any = None) -> Any:
    d = np.dtype(dtype) if dtype is not None else NUMPY_OF[_dtype(x) or "f64"]
    return wrap(value(np.full(_shape(x), fill, dtype=d)))

def zeros_like(x: Any, dtype: Any = None) -> Any: return _full(x, 0, dtype)
def ones_like(x: Any, dtype: Any = None) -> Any: return _full(x, 1, dtype)
def full_like(x: Any, fill_value: float, dtype: Any = None) -> Any: return _full(x, fill_value, dtype)

# Products.
def matmul(x: Any, y: Any) -> Any:
    """NumPy's matmul for ranks 1 to 3 (vectors are promoted and the axis removed)."""
    sx, sy = _shape(x), _shape(y)
    if len(sx) == 0 or len(sy) == 0:
        raise _catml.TypeError("matmul of a 0-d operand: use *")
    if len(sx) == 1:
        return reshape(matmul(reshape(x, (1, sx[0])), y), sy[:-2] + sy[-1:])
    if len(sy) == 1:
        return reshape(matmul(x, reshape(y, (sy[0], 1))), sx[:-1])
    like = _dtype(x) or _dtype(y)
    vx, vy = value(x, like), value(y, like)
    if len(sx) == 2 and len(sy) == 2:
        return wrap(apply("matmul", [vx, vy]))
    if len(sx) == 3 and len(sy) == 2:
        vy = _broadcast(vy, (sx[0],) + tuple(sy))
    elif len(sx) == 2 and len(sy) == 3:
        vx = _broadcast(vx, (sy[0],) + tuple(sx))
    elif not (len(sx) == 3 and len(sy) == 3):
        raise _catml.TypeError(f"matmul of shapes {sx} and {sy}: ranks above 3 are not supported")
    return wrap(apply("batch_matmul", [vx, vy]))

def dot(x: Any, y: Any) -> Any:
    if len(_shape(x)) == 1 and len(_shape(y)) == 1:
        return sum(multiply(x, y))
    return matmul(x, y)

def vdot(x: Any, y: Any) -> Any:
    return sum(multiply(ravel(x), ravel(y)))

def outer(x: Any, y: Any) -> Any:
    return multiply(reshape(x, (-1, 1)), reshape(y, (1, -1)))

# Indexing.
def getitem(x: Any, index: Any) -> Any:
    """Basic indexing: integers, slices (any step), None and Ellipsis; and 1-d integer arrays
    or lists on one axis."""
    shape = _shape(x)
    items = index if isinstance(index, tuple) else (index,)
    n_real = builtins.sum(1 for i in items if i is not None and i is not Ellipsis)
    if n_real > len(shape):
        raise IndexError(f"too many indices ({n_real}) for a value of rank {len(shape)}")
    expanded = []
    for i in items:
        if i is Ellipsis:
            expanded.extend([slice(None)] * (len(shape) - n_real))
        else:
            expanded.append(i)
    if Ellipsis not in items:
        expanded.extend([slice(None)] * (len(shape) - n_real))
    v = value(x)
    out_shape = []
    axis = 0
    for i in expanded:
        if i is None:
            out_shape.append(1)
            continue
        n = shape[axis]
        if isinstance(i, Tracer):
            raise IndexError("indexing by a traced value is not supported: use take")
        if isinstance(i, (int, np.integer)) and not isinstance(i, bool):
            k = int(i)
            if not -n <= k < n:
                raise IndexError(f"index {k} is out of bounds for axis {axis} with size {n}")
            v = apply("gather", [v], axis=axis, indices=[k % n])
        elif isinstance(i, slice):
            picked = list(range(*i.indices(n)))
            if picked != list(range(n)):
                if not picked:
                    raise IndexError(f"slice {i} selects nothing on axis {axis}")
                v = apply("gather", [v], axis=axis, indices=picked)
            out_shape.append(len(picked))
        else:
            picked = np.asarray(i)
            if picked.ndim != 1 or picked.dtype.kind not in "iu":
                raise IndexError(f"unsupported index {i!r}")
            if ((picked < -n) | (picked >= n)).any():
                raise IndexError(f"an index in {i!r} is out of bounds for axis {axis} with size {n}")
            v = apply("gather", [v], axis=axis, indices=[int(k) % n for k in picked])
            out_shape.append(len(picked))
        axis += 1
    if tuple(v.shape) != tuple(out_shape):
        v = apply("reshape", [v], shape=out_shape)
    return wrap(v)

def take(x: Any, indices: Any, axis: int = 0) -> Any:
    """Rows of x at integer indices (an i64 array or traced value); only axis 0."""
    if axis != 0:
        raise _catml.ValueError("take supports axis=0 only")
    return wrap(apply("take", [value(x), value(indices)]))

# Activations CatML has as primitives.
def sigmoid(x): return _unary("sigmoid", x)
def relu(x): return _unary("relu", x)
def softplus(x): return _unary("softplus", x)
def erf(x): return _unary("erf", x)
def rsqrt(x): return _unary("rsqrt", x)
def stop_gradient(x): return _unary("stop_gradient", x)

