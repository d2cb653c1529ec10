"""Dtypes, the 64-bit switch, and JAX's type-promotion lattice.

The lattice is the contract JAX users rely on: mixing ``int8`` with ``uint8``
gives ``int16``, a Python scalar never widens an array (it is *weakly typed*),
and nothing silently becomes float64 unless 64-bit mode is on.  We keep the
lattice as data and compute joins from it, rather than hard-coding a table,
so the rules stay auditable against JAX's documentation.
"""

from __future__ import annotations

import functools
from typing import Any

import ml_dtypes
import numpy as np

from ftrans.core import config as _config
from ftrans.core.keys import KeyDtype, is_user_edtype, prng_key
from ftrans.errors import FtransTypeError, FtransValueError, TypePromotionError

bool_ = np.dtype(np.bool_)
int8, int16, int32, int64 = (np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64))
uint8, uint16, uint32, uint64 = (np.dtype(t) for t in (np.uint8, np.uint16, np.uint32, np.uint64))
float16, float32, float64 = (np.dtype(t) for t in (np.float16, np.float32, np.float64))
bfloat16 = np.dtype(ml_dtypes.bfloat16)
complex64, complex128 = np.dtype(np.complex64), np.dtype(np.complex128)

# Narrow storage types, as in JAX: 2- and 4-bit integers and the 4/8-bit floats (ml_dtypes). They take
# part in arithmetic but never in implicit promotion (each is a dead end of the lattice).
int2, int4 = np.dtype(ml_dtypes.int2), np.dtype(ml_dtypes.int4)
uint2, uint4 = np.dtype(ml_dtypes.uint2), np.dtype(ml_dtypes.uint4)
NARROW_INTS = (int2, int4, uint2, uint4)
SMALL_FLOATS = tuple(np.dtype(getattr(ml_dtypes, n)) for n in (
    "float4_e2m1fn", "float8_e3m4", "float8_e4m3", "float8_e4m3b11fnuz", "float8_e4m3fn", "float8_e4m3fnuz",
    "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu"))
(float4_e2m1fn, float8_e3m4, float8_e4m3, float8_e4m3b11fnuz, float8_e4m3fn, float8_e4m3fnuz, float8_e5m2,
 float8_e5m2fnuz, float8_e8m0fnu) = SMALL_FLOATS
ML_DTYPES = frozenset((bfloat16, *NARROW_INTS, *SMALL_FLOATS))  # NumPy's dtype kind 'V' for most of these
# Types JAX names although XLA's runtime holds no arrays of them yet: dtype queries only, never operands.
int1, uint1 = np.dtype(ml_dtypes.int1), np.dtype(ml_dtypes.uint1)
float6_e2m3fn, float6_e3m2fn = np.dtype(ml_dtypes.float6_e2m3fn), np.dtype(ml_dtypes.float6_e3m2fn)
NAMED_ONLY = frozenset((int1, uint1, float6_e2m3fn, float6_e3m2fn))

_SIGNED = (int8, int16, int32, int64)
_UNSIGNED = (uint8, uint16, uint32, uint64)
_FLOATS = (bfloat16, float16, float32, float64)
_COMPLEX = (complex64, complex128)
SUPPORTED = frozenset((bool_, *_SIGNED, *_UNSIGNED, *_FLOATS, *_COMPLEX, *NARROW_INTS, *SMALL_FLOATS))

# Short names used by the IR printer (f32[3], i32[], bool[2,2]).
SHORT_NAMES = {
    bool_: "bool", int8: "i8", int16: "i16", int32: "i32", int64: "i64",
    uint8: "u8", uint16: "u16", uint32: "u32", uint64: "u64",
    bfloat16: "bf16", float16: "f16", float32: "f32", float64: "f64",
    complex64: "c64", complex128: "c128",
    int2: "i2", int4: "i4", uint2: "u2", uint4: "u4",
    **{d: "f" + d.name[5:] if d.name.startswith("float") else d.name for d in SMALL_FLOATS},
}

# The weak kinds are lattice nodes that stand for a Python scalar of that kind.
_WEAK_INT, _WEAK_FLOAT, _WEAK_COMPLEX = "i*", "f*", "c*"

