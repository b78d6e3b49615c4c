"""NumPy-named functions over traced values and arrays (`import catml.numpy as cnp`).

Inside a traced function they record CatML primitives; on NumPy arrays they evaluate at once
and return arrays. Shapes broadcast as in NumPy; dtypes never change silently.
"""

from ._ops import (  # noqa: F401
    abs, absolute, add, amax, amin, arctan, argmax, argmin, astype, broadcast_to, ceil, clip,
    concatenate, cos, divide, dot, equal, erf, exp, expand_dims, expm1, floor, full_like,
    greater, greater_equal, less, less_equal, log, log1p, logical_and, logical_not, logical_or,
    logical_xor, matmul, max, maximum, mean, min, minimum, multiply, negative, not_equal,
    ones_like, outer, power, ravel, reciprocal, reshape, round, sign, sin, sqrt, square,
    squeeze, stack, std, subtract, sum, swapaxes, take, tan, tanh, transpose, true_divide, var,
    vdot, where, zeros_like,
)
from numpy import float32, float64, int64, bool_  # noqa: F401  (dtypes, as NumPy names them)

__all__ = [
    "abs", "absolute", "add", "amax", "amin", "arctan", "argmax", "argmin", "astype",
    "broadcast_to", "ceil", "clip", "concatenate", "cos", "divide", "dot", "equal", "erf",
    "exp", "expand_dims", "expm1", "floor", "full_like", "greater", "greater_equal", "less",
    "less_equal", "log", "log1p", "logical_and", "logical_not", "logical_or", "logical_xor",
    "matmul", "max", "maximum", "mean", "min", "minimum", "multiply", "negative", "not_equal",
    "ones_like", "outer", "power", "ravel", "reciprocal", "reshape", "round", "sign", "sin",
    "sqrt", "square", "squeeze", "stack", "std", "subtract", "sum", "swapaxes", "take", "tan",
    "tanh", "transpose", "true_divide", "var", "vdot", "where", "zeros_like",
    "float32", "float64", "int64", "bool_",
]
