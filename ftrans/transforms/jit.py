"""``jit``: trace once per argument signature, compile with XLA, call the executable.

The call path is the hot path: one cache lookup, then one ``_Entry.invoke`` (see
``JitWrapped``).  A fast key (the arguments' precomputed signatures) answers
repeat calls on resident arrays when no transform or debug check is active;
the general key (pytree structure, abstract values, statics, device, x64)
answers everything else, tracing and compiling on a miss.

Under any active transform (``make_jaxpr``, an enclosing ``jit``, ``grad``,
``vmap``) the call binds the ``jit_call`` primitive instead, so the jitted
function appears in the IR as one call with its own jaxpr (or, with
``inline=True``, as its body's equations).
"""

from __future__ import annotations

import contextlib
import enum
import functools
import inspect
import os
import sys
import threading
import time
import warnings
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from ftrans.core import array as _array_mod
from ftrans.core import config as _config_mod
from ftrans.core import dtypes
from ftrans.core import key_reuse as _kr
from ftrans.core import platform as _platform
from ftrans.core import pytrees as tree_util
from ftrans.core import ref as _ref_mod
from ftrans.core import sharding as _sh_core
from ftrans.core import sharding as _sh_mod
from ftrans.core import trace as _trace
from ftrans.core import traceback_util as _tb
from ftrans.core.array import (
    Array,
    DeviceArray,
    ShardedArray,
    device_key,
    jax_array_argument,
    jax_array_argument_error,
)
from ftrans.core.avals import (
    ShapedArray,
    ShapeDtypeStruct,
    out_struct_sharding,
    shape_only_constant_error,
    type_str,
)
from ftrans.core.axis_env import axis_env as _axis_env
from ftrans.core.ir import ClosedJaxpr, Jaxpr, Var, hoist_consts
from ftrans.core.jaxpr_api import _typed_key_avals
from ftrans.core.jaxpr_api import eval_shape as _core_eval_shape
from ftrans.core.keys import PRNGKeyArray, is_key_dtype
from ftrans.core.layout import Format, default_layout
from ftrans.core.operands import masked_array_error
from ftrans.core.prims.calls import jit_call_p
from ftrans.core.prims.parallel import Interpreted, pmap_in_program
from ftrans.core.shape_poly import DimExpr
from ftrans.core.sharding import get_mesh as _current_mesh
from ftrans.core.trace import Tracer, check_outputs, invalid_value_error, stage
from ftrans.core.wrapping import fun_name, fun_qualname, name_after
from ftrans.devices import _client, default_device, on_new_backend
from ftrans.errors import (
    FtransOverflowError,
    FtransRuntimeError,
    FtransTypeError,
    FtransValueError,
    user_frame,
    user_stacklevel,
)
from ftrans.lowering import compat, lower
from ftrans.lowering import executable as X
from ftrans.transforms.batching import to_axis_owner

__all__ = ["jit", "jit_call_p", "clear_caches", "eval_shape", "DEFAULT_CACHE_SIZE"]

DEFAULT_CACHE_SIZE = 4096  # executables kept per jitted function (LRU)

_all_jitted: weakref.WeakSet = weakref.WeakSet()
_ndarray = np.ndarray
_NP_KEY = object()  # first item of the fast keys of NumPy-argument calls (never an argument signature)


class _Store:
    """The executable cache of one function under one set of ``jit`` options.

    Every ``jit(f, **options)`` of the same ``f`` and options shares one store,
    as in JAX, so a second wrapper of a function compiles nothing. The stores
    live in ``_stores``, keyed weakly on the function: when the function is
    gone its compiled programs go with it. Nothing in a store refers back to
    the function (the staged jaxprs hold only values the function closed over).
    ``pending`` marks the signatures being compiled right now, so a second
    thread waits for the first thread's compile instead of repeating it.
    ``traced`` keeps the staged programs (``_Jitted._trace``) by abstract
    signature, so a call under a transform (``grad(jit(f))``), ``trace``/
    ``lower``/``eval_shape`` and a compile share one trace of the function, as
    JAX's trace cache does.
    """

    __slots__ = ("cache", "fast", "tree_fast", "spmd_fast", "lock", "pending", "background", "traced",
                 "ref_info", "__weakref__")

    def __init__(self) -> None:
        self.cache: OrderedDict[tuple, _Entry] = OrderedDict()
        self.fast: dict[tuple, _Entry] = {}
        self.tree_fast: dict[tuple, _Entry] = {}
        # Sharded calls (transforms/sharded_jit.py): the tree key of ``tree_fast`` -> a runner of the leaves.
        self.spmd_fast: dict[tuple, Callable] = {}
        self.lock = threading.Lock()
        self.pending: dict[tuple, tuple[int, threading.Event]] = {}
        self.background: dict[tuple, _BackgroundJob] = {}  # signatures compiling in a background thread
        self.traced: OrderedDict[tuple, tuple] = OrderedDict()  # signature -> (closed jaxpr, out tree)
        self.ref_info: Any = None  # the refs the function closes over, and its ref-threading twins (refs.py)


# function -> {jit options: _Store}; weak in the function, like JAX's cache of jitted functions.
_stores: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_stores_lock = threading.Lock()


def _store_for(fun: Callable, options: tuple) -> _Store:
    """The shared store of ``fun`` under ``options`` (a private one when ``fun`` cannot key a weak dict)."""
    try:
        hash(options)
        with _stores_lock:
            per = _stores.get(fun)
            if per is None:
                per = _stores[fun] = {}
            store = per.get(options)
            if store is None:
                store = per[options] = _Store()
            return store
    except Exception:  # noqa: BLE001  unhashable, no weak references (a __slots__ callable), or an
        return _Store()  # __eq__/__hash__ that raises (a callable object compared by value): no sharing


def _all_stores() -> list:
    with _stores_lock:
        stores = [s for per in list(_stores.values()) for s in per.values()]
    return stores + [f._store for f in list(_all_jitted)]  # private stores live only in their wrappers


def clear_caches() -> None:
    """JAX's ``clear_caches``: drop every jitted function's compiled programs (sharded ones included) and
    the shared XLA cache; the on-disk compilation cache is kept."""
    for st in _all_stores():
        with st.lock:
            st.cache.clear()
            st.fast.clear()
            st.tree_fast.clear()
            st.spmd_fast.clear()
            st.background.clear()
            st.traced.clear()
    for f in list(_all_jitted):
        f._spmd_cache.clear()
    from ftrans.transforms import parallel

    for p in list(parallel._all_pmapped):
        p.clear_cache()
    with X._xla_lock:
        X._xla_cache.clear()
    from ftrans.lowering import device_eager

    device_eager.clear()
    for clear in _CACHE_CLEARERS:
        clear()
    _release_queued_writes()


def _release_queued_writes() -> None:
    """Finish the on-disk cache's queued writes now: each holds its executable until written (up to
    ``disk_cache.write_delay_s`` later), so programs a user has just dropped would otherwise outlive the call
    that cleared them (JAX's ``test_jit_cache_clear`` counts the client's live executables)."""
    from ftrans.lowering import disk_cache

    if disk_cache._pending:
        disk_cache.flush()


# Caches kept by layers above this one (the traces of control-flow bodies) register how to empty them here,
# so clear_caches reaches them too.
_CACHE_CLEARERS: list[Callable[[], None]] = []
# Key-reuse checking (``JitWrapped._call_key_checked``): each jitted function's analysed signatures.
_key_reuse_sigs: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_CACHE_CLEARERS.append(_key_reuse_sigs.clear)


on_new_backend.append(clear_caches)  # a new runtime client: every compiled program is stale


# Waiting for another thread's compile: who waits for whom, so a cycle compiles instead of hanging.
_waits_for: dict[int, int] = {}
_waits_lock = threading.Lock()


# ``disable_jit`` or ``no_execution`` is set: ``_call`` (which the fast tiers, cleared when either
# changes, fall back to) must look at them; one global read while neither is.
_call_guard = bool(_config_mod.config.disable_jit or _config_mod.config.no_execution)  # JAX_DISABLE_JIT=1


def _guarded_anywhere() -> bool:
    """Whether ``_call`` must look at its guards in some thread (a context may set one in a thread)."""
    cfg = _config_mod.config
    return bool(any(cfg.values_anywhere("disable_jit")) or any(cfg.values_anywhere("no_execution"))
                or any(v not in (None, "allow") for v in cfg.values_anywhere("transfer_guard_host_to_device")))


def _guard_level() -> bool:
    """Whether the host-to-device transfer guard looks at implicit transfers (jit arguments)."""
    return _config_mod.config.transfer_level("host_to_device") != "allow"


def _check_implicit_transfers(name: str, leaves: list) -> None:
    """JAX's transfer guard for a jitted call: a NumPy array or Python scalar argument is an implicit
    host-to-device transfer; "disallow" raises JAX's JaxRuntimeError, "log" logs it."""
    for leaf in leaves:
        if isinstance(leaf, (np.ndarray, np.generic, bool, int, float, complex)):
            from ftrans.errors import JaxRuntimeError, user_location

            a = _leaf_aval(leaf)
            msg = (f"Disallowed host-to-device transfer: aval={a.str_short() if hasattr(a, 'str_short') else a}, "
                   f"an argument of {name} (at {user_location()}); put it on the device first with "
                   "ftrans.device_put, or allow transfers (ftrans.transfer_guard('allow'))")
            if _config_mod.config.transfer_level("host_to_device").startswith("disallow"):
                raise JaxRuntimeError(f"INVALID_ARGUMENT: {msg}")
            import logging

            logging.getLogger("ftrans").warning(msg.replace("Disallowed", "host-to-device transfer (logged)", 1))


def _on_config_change(name: str, value: Any) -> None:
    global _call_guard
    if name in ("allow_f16_reductions", "default_matmul_precision", "numpy_rank_promotion",
                "numpy_dtype_promotion", "default_prng_impl", "error_checking_behavior_nan",
                "error_checking_behavior_divide", "error_checking_behavior_oob",
                "softmax_custom_jvp", "threefry_partitionable", "enable_custom_prng",
                "remove_size_one_mesh_axis_from_type", "auto_pcast") or name in _config_mod._user_globals:
        # read while tracing: trace again
        clear_caches()
        return
    if name in ("enable_x64", "disable_jit", "no_execution", "default_device"):  # the fast tiers must not answer: start over
        for st in _all_stores():  # every function's, wrapped now or not (a later jit(f) shares it)
            st.fast.clear()
            st.tree_fast.clear()
            st.spmd_fast.clear()
        _call_guard = _guarded_anywhere()
    if name.startswith("transfer_guard"):  # the fast tiers must step aside while a guard watches
        for st in _all_stores():
            st.fast.clear()
            st.tree_fast.clear()
            st.spmd_fast.clear()
        _call_guard = _guarded_anywhere()


def _on_scope_change(name: str) -> None:
    """A context opened or closed in some thread: the fast tiers step aside meanwhile (``eager_everywhere``
    is off) and the slow key holds the thread's context values, so no cache is cleared; the guard switch
    is recomputed over every thread's values."""
    global _call_guard
    if name in ("disable_jit", "no_execution") or name.startswith("transfer_guard"):
        _call_guard = _guarded_anywhere()


_config_mod.config._listeners.append(_on_config_change)
_config_mod.scope_listeners.append(_on_scope_change)


@contextlib.contextmanager
def disable_jit(disable: bool = True) -> Iterator[None]:
    """JAX's ``disable_jit``: inside the block, jitted functions (and ``lax`` control flow) run their Python
    directly, eagerly; the previous setting comes back on exit. As in JAX it holds for the calling thread."""
    with _config_mod.config_context("disable_jit")(disable):
        yield


# ----------------------------------------------------------------------------
# Argument handling


_FLOAT0 = np.dtype([("float0", np.void, 0)])  # JAX's (and ftrans.dtypes') tangent dtype of integers


_key_trees: dict = {}


def _has_keys(in_tree: Any) -> bool:
    """Whether the arguments' tree holds a typed key array (remembered per tree)."""
    has = _key_trees.get(in_tree)
    if has is None:
        if len(_key_trees) > 4096:
            _key_trees.clear()
        has = _key_trees[in_tree] = tree_util.has_key_nodes(in_tree)
    return has


def _is_float0(x: Any) -> bool:
    return isinstance(x, np.ndarray) and x.dtype == _FLOAT0


class _Float0Result:
    """A float0 result of a jitted function in its output tree: the program returns a bool
    placeholder of its shape, and unflattening gives back ``numpy.zeros(shape, float0)``."""

    __slots__ = ("shape",)

    def __init__(self, shape: tuple):
        self.shape = tuple(shape)


tree_util.register_pytree_node(
    _Float0Result, lambda r: ((np.zeros(r.shape, np.bool_),), r.shape),
    lambda shape, _: np.zeros(shape, _FLOAT0))


def _leaf_aval(x: Any) -> ShapedArray | None:
    """The abstract value of a dynamic argument leaf, or None if it is not an array."""
    t = type(x)
    if t is DeviceArray or t is ShardedArray:  # never gathers a sharded argument to the host
        return x._aval
    if isinstance(x, Array):
        v = x._value
        return ShapedArray(v.shape, v.dtype, x.weak_type)
    if isinstance(x, Tracer):
        return x.aval
    if t in (int, float, complex, bool):
        d = dtypes.python_scalar_dtype(x)
        if t is int and not _INT_MIN[d.itemsize] <= x <= _INT_MAX[d.itemsize]:
            return _OVERFLOW
        return ShapedArray((), d, dtypes.is_weak_scalar(x))
    if isinstance(x, (np.ndarray, np.generic)):
        if t is not _ndarray and isinstance(x, np.ma.MaskedArray):
            return None  # refused (_bad_leaf_error says why)
        try:
            return ShapedArray(np.shape(x), dtypes.canonicalize(x.dtype), False)
        except TypeError:
            return None
    if isinstance(x, ShapeDtypeStruct):
        return ShapedArray(x.shape, dtypes.canonicalize(x.dtype), x.weak_type)
    if isinstance(x, ShapedArray):  # an abstract value stands for arguments of its type, as JAX's .lower takes
        return ShapedArray(x.shape, x.dtype, x.weak_type)
    if _array_mod.is_foreign_array(x):  # a jax.Array, or anything with __array__ / __dlpack__
        if jax_array_argument(x):  # refused, as in JAX (_bad_leaf_error says why)
            return None
        f = _array_mod.from_foreign(x)
        return None if f is None else f.aval
    return None


_INT_MIN = {4: -2**31, 8: -2**63}
_INT_MAX = {4: 2**31 - 1, 8: 2**63 - 1}
_OVERFLOW = None  # what _leaf_aval answers for a Python int the default int cannot hold


def _bad_leaf_error(fname: str, args: tuple, kwargs: dict, bad: Any, jitted: Any = None,
                    full: tuple | None = None) -> Exception:
    """The error for a dynamic argument leaf that is not an array. ``args``/``kwargs`` are the dynamic
    arguments; given the wrapper and the call's ``full`` (args, kwargs), the leaf is named as the user
    wrote it (``x``, ``params['w']``) rather than by position."""
    path = named = "?"
    for i, (p, leaf) in enumerate(tree_util.tree_flatten_with_path((args, kwargs))[0]):
        if leaf is bad:
            path = named = _path_str(p)
            if jitted is not None and full is not None:
                try:
                    named = _leaf_names(jitted, *full)[i]
                except (IndexError, TypeError, ValueError):  # an odd signature: keep the positional name
                    named = path
                if named != path:
                    path = f"{named} ({path})"
            break
    if isinstance(bad, np.ma.MaskedArray):
        return masked_array_error(f"jit({fname}): argument {path}")
    if jax_array_argument(bad):
        return jax_array_argument_error(f"jit({fname}): argument {path}")
    if isinstance(bad, ShapeDtypeStruct):
        return FtransTypeError(
            f"jit({fname}): Argument '{named}' of shape {getattr(bad.dtype, 'name', bad.dtype)}"
            f"[{','.join(map(str, bad.shape))}] of type "
            f"{type(bad)} is not a valid JAX type. A ShapeDtypeStruct has no value: it stands for an argument of "
            f"jit({fname}).trace/.lower or eval_shape; pass an array of that shape and dtype to call it")
    if type(bad) is int:
        d = dtypes.default_int()
        return FtransOverflowError(
            f"jit({fname}): argument {path} is the Python int {bad}, which does not fit the default "
            f"integer type {d.name} (the type JAX reads Python ints as); pass it as a float, as an array "
            "with an explicit dtype, mark it static, or enable x64 for 64-bit integers"
        )
    # JAX's opening sentence (what users match on), then which argument and what to pass instead
    return invalid_value_error(
        f"jit({fname}): Error interpreting argument to {fname} as an abstract array. The problematic value is of "
        f"type {type(bad)} and was passed to the function at path {named}. Argument {path}", bad,
        "or mark the argument static with static_argnums / static_argnames")


def _path_str(path: tuple) -> str:
    if not path:
        return "args"
    head, *rest = path
    root = "args" if getattr(head, "idx", None) == 0 else "kwargs"
    return root + tree_util.keystr(tuple(rest))


class _Entry:
    """One compiled signature: the executable and how to feed it and rebuild the outputs.

    ``run`` takes one buffer per *kept* argument leaf (``kept`` lists them when
    ``keep_unused=False`` pruned some; None keeps all); ``single`` (one array
    returned) lets ``invoke`` build its output inline. ``invoke(bufs, leaves)``
    is the one way the executable runs (see ``_executor``).
    """

    __slots__ = ("exe", "out_tree", "single", "donate_mask", "closed", "run", "aval0", "sig0", "kept",
                 "invoke")

    def __init__(self, exe: X.Executable, out_tree: Any, donate_mask: tuple, closed: ClosedJaxpr,
                 kept: tuple | None = None, name: str = "fn"):
        self.exe = exe
        self.out_tree = out_tree
        self.single = out_tree.num_leaves == 1 and tree_util.treedef_is_leaf(out_tree)
        self.donate_mask = donate_mask
        self.closed = closed
        self.run = exe._run if not exe.const_bufs else exe.run  # constants lead the argument list
        self.aval0 = exe.out_avals[0] if exe.out_avals else None
        self.sig0 = exe.out_sigs[0] if exe.out_avals else None
        self.kept = kept
        self.invoke = _executor(self, name)


