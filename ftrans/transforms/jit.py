"""``jit``: trace once per argument signature, compile with XLA, call the executable.

The call path is the hot path.  A jitted function keeps two caches:

* ``_fast``: for calls with only positional ``ftrans.Array`` arguments, no static
  or donated arguments and no transform active, keyed by the tuple of the
  arguments' precomputed signatures (shape, dtype, weak type, device).  A hit
  costs a tuple build, a dict lookup and the PJRT call.
* ``_cache``: everything else, keyed by the pytree structure, every leaf's
  signature, the static arguments' values, the device and the x64 switch.
  Bounded (LRU) at ``max_cache_size`` entries (default ``DEFAULT_CACHE_SIZE``).

Under any active transform (``make_jaxpr``, an enclosing ``jit``, and later
``grad``/``vmap``) the call binds the ``jit_call`` primitive instead, so the
jitted function appears in the IR as one call with its own jaxpr.
"""

from __future__ import annotations

import functools
import inspect
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
from jax import tree_util

from ftrans.core import config as _config_mod
from ftrans.core import dtypes
from ftrans.core import trace as _trace
from ftrans.core.array import Array, DeviceArray
from ftrans.core.avals import ShapedArray, ShapeDtypeStruct
from ftrans.core.ir import ClosedJaxpr, Jaxpr
from ftrans.core.primitive import Primitive
from ftrans.core.trace import Tracer, stage
from ftrans.devices import _client, default_device
from ftrans.errors import FtransTypeError, FtransValueError
from ftrans.lowering import compat
from ftrans.lowering import executable as X
from ftrans.lowering.lower import register_lowering

__all__ = ["jit", "jit_call_p", "DEFAULT_CACHE_SIZE"]

DEFAULT_CACHE_SIZE = 4096  # executables kept per jitted function (LRU)

_all_jitted: weakref.WeakSet = weakref.WeakSet()
_new = object.__new__


def _on_config_change(name: str, value: Any) -> None:
    if name in ("enable_x64", "disable_jit"):  # the fast tiers must not answer: start over
        for f in list(_all_jitted):
            f._fast.clear()
            f._tree_fast.clear()


_config_mod.config._listeners.append(_on_config_change)


# ----------------------------------------------------------------------------
# The jit_call primitive


jit_call_p = Primitive("jit_call", multiple_results=True, higher_order=True)


@jit_call_p.def_abstract_eval
def _jit_call_abstract_eval(*avals: ShapedArray, jaxpr: ClosedJaxpr, name: str, donated_invars: tuple,
                            **_: Any) -> list[ShapedArray]:
    want = jaxpr.in_avals
    if len(avals) != len(want) or any((a.shape, a.dtype) != (w.shape, w.dtype) for a, w in zip(avals, want)):
        got = ", ".join(a.str_short() for a in avals)
        exp = ", ".join(a.str_short() for a in want)
        raise FtransTypeError(f"jit_call {name}: operands ({got}) do not match the jaxpr's inputs ({exp})")
    return list(jaxpr.out_avals)


@jit_call_p.def_weak_type
def _jit_call_weak(weaks: tuple, *, jaxpr: ClosedJaxpr, **_: Any) -> tuple:
    return tuple(a.weak_type for a in jaxpr.out_avals)


@jit_call_p.def_impl
def _jit_call_impl(*vals: np.ndarray, jaxpr: ClosedJaxpr, name: str, donated_invars: tuple, **_: Any) -> list:
    """Eager application of a staged call (e.g. by ``eval_jaxpr``): compile it and run it on the host values."""
    from ftrans.devices import default_device

    _jit_call_abstract_eval(*[ShapedArray(np.shape(v), np.asarray(v).dtype) for v in vals], jaxpr=jaxpr,
                            name=name, donated_invars=donated_invars)
    exe = _executable_for_jaxpr(jaxpr, default_device(), name)
    outs = exe.run([X.to_buffer(np.asarray(v), exe.device) for v in vals])
    return [np.asarray(o) for o in outs]


_jaxpr_exes: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _executable_for_jaxpr(jaxpr: ClosedJaxpr, device: Any, name: str) -> X.Executable:
    per = _jaxpr_exes.setdefault(jaxpr, {})
    exe = per.get(device.id)
    if exe is None:
        exe = per[device.id] = X.Executable(jaxpr, device, name)
    return exe


