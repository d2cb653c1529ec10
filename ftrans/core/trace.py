"""The trace stack, ``bind``, tracers, and staging into the IR.

Each active transform owns a ``MainTrace`` at some level of a thread-local
stack.  ``bind`` raises its operands to the innermost (highest-level) trace
among them, or to the *dynamic* trace of an enclosing staging context (so
``make_jaxpr`` records even operations on constants), and lets that trace
process the primitive.  With no transform active it goes straight to the
primitive's NumPy rule: that is the eager fast path.
"""

from __future__ import annotations

import contextlib
import functools
import operator
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from ftrans import errors
from ftrans.core import array as _array_mod
from ftrans.core import config as _config_mod
from ftrans.core import dtypes
from ftrans.core import sharding as _sharding_mod
from ftrans.core import sharding_rules as _sharding_rules
from ftrans.core import traceback_util as _traceback_util
from ftrans.core.array import Array, from_foreign
from ftrans.core.array import DeviceArray as _DeviceArray
from ftrans.core.array import ShardedArray as _ShardedArray
from ftrans.core.array_methods import ArrayMixin
from ftrans.core.avals import ShapedArray, ShapeDtypeStruct
from ftrans.core.config import config as _config
from ftrans.core.ir import EMPTY_NAME_STACK, ClosedJaxpr, Jaxpr, JaxprEqn, Literal, SourceInfo, Var
from ftrans.core.keys import PRNGKeyArray, is_extended_dtype, is_key_dtype
from ftrans.core.primitive import Primitive, _all_weak, abstract_eval_rules
from ftrans.core.tokens import Token, bind_with_tokens
from ftrans.errors import UnexpectedTracerError


class MainTrace:
    """One active transform: its level on the stack, its Trace class, its state."""

    __slots__ = ("level", "trace_type", "payload", "alive", "trace", "origin")

    def __init__(self, level: int, trace_type: type, payload: Any = None):
        self.level = level
        self.trace_type = trace_type
        self.payload = payload
        self.alive = True
        self.trace = trace_type(self)
        self.origin: str | None = None  # the user's line that began it (recorded for the leak checker)

    def __repr__(self) -> str:
        return f"MainTrace({self.level}, {self.trace_type.__name__})"


class Trace:
    """How one transform interprets primitives applied to its tracers."""

    __slots__ = ("main",)

    def __init__(self, main: MainTrace):
        self.main = main

    def pure(self, val: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__}.pure")

    def lift(self, tracer: Tracer) -> Any:
        raise NotImplementedError(f"{type(self).__name__}.lift")

    def full_raise(self, val: Any) -> Any:
        if not isinstance(val, Tracer):
            if type(val) is PRNGKeyArray:  # a key array bound directly (a user's primitive): ``bind`` unwraps it
                raise _KeyArrayOperand
            if type(val) is Token:  # a token operand of a user's primitive (core/tokens.py)
                raise _TokenOperand
            return self.pure(val)
        main = val._trace.main
        if main is self.main:
            return val
        if not main.alive:
            raise _escaped(val)
        if main.level < self.main.level:
            return self.lift(val)
        raise UnexpectedTracerError(
            f"Encountered an unexpected tracer: a value traced at level {main.level} met a transform at level "
            f"{self.main.level}; a traced value escaped from the function that was being transformed "
            "(e.g. stored in global state or returned through a side channel)"
        )

    def process_primitive(self, prim: Primitive, tracers: list, params: dict) -> Any:
        raise NotImplementedError(f"{type(self).__name__}.process_primitive")


class EvalTrace(Trace):
    """The bottom of every stack: apply the primitive's NumPy rule at once."""

    __slots__ = ()

    def pure(self, val: Any) -> Any:
        return val

    lift = pure

    def process_primitive(self, prim: Primitive, vals: list, params: dict) -> Any:
        return eager_apply(prim, vals, params)


class _TraceState(threading.local):
    def __init__(self) -> None:
        self.base = MainTrace(0, EvalTrace)
        self.stack: list[MainTrace] = [self.base]
        self.dynamic: MainTrace = self.base
        self.eval_only = True
        # Set while a transform replays an equation (transposition): the IR it
        # emits is attributed to the user's line that equation came from.
        self.source_override: SourceInfo | None = None
        # Set while a ``jit(inline=True)`` body is traced: the call's place, its equations' place too.
        self.site_override: SourceInfo | None = None
        # The frame of the ``stage`` tracing the innermost ``jit`` or ``make_jaxpr``: an equation records
        # the user's frames up to it (``SourceInfo.callers``; None: the innermost frame only).
        self.tb_boundary: Any = None
        # ``(calling frame, its lasti, boundary, callers)`` of the last equation recorded (current_source_info).
        self.callers_cache: Any = None
        # ``set_xla_metadata``'s attributes in effect (sorted ``(name, text)`` pairs), recorded on equations.
        self.xla_metadata: tuple = ()
        # Set by ``jit`` while it stages a program (None otherwise, and while ``make_jaxpr``
        # stages): a function ``ClosedJaxpr -> ClosedJaxpr | None`` that the differentiation
        # entry points run on the function they differentiate before differentiating it, so
        # the IR passes that change values (``stability``) reach the derivative too.
        self.primal_rewriter: Any = None
        # The ``named_scope`` names active on this thread, joined by "/" (recorded on each staged equation).
        self.name_stack = EMPTY_NAME_STACK
        # Set while a ``shard_map`` body is traced: ``(prim, in avals, out, params) -> out`` gives staged
        # results the manual mesh axes they vary along (``VaryingAval``; transforms/shard_map.py).
        self.vma_hook: Any = None
        # Set with it (``check_vma``): ``(trace, prim, tracers, params) -> tracers`` casts the operands of an
        # equation that vary along fewer manual axes than the others with ``pvary`` first (JAX's implicit pvary).
        self.vma_insert: Any = None
        # > 0 inside a library function that JAX runs under jit (``outputs_checked``): debug_nans/debug_infs
        # look at its outputs only, not at each operation.
        self.unchecked = 0

    def refresh(self) -> None:
        self.eval_only = len(self.stack) == 1 and self.dynamic is self.base


state = _TraceState()

# Number of transforms active in any thread.  While it is zero, no thread is
# tracing, so eager checks may skip the (slower) thread-local read.  Code
# outside this module asks ``is_eager``/``can_shortcut`` instead of reading it.
active_anywhere = 0
_active_lock = threading.Lock()

# No transform active in any thread and no debug check on: the one global that
# the hottest shortcuts (Array operators, jit's fast call) read directly.
eager_everywhere = True
# ``eager_everywhere`` but true under a mesh context too (code that places nothing itself).
eager_unchecked = True


# Module globals that mirror ``eager_everywhere`` as ``_eager_array``: their ``Array`` while it holds, else
# None (core/array.py's operators test an operand's type against it, one test for "eager?" and "an Array?").
_eager_mirrors: list = []


def _count_active(delta: int) -> None:
    global active_anywhere, eager_everywhere, eager_unchecked
    with _active_lock:
        active_anywhere += delta
        eager_everywhere = not active_anywhere and not (_debug_nans or _debug_infs or _numpy_checks or _scoped
                                                        or _mesh_contexts)
        eager_unchecked = not active_anywhere and not (_debug_nans or _debug_infs or _numpy_checks or _scoped)
        for g in _eager_mirrors:
            g["_eager_array"] = g["Array"] if eager_everywhere else None


def is_eager() -> bool:
    """No transform is active on this thread: a primitive applied now runs at once."""
    return not active_anywhere or state.eval_only


def can_shortcut() -> bool:
    """Whether an eager fast path may compute a result without going through ``bind``.

    Like ``is_eager``, but false while a debug check (``debug_nans``/``debug_infs``)
    must see every primitive.
    """
    return eager_everywhere or (state.eval_only and not (_debug_nans or _debug_infs or _numpy_checks or _mesh_eager))