class _InterpretedEntry:
    """A jit signature run by ``Interpreted``; the fast keys never hold it (``exe`` is None)."""

    __slots__ = ("exe", "out_tree", "donate_mask", "closed", "kept", "invoke")

    def __init__(self, closed: ClosedJaxpr, out_tree: Any):
        self.exe = None
        self.out_tree = out_tree
        self.donate_mask = ()
        self.closed = closed
        self.kept = None
        run = Interpreted(closed).run
        self.invoke = lambda bufs, leaves: tree_util.tree_unflatten(out_tree, run(leaves))


def _executor(entry: _Entry, name: str) -> Callable[[list, Any], Any]:
    """The one way a cached executable runs: argument buffers in, the output pytree out.

    Every call path (both fast keys and the general one) ends here. It is built
    once per compiled signature, as a closure over what that signature needs,
    so the hot path reads locals instead of attributes; the branches a
    signature cannot take (pruned arguments, donation) cost one local test.
    """
    run, kept, donate = entry.run, entry.kept, entry.donate_mask
    single, aval0, sig0 = entry.single, entry.aval0, entry.sig0
    weak0 = aval0.weak_type if aval0 is not None else False
    out_tree, wrap, trace = entry.out_tree, entry.exe.wrap, _trace
    closed = entry.closed  # not ``entry``: the closure is ``entry.invoke``, and a cycle would outlive the cache

    if kept is None and not donate and single:  # the common signature: one array out, nothing special
        def invoke_plain(bufs: list, leaves: Any) -> Any:
            out = run(bufs)
            if not trace.eager_everywhere and trace.debug_checks_on():
                _check_outputs(name, closed, donate, out, leaves)
            res = DeviceArray()
            res._buf = out[0]
            res._aval = aval0
            res._sig = sig0
            res.weak_type = weak0
            return res

        return invoke_plain

    def invoke(bufs: list, leaves: Any) -> Any:
        given = bufs
        if kept is not None:
            bufs = [bufs[i] for i in kept]
        if donate:
            _check_donation(leaves, donate, name)
            out = run(bufs)
            _forget_donated(leaves, donate, given)
        else:
            out = run(bufs)
        if not trace.eager_everywhere and trace.debug_checks_on():
            _check_outputs(name, closed, donate, out, leaves)
        if single:
            res = DeviceArray()
            res._buf = out[0]
            res._aval = aval0
            res._sig = sig0
            res.weak_type = weak0
            return res
        return tree_util.tree_unflatten(out_tree, wrap(out))

    return invoke


# What a sharded call's fast runner returns when the general path must answer the call instead (a
# deleted argument). Not None: a function may return None, and its call must not run twice.
GENERAL_PATH = object()

# What ``_remember_cpp`` hands to the miss of jaxlib's C++ dispatcher that is running the call (per thread).
_cpp_handoff = threading.local()
_CPP_KEY = "jaxlib C++ dispatcher"  # the fast table's entry for the function's dispatcher (a str: its hash is cached)


def _forget_cpp(store: _Store, cpp: Any) -> None:
    """Take a dispatcher whose ``jit`` object is gone out of ``store``'s fast tables (run by the garbage
    collector, maybe while this thread holds ``store.lock``: single dict operations, no lock)."""
    held = store.fast.get(_CPP_KEY)
    if held is not None and held[0] is cpp:
        store.fast.pop(_CPP_KEY, None)
    for k, v in list(store.tree_fast.items()):
        if type(v) is tuple and v[0] is cpp:
            store.tree_fast.pop(k, None)


def _cpp_output(aux: tuple, bufs: tuple) -> DeviceArray:
    """One output of a call answered by jaxlib's C++ dispatcher, as ``invoke`` wraps it."""
    res = DeviceArray()
    res._buf = bufs[0]
    res._aval, res._sig, res.weak_type = aux
    return res


# One program of each dispatcher with a single array output is handed to it without an output structure: the
# dispatcher returns the runtime array itself (no Python call from C++) and the caller wraps it. Which program
# that is, the fast table says beside the dispatcher: ``fast[_CPP_KEY]`` is ``(dispatcher, aux)``, ``aux`` that
# output's (aval, signature, weak type) once such a program is learnt (None before). Only one per dispatcher, so
# a bare array from it always belongs to that program; it is chosen under this lock.
_RUNTIME_ARRAY = _array_mod.buffer_type  # jax's Array (registered by ``compat`` on import)
_cpp_bare_lock = threading.Lock()


def _cpp_single_output(out: Any, cpp: Any, fast: dict) -> Any:
    """What a call answered by jaxlib's C++ dispatcher ``cpp`` returns: ``out`` itself, or, when it is the
    bare runtime array of the dispatcher's one-array program, that array wrapped as a DeviceArray
    (``__call__`` does the same inline)."""
    if type(out) is not _RUNTIME_ARRAY:
        return out
    res = DeviceArray()
    res._buf = out
    held = fast.get(_CPP_KEY)
    if held is not None and held[0] is cpp and held[1] is not None:
        res._aval, res._sig, res.weak_type = held[1]
    else:  # (the tables were cleared meanwhile) the runtime array carries the output's type
        aval = ShapedArray(tuple(out.shape), out.dtype, bool(out.weak_type))
        res._aval, res._sig, res.weak_type = aval, X.sig_of(aval, device_key(next(iter(out.devices())))), aval.weak_type
    return res


def _numpy_executor(entry: _Entry, shapes: list, dts: list, device: Any) -> Callable[..., Any]:
    """The NumPy fast key's counterpart of ``_executor``: host arrays in (as arguments), the output pytree out.

    Transfer, execution and result collection happen in one call of
    ``compat.host_execute_fn``; arguments the program does not use (``kept``)
    are not transferred. Only reached when nothing is donated and no transform
    or debug check is active anywhere (``_trace.eager_everywhere``), so there
    is nothing to check after the run.
    """
    exe, kept = entry.exe, entry.kept
    if kept is not None:
        shapes, dts = [shapes[i] for i in kept], [dts[i] for i in kept]
    run = compat.host_execute_fn(exe.xla, exe.out_avals, device, shapes, dts, exe.const_bufs)
    if kept is not None:
        run_all = run

        def run(args: tuple) -> list:
            return run_all(tuple([args[i] for i in kept]))

    if entry.single:
        aval0, sig0 = entry.aval0, entry.sig0
        weak0 = aval0.weak_type

        def call_single(*args: Any) -> Any:
            res = DeviceArray()
            res._buf = run(args)[0]
            res._aval = aval0
            res._sig = sig0
            res.weak_type = weak0
            return res

        return call_single
    out_tree, wrap = entry.out_tree, exe.wrap
    return lambda *args: tree_util.tree_unflatten(out_tree, wrap(run(args)))


# ----------------------------------------------------------------------------
# Compile logs and explanations of cache misses (``log_compiles``, ``explain_cache_misses``)