@register_lowering(jit_call_p)
def _jit_call_lowering(ctx: Any, *args: str, jaxpr: ClosedJaxpr, name: str, **_: Any) -> list[str]:
    from ftrans.lowering import mlir_text as mt

    sym = ctx.module.function(jaxpr.jaxpr, name)
    types = [mt.aval_type(a) for a in ctx.avals_out]
    return ctx.emit("func.call", list(args), types, {"callee": f"@{sym}"})


# ----------------------------------------------------------------------------
# Argument handling


def _leaf_aval(x: Any) -> ShapedArray | None:
    """The abstract value of a dynamic argument leaf, or None if it is not an array."""
    t = type(x)
    if t is DeviceArray:
        return x._aval
    if isinstance(x, Array):
        v = x._value
        return ShapedArray(v.shape, v.dtype, x.weak_type)
    if isinstance(x, Tracer):
        return x.aval
    if t in (int, float, complex, bool):
        return ShapedArray((), dtypes.python_scalar_dtype(x), dtypes.is_weak_scalar(x))
    if isinstance(x, (np.ndarray, np.generic)):
        try:
            return ShapedArray(np.shape(x), dtypes.canonicalize(x.dtype), False)
        except TypeError:
            return None
    if isinstance(x, ShapeDtypeStruct):
        return ShapedArray(x.shape, x.dtype, x.weak_type)
    return None


def _bad_leaf_error(fname: str, args: tuple, kwargs: dict, bad: Any) -> FtransTypeError:
    path = "?"
    for p, leaf in tree_util.tree_flatten_with_path((args, kwargs))[0]:
        if leaf is bad:
            path = _path_str(p)
            break
    hint = "a list" if isinstance(bad, list) else type(bad).__name__
    return FtransTypeError(
        f"jit({fname}): argument {path} is {hint} of type {type(bad).__name__}, which is not a valid array "
        "type. Pass arrays, NumPy arrays or Python scalars (containers of them are pytrees), or mark the "
        "argument static with static_argnums / static_argnames."
    )


def _path_str(path: tuple) -> str:
    if not path:
        return "args"
    head, *rest = path
    root = "args" if getattr(head, "idx", None) == 0 else "kwargs"
    return root + tree_util.keystr(tuple(rest))


class _Entry:
    """What a cache hit needs: the executable and how to rebuild the outputs.

    ``execute`` runs the PJRT executable on a list of buffers; ``single``
    (when the function returns one array) lets the hot path build its one
    output inline.
    """

    __slots__ = ("exe", "out_tree", "single", "donate_mask", "closed", "execute", "no_consts", "aval0", "sig0")

    def __init__(self, exe: X.Executable, out_tree: Any, donate_mask: tuple, closed: ClosedJaxpr):
        self.exe = exe
        self.out_tree = out_tree
        self.single = out_tree.num_leaves == 1 and tree_util.treedef_is_leaf(out_tree)
        self.donate_mask = donate_mask
        self.closed = closed
        self.execute = exe._run
        self.no_consts = not exe.const_bufs
        self.aval0 = exe.out_avals[0] if exe.out_avals else None
        self.sig0 = exe.out_sigs[0] if exe.out_avals else None


# ----------------------------------------------------------------------------
# The jitted function


