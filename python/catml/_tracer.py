"""`Tracer`: a value of a function being traced. Operators record primitives."""

from __future__ import annotations

from typing import Any, Tuple

import numpy as np

from . import _catml

NUMPY_OF = {"f32": np.dtype(np.float32), "f64": np.dtype(np.float64),
            "i64": np.dtype(np.int64), "bool": np.dtype(np.bool_)}
CATML_OF = {v: k for k, v in NUMPY_OF.items()}


class Tracer:
    """A value inside `catml.trace`, `jit`, `grad` and the other transforms.

    It has a shape and a dtype but no numbers: each operation on it records one node of the
    program being traced. Using it after its trace ended raises `catml.TracerLeakError`.
    """

    __slots__ = ("_v",)
    __array_priority__ = 1000  # NumPy defers `array + tracer` to `Tracer.__radd__`

    def __init__(self, value: "_catml.Value") -> None:
        self._v = value

    @property
    def shape(self) -> Tuple[int, ...]:
        return self._v.shape

    @property
    def dtype(self) -> np.dtype:
        return NUMPY_OF[self._v.dtype]

    @property
    def ndim(self) -> int:
        return len(self._v.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self._v.shape, dtype=np.int64))

    @property
    def T(self) -> "Tracer":
        return _ops.transpose(self)

    def __repr__(self) -> str:
        dims = ", ".join(str(d) for d in self.shape)
        return f"Tracer({self._v.dtype}[{dims}])"

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d traced value")
        return self.shape[0]

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    # Arithmetic: NumPy broadcasting, Python scalars take the other operand's dtype.
    def __add__(self, y): return _ops.add(self, y)
    def __radd__(self, y): return _ops.add(y, self)
    def __sub__(self, y): return _ops.subtract(self, y)
    def __rsub__(self, y): return _ops.subtract(y, self)
    def __mul__(self, y): return _ops.multiply(self, y)
    def __rmul__(self, y): return _ops.multiply(y, self)
    def __truediv__(self, y): return _ops.divide(self, y)
    def __rtruediv__(self, y): return _ops.divide(y, self)
    def __pow__(self, y): return _ops.power(self, y)
    def __rpow__(self, y): return _ops.power(y, self)
    def __matmul__(self, y): return _ops.matmul(self, y)
    def __rmatmul__(self, y): return _ops.matmul(y, self)
    def __neg__(self): return _ops.negative(self)
    def __pos__(self): return self
    def __abs__(self): return _ops.abs(self)

    # Comparisons give bool values.
    def __lt__(self, y): return _ops.less(self, y)
    def __le__(self, y): return _ops.less_equal(self, y)
    def __gt__(self, y): return _ops.greater(self, y)
    def __ge__(self, y): return _ops.greater_equal(self, y)
    def __eq__(self, y): return _ops.equal(self, y)  # type: ignore[override]
    def __ne__(self, y): return _ops.not_equal(self, y)  # type: ignore[override]
    def __and__(self, y): return _ops.logical_and(self, y)
    def __or__(self, y): return _ops.logical_or(self, y)
    def __xor__(self, y): return _ops.logical_xor(self, y)
    def __invert__(self): return _ops.logical_not(self)
    __hash__ = None  # type: ignore[assignment]

    def __getitem__(self, index: Any) -> "Tracer":
        return _ops.getitem(self, index)

    # Methods NumPy arrays have.
    def sum(self, axis=None, keepdims=False): return _ops.sum(self, axis, keepdims=keepdims)
    def mean(self, axis=None, keepdims=False): return _ops.mean(self, axis, keepdims=keepdims)
    def max(self, axis=None, keepdims=False): return _ops.max(self, axis, keepdims=keepdims)
    def min(self, axis=None, keepdims=False): return _ops.min(self, axis, keepdims=keepdims)
    def reshape(self, *shape): return _ops.reshape(self, shape[0] if len(shape) == 1 else shape)
    def transpose(self, *axes): return _ops.transpose(self, axes or None)
    def astype(self, dtype): return _ops.astype(self, dtype)

    # A traced value has no numbers: refuse every way NumPy or Python would read them.
    def _no_data(self, what: str):
        raise _catml.TypeError(
            f"{what} of a traced value: it has no numbers while its function is traced "
            "(use catml.numpy.where for data-dependent choices)")

    def __bool__(self): self._no_data("truth value")
    def __float__(self): self._no_data("float()")
    def __int__(self): self._no_data("int()")
    def __index__(self): self._no_data("index")

    def __array__(self, dtype=None, copy=None):
        self._no_data("conversion to a NumPy array")


from . import _ops  # noqa: E402  (the operations use Tracer)
