"""Neural-network functions over traced values and arrays, each a CatML primitive or a few.

Layouts follow PyTorch: images are NCHW, convolution weights (out, in/groups, kh, kw),
linear weights (out, in).
"""

from __future__ import annotations

from typing import Any, Optional, Sequence, Tuple, Union

from .. import _ops
from .._ops import apply, value, wrap

Pair = Union[int, Tuple[int, int]]


def _pair(v: Pair) -> list:
    return [v, v] if isinstance(v, int) else list(v)


def _padding(p: Pair) -> list:
    return [[k, k] for k in _pair(p)]


def linear(x: Any, weight: Any, bias: Optional[Any] = None) -> Any:
    """x W^T + b with W of shape (out, in); x of shape (in,) or (batch, in)."""
    if bias is None:
        return _ops.matmul(x, _ops.transpose(weight))
    return wrap(apply("linear", [value(x), value(weight), value(bias)]))


def conv2d(x: Any, weight: Any, bias: Optional[Any] = None, stride: Pair = 1,
           padding: Pair = 0, dilation: Pair = 1, groups: int = 1) -> Any:
    """2-d convolution (cross-correlation) of x (N, C, H, W) by weight (O, C/groups, kh, kw)."""
    ops = [value(x), value(weight)] + ([] if bias is None else [value(bias)])
    return wrap(apply("conv2d", ops, stride=_pair(stride), padding=_padding(padding),
                      dilation=_pair(dilation), groups=groups))


def _pool(name: str, x: Any, kernel_size: Pair, stride: Optional[Pair], padding: Pair) -> Any:
    k = _pair(kernel_size)
    s = k if stride is None else _pair(stride)
    return wrap(apply(name, [value(x)], kernel=k, stride=s, padding=_padding(padding)))


def max_pool2d(x: Any, kernel_size: Pair, stride: Optional[Pair] = None, padding: Pair = 0) -> Any:
    """The maximum over each window of x (N, C, H, W); stride defaults to the kernel."""
    return _pool("max_pool2d", x, kernel_size, stride, padding)


def avg_pool2d(x: Any, kernel_size: Pair, stride: Optional[Pair] = None, padding: Pair = 0) -> Any:
    """The mean over each window of x (N, C, H, W); stride defaults to the kernel."""
    return _pool("avg_pool2d", x, kernel_size, stride, padding)


def _axis(x: Any, axis: int) -> int:
    return axis % len(_ops._shape(x))


def softmax(x: Any, axis: int = -1) -> Any:
    return wrap(apply("softmax", [value(x)], axis=_axis(x, axis)))


def log_softmax(x: Any, axis: int = -1) -> Any:
    return wrap(apply("log_softmax", [value(x)], axis=_axis(x, axis)))


def layer_norm(x: Any, normalized_shape: Union[int, Sequence[int]], weight: Optional[Any] = None,
               bias: Optional[Any] = None, eps: float = 1e-5) -> Any:
    """Normalises over the last `len(normalized_shape)` axes; with weight and bias, affine."""
    n = 1 if isinstance(normalized_shape, int) else len(normalized_shape)
    rank = len(_ops._shape(x))
    axes = list(range(rank - n, rank))
    if (weight is None) != (bias is None):
        raise _ops._catml.TypeError("layer_norm takes both weight and bias, or neither")
    ops = [value(x)] + ([] if weight is None else [value(weight), value(bias)])
    return wrap(apply("layer_norm", ops, axes=axes, eps=float(eps), affine=weight is not None))


def batch_norm(x: Any, weight: Any, bias: Any, running_mean: Optional[Any] = None,
               running_var: Optional[Any] = None, training: bool = True,
               eps: float = 1e-5) -> Any:
    """Per-channel normalisation of x (N, C, ...): by the batch's statistics when training,
    by `running_mean` and `running_var` otherwise."""
    if training:
        return wrap(apply("batch_norm", [value(x), value(weight), value(bias)],
                          epsilon=float(eps), mode="training"))
    if running_mean is None or running_var is None:
        raise _ops._catml.TypeError("batch_norm in inference needs running_mean and running_var")
    ops = [value(x), value(weight), value(bias), value(running_mean), value(running_var)]
    return wrap(apply("batch_norm", ops, epsilon=float(eps), mode="inference"))


def cross_entropy(logits: Any, labels: Any) -> Any:
    """Mean cross-entropy of logits (B, C) against int64 labels (B,)."""
    return wrap(apply("cross_entropy", [value(logits), value(labels)]))


def mse(prediction: Any, target: Any) -> Any:
    """Mean squared error over every element."""
    like = _ops._dtype(prediction)
    return wrap(apply("mse", [value(prediction), value(target, like)]))


def gelu(x: Any, approximate: bool = False) -> Any:
    return wrap(apply("gelu", [value(x)], approximate=bool(approximate)))


def relu(x: Any) -> Any: return _ops.relu(x)
def sigmoid(x: Any) -> Any: return _ops.sigmoid(x)
def softplus(x: Any) -> Any: return _ops.softplus(x)


def dropout(key: Any, x: Any, rate: float) -> Any:
    """x with each element kept with probability 1 - rate (scaled by 1 / (1 - rate)), the
    mask drawn from the int64[2] key (the same key gives the same mask)."""
    return wrap(apply("dropout", [value(key), value(x)], rate=float(rate)))


def attention(q: Any, k: Any, v: Any, causal: bool = False) -> Any:
    """Scaled dot-product attention of q (B, H, Tq, d), k (B, H, Tk, d), v (B, H, Tk, dv)."""
    return wrap(apply("sdpa", [value(q), value(k), value(v)], causal=bool(causal)))
