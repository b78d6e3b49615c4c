"""Function transforms: trace, jit, grad, value_and_grad, jvp, vjp, hvp, hessian.

Each traces the Python function once per input signature (the pytree structure of the
arguments and each leaf's shape and dtype), keeps the program and its derivative programs,
and afterwards only evaluates them, with the GIL released. Called with traced values (inside
another transform), a transform records its program into the outer trace, so transforms
compose: `grad(grad(f))`, `jvp(grad(f), ...)`, `jit(grad(f))`.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, Dict, List, Sequence, Tuple, Union

import numpy as np

from . import _catml, _pytree
from ._ops import value as _value
from ._ops import wrap as _wrap
from ._tracer import CATML_OF, Tracer

Argnums = Union[int, Sequence[int]]


def _leaf_array(x: Any, where: str) -> Any:
    """A leaf as a tracer or a NumPy array of a CatML dtype (Python scalars: f64, i64, bool)."""
    if isinstance(x, Tracer):
        return x
    if isinstance(x, bool):
        return np.asarray(x, dtype=np.bool_)
    if isinstance(x, int):
        if not -2**63 <= x < 2**63:
            raise _catml.ValueError(f"{where} is the int {x}, outside the range of int64")
        return np.asarray(x, dtype=np.int64)
    if isinstance(x, float):
        return np.asarray(x, dtype=np.float64)
    if isinstance(x, (np.ndarray, np.generic)):
        a = np.asarray(x)
        if a.dtype not in CATML_OF:
            raise _catml.TypeError(
                f"{where} has dtype {a.dtype}; CatML takes float32, float64, int64 or bool "
                "arrays (convert explicitly)")
        return a
    raise _catml.TypeError(
        f"{where} is a {type(x).__name__}; arguments are NumPy arrays, Python scalars, or "
        "dicts, lists and tuples of them")


def _array_types(leaves: List[Any]) -> Any:
    """Each leaf's `(shape, dtype)` when every leaf is a NumPy array of a CatML dtype, else
    None."""
    types = []
    for x in leaves:
        if type(x) is not np.ndarray:
            return None
        d = CATML_OF.get(x.dtype)
        if d is None:
            return None
        types.append((x.shape, d))
    return tuple(types)


def _type_of(x: Any) -> Tuple[Tuple[int, ...], str]:
    if isinstance(x, Tracer):
        return tuple(x.shape), x._v.dtype
    return tuple(x.shape), CATML_OF[x.dtype]


def _arg_names(f: Callable, n: int) -> List[str]:
    try:
        params = list(inspect.signature(f).parameters.values())
    except (TypeError, ValueError):
        params = []
    names = []
    for i in range(n):
        p = params[i] if i < len(params) else None
        if p is not None and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            names.append(p.name)
        else:
            names.append(f"arg{i}")
    return names


class _Stage:
    """One traced program at one signature, and the derivative programs made from it."""

    __slots__ = ("program", "out_tree", "arg_trees", "derived")

    def __init__(self, program, out_tree, arg_trees):
        self.program = program
        self.out_tree = out_tree
        self.arg_trees = arg_trees
        self.derived: Dict[Any, Any] = {}

    def derive(self, key: Any, make: Callable[[], Any]) -> Any:
        d = self.derived.get(key)
        if d is None:
            d = self.derived[key] = make()
        return d


class _Staged:
    """A Python function and its stages by signature."""

    def __init__(self, f: Callable) -> None:
        self.f = f
        self.stages: Dict[Any, _Stage] = {}
        self.trace_count = 0
        self.names: Dict[int, List[str]] = {}

    def stage(self, args: Sequence[Any]) -> Tuple[_Stage, List[Any]]:
        leaves: List[Any] = []
        trees = tuple(_pytree.flatten_into(a, leaves) for a in args)
        # The common call: every leaf already a NumPy array of a CatML dtype. Names are only
        # worked out for a conversion, an error or a new trace.
        types = _array_types(leaves)
        if types is None:
            names = self._leaf_names(args, trees)
            leaves = [_leaf_array(x, f"argument `{p}`") for x, p in zip(leaves, names)]
            types = tuple(_type_of(x) for x in leaves)
        key = (trees, types)
        st = self.stages.get(key)
        if st is None:
            names = self._leaf_names(args, trees)
            st = self.stages[key] = self._trace(list(trees), names, types)
        return st, leaves

    def _leaf_names(self, args: Sequence[Any], trees: Tuple[tuple, ...]) -> List[str]:
        """A name per leaf: the argument's name, then its path in the tree (`params.w`)."""
        names = self.names.get(len(args))
        if names is None:
            names = self.names[len(args)] = _arg_names(self.f, len(args))
        return [p for name, tree in zip(names, trees) for p in _pytree.paths(tree, name)]

    def _trace(self, trees, names, types) -> _Stage:
        out_tree: List[Any] = [None]

        def flat(values):
            tracers = iter(Tracer(v) for v in values)
            args = [_pytree.unflatten(t, [next(tracers) for _ in range(_n_leaves(t))])
                    for t in trees]
            out = self.f(*args)
            leaves, out_tree[0] = _pytree.flatten(out)
            return [_value(x) for x in leaves]

        program = _catml.trace(flat, _unique(names), [(list(s), d) for s, d in types])
        self.trace_count += 1
        return _Stage(program, out_tree[0], trees)