@contextlib.contextmanager
def new_main(trace_type: type, payload: Any = None, *, dynamic: bool = False) -> Iterator[MainTrace]:
    """Push a transform level for the duration of the ``with`` block."""
    st = state
    main = MainTrace(len(st.stack), trace_type, payload)
    st.stack.append(main)
    prev_dynamic = st.dynamic
    if dynamic:
        st.dynamic = main
    st.eval_only = False
    _count_active(1)
    checking = _config.check_tracer_leaks
    if checking:
        from ftrans.core import leaks

        main.origin = leaks.origin()
    try:
        yield main
    finally:
        _count_active(-1)
        st.stack.pop()
        st.dynamic = prev_dynamic
        main.alive = False
        st.refresh()
        if not checking:
            main.trace = None  # see below
    if checking:  # the block ended normally: none of its tracers may outlive it
        from ftrans.core import leaks

        found = leaks.find_leaks(main, Tracer)
        if found:
            err = leaks.leak_error(main, found)
            main.trace = None
            raise err
        main.trace = None
    # A MainTrace and its Trace refer to each other; once the transform is over the MainTrace's
    # side goes (tracers that outlive it still reach it through ``_trace.main``), so nothing
    # of it is left for the cycle collector.


@contextlib.contextmanager
def ensure_compile_time_eval() -> Iterator[None]:
    """JAX's ``ensure_compile_time_eval``: inside the block, a primitive whose operands are all concrete
    runs at once even while ``jit`` (or ``make_jaxpr``) is staging a program, so its result is a concrete
    Array Python can branch on; operations on traced values are still staged."""
    st = state
    prev = st.dynamic
    st.dynamic = st.base
    try:
        yield
    finally:
        st.dynamic = prev


@contextlib.contextmanager
def named_scope(name: str) -> Iterator[None]:
    """JAX's ``named_scope``: a name for the operations staged inside the block. Each staged equation
    records the names around it (``SourceInfo.name_stack``): ``jaxpr.pretty_print(name_stack=True)``
    shows them, and the StableHLO locations carry them (``loc("jit(f)/outer/inner/sin"(...))``)."""
    if not isinstance(name, str):
        raise errors.FtransTypeError(f"named_scope name argument must be a string, got {type(name).__name__}")
    st = state
    prev = st.name_stack
    st.name_stack = prev.extend(name)
    try:
        yield
    finally:
        st.name_stack = prev


@contextlib.contextmanager
def transform_name_stack(name: str) -> Iterator[None]:
    """Record the transform ``name`` (``vmap``, ``jvp``, ``transpose``) in the name stack of the
    equations staged inside the block, as JAX's: ``vmap(foo)/bar``."""
    st = state
    prev = st.name_stack
    st.name_stack = prev.transform(name)
    try:
        yield
    finally:
        st.name_stack = prev


@contextlib.contextmanager
def names_as(stack: Any) -> Iterator[None]:
    """Stage the block's equations with the name stack ``stack`` (a body's, which restarts)."""
    st = state
    prev = st.name_stack
    st.name_stack = stack
    try:
        yield
    finally:
        st.name_stack = prev


def in_current_names(info: SourceInfo | None) -> SourceInfo | None:
    """``info`` (an equation's, being replayed: interpreted, transposed) with the names active now
    before its own, as JAX's: a replay under ``vmap`` inside ``foo`` gives ``foo/vmap(...)``."""
    if info is None or not state.name_stack:
        return info
    return info._replace(name_stack=state.name_stack + info.name_stack)


def current_name_stack() -> tuple[str, ...]:
    """The ``named_scope`` names active on this thread, outermost first."""
    s = str(state.name_stack)
    return tuple(s.split("/")) if s else ()


def named_call(fun: Any, *, name: str | None = None) -> Any:
    """JAX's ``named_call``: ``fun`` run inside ``named_scope(name)`` (default: ``fun.__name__``)."""
    scope = name if name is not None else getattr(fun, "__name__", "named_call")

    @functools.wraps(fun)
    @_traceback_util.api_boundary
    def named(*args: Any, **kwargs: Any) -> Any:
        with named_scope(scope):
            return fun(*args, **kwargs)

    return named


def _escaped(t: Tracer) -> UnexpectedTracerError:
    ty = long_type_str(t.aval).lstrip("~")  # JAX's name of the type: int32[4,3]
    return UnexpectedTracerError(
        f"Encountered an unexpected tracer: a traced value of type {ty} was used after the "
        "transformation that created it had finished (it escaped, e.g. through global state, a closure kept "
        "past the call, or a side effect). Return it from the transformed function instead."
        + _escaped_origin(t)
    )


def _escaped_origin(t: Tracer) -> str:
    """Where an escaped staged value came from, when its (finished) trace still knows: the equation
    that made it (its user line, as JAX's "was created on line"), or the function's inputs."""
    builder = getattr(t._trace.main, "payload", None)
    atom = getattr(t, "atom", None)
    if not isinstance(builder, JaxprBuilder) or not isinstance(atom, Var):
        return ""
    if any(v is atom for v in builder.invars):
        return " It was an input of the traced function."
    for eqn in reversed(builder.eqns):
        if any(v is atom for v in eqn.outvars):
            info = eqn.source_info
            if info is None:
                return f" It was created by `{eqn.primitive.name}`."
            return f" It was created on line {info} by `{eqn.primitive.name}`."  # (JAX's wording)
    return ""


def find_top_trace(args) -> Trace:
    top = state.dynamic
    culprit = None  # the argument whose transform is `top`, if one is
    for a in args:
        if isinstance(a, Tracer):
            m = a._trace.main
            if m.level > top.level:
                top, culprit = m, a
            elif not m.alive:
                raise _escaped(a)
    if not top.alive:
        if culprit is not None:  # a tracer of a finished transform, deeper than any live one
            raise _escaped(culprit)
        raise UnexpectedTracerError("Encountered an unexpected tracer: bind found a finished transform on the "
                                    "trace stack (a traced value escaped the transformation that made it)")
    return top.trace


def bind(prim: Primitive, args: tuple, params: dict) -> Any:
    if not active_anywhere or state.eval_only:
        return eager_apply(prim, args, params)
    trace = find_top_trace(args)
    raise_ = trace.full_raise
    try:
        vals = [raise_(a) for a in args]
    except _KeyArrayOperand:
        return _bind_key_arrays(prim, args, params)
    except _TokenOperand:  # (bound outside the handler: errors of the user's rules chain to nothing of ours)
        pass
    else:
        return trace.process_primitive(prim, vals, params)
    return bind_with_tokens(prim, args, params)


class _KeyArrayOperand(Exception):
    """A ``PRNGKeyArray`` reached a traced bind as an operand (``full_raise`` raises it)."""


class _TokenOperand(errors.FtransTypeError):
    """A ``Token`` reached a bind as an operand (``full_raise`` and ``_concrete_operand`` raise it); the bind
    goes to ``core.tokens.bind_with_tokens``."""

    def __init__(self) -> None:
        super().__init__("a token (lax.create_token()) cannot be used as an array here")