def _call_site(column: bool = False) -> str:
    """The user's line calling into ftrans now: ``file:line (function)``; with ``column``, as JAX's reports
    name it: ``file:line:column (qualified function name)``, the column the call expression's offset."""
    f = user_frame()
    if f is None:
        return "<unknown location>"
    where = f"{f.f_code.co_filename}:{f.f_lineno}"
    if column:
        try:
            col = list(f.f_code.co_positions())[f.f_lasti // 2][2]
        except (AttributeError, IndexError):  # (no positions: Python < 3.11, or python -X no_debug_ranges)
            col = None
        if col is not None:
            where += f":{col}"
        return f"{where} ({getattr(f.f_code, 'co_qualname', f.f_code.co_name)})"
    return f"{where} ({f.f_code.co_name})"


def _definition_site(fun: Any) -> str:
    code = getattr(inspect.unwrap(fun), "__code__", None) if callable(fun) else None
    if code is None:
        return "<unknown location>"
    return f"{code.co_filename}:{code.co_firstlineno}"


def _committed_results(out: Any) -> Any:
    for x in tree_util.tree_leaves(out):
        if type(x) is DeviceArray:
            x._commit = True
    return out


def _committed_mismatch(jitted: JitWrapped, full: tuple | None, leaves: list, a: Any, b: Any) -> Exception:
    """JAX's error for arguments committed to different devices: each named as the user wrote it, with its
    type and device."""
    try:
        names = _leaf_names(jitted, *full) if full is not None else []
    except Exception:  # noqa: BLE001 - naming is best effort
        names = []

    def one(x: Any) -> str:
        k = next(i for i, leaf in enumerate(leaves) if leaf is x)
        name = names[k] if k < len(names) else f"args[{k}]"
        return (f"argument {name} of {jitted.__name__} with shape {x.dtype.name}[{','.join(map(str, x.shape))}] "
                f"and with device ids [{x.device.id}] on platform {x.device.platform.upper()}")

    return FtransValueError(f"Received incompatible devices for jitted computation. Got {one(a)} and {one(b)}; "
                            "move the arguments onto one device with ftrans.device_put first")


def _leaf_names(jitted: JitWrapped, args: tuple, kwargs: dict) -> list[str]:
    """A name for each dynamic argument leaf, as the user would write it: ``x``, ``params['w']``, ``args[2][0]``."""
    dyn_args, dyn_kw, _ = jitted._split(args, kwargs)
    static_pos = set(jitted._static_positions(len(args)))
    positions = [i for i in range(len(args)) if i not in static_pos]
    params = [p for p in (jitted._sig.parameters.values() if jitted._sig is not None else ())
              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    names = []
    for path, _ in tree_util.tree_flatten_with_path((dyn_args, dyn_kw))[0]:
        head, first, *rest = path
        if getattr(head, "idx", None) == 0:  # a positional argument
            pos = positions[first.idx] if first.idx < len(positions) else first.idx
            if pos < len(params):
                root = params[pos].name
            else:  # in ``*args``: named after it, as JAX's (``a[0]`` of ``def f(x, *a)``)
                var = [p.name for p in (jitted._sig.parameters.values() if jitted._sig is not None else ())
                       if p.kind == p.VAR_POSITIONAL]
                root = f"{var[0]}[{pos - len(params)}]" if var else f"args[{pos}]"
        else:
            root = str(getattr(first, "key", first))
            if jitted._sig is not None and root not in jitted._sig.parameters:  # in ``**kw``: ``kw['z']``
                var = [p.name for p in jitted._sig.parameters.values() if p.kind == p.VAR_KEYWORD]
                if var:
                    root = var[0] + tree_util.keystr((first,))
        names.append(root + tree_util.keystr(tuple(rest)))
    return names


def _aval_text(a: tuple) -> str:
    shape, dtype, weak = a
    return type_str(shape, dtype) + ("{weak_type=True}" if weak else "")


def _static_name(jitted: JitWrapped, entry: tuple) -> str:
    kind, where, _ = entry
    if kind == "kw":
        return f"static argument {where!r}"
    params = [p for p in (jitted._sig.parameters.values() if jitted._sig is not None else ())
              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    name = f" {params[where].name!r}" if where < len(params) else ""
    return f"static argument{name} (position {where})"


def _static_text(v: tuple) -> str:
    """A static value as the cache key holds it, ``(type, value)``, shown as the user passed it."""
    typ, val = v
    return f"{val!r}" if type(val) is typ else f"{val!r} (of type {typ.__name__})"


def _key_differences(jitted: JitWrapped, new: tuple, old: tuple, names: list[str]) -> list[str]:
    """What differs between two of jit's cache keys ``(in_tree, avals, statics, device, x64, trace options)``,
    in words."""
    tree, avals, statics, dev, x64, *opts = new
    otree, oavals, ostatics, odev, ox64, *oopts = old
    out = []
    if tree != otree:
        out.append(f"different input pytree:\n  * now {tree} and before {otree}")
    elif avals != oavals:
        lines, weak = [], False
        for name, a, b in zip(names, avals, oavals):
            if a == b:
                continue
            if a[2] != b[2]:  # both weak flags shown, as JAX's report does
                weak = True
                lines.append(f"  * at {name}, now {type_str(a[0], a[1])}{{weak_type={a[2]}}} and before "
                             f"{type_str(b[0], b[1])}{{weak_type={b[2]}}}"
                             + (" (only the weak type differs: a Python scalar vs an array)"
                                if (a[0], a[1]) == (b[0], b[1]) else ""))
            else:
                lines.append(f"  * at {name}, now {_aval_text(a)} and before {_aval_text(b)}")
        out.append("different input types:\n" + "\n".join(lines)
                   + ("\n  (weak types: https://docs.jax.dev/en/latest/101/type_promotion.html#weak-types)" if weak else ""))
    if statics != ostatics:
        lines = []
        old_by = {(k, w): v for k, w, v in ostatics}
        for k, w, v in statics:
            if (k, w) not in old_by:
                lines.append(f"  * {_static_name(jitted, (k, w, v))} is new: now {_static_text(v)}")
            elif old_by[(k, w)] != v:
                lines.append(f"  * {_static_name(jitted, (k, w, v))}: now {_static_text(v)} and before "
                             f"{_static_text(old_by[(k, w)])}")
        new_by = {(k, w) for k, w, _ in statics}
        for k, w, v in ostatics:
            if (k, w) not in new_by:
                lines.append(f"  * {_static_name(jitted, (k, w, v))} was {_static_text(v)} and is now not given")
        out.append("different static arguments:\n" + "\n".join(lines))
    if dev != odev:
        out.append(f"different device: now device {dev} and before device {odev}")
    if x64 != ox64:
        out.append(f"different enable_x64: now {x64} and before {ox64}")
    if opts != oopts:
        out.append(_context_differences(opts[0] if opts else (), oopts[0] if oopts else ()))
    return out


def _context_differences(new: tuple, old: tuple) -> str:
    """The options of the calling thread's configuration contexts (``Config.scoped_here``) that differ, each
    as JAX's report names it (``* numpy_rank_promotion differs: now warn and before allow``); an option with
    no context reads its global value (which ``config.update`` cannot have changed since: it clears the
    caches)."""
    new_d, old_d = dict(new), dict(old)
    lines = []
    for name in sorted(set(new_d) | set(old_d)):
        glob = _config_mod.config.global_value(name) if name != "trace modes" else ()
        a, b = new_d.get(name, glob), old_d.get(name, glob)
        if a != b:
            lines.append(f"  * {name} differs: now {a} and before {b}")
    return ("Tracing context doesn't match, e.g. due to config or context manager (the calling thread's "
            "configuration):\n" + "\n".join(lines))


# Call sites where ``explain_cache_misses`` reported a function never seen before: a second one there is
# most likely a function re-defined on each pass of a loop (the report says so, as JAX's does).
_sites_of_new_functions: set[str] = set()


def _explain_miss(jitted: JitWrapped, key: tuple, args: tuple, kwargs: dict, store: Any) -> None:
    """``explain_cache_misses``: log (WARNING) why ``jitted`` is traced again for ``key``, against the
    closest key it has compiled before, as JAX's "TRACING CACHE MISS" report does."""
    site = _call_site(column=True)
    head = f"TRACING CACHE MISS at {site}:"
    previous = list(store.cache.keys())
    if not previous:
        again = site in _sites_of_new_functions
        _sites_of_new_functions.add(site)
        X.logger.warning("%s\n  never seen function:\n    %s id=%d defined at %s%s", head, jitted.__name__,
                         id(jitted._fun), _definition_site(jitted._fun),
                         "\n  but seen another function defined on the same line; maybe the function is\n"
                         "  being re-defined repeatedly, preventing caching?" if again else "")
        return
    try:
        names = _leaf_names(jitted, args, kwargs)
    except Exception:  # noqa: BLE001 - naming is best effort; the report still lists positions
        names = [f"leaf {i}" for i in range(len(key[1]))]

    def distance(old: tuple) -> tuple:
        parts = sum(a != b for a, b in zip(key, old))
        if key[0] != old[0]:
            return (parts, 5 * len(key[1]))
        return (parts, sum(2 * (a[0] != b[0]) + 2 * (a[1] != b[1]) + (a[2] != b[2]) for a, b in zip(key[1], old[1])))

    closest = min(previous, key=distance)
    diffs = _key_differences(jitted, key, closest, names)
    X.logger.warning("%s\n  for %s defined at %s\n  all previously seen cache keys differ. For the closest previous "
                     "key:\n  %s", head, jitted.__name__, _definition_site(jitted._fun), "\n  ".join(diffs))


def _wait_for(owner: int, event: threading.Event) -> bool:
    """Wait until thread ``owner`` finishes a compile; False (at once) if that would close a waiting cycle."""
    me = threading.get_ident()
    with _waits_lock:
        t = owner
        while t is not None:
            if t == me:
                return False
            t = _waits_for.get(t)
        _waits_for[me] = owner
    try:
        event.wait()
    finally:
        with _waits_lock:
            del _waits_for[me]
    return True


class _NonFiniteOutput(FloatingPointError):
    """``debug_nans``/``debug_infs``: a jitted function's output holds a NaN (an infinity). The jitted
    function's call catches it and runs the Python function again without ``jit`` on the same arguments
    (JAX's "de-optimized version"), which raises at the operation (or Python expression) that made it;
    anywhere else it re-runs the traced program op by op (``rerun``)."""

    def __init__(self, msg: str, closed: ClosedJaxpr, leaves: Any):
        super().__init__(msg)
        self.closed, self.leaves = closed, leaves

    def rerun(self) -> None:
        from ftrans.core.jaxpr_api import eval_jaxpr

        eval_jaxpr(self.closed, list(self.closed.consts), *self.leaves)  # raises at the first bad operation


def _check_outputs(name: str, closed: ClosedJaxpr, donated: tuple, out_bufs: list, leaves: Any) -> None:
    """``debug_nans``/``debug_infs`` under jit: on a bad output, re-run without jit to name the operation."""
    kind = _trace.nonfinite_kind([np.asarray(b) for b in out_bufs])
    if kind is None:
        return
    if donated:  # donated inputs are gone: nothing to re-run on
        raise FloatingPointError(f"invalid value ({kind}) encountered in the output of jit({name}) (its inputs "
                                 "were donated, so it cannot be re-run op by op to find the operation)")
    raise _NonFiniteOutput(
        f"invalid value ({kind}) encountered in the output of jit({name}); with debug_nans/debug_infs on, "
        "the de-optimized function (the function run again as if jit were removed) was called to name the "
        f"operation, but the de-optimized function did not produce the invalid value. {_why_not_made(leaves)}",
        closed, leaves)


def _why_not_made(leaves: Any) -> str:
    """The likely reason a bad output was made by no operation: an input that already held it, else a
    literal or an optimization."""
    held = []
    for i, x in enumerate(leaves):
        try:
            k = _trace.nonfinite_kind([np.asarray(x)])
        except Exception:  # a key, a token: nothing to look at
            continue
        if k is not None:
            held.append(f"input {i} holds {'an' if k == 'inf' else 'a'} {k}")
    if held:
        return (f"Its inputs already hold invalid values ({', '.join(held)}), which pass to the output "
                "without an operation making them; check the arguments")
    return ("A nan/inf literal returned as an output or passed straight through, or an optimization of the "
            "compiled program, can cause this; removing jit may avoid it")


def _deoptimized(jitted: JitWrapped, e: _NonFiniteOutput, args: tuple, kwargs: dict) -> None:
    """Run ``jitted``'s Python function on the call's arguments, eagerly (JAX's de-optimized re-run, which
    raises where the invalid value is made); if it does not fail, raise ``e`` (what the compiled one found)."""
    # (what JAX prints here, on standard output)
    print("Invalid nan value encountered in the output of a jax.jit function. Calling the de-optimized version.")
    try:
        if callable(jitted._fun):
            jitted._fun(*args, **kwargs)
        else:
            e.rerun()
    except (FloatingPointError, ZeroDivisionError) as e2:
        if isinstance(e2, _NonFiniteOutput):
            raise
        raise e2 from None
    raise FloatingPointError(str(e)) from None


# ----------------------------------------------------------------------------
# Background compilation

_COMPILED = object()  # _call_in_background's answer: let the cached executable run the call
_FIRST_ANSWER_HEAD_START = 0.05  # seconds the background compile waits for the first host answer, at most
stats = {"host_calls": 0, "background_compiles": 0}  # calls answered on the host; compiles finished in threads


class _NotInBackground(Exception):
    """The traced program must take the ordinary path (it is partitioned over a mesh)."""


class _BackgroundJob:
    """One signature compiling in a background thread: the traced program the host interpreter runs
    meanwhile, and events for "traced" and "compiled (or failed)"."""

    __slots__ = ("closed", "out_tree", "traced", "answered", "ready", "error", "host_calls")

    def __init__(self) -> None:
        self.closed: ClosedJaxpr | None = None
        self.out_tree: Any = None
        self.traced = threading.Event()
        self.answered = threading.Event()  # the first host answer is out (the compile may take the GIL)
        self.ready = threading.Event()
        self.error: BaseException | None = None
        self.host_calls = 0


class _HostBlasThreads:
    """While XLA compiles in a background thread, the host interpreter's BLAS (NumPy's matmuls) uses one
    core fewer than the machine has, so that its worker threads do not spin against the compile.

    On the 2-cpu benchmark machine a 128x784x512 float32 matmul took 46-80 ms with OpenBLAS's default
    two threads while a compile ran and 1 ms with one (benchmarks/README.md, ``first_result.py``).
    Uses threadpoolctl (a dependency; if it is missing or cannot drive the BLAS, nothing changes).
    Nested and concurrent host answers share one limit: the first sets it, the last restores it.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._depth = 0
        self._controller: Any = None  # threadpoolctl's controller, made once (it scans the loaded libraries)
        self._limited: Any = None

    def _enter(self) -> None:
        with self._lock:
            self._depth += 1
            if self._depth > 1:
                return
            try:
                if self._controller is None:
                    import threadpoolctl

                    with warnings.catch_warnings():  # e.g. its note on two OpenMP runtimes: not the user's concern here
                        warnings.simplefilter("ignore")
                        self._controller = threadpoolctl.ThreadpoolController()
                cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
                want = max(1, (cpus or 1) - 1)
                blas = self._controller.select(user_api="blas")
                if any(info.get("num_threads", 0) > want for info in blas.info()):
                    self._limited = blas.limit(limits=want)
            except Exception:  # noqa: BLE001  no threadpoolctl, or a BLAS it cannot drive: leave the threads alone
                self._controller = self._controller or False
                self._limited = None

    def _exit(self) -> None:
        with self._lock:
            self._depth -= 1
            if self._depth == 0 and self._limited is not None:
                limited, self._limited = self._limited, None
                with contextlib.suppress(Exception):
                    limited.restore_original_limits()

    @contextlib.contextmanager
    def limited(self) -> Iterator[None]:
        if self._controller is False:  # threadpoolctl missing or unusable
            yield
            return
        self._enter()
        try:
            yield
        finally:
            self._exit()


_host_blas = _HostBlasThreads()


def _host_evaluate(closed: ClosedJaxpr, leaves: list, avals: list) -> list:
    """Run a traced program with the primitives' NumPy rules: host Arrays of the program's output types.

    Each argument enters with its abstract value's dtype and weak type (a
    float64 NumPy array is float32 without x64, a Python float is weak), as
    the compiled program would see it. Nested ``jit_call`` bodies are
    interpreted too rather than compiled (``calls.host_only``).
    """
    from ftrans.core.jaxpr_api import eval_jaxpr
    from ftrans.lowering.rules import calls

    ops = []
    for leaf, aval in zip(leaves, avals):
        v = leaf._value if isinstance(leaf, Array) else np.asarray(leaf)
        if v.dtype != aval.dtype:
            v = v.astype(aval.dtype)
        ops.append(Array._new(v, aval.weak_type))
    with calls.host_only():
        outs = eval_jaxpr(closed, list(closed.consts), *ops)
    res = []
    for o, aval in zip(outs, closed.out_avals):
        v = o._value if isinstance(o, Array) else np.asarray(o)
        if v.dtype != aval.dtype:
            v = v.astype(aval.dtype)
        res.append(Array._new(v, aval.weak_type))
    return res


# ----------------------------------------------------------------------------
# The jitted function


class JitWrapped:
    """The callable ``jit`` returns; also offers ``lower``, ``trace``, ``eval_shape``.

    A call makes one cache lookup and, on a hit, one call of its ``_Entry.invoke``:

    * the *fast key*, when it is cheap to compute (no transform or debug check
      active anywhere): the arguments' precomputed signatures (shape, dtype,
      weak type, device), in ``_fast`` for plain positional Arrays, in
      ``_tree_fast`` with the pytree structure and static values otherwise.
      Only calls whose leaves are all resident on the executable's device, with
      nothing donated, are registered there;
    * otherwise the *general key* (pytree structure, every leaf's abstract
      value, statics, device, x64) in ``_cache``, bounded (LRU) at
      ``max_cache_size``; a miss traces and compiles.
    """

    def __init__(self, fun: Callable, static_argnums: Any, static_argnames: Any, donate_argnums: Any,
                 donate_argnames: Any, device: Any, backend: str | None, max_cache_size: int,
                 keep_unused: bool, inline: bool, compiler_options: tuple = (), in_shardings: Any = None,
                 out_shardings: Any = None, optimizations: Any = None, background_compilation: bool | None = None):
        _check_jittable(fun)
        self._fun = fun
        # The options as given, for copy/deepcopy/pickle (which build a fresh wrapper).
        self._options = (static_argnums, static_argnames, donate_argnums, donate_argnames, device, backend,
                         max_cache_size, keep_unused, inline, compiler_options, in_shardings, out_shardings,
                         optimizations, background_compilation)
        self.__name__ = fun_name(fun, "fn")
        self.__qualname__ = fun_qualname(fun, self.__name__)
        self.__doc__ = getattr(fun, "__doc__", None)
        self.__wrapped__ = fun
        self._sig = _signature(fun)
        if self._sig is None and donate_argnames is not None:
            raise FtransValueError(
                f"jit({self.__name__}): donate_argnames={donate_argnames!r} maps names to arguments through the "
                f"function's signature: Getting the signature of function {fun!r} failed. Pass donate_argnums "
                "instead of donate_argnames.")
        self._static_argnums, self._static_argnames = _resolve_statics(
            self._sig, static_argnums, static_argnames, self.__name__)
        params = [p for p in (self._sig.parameters.values() if self._sig is not None else ())
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        # Static positions a call must fill (no default): leaving one out is the function's TypeError.
        self._static_required = {i: params[i].name for i in self._static_argnums
                                 if 0 <= i < len(params) and params[i].default is params[i].empty}
        self._donate_argnums, self._donate_argnames = _resolve_donation(
            self._sig, donate_argnums, donate_argnames, self._static_argnums, self.__name__,
            self._static_argnames)
        self._device = device
        if device is not None:  # its results are committed there: eager operations must follow them
            from ftrans.lowering import device_eager

            device_eager.install()
        self._backend = backend
        self._max = int(max_cache_size)
        self._inline = _canonical_inline(inline)
        self._keep_unused = bool(keep_unused)
        self._compiler_options = compiler_options
        if background_compilation is not None and not isinstance(background_compilation, bool):
            raise FtransTypeError(f"jit({self.__name__}): background_compilation must be True, False or None "
                                  f"(None follows ftrans.config.background_compilation), got {background_compilation!r}")
        self._background = background_compilation
        self._in_shardings = in_shardings
        self._out_shardings = out_shardings
        self._spmd_cache: dict = {}  # sharded calls (transforms/sharded_jit.py)
        # Every call is partitioned: shardings over a mesh were given, or the body constrains some (shardings
        # that all name one device just place the program there).
        from ftrans.transforms.sharded_jit import placement

        self._spmd_always, self._sharding_device = placement(in_shardings, out_shardings)
        # The cache is the function's, shared by every wrapper with these options (see _Store);
        # the wrapper keeps its dicts as attributes so the call path reads them directly.
        from ftrans.transforms.passes import resolve_optimizations

        self._optimizations = resolve_optimizations(optimizations, f"jit({self.__name__})")
        options = (self._static_argnums, self._static_argnames, self._donate_argnums, self._donate_argnames,
                   device, backend, self._max, self._inline, self._keep_unused, compiler_options,
                   in_shardings, out_shardings, self._optimizations, background_compilation)
        store = self._store = _store_for(fun, options)
        self._cache = store.cache
        self._fast = store.fast
        self._tree_fast = store.tree_fast
        self._spmd_fast = store.spmd_fast
        self._lock = store.lock
        self._fast_ok = not (self._static_argnums or self._static_argnames or self._donate_argnums
                             or self._donate_argnames)
        self.hits = 0
        self.misses = 0
        _all_jitted.add(self)
        functools.update_wrapper(self, fun, updated=())
        name_after(self, fun)
        # The function's own attributes (``f.some_value``) show on the jitted one, as functools.wraps
        # (and JAX's jit) copy them; only public names, so ftrans's ``_`` fields are never replaced.
        own = getattr(fun, "__dict__", None)
        if isinstance(own, dict):
            mine = self.__dict__
            for k, v in own.items():
                if not k.startswith("_") and k not in mine:
                    mine[k] = v

    # -- the hot path ---------------------------------------------------------
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        # An API boundary (``traceback_util``): the ``try`` costs nothing until an exception leaves.
        try:
            if _trace.eager_everywhere and self._fast_ok and not kwargs:
                fast = self._fast
                # One and two arguments are spelt out: a comprehension is a function call of its own (about 3%
                # of a call on device arguments, and of a one-argument call with NumPy arguments).
                if not args or type(args[0]) is not _ndarray:  # (a NumPy array has no signature: no key of Arrays)
                    try:
                        if len(args) == 2:
                            a0, a1 = args
                            entry = fast.get((getattr(a0, "_sig", None), getattr(a1, "_sig", None)))
                        elif len(args) == 1:
                            entry = fast.get((getattr(args[0], "_sig", None),))
                        else:
                            entry = fast.get(tuple([getattr(a, "_sig", None) for a in args]))
                    except (LookupError, TypeError, ValueError):  # an argument whose __getattr__ raises KeyError (a
                        entry = None  # dict with attribute access): no fast key, the general path flattens it
                    if entry is not None:
                        if _array_mod.buffers_deleted and not _all_resident(args):
                            return self._call(args, kwargs)  # the general path transfers or explains
                        self.hits += 1
                        if len(args) == 2:
                            return entry.invoke([a0._buf, a1._buf], args)
                        if len(args) == 1:
                            return entry.invoke([args[0]._buf], args)
                        return entry.invoke([a._buf for a in args], args)
                else:  # NumPy arguments: jaxlib's C++ dispatcher (``_remember_cpp``), else their own fast key
                    held = fast.get(_CPP_KEY)
                    if held is not None:  # plain arrays of the host's byte order (a subclass takes the key path)
                        if len(args) == 2:
                            a0, a1 = args
                            plain = type(a1) is _ndarray and a0.dtype.isnative and a1.dtype.isnative
                        elif len(args) == 1:
                            plain = args[0].dtype.isnative
                        else:
                            plain = all([type(a) is _ndarray and a.dtype.isnative for a in args])
                        if plain:
                            self.hits += 1
                            cpp, aux = held
                            out = cpp(*args)
                            if type(out) is _RUNTIME_ARRAY:  # the one-array program's bare output: wrapped here
                                if aux is None:
                                    return _cpp_single_output(out, cpp, fast)
                                res = DeviceArray()
                                res._buf = out
                                res._aval, res._sig, res.weak_type = aux
                                return res
                            return out
                    try:
                        if len(args) == 2:  # the common case, without a comprehension
                            a0, a1 = args
                            hit = fast.get((_NP_KEY, _config_mod.config.enable_x64, (_ndarray, a0.shape, a0.dtype),
                                            (type(a1), a1.shape, a1.dtype)))
                        else:
                            hit = fast.get((_NP_KEY, _config_mod.config.enable_x64,
                                            *[(type(a), a.shape, a.dtype) for a in args]))
                    except AttributeError:  # an argument that is not an array
                        hit = None
                    if hit is not None:
                        self.hits += 1
                        return hit(*args)
            return self._call(args, kwargs)
        except Exception as e:
            if type(e) is _NonFiniteOutput:
                try:
                    _deoptimized(self, e, args, kwargs)
                except Exception as e2:
                    _tb.reraise_filtered(e2)
                    raise
            _tb.reraise_filtered(e)
            raise

    def _call_key_checked(self, args: tuple, kwargs: dict) -> Any:
        """A call while key-reuse checking is on: an analysis trace of the function gives its effect on
        keys (which argument and closed-over keys it consumes, what its output keys are), applied to the
        caller's keys; the call itself then runs as always, without tracking (``core/key_reuse.py``)."""
        if _config_mod.config.disable_jit:  # the Python runs as it is, eagerly: its samplers are tracked
            return self._call(args, kwargs)
        dyn_args, dyn_kwargs, statics = self._split(args, kwargs)
        in_leaves = _kr.key_leaves((dyn_args, dyn_kwargs))
        if not any(type(x) is PRNGKeyArray for x in in_leaves) and \
                getattr(self._fun, "__module__", "").startswith("ftrans."):
            with _kr.suspended():  # one of ftrans's own jitted helpers: no key in, none closed over
                return self._call(args, kwargs)
        flat, in_tree = tree_util.tree_flatten((dyn_args, dyn_kwargs))
        avals = [_leaf_aval(x) for x in flat]
        if any(a is None for a in avals):  # not arguments jit takes: the call says why
            with _kr.suspended():
                return self._call(args, kwargs)
        # The analysis of a call outside any other is remembered per signature (as the program is), and
        # its effect applied again at each call; one inside an analysis or a trace is made each time.
        sig_key = None
        if not _kr.current() and not any(isinstance(x, Tracer) for x in flat):
            sig_key = (in_tree, tuple((a.shape, a.dtype, a.weak_type) for a in avals), statics,
                       _config_mod.config.enable_x64, _config_mod.config.scoped_here())
        sigs = _key_reuse_sigs.setdefault(self, {})
        fr = sigs.get(sig_key) if sig_key is not None else None
        if fr is None:
            with _kr.frame("jit", owner=self) as fr:
                self._trace_staged(args, kwargs, avals, in_tree)
            if sig_key is not None:
                while sigs and len(sigs) >= self._max:
                    sigs.pop(next(iter(sigs)))
                sigs[sig_key] = fr
        _kr.apply(fr, in_leaves, "jit", "jit-compiled function")
        with _kr.suspended():
            out = self._call(args, kwargs)
        _kr.apply_outputs(fr, in_leaves, _kr.key_leaves(out))
        return out

    # -- everything else --------------------------------------------------------
    def _split(self, args: tuple, kwargs: dict) -> tuple[tuple, dict, tuple]:
        """Separate static arguments (hashed into the key) from dynamic ones."""
        statics = []
        if self._static_argnums:
            # A static position the call does not fill is left out, as in JAX: the
            # parameter takes its default (or it is passed by keyword, a static_argnames).
            pos = self._static_positions(len(args))
            if len(pos) != len(self._static_argnums):
                for i, nm in self._static_required.items():
                    if i >= len(args) and nm not in kwargs:
                        raise FtransTypeError(
                            f"jit({self.__name__}): missing required argument {nm!r} (position {i}, static); "
                            f"the function was called with {len(args)} positional argument(s)"
                        )
            for i in pos:
                statics.append(("pos", i, _hashable(args[i], f"positional argument {i}", self.__name__)))
            args = tuple(a for i, a in enumerate(args) if i not in pos)
        if self._static_argnames and kwargs:
            dyn_kw = {}
            for k, v in kwargs.items():
                if k in self._static_argnames:
                    statics.append(("kw", k, _hashable(v, f"keyword argument {k!r}", self.__name__)))
                else:
                    dyn_kw[k] = v
            kwargs = dyn_kw
        if kwargs and self._in_shardings is not None:  # JAX's rule (its words): in_shardings are positional
            raise FtransValueError(
                f"jit({self.__name__}): pjit does not support kwargs when in_shardings is specified. Got keyword "
                f"arguments {sorted(kwargs)}; pass them positionally (in_shardings names positional arguments)")
        return args, kwargs, tuple(statics)

    def _static_positions(self, n: int) -> tuple:
        """The static positions among ``n`` positional arguments (negative ones count from the end
        of the call's arguments when the function takes ``*args``)."""
        nums = self._static_argnums
        if not nums:
            return ()
        if nums[0] >= 0 and nums[-1] < n:  # the common case: every static position is filled
            return nums
        return tuple(sorted({j for j in (i + n if i < 0 else i for i in nums) if 0 <= j < n}))

    def _call(self, args: tuple, kwargs: dict) -> Any:
        if _ref_mod.created:  # refs exist: those among the arguments or closed over are threaded (refs.py)
            from ftrans.transforms import refs

            return refs.jit_call(self, args, kwargs, self._call_plain)
        return self._call_plain(args, kwargs)

    def _call_plain(self, args: tuple, kwargs: dict) -> Any:
        if _call_guard:
            if _config_mod.config.disable_jit:
                return self._fun(*args, **kwargs)
            if _config_mod.config.no_execution and _trace.is_eager() and not any(isinstance(x, Tracer) for x in tree_util.tree_leaves((args, kwargs))):
                raise _no_execution_error(self.__name__)
        full_args, full_kwargs = args, kwargs
        args, kwargs, statics = self._split(args, kwargs)
        leaves, in_tree = tree_util.tree_flatten((args, kwargs))
        if _call_guard and _guard_level() and _trace.is_eager():
            _check_implicit_transfers(self.__name__, leaves)
        if _trace.eager_everywhere:
            key = (in_tree, tuple([getattr(x, "_sig", None) for x in leaves]), statics)
            # (An empty table is not asked: hashing the key costs about 0.1 us per leaf.)
            entry = self._tree_fast.get(key) if self._tree_fast else None
            if entry is not None and (not _array_mod.buffers_deleted or _all_resident(leaves)):
                self.hits += 1
                return entry.invoke([x._buf for x in leaves], leaves)
            if self._spmd_fast:  # arguments spread over a mesh, laid out as the program takes them
                run = self._spmd_fast.get(key)
                if run is not None:
                    out = run(leaves)
                    if out is not GENERAL_PATH:  # (a deleted argument, which the general path reports)
                        self.hits += 1
                        return out
            if leaves and type(leaves[0]) is _ndarray:  # a pytree of NumPy arrays: its own fast key
                try:
                    hit = self._tree_fast.get((_NP_KEY, in_tree, statics, _config_mod.config.enable_x64,
                                               tuple([(type(x), x.shape, x.dtype) for x in leaves])))
                except AttributeError:  # a leaf that is not an array
                    hit = None
                if hit is not None:
                    entry, puts = hit  # no transfer for a leaf the program does not read (None)
                    if type(entry) is _Entry:
                        self.hits += 1
                        return entry.invoke([put(x) if put is not None else None for put, x in zip(puts, leaves)],
                                            leaves)
                    if not _cpp_handoff.__dict__.get("busy"):  # jaxlib's C++ dispatcher (``_remember_cpp``)
                        self.hits += 1                         # (but not from its own miss)
                        return _cpp_single_output(entry(*full_args), entry, self._fast)
        avals = []
        tracing = False
        spread = self._spmd_always or _sh_mod.contexts_open[0] or _sh_mod.contexts_open[1]
        float0_in = False
        struct = None
        for leaf in leaves:
            a = _leaf_aval(leaf)
            if a is None:
                if not _is_float0(leaf):
                    raise _bad_leaf_error(self.__name__, args, kwargs, leaf, self, (full_args, full_kwargs))
                a = ShapedArray(leaf.shape, _FLOAT0, False)
                float0_in = True
            if isinstance(leaf, Tracer):
                tracing = True
            elif type(leaf) is ShardedArray:
                spread = True
            elif type(leaf) is ShapeDtypeStruct:
                struct = leaf
            avals.append(a)
        if float0_in:  # a float0 argument carries no data: the program gets a bool placeholder (as in JAX)
            leaves = [np.zeros(x.shape, np.bool_) if a.dtype == _FLOAT0 else x for x, a in zip(leaves, avals)]
        if tracing or not _trace.is_eager():
            if self._inline:  # the body joins the caller's jaxpr instead of a jit_call equation
                with _trace.source_site_as(_trace.current_source_info()):  # at the call's place, as JAX's
                    return self._fun(*full_args, **full_kwargs)
            return self._bind(full_args, full_kwargs, statics, leaves, in_tree, avals)
        if struct is not None:  # a struct stands for an argument of trace/lower/eval_shape only, as in JAX
            raise _bad_leaf_error(self.__name__, args, kwargs, struct, self, (full_args, full_kwargs))
        if spread:
            from ftrans.transforms import sharded_jit

            if sharded_jit.needs_spmd(self, leaves):
                return sharded_jit.call_sharded(self, args, kwargs, full_args, full_kwargs, statics, leaves, avals,
                                                in_tree)
        device = self._target_device(leaves, (full_args, full_kwargs))
        x64 = _config_mod.config.enable_x64
        # This thread's config contexts (``()`` without one): options read while tracing (matmul precision,
        # promotion modes, ...) change the program, and other threads may hold other values.
        key = (in_tree, tuple((a.shape, a.dtype, a.weak_type) for a in avals), statics, device_key(device), x64,
               _config_mod.config.scoped_here())
        entry = self._cache.get(key)  # a dict read is atomic; the lock guards writes
        data_avals = avals
        # (the key's tree tells key arrays apart: their key-typed avals are needed only to trace)
        if entry is None and _has_keys(in_tree):  # a typed key array enters as a key-typed value
            avals = _typed_key_avals(in_tree, leaves, avals)
        if entry is None and self._background_applies(leaves):
            out = self._call_in_background(key, full_args, full_kwargs, in_tree, avals, device, leaves)
            if out is not _COMPILED:
                return out
            entry = self._cache.get(key)
        if entry is None:
            entry = self._compile_once(key, full_args, full_kwargs, statics, in_tree, avals, device)
            if entry is None:  # the body constrains shardings: a partitioned program (sharded_jit.py)
                from ftrans.transforms import sharded_jit

                # (which takes a key array as its data: its shardings name the data's axes)
                return sharded_jit.call_sharded(self, args, kwargs, full_args, full_kwargs, statics, leaves,
                                                data_avals, in_tree)
        else:
            self.hits += 1
        kept = entry.kept
        if kept is None:
            bufs = [X.to_buffer(leaf, device) for leaf in leaves]
        else:  # an argument the program never reads is not transferred (invoke selects the kept ones)
            bufs = [None] * len(leaves)
            for i in kept:
                bufs[i] = X.to_buffer(leaves[i], device)
        if self._sharding_device is not None:
            # placed by the function's own (single-device) shardings: its results are committed there, as JAX's
            return _committed_results(entry.invoke(bufs, leaves))
        if not entry.donate_mask:
            self._remember_fast(args, kwargs, leaves, in_tree, statics, device, entry)
        return entry.invoke(bufs, leaves)

    def _compile_once(self, key: tuple, args: tuple, kwargs: dict, statics: tuple, in_tree: Any,
                      avals: list, device: Any) -> _Entry:
        """A cache miss: compile ``key`` once, however many threads ask for it at the same time.

        The first thread marks the key pending and compiles without holding any
        lock; the others wait for it and then read the cache. Re-entering from
        the compiling thread, or a wait that would close a cycle of threads
        waiting for each other's compiles, compiles instead of waiting. A failed
        compile caches nothing: each waiting thread then tries (and fails) itself.
        """
        store = self._store
        me = threading.get_ident()
        while True:
            with store.lock:
                entry = store.cache.get(key)
                if entry is not None:
                    self.hits += 1
                    return entry
                pend = store.pending.get(key)
                if pend is None:
                    done = threading.Event()
                    store.pending[key] = (me, done)
                    break
            owner, event = pend
            if owner == me or not _wait_for(owner, event):
                done = None  # compile here too, without taking over the mark
                break
        try:
            self.misses += 1
            if _config_mod.config.explain_cache_misses:
                _explain_miss(self, key, args, kwargs, store)
            entry = self._compile(args, kwargs, statics, in_tree, avals, device)
            if entry is None:  # a partitioned program: the caller takes the sharded path, nothing to cache
                return None
            with store.lock:
                store.cache[key] = entry
                while len(store.cache) > self._max:
                    store.cache.popitem(last=False)
                    store.fast.clear()
                    store.tree_fast.clear()
                    store.spmd_fast.clear()
        finally:
            if done is not None:
                with store.lock:
                    del store.pending[key]
                done.set()
        return entry

    def _remember_fast(self, args: tuple, kwargs: dict, leaves: list, in_tree: Any, statics: tuple,
                       device: Any, entry: _Entry) -> None:
        """Register the call's signatures so the next identical call is answered by the fast key.

        Host Arrays get a signature for the device their cached copy lives on;
        a call whose leaves are not all resident on ``device`` is not registered.
        """
        if entry.exe is None or _guard_level() or _config_mod.config.scoped_here() or \
                "enable_x64" in _config_mod._local.values:
            # interpreted (it calls pmap), a transfer guard watches calls, or compiled under a context (an
            # ``enable_x64`` one too: the fast keys hold no x64 switch, and answer again once it has closed)
            return
        sigs = []
        for leaf in leaves:
            t = type(leaf)
            if t is DeviceArray:
                if leaf._sig[3] != device_key(device):
                    return
                sigs.append(leaf._sig)
            elif t is Array:
                buf = getattr(leaf, "_buf", None)
                if buf is None or compat.buf_device(buf) != device:
                    return
                want = X.sig_of(leaf.aval, device_key(device))
                leaf._sig = want
                sigs.append(want)
            elif t is _ndarray and not sigs:
                self._remember_numpy(args, kwargs, leaves, device, entry, in_tree, statics)
                return
            else:
                return
        if len(self._tree_fast) >= self._max:
            return
        self._tree_fast[(in_tree, tuple(sigs), statics)] = entry
        if self._fast_ok and not kwargs and len(leaves) == len(args) and \
                all(type(a) is DeviceArray or type(a) is Array for a in args):
            self._fast[tuple(sigs)] = entry

    def _remember_numpy(self, args: tuple, kwargs: dict, leaves: list, device: Any, entry: _Entry,
                        in_tree: Any = None, statics: tuple = ()) -> None:
        """The fast key of a call whose arguments are all NumPy arrays of canonical dtypes.

        The key holds each array's type, shape and dtype, and the x64 switch (it
        changes what a program compiles to); the entry keeps one transfer
        function for all the arguments (``compat.host_putter_many``), so a hit
        makes one Python call for its transfers and does no canonicalisation,
        aval or device lookup. Arrays that would need converting (float64 without x64,
        a non-native byte order) keep taking the general path.  Arguments that
        are pytrees of NumPy arrays (a list of weights) get a key of the tree
        and its leaves, looked up after flattening; a leaf the program does not
        read (``keep_unused=False``) is not transferred at all.
        """
        if not (self._fast_ok and not kwargs and len(leaves) == len(args)):
            self._remember_numpy_tree(leaves, device, entry, in_tree, statics, not kwargs)
            return
        if len(self._fast) >= self._max:
            return
        for a in args:
            if type(a) is not _ndarray:
                return
            try:
                if dtypes.canonicalize(a.dtype) != a.dtype or not a.dtype.isnative:
                    return
            except TypeError:
                return
        self._remember_cpp(leaves, device, entry)  # (the key below serves calls the dispatcher does not take)
        key = (_NP_KEY, _config_mod.config.enable_x64, *[(type(a), a.shape, a.dtype) for a in args])
        self._fast[key] = _numpy_executor(entry, [a.shape for a in args], [a.dtype for a in args], device)

    def _remember_numpy_tree(self, leaves: list, device: Any, entry: _Entry, in_tree: Any, statics: tuple,
                             positional: bool = False) -> None:
        if in_tree is None or len(self._tree_fast) >= self._max:
            return
        for a in leaves:
            if type(a) is not _ndarray:
                return
            try:
                if dtypes.canonicalize(a.dtype) != a.dtype or not a.dtype.isnative:
                    return
            except TypeError:
                return
        kept = set(range(len(leaves)) if entry.kept is None else entry.kept)
        puts = [compat.host_putter(a.shape, a.dtype, device) if i in kept else None for i, a in enumerate(leaves)]
        key = (_NP_KEY, in_tree, statics, _config_mod.config.enable_x64,
               tuple([(type(a), a.shape, a.dtype) for a in leaves]))
        cpp = self._remember_cpp(leaves, device, entry) if positional and self._fast_ok else None
        self._tree_fast[key] = (entry if cpp is None else cpp, puts)  # (jaxlib's dispatcher runs the call)

    def _remember_cpp(self, leaves: list, device: Any, entry: _Entry) -> Any:
        """jaxlib's C++ dispatcher, made ready to run the call's signature (host NumPy arrays of canonical
        dtypes, checked by the caller, no static or keyword arguments), or None when it cannot run this
        program.

        A plain NumPy call goes straight to the dispatcher once it exists (``__call__``); a signature it
        has not learnt, or cannot run, comes back to the general path through its miss. Its signatures
        follow JAX's own x64 switch, narrowing 64-bit host arrays while that is off, as ftrans does while
        its own switch is off: it serves ftrans only while ftrans's x64 is off or both are on (a change of
        ftrans's switch clears the fast tables, and it with them). Pytrees of NumPy arrays reach it through
        their fast key only. Programs that call back into Python, or return key or float0 arrays, keep the
        Python path. The dispatcher learns a signature on the call after this one: its miss runs the
        general path, which registers the signature again and hands over the program's description
        (``_cpp_handoff``).
        """
        exe = entry.exe
        if (exe is None or entry.donate_mask or lower.host_callbacks_of(exe.text)
                or (_config_mod.config.enable_x64 and not compat.runtime_x64())
                or not all(isinstance(a.dtype, np.dtype) and a.dtype != _FLOAT0 for a in exe.out_avals)):
            return None
        fast = self._fast
        held = fast.get(_CPP_KEY)
        if held is None:
            cpp = self._new_cpp()
            if cpp is None:
                return None
            fast[_CPP_KEY] = (cpp, None)
        else:
            cpp = held[0]
        if _cpp_handoff.__dict__.get("busy"):  # the dispatcher's miss is running this call: describe the program
            read = None if entry.kept is None else set(entry.kept)
            kept = [read is None or i in read for i in range(len(leaves))]
            out_tree, bare = entry.out_tree, False
            if out_tree.num_leaves == 1 and out_tree.num_nodes == 1:  # one array: returned bare if it is the
                with _cpp_bare_lock:                                  # dispatcher's first such program
                    held = fast.get(_CPP_KEY)
                    if held is not None and held[0] is cpp and held[1] is None:
                        a = exe.out_avals[0]
                        fast[_CPP_KEY] = (cpp, (a, exe.out_sigs[0], a.weak_type))
                        bare = True
            if bare:
                fp = compat.cpp_fastpath(exe.xla, device, exe.out_avals, kept, exe.const_bufs, None)
            else:
                out_def = compat.cpp_output_tree(
                    out_tree, [(a, s, a.weak_type) for a, s in zip(exe.out_avals, exe.out_sigs)], _cpp_output)
                fp = compat.cpp_fastpath(exe.xla, device, exe.out_avals, kept, exe.const_bufs, out_def)
            _cpp_handoff.last = (cpp, fp)
        return cpp

    def _new_cpp(self) -> Any:
        """A C++ dispatcher for this function, shared (as the fast tables are) by every ``jit`` of it with
        the same options. Its miss runs this object's general path, which the dispatcher refers to weakly
        (the tables live as long as the function): when this object goes, the dispatcher leaves the
        tables, and the next general-path call of another one registers its own."""
        me = weakref.ref(self)
        store = self._store

        def general(*args: Any) -> Any:  # (also what runs while the runtime's own disable_jit is set)
            return me()._call(args, {})

        def miss(*args: Any) -> tuple:
            jitted = me()
            jitted.hits -= 1  # the call that reached the dispatcher counted a hit; the general path counts
            here = _cpp_handoff.__dict__
            here["last"], busy, here["busy"] = None, here.get("busy"), True  # (the general path must not
            try:                                                            # call the dispatcher back)
                out = jitted._call(args, {})
                last = here["last"]
            finally:
                here["last"], here["busy"] = None, busy
            return out, (last[1] if last is not None and last[0] is cpp else None), False

        cpp = compat.cpp_dispatcher(self.__name__, general, miss)
        if cpp is not None:
            weakref.finalize(self, _forget_cpp, store, cpp)
        return cpp

    def _target_device(self, leaves: list, full: tuple | None = None) -> Any:
        if self._device is not None or self._backend is not None:
            from ftrans.core.sharding import get_mesh

            if get_mesh() is not None:  # JAX's rule and words
                raise FtransValueError(
                    "Mesh context manager should not be used with jit when backend or device is also specified "
                    f"as an argument to jit (jit({self.__name__})); drop device=/backend= or leave the mesh context")
        if self._device is not None:
            return self._device
        if self._sharding_device is not None:
            return self._sharding_device
        if self._backend is not None:
            return _client(self._backend).local_devices()[0]
        dev = loose = None  # the device of the committed arguments; of the first uncommitted one
        for leaf in leaves:
            if type(leaf) is DeviceArray:
                if leaf._buf.is_deleted():
                    leaf._value  # raises DeletedArrayError naming the problem  # noqa: B018
                if not leaf._committed:  # may be moved to where the committed ones are, as in JAX
                    if loose is None:
                        loose = leaf.device
                    continue
                d = leaf.device if dev is None or leaf._sig[3] != device_key(dev) else dev
                if dev is None:
                    dev, first = d, leaf
                elif d != dev:
                    raise _committed_mismatch(self, full, leaves, first, leaf)
        if dev is not None:
            return dev
        return loose if loose is not None else default_device()

    def _trace(self, args: tuple, kwargs: dict, avals: list, in_tree: Any,
               statics: tuple | None = None) -> tuple[ClosedJaxpr, Any]:
        """Stage the function on abstract arguments: the closed jaxpr and the output tree.

        Given the call's ``statics``, the result is remembered by abstract signature (``_Store.traced``):
        the function is traced once per signature whatever asks (a call under ``grad``/``vmap``, a compile,
        ``trace``/``lower``), as in JAX. A program that captured a tracer of an enclosing transform (the
        function closes over one) is not remembered: that tracer belongs to this call only (JAX reuses it
        and raises UnexpectedTracerError on the next call).
        """
        if statics is None:
            return self._trace_uncached(args, kwargs, avals, in_tree)
        from ftrans.transforms.passes import pipeline_state

        st = _trace.state
        if st.source_override is not None:
            return self._trace_uncached(args, kwargs, avals, in_tree)
        cfg = _config_mod.config
        # (No name stack in the key: ``stage`` traces the body under an empty one, and the lowering joins the
        # caller's names with the body's, so ``grad`` of a jitted function and a later call share one trace.
        # The ``set_xla_metadata`` attributes in effect are: the staged equations carry them, as in JAX.)
        key = (in_tree, tuple([(a.shape, a.dtype, a.weak_type, a.typed_sharding) for a in avals]), statics,
               cfg.enable_x64, cfg.debug_nans, cfg.debug_infs,
               tuple([(f.name, f.size) for f in _axis_env.frames if f.name is not None]), pipeline_state(),
               _platform.platform_override.get(), cfg.scoped_here(), _current_mesh(), st.xla_metadata,
               # (the arguments' mesh: an abstract mesh's sharding inside takes its devices)
               (_sh_core.args_meshes() or (None,))[-1])
        store = self._store
        hit = store.traced.get(key)
        if hit is not None:
            return hit
        if self._in_shardings is not None and not statics:  # a layout given for an argument fits its rank
            from ftrans.transforms import sharded_jit

            sharded_jit.check_in_layouts(self, args, avals)
        # Staging runs the Python function the same way whether or not the program is then partitioned over
        # a mesh (only the passes run after it differ, ``partitioned()``), and a call whose body turns out to
        # constrain shardings is staged for the ordinary path first: the staged program is kept (under a
        # key without the partitioning flag) and piped again, so the function runs once, as in JAX.
        state = key[7]
        staged_key = ("staged", *key[:7], state[:-1], *key[8:])
        staged = store.traced.get(staged_key)
        keep: list = []
        if staged is not None:
            from ftrans.transforms.passes import run_pipeline

            raw, rewrites, out_tree = staged
            closed = run_pipeline(raw, name=self.__name__, optimizations=self._optimizations,
                                  prior_rewrites=rewrites)
        else:
            closed, out_tree = self._trace_uncached(args, kwargs, avals, in_tree, keep)
        if not any(isinstance(c, Tracer) for c in closed.consts):
            with store.lock:
                store.traced[key] = (closed, out_tree)
                if keep:
                    store.traced[staged_key] = keep[0]
                while len(store.traced) > self._max:
                    store.traced.popitem(last=False)
        return closed, out_tree

    def _trace_uncached(self, args: tuple, kwargs: dict, avals: list, in_tree: Any,
                        keep: list | None = None) -> tuple[ClosedJaxpr, Any]:
        # A real trace (not one from the per-signature store) outside any transform is logged, as JAX logs
        # its top-level traces (a call's, trace()'s or lower()'s).
        level = X.compile_log_level()
        t0 = time.perf_counter() if _trace.state.eval_only and X.logger.isEnabledFor(level) else None
        out = self._trace_staged(args, kwargs, avals, in_tree, keep)
        if t0 is not None:
            X.logger.log(level, "Finished tracing %s for jit in %.9f sec", self.__name__,
                         time.perf_counter() - t0)
        return out

    def _trace_staged(self, args: tuple, kwargs: dict, avals: list, in_tree: Any,
                      keep: list | None = None) -> tuple[ClosedJaxpr, Any]:
        """Stage the function and run the pass pipeline on it; ``keep`` (a list) receives the staged program
        before the passes, with the rewrites made while staging, and the output tree."""
        if _config_mod.config.no_tracing:
            raise FtransRuntimeError(
                f"re-tracing function {self.__name__} (defined at {_definition_site(self._fun)}) for `jit`, but "
                "'no_tracing' is set (ftrans.no_tracing()); call it with argument types already compiled, or "
                "leave the no_tracing block")
        static_pos = set(self._static_positions(len(args)))
        dyn_idx = [i for i in range(len(args)) if i not in static_pos]
        static_kw = {k: v for k, v in kwargs.items() if k in self._static_argnames}
        out_tree_box: list = []
        fname = self.__name__

        float0_in = [i for i, a in enumerate(avals) if a.dtype == _FLOAT0]
        in_layouts = _input_layouts(self, args, kwargs, dyn_idx, static_kw)
        laid_out: list = []

        def flat_fun(*flat_in: Any) -> list:
            if in_layouts is not None:  # what inspect_array_sharding reports for an argument inside the body
                for t, lay in zip(flat_in, in_layouts):
                    if lay is not None:
                        _input_layout[id(t)] = (t, lay)
                        laid_out.append(id(t))
            if float0_in:  # the function sees its float0 arguments as they are (zeros of no data)
                flat_in = list(flat_in)
                for i in float0_in:
                    flat_in[i] = np.zeros(avals[i].shape, _FLOAT0)
            dargs, dkw = tree_util.tree_unflatten(in_tree, flat_in)
            full = list(args)
            for i, a in zip(dyn_idx, dargs):
                full[i] = a
            def body() -> Any:
                fr = _kr.current()
                if fr is not None and fr.owner is self and fr.inputs is None:  # the key-reuse analysis
                    fr.set_inputs(_kr.key_leaves((dargs, dkw)))
                    res = self._fun(*full, **dkw, **static_kw)
                    fr.set_outputs(_kr.key_leaves(res))
                    return res
                return self._fun(*full, **dkw, **static_kw)

            if _ref_mod.created:  # a ref the body touches makes the caller thread it (refs.py)
                out, _ = _ref_mod.run_scoped(body, [], [], self._store, f"jit({fname})")
                _ref_mod.check_no_refs(out, "jit", fname)
            else:
                out = body()
            flat_out, out_tree = tree_util.tree_flatten(out)
            if any(_is_float0(o) for o in flat_out if _leaf_aval(o) is None):
                # float0 results (an integer input's gradient) come back as float0 zeros of their
                # shape; the program carries a bool placeholder, as JAX's does.
                out = tree_util.tree_map(lambda o: _Float0Result(o.shape) if _is_float0(o) else o, out)
                flat_out, out_tree = tree_util.tree_flatten(out)
            if any(type(o) is DimExpr for o in flat_out):  # a symbolic dimension returned: its value
                flat_out = [o.__jax_array__() if type(o) is DimExpr else o for o in flat_out]
            for o in flat_out:
                if _leaf_aval(o) is None:
                    if isinstance(o, (_ref_mod.Ref, _ref_mod.RefView)):  # JAX's error for a returned ref
                        _ref_mod.check_no_refs(out, "jit", fname)
                    if type(o) is int:  # a Python int the default integer type cannot hold
                        d = dtypes.python_scalar_dtype(o)
                        raise FtransOverflowError(
                            f"jit({fname}): the function returned the Python int {o}, which does not fit the "
                            f"default integer type {d.name}; return it as an array with an explicit dtype "
                            "(int64 needs jax_enable_x64) or as a float")
                    check_outputs(out, self._fun, "jit", ok=lambda x: _leaf_aval(x) is not None)
            out_tree_box.append(out_tree)
            return flat_out

        # The IR passes (DCE, ...) run here, so the call path, ``trace``/``lower`` and a
        # nested ``jit_call`` body all see the same optimised program.  While staging, the
        # passes that change values also rewrite each function ``grad``/``jvp`` differentiate
        # (``ad.rewritten_primal``), so the derivative is that of the program run.
        from ftrans.transforms.passes import primal_rewriter, run_pipeline

        rewriter = primal_rewriter(self._optimizations)
        st = _trace.state
        prev, st.primal_rewriter = st.primal_rewriter, rewriter
        try:
            closed, _ = stage(flat_fun, [ShapedArray(a.shape, np.dtype(np.bool_), False) if a.dtype == _FLOAT0
                                         else a for a in avals], boundary=True,
                              debug=lambda: (f"{fname} at {_definition_site(self._fun)}", "jit",
                                             _leaf_names(self, args, kwargs)))
        finally:
            st.primal_rewriter = prev
            for k in laid_out:
                _input_layout.pop(k, None)
        rewrites = list(rewriter.rewrites) if rewriter is not None else None
        if keep is not None:
            keep.append((closed, rewrites, out_tree_box[0]))
        return run_pipeline(closed, name=fname, optimizations=self._optimizations,
                            prior_rewrites=rewrites), out_tree_box[0]

    def _compile(self, args: tuple, kwargs: dict, statics: tuple, in_tree: Any, avals: list,
                 device: Any) -> _Entry:
        level = X.compile_log_level()
        logging_on = X.logger.isEnabledFor(level)
        closed, out_tree = self._trace(args, kwargs, avals, in_tree, statics)
        if logging_on:
            X.logger.log(level, "Compiling jit(%s) with global shapes and types %s, called at %s, for %s defined at %s",
                         self.__name__, "(" + "".join(f"{a!r}, " for a in avals).rstrip(" ") + ")", _call_site(),
                         self.__name__, _definition_site(self._fun))
        from ftrans.transforms.sharded_jit import constraint_meshes, sharded_consts

        if constraint_meshes(closed.jaxpr) or sharded_consts(closed.consts):
            self._spmd_always = True
            return None
        if self._out_shardings is not None:  # single-device shardings (or None) only: JAX checks their tree too
            from ftrans.transforms.sharded_jit import check_out_shardings

            check_out_shardings(self, out_tree)
        return self._entry_for(closed, out_tree, self._donate_mask(args, kwargs, len(avals)), device)

    def _entry_for(self, closed: ClosedJaxpr, out_tree: Any, donate_mask: tuple, device: Any) -> _Entry:
        """Lower and compile a traced program (the part of a miss that may run in a background thread)."""
        if pmap_in_program(closed):
            return _InterpretedEntry(closed, out_tree)
        program, kept = _prune_unused(closed, self._keep_unused)
        _warn_unusable_donations(program, _select(donate_mask, kept), self.__name__)
        exe = X.Executable(program, device, self.__name__, _select(donate_mask, kept), self._compiler_options)
        return _Entry(exe, out_tree, donate_mask if any(donate_mask) else (), closed, kept, self.__name__)

    # -- background compilation ---------------------------------------------------
    def _background_applies(self, leaves: list) -> bool:
        """Whether a miss may answer on the host interpreter while XLA compiles in the background.

        On when asked for (the jit option, else ``config.background_compilation``),
        never under ``config.deterministic``, with donated arguments, under a debug
        check, or when an argument lives on an accelerator (its data would have to
        come to the host, and the device would compute it faster).
        """
        on = self._background if self._background is not None else _config_mod.config.background_compilation
        if not on or _config_mod.config.deterministic or self._donate_argnums or self._donate_argnames:
            return False
        if not _trace.eager_everywhere:
            return False
        for leaf in leaves:
            t = type(leaf)
            if t is ShardedArray or (t is DeviceArray and leaf.device.platform != "cpu"):
                return False
        return True

    def _call_in_background(self, key: tuple, args: tuple, kwargs: dict, in_tree: Any, avals: list, device: Any,
                            leaves: list) -> Any:
        """A miss in background mode: trace here, compile in a thread, answer on the host meanwhile.

        The first call of a signature traces the function (in this thread: it is
        the user's Python) and starts the compile; it and every call of the same
        signature until the executable is cached evaluate the traced program with
        the primitives' NumPy rules (``_host_evaluate``). Returns ``_COMPILED``
        when the cached executable should answer instead: the compile finished,
        failed (the ordinary path then compiles again and reports the error), the
        program is a partitioned one, or a primitive in it has no host rule.
        """
        store = self._store
        with store.lock:
            job = store.background.get(key)
            first = job is None
            if first:
                job = store.background[key] = _BackgroundJob()
        if first:
            try:
                self.misses += 1
                closed, out_tree = self._trace(args, kwargs, avals, in_tree, key[2])
                from ftrans.transforms.sharded_jit import constraint_meshes

                if constraint_meshes(closed.jaxpr):
                    raise _NotInBackground
            except BaseException as e:
                self.misses -= 1
                with store.lock:
                    store.background.pop(key, None)
                job.traced.set()
                job.ready.set()
                if isinstance(e, _NotInBackground):
                    return _COMPILED
                raise
            job.closed, job.out_tree = closed, out_tree
            job.traced.set()
            # Not a daemon: the interpreter waits for it at exit instead of tearing XLA down mid-compile.
            threading.Thread(target=self._compile_in_background, args=(job, key, device),
                             name=f"ftrans-compile-{self.__name__}", daemon=False).start()
        else:
            job.traced.wait()
        if job.ready.is_set() or job.closed is None:
            return _COMPILED
        try:
            with _host_blas.limited():  # the compile thread gets a core of its own
                outs = _host_evaluate(job.closed, leaves, avals)
        except NotImplementedError:  # a primitive without a host rule: the executable answers
            job.answered.set()
            job.ready.wait()
            return _COMPILED
        job.answered.set()
        job.host_calls += 1
        stats["host_calls"] += 1
        return tree_util.tree_unflatten(job.out_tree, outs)

    def _compile_in_background(self, job: _BackgroundJob, key: tuple, device: Any) -> None:
        store = self._store
        # Lowering is Python and holds the GIL: let the first host answer finish first, unless it is slow.
        job.answered.wait(_FIRST_ANSWER_HEAD_START)
        try:
            entry = self._entry_for(job.closed, job.out_tree, (), device)
        except BaseException as e:  # noqa: BLE001  the next call compiles in the foreground and raises it
            job.error = e  # the job stays in ``background``, so later calls do not start another
        else:
            with store.lock:
                store.cache[key] = entry
                while len(store.cache) > self._max:
                    store.cache.popitem(last=False)
                    store.fast.clear()
                    store.tree_fast.clear()
                    store.spmd_fast.clear()
                store.background.pop(key, None)
            stats["background_compiles"] += 1
        finally:
            job.ready.set()

    # A refs twin program's donation (transforms/refs.py): (its per-leaf mask of the user's dynamic arguments,
    # the user's dynamic donate_argnums); None for every other jitted function.
    _twin_donation: tuple | None = None

    def _dynamic_donate_argnums(self) -> tuple:
        """``donate_argnums`` counted among the dynamic positional arguments (statics taken out)."""
        if self._twin_donation is not None:
            return self._twin_donation[1]
        statics = [i for i in self._static_argnums if i >= 0]
        return tuple(i - sum(s < i for s in statics) for i in sorted(set(self._donate_argnums)) if i >= 0)

    def _donate_mask(self, args: tuple, kwargs: dict, n: int) -> tuple:
        if not (self._donate_argnums or self._donate_argnames):
            return (False,) * n
        if self._twin_donation is not None:  # the user's leaves lead; the closed-over refs' values are kept
            mask = self._twin_donation[0]
            return mask + (False,) * (n - len(mask))
        mask = []
        static_pos = set(self._static_positions(len(args)))
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
        if self._compiler_options and any(issubclass(m.trace_type, _trace.DynamicJaxprTrace) for m in _trace.state.stack):
            raise FtransValueError(f"`compiler_options` can only be passed to top-level `jax.jit` (ftrans.jit): "
                                   f"jit({self.__name__}) is called inside an enclosing jit, whose compile they would "
                                   "not reach; pass them to the outer jit instead")
        closed, out_tree = self._trace(args, kwargs, avals, in_tree, statics)
        body, consts = hoist_consts(closed)
        # NumPy leaves enter with the canonical dtype their aval was traced with
        # (a float64 NumPy value is a float32 operand unless x64 is on).
        leaves = [x.astype(a.dtype) if isinstance(x, (np.ndarray, np.generic)) and x.dtype != a.dtype
                  and a.dtype != _FLOAT0 else x for x, a in zip(leaves, avals)]
        donated = (False,) * len(consts) + self._donate_mask(args, kwargs, len(leaves))
        if self._in_shardings is not None or self._out_shardings is not None:
            _check_same_mesh_size(self.__name__)
        if self._in_shardings is not None:  # the layouts asked for survive inside an enclosing program
            from ftrans.transforms import sharded_jit

            leaves = sharded_jit.constrain_inputs(self, args, kwargs, statics, leaves)
        ops = [*consts, *leaves]
        if _axis_env.frames:  # under vmap(axis_name=...): a body reading the axis is batched even if no operand is
            ops = to_axis_owner([body], ops)
        outs = jit_call_p.bind(*ops, jaxpr=body, name=self.__name__, donated_invars=donated)
        if self._out_shardings is not None:
            from ftrans.transforms import sharded_jit

            outs = sharded_jit.constrain_outputs(self, out_tree, outs)
        return tree_util.tree_unflatten(out_tree, outs)

    # -- ahead-of-time API ------------------------------------------------------
    @_tb.api_boundary
    def trace(self, *args: Any, **kwargs: Any) -> Traced:
        from ftrans.transforms import refs as _refs

        if any(_refs.is_ref_type(x) for x in tree_util.tree_leaves((args, kwargs))):  # ref types: placeholders
            args, kwargs = _refs.placeholder_refs(args, kwargs)
        if _ref_mod.created:  # refs exist: a function taking or closing over refs traces its twin (refs.py)
            from ftrans.transforms import refs

            return refs.jit_trace(self, args, kwargs, lambda: self._trace_plain(args, kwargs))
        return self._trace_plain(args, kwargs)

    def _trace_plain(self, args: tuple, kwargs: dict) -> Traced:
        dargs, dkw, statics = self._split(args, kwargs)
        leaves, in_tree = tree_util.tree_flatten((dargs, dkw))
        avals = []
        for leaf in leaves:
            a = _leaf_aval(leaf)
            if a is None:
                raise _bad_leaf_error(self.__name__, dargs, dkw, leaf, self, (args, kwargs))
            avals.append(a)
        if _has_keys(in_tree) and _trace.is_eager():  # typed key arrays enter as key-typed values, as in a call
            avals = _typed_key_avals(in_tree, leaves, avals)
        closed, out_tree = self._trace(args, kwargs, avals, in_tree, statics)
        t = Traced(self, closed, out_tree, self._donate_mask(args, kwargs, len(avals)),
                   self._target_device(leaves), self._keep_unused, in_tree)
        t._call = (args, kwargs, leaves)
        try:
            t._names = _leaf_names(self, args, kwargs)
        except (TypeError, ValueError, AttributeError, KeyError):  # names only label error messages
            pass
        return t

    @_tb.api_boundary
    def lower(self, *args: Any, **kwargs: Any) -> Any:
        dargs, dkw, statics = self._split(args, kwargs)
        leaves, in_tree = tree_util.tree_flatten((dargs, dkw))
        from ftrans.transforms import sharded_jit

        traced = None
        if _ref_mod.created and any(isinstance(x, _ref_mod.Ref) for x in leaves) or any(
                type(x) is _ref_mod.AbstractRef or getattr(x, "is_ref", False) is True for x in leaves):
            return self.trace(*args, **kwargs).lower()
        if _ref_mod.created and not _lowering_traced.active and not hasattr(self, "_ref_owner"):
            # refs exist: a body closing over some lowers as its twin program (whose ``lower`` partitions as
            # this one would), found by tracing first
            return self.trace(*args, **kwargs).lower()
        if not sharded_jit.needs_spmd(self, leaves):
            traced = self.trace(*args, **kwargs)
            if sharded_jit.constraint_meshes(traced.jaxpr.jaxpr):
                self._spmd_always = True
        if self._spmd_always or traced is None:
            avals = []
            for leaf in leaves:
                a = _leaf_aval(leaf)
                if a is None:
                    raise _bad_leaf_error(self.__name__, dargs, dkw, leaf)
                avals.append(a)
            return sharded_jit.lower_sharded(self, dargs, dkw, args, kwargs, leaves, avals, in_tree)
        return traced.lower()

    @_tb.api_boundary
    def eval_shape(self, *args: Any, **kwargs: Any) -> Any:
        """The outputs' shapes and dtypes (``ShapeDtypeStruct``s) without running the function; each carries
        its ``out_shardings`` entry as ``.sharding`` when the function was given them, as in JAX."""
        t = self.trace(*args, **kwargs)
        avals = t.jaxpr.out_avals
        shardings: list = [None] * len(avals)
        if self._out_shardings is not None:
            from ftrans.transforms.sharded_jit import _flatten_prefix

            dummy = tree_util.tree_unflatten(t.out_tree, [0] * len(avals))
            shardings = _flatten_prefix(self._out_shardings, dummy, len(avals), "out_shardings", self.__name__,
                                        as_given=True)
        shapes = [ShapeDtypeStruct(a.shape, a.dtype, weak_type=a.weak_type, sharding=out_struct_sharding(a, s))
                  for a, s in zip(avals, shardings)]
        return tree_util.tree_unflatten(t.out_tree, shapes)

    def _cache_size(self) -> int:
        return len(self._cache)

    def clear_cache(self) -> None:
        """Drop this function's compiled programs (shared by every ``jit`` of it with the same options)."""
        with self._lock:
            self._cache.clear()
            self._fast.clear()
            self._tree_fast.clear()
            self._store.spmd_fast.clear()
            self._spmd_cache.clear()
            self._store.traced.clear()
            _key_reuse_sigs.pop(self, None)
        _release_queued_writes()

    _clear_cache = clear_cache

    def cache_info(self) -> dict:
        """Calls answered from this function's executable cache (``hits``, the fast paths and jaxlib's
        C++ dispatcher included), calls that traced and compiled (``misses``), and the cache's size.
        """
        return {"hits": self.hits, "misses": self.misses, "size": len(self._cache), "max_size": self._max}

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        if obj is None:
            return self
        return functools.partial(self, obj)

    def __repr__(self) -> str:
        return _jitted_repr(self)

    # copy.copy / copy.deepcopy give a new jitted function of the same function and
    # options with its own (empty) cache, as JAX's do; pickling works when the function
    # pickles (JAX's jitted functions do not pickle at all).
    def __reduce__(self) -> tuple:
        return (JitWrapped, (self._fun, *self._options))

    def __getstate__(self) -> dict:
        # JAX's jitted functions describe themselves this way (pickling and copying use __reduce__).
        return {"function_name": self.__name__, "fun": self._fun, "static_argnums": self._static_argnums,
                "static_argnames": self._static_argnames}

    def __copy__(self) -> JitWrapped:
        return JitWrapped(self._fun, *self._options)

    def __deepcopy__(self, memo: dict) -> JitWrapped:
        return JitWrapped(self._fun, *self._options)


def _jitted_repr(jitted: JitWrapped) -> str:
    """JAX's spelling: the wrapped function's own repr, and a bare one when that fails or is gone."""
    try:
        return f"<PjitFunction of {jitted.__dict__['__wrapped__']!r}>"
    except Exception:  # noqa: BLE001 - a user __repr__ may raise anything; repr must not
        return "<PjitFunction>"


def out_info(out_tree: Any, avals: Sequence[Any], shardings: Sequence[Any] | None = None) -> Any:
    """JAX's ``out_info`` of a staged, lowered or compiled program: its outputs as ``ShapeDtypeStruct``s
    in the output tree, each with its sharding where one is known (a compiled program's), else None."""
    shardings = shardings if shardings is not None else [None] * len(avals)
    return tree_util.tree_unflatten(out_tree, [ShapeDtypeStruct(a.shape, a.dtype, weak_type=a.weak_type,
                                                                sharding=out_struct_sharding(a, sh))
                                               for a, sh in zip(avals, shardings)])


class _LoweringTraced(threading.local):
    active = False


_lowering_traced = _LoweringTraced()


class Traced:
    """``jit(f).trace(*args)``: the staged program, before lowering."""

    _call: Any = None  # (args, kwargs, flat dynamic leaves) it was traced with

    def __init__(self, owner: JitWrapped, closed: ClosedJaxpr, out_tree: Any, donate_mask: tuple, device: Any,
                 keep_unused: bool = True, in_tree: Any = None):
        self._owner = owner
        self._in_tree = in_tree
        self._names: list | None = None  # each dynamic leaf as the user wrote it (``x``, ``params['w']``)
        self.jaxpr = closed
        self.out_tree = out_tree
        self._donate = donate_mask
        self._device = device
        # What is lowered and compiled: ``jaxpr`` less the arguments it never reads (keep_unused=False).
        self._program, self._kept = _prune_unused(closed, keep_unused)

    @property
    def args_info(self) -> Any:
        """``(args, kwargs)`` of the dynamic arguments, each leaf an ``ArgInfo`` (its abstract value and
        whether it is donated), as JAX's ``Traced.args_info``."""
        avals = self.jaxpr.in_avals
        donate = self._donate or (False,) * len(avals)
        return tree_util.tree_unflatten(self._in_tree, [ArgInfo(a, bool(d)) for a, d in zip(avals, donate)])

    @property
    def in_avals(self) -> Any:
        """``(args, kwargs)`` with each array leaf's abstract value, as JAX's."""
        return tree_util.tree_unflatten(self._in_tree, self.jaxpr.in_avals)

    @property
    def out_info(self) -> Any:
        """The outputs as ``ShapeDtypeStruct``s in their pytree, as JAX's ``Traced.out_info``."""
        return out_info(self.out_tree, self.jaxpr.out_avals)

    def lower(self, *, lowering_platforms: Sequence[str] | None = None) -> Lowered:
        """The StableHLO module, for the device the arguments live on or for ``lowering_platforms``.

        ``lowering_platforms=("cuda",)`` (or ``"rocm"``, ``"cpu"``; ``"gpu"`` names the GPU
        platform present) lowers for that platform whatever this machine has, as JAX's
        ``Traced.lower`` does: the module can be read (``as_text``) but compiles only for a
        device of that platform.
        """
        from ftrans.lowering.lower import lower_jaxpr, result_info_attrs

        call = self._call
        if lowering_platforms is not None and not _lowering_traced.active:
            # only an AbstractMesh names the program's partitions: lowered for that many, devices given later
            from ftrans.transforms import sharded_jit

            amesh = sharded_jit.abstract_lowering_mesh(self)
            if amesh is not None:
                return sharded_jit.lower_abstract(self, amesh, _lowering_platform(self._owner.__name__,
                                                                                  lowering_platforms))
        if call is not None and lowering_platforms is None and not _lowering_traced.active:
            # a partitioned program (sharded arguments, or constraints over a mesh): lowered as the jitted
            # function's ``lower`` lowers it
            from ftrans.transforms import sharded_jit

            owner = self._owner
            if owner._spmd_always or sharded_jit.needs_spmd(owner, call[2]) or sharded_jit.constraint_meshes(
                    self.jaxpr.jaxpr):
                _lowering_traced.active = True
                try:
                    return owner.lower(*call[0], **call[1])
                finally:
                    _lowering_traced.active = False
        for c in self.jaxpr.consts:
            if isinstance(c, ShapeDtypeStruct):
                raise shape_only_constant_error(c)
        if lowering_platforms is None:
            platform = compat.lowering_platform(self._device)
        else:
            platform = _lowering_platform(self._owner.__name__, lowering_platforms)
        program = self._program
        donate = _select(self._donate, self._kept)
        _warn_unusable_donations(program, donate, self._owner.__name__)
        n_consts = len(program.jaxpr.constvars)
        donated = (False,) * n_consts + tuple(donate) if any(donate) else ()
        # The module's locations end with the user's frames that lowered it (JAX's outer traceback);
        # only here: a program compiled on call keeps a text that is the same wherever it is called from.
        # (as JAX's: the module is ``jit_<name>`` and each result says where it sits in the output)
        outs = program.jaxpr.outvars
        infos = result_info_attrs(self.out_tree, [v.aval for v in outs]) \
            if getattr(self.out_tree, "num_leaves", -1) == len(outs) else ()
        names = self._names if self._names is not None and len(self._names) == len(self.jaxpr.jaxpr.invars) else ()
        text = lower_jaxpr(program.jaxpr, self._owner.__name__, donated_args=donated, platform=platform,
                           outer_frames=_trace.user_callers(sys._getframe()),
                           module_name=_module_name(self._owner.__name__), result_attrs=infos,
                           arg_names=_select(names, self._kept))
        return Lowered(self, text, platform)


_LOWERING_PLATFORMS = ("cpu", "cuda", "rocm", "tpu")


def _module_name(fname: str) -> str:
    """The lowered module's name, as JAX's: ``jit(f)`` with every character but letters, digits, ``_``, ``.``
    and ``-`` made ``_``, less trailing ``_`` (``jit_f``, ``jit__lambda``)."""
    return "".join(c if c.isalnum() or c in "_.-" else "_" for c in f"jit({fname})").rstrip("_")


def _lowering_platform(fname: str, platforms: Any) -> str:
    """The one platform ``Traced.lower(lowering_platforms=...)`` names, checked."""
    if isinstance(platforms, str) or not isinstance(platforms, Sequence):
        raise FtransTypeError(
            f"jit({fname}).trace(...).lower: lowering_platforms must be a tuple of platform names such as "
            f"('cuda',), got {platforms!r}")
    if len(platforms) != 1:
        raise FtransValueError(
            f"jit({fname}).trace(...).lower: lowering_platforms={tuple(platforms)!r}: ftrans lowers for one "
            "platform at a time; lower once per platform (JAX's multi-platform modules are not supported)")
    name = platforms[0]
    plat = compat.canonical_platform(name) if isinstance(name, str) else None
    if plat is None and isinstance(name, str) and name.lower() == "gpu":
        raise FtransValueError(
            f"jit({fname}).trace(...).lower: lowering_platforms=('gpu',) needs a GPU to say whether it is "
            "CUDA or ROCm, and none is present; name the platform: ('cuda',) or ('rocm',)")
    if plat not in _LOWERING_PLATFORMS:
        raise FtransValueError(
            f"jit({fname}).trace(...).lower: unknown platform {name!r} in lowering_platforms; use one of "
            f"{', '.join(repr(p) for p in _LOWERING_PLATFORMS)} or 'gpu'")
    return plat


class ArgInfo:
    """One argument leaf of a traced/lowered ``jit``: its abstract value and whether it is donated
    (JAX's ``jax.stages.ArgInfo``)."""

    __slots__ = ("_aval", "donated")

    def __init__(self, aval: Any, donated: bool):
        self._aval = aval
        self.donated = donated

    @property
    def shape(self) -> tuple:
        return self._aval.shape

    @property
    def dtype(self) -> Any:
        return self._aval.dtype

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ArgInfo) and (self._aval, self.donated) == (other._aval, other.donated)

    def __hash__(self) -> int:
        return hash((self._aval, self.donated))

    def __repr__(self) -> str:
        return f"ArgInfo(_aval={self._aval!r}, donated={self.donated})"