_LATTICE: dict[Any, tuple[Any, ...]] = {
    bool_: (_WEAK_INT,),
    _WEAK_INT: (uint8, int8, *NARROW_INTS),
    **{d: () for d in NARROW_INTS},
    **{d: () for d in SMALL_FLOATS},
    uint8: (int16, uint16), uint16: (int32, uint32), uint32: (int64, uint64),
    uint64: (_WEAK_FLOAT,),
    int8: (int16,), int16: (int32,), int32: (int64,), int64: (_WEAK_FLOAT,),
    _WEAK_FLOAT: (*SMALL_FLOATS, bfloat16, float16, _WEAK_COMPLEX),
    bfloat16: (float32,), float16: (float32,), float32: (float64, complex64),
    float64: (complex128,),
    _WEAK_COMPLEX: (complex64,), complex64: (complex128,), complex128: (),
}


def _upper_sets() -> dict[Any, frozenset]:
    """Every node's set of nodes at or above it, computed once."""
    ups: dict[Any, frozenset] = {}

    def up(node):
        if node not in ups:
            acc = {node}
            for nxt in _LATTICE[node]:
                acc |= up(nxt)
            ups[node] = frozenset(acc)
        return ups[node]

    for n in _LATTICE:
        up(n)
    return ups


_UPPER = _upper_sets()

# ``numpy_dtype_promotion="strict"`` (JAX's option): a Python scalar's kind joins any dtype of its kind or
# above (a weak int any integer, float or complex type; a weak float any float or complex type), and
# otherwise only equal dtypes meet; every other mix is an error the user resolves with an explicit cast.
_INT_TYPES = (*_SIGNED, *_UNSIGNED, *NARROW_INTS)
_FLOAT_TYPES = (*_FLOATS, *SMALL_FLOATS)
_UPPER_STRICT: dict[Any, frozenset] = {
    **{d: frozenset((d,)) for d in _LATTICE if not isinstance(d, str)},
    _WEAK_COMPLEX: frozenset((_WEAK_COMPLEX, *_COMPLEX)),
    _WEAK_FLOAT: frozenset((_WEAK_FLOAT, _WEAK_COMPLEX, *_FLOAT_TYPES, *_COMPLEX)),
    _WEAK_INT: frozenset((_WEAK_INT, _WEAK_FLOAT, _WEAK_COMPLEX, *_INT_TYPES, *_FLOAT_TYPES, *_COMPLEX)),
}


def x64_enabled() -> bool:
    return _config.config.enable_x64


def default_int() -> np.dtype:
    return int64 if x64_enabled() else int32


def default_uint() -> np.dtype:
    return uint64 if x64_enabled() else uint32


def default_float() -> np.dtype:
    return float64 if x64_enabled() else float32


def default_complex() -> np.dtype:
    return complex128 if x64_enabled() else complex64


_NARROW = {int64: int32, uint64: uint32, float64: float32, complex128: complex64}


_X64_MODES = {1: "warn", 2: "error", 3: "allow", "warn": "warn", "error": "error", "allow": "allow"}


def requested(dtype: Any, where: str) -> np.dtype:
    """The dtype a user's explicit ``dtype=`` gives (``check_requested``, then ``to_dtype``): under
    ``jax_explicit_x64_dtypes="allow"`` a requested 64-bit dtype is kept without x64, as JAX keeps it."""
    if check_requested(dtype, where):
        return np.dtype(dtype)
    return to_dtype(dtype)


def kept_wide(dtype: Any) -> np.dtype | None:
    """``dtype`` when it is a 64-bit type kept without x64 (``jax_explicit_x64_dtypes="allow"``), else None."""
    if not _allow_wide or dtype is None or dtype is int or dtype is float or dtype is complex or x64_enabled():
        return None
    try:
        d = np.dtype(dtype)
    except TypeError:
        return None
    if d in _NARROW and _X64_MODES.get(_config.config.read("explicit_x64_dtypes"), "warn") == "allow":
        return d
    return None


def narrowed(dtype: Any) -> np.dtype | None:
    """The 32-bit type a user's 64-bit ``dtype`` becomes without x64 (None: another dtype, or x64 on)."""
    if dtype is int or dtype is float or dtype is complex or dtype is bool or _config.config.enable_x64:
        return None
    try:
        return _NARROW.get(np.dtype(dtype))
    except TypeError:
        return None