def _n_leaves(tree: tuple) -> int:
    return len(_pytree.paths(tree, ""))


def _unique(names: List[str]) -> List[str]:
    seen: Dict[str, int] = {}
    out = []
    for n in names:
        k = seen.get(n, 0)
        seen[n] = k + 1
        out.append(n if k == 0 else f"{n}.{k}")
    return out


def _run(program, leaves: Sequence[Any]) -> List[Any]:
    """Evaluates on arrays (GIL released), or records into the current trace when any leaf is
    traced."""
    for x in leaves:
        if isinstance(x, Tracer):
            return [_wrap(v) for v in program.call([_value(x) for x in leaves])]
    return program.eval(leaves)


def _argnum_list(argnums: Argnums, n: int) -> List[int]:
    nums = [argnums] if isinstance(argnums, int) else list(argnums)
    for a in nums:
        if not -n <= a < n:
            raise _catml.TypeError(f"argnums names argument {a}, the function was given {n}")
    return [a % n for a in nums]


def _leaf_ranges(trees) -> List[range]:
    out, start = [], 0
    for t in trees:
        k = _n_leaves(t)
        out.append(range(start, start + k))
        start += k
    return out


class Program:
    """A CatML program: traced from a Python function or loaded from a file."""

    def __init__(self, program, in_trees=None, out_tree=None):
        self._p = program
        self._in_trees = in_trees
        self._out_tree = out_tree

    def listing(self) -> str:
        """The CatML listing (as `catml print` shows it)."""
        return self._p.listing()

    def to_json(self) -> str:
        """LensIR JSON."""
        return self._p.to_json()

    def dot(self) -> str:
        """A Graphviz DOT picture."""
        return self._p.dot()

    def params(self) -> dict:
        """Parameter counts: total, by tag, and per parameter."""
        return self._p.params()

    def cost(self) -> dict:
        """Flops, bytes read and written, and peak live bytes of one evaluation (by the
        interpreter, and by an executable, whose fused passes hold fewer values)."""
        return self._p.cost()

    @property
    def inputs(self) -> List[Tuple[str, Tuple[int, ...], str, str]]:
        """`(name, shape, dtype, kind)` per input."""
        return [(n, tuple(s), d, k) for n, s, d, k in self._p.inputs()]

    @property
    def output_names(self) -> List[str]:
        return self._p.output_names()

    def _named(self, inputs: Dict[str, Any]) -> Dict[str, Any]:
        return {k: _leaf_array(v, f"input `{k}`") for k, v in inputs.items()}

    def _outputs(self, outs: List[Any]) -> Any:
        if self._out_tree is not None:
            return _pytree.unflatten(self._out_tree, outs)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def eval(self, *args: Any, **inputs: Any) -> Any:
        """Evaluates: positionally with the structure of the examples it was traced on, or by
        input name. A traced program returns its function's output structure; a loaded one its
        single output or a tuple."""
        if args and inputs:
            raise _catml.TypeError("pass inputs either by position or by name, not both")
        if inputs:
            return self._outputs(self._p.eval_named(self._named(inputs)))
        leaves: List[Any] = []
        if self._in_trees is not None:
            if len(args) != len(self._in_trees):
                raise _catml.TypeError(
                    f"the program was traced on {len(self._in_trees)} arguments, found {len(args)}")
            for i, (a, t) in enumerate(zip(args, self._in_trees)):
                ls, tree = _pytree.flatten(a)
                if tree != t:
                    raise _catml.TypeError(
                        f"argument {i} has structure {_pytree.describe(tree)}, the program "
                        f"was traced on {_pytree.describe(t)}")
                leaves.extend(ls)
        else:
            leaves = list(args)
        arrays = [_leaf_array(x, f"input {i}") for i, x in enumerate(leaves)]
        return self._outputs(_run(self._p, arrays))

    __call__ = eval

    def _ordered(self, inputs: Dict[str, Any]) -> List[Any]:
        """Every input in order: given ones by name, parameters from the stored values."""
        stored = self._p.stored_params()
        names = [n for n, *_ in self._p.inputs()]
        unknown = [k for k in inputs if k not in names]
        if unknown:
            raise _catml.TypeError(
                f"unknown input `{unknown[0]}`: the program's inputs are {', '.join(names)}")
        out = []
        for n, _, _, kind in self._p.inputs():
            if n in inputs:
                out.append(_leaf_array(inputs[n], f"input `{n}`"))
            elif kind == "param" and n in stored:
                out.append(stored[n])
            else:
                raise _catml.TypeError(f"missing input `{n}`")
        return out

    def grad(self, inputs: Dict[str, Any], cotangents: Any) -> Dict[str, Any]:
        """The pullback of `cotangents` (one per output, or one array for a single output) to
        every float input, by input name."""
        cots = list(cotangents) if isinstance(cotangents, (list, tuple)) else [cotangents]
        n_out = len(self._p.output_names())
        if len(cots) != n_out:
            raise _catml.TypeError(f"expected {n_out} cotangents, found {len(cots)}")
        vjp, slots = self._vjp()
        outs = vjp.eval(self._ordered(inputs) + [_leaf_array(c, f"cotangent {i}")
                                                 for i, c in enumerate(cots)])
        names = [n for n, *_ in self._p.inputs()]
        return {names[i]: outs[s] for i, s in enumerate(slots) if s is not None}

    def jvp(self, inputs: Dict[str, Any], tangents: Dict[str, Any]) -> Tuple[Any, Any]:
        """The outputs and their tangents for tangents of float inputs by name (inputs not
        named get a zero tangent)."""
        jvp, slots = self._jvp()
        ordered = self._ordered(inputs)
        names = [n for n, *_ in self._p.inputs()]
        unknown = [k for k in tangents if k not in names]
        if unknown:
            raise _catml.TypeError(f"a tangent for unknown input `{unknown[0]}`")
        by_slot = {}
        for i, s in enumerate(slots):
            if s is None:
                if names[i] in tangents:
                    raise _catml.TypeError(f"input `{names[i]}` is not a float input: it has no tangent")
                continue
            t = tangents.get(names[i])
            by_slot[s] = (np.zeros_like(ordered[i]) if t is None
                          else _leaf_array(t, f"tangent of `{names[i]}`"))
        extra = [by_slot[k] for k in sorted(by_slot)]
        outs = jvp.eval(ordered + extra)
        n = len(self._p.output_names())
        primal, tans = outs[:n], outs[n:]
        if n == 1:
            return primal[0], tans[0]
        return tuple(primal), tuple(tans)

    @functools.lru_cache(maxsize=None)
    def _vjp(self):
        return self._p.vjp()

    @functools.lru_cache(maxsize=None)
    def _jvp(self):
        return self._p.jvp()

    def __repr__(self) -> str:
        return repr(self._p)


