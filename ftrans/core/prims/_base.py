"""Helpers for defining strict primitives with their abstract-eval and NumPy rules."""

from __future__ import annotations

import contextvars
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from ftrans.core import dtypes, sharding_rules
from ftrans.core.avals import ShapedArray, type_str
from ftrans.core.keys import is_key_dtype
from ftrans.core.primitive import Primitive
from ftrans.errors import FtransTypeError, FtransValueError


def types_of(avals) -> str:
    return ", ".join(type_str(a.shape, a.dtype) for a in avals)


def prim_type_error(prim: Primitive | str, avals, msg: str) -> FtransTypeError:
    name = prim if isinstance(prim, str) else prim.name
    return FtransTypeError(f"{name}: {msg} (operands: {types_of(avals)})")


def prim_value_error(prim: Primitive | str, msg: str) -> FtransValueError:
    name = prim if isinstance(prim, str) else prim.name
    return FtransValueError(f"{name}: {msg}")


def standard_primitive(
    name: str,
    shape_rule: Callable[..., tuple[int, ...]],
    dtype_rule: Callable[..., np.dtype],
    impl: Callable[..., Any],
    *,
    weak_type_rule: Callable[..., bool] | None = None,
    sharding_rule: Callable[..., Any] | None = None,
) -> Primitive:
    """A single-result primitive whose type is given by a shape rule and a dtype rule (and, for values with
    sharding types, a sharding rule: core/sharding_rules.py)."""
    prim = Primitive(name)
    prim.sharding_rule = sharding_rule
    if weak_type_rule is not None:
        prim.def_weak_type(weak_type_rule)
    wrule = prim.weak_type_rule

    def abstract_eval(*avals: ShapedArray, **params: Any) -> ShapedArray:
        shape = shape_rule(*avals, **params)
        dtype = dtype_rule(*avals, **params)
        return ShapedArray(shape, dtype, wrule(tuple(a.weak_type for a in avals), **params))

    prim.def_abstract_eval(abstract_eval)
    prim.def_impl(impl)
    return prim


# ----------------------------------------------------------------------------
# Dtype classes accepted by elementwise primitives

BOOL = frozenset({dtypes.bool_})
# The 2/4-bit integers and 4/8-bit floats (JAX's narrow storage types) are in their classes, so the basic
# arithmetic, comparisons, conversions and data movement take them; a primitive JAX refuses them for
# excludes them (``abs``: ``SIGNED_NUM - NARROW_INT``).
NARROW_INT = frozenset(dtypes.NARROW_INTS)
SINT = frozenset({dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64, dtypes.int2, dtypes.int4})
UINT = frozenset({dtypes.uint8, dtypes.uint16, dtypes.uint32, dtypes.uint64, dtypes.uint2, dtypes.uint4})
INT = SINT | UINT
FLOAT = frozenset({dtypes.bfloat16, dtypes.float16, dtypes.float32, dtypes.float64, *dtypes.SMALL_FLOATS})
COMPLEX = frozenset({dtypes.complex64, dtypes.complex128})
INEXACT = FLOAT | COMPLEX
NUM = INT | INEXACT
SIGNED_NUM = SINT | INEXACT
ANY = NUM | BOOL
INT_OR_BOOL = INT | BOOL

_CLASS_NAMES = {
    BOOL: "bool", INT: "integer", FLOAT: "floating-point", COMPLEX: "complex",
    INEXACT: "floating-point or complex", NUM: "numeric", SIGNED_NUM: "signed numeric",
    ANY: "any", INT_OR_BOOL: "integer or bool", FLOAT | INT: "integer or floating-point",
}


def class_name(allowed: frozenset) -> str:
    return _CLASS_NAMES.get(allowed, "/".join(sorted(d.name for d in allowed)))


# Names of the primitives typed by ``elementwise_shape``: their NumPy rules broadcast like NumPy, and eager
# jnp calls lean on that (``broadcast_operands`` skips the broadcast on the host), so the device backend
# broadcasts such operands itself before it types the one-primitive program (lowering/device_eager.py).
ELEMENTWISE: set[str] = set()