def _bind_key_arrays(prim: Primitive, args: tuple, params: dict) -> Any:
    """``prim`` bound (in traced code) on operands among which are key arrays, as JAX binds a primitive on
    key-typed arrays: each key array enters as its key-typed value (key data it holds is wrapped,
    ``random_wrap``), and each key-typed result comes back a key array.  While key reuse is checked, the
    primitive consumes its key operands and its key results count as consumed (JAX's rule for a primitive
    the checker does not know)."""
    from ftrans.core import key_reuse as _kr
    from ftrans.core.prims.random import random_wrap_p

    flat = []
    for a in args:
        if type(a) is PRNGKeyArray:
            base = a._base_array
            flat.append(base if a._typed else random_wrap_p.bind(base, impl=a._impl))
        else:
            flat.append(a)
    out = bind(prim, tuple(flat), params)
    outs = [PRNGKeyArray(o.dtype._impl, o) if is_key_dtype(getattr(o, "dtype", None)) else o
            for o in (out if prim.multiple_results else [out])]
    if _kr.tracking():
        for i, a in enumerate(args):
            if type(a) is PRNGKeyArray:
                _kr.sink(a, prim.name, idx=i)
        for o in outs:
            if type(o) is PRNGKeyArray:
                _kr.sink(_kr.fresh(o), prim.name)
    return outs if prim.multiple_results else outs[0]


# ----------------------------------------------------------------------------
# Eager application


def _impl_quietly(impl: Any, vals: Any, params: dict) -> Any:
    """A NumPy rule run again with NumPy's floating-point warnings off: XLA never warns, and the cheap rules
    (``add``, ``mul``, ...) rely on ftrans's ``warnings`` filter, which a user's ``simplefilter("error")``
    ahead of it turns into a raised RuntimeWarning. Costs nothing on the path that does not warn."""
    import warnings

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        return impl(*vals, **params)


def _host_apply(prim: Primitive, args, params: dict) -> Any:
    """Run a primitive's NumPy rule on concrete operands and wrap the result.

    This is ``eager_apply`` until a runtime installs a device backend or a
    debug check is switched on: the host-only path then carries no test for
    either. One or two Array operands of a primitive whose results are weak
    only when all operands are (the elementwise ones) take the first branch,
    without comprehensions or a call of the weak-type rule: it is the eager
    cost of every ``lax``/``jnp`` function not answered by a fast path.
    """
    impl = prim.impl
    n = len(args)
    if 0 < n <= 2 and impl is not None and prim.weak_type_rule is _all_weak and not prim.multiple_results:
        try:
            if n == 2:
                x, y = args
                vals = (x._value, y._value)
                weak = x.weak_type and y.weak_type
            else:
                x = args[0]
                vals = (x._value,)
                weak = x.weak_type
        except AttributeError:  # an operand that is not an Array: the general path below
            pass
        else:
            if impl is prim._narrow_impl and type(vals[0].dtype) in _WIDE_KINDS:
                impl = prim._wide_impl  # what the narrow-integer wrapper would call, without its frame
            try:
                out = impl(*vals, **params) if params else impl(*vals)  # (an empty ** costs a tenth of a ufunc)
            except RuntimeWarning:  # see _impl_quietly
                out = _impl_quietly(impl, vals, params)
            if type(out) is not ndarray:
                out = np.asarray(out)
            obj = Array()
            obj._value = out
            obj._dt = out.dtype
            obj.weak_type = weak
            if _array_mod.placing:  # inside ``with default_device(d)``: the result reports d
                obj._dev = _array_mod._placement()
            return obj
    try:
        vals = [a._value for a in args]
        weaks = tuple([a.weak_type for a in args])
    except AttributeError:
        try:
            pairs = [_concrete_operand(a) for a in args]
        except _KeyOperand:  # a concrete key array (an interpreted staged program with key-typed values)
            from ftrans.core.prims.random import eager_with_keys

            return eager_with_keys(prim, args, params)
        except _TokenOperand:
            vals = None
        else:
            vals = [v for v, _ in pairs]
            weaks = tuple(w for _, w in pairs)
    if vals is None:  # a token operand of a user's primitive (bound outside the handlers, as ``bind`` does)
        return bind_with_tokens(prim, args, params)
    if impl is None:
        raise NotImplementedError(f"Evaluation rule for '{prim.name}' not implemented "
                                  f"(primitive {prim.name} has no eager (NumPy) rule)")
    try:
        out = impl(*vals, **params)
    except RuntimeWarning:
        out = _impl_quietly(impl, vals, params)
    weak = prim.weak_type_rule(weaks, **params)
    if prim.multiple_results:
        if type(weak) is tuple:  # one flag per result (e.g. sort keeps each operand's)
            return [_wrap(o, w) for o, w in zip(out, weak)]
        return [_wrap(o, weak) for o in out]
    if type(out) is not ndarray:
        if type(out) is PRNGKeyArray:  # a PRNG primitive's result: a key array
            return out
        out = np.asarray(out)
    obj = Array()
    obj._value = out
    obj._dt = out.dtype
    obj.weak_type = weak
    if _array_mod.placing:
        obj._dev = _array_mod._placement()
    return obj


ndarray = np.ndarray
# NumPy's own numeric and boolean dtype classes: never the narrow integers (kind "V"), so for them a rule
# wrapped by narrow_ints_via_bytes runs the rule inside as it is (a class test is cheaper than ``dtype.kind``).
_WIDE_KINDS = frozenset(type(np.dtype(c)) for c in (
    np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
    np.float16, np.float32, np.float64, np.complex64, np.complex128))


class _KeyOperand(errors.FtransTypeError):
    """A concrete key array among a primitive's eager operands (``_host_apply`` hands the call over; elsewhere
    the error a key array given for a number is)."""

    def __init__(self) -> None:
        super().__init__("a key array cannot be used as a number here; use ftrans.random.key_data(keys) for its "
                         "uint32 data")


def _wrap(out: Any, weak: bool) -> Array:
    if type(out) is PRNGKeyArray:  # a key-typed result of an interpreted body (control flow over keys)
        return out
    if isinstance(out, Array):  # a partitioned program's result (a sharded jit_call's): laid out already
        return out
    return Array._new(out, weak)


def concrete_value(x: Any) -> Any:
    """``x`` itself if it is not a tracer; else its concrete value (an Array), or None if it has none."""
    if isinstance(x, Tracer):
        return x.to_concrete_value()
    return x


def as_concrete_array(x: Any) -> Array:
    """A concrete primal as an Array (autodiff tracers may hold NumPy arrays or Python scalars)."""
    if type(x) is Array:
        return x
    v, w = _concrete_operand(x)
    return Array._new(np.asarray(v), w)


def _concrete_operand(a: Any) -> tuple[Any, bool]:
    if type(a) is Array:
        return a._value, a.weak_type
    if isinstance(a, Array):
        return a._value, a.weak_type
    if isinstance(a, Tracer):
        raise _escaped(a) from None  # (not "during handling of" the lookup that found no value)
    if isinstance(a, np.ndarray):
        return a, False
    if isinstance(a, np.generic):
        return np.asarray(a), False
    if isinstance(a, (bool, int, float, complex)):
        d = dtypes.python_scalar_dtype(a)
        return np.asarray(a, d), dtypes.is_weak_scalar(a)
    if type(a) is PRNGKeyArray:
        raise _KeyOperand
    if type(a) is Token:
        raise _TokenOperand
    f = from_foreign(a)  # a jax.Array, or anything with __array__ / __dlpack__ / __jax_array__
    if isinstance(f, Array):
        return f._value, f.weak_type
    raise errors.FtransTypeError(
        f"a primitive got an operand of type {type(a).__name__}, which is not an array"
    )


# ----------------------------------------------------------------------------
# The pluggable eager backend and the debug checks
#
# Core knows nothing about devices: the runtime (``ftrans.lowering.device_eager``)
# installs a backend when the first accelerator-resident array appears, the way
# JAX's runtime registers ``apply_primitive``.  ``eager_apply`` is rebuilt from
# the pieces that are switched on, so each costs nothing while it is off.

eager_apply = _host_apply