def trace(f: Callable, *examples: Any) -> Program:
    """Traces `f` on arguments like `examples` (arrays, scalars, pytrees of them)."""
    staged = _Staged(f)
    st, _ = staged.stage(examples)
    return Program(st.program, st.arg_trees, st.out_tree)


def load(path: str) -> Program:
    """A program from LensIR JSON (`.json`), a listing (`.catml`), or ONNX (`.onnx`)."""
    return Program(_catml.load(str(path)))


def _compiled(f: Callable, form: str, argnums: Argnums = 0, has_aux: bool = False) -> Any:
    """`f` transformed (`form` is "jit", "value_and_grad", "grad" or "grad_aux") as a callable
    whose common call stays in the extension: flatten the arguments, find the stage of their
    signature, evaluate, rebuild the result. A new signature, traced values, or leaves to
    convert come here, to `miss`."""
    staged = _Staged(f)
    key = (form, argnums if isinstance(argnums, int) else tuple(argnums), has_aux)

    def make(compiled, st: _Stage, leaves: List[Any]) -> Any:
        if form == "jit":
            stage = _catml.Stage(st.program, st.out_tree, "jit")
        else:
            g = _GradStage(st, argnums, leaves, has_aux)
            stage = _catml.Stage(g.program, st.out_tree, form, g.n_out,
                                 [(st.arg_trees[a], ks) for a, ks in g.slots_by_arg],
                                 isinstance(argnums, int))
        compiled.insert(list(st.arg_trees), [_type_of(x) for x in leaves], stage)
        return stage

    def miss(compiled, args: Tuple[Any, ...]) -> Any:
        st, leaves = staged.stage(args)
        stage = st.derive(key, lambda: make(compiled, st, leaves))
        if any(isinstance(x, Tracer) for x in leaves):
            return stage.rebuild(_run(stage.program, leaves))
        return stage.run(leaves)

    compiled = _catml.Compiled(miss)
    functools.update_wrapper(compiled, f)
    compiled.trace_count = lambda: staged.trace_count
    return compiled