def check_requested(dtype: Any, where: str) -> bool:
    """A dtype the user asked for by name (``jnp.zeros(3, jnp.float64)``, ``x.astype("int64")``): without
    x64 a 64-bit one is narrowed to its 32-bit type, and JAX says so (``jax_explicit_x64_dtypes``: a
    warning by default, an error, or nothing).  Python's types (``float``) are the default types, never
    reported.  True when the 64-bit dtype is to be kept (``"allow"`` without x64; see ``requested``)."""
    if dtype is None or dtype is int or dtype is float or dtype is complex or dtype is bool:
        return False
    if _config.config.enable_x64:
        return False
    try:
        d = np.dtype(dtype)
    except TypeError:
        return False
    narrow = _NARROW.get(d)
    if narrow is None:
        return False
    mode = _X64_MODES.get(_config.config.read("explicit_x64_dtypes"), "warn")
    if mode == "allow":
        return True
    # JAX's words (users' and JAX's own warning filters match them); JAX's random functions name none.
    name = "" if where.startswith("random.") else f" requested in {where.removeprefix('jnp.')}"
    from ftrans.errors import user_stacklevel

    if mode == "error":
        from ftrans.errors import FtransValueError

        raise FtransValueError(
            f"Explicitly requested dtype {d.name}{name} is not available. To enable more dtypes, set the "
            "jax_enable_x64 or allow_explicit_x64_dtypes configuration options "
            "(ftrans.config.update('jax_enable_x64', True)), or ask for the 32-bit type")
    msg = (f"Explicitly requested dtype {d.name}{name} is not available, and will be truncated to dtype "
           f"{narrow.name}. To enable more dtypes, set the jax_enable_x64 configuration option "
           "(ftrans.config.update('jax_enable_x64', True)) or the JAX_ENABLE_X64 shell environment variable")
    import warnings

    warnings.warn(msg, UserWarning, stacklevel=user_stacklevel())
    return False


def is_float0(d: np.dtype) -> bool:
    """Whether ``d`` is JAX's ``float0`` (the dtype of an integer input's tangent: no data)."""
    return d.kind == "V" and d.names == ("float0",)


def unsupported_dtype_message(d: np.dtype) -> str:
    """Why an array of dtype ``d`` cannot be an operand (float0 gets its own reason, as in JAX)."""
    if is_float0(d):
        return ("float0s do not support any operations by design: a float0 array is the tangent or gradient "
                "of an integer or bool input (allow_int=True) and holds no data, and no implicit dtype "
                "conversion is done. Use np.zeros(x.shape, dtype) for a regular array of zeros")
    if d in NAMED_ONLY:
        return (f"dtype {d} is a name only: XLA's runtime holds no arrays of it yet (JAX names it too and "
                f"fails the same way); use int2/int4 or the float4/float8 types for narrow storage")
    return (f"dtype {d} is not supported by ftrans; supported dtypes are "
            + ", ".join(sorted(str(s) for s in SUPPORTED)))


def canonicalize(dtype: Any) -> np.dtype:
    """The dtype an array of ``dtype`` actually gets (64-bit types narrow unless x64)."""
    d = np.dtype(dtype)
    if d not in SUPPORTED:
        raise FtransTypeError(unsupported_dtype_message(d))
    if not x64_enabled():
        return _NARROW.get(d, d)
    return d


def to_dtype(dtype: Any) -> np.dtype:
    """Turn anything NumPy accepts as a dtype (or a Python type) into a canonical dtype."""
    if dtype is int:
        return default_int()
    if dtype is float:
        return default_float()
    if dtype is complex:
        return default_complex()
    if dtype is bool:
        return bool_
    if type(dtype) is not np.dtype and hasattr(dtype, "aval"):
        _reject_array_dtype(dtype)
    try:
        d = np.dtype(dtype)
    except TypeError as e:
        raise FtransTypeError(f"{dtype!r} is not a valid dtype: {e}") from None
    return canonicalize(d)


def _reject_array_dtype(x: Any) -> None:
    """An ftrans array (or tracer) given as a dtype: NumPy would read its ``.dtype``; JAX refuses it."""
    from ftrans.core.array import Array
    from ftrans.core.trace import Tracer

    if isinstance(x, (Array, Tracer)):
        raise FtransValueError("Passing an array as a dtype argument is no longer supported; instead of dtype=arr "
                               f"use dtype=arr.dtype (here {x.aval.str_short()}).")


def _node(dtype: np.dtype, weak: bool):
    if not x64_enabled():
        dtype = _NARROW.get(dtype, dtype)
    if not weak:
        return dtype
    if dtype == bool_:
        return bool_
    if dtype.kind in "iu":
        return _WEAK_INT
    if dtype.kind == "f" or dtype == bfloat16:
        return _WEAK_FLOAT
    return _WEAK_COMPLEX


