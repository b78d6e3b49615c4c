"""Pytrees: nested dicts, lists and tuples of leaves (arrays, scalars, traced values).

A tree definition is a hashable description of the nesting, so that it can key a cache.
Dicts are flattened in sorted key order, as JAX does; a namedtuple is a leaf. Flattening and
rebuilding are the extension's (`catml._catml.tree_flatten`), which the transforms' calls use.
"""

from __future__ import annotations

from typing import Any, List, Tuple

from . import _catml

LEAF = ("*",)
NONE = ("None",)


def flatten(tree: Any) -> Tuple[List[Any], tuple]:
    """The leaves in order and the tree definition."""
    return _catml.tree_flatten(tree)


def flatten_into(tree: Any, leaves: List[Any]) -> tuple:
    """The tree definition; the leaves are appended to `leaves` in order."""
    ls, treedef = _catml.tree_flatten(tree)
    leaves.extend(ls)
    return treedef


def unflatten(treedef: tuple, leaves: List[Any]) -> Any:
    """The tree of `treedef` holding `leaves` (exactly as many as it has) in order."""
    return _catml.tree_unflatten(treedef, list(leaves))


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
