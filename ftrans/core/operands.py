"""Operand helpers for every layer above core: what turns NumPy-style calls into
strict primitive calls (operand checks, dtype promotion, broadcasting, axis
normalisation). They sit in core so transforms and ``lax`` can build IR with
them without reaching up into ``ftrans.numpy``.

This is the hot path of both eager execution and tracing, so the common cases
(operands already arrays of one dtype and shape) are decided with a few type
checks before any general machinery runs.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from ftrans.core import dtypes
from ftrans.core import trace as _trace
from ftrans.core.array import (
    Array,
    DeviceArray,
    ShardedArray,
    from_foreign,
    is_foreign_array,
    stays_on_device,
)
from ftrans.core.avals import ShapedArray
from ftrans.core.config import config as _config
from ftrans.core.keys import PRNGKeyArray, reject_keys
from ftrans.core.prims import structural as S
from ftrans.core.shape_poly import DimExpr
from ftrans.core.trace import Tracer, is_eager, shown_value
from ftrans.errors import (
    FtransOverflowError,
    FtransShapeError,
    FtransTypeError,
    FtransValueError,
    shapes_str,
    user_stacklevel,
)

_PY_SCALARS = (int, float, complex, bool)

# JAX jits its library functions (``jnp``'s, ``nn``'s): inside one, a value being differentiated has a tangent
# typed as its primal, weak type included (``jvp`` of a jitted function types tangents so). ftrans's library
# functions are plain Python; those entry points call ``library_entry`` on their operands, which the autodiff
# module sets (``transforms/ad.py``: a weakly typed primal's strongly typed tangent becomes weak). None until
# then, and it is only called while some trace is active.
library_entry: Any = None
ArrayLike = Any


def masked_array_error(where: str) -> FtransValueError:
    """JAX refuses NumPy masked arrays as inputs (their mask would be silently dropped)."""
    return FtransValueError(
        f"{where}: numpy masked arrays are not supported as direct inputs to JAX functions (the mask would be "
        "dropped). Use arr.filled(fill_value) to convert the value to a standard numpy array, or pass "
        "arr.data and arr.mask as two arrays")


def is_array(x: Any) -> bool:
    return type(x) is Array or isinstance(x, (Array, Tracer))


def check_arraylike(name: str, *args: Any) -> None:
    for i, a in enumerate(args):
        if type(a) is PRNGKeyArray:
            raise reject_keys(name, args)
        if isinstance(a, (np.ndarray, np.generic)) and a.dtype not in dtypes.SUPPORTED:
            op = name.rsplit(".", 1)[-1]
            raise FtransTypeError(
                f"{name}: Error interpreting argument to {op} as a JAX value. The problematic value is of type "
                f"{type(a)} and was passed to {op} at position {i}: a NumPy value of dtype {a.dtype} "
                f"({shown_value(a)}); {dtypes.unsupported_dtype_message(a.dtype)}")
        if not (is_array(a) or isinstance(a, (np.ndarray, np.generic)) or type(a) in _PY_SCALARS
                or is_foreign_array(a)):
            what = type(a).__name__
            hint = " Convert it with jnp.asarray first." if isinstance(a, (list, tuple)) else ""
            if what == "Ref":  # (as jax 0.12's message)
                hint = " A Ref can't be passed where an array is expected: read its value with `ref[...]`."
            raise FtransTypeError(
                f"{name} requires ndarray or scalar arguments, but argument {i} is a {what}.{hint}"
            )


def dtype_weak(x: Any) -> tuple[np.dtype, bool]:
    t = type(x)
    if t is Array:
        return x._value.dtype, x.weak_type
    if isinstance(x, Tracer):
        a = x.aval
        return a.dtype, a.weak_type
    if t is bool:
        return dtypes.bool_, False
    if t in (int, float, complex):
        return dtypes.python_scalar_dtype(x), True
    if t is DeviceArray or t is ShardedArray:  # its type, without fetching the buffer (or the blocks: an
        return x._aval.dtype, x.weak_type   # unreduced array's partial sums have no global value) to the host
    if isinstance(x, Array):  # (a string array's ``_value`` raises JAX's "not a valid JAX type")
        return x._value.dtype, x.weak_type
    if isinstance(x, (np.ndarray, np.generic)):
        return dtypes.canonicalize(x.dtype), False
    if t is PRNGKeyArray:
        raise reject_keys("this operation", (x,))
    f = from_foreign(x)  # a jax.Array, or anything with __array__ / __dlpack__
    if f is not None:
        return f.dtype, f.weak_type
    raise FtransTypeError(f"value of type {type(x).__name__} is not an array")


def result_type(*args: Any) -> np.dtype:
    """Return the dtype that results from JAX's type promotion of the arguments.

    Unlike NumPy, Python scalars are weakly typed (they do not widen an array's dtype) and 64-bit results are
    narrowed to 32 bits unless x64 is on.

    Args:
        *args: Arrays, dtypes, scalar types or Python scalars.
    Returns:
        A NumPy dtype.

    Examples:
        >>> jnp.result_type(jnp.int8, jnp.float16)
        dtype('float16')
        >>> jnp.result_type(jnp.arange(3, dtype=jnp.int8), 2)
        dtype('int8')
        >>> jnp.result_type(jnp.float32, 1j)
        dtype('complex64')

    See also:
        `promote_types`, `can_cast`.
    """
    pairs = []
    for a in args:
        if isinstance(a, (np.dtype, type, str)):
            pairs.append((dtypes.to_dtype(a), False))
        else:
            pairs.append(dtype_weak(a))
    return dtypes.promote(tuple(pairs))[0]


def shape_of(x: Any) -> tuple[int, ...]:
    t = type(x)
    if t is Array:
        return x._value.shape
    if isinstance(x, Tracer):
        return x.aval.shape
    if t is np.ndarray:
        return x.shape
    if t in _PY_SCALARS:
        return ()
    if isinstance(x, Array):
        return x.shape
    if not hasattr(x, "shape") and is_foreign_array(x):
        return from_foreign(x).shape  # a __dlpack__-only object: np.shape would call it a scalar
    return np.shape(x)


def ndim_of(x: Any) -> int:
    return len(shape_of(x))


def scalar_to_array(x: Any, dtype: np.dtype, weak: bool) -> Array:
    """A Python or NumPy scalar as an ftrans Array of ``dtype``, with JAX's overflow check."""
    if type(x) is int:
        # JAX reads a Python int operand as the default int (int32 unless x64),
        # then converts (with wraparound): uint8_array + -3 is fine, while 2**40
        # is an OverflowError whatever the other operand is (float32_array + 2**40
        # too).  ``jnp.array(2**40, float32)`` (an explicit dtype) does not come here.
        info = np.iinfo(dtypes.default_int())
        if not info.min <= x <= info.max:
            raise FtransOverflowError(
                f"Python int {x} too large to convert to {dtypes.default_int().name} (the default "
                "integer type, which JAX reads Python ints as); pass it as a float or as an array "
                "with an explicit dtype, or enable x64 for 64-bit integers")
        if dtype.kind in "iu":
            return Array._new(np.asarray(x, np.int64).astype(dtype), weak)
    with np.errstate(all="ignore"):
        return Array._new(np.asarray(x, dtype), weak)


def convert(x: Any, dtype: np.dtype, weak: bool = False) -> Any:
    """``x`` as an array of ``dtype``; Python scalars become constants, arrays get a convert."""
    t = type(x)
    if t is Array or isinstance(x, Tracer):
        if x.dtype == dtype:
            return x
        return S.convert_element_type_p.bind(x, new_dtype=dtype, weak_type=weak)
    if t in _PY_SCALARS:
        return scalar_to_array(x, dtype, weak)
    if isinstance(x, (np.ndarray, np.generic)):
        if t is not np.ndarray and isinstance(x, np.ma.MaskedArray):
            raise masked_array_error("an operand")
        if not is_eager() and t is np.ndarray and x.dtype == dtype:
            # Staging captures the NumPy array itself, so one array used twice
            # becomes one constvar.
            return x
        arr = np.asarray(x)
        if arr.dtype != dtype:
            with np.errstate(all="ignore"):
                arr = arr.astype(dtype)
        return Array._make(arr, weak)
    if isinstance(x, Array):
        # Pinned to its device (or spread over several), or held in an accelerator's memory (a jit output on a
        # GPU): the operation runs there, not on a copy fetched to the host.
        if type(x) is DeviceArray and stays_on_device(x) or type(x) is ShardedArray and x._committed:
            return x if x.dtype == dtype else S.convert_element_type_p.bind(x, new_dtype=dtype, weak_type=weak)
        return convert(Array._new(x._value, x.weak_type), dtype, weak)
    f = from_foreign(x)  # a jax.Array, or anything with __array__ / __dlpack__
    if f is not None:
        return convert(f, dtype, weak)
    raise FtransTypeError(f"value of type {type(x).__name__} is not an array")


def as_operand(x: Any) -> Any:
    """An Array or Tracer for ``x`` with its own (canonical) dtype."""
    if type(x) is Array or isinstance(x, Tracer):
        return x
    d, w = dtype_weak(x)
    return convert(x, d, w)


_WEAK_SCALARS = (int, float, complex)


def strict_operands(name: str, args: Sequence[Any], like: Any = None) -> list:
    """Operands for a strict (lax-level) primitive call.

    Python scalars take ``like``'s dtype (by default the first array's) when
    JAX's lattice lets that dtype absorb them, weakly typed, as ``lax.add(x, 2)``
    does; everything else keeps its own dtype, so a real mismatch still reaches
    the primitive's type check.  ``lax`` and the transform rules share this so a
    rule's ``mul(t, 2)`` stages exactly what the public ``lax.mul`` would.
    """
    check_arraylike(name, *args)
    if like is None:
        like = next((a for a in args if type(a) not in _WEAK_SCALARS), None)
    target = None if like is None else dtype_weak(like)[0]
    out = []
    for a in args:
        if type(a) in _WEAK_SCALARS and target is not None:
            own = dtypes.python_scalar_dtype(a)
            if dtypes.promote(((own, True), (target, False))) == (target, False):
                out.append(convert(a, target, True))
                continue
        out.append(as_operand(a))
    return out


def broadcast_shapes(name: str, shapes: Sequence[tuple[int, ...]], args=()) -> tuple[int, ...]:
    first = shapes[0]
    if all(s == first for s in shapes):
        return first
    ndim = max(len(s) for s in shapes)
    out = [1] * ndim
    for s in shapes:
        for i, d in enumerate(s, ndim - len(s)):
            if d == out[i] or d == 1:
                continue
            if out[i] == 1:
                out[i] = d
            else:
                raise FtransShapeError(
                    f"{name} got incompatible shapes for broadcasting: "
                    f"{', '.join(str(tuple(s)) for s in shapes)}."
                    + (f" (operands {shapes_str(*args)})" if args else "")
                )
    return tuple(out)


def broadcast_to_shape(x: Any, shape: tuple[int, ...]) -> Any:
    """Broadcast an array (already of the right dtype) to ``shape``, NumPy style."""
    xs = shape_of(x)
    if xs == shape:
        return x
    if not xs and not is_eager():
        return S.broadcast_in_dim_p.bind(x, shape=shape, broadcast_dimensions=())
    lead = len(shape) - len(xs)
    if lead < 0:
        raise FtransValueError(f"cannot broadcast an array of shape {xs} to the smaller rank of {shape}")
    for i, d in enumerate(xs):
        if d not in (1, shape[lead + i]):
            raise FtransValueError(f"cannot broadcast shape {xs} to {shape}")
    return S.broadcast_in_dim_p.bind(
        x, shape=tuple(shape), broadcast_dimensions=tuple(range(lead, len(shape)))
    )


def promote_dtypes(name: str, *args: Any) -> tuple[list, np.dtype, bool]:
    check_arraylike(name, *args)
    dt, weak = dtypes.promote(tuple(dtype_weak(a) for a in args))
    if weak:
        return [convert(a, dt, weak) for a in args], dt, weak
    # A weak traced operand of the right dtype joined with a strong one is made strong by a staged
    # conversion, as JAX stages it: its transpose gives the cotangent back its weak type.  (Eager
    # operands need none: the primitive's weak-type rule already makes the result strong.)
    return [S.convert_element_type_p.bind(a, new_dtype=dt, weak_type=False)
            if isinstance(a, Tracer) and a.weak_type and a.dtype == dt else convert(a, dt, False)
            for a in args], dt, weak


def promote_args(name: str, *args: Any) -> list:
    """Promote to one dtype and broadcast to one shape, ready for a strict elementwise primitive.

    Rank-0 operands are left unbroadcast: the elementwise primitives accept
    them (XLA's scalar broadcast), which keeps traced programs short.
    """
    if _trace.active_anywhere and library_entry is not None:
        args = library_entry(args)
    ops, _, _ = promote_dtypes(name, *args)
    return broadcast_operands(name, ops)


def broadcast_operands(name: str, ops: list) -> list:
    """Broadcast same-dtype operands for a strict elementwise primitive.

    Rank-0 operands stay rank-0 (the primitives accept them); eagerly the
    NumPy rules broadcast by themselves, so only compatibility is checked.
    """
    shapes = [shape_of(o) for o in ops]
    if all(s == shapes[0] for s in shapes):
        return ops
    nonscalar = [s for s in shapes if s]
    if _config.numpy_rank_promotion != "allow" and len({len(s) for s in nonscalar}) > 1:
        rank_promotion(name, shapes)
    shape = broadcast_shapes(name, nonscalar, ops) if nonscalar else ()
    if is_eager():
        return ops
    return [o if (s == shape or not s) else broadcast_to_shape(o, shape) for o, s in zip(ops, shapes)]


def rank_promotion(name: str, shapes: list) -> None:
    """JAX's ``numpy_rank_promotion`` option: operands of different ranks (rank-0 ones aside) are
    broadcast silently ("allow"), with a warning ("warn"), or not at all ("raise")."""
    import warnings

    from ftrans.errors import library_internal, user_frame

    if library_internal():  # a library function's own broadcasting, not the user's operands
        return
    listed = " ".join(str(tuple(s)) for s in shapes)
    if _config.numpy_rank_promotion == "warn":
        f = user_frame()
        # JAX's wording first (warning filters written for JAX match it), then what to do in ftrans.
        msg = (f"Following NumPy automatic rank promotion for {name} on shapes {listed}. Set the "
               "jax_numpy_rank_promotion config option to 'allow' (ftrans.config.update("
               "'jax_numpy_rank_promotion', 'allow')) to disable this warning, or add the missing leading axes "
               "explicitly (e.g. x[None, :] or jnp.expand_dims)")
        if f is None:
            warnings.warn(msg, stacklevel=user_stacklevel())
        else:  # attributed to the user's line, wherever in ftrans the broadcast happens
            warnings.warn_explicit(msg, UserWarning, f.f_code.co_filename, f.f_lineno,
                                   module=f.f_globals.get("__name__"), registry=f.f_globals.setdefault(
                                       "__warningregistry__", {}))
    elif _config.numpy_rank_promotion == "raise":
        raise FtransValueError(
            f"Operands could not be broadcast together for {name} on shapes {listed} and with the config "
            "option jax_numpy_rank_promotion='raise' (their ranks differ): add the missing leading axes "
            "explicitly (e.g. x[None, :] or jnp.expand_dims), or set ftrans.config.update("
            "'jax_numpy_rank_promotion', 'allow')")


def index_seq(x: Any) -> Any:
    """An int-or-sequence argument (an axis, a shape, ``tile``'s reps) as a sequence, read as JAX reads it: a
    tuple or list as it is, a NumPy or ftrans array of one or more dimensions element by element, anything
    else (an int, a 0-d array, a tracer, which the caller then refuses as not static) as one value."""
    if isinstance(x, (tuple, list)):
        return x
    if getattr(x, "ndim", 0) and isinstance(x, (np.ndarray, Array)):
        return tuple(x)
    return (x,)


def canonicalize_axis(name: str, axis: Any, ndim: int) -> int:
    try:
        ax = operator.index(axis)  # as JAX: a float axis (1.0) is a TypeError, not truncated
    except TypeError:
        raise FtransTypeError(f"{name}: axis must be an integer, got {type(axis).__name__}") from None
    if not -ndim <= ax < ndim:
        raise FtransValueError(
            f"{name}: axis {axis} is out of bounds for an array of dimension {ndim}"
        )
    return ax % ndim if ndim else 0


def canonicalize_axes(name: str, axis: Any, ndim: int) -> tuple[int, ...]:
    """``axis=None`` means all axes; ints and tuples of ints are normalised; repeats are errors."""
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, (list, tuple, range)):
        axes = tuple(canonicalize_axis(name, a, ndim) for a in axis)
    else:
        axes = (canonicalize_axis(name, axis, ndim),)
    if len(set(axes)) != len(axes):
        raise FtransValueError(f"{name}: repeated axis in {axis}")
    return axes


