"""Refs through staging transforms: ``jit`` and the control-flow primitives' bodies.

Each staging transform here runs its function inside a ref scope (``ftrans.core.ref``): refs passed
as arguments reach the body as fresh refs holding the body's staged inputs, refs it closes over are
discovered on first touch (the body is staged again with them threaded), and the refs' final values
come back as extra outputs, written into the caller's refs after the call.  So the IR never holds a
ref: the effects are discharged into explicit state while tracing.
"""

from __future__ import annotations

import inspect
import weakref
from collections.abc import Callable
from typing import Any

from ftrans.core import pytrees as tree_util
from ftrans.core import ref as R
from ftrans.errors import FtransValueError, user_location


def any_refs() -> bool:
    """Whether any ref exists (else the transforms skip all of this)."""
    return R.created > 0


def _is_ref(x: Any) -> bool:
    return isinstance(x, R.Ref)


def _ref_view_error(what: str) -> Exception:
    return FtransValueError(f"{what}: a view of a ref (r.at[...]) cannot be passed as an argument; pass the ref")


def _label_paths(tree_obj: Any, root: str) -> list[str]:
    paths, _ = tree_util.tree_flatten_with_path(tree_obj)
    return [root + tree_util.keystr(p) for p, _ in paths]


def _check_aliases(refs: list, names: list[str], what: str, tracing: str | None = None) -> None:
    """``tracing``: what is being traced, as JAX says it (``f at file:line for jit``); default ``for what``."""
    seen: dict[int, str] = {}
    for r, n in zip(refs, names):
        prev = seen.get(id(r))
        if prev is not None:
            raise FtransValueError(
                f"only one reference to a mutable array may be passed as an argument to a function, but when "
                f"tracing {tracing or 'for ' + what} the mutable array reference of type {r.aval.str_short()} "
                f"appeared at both {prev} and {n}.")
        seen[id(r)] = n


def _alias_closure_error(r: Any, name: str, what: str, tracing: str | None = None) -> Exception:
    return FtransValueError(
        f"when tracing {tracing or 'for ' + what}, a mutable array reference of type {r.aval.str_short()} was "
        f"both closed over and passed as the argument {name}; pass it one way only")


def _jit_tracing(jitted: Any) -> str:
    """``f at file:line for jit``: the function a jit traces, as JAX's messages name it."""
    from ftrans.core.trace import function_site

    return f"{function_site(jitted._fun)} for jit"


# ------------------------------------------------------------------------------------------------
# jit