class JitWrapped:
    """The callable ``jit`` returns; also offers ``lower``, ``trace``, ``eval_shape``."""

    def __init__(self, fun: Callable, static_argnums: Any, static_argnames: Any, donate_argnums: Any,
                 donate_argnames: Any, device: Any, backend: str | None, max_cache_size: int,
                 keep_unused: bool, inline: bool):
        if not callable(fun):
            raise FtransTypeError(f"jit: expected a function, got {type(fun).__name__}")
        self._fun = fun
        self.__name__ = getattr(fun, "__name__", "fn")
        self.__qualname__ = getattr(fun, "__qualname__", self.__name__)
        self.__doc__ = getattr(fun, "__doc__", None)
        self.__wrapped__ = fun
        self._sig = _signature(fun)
        self._static_argnums, self._static_argnames = _resolve_statics(
            self._sig, static_argnums, static_argnames, self.__name__)
        params = list(self._sig.parameters.values()) if self._sig is not None else []
        self._static_num_names = {i: params[i].name for i in self._static_argnums if i < len(params)}
        self._donate_argnums, self._donate_argnames = _resolve_donation(
            self._sig, donate_argnums, donate_argnames, self._static_argnums, self.__name__)
        self._device = device
        self._backend = backend
        self._max = int(max_cache_size)
        self._inline = inline
        self._cache: OrderedDict[tuple, _Entry] = OrderedDict()
        self._fast: dict[tuple, _Entry] = {}
        self._tree_fast: dict[tuple, _Entry] = {}
        self._fast_ok = not (self._static_argnums or self._static_argnames or self._donate_argnums
                             or self._donate_argnames)
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0
        _all_jitted.add(self)
        functools.update_wrapper(self, fun, updated=())

    # -- the hot path ---------------------------------------------------------
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not _trace.active_anywhere and self._fast_ok:
            if not kwargs:
                entry = self._fast.get(tuple([getattr(a, "_sig", None) for a in args]))
                if entry is not None:
                    self.hits += 1
                    try:
                        if entry.no_consts:
                            bufs = entry.execute([a._buf for a in args])
                        else:  # constants lead the argument list
                            bufs = entry.exe.run([a._buf for a in args])
                    except Exception:  # e.g. a deleted (donated) buffer: the general path explains
                        return self._call(args, kwargs)
                    if entry.single:
                        out = _new(DeviceArray)
                        out._buf = bufs[0]
                        out._aval = aval = entry.aval0
                        out._sig = entry.sig0
                        out.weak_type = aval.weak_type
                        return out
                    outs = entry.exe.wrap(bufs)
                    return outs[0] if entry.single else tree_util.tree_unflatten(entry.out_tree, outs)
            # Second tier: any pytree of resident arrays (no statics to split off here).
            leaves, in_tree = tree_util.tree_flatten((args, kwargs))
            entry = self._tree_fast.get((in_tree, tuple([getattr(x, "_sig", None) for x in leaves]), ()))
            if entry is not None:
                self.hits += 1
                exe = entry.exe
                try:
                    outs = exe.wrap(exe.run([x._buf for x in leaves]))
                except Exception:  # a deleted (donated) buffer: the general path explains
                    return self._call(args, kwargs)
                return outs[0] if entry.single else tree_util.tree_unflatten(entry.out_tree, outs)
        return self._call(args, kwargs)

    # -- everything else --------------------------------------------------------
    def _split(self, args: tuple, kwargs: dict) -> tuple[tuple, dict, tuple]:
        """Separate static arguments (hashed into the key) from dynamic ones."""
        statics = []
        if self._static_argnums:
            n = len(args)
            for i in self._static_argnums:
                if i >= n and self._static_num_names.get(i) in kwargs:
                    continue  # passed by keyword: handled with static_argnames below
                if i >= n:
                    raise FtransValueError(
                        f"jit({self.__name__}): static_argnums includes {i}, but the function was called "
                        f"with {n} positional argument(s)"
                    )
                statics.append(("pos", i, _hashable(args[i], f"positional argument {i}", self.__name__)))
            args = tuple(a for i, a in enumerate(args) if i not in self._static_argnums)
        if self._static_argnames and kwargs:
            dyn_kw = {}
            for k, v in kwargs.items():
                if k in self._static_argnames:
                    statics.append(("kw", k, _hashable(v, f"keyword argument {k!r}", self.__name__)))
                else:
                    dyn_kw[k] = v
            kwargs = dyn_kw
        return args, kwargs, tuple(statics)

    def _call(self, args: tuple, kwargs: dict) -> Any:
        if _config_mod.config.disable_jit:
            return self._fun(*args, **kwargs)
        full_args, full_kwargs = args, kwargs
        args, kwargs, statics = self._split(args, kwargs)
        leaves, in_tree = tree_util.tree_flatten((args, kwargs))
        if not _trace.active_anywhere and statics:
            # The pytree tier for calls with static arguments (the others took it in __call__).
            tkey = (in_tree, tuple([getattr(leaf, "_sig", None) for leaf in leaves]), statics)
            entry = self._tree_fast.get(tkey)
            if entry is not None:
                self.hits += 1
                exe = entry.exe
                try:
                    outs = exe.wrap(exe.run([leaf._buf for leaf in leaves]))
                except Exception:  # a deleted (donated) buffer: the general path explains
                    pass
                else:
                    return outs[0] if entry.single else tree_util.tree_unflatten(entry.out_tree, outs)
        avals = []
        tracing = False
        for leaf in leaves:
            a = _leaf_aval(leaf)
            if a is None:
                raise _bad_leaf_error(self.__name__, args, kwargs, leaf)
            if isinstance(leaf, Tracer):
                tracing = True
            avals.append(a)
        if tracing or (_trace.active_anywhere and not _trace.state.eval_only):
            return self._bind(full_args, full_kwargs, statics, leaves, in_tree, avals)
        device = self._target_device(leaves)
        x64 = _config_mod.config.enable_x64
        key = (in_tree, tuple((a.shape, a.dtype, a.weak_type) for a in avals), statics, device.id, x64)
        entry = self._cache.get(key)  # a dict read is atomic; the lock guards writes
        if entry is None:
            self.misses += 1
            entry = self._compile(full_args, full_kwargs, statics, in_tree, avals, device)
            with self._lock:
                self._cache[key] = entry
                while len(self._cache) > self._max:
                    self._cache.popitem(last=False)
                    self._fast.clear()
                    self._tree_fast.clear()
        else:
            self.hits += 1
        exe = entry.exe
        bufs = [X.to_buffer(leaf, device) for leaf in leaves]
        if entry.donate_mask:
            _check_donation(leaves, entry.donate_mask, self.__name__)
        outs = exe.wrap(exe.run(bufs))
        if entry.donate_mask:
            _forget_donated(leaves, entry.donate_mask)
        else:
            self._remember_fast(args, kwargs, leaves, in_tree, statics, device, entry)
        if entry.single:
            return outs[0]
        return tree_util.tree_unflatten(entry.out_tree, outs)

    def _remember_fast(self, args: tuple, kwargs: dict, leaves: list, in_tree: Any, statics: tuple,
                       device: Any, entry: _Entry) -> None:
        """Register the call's signatures so the next identical call skips the general path.

        Host Arrays get a signature for the device their cached copy lives on;
        a call whose leaves are not all resident on ``device`` is not registered.
        """
        sigs = []
        for leaf in leaves:
            t = type(leaf)
            if t is DeviceArray:
                if leaf._sig[3] != device.id:
                    return
                sigs.append(leaf._sig)
            elif t is Array:
                buf = getattr(leaf, "_buf", None)
                if buf is None or compat.buf_device(buf) != device:
                    return
                want = X.sig_of(leaf.aval, device.id)
                leaf._sig = want
                sigs.append(want)
            else:
                return
        if len(self._tree_fast) >= self._max:
            return
        self._tree_fast[(in_tree, tuple(sigs), statics)] = entry
        if self._fast_ok and not kwargs and len(leaves) == len(args) and \
                all(type(a) is DeviceArray or type(a) is Array for a in args):
            self._fast[tuple(sigs)] = entry

    def _target_device(self, leaves: list) -> Any:
        if self._device is not None:
            return self._device
        if self._backend is not None:
            return _client(self._backend).local_devices()[0]
        dev = None
        for leaf in leaves:
            if type(leaf) is DeviceArray:
                if leaf._buf.is_deleted():
                    leaf._value  # raises DeletedArrayError naming the problem  # noqa: B018
                d = leaf.device if dev is None or leaf._sig[3] != dev.id else dev
                if dev is None:
                    dev = d
                elif d != dev:
                    raise FtransValueError(
                        f"jit({self.__name__}): arguments live on different devices ({dev} and {d}); "
                        "move them with ftrans.device_put first"
                    )
        return dev if dev is not None else default_device()

    def _trace(self, args: tuple, kwargs: dict, avals: list, in_tree: Any) -> tuple[ClosedJaxpr, Any]:
        """Stage the function on abstract arguments: the closed jaxpr and the output tree."""
        static_pos = set(self._static_argnums)
        dyn_idx = [i for i in range(len(args)) if i not in static_pos]
        static_kw = {k: v for k, v in kwargs.items() if k in self._static_argnames}
        out_tree_box: list = []
        fname = self.__name__

        def flat_fun(*flat_in: Any) -> list:
            dargs, dkw = tree_util.tree_unflatten(in_tree, flat_in)
            full = list(args)
            for i, a in zip(dyn_idx, dargs):
                full[i] = a
            out = self._fun(*full, **dkw, **static_kw)
            flat_out, out_tree = tree_util.tree_flatten(out)
            for o in flat_out:
                if _leaf_aval(o) is None:
                    raise FtransTypeError(
                        f"jit({fname}): the function returned a {type(o).__name__}, which is not an array; "
                        "jitted functions must return arrays, scalars or pytrees of them"
                    )
            out_tree_box.append(out_tree)
            return flat_out

        closed, _ = stage(flat_fun, [a for a in avals])
        return closed, out_tree_box[0]

    def _compile(self, args: tuple, kwargs: dict, statics: tuple, in_tree: Any, avals: list,
                 device: Any) -> _Entry:
        closed, out_tree = self._trace(args, kwargs, avals, in_tree)
        donate_mask = self._donate_mask(args, kwargs, len(avals))
        exe = X.Executable(closed, device, self.__name__, donate_mask)
        return _Entry(exe, out_tree, donate_mask if any(donate_mask) else (), closed)

    def _donate_mask(self, args: tuple, kwargs: dict, n: int) -> tuple:
        if not (self._donate_argnums or self._donate_argnames):
            return (False,) * n
        mask = []
        static_pos = set(self._static_argnums)
        for i, a in enumerate(args):
            if i in static_pos:
                continue
            k = len(tree_util.tree_leaves(a))
            mask += [i in self._donate_argnums] * k
        dyn_kw = {k: v for k, v in kwargs.items() if k not in self._static_argnames}
        for k, v in sorted(dyn_kw.items()):
            mask += [k in self._donate_argnames] * len(tree_util.tree_leaves(v))
        return tuple(mask)

    def _bind(self, args: tuple, kwargs: dict, statics: tuple, leaves: list, in_tree: Any, avals: list) -> Any:
        """Inside a transform: stage the body and bind ``jit_call`` (consts become explicit operands)."""
        closed, out_tree = self._trace(args, kwargs, avals, in_tree)
        jaxpr = closed.jaxpr
        hoisted = Jaxpr([], list(jaxpr.constvars) + list(jaxpr.invars), jaxpr.eqns, jaxpr.outvars)
        body = ClosedJaxpr(hoisted, [])
        donated = (False,) * len(closed.consts) + self._donate_mask(args, kwargs, len(leaves))
        outs = jit_call_p.bind(*closed.consts, *leaves, jaxpr=body, name=self.__name__,
                               donated_invars=donated)
        return tree_util.tree_unflatten(out_tree, outs)

    # -- ahead-of-time API ------------------------------------------------------
    def trace(self, *args: Any, **kwargs: Any) -> Traced:
        dargs, dkw, _ = self._split(args, kwargs)
        leaves, in_tree = tree_util.tree_flatten((dargs, dkw))
        avals = []
        for leaf in leaves:
            a = _leaf_aval(leaf)
            if a is None:
                raise _bad_leaf_error(self.__name__, dargs, dkw, leaf)
            avals.append(a)
        closed, out_tree = self._trace(args, kwargs, avals, in_tree)
        return Traced(self, closed, out_tree, self._donate_mask(args, kwargs, len(avals)),
                      self._target_device(leaves))

    def lower(self, *args: Any, **kwargs: Any) -> Lowered:
        return self.trace(*args, **kwargs).lower()

    def eval_shape(self, *args: Any, **kwargs: Any) -> Any:
        t = self.trace(*args, **kwargs)
        shapes = [ShapeDtypeStruct(a.shape, a.dtype, weak_type=a.weak_type) for a in t.jaxpr.out_avals]
        return tree_util.tree_unflatten(t.out_tree, shapes)

    def _cache_size(self) -> int:
        return len(self._cache)

    def clear_cache(self) -> None:
        with self._lock:
            self._cache.clear()
            self._fast.clear()
            self._tree_fast.clear()

    _clear_cache = clear_cache

    def cache_info(self) -> dict:
        """Misses (traces + compiles), slow-path hits and size of this function's executable cache.

        Fast-path hits are not counted: counting them would cost every call.
        """
        return {"hits": self.hits, "misses": self.misses, "size": len(self._cache), "max_size": self._max}

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        if obj is None:
            return self
        return functools.partial(self, obj)

    def __repr__(self) -> str:
        return f"<ftrans.jit of {self.__qualname__}>"