def elementwise_shape(prim_name: str):
    """Operands must share one shape; rank-0 operands broadcast (as XLA's scalars do)."""
    ELEMENTWISE.add(prim_name)

    def rule(*avals: ShapedArray, **params: Any) -> tuple[int, ...]:
        shape = None
        for a in avals:
            if a.shape == () and len(avals) > 1:
                continue
            if shape is None:
                shape = a.shape
            elif a.shape != shape:
                raise prim_type_error(
                    prim_name, avals,
                    "operands must have the same shape (primitives do not broadcast; "
                    "use ftrans.numpy functions for NumPy-style broadcasting)",
                )
        return shape if shape is not None else ()

    return rule


def elementwise_dtype(prim_name: str, allowed: frozenset, result: str | np.dtype = "same"):
    """Operands must share one dtype, from ``allowed``; the result is that dtype, bool, or real."""

    def rule(*avals: ShapedArray, **params: Any) -> np.dtype:
        d = avals[0].dtype
        for a in avals[1:]:
            if a.dtype != d:
                raise prim_type_error(
                    prim_name, avals,
                    "operands must have the same dtype (convert with lax.convert_element_type "
                    "or use ftrans.numpy functions, which promote)",
                )
        if d not in allowed:
            if d in NARROW_INT:
                raise prim_type_error(prim_name, avals, f"{prim_name} does not accept dtype {d.name}. Support "
                                      "for narrow-width integers is limited to basic arithmetic, comparisons "
                                      "and conversions; convert to a wider integer type first")
            raise prim_type_error(prim_name, avals, f"expects {class_name(allowed)} operands")
        if result == "same":
            return d
        if result == "bool":
            return dtypes.bool_
        if result == "real":
            return {dtypes.complex64: dtypes.float32, dtypes.complex128: dtypes.float64}.get(d, d)
        return np.dtype(result)

    return rule


_NARROW_WIDE = {dtypes.int2: dtypes.int8, dtypes.int4: dtypes.int8, dtypes.uint2: dtypes.uint8,
                dtypes.uint4: dtypes.uint8}


def narrow_ints_via_bytes(numpy_rule: Callable) -> Callable:
    """Run an integer rule on 2/4-bit operands in int8/uint8 and wrap the result back to the narrow type
    (``astype`` keeps the low bits, which is two's-complement wraparound): NumPy's loops for ml_dtypes'
    int4 return int8 for some functions and have none for others."""
    def run(*args: Any, **params: Any) -> Any:
        d = args[0].dtype
        if d.kind != "V" or d not in _NARROW_WIDE:  # bfloat16 and the small floats are kind "V" too
            return numpy_rule(*args, **params)
        out = numpy_rule(*[a.astype(_NARROW_WIDE[a.dtype]) if a.dtype in _NARROW_WIDE else a for a in args], **params)
        return out.astype(d) if out.dtype == _NARROW_WIDE[d] else out

    run.__name__ = getattr(numpy_rule, "__name__", "impl")
    run.__wrapped__ = numpy_rule  # type: ignore[attr-defined]  # python -m ftrans.rules shows the NumPy rule
    run.wide_rule = numpy_rule  # type: ignore[attr-defined]  # Array's fast operators call it for kinds other than "V"
    return run


def unop(name: str, allowed: frozenset, impl: Callable, *, result: Any = "same", narrow_native: bool = False,
         **kw) -> Primitive:
    if allowed & NARROW_INT and not narrow_native:
        impl = narrow_ints_via_bytes(impl)
    kw.setdefault("sharding_rule", sharding_rules.elementwise(name))
    return standard_primitive(name, elementwise_shape(name), elementwise_dtype(name, allowed, result), impl, **kw)


