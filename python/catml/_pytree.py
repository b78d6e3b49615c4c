"""Pytrees: nested dicts, lists and tuples of leaves (arrays, scalars, traced values).

A tree definition is a hashable description of the nesting, so that it can key a cache.
Dicts are flattened in sorted key order, as JAX does.
"""

from __future__ import annotations

from typing import Any, List, Tuple

import numpy as np

LEAF = ("*",)
NONE = ("None",)


def flatten(tree: Any) -> Tuple[List[Any], tuple]:
    """The leaves in order and the tree definition."""
    leaves: List[Any] = []
    return leaves, _flatten(tree, leaves)


def flatten_into(tree: Any, leaves: List[Any]) -> tuple:
    """The tree definition; the leaves are appended to `leaves` in order."""
    return _flatten(tree, leaves)


def _flatten(tree: Any, leaves: List[Any]) -> tuple:
    # Exact dicts and NumPy leaves first: the common call, with no isinstance chain per leaf.
    if type(tree) is dict:
        keys = sorted(tree)
        children = []
        for k in keys:
            v = tree[k]
            if type(v) is np.ndarray:
                leaves.append(v)
                children.append(LEAF)
            else:
                children.append(_flatten(v, leaves))
        return ("dict", tuple(keys), tuple(children))
    if type(tree) is np.ndarray:
        leaves.append(tree)
        return LEAF
    if tree is None:
        return NONE
    if isinstance(tree, dict):
        keys = sorted(tree)
        return ("dict", tuple(keys), tuple(_flatten(tree[k], leaves) for k in keys))
    if isinstance(tree, tuple) and not hasattr(tree, "_fields"):
        return ("tuple", tuple(_flatten(x, leaves) for x in tree))
    if isinstance(tree, list):
        return ("list", tuple(_flatten(x, leaves) for x in tree))
    leaves.append(tree)
    return LEAF


def unflatten(treedef: tuple, leaves: List[Any]) -> Any:
    """The tree of `treedef` holding `leaves` in order."""
    it = iter(leaves)
    out = _unflatten(treedef, it)
    return out


def _unflatten(treedef: tuple, it) -> Any:
    kind = treedef[0]
    if kind == "*":
        return next(it)
    if kind == "None":
        return None
    if kind == "dict":
        return {k: next(it) if c is LEAF else _unflatten(c, it)
                for k, c in zip(treedef[1], treedef[2])}
    children = [_unflatten(c, it) for c in treedef[1]]
    return tuple(children) if kind == "tuple" else children


def paths(treedef: tuple, prefix: str) -> List[str]:
    """A name per leaf: `prefix`, then `.key` or `.index` per level (`params.w`, `xs.0`)."""
    out: List[str] = []
    _paths(treedef, prefix, out)
    return out


def _paths(treedef: tuple, prefix: str, out: List[str]) -> None:
    kind = treedef[0]
    if kind == "*":
        out.append(prefix)
    elif kind == "dict":
        for k, c in zip(treedef[1], treedef[2]):
            _paths(c, f"{prefix}.{k}", out)
    elif kind in ("list", "tuple"):
        for i, c in enumerate(treedef[1]):
            _paths(c, f"{prefix}.{i}", out)


def describe(treedef: tuple) -> str:
    """The structure as a short text, for errors."""
    kind = treedef[0]
    if kind == "*":
        return "*"
    if kind == "None":
        return "None"
    if kind == "dict":
        inner = ", ".join(f"{k!r}: {describe(c)}" for k, c in zip(treedef[1], treedef[2]))
        return "{" + inner + "}"
    inner = ", ".join(describe(c) for c in treedef[1])
    return f"({inner})" if kind == "tuple" else f"[{inner}]"