def _param_names(fun: Callable, n: int) -> list[str]:
    try:
        ps = [p.name for p in inspect.signature(fun).parameters.values()
              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        ps = []
    return [ps[i] if i < len(ps) else f"args[{i}]" for i in range(n)]


def _arg_labels(fun: Callable, dargs: tuple, dyn_idx: list[int], dkw: dict) -> list[str]:
    """A label per leaf of ``(dargs, dkw)``: the parameter name, with the path inside it."""
    names = _param_names(fun, max(dyn_idx, default=-1) + 1)
    out = []
    for i, a in zip(dyn_idx, dargs):
        out += _label_paths(a, names[i])
    for k in sorted(dkw) if isinstance(dkw, dict) else ():
        out += _label_paths(dkw[k], k)
    return out


class _JitRefs:
    """What a jitted function's store keeps about refs: the refs its body closes over (discovered
    on first touch), and one twin per call shape: a jitted pure function of the refs' values."""

    __slots__ = ("closed", "scanned", "twins", "by_identity")

    def __init__(self) -> None:
        self.closed: list = []
        # The refs the function's closure holds, threaded from the first trace (``R.closure_refs``); None
        # until looked for.
        self.scanned: list | None = None
        self.twins: dict = {}
        # Whether the twins thread the argument refs themselves (one twin per set of them) rather than
        # fresh views: once a custom_vjp inside saved a view for a backward pass traced later.
        self.by_identity = False


# At most this many twins bound to particular argument refs are kept per function (the oldest go).
_MAX_BOUND_TWINS = 8


def _store_refs(jitted: Any) -> _JitRefs:
    st = jitted._store
    info = getattr(st, "ref_info", None)
    if info is None:
        info = st.ref_info = _JitRefs()
    return info


def jit_call(jitted: Any, args: tuple, kwargs: dict, call_plain: Callable) -> Any:
    """A call of ``jitted`` once refs exist: refs among its arguments or closed over by its body are
    threaded through a twin program; otherwise the plain call path."""
    def act(twin: Any, dvals: Any, dkw_vals: Any, closed_vals: list) -> Any:
        return twin(dvals, dkw_vals, closed_vals)

    got = _with_refs(jitted, args, kwargs, lambda: call_plain(args, kwargs), act)
    if not got[0]:
        return got[1]
    _, (out, new_arg, new_closed), arg_refs, closed = got
    for r, v in zip(arg_refs, new_arg):
        R.write_back(r, v)
    for r, v in zip(closed, new_closed):
        R.write_back(r, _kept_home(jitted, r, v))
    return out


def _kept_home(jitted: Any, r: Any, v: Any) -> Any:
    """A closed-over ref's new value from a ``pjit`` under ``with mesh:`` (which places every result of its
    program on that mesh, replicated) stays where the ref's value lived when that was not spread over a mesh:
    the ref (jnp's error state, say) must not carry the mesh into later ``jit`` calls that read it."""
    if getattr(jitted, "_api_name", None) != "pjit":
        return v
    from ftrans.core.array import Array, ShardedArray

    old = getattr(r, "_value", None)
    sh = getattr(v, "sharding", None)
    if type(v) is ShardedArray and type(old) is not ShardedArray and sh is not None and sh.is_fully_replicated:
        import numpy as np

        return Array._new(np.asarray(v), getattr(v, "weak_type", False))
    return v


def is_ref_type(x: Any) -> bool:
    """A ref's type given where a ref is expected (``ShapeDtypeStruct(..., is_ref=True)`` or an
    ``AbstractRef``), as ``jit(f).lower``/``trace`` take it."""
    return type(x) is R.AbstractRef or (getattr(x, "is_ref", False) is True and hasattr(x, "shape"))


def placeholder_refs(args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """``args``/``kwargs`` with each ref type replaced by a ref holding only that type (a
    ``ShapeDtypeStruct``): tracing and lowering read only the types; the compiled program takes real refs."""
    from ftrans.core.avals import ShapedArray, ShapeDtypeStruct

    def place(x: Any) -> Any:
        if not is_ref_type(x):
            return x
        inner = x.inner_aval if type(x) is R.AbstractRef else x
        sharding = getattr(inner, "typed_sharding", None)
        sds = ShapeDtypeStruct(inner.shape, inner.dtype, weak_type=inner.weak_type, sharding=sharding)
        return R.Ref(sds, ShapedArray(tuple(inner.shape), sds.dtype, inner.weak_type), user_location())

    return tree_util.tree_map(place, (args, kwargs))


def jit_trace(jitted: Any, args: tuple, kwargs: dict, trace_plain: Callable) -> Any:
    """``jit(f).trace(*args)`` once refs exist: the twin's trace, wrapped so that its ``lower().compile()``
    gives a callable taking (and updating) the refs, as the jitted function does."""
    def act(twin: Any, dvals: Any, dkw_vals: Any, closed_vals: list) -> Any:
        return twin.trace(dvals, dkw_vals, closed_vals)

    info = _store_refs(jitted)
    if info.closed and not info.scanned and not any(_is_ref(x) for x in tree_util.tree_leaves((args, kwargs))):
        # Refs an earlier call touched (found on touch, not in the closure) are threaded only into a program
        # that touches them under this call's options, as JAX's traces close over what each one reads: a
        # library function traced once with jnp's error checks on does not take the error state in an export
        # made with them off.
        try:
            return trace_plain()
        except R.NeedsRef as e:
            if e.owner is not jitted._store:
                raise
    got = _with_refs(jitted, args, kwargs, trace_plain, act)
    if not got[0]:
        return got[1]
    return _RefStage(got[1], jitted, args, kwargs)


class _RefStage:
    """A ``Traced``/``Lowered``/``Compiled`` of a jitted function that takes refs: everything as the
    twin program's, except that ``compile()`` gives a callable taking the refs themselves."""

    def __init__(self, inner: Any, jitted: Any, args: tuple, kwargs: dict):
        self._inner, self._jitted, self._args, self._kwargs = inner, jitted, args, kwargs

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def lower(self, *a: Any, **k: Any) -> _RefStage:
        return _RefStage(self._inner.lower(*a, **k), self._jitted, self._args, self._kwargs)

    def compile(self, *a: Any, **k: Any) -> _RefStage:
        return _RefStage(self._inner.compile(*a, **k), self._jitted, self._args, self._kwargs)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        compiled = self._inner

        def act(twin: Any, dvals: Any, dkw_vals: Any, closed_vals: list) -> Any:
            return compiled(dvals, dkw_vals, closed_vals)

        def plain() -> Any:
            raise FtransValueError(f"jit({self._jitted.__name__}): this compiled program takes refs, but the call "
                                   "passes none")

        got = _with_refs(self._jitted, args, kwargs, plain, act, discover=False)
        _, (out, new_arg, new_closed), arg_refs, closed = got
        for r, v in zip(arg_refs, new_arg):
            R.write_back(r, v)
        for r, v in zip(closed, new_closed):
            R.write_back(r, v)
        return out


def _with_refs(jitted: Any, args: tuple, kwargs: dict, plain: Callable, act: Callable,
               discover: bool = True) -> tuple:
    """Run ``act(twin, arg_values, kwarg_values, closed_values)`` for the twin program of this call's refs,
    discovering closed-over refs on the way; ``plain()`` when there are none.  Returns ``(False, plain
    result)`` or ``(True, act's result, argument refs, closed-over refs)``."""
    info = _store_refs(jitted)
    fname = jitted.__name__
    while True:
        pos = jitted._static_positions(len(args))
        dyn_idx = [i for i in range(len(args)) if i not in pos]
        dargs = tuple(args[i] for i in dyn_idx)
        dkw = {k: v for k, v in kwargs.items() if k not in jitted._static_argnames}
        leaves, tree = tree_util.tree_flatten((dargs, dkw))
        if any(isinstance(x, R.RefView) for x in leaves):
            raise _ref_view_error(f"jit({fname})")
        ref_pos = tuple(i for i, x in enumerate(leaves) if _is_ref(x))
        if info.scanned is None:  # (a twin's closure holds the refs it threads: never its own)
            info.scanned = [] if hasattr(jitted, "_ref_owner") else R.closure_refs(jitted._fun)
        closed = list(info.closed)
        if info.scanned:
            closed += [r for r in info.scanned if R._usable(r) and not any(r is c for c in closed)
                       and not any(r is leaves[i] for i in ref_pos)]
        if not ref_pos and not closed:
            try:
                return False, plain()
            except R.NeedsRef as e:
                if e.owner is not jitted._store or not discover:
                    raise
                info.closed.append(e.ref)
                continue
        arg_refs = [leaves[i] for i in ref_pos]
        labels = None
        if arg_refs:
            labels = _arg_labels(jitted._fun, dargs, dyn_idx, dkw)
            _check_aliases(arg_refs, [labels[i] for i in ref_pos], f"jit({fname})", _jit_tracing(jitted))
            for r in arg_refs:
                if any(r is c for c in closed):
                    raise _alias_closure_error(r, labels[ref_pos[arg_refs.index(r)]], f"jit({fname})",
                                               _jit_tracing(jitted))
        statics = tuple((i, args[i]) for i in pos)
        static_kw = tuple(sorted((k, v) for k, v in kwargs.items() if k in jitted._static_argnames))
        try:
            hash((statics, static_kw))
        except TypeError:
            jitted._split(args, kwargs)  # raises jit's own error for the unhashable static
            raise
        vals = list(leaves)
        for i in ref_pos:
            vals[i] = R.read_for_thread(leaves[i])
        # Argument refs holding values being differentiated are not plumbing: views that a custom_vjp
        # differentiates as written (JAX's fallback), never bound.
        diff = any(R.carries_tangent(vals[i]) for i in ref_pos)
        bound = arg_refs if info.by_identity and arg_refs and not diff else None
        key_impls = tuple(r._key_impl for r in arg_refs)
        # (jit and pjit wrappers of one function share its store; a pjit's twin places as pjit does)
        key = (statics, static_kw, tree, ref_pos, tuple(id(r) for r in closed), diff, key_impls,
               getattr(jitted, "_api_name", None), None if bound is None else tuple(id(r) for r in bound))
        twin = info.twins.get(key)
        if twin is None:
            if labels is None:
                labels = _arg_labels(jitted._fun, dargs, dyn_idx, dkw)
            if bound is not None:
                old = [k for k in info.twins if k[-1] is not None]
                for k in old[:max(0, len(old) + 1 - _MAX_BOUND_TWINS)]:
                    del info.twins[k]
            donate = None
            if jitted._donate_argnums or jitted._donate_argnames:
                # The user's donated leaves, in the twin's (dargs, dkw) order; a ref's value is the ref's, never
                # donated.
                donate = list(jitted._donate_mask(args, kwargs, len(leaves)))
                for i in ref_pos:
                    donate[i] = False
                donate = tuple(donate)
            twin = info.twins[key] = _make_twin(jitted, dict(statics), dict(static_kw), dyn_idx, tree,
                                                ref_pos, closed, [labels[i] for i in ref_pos], bound, not diff,
                                                key_impls, donate)
        closed_vals = [R.read_for_thread(r) for r in closed]
        dvals, dkw_vals = tree_util.tree_unflatten(tree, vals)
        prev_homes, R._state.arg_homes = R._state.arg_homes, [r._home for r in arg_refs]
        try:
            res = act(twin, dvals, dkw_vals, closed_vals)
        except R.BindArgRefs as e:
            if e.owner is not twin._ref_owner or info.by_identity or not discover:
                raise
            info.by_identity = True
            continue
        except R.NeedsRef as e:
            if e.owner is not twin._ref_owner or not discover:
                raise
            for k, r in enumerate(arg_refs):
                if e.ref is r:
                    if labels is None:
                        labels = _arg_labels(jitted._fun, dargs, dyn_idx, dkw)
                    raise _alias_closure_error(r, labels[ref_pos[k]], f"jit({fname})", _jit_tracing(jitted)) from None
            info.closed.append(e.ref)
            continue
        finally:
            R._state.arg_homes = prev_homes
        return True, res, arg_refs, closed


def _make_twin(jitted: Any, statics: dict, static_kw: dict, dyn_idx: list[int], tree: Any, ref_pos: tuple,
               closed: list, ref_names: list[str], bound: list | None = None, bindable: bool = True,
               key_impls: tuple = (), donate: tuple | None = None) -> Any:
    from ftrans.transforms.jit import JitWrapped

    owner = object()
    # The twin lives in the function's store, which lives as long as the function (the store map is
    # weak in it): the twin must not keep the function alive.
    try:
        fun_ref = weakref.ref(jitted._fun)
    except TypeError:
        fun_ref = (lambda f: lambda: f)(jitted._fun)
    fname = jitted.__name__
    qualname = getattr(jitted._fun, "__qualname__", fname)
    n_args = len(dyn_idx) + len(statics)

    def twin(dargs: tuple, dkw: dict, closed_vals: list) -> Any:
        leaves = tree_util.tree_leaves((dargs, dkw))
        views, view_vals = [], []
        for k, (i, name) in enumerate(zip(ref_pos, ref_names)):
            # The caller's ref itself when the twin is bound to it, else a fresh view standing for it.
            homes = R._state.arg_homes
            v = bound[k] if bound is not None else R.view_ref(
                leaves[i], user_location(), name, binder=owner if bindable else None,
                home=homes[k] if homes is not None and k < len(homes) else None,
                key_impl=key_impls[k] if k < len(key_impls) else None)
            view_vals.append(leaves[i])
            leaves[i] = v
            views.append(v)
        a, k = tree_util.tree_unflatten(tree, leaves)
        full = [None] * n_args
        for i, x in statics.items():
            full[i] = x
        for i, x in zip(dyn_idx, a):
            full[i] = x

        fun = fun_ref()

        def call() -> Any:
            out = fun(*full, **k, **static_kw)
            R.check_no_refs(out, "jit", _fname_of(fun, fname))
            return out

        out, finals = R.run_scoped(call, views + closed, view_vals + list(closed_vals), owner, f"jit({fname})")
        return out, finals[:len(views)], finals[len(views):]

    twin.__name__ = fname
    twin.__qualname__ = qualname
    o = jitted._options
    # (static_argnums, static_argnames, donate_argnums, donate_argnames, device, backend, max_cache_size,
    #  keep_unused, inline, compiler_options, in_shardings, out_shardings, optimizations, background)
    # The twin takes (dynamic positional values, keyword values, closed-over refs' values) and returns (results,
    # new argument refs, new closed refs): the shardings asked for apply to the first of each, and a pjit's
    # twin places its results as pjit does (on ``with mesh:``'s mesh). It donates exactly the user's donated
    # leaves (``donate``: a mask over the leaves of its first two arguments).
    in_sh = o[10] if not isinstance(o[10], list) else tuple(o[10])
    donating = donate is not None and any(donate)
    w = JitWrapped(twin, None, None, (0,) if donating else None, None, o[4], o[5], o[6], o[7], o[8], o[9],
                   None if in_sh is None else (in_sh, None, None), None if o[11] is None else (o[11], None, None),
                   o[12], o[13])
    if donating:
        w._twin_donation = (donate, jitted._dynamic_donate_argnums())
    if getattr(jitted, "_api_name", None) is not None:
        w._api_name = jitted._api_name
    w._ref_owner = owner
    return w


def _fname_of(fun: Callable, fname: str) -> str:
    code = getattr(fun, "__code__", None)
    if code is not None:
        return f"{fname} at {code.co_filename}:{code.co_firstlineno}"
    return fname


def plain_scope(owner: Any, what: str) -> Any:
    """The scope a plain staging (no refs threaded yet) runs in: touching any ref outside raises
    :class:`NeedsRef` for ``owner``."""
    return _PlainScope(owner, what)


class _PlainScope:
    __slots__ = ("owner", "what", "on")

    def __init__(self, owner: Any, what: str):
        self.owner = owner
        self.what = what
        self.on = R.created > 0

    def run(self, fn: Callable[[], Any]) -> Any:
        if not self.on and R.created == 0:
            return fn()
        out, _ = R.run_scoped(fn, [], [], self.owner, self.what)
        return out


# ------------------------------------------------------------------------------------------------
# Control flow: one helper threads refs through any body-taking primitive


class Threaded:
    """The refs a control-flow call threads: its argument refs (by leaf position in each argument
    tree) and the closed-over refs found so far."""

    def __init__(self, what: str, trees: dict[str, Any]):
        self.what = what
        self.owner = object()
        self.closed: list = []
        self.arg_refs: dict[str, list[tuple[int, Any]]] = {}
        names: list[str] = []
        refs: list = []
        for label, t in trees.items():
            leaves = tree_util.tree_leaves(t)
            if any(isinstance(x, R.RefView) for x in leaves):
                raise _ref_view_error(what)
            lab = _label_paths(t, label)
            found = [(i, x) for i, x in enumerate(leaves) if _is_ref(x)]
            self.arg_refs[label] = found
            refs += [x for _, x in found]
            names += [lab[i] for i, _ in found]
        _check_aliases(refs, names, what)
        self._names = {id(r): n for r, n in zip(refs, names)}

    def add_scanned(self, *funs: Any) -> None:
        """Thread from the first trace the refs ``funs`` close over (``R.closure_refs``), other than the
        argument refs, so the bodies are traced once."""
        args = [r for found in self.arg_refs.values() for _, r in found]
        for r in R.closure_refs(*funs, exclude=args + self.closed):
            self.closed.append(r)

    def has_refs(self) -> bool:
        return bool(self.closed) or any(self.arg_refs.values())

    def add_closed(self, e: R.NeedsRef) -> None:
        if e.owner is not self.owner:
            raise e
        name = self._names.get(id(e.ref))
        if name is not None:
            raise _alias_closure_error(e.ref, name, self.what) from None
        self.closed.append(e.ref)

    def values_of(self, label: str, tree_obj: Any) -> Any:
        """``tree_obj`` with its refs replaced by their values (read by the caller)."""
        pos = self.arg_refs.get(label) or []
        if not pos:
            return tree_obj
        leaves, t = tree_util.tree_flatten(tree_obj)
        for i, r in pos:
            leaves[i] = R.read_for_thread(r)
        return tree_util.tree_unflatten(t, leaves)

    def closed_values(self) -> list:
        return [R.read_for_thread(r) for r in self.closed]

    def views_in(self, label: str, tree_obj: Any) -> tuple[Any, list]:
        """Inside the body: ``tree_obj`` (values) with fresh refs at the argument refs' positions."""
        pos = self.arg_refs.get(label) or []
        if not pos:
            return tree_obj, []
        leaves, t = tree_util.tree_flatten(tree_obj)
        views = []
        for i, r in pos:
            v = R.view_ref(leaves[i], r._origin, self._names[id(r)], r._kind, key_impl=r._key_impl)
            leaves[i] = v
            views.append(v)
        return tree_util.tree_unflatten(t, leaves), views

    def run(self, fn: Callable[[], Any], views: list, closed_vals: list) -> tuple[Any, list, list]:
        out, finals = R.run_scoped(fn, views + self.closed, [v._value for v in views] + list(closed_vals),
                                   self.owner, self.what)
        return out, finals[:len(views)], finals[len(views):]

    def write_back(self, label: str, new_vals: list) -> None:
        for (_, r), v in zip(self.arg_refs.get(label) or [], new_vals):
            R.write_back(r, v)

    def write_back_closed(self, new_vals: list) -> None:
        for r, v in zip(self.closed, new_vals):
            R.write_back(r, v)


_THREAD = object()


def _plain_first(th: Threaded, run_plain: Callable[[], Any]) -> Any:
    """Without ref arguments, run the call as the user made it, watching for refs its bodies touch.

    Most control flow in a process that holds refs never touches one: it then runs exactly as it would
    with no refs about (the same program, the same errors). A closed-over ref the bodies touch raises
    ``NeedsRef`` for this call: it is recorded, and ``_THREAD`` says to thread it.
    """
    if th.has_refs():
        return _THREAD
    try:
        out, _ = R.run_scoped(run_plain, [], [], th.owner, th.what)
    except R.NeedsRef as e:
        th.add_closed(e)
        return _THREAD
    return out


def no_refs_out(out: Any, what: str, fun: Callable) -> None:
    R.check_no_refs(out, what, _fname_of(fun, getattr(fun, "__name__", "fun")))


def refs_back(tree_obj: Any, label_refs: list[tuple[int, Any]]) -> Any:
    """``tree_obj`` (values) with the caller's refs put back at their positions."""
    if not label_refs:
        return tree_obj
    leaves, t = tree_util.tree_flatten(tree_obj)
    for i, r in label_refs:
        leaves[i] = r
    return tree_util.tree_unflatten(t, leaves)


def carry_values(out_carry: Any, views: list, finals: list, label_refs: list[tuple[int, Any]], what: str,
                 fun: Callable) -> Any:
    """A body's output carry with the refs at the argument refs' positions replaced by their final values
    (``finals``); a ref anywhere else is an error."""
    leaves, t = tree_util.tree_flatten(out_carry)
    pos = {i: k for k, (i, _) in enumerate(label_refs)}
    for i, x in enumerate(leaves):
        if i in pos:
            leaves[i] = finals[pos[i]]
        elif isinstance(x, (R.Ref, R.RefView)):
            no_refs_out(x, what, fun)
    return tree_util.tree_unflatten(t, leaves)


def _pair(out: Any, what: str) -> tuple:
    if not (isinstance(out, (tuple, list)) and len(out) == 2):
        from ftrans.errors import FtransTypeError

        raise FtransTypeError(f"{what}: the body function must return a pair (carry, y), got "
                              f"{type(out).__name__}")
    return out[0], out[1]


def _ref_leaves(tree_obj: Any, label_refs: list[tuple[int, Any]]) -> list:
    leaves = tree_util.tree_leaves(tree_obj)
    return [leaves[i] for i, _ in label_refs]


def scan(plain: Callable, f: Callable, init: Any, xs: Any, length: Any, reverse: bool, unroll: Any,
         split: bool) -> tuple[Any, Any]:
    """``lax.scan`` with refs: carried refs and scanned refs (each step sees a ref of its slice) come in
    as values, closed-over refs become extra carries."""
    cname, xname = _param_names(f, 2)
    th = Threaded("scan", {cname: init, xname: xs} if cname != xname else {"c": init, "xs": xs})
    cname, xname = list(th.arg_refs)
    c_refs = th.arg_refs[cname]
    th.add_scanned(f)
    first = _plain_first(th, lambda: plain(f, init, xs, length, reverse, unroll, split))
    if first is not _THREAD:
        return first
    while True:
        cvals, xvals, cl = th.values_of(cname, init), th.values_of(xname, xs), th.closed_values()

        def body(carry: Any, x: Any) -> Any:
            c, clv = carry
            c_in, cviews = th.views_in(cname, c)
            x_in, xviews = th.views_in(xname, x)
            out, fin, fin_cl = th.run(lambda: f(c_in, x_in), cviews + xviews, clv)
            c_out, y = _pair(out, "scan")
            no_refs_out(y, "scan", f)
            c_vals = carry_values(c_out, cviews, fin[:len(cviews)], c_refs, "scan", f)
            return (c_vals, fin_cl), (y, fin[len(cviews):])

        try:
            (c_fin, cl_fin), (ys, xs_fin) = plain(body, (cvals, cl), xvals, length, reverse, unroll, split)
        except R.NeedsRef as e:
            th.add_closed(e)
            continue
        th.write_back(cname, _ref_leaves(c_fin, c_refs))
        th.write_back(xname, list(xs_fin))
        th.write_back_closed(cl_fin)
        return refs_back(c_fin, c_refs), ys


def while_loop(plain: Callable, cond_fun: Callable, body_fun: Callable, init_val: Any) -> Any:
    """``lax.while_loop`` with refs: refs in the carry and closed-over refs become carried values."""
    th = Threaded("while_loop", {"init_val": init_val})
    v_refs = th.arg_refs["init_val"]
    th.add_scanned(cond_fun, body_fun)
    first = _plain_first(th, lambda: plain(cond_fun, body_fun, init_val))
    if first is not _THREAD:
        return first
    while True:
        ivals, cl = th.values_of("init_val", init_val), th.closed_values()

        def cond_(carry: Any) -> Any:
            v, clv = carry
            v_in, views = th.views_in("init_val", v)
            out, _, _ = th.run(lambda: cond_fun(v_in), views, clv)
            return out

        def body_(carry: Any) -> Any:
            v, clv = carry
            v_in, views = th.views_in("init_val", v)
            out, fin, fin_cl = th.run(lambda: body_fun(v_in), views, clv)
            return carry_values(out, views, fin, v_refs, "while_loop", body_fun), fin_cl

        try:
            v_fin, cl_fin = plain(cond_, body_, (ivals, cl))
        except R.NeedsRef as e:
            th.add_closed(e)
            continue
        th.write_back("init_val", _ref_leaves(v_fin, v_refs))
        th.write_back_closed(cl_fin)
        return refs_back(v_fin, v_refs)


def branches(plain: Callable, what: str, funs: list[Callable], operands: tuple,
             plain_direct: Callable) -> Any:
    """``lax.cond``/``switch`` with refs: ``plain(wrapped_branches, operand_values)`` runs the primitive;
    each branch returns its output, the final values of the operand refs and of the closed-over ones.
    ``plain_direct(funs, operands)`` is the call as the user made it (tried first, see ``_plain_first``)."""
    names = _param_names(funs[0], len(operands))
    th = Threaded(what, dict(zip(names, operands)))
    th.add_scanned(*funs)
    first = _plain_first(th, lambda: plain_direct(funs, operands))
    if first is not _THREAD:
        return first
    while True:
        vals = tuple(th.values_of(n, o) for n, o in zip(names, operands))
        cl = th.closed_values()

        def wrap(fn: Callable) -> Callable:
            def branch(*ops: Any) -> Any:
                *ops, clv = ops
                views = []
                ins = []
                for n, o in zip(names, ops):
                    o_in, vs = th.views_in(n, o)
                    ins.append(o_in)
                    views += vs
                out, fin, fin_cl = th.run(lambda: fn(*ins), views, clv)
                no_refs_out(out, what, fn)
                return out, fin, fin_cl
            return branch

        try:
            out, fin, fin_cl = plain([wrap(fn) for fn in funs], (*vals, cl))
        except R.NeedsRef as e:
            th.add_closed(e)
            continue
        k = 0
        for n in names:
            m = len(th.arg_refs[n])
            th.write_back(n, fin[k:k + m])
            k += m
        th.write_back_closed(fin_cl)
        return out