# fn(prim, args, params) -> result, or NotImplemented to let the host rule run.
_device_backend: Any = None
_debug_nans = False
_debug_infs = False
# numpy_rank_promotion or numpy_dtype_promotion is not the default: the fast paths, which skip jnp's
# promotion and broadcasting, must let the API layer check every operation.
_numpy_checks = False
# An ``error_checking_behavior_*`` option is "raise" in some thread: jnp's functions record NaN results, zero
# divisors and out-of-bounds gathers (``ftrans/numpy/error.py``), so the fast paths step aside for them too.
_error_checks = False
# A config context (``ftrans.enable_x64(...)``, ...) is open in some thread: its options are the
# calling thread's, so the global shortcuts (jit's fast keys, which hold no per-thread option) step aside.
_scoped = False
# A mesh context is open in some thread (``core/sharding.py``): ``set_mesh``/``use_mesh`` (``_mesh_eager``:
# eager results are placed on its mesh, by ``_mesh_backend``) or ``with mesh:`` (pjit's); the shortcuts,
# which place nothing, step aside while either is.
_mesh_eager = False
_mesh_contexts = False
# fn(prim, args, params) -> result on the thread's context mesh, or NotImplemented (none: the other rules).
_mesh_backend: Any = None


def set_device_backend(fn: Any) -> None:
    """Install (or with None remove) the eager backend for operands that live on an accelerator."""
    global _device_backend
    _device_backend = fn
    _rebuild_eager()


def device_backend() -> Any:
    return _device_backend


def _with_device(inner: Any) -> Any:
    def apply(prim: Primitive, args, params: dict) -> Any:
        out = _device_backend(prim, args, params)
        if out is NotImplemented:
            return inner(prim, args, params)
        return out

    return apply


def _with_mesh(inner: Any) -> Any:
    def apply(prim: Primitive, args, params: dict) -> Any:
        out = _mesh_backend(prim, args, params)
        if out is NotImplemented:
            return inner(prim, args, params)
        return out

    return apply


def set_mesh_backend(fn: Any) -> None:
    """Install the eager rule for operations under a mesh context (``transforms/sharded_eager.py``)."""
    global _mesh_backend
    _mesh_backend = fn
    _rebuild_eager()


def _on_mesh_contexts(concrete: bool, legacy: bool) -> None:
    global _mesh_eager, _mesh_contexts
    _mesh_eager, _mesh_contexts = concrete, concrete or legacy
    _rebuild_eager()
    _count_active(0)


_sharding_mod.on_contexts.append(_on_mesh_contexts)


def _with_checks(inner: Any) -> Any:
    def apply(prim: Primitive, args, params: dict) -> Any:
        with np.errstate(all="ignore"):  # the check below reports it, as an error, not a warning
            out = inner(prim, args, params)
        if state.unchecked:
            return out
        bad = nonfinite_kind(out if prim.multiple_results else [out])
        if bad is not None:
            _explain_nonfinite(prim, args, params, bad)
        return out

    return apply