def binop(name: str, allowed: frozenset, impl: Callable, *, result: Any = "same", narrow_native: bool = False,
          **kw) -> Primitive:
    if allowed & NARROW_INT and not narrow_native:
        impl = narrow_ints_via_bytes(impl)
    kw.setdefault("sharding_rule", sharding_rules.elementwise(name))
    return standard_primitive(name, elementwise_shape(name), elementwise_dtype(name, allowed, result), impl, **kw)


def _numpy_error_state() -> tuple[Any, Any]:
    """NumPy's error-state context variable and its value with every error ignored.

    ``np.errstate`` is a Python context manager costing about a microsecond
    per use, as much as a small ufunc call; setting the context variable it
    manages directly costs a fifth of that.  Returns ``(None, None)`` where
    NumPy keeps its state elsewhere (then :func:`quiet` uses ``np.errstate``).
    """
    try:
        from numpy._core._ufunc_config import _extobj_contextvar as var
    except ImportError:
        return None, None
    with np.errstate(all="ignore"):
        return var, var.get()


_ERRSTATE_VAR, _IGNORE_ALL = _numpy_error_state()


def _ftrans_warning_filter() -> Any:
    """The ``warnings`` filter ``ftrans.core`` installs (RuntimeWarnings from ftrans's modules ignored)."""
    for f in warnings.filters:
        if f[0] == "ignore" and f[2] is RuntimeWarning and f[3] is not None and f[3].pattern == r"ftrans(\.|$)":
            return f
    return None


# NumPy's own error state (warn on divide/overflow/invalid), read in a fresh context so a user's
# np.errstate around the import does not count as the default.
_DEFAULT_ERRSTATE = contextvars.Context().run(_ERRSTATE_VAR.get) if _ERRSTATE_VAR is not None else None
_FTRANS_FILTER = _ftrans_warning_filter()


# The first entry of the ``warnings`` filter list last found to let ftrans's filter decide every
# RuntimeWarning raised from ftrans's modules (None: not checked yet, or it did not).
_safe_first: Any = None


def warnings_filtered() -> bool:
    """Whether a NumPy rule may skip setting NumPy's error state: the state is NumPy's default (it
    warns, never raises) and ftrans's ``warnings`` filter ignores what it would warn.

    Setting and resetting the error state costs about half a 16-element ufunc
    call; this costs a fifth of that. The filter list is walked only when its
    first entry changes (``filterwarnings``/``simplefilter`` insert there,
    ``catch_warnings`` swaps the list): any filter ahead of ftrans's that could
    match a RuntimeWarning from an ftrans module (``simplefilter("error")``,
    pytest's per-test filters) makes it False, as does a user's
    ``np.errstate``/``np.seterr``, and the rule sets the error state as before.
    """
    if _ERRSTATE_VAR is None or _ERRSTATE_VAR.get() is not _DEFAULT_ERRSTATE:
        return False
    filters = warnings.filters
    return bool(filters) and (filters[0] is _safe_first or _check_filters(filters))


def _check_filters(filters: list) -> bool:
    global _safe_first
    _safe_first = None
    for f in filters:
        if f is _FTRANS_FILTER:
            _safe_first = filters[0]
            return True
        _action, _msg, category, module, _line = f
        if issubclass(RuntimeWarning, category) and (module is None or module.match("ftrans.core")):
            return False
    return False


def quiet(fn: Callable) -> Callable:
    """Run a NumPy rule with NumPy's floating-point errors ignored, cheaply.

    XLA never warns about overflow, division by zero or invalid operations,
    so no rule may.  A ``warnings`` filter alone does not hold: it is lost when
    ftrans is first imported inside ``warnings.catch_warnings`` (as pytest
    does while collecting test modules) and is overridden by a user's later
    ``simplefilter``; the error state is set for the call instead.
    """
    if _ERRSTATE_VAR is None:  # pragma: no cover - NumPy without the context variable
        def impl(*args, **params):
            with np.errstate(all="ignore"):
                return fn(*args, **params)
    else:
        set_state, reset_state, ignore = _ERRSTATE_VAR.set, _ERRSTATE_VAR.reset, _IGNORE_ALL
        # warnings_filtered(), inlined: its common answer is two identity tests.
        get_state, default, filters_of, filtered = _ERRSTATE_VAR.get, _DEFAULT_ERRSTATE, warnings, warnings_filtered

        def impl(*args, **params):
            if get_state() is default and ((f := filters_of.filters) and f[0] is _safe_first or filtered()):
                return fn(*args, **params)
            token = set_state(ignore)
            try:
                return fn(*args, **params)
            finally:
                reset_state(token)

    impl.__name__ = getattr(fn, "__name__", "impl")
    impl._quiet_inner = fn  # (a program that runs quietly as a whole calls it directly: core/eager_programs.py)
    return impl