def jit(f: Callable) -> Callable:
    """`f` traced once per signature and then only evaluated."""
    jitted = _compiled(f, "jit")
    jitted.lower = lambda *a: trace(f, *a)
    return jitted


def value_and_grad(f: Callable, argnums: Argnums = 0, has_aux: bool = False) -> Callable:
    """`f`'s value and its gradient with respect to the arguments at `argnums` (in their
    structure; a tuple of them when `argnums` is a sequence). `f` returns one float element,
    or `(value, aux)` with `has_aux`."""
    return _compiled(f, "value_and_grad", argnums, has_aux)


class _GradStage:
    """The gradient program of one stage for one `argnums`, checked once: which outputs hold
    each differentiated argument's leaves."""

    __slots__ = ("program", "n_out", "slots_by_arg")

    def __init__(self, st: _Stage, argnums: Argnums, leaves: List[Any], has_aux: bool) -> None:
        nums = _argnum_list(argnums, len(st.arg_trees))
        ranges = _leaf_ranges(st.arg_trees)
        for a in nums:
            for i in ranges[a]:
                if _type_of(leaves[i])[1] not in ("f32", "f64"):
                    raise _catml.TypeError(
                        f"grad with respect to argument {a}: its leaf {i - ranges[a].start} is "
                        f"{_type_of(leaves[i])[1]}, only float inputs have gradients")
        _check_aux_tree(st.out_tree, has_aux)
        wrt = [i for a in nums for i in ranges[a]]
        self.program, slots = st.program.grad(wrt)
        self.n_out = len(st.program.output_names())
        self.slots_by_arg = [(a, [slots[i] for i in ranges[a]]) for a in nums]


def _check_aux_tree(tree: tuple, has_aux: bool) -> None:
    if has_aux:
        if tree[0] not in ("tuple", "list") or len(tree[1]) != 2 or tree[1][0] != _pytree.LEAF:
            raise _catml.TypeError("with has_aux=True the function returns a pair (value, aux)")
    elif tree != _pytree.LEAF:
        raise _catml.TypeError(
            f"grad needs a function returning one float element, this one returns "
            f"{_pytree.describe(tree)}")


def grad(f: Callable, argnums: Argnums = 0, has_aux: bool = False) -> Callable:
    """The gradient of `f` (one float element) with respect to the arguments at `argnums`;
    `(gradient, aux)` with `has_aux`."""
    return _compiled(f, "grad_aux" if has_aux else "grad", argnums, has_aux)


def _check_like(primals_leaves, tangent_leaves, ptree, ttree, what: str) -> None:
    if ptree != ttree:
        raise _catml.TypeError(
            f"{what} have structure {_pytree.describe(ttree)}, the primals "
            f"{_pytree.describe(ptree)}")
    for i, (p, t) in enumerate(zip(primals_leaves, tangent_leaves)):
        if _type_of(p) != _type_of(t):
            (ps, pd), (ts, td) = _type_of(p), _type_of(t)
            raise _catml.TypeError(
                f"{what[:-1]} {i} has type {td}{list(ts)}, its primal {pd}{list(ps)}")