def outputs_checked(fn: Any) -> Any:
    """For a library function JAX runs under ``jit`` (``nanmax``, ``median``, ...): with ``debug_nans`` or
    ``debug_infs`` on, only its outputs are checked, as JAX checks a jit's outputs, so the infinities and
    NaNs it makes inside (a ``-inf`` fill, a NaN mask) are no error; a bad output re-runs it op by op,
    which raises at the operation that made the value (JAX's de-optimized re-run)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if not (_debug_nans or _debug_infs) or state.unchecked:
            return fn(*args, **kwargs)
        state.unchecked += 1
        try:
            out = fn(*args, **kwargs)
        finally:
            state.unchecked -= 1
        leaves = out if isinstance(out, (tuple, list)) else [out]
        kind = nonfinite_kind([o for o in leaves if type(o) is Array])
        if kind is not None:
            fn(*args, **kwargs)  # op by op: raises at the operation that made the value
            raise FloatingPointError(
                f"invalid value ({kind}) encountered in the output of {getattr(fn, '__name__', 'a function')}"
                f"{_where()}; re-run operation by operation, it did not produce the invalid value (an input "
                "passed straight through can cause this)")
        return out

    return wrapper


def nonfinite_kind(outs: Any) -> str | None:
    """``"nan"``/``"inf"`` when an output breaks an enabled debug check, else None."""
    for o in outs:
        v = o._value if isinstance(o, Array) else o
        dt = getattr(v, "dtype", None)
        if dt is None or dt.kind not in "fc":
            continue
        v = np.asarray(v)
        if _debug_nans and _config.debug_nans and np.isnan(v).any():  # on here, not only in some thread
            return "nan"
        if _debug_infs and _config.debug_infs and np.isinf(v).any():
            return "inf"
    return None


def _explain_nonfinite(prim: Primitive, args, params: dict, kind: str) -> None:
    # A call-like primitive (jit_call, remat, ...) is re-run op by op so the
    # error names the operation inside its body, as JAX does.
    # Only when the operands are exactly the body's inputs: a loop's body (scan)
    # takes slices, and re-running it once on whole operands would mean nothing.
    # Call primitives name the parameter holding their body (``body_param``).
    body = params.get(getattr(prim, "body_param", "jaxpr"))
    if getattr(prim, "body_env", None) is not None:
        from ftrans.core.prims.calls import _no_env

        if prim.body_env is not _no_env:
            # pmap / shard_map: the body runs per device under named axes, so it is not re-run on the
            # whole operands here; as JAX says for its mapped computations.
            raise FloatingPointError(
                f"Invalid value ({kind}) encountered in sharded computation: an output of {prim.name}{_where()}")
    if isinstance(body, ClosedJaxpr) and len(body.in_avals) == len(args) and all(
            (a.shape, a.dtype) == (b.shape, b.dtype) for a, b in zip(map(aval_of, args), body.in_avals)):
        from ftrans.core.jaxpr_api import eval_jaxpr

        eval_jaxpr(body, list(body.consts), *args)
    raise FloatingPointError(
        f"invalid value ({kind}) encountered in {prim.name}{_where()}"
    )


def _where() -> str:
    info = state.source_override
    if info is None:
        f = sys._getframe(1)
        while f is not None and f.f_code.co_filename.startswith(_LIBRARY_DIRS):
            f = f.f_back
        if f is None:
            return ""
        info = SourceInfo(f.f_code.co_filename, f.f_lineno, f.f_code.co_name)
    return f" at {info.filename}:{info.lineno} (in {info.function})"


def debug_checks_on() -> bool:
    """Whether ``debug_nans`` or ``debug_infs`` is on (jit checks its outputs then)."""
    return (_debug_nans or _debug_infs) and bool(_config.debug_nans or _config.debug_infs)


def _rebuild_eager() -> None:
    global eager_apply
    fn = _host_apply
    if _device_backend is not None:
        fn = _with_device(fn)
    if _mesh_eager and _mesh_backend is not None:
        fn = _with_mesh(fn)
    if _debug_nans or _debug_infs:
        fn = _with_checks(fn)
    eager_apply = fn


def _on_config(name: str, value: Any = None) -> None:
    # The switches say whether a check is on in any thread (a context may hold it in one); the
    # checks themselves read the calling thread's option.
    global _debug_nans, _debug_infs, _numpy_checks, _scoped, _error_checks
    if name in ("debug_nans", "debug_infs"):
        _debug_nans = any(_config.values_anywhere("debug_nans"))
        _debug_infs = any(_config.values_anywhere("debug_infs"))
        _rebuild_eager()
    elif name in ("numpy_rank_promotion", "numpy_dtype_promotion") or name.startswith("error_checking_behavior_"):
        _error_checks = any(v != "ignore" for n in ("nan", "divide", "oob")
                            for v in _config.values_anywhere(f"error_checking_behavior_{n}"))
        _numpy_checks = any(v != "allow" for v in _config.values_anywhere("numpy_rank_promotion")) or \
            any(v != "standard" for v in _config.values_anywhere("numpy_dtype_promotion")) or _error_checks
    _scoped = _config_mod.scoped_anywhere()
    _count_active(0)


# ----------------------------------------------------------------------------
# Tracers


# What a Python cast of a traced array may have meant: a dtype conversion, which stays traced.
_ABSTRACT = "Abstract tracer value encountered where concrete value is expected:"  # JAX's opening words
_CAST_HINT = "If you meant to convert the array's dtype, try using `x.astype({t})` or `jnp.asarray(x, {t})` instead."


class Tracer(ArrayMixin):
    """A stand-in for an array inside a transform; operators come from ArrayMixin."""

    __slots__ = ("_trace",)
    __array_priority__ = 1000

    @property
    def aval(self) -> ShapedArray:
        raise NotImplementedError

    @property
    def shape(self) -> tuple[int, ...]:
        return self.aval.shape

    @property
    def dtype(self) -> np.dtype:
        return self.aval.dtype

    @property
    def weak_type(self) -> bool:
        return self.aval.weak_type

    @property
    def ndim(self) -> int:
        return len(self.aval.shape)

    @property
    def size(self) -> int:
        return self.aval.size

    @property
    def itemsize(self) -> int:
        return self.aval.dtype.itemsize

    @property
    def nbytes(self) -> int:
        aval = self.aval
        return aval.size * aval.dtype.itemsize

    @property
    def mat(self) -> Any:
        """JAX's ``x.mat``: the manual axis type of the value's type (``typeof(x).mat``)."""
        return self.aval.mat

    @property
    def sharding(self) -> Any:
        # JAX's message: a traced value has a type, not a placement (an AttributeError, so
        # ``hasattr(x, "sharding")`` is False for tracers as in JAX).
        raise AttributeError(
            f"The 'sharding' attribute is not available on a traced array of type {self.aval.str_short()}: "
            "inside a transform a value has no placement yet. Use `ftrans.typeof(x)` for its type, and "
            "read .sharding from the concrete array outside the transform.")

    def devices(self) -> Any:
        raise self._concretization(
            ".devices()", errors.ConcretizationTypeError,
            "A traced value is not placed on devices yet; call .devices() on the concrete array outside the "
            "transform.")

    def __len__(self) -> int:
        if not self.aval.shape:
            raise errors.FtransTypeError("len() of a 0-d (scalar) array")
        return self.aval.shape[0]

    def to_concrete_value(self) -> Any:
        """The concrete value this tracer stands for, or None when it has none.

        A tracer of a staging or batching transform has none.  An autodiff
        tracer (JVP, and so the primal side of ``linearize``/``grad``) whose
        primal is concrete answers with it: outside ``jit``, Python control
        flow, ``int()``, ``.item()`` and value-dependent shapes then work under
        differentiation, as in JAX.
        """
        return None

    def _concretization(self, what: str, cls: type, hint: str, jax_head: str = "") -> errors.ConcretizationTypeError:
        """``jax_head``: JAX's opening words for this error (``... traced array with shape f32[3].`` is
        added), which users and JAX's tests match on; ftrans's explanation follows."""
        head = ""
        if jax_head:
            a = self.aval
            head = f"{jax_head} traced array with shape {a.dtype.name}[{','.join(map(str, a.shape))}]. "
        return cls(
            f"{head}{what} needs a concrete value, but this is a traced array of type "
            f"{self.aval.str_short()} (its value is only known when the compiled program runs). "
            f"{hint}{self._origin_msg()}"
        )

    def _origin_msg(self) -> str:
        """Why this value is not concrete, as JAX's concretization errors say it (empty when unknown)."""
        return ""

    # JAX's checks on the type alone come first: a conversion no value could make work is a TypeError
    # (or, for bool, a ValueError) whether or not the value is known.
    def _check_scalar(self) -> None:
        if self.aval.shape:
            raise errors.FtransTypeError(
                f"Only scalar arrays can be converted to Python scalars; got a traced array of type "
                f"{self.aval.str_short()} (index it, x[0], or reduce it first)")

    def _check_integer(self) -> None:
        a = self.aval
        if a.shape or not dtypes.is_int(a.dtype):
            raise errors.FtransTypeError(
                f"Only integer scalar arrays can be converted to a scalar index; got a traced array of type "
                f"{a.str_short()}")

    def _check_bool(self) -> None:
        n = self.aval.size
        if n == 0:
            raise errors.FtransValueError(
                "The truth value of an empty array is ambiguous. Use `array.size > 0` to check that an array "
                f"is not empty (a traced array of type {self.aval.str_short()})")
        if n > 1:
            raise errors.FtransValueError(
                "The truth value of an array with more than one element is ambiguous. Use a.any() or a.all() "
                f"(a traced array of type {self.aval.str_short()})")

    def __bool__(self) -> bool:
        v = self.to_concrete_value()
        if v is not None:
            return bool(v)
        self._check_bool()
        raise self._concretization(
            "Python control flow (`if`, `while`, `and`, `or`, `not`, bool())",
            errors.TracerBoolConversionError,
            "Use lax.cond / lax.while_loop / jnp.where for data-dependent control flow, or mark "
            "the argument static (static_argnums / static_argnames).",
            "Attempted boolean conversion of",
        )

    def __int__(self) -> int:
        v = self.to_concrete_value()
        if v is not None:
            return int(v)
        self._check_scalar()
        raise self._concretization(
            "int()", errors.TracerIntegerConversionError,
            "Shapes and Python integers must be static: pass the value as a static argument. "
            + _CAST_HINT.format(t="int"),
            _ABSTRACT,
        )

    def __index__(self) -> int:
        v = self.to_concrete_value()
        if v is not None:
            return operator.index(v)
        self._check_integer()
        raise self._concretization(
            "Using an array as a Python index or size (operator.index)",
            errors.TracerIntegerConversionError,
            "Index with the array through jnp indexing (x[i]) or lax.dynamic_slice, or make it "
            "static.",
            "The __index__() method was called on",
        )

    def _lossy(self, what: str, hint: str) -> errors.ConcretizationTypeError:
        """``float()``/``complex()``/``.tolist()``: refused even for a concrete autodiff value, as in JAX."""
        if self.to_concrete_value() is None:
            return self._concretization(what, errors.ConcretizationTypeError, hint, _ABSTRACT)
        return errors.ConcretizationTypeError(
            f"{what} of a value being differentiated ({self.aval.str_short()}) is refused, as in JAX: "
            "the Python number would silently drop its derivative. Keep the value as an array; for "
            "its value without the derivative use .item() (or lax.stop_gradient)."
        )

    def __float__(self) -> float:
        self._check_scalar()
        raise self._lossy("float()", "Keep the value as an array, or make it a static argument. "
                          + _CAST_HINT.format(t="float"))

    def __complex__(self) -> complex:
        self._check_scalar()
        raise self._lossy("complex()", "Keep the value as an array, or make it a static argument. "
                          + _CAST_HINT.format(t="complex"))

    def __array__(self, dtype=None, copy=None):
        raise self._concretization(
            "Converting to a NumPy array", errors.TracerArrayConversionError,
            "Use ftrans.numpy functions on traced values instead of numpy ones, or use "
            "ftrans.debug.callback to inspect values at run time.",
            "The numpy.ndarray conversion method __array__() was called on",
        )

    def item(self, *args):
        v = self.to_concrete_value()
        if v is not None:
            return v.item(*args)
        raise self._concretization(
            ".item()", errors.ConcretizationTypeError,
            "Keep the value as an array inside transformed code.",
            _ABSTRACT,
        )

    def tolist(self):
        raise self._lossy(".tolist()", "Keep the value as an array inside transformed code.")

    def __reduce__(self):
        # Pickling (and copy.copy's protocol) needs the value, as in JAX; a concrete autodiff value pickles
        # as its value.
        v = self.to_concrete_value()
        if v is not None:
            return (np.asarray, (np.asarray(v),))
        raise self._concretization(
            "Pickling", errors.ConcretizationTypeError,
            "Pickle the result of the transformed function instead, outside jit.",
        )

    def tobytes(self, order: str = "C"):
        raise self._concretization(
            ".tobytes()", errors.ConcretizationTypeError,
            "Keep the value as an array inside transformed code (x.view(jnp.uint8) gives its bytes "
            "as an array).",
        )

    def __hash__(self):
        raise errors.FtransTypeError(
            f"unhashable type: traced array {self.aval.str_short()}; use it as an array, or "
            "pass hashable values as static arguments"
        )

    def __repr__(self) -> str:
        return self._short_repr()

    def _short_repr(self) -> str:
        return f"Traced<{self.aval.str_short()}>with<{type(self._trace).__name__}>"

    def _pretty_print(self, verbose: bool = False) -> _Doc:
        """JAX's tracer document: ``Traced<float32[10]>with<DynamicJaxprTrace>`` (``.format()`` gives the text)."""
        return _Doc(f"Traced<{long_type_str(self.aval).lstrip('~')}>with<{type(self._trace).__name__}>")

    def __iter__(self):
        if not self.aval.shape:
            raise errors.FtransTypeError("iteration over a 0-d (scalar) array")
        return (self[i] for i in range(self.aval.shape[0]))