_WEAK_DEFAULT = {_WEAK_INT: default_int, _WEAK_FLOAT: default_float, _WEAK_COMPLEX: default_complex}


def _join_in(nodes: tuple, strict: bool) -> Any:
    upper = _UPPER_STRICT if strict else _UPPER
    common = frozenset.intersection(*(upper[n] for n in nodes))
    # The least upper bound is the common node that is below all the others.
    for c in common:
        if all(o in upper[c] for o in common):
            return c
    names = ", ".join(repr(n if isinstance(n, str) else n.name) for n in nodes)
    if strict:
        raise TypePromotionError(  # (JAX's wording first)
            f"Input dtypes ({names}) have no available implicit dtype promotion path when "
            "jax_numpy_dtype_promotion=strict. Convert the operands explicitly (e.g. x.astype(y.dtype)), "
            "or set ftrans.config.update('jax_numpy_dtype_promotion', 'standard')")
    raise TypePromotionError(
        f"Input dtypes ({names}) have no available implicit dtype promotion path: {_no_promotion_kind(nodes)} "
        "do not support implicit promotion (as in JAX); convert explicitly, e.g. x.astype('float32')")


def _no_promotion_kind(nodes: tuple) -> str:
    """Which of the dtype families that never promote implicitly ``nodes`` hold, in words."""
    kinds = []
    for n in nodes:
        name = n if isinstance(n, str) else n.name
        if name in ("int1", "uint1", "int2", "uint2", "int4", "uint4"):
            k = "1-bit, 2-bit and 4-bit integers"
        elif name.startswith(("float8_", "float6_", "float4_")):
            k = f"{name[5]}-bit floats"
        else:
            continue
        if k not in kinds:
            kinds.append(k)
    return " and ".join(kinds) or "these dtypes"


@functools.lru_cache(maxsize=4096)
def _join_standard(nodes: tuple) -> Any:
    return _join_in(nodes, False)


@functools.lru_cache(maxsize=4096)
def _join_strict_cached(nodes: tuple) -> Any:
    return _join_in(nodes, True)


def _join_strict(nodes: tuple) -> Any:
    """The strict join; a library function's own arithmetic (``errors.library_internal``) joins as standard.
    (Not cached as such: the same dtypes from the user's operands must still raise.)"""
    try:
        return _join_strict_cached(nodes)
    except TypePromotionError:
        from ftrans.errors import library_internal

        if library_internal():
            return _join_standard(nodes)
        raise


# The join in force: rebound when ``numpy_dtype_promotion`` changes, so promotion reads no option.
_join = _join_standard


def _join_this_thread(nodes: tuple) -> Any:
    """The join of the calling thread's promotion mode (a context holds "strict" in some thread)."""
    return (_join_strict if _config.config.numpy_dtype_promotion == "strict" else _join_standard)(nodes)


# Whether ``explicit_x64_dtypes="allow"`` holds in some thread: only then can a 64-bit array exist without x64,
# and promotion look for one (``promote``).
_allow_wide = False


def _on_config(name: str, value: Any = None) -> None:
    global _join, _allow_wide
    if name == "explicit_x64_dtypes":
        _allow_wide = any(_X64_MODES.get(v) == "allow" for v in _config.config.values_anywhere(name))
    elif name == "numpy_dtype_promotion":
        modes = set(_config.config.values_anywhere("numpy_dtype_promotion"))
        _join = _join_this_thread if len(modes) > 1 else _join_strict if modes == {"strict"} else _join_standard


_config.config._listeners.append(_on_config)
_config.scope_listeners.append(_on_config)
_on_config("numpy_dtype_promotion", None)


def _promote_keys(pairs: tuple) -> tuple:
    ds = list(dict.fromkeys(d for d, _ in pairs))
    if len(ds) == 1 and type(ds[0]) is KeyDtype:
        return ds[0], False
    if not any(type(d) is KeyDtype for d in ds):
        from ftrans.core import strings

        for d in ds:
            if strings.is_string_dtype(d):  # a string array's dtype: no promotion (JAX's ValueError)
                raise strings.promotion_error(d) from None
        raise KeyError(ds)
    raise FtransTypeError(f"key dtypes do not promote with other dtypes: {', '.join(str(d) for d in ds)}")