class LoweredText:
    """``as_text`` and ``compiler_ir`` of a lowered program held as StableHLO text (``self._text``):
    ``jit``'s ``Lowered``, the partitioned one, ``pmap``'s."""

    _text: str
    _no_kwargs = False  # keyword arguments are part of the lowered signature, as in JAX (its attribute)

    def as_text(self, dialect: str | None = None, *, debug_info: bool = False) -> str:
        """The StableHLO module (``dialect="hlo"``: the XLA HLO it converts to). Every StableHLO op carries
        its location, ``loc("jit(f)/scope/prim"("file":line:0))`` (the ``named_scope`` names and the
        user's line), whatever ``debug_info`` says (JAX shows them only with ``debug_info=True``)."""
        if dialect == "hlo":
            return compat.hlo_text(self._text, debug_info)
        if dialect not in (None, "stablehlo"):
            raise FtransValueError(f"Lowered.as_text: unknown dialect {dialect!r}; use 'stablehlo' or 'hlo'")
        return compat.pretty_module_text(self._text, debug_info)

    def compiler_ir(self, dialect: str | None = None) -> Any:
        """JAX's ``Lowered.compiler_ir``: the program as the compiler's objects, for inspection: an MLIR
        module (``dialect`` None or ``"stablehlo"``) or an XLA computation (``"hlo"``; ``.as_hlo_text()``)."""
        if dialect in (None, "stablehlo"):
            return compat.parsed_module(self._text)
        if dialect == "hlo":
            return compat.xla_computation(self._text)
        raise FtransValueError(f"Lowered.compiler_ir: unknown dialect {dialect!r}; use 'stablehlo' or 'hlo'")