# ----------------------------------------------------------------------------
# Staging (make_jaxpr, jit, control-flow bodies)


_LIBRARY_DIRS = errors.LIBRARY_DIRS


def current_source_info() -> SourceInfo | None:
    st = state
    override = st.source_override
    if override is not None:
        return override
    site = st.site_override
    if site is not None:  # an inlined jit's equations are the call's (JAX's inline=True)
        return site._replace(name_stack=st.name_stack, xla_metadata=st.xla_metadata)
    f = sys._getframe(2)
    while f is not None and f.f_code.co_filename.startswith(_LIBRARY_DIRS):
        f = f.f_back
    if f is None:
        return None
    code = f.f_code
    boundary = st.tb_boundary
    if boundary is None:
        callers = ()
    else:
        # Equations staged one after another from the same user function share their callers: the calling
        # frame, still at the same instruction, has the same frames outside it (one walk per call site, not
        # per equation; the cache holds only frames that are live while the trace runs, and ``stage`` drops it).
        back = f.f_back
        cached = st.callers_cache
        if cached is not None and cached[0] is back and cached[2] is boundary and back is not None \
                and cached[1] == back.f_lasti:
            callers = cached[3]
        else:
            callers = user_callers(back, boundary)
            st.callers_cache = (back, None if back is None else back.f_lasti, boundary, callers)
    return SourceInfo(code.co_filename, f.f_lineno, code.co_name, st.name_stack, code, f.f_lasti,
                      callers, st.xla_metadata)


_CALLER_SKIP = _LIBRARY_DIRS + errors.STDLIB_DIRS
_MAX_CALLERS = 64


def user_callers(f: Any, boundary: Any = None) -> tuple:
    """``(code, lasti)`` of the user's frames from ``f`` outwards (not ftrans's, jax's or the standard
    library's), stopping at the frame ``boundary`` (the ``jit`` or ``make_jaxpr`` being traced)."""
    out = []
    n = 0
    while f is not None and f is not boundary and n < _MAX_CALLERS:
        code = f.f_code
        if not code.co_filename.startswith(_CALLER_SKIP):
            out.append((code, f.f_lasti))
        f = f.f_back
        n += 1
    return tuple(out)


@contextlib.contextmanager
def source_site_as(info: SourceInfo | None) -> Iterator[None]:
    """Attribute equations staged inside the block to the user's place ``info`` (their names still their
    own): a ``jit(inline=True)`` body's equations are its call's, as JAX's."""
    st = state
    prev = st.site_override
    if info is not None:
        st.site_override = info
    try:
        yield
    finally:
        st.site_override = prev


class _Doc(str):
    """A finished text standing for a pretty-printer document (``format()`` is the text)."""

    def format(self, *args: Any, **kwargs: Any) -> str:  # noqa: ARG002  (JAX's Doc.format(width=...))
        return str(self)


def long_type_str(aval: Any) -> str:
    """``float32[2,3]`` (``~float32[]`` when weakly typed): how JAX's tracer reprs print a type."""
    w = "~" if getattr(aval, "weak_type", False) else ""
    d = aval.dtype
    return f"{w}{(d if is_extended_dtype(d) else np.dtype(d)).name}[{','.join(map(str, aval.shape))}]"


def short_repr(x: Any) -> str:
    """A tracer's short form, or a concrete value's ``str``, as nested in JAX's tracer reprs."""
    return x._short_repr() if isinstance(x, Tracer) else str(x)


class StagingTracer(Tracer):
    """A traced value inside a staging context; ``atom`` is its IR variable or literal."""

    __slots__ = ("aval", "atom")

    def __init__(self, trace: Trace, aval: ShapedArray, atom: Any):
        self._trace = trace
        self.aval = aval
        self.atom = atom

    def _short_repr(self) -> str:
        # JAX's name for a value traced by jit/make_jaxpr, with its long type (``~`` marks a weak type).
        return f"JitTracer({long_type_str(self.aval)})"

    def _origin_msg(self) -> str:
        """JAX's account of a staged value: the function being traced, and the arguments the value depends
        on or else the operations on captured constants that made it."""
        builder = getattr(self._trace.main, "payload", None)
        if not isinstance(builder, JaxprBuilder) or builder.debug is None or not isinstance(self.atom, Var):
            return ""
        try:
            src, traced_for, names = builder.debug()
        except Exception:  # an account of the error must not replace it
            return ""
        origin = f"The error occurred while tracing the function {src} for {traced_for}. "
        active = {self.atom}
        for eqn in reversed(builder.eqns):
            made = [v for v in eqn.outvars if v in active]
            if made:
                active.difference_update(made)
                active.update(v for v in eqn.invars if isinstance(v, Var))
        positions = [i for i, v in enumerate(builder.invars) if v in active]
        if positions:
            args = [names[i] if names is not None and i < len(names) else "unknown" for i in positions]
            if len(args) == 1:
                which = f"the argument {args[0]}"
            elif len(args) == 2:
                which = f"the arguments {args[0]} and {args[1]}"
            else:
                which = f"the arguments {', '.join(args[:-1])}, and {args[-1]}"
            origin += ("This concrete value was not available in Python because it depends on the "
                       f"value{'s' if len(args) > 1 else ''} of {which}.")
        else:
            consts = {v for v, _ in builder.const_vals} & active
            made = [e for e in builder.eqns if any(isinstance(v, Var) and v in consts for v in e.invars)]
            if made:
                origin += "This value became a tracer due to operations on these lines:\n\n" + "\n\n".join(
                    f"  operation {e}\n    from line {e.source_info}" for e in made[:5])
                if len(made) > 5:
                    origin += "\n\n(Additional originating lines are not shown.)"
        return "\n" + origin.rstrip()