class Traced:
    """``jit(f).trace(*args)``: the staged program, before lowering."""

    def __init__(self, owner: JitWrapped, closed: ClosedJaxpr, out_tree: Any, donate_mask: tuple, device: Any):
        self._owner = owner
        self.jaxpr = closed
        self.out_tree = out_tree
        self._donate = donate_mask
        self._device = device

    def lower(self) -> Lowered:
        from ftrans.lowering.lower import lower_jaxpr

        n_consts = len(self.jaxpr.jaxpr.constvars)
        donated = (False,) * n_consts + tuple(self._donate) if any(self._donate) else ()
        text = lower_jaxpr(self.jaxpr.jaxpr, self._owner.__name__, donated_args=donated)
        return Lowered(self, text)


class Lowered:
    """``jit(f).lower(*args)``: the StableHLO module; ``compile()`` builds the executable."""

    def __init__(self, traced: Traced, text: str):
        self._traced = traced
        self._text = text

    def as_text(self, dialect: str | None = None) -> str:
        if dialect not in (None, "stablehlo"):
            raise FtransValueError(f"Lowered.as_text: dialect {dialect!r} is not available; use 'stablehlo'")
        return self._text

    def compile(self) -> Compiled:
        t = self._traced
        exe = X.Executable(t.jaxpr, t._device, t._owner.__name__, t._donate)
        return Compiled(exe, t.out_tree, t.jaxpr)

    @property
    def in_avals(self) -> list:
        return self._traced.jaxpr.in_avals

    @property
    def out_info(self) -> Any:
        shapes = [ShapeDtypeStruct(a.shape, a.dtype, weak_type=a.weak_type) for a in self._traced.jaxpr.out_avals]
        return tree_util.tree_unflatten(self._traced.out_tree, shapes)