def promote(pairs: tuple[tuple[np.dtype, bool], ...]) -> tuple[np.dtype, bool]:
    """Join of (dtype, weak) pairs under JAX's lattice: the result dtype and weakness."""
    try:
        j = _join(tuple(_node(d, w) for d, w in pairs))
    except KeyError:  # a key dtype (a key-typed value of a staged program): it joins only with itself
        return _promote_keys(pairs)
    if _allow_wide and not x64_enabled() and any(p[0] in _NARROW for p in pairs):
        return _promote_wide(pairs)
    if isinstance(j, str):
        return canonicalize(_WEAK_DEFAULT[j]()), True
    return canonicalize(j), False


def _promote_wide(pairs: tuple) -> tuple[np.dtype, bool]:
    """``promote`` with 64-bit operands and no x64 (``explicit_x64_dtypes="allow"`` made them): JAX's join of
    the types as they are, so a 64-bit operand keeps a 64-bit result; Python scalars stay the 32-bit defaults."""
    j = _join(tuple(d if not w else _node(d, w) for d, w in pairs))
    if isinstance(j, str):
        return canonicalize(_WEAK_DEFAULT[j]()), True
    return j, False


_WEAK_WIDE = {_WEAK_INT: int64, _WEAK_FLOAT: float64, _WEAK_COMPLEX: complex128}
_PY_SCALAR_NODE = {int: _WEAK_INT, float: _WEAK_FLOAT, complex: _WEAK_COMPLEX}


def promote_types(a: Any, b: Any) -> np.dtype:
    """Return the dtype two dtypes promote to on JAX's type-promotion lattice.

    Unlike the promotion of operands, JAX answers this question about dtypes themselves, with no 32-bit
    narrowing: `promote_types(int64, float32)` is float64 even with x64 off.

    Args:
        a: First dtype (or scalar type, or name).
        b: Second dtype.
    Returns:
        A NumPy dtype.

    Examples:
        >>> jnp.promote_types(jnp.int8, jnp.uint8)
        dtype('int16')
        >>> jnp.promote_types(jnp.bfloat16, jnp.float16)
        dtype('float32')
    """
    da, db = to_dtype_wide(a), to_dtype_wide(b)
    # Python's scalar types stand for weakly typed values, as in JAX: promote_types(float, float16)
    # is float16 and promote_types(complex, float32) complex64.
    j = _join((_PY_SCALAR_NODE.get(a, da), _PY_SCALAR_NODE.get(b, db)))
    out = _WEAK_WIDE[j] if isinstance(j, str) else j
    # In 32-bit mode a join that only 64-bit types can hold (int32 with uint32)
    # narrows back, unless an input was itself 64-bit.
    if not x64_enabled() and out.itemsize == 8 and da.itemsize < 8 and db.itemsize < 8:
        return _NARROW.get(out, out)
    return out


def to_dtype_wide(dtype: Any) -> np.dtype:
    """A dtype argument as NumPy reads it (Python ``int`` is int64), not canonicalised."""
    try:
        d = np.dtype(dtype)
    except TypeError as e:
        raise FtransTypeError(f"{dtype!r} is not a valid dtype: {e}") from None
    if d not in SUPPORTED:
        raise FtransTypeError(f"dtype {d} is not supported by ftrans")
    return d


def python_scalar_dtype(x: Any) -> np.dtype:
    if isinstance(x, bool):
        return bool_
    if isinstance(x, int):
        return default_int()
    if isinstance(x, float):
        return default_float()
    if isinstance(x, complex):
        return default_complex()
    raise TypeError(f"{type(x).__name__} is not a Python scalar")


def is_weak_scalar(x: Any) -> bool:
    """Python int/float/complex are weakly typed; Python bool is not (as in JAX). So are instances of
    their subclasses (an ``enum.IntEnum`` member), which JAX reads as the builtin scalar they extend."""
    t = type(x)
    if t in (int, float, complex):
        return True
    return t is not bool and python_scalar_base(x) is not None


def python_scalar_base(x: Any) -> int | float | complex | None:
    """An instance of a subclass of Python's int, float or complex (an ``enum.IntEnum`` member, a
    ``float`` subclass) as the builtin scalar it extends, which is how JAX reads such a value (its
    type handlers walk the class's MRO); None for anything else, the builtins themselves and NumPy
    scalars (``np.float64`` subclasses ``float``) included."""
    t = type(x)
    if t in (int, float, complex, bool) or isinstance(x, np.generic):
        return None
    for base in (int, float, complex):  # bool cannot be subclassed
        if isinstance(x, base):
            return base(x)
    return None