class JaxprBuilder:
    """Accumulates equations and captured constants while a function is staged."""

    __slots__ = ("eqns", "const_tracers", "const_by_content", "const_vals", "invars", "keepalive", "typed", "debug")

    def __init__(self) -> None:
        # What a concretization error says about the staged function (JAX's debug info), computed only then:
        # a callable giving (its name and definition site, the transform tracing it, its arguments' names).
        self.debug: Callable[[], tuple[str, str, list[str] | None]] | None = None
        self.typed = False  # a value with a sharding type entered: rules type the results (sharding_rules.py)
        self.keepalive: list = []
        self.eqns: list[JaxprEqn] = []
        self.const_tracers: dict[int, StagingTracer] = {}  # id(value) -> tracer
        # (shape, dtype, weak type, bytes) -> tracer, for small constants: two copies of one value (a
        # NumPy array and jnp.array of it) become one constant of the jaxpr
        self.const_by_content: dict[tuple, StagingTracer] = {}
        self.const_vals: list[tuple[Var, Any]] = []  # keeps values alive and ordered
        self.invars: list[Var] = []

    def build(self, in_tracers: list, out_tracers: list) -> tuple[Jaxpr, list]:
        constvars = [v for v, _ in self.const_vals]
        consts = [c for _, c in self.const_vals]
        jaxpr = Jaxpr(constvars, [t.atom for t in in_tracers], self.eqns, [t.atom for t in out_tracers])
        return jaxpr, consts

    def release(self) -> None:
        """Staging is over: drop the captured values and their tracers. A trace and its main point at
        each other (a cycle the garbage collector must break); emptied, the builder they hold no
        longer keeps the values the function closed over alive once the jaxpr is gone."""
        self.const_tracers = {}
        self.const_by_content = {}
        self.const_vals = []
        self.keepalive = []
        self.debug = None


_LITERAL_TYPES = (bool, int, float, complex)
_DEDUP_CONST_BYTES = 1 << 14  # constants up to this size are shared by value, larger ones by identity


class DynamicJaxprTrace(Trace):
    """Records every primitive applied under it as an equation of a new jaxpr."""

    __slots__ = ()

    def new_arg(self, aval: ShapedArray) -> StagingTracer:
        v = Var(aval)
        builder = self.main.payload
        builder.invars.append(v)
        if aval.typed_sharding is not None:
            builder.typed = True
        return StagingTracer(self, aval, v)

    def _valueless_const(self, builder: JaxprBuilder, aval: ShapedArray, val: Any) -> StagingTracer:
        """A captured value staged as a constant of the given type without reading it to the host (a value
        split over devices, an accelerator's array, a shape-only struct): kept alive and bound when the
        program runs."""
        v = Var(aval)
        t = StagingTracer(self, aval, v)
        builder.const_tracers[id(val)] = t
        builder.keepalive.append(val)
        builder.const_vals.append((v, val))
        return t

    def pure(self, val: Any) -> StagingTracer:
        builder: JaxprBuilder = self.main.payload
        t = builder.const_tracers.get(id(val))
        if t is not None:
            return t
        if type(val) in _LITERAL_TYPES:
            d = dtypes.python_scalar_dtype(val)
            aval = ShapedArray((), d, dtypes.is_weak_scalar(val))
            return StagingTracer(self, aval, Literal(np.asarray(val, d)[()], aval))
        if type(val) is _ShardedArray and val._aval.shape:  # captured over Explicit axes: its type, read
            # with no host copy (an unreduced array's partial sums have none)
            aval = _sharding_rules.typed_aval(ShapedArray(val.shape, val.dtype, val.weak_type), val.sharding)
            if aval.typed_sharding is not None:
                builder.typed = True
                return self._valueless_const(builder, aval, val)
        if isinstance(val, Array):
            if type(val) is _DeviceArray and val._aval.shape and val.device.platform != "cpu":
                # an accelerator's array: a constant by its type alone (its value stays in device memory)
                return self._valueless_const(builder, ShapedArray(val._aval.shape, val._aval.dtype, val.weak_type),
                                             val)
            arr, weak = val._value, val.weak_type
        elif isinstance(val, (np.ndarray, np.generic)):
            arr, weak = np.asarray(val), False
            if arr.dtype != dtypes.canonicalize(arr.dtype):
                arr = arr.astype(dtypes.canonicalize(arr.dtype))
        elif isinstance(val, ShapeDtypeStruct):
            # As in JAX: a shape-only value (an argument of a jitted function called while staging, e.g.
            # under eval_shape) is a constant of the jaxpr with no value. Its shape is all eval_shape
            # needs; running or compiling the program raises (ir.py, ``constant_value``).
            aval = ShapedArray(tuple(val.shape), dtypes.canonicalize(val.dtype), bool(val.weak_type))
            return self._valueless_const(builder, aval, val)
        else:
            base = dtypes.python_scalar_base(val)  # an IntEnum member: the scalar it extends
            if base is not None:
                return self.pure(base)
            raise errors.FtransTypeError(
                f"a value of type {type(val).__name__} cannot be used as an array in traced code"
            )
        aval = ShapedArray(arr.shape, arr.dtype, weak)
        if arr.ndim == 0:
            return StagingTracer(self, aval, Literal(arr[()], aval))
        if type(val) is not Array and type(val) is _ShardedArray:  # captured over Explicit axes: its type
            aval = _sharding_rules.typed_aval(aval, val.sharding)
            if aval.typed_sharding is not None:
                builder.typed = True
        # Host values only: a device-resident (maybe committed) array keeps its own constant and placement.
        key = (arr.shape, arr.dtype.str, weak, arr.tobytes()) if (
            arr.nbytes <= _DEDUP_CONST_BYTES and (type(val) is Array or isinstance(val, np.ndarray))) else None
        if key is not None:
            t = builder.const_by_content.get(key)
            if t is not None:
                builder.const_tracers[id(val)] = t
                builder.keepalive.append(val)
                return t
        v = Var(aval)
        t = StagingTracer(self, aval, v)
        builder.const_tracers[id(val)] = t
        if key is not None:
            builder.const_by_content[key] = t
        builder.keepalive.append(val)  # its id keys const_tracers while we stage
        builder.const_vals.append((v, val if isinstance(val, Array) else Array._make(arr, False)))
        return t

    def lift(self, tracer: Tracer) -> StagingTracer:
        """A tracer of an outer transform is captured as a constant of this jaxpr."""
        builder: JaxprBuilder = self.main.payload
        t = builder.const_tracers.get(id(tracer))
        if t is not None:
            return t
        v = Var(tracer.aval)
        t = StagingTracer(self, tracer.aval, v)
        if tracer.aval.typed_sharding is not None:
            builder.typed = True
        builder.const_tracers[id(tracer)] = t
        builder.const_vals.append((v, tracer))
        return t

    def process_primitive(self, prim: Primitive, tracers: list, params: dict) -> Any:
        rule = abstract_eval_rules.get(prim)
        if rule is None:
            raise NotImplementedError(f"Abstract evaluation for '{prim.name}' not implemented "
                                      f"(primitive {prim.name} has no abstract evaluation rule)")
        insert = state.vma_insert
        if insert is not None and len(tracers) > 1:
            tracers = insert(self, prim, tracers, params)
        avals = [t.aval for t in tracers]
        out = rule(*avals, **params)
        builder = self.main.payload
        if builder.typed or prim.sets_sharding:
            out = _sharding_rules.propagate(prim, avals, out, params)
            if not builder.typed:
                builder.typed = any(o.typed_sharding is not None for o in out) if prim.multiple_results else (
                    out.typed_sharding is not None)
        hook = state.vma_hook
        if hook is not None:
            out = hook(prim, avals, out, params)
        src = current_source_info()
        if prim.multiple_results:
            outvars = [Var(a) for a in out]
            builder.eqns.append(JaxprEqn(prim, [t.atom for t in tracers], outvars, params, src))
            return [StagingTracer(self, v.aval, v) for v in outvars]
        v = Var(out)
        builder.eqns.append(JaxprEqn(prim, [t.atom for t in tracers], [v], params, src))
        return StagingTracer(self, out, v)


@contextlib.contextmanager
def source_info_as(info: SourceInfo | None) -> Iterator[None]:
    """Attribute equations staged inside the block to ``info`` (no-op for ``None``)."""
    st = state
    prev = st.source_override
    if info is not None:
        st.source_override = info
    try:
        yield
    except Exception as e:  # (free until raised) say where the failing operation was traced, as JAX does
        from ftrans.core.traceback_util import attach_user_context

        attach_user_context(e, info)
        raise
    finally:
        st.source_override = prev