class Compiled:
    """A compiled executable for fixed argument types; call it with arguments of those types."""

    def __init__(self, exe: X.Executable, out_tree: Any, closed: ClosedJaxpr):
        self._exe = exe
        self._out_tree = out_tree
        self._closed = closed

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        leaves = tree_util.tree_leaves((args, kwargs))
        want = self._exe.in_avals
        got = [_leaf_aval(x) for x in leaves]
        if len(got) != len(want) or any(g is None or (g.shape, g.dtype) != (w.shape, w.dtype)
                                        for g, w in zip(got, want)):
            gs = ", ".join("?" if g is None else g.str_short() for g in got)
            ws = ", ".join(w.str_short() for w in want)
            raise FtransTypeError(f"Compiled: called with ({gs}) but compiled for ({ws})")
        outs = self._exe(*leaves)
        return tree_util.tree_unflatten(self._out_tree, outs)

    def as_text(self) -> str:
        return self._exe.text

    @property
    def executable(self) -> Any:
        return self._exe.xla

    def cost_analysis(self) -> Any:
        return self._exe.xla.cost_analysis()


# ----------------------------------------------------------------------------
# Argument-number bookkeeping


def _signature(fun: Callable) -> inspect.Signature | None:
    try:
        return inspect.signature(fun)
    except (TypeError, ValueError):
        return None