class Lowered(LoweredText):
    """``jit(f).lower(*args)``: the StableHLO module; ``compile()`` builds the executable."""

    def __init__(self, traced: Traced, text: str, platform: str = "cpu"):
        self._traced = traced
        self._text = text
        self._platform = platform

    @property
    def optimization_report(self) -> Any:
        """What the IR passes did to this program (``ftrans.transforms.passes.PassReport``)."""
        from ftrans.transforms.passes import report_for

        return report_for(self._traced.jaxpr)

    def cost_analysis(self) -> Any:
        """XLA's estimate of the program's cost before optimisation (flops, bytes accessed), as JAX's;
        ``compile().cost_analysis()`` estimates the optimised program."""
        return compat.hlo_cost_analysis(self._traced._device.client, self._text)

    @property
    def args_info(self) -> Any:
        """``(args, kwargs)`` of the dynamic arguments, each leaf an ``ArgInfo`` (see ``Traced.args_info``)."""
        return self._traced.args_info

    @property
    def donate_argnums(self) -> tuple:
        """The donated positions among the dynamic (non-static) positional arguments, as JAX's."""
        return self._traced._owner._dynamic_donate_argnums()

    def compile(self, compiler_options: dict | None = None) -> Compiled:
        """The executable. ``compiler_options`` (XLA option names to values) add to, and override, the
        ones given to ``jit``."""
        t = self._traced
        options = t._owner._compiler_options
        if compiler_options is not None:
            options = tuple(sorted({**dict(options), **dict(_compiler_options(compiler_options))}.items()))
        target = compat.lowering_platform(t._device)
        if target != self._platform:
            raise FtransValueError(
                f"jit({t._owner.__name__}): this module was lowered for {self._platform} "
                f"(lowering_platforms=('{self._platform}',)) but would compile for {t._device} ({target}); "
                f"lower it again without lowering_platforms to run it here, or compile it on a {self._platform} "
                "device")
        exe = X.Executable(t._program, t._device, t._owner.__name__, _select(t._donate, t._kept),
                           options, text=self._text)  # the module is not lowered twice
        out = Compiled(exe, t.out_tree, t.jaxpr, t._kept, t._in_tree, t._names)
        out.donate_argnums = self.donate_argnums
        out._args_info = t.args_info
        return out

    @property
    def in_tree(self) -> Any:
        """The pytree structure of ``(args, kwargs)`` (static arguments left out), as JAX's."""
        return tree_util.user_treedef(self._traced._in_tree)

    @property
    def in_avals(self) -> Any:
        """``(args, kwargs)`` with each array leaf's abstract value, as JAX's."""
        return tree_util.tree_unflatten(self._traced._in_tree, self._traced.jaxpr.in_avals)

    @property
    def out_info(self) -> Any:
        """The outputs as ``ShapeDtypeStruct``s (no sharding before compiling), as JAX's."""
        return out_info(self._traced.out_tree, self._traced.jaxpr.out_avals)