def aval_of(x: Any) -> ShapedArray:
    d, w = dtype_weak(x)
    return ShapedArray(shape_of(x), d, w)


def check_dtype_arg(dtype: Any) -> np.dtype | None:
    return None if dtype is None else dtypes.to_dtype(dtype)


def _standing_for(x: Any) -> Any:
    """What an object with JAX's ``__jax_array__`` protocol stands for (anything else as is; a symbolic
    dimension stays one: read as a size, it is a size, not the array it becomes in arithmetic)."""
    if not isinstance(x, (Array, Tracer, DimExpr)) and getattr(x, "__jax_array__", None) is not None:
        return x.__jax_array__()
    return x


def maybe_concrete(x: Any) -> Any:
    """``x``, or its concrete value when ``x`` is a tracer that has one (an autodiff tracer outside ``jit``).

    For arguments whose values decide shapes or Python-level choices (masks, sizes, repeats): such an
    argument carries no derivative, so reading its value is what JAX does too.  An object with
    ``__jax_array__`` is read through it.
    """
    x = _standing_for(x)
    if isinstance(x, Tracer):
        v = x.to_concrete_value()
        if v is not None:
            return v
    return x


def concrete_or_error(x: Any, what: str) -> Any:
    """A Python value for ``x`` when it is concrete (read through ``__jax_array__`` where it has one); a
    concretization error otherwise."""
    x = _standing_for(x)
    if isinstance(x, Tracer):
        v = x.to_concrete_value()
        if v is not None:
            return v._value
        from ftrans.errors import ConcretizationTypeError

        raise ConcretizationTypeError(
            f"{what} must be a concrete (static) value, but a traced array "
            f"{x.aval.str_short()} was given. Pass it as a static argument "
            "(static_argnums/static_argnames) or compute it with NumPy outside the traced function."
            + x._origin_msg()
        )
    if isinstance(x, Array):
        return x._value
    return x