def quiet_state() -> tuple[Callable, Callable, Any] | None:
    """``(set, reset, ignore)`` of NumPy's floating-point error state, or None on a NumPy without it."""
    if _ERRSTATE_VAR is None:  # pragma: no cover
        return None
    return _ERRSTATE_VAR.set, _ERRSTATE_VAR.reset, _IGNORE_ALL


def keep_dtype(fn: Callable) -> Callable:
    """Wrap a NumPy function so the result has its first operand's dtype, quietly.

    NumPy computes some functions of float16/bfloat16 in a wider type and may
    return a wider dtype; XLA keeps the operand's dtype, so we cast back.
    """

    if _ERRSTATE_VAR is None:  # pragma: no cover - NumPy without the context variable
        fn = quiet(fn)

        def impl(x, *rest):
            out = fn(x, *rest)
            d = x.dtype
            if out.dtype is not d and out.dtype != d:
                out = out.astype(d)
            return out
    else:
        # quiet() inlined: these rules are the eager hot path of every math function.
        set_state, reset_state, ignore = _ERRSTATE_VAR.set, _ERRSTATE_VAR.reset, _IGNORE_ALL
        # warnings_filtered(), inlined: its common answer is two identity tests.
        get_state, default, filters_of, filtered = _ERRSTATE_VAR.get, _DEFAULT_ERRSTATE, warnings, warnings_filtered

        def impl(x, *rest):
            if get_state() is default and ((f := filters_of.filters) and f[0] is _safe_first or filtered()):
                out = fn(x, *rest)
            else:
                token = set_state(ignore)
                try:
                    out = fn(x, *rest)
                finally:
                    reset_state(token)
            d = x.dtype
            if out.dtype is not d and out.dtype != d:
                out = out.astype(d)
            return out

    impl.__name__ = getattr(fn, "__name__", "impl")
    return impl


def via_float32(fn: Callable) -> Callable:
    """Run ``fn`` in float32 for half-precision inputs (bfloat16 has few NumPy loops), quietly."""

    def run(x, *rest, **params):
        if x.dtype in (dtypes.bfloat16, dtypes.float16):
            args = [x.astype(np.float32)] + [r.astype(np.float32) for r in rest]
            return np.asarray(fn(*args, **params)).astype(x.dtype)
        return np.asarray(fn(x, *rest, **params), dtype=x.dtype)

    run.__name__ = getattr(fn, "__name__", "impl")
    return quiet(run)


def normalize_axes(prim_name: str, axes, ndim: int) -> tuple[int, ...]:
    out = []
    for ax in axes:
        if not isinstance(ax, (int, np.integer)) or not -ndim <= ax < ndim:
            raise prim_value_error(prim_name, f"axis {ax} is out of range for an array of rank {ndim}")
        out.append(int(ax) % ndim if ndim else 0)
    if len(set(out)) != len(out):
        raise prim_value_error(prim_name, f"repeated axis in {tuple(axes)}")
    return tuple(out)


class _AnyOrKey(frozenset):
    """``ANY`` and the key dtypes (``key<fry>``): what a primitive that only moves values accepts."""

    def __contains__(self, d: object) -> bool:
        return is_key_dtype(d) or frozenset.__contains__(self, d)


ANY_OR_KEY = _AnyOrKey(ANY)