_ML_KIND = {**{d: np.floating for d in (bfloat16, *SMALL_FLOATS, float6_e2m3fn, float6_e3m2fn)},
            int2: np.signedinteger, int4: np.signedinteger, uint2: np.unsignedinteger, uint4: np.unsignedinteger,
            int1: np.signedinteger, uint1: np.unsignedinteger}


def issubdtype(arg1: Any, arg2: Any) -> bool:
    """Test whether a dtype is a sub-type of another in the type hierarchy.

    The ml_dtypes types (bfloat16, the 8-bit floats, int4, ...) sit where JAX puts them (floating, signed or
    unsigned integer), which NumPy does not know; a key dtype (`key<fry>`) is a subtype of itself, of
    `prng_key`, `extended` and `np.generic` only.

    Args:
        arg1: A dtype (or something with a dtype).
        arg2: A dtype or an abstract type such as `jnp.floating`.
    Returns:
        A Python bool.

    Examples:
        >>> jnp.issubdtype(jnp.bfloat16, jnp.floating)
        True
        >>> jnp.issubdtype(jnp.int32, jnp.unsignedinteger)
        False

    See also:
        `isdtype`.
    """
    if is_user_edtype(arg1) or is_user_edtype(arg2):  # a user-defined extended dtype: its ``type``'s classes
        if not is_user_edtype(arg1):
            return False
        if is_user_edtype(arg2):
            return arg1 == arg2
        return isinstance(arg2, type) and issubclass(arg1.type, arg2)
    if type(arg1) is KeyDtype or type(arg2) is KeyDtype:
        if type(arg1) is not KeyDtype:
            return False
        if type(arg2) is KeyDtype:
            return arg1 == arg2
        return isinstance(arg2, type) and issubclass(prng_key, arg2)
    try:
        da = np.dtype(arg1)
    except TypeError:
        return bool(np.issubdtype(arg1, arg2))
    kind = _ML_KIND.get(da)
    if kind is not None:
        if isinstance(arg2, type) and issubclass(kind, arg2):
            return True
        try:
            return np.dtype(arg2) == da
        except TypeError:
            return False
    return bool(np.issubdtype(arg1, arg2))


_FLOAT_SET = frozenset((*_FLOATS, *SMALL_FLOATS))
_INT_SET = frozenset((*_SIGNED, *_UNSIGNED, *NARROW_INTS))


def is_float(d: np.dtype) -> bool:
    return d.kind == "f" or d in _FLOAT_SET


def is_inexact(d: np.dtype) -> bool:
    return d.kind in "fc" or d in _FLOAT_SET


def is_int(d: np.dtype) -> bool:
    return d.kind in "iu" or d in NARROW_INTS


_SUB_BYTE = {int2: 2, uint2: 2, int4: 4, uint4: 4, float4_e2m1fn: 4}


def itemsize_bits(d: Any) -> int:
    """Bits per element (JAX's ``dtypes.itemsize_bits``): 4 for int4 and float4, 2 for int2."""
    d = np.dtype(d)
    return _SUB_BYTE.get(d, d.itemsize * 8)


def is_unsigned(d: np.dtype) -> bool:
    return d.kind == "u" or d == uint4 or d == uint2


class finfo:
    """``jnp.finfo``: NumPy's, with bfloat16 from ml_dtypes."""

    def __new__(cls, dtype: Any):
        d = np.dtype(dtype)
        return ml_dtypes.finfo(d) if d in ML_DTYPES or d in NAMED_ONLY else np.finfo(d)


def iinfo(dtype: Any):
    """Return the machine limits of an integer dtype.

    Besides NumPy's integer types, the narrow ml_dtypes ones (int4, uint4, ...) are supported.

    Args:
        dtype: An integer dtype.
    Returns:
        An `iinfo` object with `min`, `max`, `bits` and `dtype`.

    Examples:
        >>> jnp.iinfo(jnp.int8).max
        127
        >>> jnp.iinfo(jnp.uint16).bits
        16

    See also:
        `finfo`.
    """
    d = np.dtype(dtype)
    return ml_dtypes.iinfo(d) if d in NARROW_INTS or d in NAMED_ONLY else np.iinfo(d)


def np_issubdtype(d: Any, cls: Any) -> bool:
    """``np.issubdtype(d, cls)`` for the dtype of any IR value: an extended dtype (a key dtype ``key<fry>``,
    a user-defined one) is no NumPy type."""
    if type(d) is KeyDtype or is_user_edtype(d):
        return False
    return np.issubdtype(d, cls)