def _as_tuple(x: Any, what: str, fname: str) -> tuple:
    if x is None:
        return ()
    if isinstance(x, (int, str)):
        return (x,)
    if isinstance(x, Iterable):
        return tuple(x)
    raise FtransTypeError(f"jit({fname}): {what} must be an int/str or a sequence of them, got {x!r}")


def _resolve_statics(sig: inspect.Signature | None, nums: Any, names: Any, fname: str) -> tuple:
    nums = tuple(int(i) for i in _as_tuple(nums, "static_argnums", fname))
    names = tuple(_as_tuple(names, "static_argnames", fname))
    params = list(sig.parameters.values()) if sig is not None else None
    if params is not None:
        positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        has_var = any(p.kind == p.VAR_POSITIONAL for p in params)
        n = len(positional)
        norm = []
        for i in nums:
            j = i + n if i < 0 else i
            if (j < 0 or j >= n) and not has_var:
                raise FtransValueError(
                    f"jit({fname}): static_argnums {i} is out of range for a function with {n} positional "
                    "parameter(s)"
                )
            norm.append(j)
        nums = tuple(norm)
        # Like JAX: a static parameter may be named by position or name; fill in the other.
        by_name = {p.name: k for k, p in enumerate(positional)}
        names = tuple(dict.fromkeys(names + tuple(positional[i].name for i in nums if i < n)))
        nums = tuple(sorted(set(nums) | {by_name[nm] for nm in names if nm in by_name}))
        known = {p.name for p in params}
        has_kw = any(p.kind == p.VAR_KEYWORD for p in params)
        for nm in names:
            if nm not in known and not has_kw:
                raise FtransValueError(f"jit({fname}): static_argnames {nm!r} is not a parameter of {fname}")
    return nums, frozenset(names)