def jvp(f: Callable, primals: Sequence[Any], tangents: Sequence[Any]) -> Tuple[Any, Any]:
    """`(f(*primals), tangent)`: the forward derivative of `f` at `primals` along
    `tangents` (same structure and types)."""
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise _catml.TypeError("jvp takes primals and tangents as tuples or lists")
    staged = _jvp_cache(f)
    st, leaves = staged.stage(tuple(primals))
    tleaves, ttree = _pytree.flatten(tuple(tangents))
    _, ptree = _pytree.flatten(tuple(primals))
    tleaves = [_leaf_array(x, f"tangent {i}") for i, x in enumerate(tleaves)]
    _check_like(leaves, tleaves, ptree, ttree, "tangents")
    jprog, slots = st.derive("jvp", st.program.jvp)
    extra = [t for t, s in zip(tleaves, slots) if s is not None]
    outs = _run(jprog, list(leaves) + extra)
    n = len(st.program.output_names())
    return (_pytree.unflatten(st.out_tree, outs[:n]), _pytree.unflatten(st.out_tree, outs[n:]))


def vjp(f: Callable, *primals: Any) -> Tuple[Any, Callable]:
    """`(f(*primals), pullback)`; `pullback(cotangent)` (the output's structure and types)
    returns one gradient per primal, in its structure (None for integer leaves)."""
    staged = _jvp_cache(f)
    st, leaves = staged.stage(primals)
    vprog, slots = st.derive("vjp", st.program.vjp)
    out = _pytree.unflatten(st.out_tree, _run(st.program, leaves))
    out_leaves, _ = _pytree.flatten(out)
    ranges = _leaf_ranges(st.arg_trees)

    def pullback(cotangent: Any) -> Tuple[Any, ...]:
        cl, ctree = _pytree.flatten(cotangent)
        cl = [_leaf_array(x, f"cotangent {i}") for i, x in enumerate(cl)]
        _check_like(out_leaves, cl, st.out_tree, ctree, "cotangents")
        outs = _run(vprog, list(leaves) + cl)
        return tuple(
            _pytree.unflatten(st.arg_trees[a],
                              [None if slots[i] is None else outs[slots[i]] for i in ranges[a]])
            for a in range(len(primals)))

    return out, pullback


_JVP_CACHES: "Dict[int, Tuple[Callable, _Staged]]" = {}


def _jvp_cache(f: Callable) -> _Staged:
    """One staged cache per function for `jvp` and `vjp`, which take `f` at every call."""
    hit = _JVP_CACHES.get(id(f))
    if hit is None or hit[0] is not f:
        hit = _JVP_CACHES[id(f)] = (f, _Staged(f))
    return hit[1]


def hvp(f: Callable, primals: Sequence[Any], tangents: Sequence[Any]) -> Any:
    """The Hessian of `f` (one float element) at `primals` applied to `tangents`: the forward
    derivative of the gradient, one result per primal in its structure (a tuple)."""
    g = _hvp_grad(f, len(primals))
    return jvp(g, primals, tangents)[1]


_HVP_GRADS: "Dict[Tuple[int, int], Tuple[Callable, Callable]]" = {}


def _hvp_grad(f: Callable, n: int) -> Callable:
    hit = _HVP_GRADS.get((id(f), n))
    if hit is None or hit[0] is not f:
        hit = _HVP_GRADS[(id(f), n)] = (f, grad(f, argnums=tuple(range(n))))
    return hit[1]


def hessian(f: Callable, argnums: int = 0) -> Callable:
    """The Hessian of `f` (one float element) with respect to the array argument at
    `argnums`: shape `x.shape + x.shape`, one Hessian-vector product per element."""
    if not isinstance(argnums, int):
        raise _catml.TypeError("hessian takes one argnum")
    g = grad(f, argnums=argnums)

    @functools.wraps(f)
    def hessian_f(*args: Any) -> Any:
        x = args[argnums]
        if isinstance(x, Tracer):
            raise _catml.TypeError("hessian inside a transform is not supported: use hvp")
        x = _leaf_array(x, f"argument {argnums}")
        rows = []
        for k in range(x.size):
            e = np.zeros(x.size, dtype=x.dtype)
            e[k] = 1
            tangents = [np.zeros_like(_leaf_array(a, "")) for a in args]
            tangents[argnums] = e.reshape(x.shape)
            rows.append(jvp(g, tuple(args), tuple(tangents))[1])
        return np.stack(rows).reshape(x.shape + x.shape)

    return hessian_f