def _warn_unusable_donations(closed: ClosedJaxpr, donate_mask: tuple, fname: str) -> None:
    """JAX's warning for donated arguments no output can reuse. A donated (and kept: read by the
    program) argument is taken over by an output of the same shape and dtype, else by one of the same
    size in bytes (each output by one argument, in order); the rest are wasted."""
    if not donate_mask or not any(donate_mask):
        return
    outs = [(a.shape, a.dtype) for a in closed.out_avals]
    donated = [(a.shape, a.dtype) for a, d in zip(closed.in_avals, donate_mask) if d]
    left = []
    for k in donated:
        if k in outs:
            outs.remove(k)
        else:
            left.append(k)
    sizes = [int(np.prod(sh)) * dt.itemsize for sh, dt in outs]
    unusable = []
    for sh, dt in left:
        n = int(np.prod(sh)) * dt.itemsize
        if n in sizes:
            sizes.remove(n)
        else:
            unusable.append(f"{dt.name}[{','.join(map(str, sh))}]")
    if not unusable:
        return
    msg = (f"jit({fname}): Some donated buffers were not usable: {', '.join(unusable)}. No output of the same "
           "shape and dtype is left to take over their memory, so donating them saves nothing (those arguments "
           "stay alive); donate only arguments an output can replace")
    f = user_frame()
    if f is None:
        warnings.warn(msg, UserWarning, stacklevel=user_stacklevel())
    else:
        warnings.warn_explicit(msg, UserWarning, f.f_code.co_filename, f.f_lineno,
                               module=f.f_globals.get("__name__"), registry=f.f_globals.setdefault(
                                   "__warningregistry__", {}))