def _resolve_donation(sig: inspect.Signature | None, nums: Any, names: Any, static_nums: tuple,
                      fname: str) -> tuple:
    nums = tuple(int(i) for i in _as_tuple(nums, "donate_argnums", fname))
    names = tuple(_as_tuple(names, "donate_argnames", fname))
    if sig is not None:
        positional = [p for p in sig.parameters.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        by_name = {p.name: k for k, p in enumerate(positional)}
        nums = tuple(sorted(set(nums) | {by_name[nm] for nm in names if nm in by_name}))
        names = tuple(dict.fromkeys(names + tuple(positional[i].name for i in nums if i < len(positional))))
    overlap = set(nums) & set(static_nums)
    if overlap:
        raise FtransValueError(f"jit({fname}): arguments {sorted(overlap)} cannot be both static and donated")
    return nums, frozenset(names)


def _hashable(v: Any, what: str, fname: str) -> Any:
    try:
        hash(v)
    except TypeError:
        raise FtransValueError(
            f"jit({fname}): static {what} of type {type(v).__name__} is not hashable; static arguments key "
            "the compilation cache, so pass a hashable value (a tuple instead of a list, say) or make the "
            "argument dynamic"
        ) from None
    if isinstance(v, (Array, Tracer, np.ndarray)):
        raise FtransValueError(f"jit({fname}): static {what} is an array; arrays must be dynamic arguments")
    return (type(v), v)


def _check_donation(leaves: list, mask: tuple, fname: str) -> None:
    seen = set()
    for leaf, d in zip(leaves, mask):
        if d and isinstance(leaf, Array):
            if id(leaf) in seen:
                raise FtransValueError(f"jit({fname}): the same Array is donated twice in one call")
            seen.add(id(leaf))


def _forget_donated(leaves: list, mask: tuple) -> None:
    """Donated inputs may now alias outputs: drop their buffers and host copies so reuse raises."""
    for leaf, d in zip(leaves, mask):
        if d and isinstance(leaf, Array):
            buf = getattr(leaf, "_buf", None)
            if buf is not None and not buf.is_deleted():
                buf.delete()
            if type(leaf) is DeviceArray:
                try:
                    del leaf._value
                except AttributeError:
                    pass
            else:
                _mark_host_donated(leaf)


def _mark_host_donated(leaf: Array) -> None:
    try:
        del leaf._buf
    except AttributeError:
        pass


def jit(fun: Callable | None = None, *, in_shardings: Any = None, out_shardings: Any = None,
        static_argnums: int | Sequence[int] | None = None, static_argnames: str | Iterable[str] | None = None,
        donate_argnums: int | Sequence[int] | None = None, donate_argnames: str | Iterable[str] | None = None,
        keep_unused: bool = False, device: Any = None, backend: str | None = None, inline: bool = False,
        abstracted_axes: Any = None, compiler_options: Any = None,
        max_cache_size: int = DEFAULT_CACHE_SIZE) -> Any:
    """JAX's ``jit``: compile ``fun`` with XLA for each new argument signature.

    Usable as ``@jit``, ``@jit(static_argnums=...)`` or ``jit(f, ...)``.
    """
    if in_shardings is not None or out_shardings is not None:
        raise NotImplementedError("jit: in_shardings/out_shardings are not supported yet (sharded jit comes later)")
    if abstracted_axes is not None:
        raise NotImplementedError("jit: abstracted_axes (dynamic shapes) is not supported")
    kw = dict(static_argnums=static_argnums, static_argnames=static_argnames, donate_argnums=donate_argnums,
              donate_argnames=donate_argnames, device=device, backend=backend, max_cache_size=max_cache_size,
              keep_unused=keep_unused, inline=inline)
    if fun is None:
        return lambda f: JitWrapped(f, **kw)
    return JitWrapped(fun, **kw)