def aval_of(x: Any) -> ShapedArray:
    """The abstract value of anything that can be an operand."""
    if isinstance(x, (Array, Tracer)):
        return x.aval
    if type(x) in _LITERAL_TYPES:
        return ShapedArray((), dtypes.python_scalar_dtype(x), dtypes.is_weak_scalar(x))
    if isinstance(x, (np.ndarray, np.generic)):
        return ShapedArray(np.shape(x), dtypes.canonicalize(x.dtype), False)
    if hasattr(x, "shape") and hasattr(x, "dtype"):
        a = ShapedArray(tuple(x.shape), dtypes.canonicalize(x.dtype), bool(getattr(x, "weak_type", False)))
        if type(x) is ShapeDtypeStruct and x.vma:  # a shard_map body's value type (eval_shape there)
            from ftrans.core.avals import VaryingAval

            return VaryingAval(a, x.vma)
        return a
    base = dtypes.python_scalar_base(x)  # an IntEnum member: the scalar it extends
    if base is not None:
        return aval_of(base)
    raise errors.FtransTypeError(f"value of type {type(x).__name__} is not a valid array")


def shown_value(x: Any, width: int = 60) -> str:
    """``repr(x)``, cut to ``width`` characters, for naming a bad value in an error message."""
    try:
        s = repr(x)
    except Exception:  # a repr that fails must not hide the real error
        s = f"<{type(x).__name__} object>"
    return s if len(s) <= width else s[:width - 3] + "..."


def is_jax_value(x: Any) -> bool:
    """Whether ``x`` can be an array operand (an array, a tracer, a NumPy array of a supported dtype, a
    Python scalar, an object with ``shape`` and ``dtype``, or a float0 array: an integer input's tangent)."""
    if isinstance(x, (np.ndarray, np.generic)) and dtypes.is_float0(x.dtype):
        return True
    try:
        aval_of(x)
    except (TypeError, ValueError):
        return False
    return True


def invalid_value_error(where: str, x: Any, hint: str = "") -> errors.FtransTypeError:
    """The error for an argument leaf that cannot be an array: it shows the value and its full type, so a
    NumPy array of dtype ``object`` or a user class is recognised at once (JAX's "not a valid JAX type").
    ``hint`` (a sentence) is added after the usual advice."""
    return errors.FtransTypeError(
        f"{where}: {shown_value(x)} of type {type(x)!r} is not a valid JAX type. Pass arrays, NumPy arrays "
        "of a numeric or bool dtype, or Python scalars (containers of them are pytrees)" + (
            f"; {hint}" if hint else "") + ".")


def describe_pair_candidate(x: Any) -> str:
    """What a function returned where a pair was due: a sequence's type and length, else the value."""
    if isinstance(x, (tuple, list)):
        return f"a {type(x).__name__} of length {len(x)}"
    if isinstance(x, ArrayMixin):
        return f"a single array of type {x.aval.str_short()}"
    return f"{shown_value(x)} of type {type(x).__name__}"


def function_site(fun: Any) -> str:
    """``f at file:line`` for a user function (``f`` alone when it has no code object)."""
    import inspect

    name = getattr(fun, "__name__", None) or type(fun).__name__
    try:
        code = getattr(inspect.unwrap(fun), "__code__", None)
    except ValueError:  # a __wrapped__ cycle
        code = None
    return f"{name} at {code.co_filename}:{code.co_firstlineno}" if code is not None else name


def check_outputs(out: Any, fun: Any, what: str, ok: Any = None) -> None:
    """Raise for the first leaf of a traced function's output ``out`` that cannot be an array, naming the
    function, what traced it (``what``: "jit", "vmap", ...) and the output component (``[1]['a']``).
    ``ok(leaf)``, when given, accepts further leaves (tokens, float0 results)."""
    from ftrans.core import pytrees as tree_util

    for path, leaf in tree_util.tree_flatten_with_path(out)[0]:
        if is_jax_value(leaf) or (ok is not None and ok(leaf)):
            continue
        comp = tree_util.keystr(path) or "(the whole output)"
        head = (f"Output from batched function {shown_value(leaf)} with type {type(leaf)!r} is not a valid JAX "
                "type: ") if what == "vmap" else ""  # JAX's words for vmap's outputs
        raise errors.FtransTypeError(
            f"{head}function {function_site(fun)} traced for {what} returned a value of type {type(leaf)!r} "
            f"({shown_value(leaf)}) at output component {comp}, which is not a valid JAX type: return "
            "arrays, scalars or pytrees of them")


def stage(fun, in_avals: list[ShapedArray], boundary: bool = False,
          debug: Callable[[], tuple[str, str, list[str] | None]] | None = None) -> tuple[ClosedJaxpr, list]:
    """Trace ``fun`` on flat abstract arguments into a closed jaxpr.

    Returns the closed jaxpr and its captured constants that are tracers of
    outer transforms (empty unless staging happens inside another transform).
    ``fun`` takes and returns flat lists.  ``boundary``: this is a ``jit`` or
    ``make_jaxpr`` trace, where its equations' recorded user frames stop.  ``debug``: see
    ``JaxprBuilder.debug`` (a concretization error then names the arguments the value depends on).
    """
    if _config.no_tracing:
        raise errors.FtransRuntimeError(
            f"tracing {getattr(fun, '__qualname__', fun)}, but 'no_tracing' is set (ftrans.no_tracing() or "
            "config no_tracing); call it with argument types already compiled, or leave the no_tracing block")
    builder = JaxprBuilder()
    builder.debug = debug
    # A staged body's name stacks start afresh (as JAX's): the equation that runs it carries the
    # enclosing scopes, and the lowering joins the two.
    st = state
    outer_names = st.name_stack
    st.name_stack = EMPTY_NAME_STACK
    outer_boundary, outer_site = st.tb_boundary, st.site_override
    if boundary:
        st.tb_boundary, st.site_override = sys._getframe(), None
    try:
        with new_main(DynamicJaxprTrace, builder, dynamic=True) as main:
            trace: DynamicJaxprTrace = main.trace
            in_tracers = [trace.new_arg(a) for a in in_avals]
            outs = fun(*in_tracers)
            out_tracers = [trace.full_raise(o) for o in outs]
            jaxpr, consts = builder.build(in_tracers, out_tracers)
    finally:
        st.name_stack = outer_names
        st.tb_boundary, st.site_override = outer_boundary, outer_site
        st.callers_cache = None
        builder.release()
    return ClosedJaxpr(jaxpr, consts), consts

import ftrans.core.primitive as _primitive_module  # noqa: E402

_primitive_module._bind = bind  # Primitive.bind goes straight to the stack-aware bind


def _primitive_bind(self: Primitive, *args: Any, **params: Any) -> Any:
    """``Primitive.bind``: ``bind`` inlined, so an eager call costs one Python frame less."""
    if not active_anywhere or state.eval_only:
        return eager_apply(self, args, params)
    trace = find_top_trace(args)
    raise_ = trace.full_raise
    try:
        vals = [raise_(a) for a in args]
    except _KeyArrayOperand:
        return _bind_key_arrays(self, args, params)
    except _TokenOperand:  # (bound outside the handler: errors of the user's rules chain to nothing of ours)
        pass
    else:
        return trace.process_primitive(self, vals, params)
    return bind_with_tokens(self, args, params)


_primitive_module.Primitive.bind = _primitive_bind

_config._listeners.append(_on_config)
_config_mod.scope_listeners.append(_on_config)
_on_config("debug_nans", None)  # flags set through the environment
_on_config("numpy_rank_promotion", None)