def _no_execution_error(name: str) -> FtransRuntimeError:
    return FtransRuntimeError(
        f"ftrans tried to execute function jit({name}), but the no_execution config option is set "
        "(ftrans.no_execution()); leave the no_execution block to run it")


def _tree_text(tree: Any) -> str:
    """``(args, kwargs)`` treedef as the structure with ``*`` for leaves, e.g. ``((*, [*]), {})``."""
    try:
        return str(tree_util.tree_unflatten(tree, ["*"] * tree.num_leaves)).replace("'*'", "*")
    except (AttributeError, TypeError):  # a node that cannot stand over a placeholder (a typed key array)
        return str(tree)


def check_not_traced(leaves: list) -> None:
    """A ``Compiled`` program takes concrete arrays only: called under a transform or a trace, say so."""
    traced = next((x for x in leaves if isinstance(x, Tracer)), None)
    if traced is not None or not _trace.is_eager():
        what = f"a {type(traced).__name__} ({traced.aval.str_short()})" if traced is not None else "a trace"
        raise FtransTypeError(
            "Compiled: Cannot apply JAX transformations to a function lowered and compiled for a particular "
            f"signature. Detected argument of Tracer type {what}: a program lowered and compiled for fixed "
            "argument types cannot be transformed or staged (vmap, grad, jit, ...). Transform the function "
            "itself, and jit or lower that (jit(vmap(f)), or vmap(jit(f)))")


def _long_type(a: Any) -> str:
    """A type as JAX's argument-mismatch messages show it: ``int32[8,2]``."""
    return f"{a.dtype.name}[{','.join(map(str, a.shape))}]"


def argument_mismatch_error(what: str, errors: list) -> FtransValueError:
    """JAX's error for committed arguments a compiled program would have to move (``what``: "layouts" or
    "shardings"), listing at most five of the ``errors`` (one text per argument)."""
    n = len(errors)
    which = f"the {n} mismatches" if n < 5 else f"5 mismatches out of {n}"
    return FtransValueError(
        f"Computation was compiled for input {what} that disagree with the {what} of arguments passed to "
        f"it. Here are {which}:\n" + "\n".join(errors[:5]))


def check_laid_layouts(leaves: list, layouts: Any, names: Any) -> None:
    """A committed argument put in another layout than a compiled program takes (``device_put`` with a
    ``Format``, or an output of a program compiled for one): JAX's ValueError, as for shardings (a compiled
    program moves no committed argument; docs/notebooks/layout). ``layouts`` None: XLA's default ones."""
    errors = []
    for k, x in enumerate(leaves):
        have = getattr(x, "__dict__", None)
        have = have.get("_laid_layout") if have else None
        if have is None or not getattr(x, "committed", False):
            continue
        lay = layouts[k] if layouts is not None and k < len(layouts) else None
        want = default_layout(len(x.shape)) if lay is None else lay
        if tuple(have.major_to_minor) != tuple(want.major_to_minor):
            name = names[k] if names is not None and k < len(names) else f"args[{k}]"
            errors.append(f"Argument {name} with shape {_long_type(x.aval)}:\n  Passed layout: {have}\n"
                          f"  Required layout: {want}")
    if errors:
        raise argument_mismatch_error("layouts", errors)


class Compiled:
    """A compiled executable for fixed argument types; call it with arguments of those types."""

    donate_argnums: tuple = ()  # set by Lowered.compile
    _no_kwargs = False  # keyword arguments are part of the compiled signature, as in JAX (its attribute)

    def __init__(self, exe: X.Executable, out_tree: Any, closed: ClosedJaxpr, kept: tuple | None = None,
                 in_tree: Any = None, names: list | None = None):
        self._exe = exe
        self._in_tree = in_tree  # (dynamic args, kwargs) as lowered
        self._out_tree = out_tree
        self._closed = closed
        self._kept = kept
        self._names = names
        self._args_info: Any = None  # set by Lowered.compile (which knows the donations)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        try:  # an API boundary (traceback_util), free until an exception leaves
            leaves = self._checked_leaves(args, kwargs, self._closed.in_avals)
            check_laid_layouts(leaves, None, self._names)
            if _call_guard and _config_mod.config.no_execution:
                raise _no_execution_error(self._exe.name)
            exe = self._exe
            given = _select(leaves, self._kept)
            if not exe.donated:
                return tree_util.tree_unflatten(self._out_tree, exe(*given))
            # Donated arguments go as jit's call gives them: a buffer the program took over is gone after the call.
            _check_donation(given, exe.donated, exe.name)
            bufs = [X.to_buffer(a, exe.device) for a in given]
            outs = exe.run(bufs)
            _forget_donated(given, exe.donated, bufs)
            return tree_util.tree_unflatten(self._out_tree, exe.wrap(outs))
        except Exception as e:
            _tb.reraise_filtered(e)
            raise

    def _checked_leaves(self, args: tuple, kwargs: dict, want: list) -> list:
        """The call's array leaves, once their pytree and types are the ones compiled for (else a TypeError)."""
        leaves, tree = tree_util.tree_flatten((args, kwargs))
        check_not_traced(leaves)
        if self._in_tree is not None and tree != self._in_tree:
            raise FtransTypeError(
                "Compiled: the arguments' pytree structure does not match the one it was lowered with "
                f"(Function compiled with input pytree does not match the input pytree it was called with): "
                f"lowered for {_tree_text(self._in_tree)}, called with {_tree_text(tree)}. Call it with "
                "the same structure (static arguments left out), or lower again")
        got = [_leaf_aval(x) for x in leaves]

        def differ() -> bool:
            return len(got) != len(want) or any(g is None or (g.shape, g.dtype) != (w.shape, w.dtype)
                                                for g, w in zip(got, want))

        if differ() and _has_keys(tree):  # a typed key array's data leaf is checked as the key array it stands for
            got = _typed_key_avals(tree, leaves, got)
        if differ():
            raise self._type_error(leaves, got, want)
        return leaves

    def _type_error(self, leaves: list, got: list, want: list) -> FtransTypeError:
        """Which arguments differ from the types compiled for, each named as the user wrote it."""
        names = self._names if self._names is not None and len(self._names) == len(want) else None
        if names is None:
            names = [f"Argument {k}" for k in range(len(want))]
        else:
            names = [f"Argument {n!r}" for n in names]
        lines = []
        for name, g, w, x in zip(names, got, want, leaves):
            if g is None:
                lines.append(f"{name} compiled with {_long_type(w)} and called with a {type(x).__name__}, "
                             "which is not an array")
            elif (g.shape, g.dtype) != (w.shape, w.dtype):
                lines.append(f"{name} compiled with {_long_type(w)} and called with {_long_type(g)}")
        if len(got) != len(want):
            lines.append(f"Called with {len(got)} array arguments, compiled for {len(want)}")
        # JAX's words (what users match on): "Argument types differ ... The mismatches are:\nArgument 'x' ..."
        return FtransTypeError(
            "Compiled: Argument types differ from the types for which this computation was compiled. The "
            "mismatches are:\n" + "\n".join(lines)
            + "\nCall it with arguments of the compiled shapes and dtypes (convert them with .astype), or lower "
            "and compile again for the new types")

    def as_text(self) -> str:
        """The program XLA compiled (optimised HLO: fusions, layouts, copies), as JAX's
        ``Compiled.as_text``; ``Lowered.as_text`` is the StableHLO handed to XLA."""
        try:
            return self._exe.xla.hlo_modules()[0].to_string()
        except Exception:  # noqa: BLE001 - an executable that cannot show its HLO shows its input
            return self._exe.text

    @property
    def in_tree(self) -> Any:
        """The pytree structure of ``(args, kwargs)`` it takes (static arguments left out), as JAX's."""
        return tree_util.user_treedef(self._in_tree)

    @property
    def out_tree(self) -> Any:
        """The pytree structure of its results, as JAX's ``Compiled.out_tree``."""
        return tree_util.user_treedef(self._out_tree)

    @property
    def in_avals(self) -> Any:
        """``(args, kwargs)`` with each array leaf's abstract value, as JAX's."""
        return tree_util.tree_unflatten(self._in_tree, self._closed.in_avals)

    @property
    def args_info(self) -> Any:
        """``(args, kwargs)`` of the dynamic arguments (unused ones included), each leaf an ``ArgInfo`` with
        its abstract value and whether it is donated, as JAX's ``Compiled.args_info``."""
        info = self._args_info
        if info is None:  # built directly rather than by Lowered.compile: nothing is donated
            info = tree_util.tree_unflatten(self._in_tree, [ArgInfo(a, False) for a in self._closed.in_avals])
        return info

    @property
    def executable(self) -> Any:
        return self._exe.xla

    def _sharding(self) -> Any:
        from ftrans.core.sharding import SingleDeviceSharding

        return SingleDeviceSharding(self._exe.device)

    @property
    def input_shardings(self) -> Any:
        """``(args, kwargs)`` with each array argument's sharding (arguments the program does not read
        included), as JAX's: one device's."""
        s = self._sharding()
        return tree_util.tree_unflatten(self._in_tree, [s] * len(self._closed.in_avals))

    @property
    def output_shardings(self) -> Any:
        """The outputs' shardings in their pytree, as JAX's."""
        s = self._sharding()
        return tree_util.tree_unflatten(self._out_tree, [s] * len(self._closed.out_avals))

    @property
    def input_formats(self) -> Any:
        """``(args, kwargs)`` with each array argument's ``Format`` (its layout, always XLA's default
        row-major one in ftrans, and its sharding; an argument ``keep_unused=False`` dropped has neither),
        as JAX's."""
        s, kept = self._sharding(), self._kept
        return tree_util.tree_unflatten(self._in_tree, [
            Format(default_layout(len(a.shape)), s) if kept is None or i in kept else Format(None, None)
            for i, a in enumerate(self._closed.in_avals)])  # an argument pruned away has none, as in JAX

    @property
    def output_formats(self) -> Any:
        """The outputs' ``Format``s (default layout and sharding) in their pytree, as JAX's."""
        s = self._sharding()
        return tree_util.tree_unflatten(self._out_tree, [Format(default_layout(len(a.shape)), s)
                                                         for a in self._closed.out_avals])

    @property
    def out_info(self) -> Any:
        """The outputs as ``ShapeDtypeStruct``s with their shardings, as JAX's ``Compiled.out_info``."""
        avals = self._closed.out_avals
        return out_info(self._out_tree, avals, [self._sharding()] * len(avals))

    def runtime_executable(self) -> Any:
        """The loaded XLA executable the PJRT runtime runs (JAX's ``Compiled.runtime_executable``)."""
        return self._exe.xla

    def cost_analysis(self) -> Any:
        return compat.executable_cost_analysis(self._exe.xla)

    def memory_analysis(self) -> Any:
        """XLA's sizes of the compiled program's buffers (arguments, outputs, temporaries), as in JAX."""
        return self._exe.xla.get_compiled_memory_stats()


# ----------------------------------------------------------------------------
# Argument-number bookkeeping


def _signature(fun: Callable) -> inspect.Signature | None:
    try:
        return inspect.signature(fun)
    except (TypeError, ValueError):
        return None


def _check_jittable(fun: Any) -> None:
    """What ``jit`` refuses to wrap, as JAX does: a ``staticmethod``/``classmethod`` object (decorate
    the plain function, then apply ``staticmethod``), anything not callable, a generator function."""
    if isinstance(fun, (staticmethod, classmethod)):
        kind = type(fun).__name__
        raise FtransTypeError(
            f"jit: {kind} arguments are not supported (Expected a callable value, got a {kind} object "
            f"wrapping {getattr(fun.__func__, '__qualname__', fun.__func__)!r}); put @{kind} above @jit so "
            f"jit wraps the plain function")
    if not callable(fun):
        raise FtransTypeError(f"jit: expected a function (Expected a callable value), got {type(fun).__name__}")
    if inspect.isgeneratorfunction(fun):
        raise FtransTypeError(
            f"jit: Expected a function, got a generator function {getattr(fun, '__qualname__', fun)!r}; jit "
            "traces a function once and a generator's body runs only when iterated. Return the values "
            "(a list or a stacked array) instead of yielding them")


