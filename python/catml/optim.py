"""Optimisers over parameter pytrees, with the update rules of CatML's Rust optimisers
(PyTorch's `SGD` with zero dampening, and `Adam`/`AdamW`):

    SGD:  g = grad + wd p;  b = g (first step), b = mu b + g (after);  d = g + mu b (Nesterov)
          or b (momentum) or g;  p = p - lr d
    Adam: g = grad + wd p (AdamW: p = p (1 - lr wd) instead);  m = b1 m + (1 - b1) g;
          v = b2 v + (1 - b2) g^2;  p = p - lr m / (1 - b1^t) / (sqrt(v / (1 - b2^t)) + eps)

`opt.init(params)` gives the state; `opt.update(params, grads, state)` returns the new
parameters and state (nothing is modified in place). Leaves are NumPy arrays.
"""

from __future__ import annotations

from typing import Any, Tuple

import numpy as np

from . import _catml, _pytree


def _leaves_alike(params: Any, grads: Any):
    pl, pt = _pytree.flatten(params)
    gl, gt = _pytree.flatten(grads)
    if pt != gt:
        raise _catml.TypeError(
            f"gradients have structure {_pytree.describe(gt)}, the parameters "
            f"{_pytree.describe(pt)}")
    for i, (p, g) in enumerate(zip(pl, gl)):
        p, g = np.asarray(p), np.asarray(g)
        if p.shape != g.shape or p.dtype != g.dtype:
            raise _catml.TypeError(
                f"gradient {i} is {g.dtype}{list(g.shape)}, its parameter {p.dtype}{list(p.shape)}")
    return [np.asarray(p) for p in pl], [np.asarray(g) for g in gl], pt


class SGD:
    """Stochastic gradient descent with optional momentum, Nesterov momentum and L2 decay."""

    def __init__(self, lr: float, momentum: float = 0.0, nesterov: bool = False,
                 weight_decay: float = 0.0) -> None:
        if nesterov and momentum <= 0:
            raise _catml.ValueError("Nesterov momentum needs momentum > 0")
        self.lr, self.momentum, self.nesterov, self.weight_decay = lr, momentum, nesterov, weight_decay

    def init(self, params: Any) -> dict:
        return {"step": 0, "buf": [np.zeros_like(np.asarray(p)) for p in _pytree.flatten(params)[0]]}

    def update(self, params: Any, grads: Any, state: dict) -> Tuple[Any, dict]:
        pl, gl, tree = _leaves_alike(params, grads)
        step = state["step"] + 1
        new_p, new_buf = [], []
        for p, g, b in zip(pl, gl, state["buf"]):
            g = g + self.weight_decay * p if self.weight_decay else g
            if self.momentum > 0:
                b = g.copy() if step == 1 else self.momentum * b + g
                d = g + self.momentum * b if self.nesterov else b
            else:
                d = g
            new_p.append((p - self.lr * d).astype(p.dtype))
            new_buf.append(b)
        return _pytree.unflatten(tree, new_p), {"step": step, "buf": new_buf}


class Adam:
    """Adam, or AdamW with `decoupled=True`."""

    def __init__(self, lr: float = 1e-3, beta1: float = 0.9, beta2: float = 0.999,
                 eps: float = 1e-8, weight_decay: float = 0.0, decoupled: bool = False) -> None:
        self.lr, self.beta1, self.beta2, self.eps = lr, beta1, beta2, eps
        self.weight_decay, self.decoupled = weight_decay, decoupled

    def init(self, params: Any) -> dict:
        zeros = [np.zeros_like(np.asarray(p)) for p in _pytree.flatten(params)[0]]
        return {"step": 0, "m": zeros, "v": [z.copy() for z in zeros]}

    def update(self, params: Any, grads: Any, state: dict) -> Tuple[Any, dict]:
        pl, gl, tree = _leaves_alike(params, grads)
        t = state["step"] + 1
        b1, b2 = self.beta1, self.beta2
        new_p, new_m, new_v = [], [], []
        for p, g, m, v in zip(pl, gl, state["m"], state["v"]):
            if self.weight_decay and self.decoupled:
                p = p * (1 - self.lr * self.weight_decay)
            elif self.weight_decay:
                g = g + self.weight_decay * p
            m = b1 * m + (1 - b1) * g
            v = b2 * v + (1 - b2) * g * g
            m_hat, v_hat = m / (1 - b1 ** t), v / (1 - b2 ** t)
            new_p.append((p - self.lr * m_hat / (np.sqrt(v_hat) + self.eps)).astype(p.dtype))
            new_m.append(m)
            new_v.append(v)
        return _pytree.unflatten(tree, new_p), {"step": t, "m": new_m, "v": new_v}