def _check_argnames(sig: inspect.Signature, names: tuple, what: str, fname: str) -> None:
    """JAX's rule for ``static_argnames``/``donate_argnames``: a name must be a parameter that can be
    passed by keyword (any name, with ``**kwargs``); positional-only and ``*args`` names never can."""
    params = sig.parameters
    never = [nm for nm in names if nm in params
             and params[nm].kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.VAR_POSITIONAL)]
    if never:
        raise FtransValueError(
            f"jit({fname}): {what} {never} name positional-only (or *args) parameters of {fname}, which a call "
            f"cannot pass by keyword; use {what.replace('names', 'nums')} for them")
    if any(p.kind == inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return
    unknown = [nm for nm in names if nm not in params or params[nm].kind == inspect.Parameter.VAR_KEYWORD]
    if unknown:
        raise FtransValueError(
            f"jit({fname}): {what} {unknown}: not a parameter of {fname} (which takes "
            f"{', '.join(params) or 'no parameters'})")


def _as_tuple(x: Any, what: str, fname: str) -> tuple:
    if x is None:
        return ()
    if isinstance(x, (int, str)):
        return (x,)
    if isinstance(x, Iterable):
        return tuple(x)
    raise FtransTypeError(f"jit({fname}): {what} must be an int/str or a sequence of them, got {x!r}")


def _resolve_statics(sig: inspect.Signature | None, nums: Any, names: Any, fname: str) -> tuple:
    nums0, names0 = nums, names
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
            # With *args, a negative position past the named parameters counts from the
            # end of each call's arguments (resolved per call, as in JAX).
            norm.append(j if j >= 0 else i)
        nums = tuple(norm)
        # Like JAX: a static parameter may be named by position or name; given one of
        # static_argnums/static_argnames, the other is filled in. Given both, each is taken as
        # it is (a parameter static by position only is dynamic when passed by keyword).
        if nums0 is None or names0 is None:
            by_name = {p.name: k for k, p in enumerate(positional)}
            names = tuple(dict.fromkeys(names + tuple(positional[i].name for i in nums if 0 <= i < n)))
            nums = tuple(sorted(set(nums) | {by_name[nm] for nm in names if nm in by_name}))
        _check_argnames(sig, tuple(_as_tuple(names0, "static_argnames", fname)), "static_argnames", fname)
    return tuple(sorted(set(nums))), frozenset(names)


def _resolve_donation(sig: inspect.Signature | None, nums: Any, names: Any, static_nums: tuple,
                      fname: str, static_names: frozenset = frozenset()) -> tuple:
    infer = nums is None or names is None  # given both, neither is filled in from the other (as JAX)
    nums = tuple(int(i) for i in _as_tuple(nums, "donate_argnums", fname))
    names = tuple(_as_tuple(names, "donate_argnames", fname))
    if sig is not None:
        _check_argnames(sig, names, "donate_argnames", fname)
        positional = [p for p in sig.parameters.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        n = len(positional)
        if not any(p.kind == p.VAR_POSITIONAL for p in sig.parameters.values()):
            bad = [i for i in nums if not -n <= i < n]
            if bad:
                raise FtransValueError(
                    f"jit({fname}): donate_argnums {bad} out of range for a function with {n} positional "
                    "parameter(s)")
        if infer:
            by_name = {p.name: k for k, p in enumerate(positional)}
            nums = tuple(sorted(set(nums) | {by_name[nm] for nm in names if nm in by_name}))
            names = tuple(dict.fromkeys(names + tuple(positional[i].name for i in nums if 0 <= i < n)))
    both = sorted(set(names) & set(static_names))
    if both:
        raise FtransValueError(
            f"jit({fname}): static_argnames and donate_argnames cannot intersect: {both} cannot be both static "
            "and donated (a static argument is a Python value keying the cache, a donated one a buffer)")
    overlap = set(nums) & set(static_nums)
    if overlap:
        raise FtransValueError(f"jit({fname}): arguments {sorted(overlap)} cannot be both static and donated")
    return nums, frozenset(names)


def _hashable(v: Any, what: str, fname: str) -> Any:
    try:
        hash(v)
    except TypeError:
        raise FtransValueError(
            f"jit({fname}): Non-hashable static arguments are not supported: static {what} of type "
            f"{type(v).__name__} is not hashable; static arguments key "
            "the compilation cache, so pass a hashable value (a tuple instead of a list, say) or make the "
            "argument dynamic"
        ) from None
    if isinstance(v, (Array, Tracer, np.ndarray)):
        raise FtransValueError(f"jit({fname}): static {what} is an array; arrays must be dynamic arguments")
    return _StaticKey((type(v), v))


class _StaticKey(tuple):
    """A static argument in a cache key, ``(type, value)``: a value whose ``__eq__`` fails, when a lookup
    compares it with a cached one, gives JAX's ValueError instead of the bare error from inside the cache."""

    __slots__ = ()
    __hash__ = tuple.__hash__

    def __eq__(self, other: object) -> Any:
        if not isinstance(other, tuple):
            return NotImplemented
        try:
            return tuple.__eq__(self, other)
        except Exception as e:  # noqa: BLE001 - the user's __eq__ may raise anything
            other_val = other[1] if len(other) == 2 else other
            raise FtransValueError(
                "static arguments should be comparable using __eq__: comparing two static arguments of types "
                f"{type(self[1]).__name__} and {type(other_val).__name__} (to find a compiled program for "
                f"them) raised {type(e).__name__}: {e}"
            ) from e

    def __ne__(self, other: object) -> Any:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq


def _prune_unused(closed: ClosedJaxpr, keep_unused: bool) -> tuple[ClosedJaxpr, tuple | None]:
    """``keep_unused=False`` (JAX's default): drop the arguments no equation or output reads.

    Returns the program to compile and the indices of the kept arguments
    (None when every argument stays, so the call path does no selection).
    """
    if keep_unused:
        return closed, None
    jaxpr = closed.jaxpr
    used = {id(v) for e in jaxpr.eqns for v in e.invars if isinstance(v, Var)}
    used.update(id(v) for v in jaxpr.outvars if isinstance(v, Var))
    kept = tuple(i for i, v in enumerate(jaxpr.invars) if id(v) in used)
    if len(kept) == len(jaxpr.invars):
        return closed, None
    pruned = Jaxpr(jaxpr.constvars, [jaxpr.invars[i] for i in kept], jaxpr.eqns, jaxpr.outvars)
    return ClosedJaxpr(pruned, closed.consts), kept


def _select(xs: Sequence, kept: tuple | None) -> Any:
    if kept is None or not xs:
        return xs
    return type(xs)(xs[i] for i in kept) if isinstance(xs, tuple) else [xs[i] for i in kept]


def _all_resident(leaves: Any) -> bool:
    """After a deletion anywhere: every leaf still has a live buffer (else the general path decides)."""
    for x in leaves:
        buf = getattr(x, "_buf", None)
        if buf is None or buf.is_deleted():
            return False
    return True


def _check_donation(leaves: list, mask: tuple, fname: str) -> None:
    seen = set()
    for leaf, d in zip(leaves, mask):
        if d and isinstance(leaf, Array):
            if id(leaf) in seen:
                raise FtransValueError(f"jit({fname}): the same Array is donated twice in one call")
            seen.add(id(leaf))


def _forget_donated(leaves: list, mask: tuple, bufs: list) -> None:
    """Donated inputs whose buffer the runtime gave to an output (it invalidated the buffer ``bufs`` passed)
    are gone: drop their buffers and host copies so reuse raises. A donated input no output reused stays
    alive, as in JAX."""
    for leaf, d, passed in zip(leaves, mask, bufs):
        if d and isinstance(leaf, Array):
            if passed is None or not passed.is_deleted():
                continue
            _array_mod.buffers_deleted = True
            buf = getattr(leaf, "_buf", None)
            if buf is not None and not buf.is_deleted():
                buf.delete()
            if type(leaf) is DeviceArray:
                try:
                    del leaf._value
                except AttributeError:
                    pass
            elif type(leaf) is Array:  # a host Array is gone too, as in JAX (its data may be reused)
                _array_mod.mark_donated(leaf)
            else:
                try:
                    del leaf._buf
                except AttributeError:
                    pass


class Inline(enum.Enum):
    """How a jitted function called inside another trace is inlined (JAX's ``jax.Inline``, jax 0.11).

    ``jit(f, inline=...)`` takes a member or a bool:

    * ``JAX_EARLY``: ``f``'s equations join the caller's jaxpr (no ``jit`` equation).
    * ``JAX_LATE``, ``XLA_EARLY``, ``XLA_LATE``, ``AUTO``: the caller's jaxpr keeps a ``jit`` equation;
      how XLA inlines the call is left to ftrans's lowering (the results are the same).
    * ``True`` is ``JAX_EARLY`` in ftrans (jax 0.10's meaning; jax 0.11 and later read it as
      ``JAX_LATE``), ``False`` is ``AUTO``.

    Examples:
        >>> import ftrans
        >>> f = ftrans.jit(lambda x: x * 2, inline=ftrans.Inline.JAX_EARLY)
        >>> print(ftrans.make_jaxpr(lambda x: f(x) + 1)(1.0))
        { lambda ; a:f32[]. let
            b:f32[] = mul a 2.0:f32[]
            c:f32[] = add b 1.0:f32[]
          in (c,) }
    """

    JAX_EARLY = "jax_early"
    JAX_LATE = "jax_late"
    XLA_EARLY = "xla_early"
    XLA_LATE = "xla_late"
    AUTO = "auto"


def _canonical_inline(inline: Any) -> bool:
    """``jit``'s ``inline`` (a bool or an ``Inline``) as "put the body in the caller's jaxpr"."""
    if isinstance(inline, Inline):
        return inline is Inline.JAX_EARLY
    if isinstance(inline, (bool, np.bool_)):
        return bool(inline)
    raise FtransValueError(f"Invalid inline option: {inline!r}; give True, False or a jax.Inline member")


class CompilerEffortLevel(enum.Enum):
    """How hard XLA works on a program (JAX's ``jax.CompilerEffortLevel``, jax 0.11).

    The value of the ``optimization_level`` (run time) and ``memory_fitting_level`` (fitting in device
    memory) entries of ``jit``'s ``compiler_options`` (or of ``Lowered.compile``'s); those entries also
    take a member's name (``"O1"``) or number. The results never change, only compile time and speed.

    Examples:
        >>> import ftrans
        >>> f = ftrans.jit(lambda x: x + 1,
        ...                compiler_options={"optimization_level": ftrans.CompilerEffortLevel.O1})
        >>> f(1.0)
        Array(2., dtype=float32, weak_type=True)
        >>> ftrans.CompilerEffortLevel("O3")
        <CompilerEffortLevel.O3: 39>
    """

    UNKNOWN = 0
    O0 = 9
    O1 = 19
    O2 = 29
    O3 = 39

    @classmethod
    def _missing_(cls, value: object) -> CompilerEffortLevel | None:
        return cls.__members__.get(value) if isinstance(value, str) else None


_EFFORT_LEVEL_OPTIONS = ("optimization_level", "memory_fitting_level")


def _compiler_options(options: Any) -> tuple:
    """``compiler_options`` as sorted (name, value) pairs, checked for what XLA can take."""
    if options is None:
        return ()
    if not isinstance(options, dict):
        raise FtransTypeError(f"jit: compiler_options must be a dict of XLA option names to values, got "
                              f"{type(options).__name__}")
    out = []
    for k, v in options.items():
        if not isinstance(k, str):
            raise FtransTypeError(f"jit: compiler_options keys are XLA option names (str), got {k!r}")
        if k in _EFFORT_LEVEL_OPTIONS:  # a CompilerEffortLevel, its name or its number: XLA's number
            try:
                v = CompilerEffortLevel(v).value
            except ValueError:
                raise FtransValueError(f"jit: compiler_options[{k!r}]: {v!r} is not a valid CompilerEffortLevel "
                                       f"(one of {', '.join(CompilerEffortLevel.__members__)})") from None
        if not isinstance(v, (str, bool, int, float, np.integer, np.floating)):
            raise FtransTypeError(
                f"jit: compiler_options[{k!r}] is a {type(v).__name__}; XLA options take str, bool, int or float")
        out.append((k, v))
    return tuple(sorted(out))


# id(argument tracer) -> (tracer, NamedSharding) while a jit whose arguments are laid out over a mesh (its
# ``in_shardings``, or sharded arrays passed to it) is being staged: ``debug.inspect_array_sharding`` of an
# argument reports that layout, which is the one the partitioned program gives it, as JAX's does.
_input_layout: dict[int, tuple] = {}


def _input_layouts(owner: Any, args: tuple, kwargs: dict, dyn_idx: list, static_kw: dict) -> list | None:
    dargs = tuple(args[i] for i in dyn_idx)
    dkw = {k: v for k, v in kwargs.items() if k not in static_kw}
    leaves = tree_util.tree_leaves((dargs, dkw))
    # A jit staged inside another: its arguments laid out as the enclosing one's were.
    inherited = [input_layout(x) for x in leaves] if _input_layout else [None] * len(leaves)
    if owner._in_shardings is None and not any(type(x) is ShardedArray for x in leaves):
        return inherited if any(s is not None for s in inherited) else None
    from ftrans.transforms import sharded_jit

    try:
        own = sharded_jit._in_shardings(owner, dargs, dkw, leaves)
    except (FtransValueError, TypeError, ValueError):  # reported with the call's own checks
        return None
    return [s if s is not None else i for s, i in zip(own, inherited)]


def input_layout(x: Any) -> Any:
    """The layout of ``x`` if it is an argument of the jit being staged that has one (else ``None``)."""
    got = _input_layout.get(id(x))
    return got[1] if got is not None and got[0] is x else None


_tb.register_boundary(JitWrapped.__call__)  # (their ``try`` filters tracebacks: see traceback_util)
_tb.register_boundary(Compiled.__call__)


def jit(fun: Callable | None = None, *, in_shardings: Any = None, out_shardings: Any = None,
        static_argnums: int | Sequence[int] | None = None, static_argnames: str | Iterable[str] | None = None,
        donate_argnums: int | Sequence[int] | None = None, donate_argnames: str | Iterable[str] | None = None,
        keep_unused: bool = False, device: Any = None, backend: str | None = None, inline: bool | Inline = False,
        abstracted_axes: Any = None, compiler_options: Any = None,
        max_cache_size: int = DEFAULT_CACHE_SIZE, optimizations: Any = None,
        background_compilation: bool | None = None) -> Any:
    """JAX's ``jit``: compile ``fun`` with XLA for each new argument signature.

    Usable as ``@jit``, ``@jit(static_argnums=...)`` or ``jit(f, ...)``.
    ``keep_unused=False`` (JAX's default) drops arguments the program never
    reads from the compiled parameters; ``inline=True`` (or ``Inline.JAX_EARLY``) makes a call under
    another trace record the body itself instead of a ``jit_call``;
    ``compiler_options`` (a dict of XLA option names to str/bool/int/float)
    reach XLA's compile options and key its caches.  ``optimizations`` picks the IR passes
    this function's programs run (``None``: ``ftrans.config.optimizations``; ``"all"``;
    ``"none"``; or a list of pass names, see ``docs/optimizer.md``).  ``background_compilation``
    (``None``: ``ftrans.config.background_compilation``) lets the first calls of a new signature
    run on ftrans's host interpreter while XLA compiles in a background thread
    (``docs/compilation_cache.md``).
    """
    if abstracted_axes is not None:
        raise NotImplementedError("jit: abstracted_axes (dynamic shapes) is not supported")
    if device is not None and backend is not None:
        raise FtransValueError(f"can't specify both a device and a backend for jit, got device={device!r} and "
                               f"backend={backend!r}; give one")
    if device is not None or backend is not None:  # JAX's checks: a placement given twice
        for what, given in (("in_shardings", in_shardings), ("out_shardings", out_shardings)):
            if given is not None:
                raise FtransValueError(f"If backend or device is specified on jit, then {what} should not be "
                                       f"specified (got device={device!r}, backend={backend!r} and {what}); give "
                                       "one placement")
    kw = dict(static_argnums=static_argnums, static_argnames=static_argnames, donate_argnums=donate_argnums,
              donate_argnames=donate_argnames, device=device, backend=backend, max_cache_size=max_cache_size,
              keep_unused=keep_unused, inline=inline, compiler_options=_compiler_options(compiler_options),
              in_shardings=in_shardings, out_shardings=out_shardings, optimizations=optimizations,
              background_compilation=background_compilation)
    if fun is None:
        return lambda f: JitWrapped(f, **kw)
    return JitWrapped(fun, **kw)


def _check_same_mesh_size(name: str) -> None:
    """A jit with shardings inside a partitioned jit: the mesh in context must have as many devices as the
    enclosing program's (JAX's ``use_abstract_mesh`` check, met when a nested ``with mesh:`` changes it)."""
    outer = (_sh_core.args_meshes() or (None,))[-1]
    cur = _current_mesh()
    if outer is not None and cur is not None and outer.size != cur.size:
        raise FtransValueError(
            f"jit({name}) inside a jit partitioned over {outer!r}: the mesh in context {cur!r} has {cur.size} "
            f"devices where the enclosing program has {outer.size}; a nested jit cannot change the size of the "
            "mesh (use_abstract_mesh cannot change the size of the mesh)")


@_tb.api_boundary
def eval_shape(fun: Callable, *args: Any, **kwargs: Any) -> Any:
    """JAX's ``eval_shape``: the output shapes and dtypes, computed by tracing only. A jitted function
    answers through its own ``eval_shape`` (sharing its traces, with its ``out_shardings`` on the results)."""
    args, kwargs = _key_structs_to_keys((args, kwargs))
    if isinstance(fun, JitWrapped):
        return fun.eval_shape(*args, **kwargs)
    return _core_eval_shape(fun, *args, **kwargs)


def _key_structs_to_keys(tree: Any) -> Any:
    """Each ``ShapeDtypeStruct`` of a key dtype in ``tree`` as a key array over a ``uint32`` struct of its
    data's shape (what a key array flattens to)."""
    def conv(x: Any) -> Any:
        if isinstance(x, ShapeDtypeStruct) and is_key_dtype(x.dtype):
            impl = x.dtype._impl
            return PRNGKeyArray(impl, ShapeDtypeStruct((*x.shape, *impl.key_shape), np.dtype(np.uint32)))
        return x

    return tree_util.tree_map(conv, tree, is_leaf=lambda x: isinstance(x, ShapeDtypeStruct))


# Key-reuse checking (``core/key_reuse.py``): while it may be on, jitted calls go through the checking call;
# otherwise the plain hot path runs untouched.
_plain_jit_call = JitWrapped.__call__


def _key_checked_jit_call(self: JitWrapped, *args: Any, **kwargs: Any) -> Any:
    if _kr.tracking():
        return self._call_key_checked(args, kwargs)
    return _plain_jit_call(self, *args, **kwargs)


def _on_key_reuse_hot(hot: bool) -> None:
    JitWrapped.__call__ = _key_checked_jit_call if hot else _plain_jit_call


_kr.hot_listeners.append(_on_key_reuse_hot)
if _kr.hot:
    _on_key_reuse_hot(True)


# A donating ``jit_call`` applied eagerly (``jaxpr_as_fun`` / ``eval_jaxpr`` of a jaxpr holding a donating jit):
# JAX's jit primitive runs as that jitted program, donations included, so the donated arrays are deleted and
# no result is the donated array itself. One jitted wrapper per (parameters), least recently used dropped.
_donating_calls: OrderedDict[tuple, JitWrapped] = OrderedDict()
_donating_local = threading.local()


def _eager_donating_call(prim: Any, args: tuple, params: dict) -> Any:
    if getattr(_donating_local, "depth", 0) or not isinstance(_trace.find_top_trace(args), _trace.EvalTrace):
        return NotImplemented
    from ftrans.lowering import device_eager

    key = device_eager.freeze(params)
    with _stores_lock:
        fn = _donating_calls.get(key)
        if fn is not None:
            _donating_calls.move_to_end(key)
    if fn is None:
        def one_call(*xs: Any) -> Any:
            return prim.bind(*xs, **params)  # (the wrapper holds ``params``: ids in the key stay unique)

        one_call.__name__ = one_call.__qualname__ = str(params.get("name", prim.name))
        fn = jit(one_call, donate_argnums=tuple(i for i, d in enumerate(params["donated_invars"]) if d))
        with _stores_lock:
            _donating_calls[key] = fn
            while len(_donating_calls) > 64:
                _donating_calls.popitem(last=False)
    _donating_local.depth = 1
    try:
        return list(fn(*args))
    finally:
        _donating_local.depth = 0


from ftrans.core.prims import calls as _calls_mod  # noqa: E402

_calls_mod.eager_donating_call = _eager_donating_call


def _lower_eager_program(closed: ClosedJaxpr, in_weak: list, shapes: list) -> Callable:
    """An eager library program that has cost enough host time (``core/eager_programs.py``, the ski-rental
    rule), lowered for XLA's CPU backend; returns the function that compiles it (called in a background
    thread), which returns the executable and the arguments it kept. Its NumPy arguments enter strongly typed,
    so the program's weakly typed inputs are retyped first."""
    from ftrans.core.jaxpr_api import eval_jaxpr
    from ftrans.core.prims import structural as S

    def eager_program(*xs: Any) -> list:
        xs = [S.convert_element_type_p.bind(x, new_dtype=x.dtype, weak_type=True) if w else x
              for x, w in zip(xs, in_weak)]
        return eval_jaxpr(closed, list(closed.consts), *xs)

    lowered = jit(eager_program, backend="cpu").lower(*[ShapeDtypeStruct(s, d) for s, d in shapes])

    def compile_it() -> tuple:
        # The executable itself: ``Compiled.__call__``'s checks of the pytree and types hold by construction.
        compiled = lowered.compile()
        return compiled._exe, compiled._kept

    return compile_it


from ftrans.core import eager_programs as _eager_programs_mod  # noqa: E402

_eager_programs_mod.lower_for_xla = _lower_eager_program
