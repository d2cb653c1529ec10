"""Array creation: ``array``, ``asarray``, ``zeros``, ``full``, ``arange``, ``linspace``, ``eye``, ...

Two rules shape this module.  Dtypes follow JAX, not NumPy: Python scalars are
weakly typed, nested lists are promoted over their leaves, and 64-bit types
narrow unless x64 is on.  And creation functions with static arguments stage
*computations* (``iota``, ``broadcast_in_dim`` of a literal), never large
constants, so a traced program stays small whatever the array size; only the
eager path materialises NumPy arrays directly, because that is cheapest.
"""

from __future__ import annotations

import functools
import operator
import warnings
from typing import Any

import numpy as np

from ftrans.core import dtypes
from ftrans.core import strings as _strings
from ftrans.core import trace as _trace
from ftrans.core.array import Array, DeviceArray, ShardedArray, from_foreign, is_foreign_array, loosen
from ftrans.core.avals import ShapeDtypeStruct
from ftrans.core.keys import is_user_edtype
from ftrans.core.operands import (
    as_operand,
    broadcast_shapes,
    broadcast_to_shape,
    canonicalize_axis,
    check_arraylike,
    concrete_or_error,
    dtype_weak,
    masked_array_error,
    maybe_concrete,
    scalar_to_array,
    shape_of,
)
from ftrans.core.prims import elementwise as E
from ftrans.core.prims import structural as S
from ftrans.core.shape_poly import DimExpr, as_dim
from ftrans.core.trace import Tracer, is_eager
from ftrans.errors import FtransTypeError, FtransValueError, user_stacklevel
from ftrans.numpy import _shape

__all__ = [
    "array", "asarray", "copy", "zeros", "ones", "full", "empty", "zeros_like", "ones_like",
    "full_like", "empty_like", "arange", "linspace", "logspace", "geomspace", "eye", "identity",
    "tri", "tril", "triu", "meshgrid", "diag", "diagflat",
]

_PY_SCALARS = (int, float, complex, bool)


# ---------------------------------------------------------------- helpers
def _dtype_arg(name: str, dtype: Any) -> np.dtype | None:
    """A user's ``dtype=`` (Python type, string, NumPy dtype) as a canonical dtype."""
    if dtype is None:
        return None
    try:
        return dtypes.requested(dtype, name)
    except TypeError as e:
        raise FtransTypeError(f"{name}: invalid dtype {dtype!r}: {e}") from None


def _dtype_weak_of(name: str, x: Any) -> tuple[np.dtype, bool]:
    """``dtype_weak`` that also accepts duck-typed arrays (``ShapeDtypeStruct``) and reports clearly."""
    try:
        return dtype_weak(x)
    except TypeError:
        pass
    if hasattr(x, "shape") and hasattr(x, "dtype"):
        try:
            return dtypes.canonicalize(x.dtype), bool(getattr(x, "weak_type", False))
        except TypeError as e:
            raise FtransTypeError(f"{name}: {e}") from None
    raise FtransTypeError(f"{name}: a value of type {type(x).__name__} is not an array")


def _frozen(arr: np.ndarray, weak: bool) -> Array:
    """Wrap a NumPy array this module owns, read-only so no view of it can change the Array."""
    arr = np.asarray(arr)
    arr.flags.writeable = False
    return Array._new(arr, weak)


def _scalar(value: Any, dtype: np.dtype) -> Array:
    """A strong rank-0 constant (staged as a literal, never as a captured buffer)."""
    with np.errstate(all="ignore"):
        return _frozen(np.asarray(value, dtype), False)


def retype(x: Any, dtype: np.dtype, weak: bool = False) -> Any:
    """``x`` as an array of exactly ``dtype`` and weak type ``weak``.

    Unlike ``_util.convert`` this also changes the weak flag when the dtype
    already matches, which ``jnp.array(x, dtype=...)`` needs (an explicit
    dtype always gives a strongly typed result).
    """
    t = type(x)
    if t is Array or isinstance(x, (Array, Tracer)):
        d, w = dtype_weak(x)
        if d == dtype and w == weak:
            return x
        if d == dtype and not isinstance(x, Tracer):
            return Array._new(x._value, weak)
        return S.convert_element_type_p.bind(x, new_dtype=dtype, weak_type=weak)
    if t in _PY_SCALARS:
        if t is float and dtype.kind in "iu":
            # XLA's float->int conversion: truncate, saturate, NaN -> 0.
            return _frozen(S.convert_element_type_p.impl(np.asarray(x), new_dtype=dtype, weak_type=weak), weak)
        if t is int and dtypes.is_inexact(dtype):  # an explicit inexact dtype takes any int (jnp.float32(2**40))
            return Array._new(np.asarray(float(x), dtype), weak)
        if t is int and dtype == np.bool_:
            return Array._new(np.asarray(bool(x)), weak)
        if t is int and dtype.kind in "iu" and np.iinfo(dtype).min <= x <= np.iinfo(dtype).max:
            # an explicit integer dtype takes any int it can hold (jnp.uint32(2**32 - 1)), as in JAX
            return Array._new(np.asarray(x, dtype), weak)
        return scalar_to_array(x, dtype, weak)
    if isinstance(x, (np.ndarray, np.generic)):
        # Always a copy: the caller may go on mutating its NumPy array.
        with np.errstate(all="ignore"):
            arr = np.array(x, dtype=dtype, copy=True)
        return _frozen(arr, weak)
    f = from_foreign(x)  # a jax.Array, or anything with __array__ / __dlpack__
    if f is not None:
        return retype(f, dtype, weak)
    raise FtransTypeError(f"a value of type {type(x).__name__} is not an array")


def _shape_arg(name: str, shape: Any) -> tuple[int, ...]:
    """A static shape: an int or a sequence of ints, each >= 0 (a TypeError otherwise, as in JAX)."""
    if isinstance(shape, Tracer):
        shape = maybe_concrete(shape)
    if isinstance(shape, Tracer):
        concrete_or_error(shape, f"{name}: the shape")
    seq = shape if isinstance(shape, (tuple, list)) else (shape,)
    if isinstance(shape, (np.ndarray, Array)) and np.ndim(shape) == 1:
        seq = list(shape)
    out = []
    for d in seq:
        if isinstance(d, Tracer):
            concrete_or_error(d, f"{name}: a dimension of the shape")
        try:
            out.append(as_dim(d))
        except TypeError:
            raise FtransTypeError(
                f"{name}: shapes must be an int or a sequence of concrete ints, got {shape!r}"
            ) from None
    if any(d < 0 for d in out):
        raise FtransTypeError(f"{name}: shape {tuple(out)} has a negative dimension; sizes must be >= 0")
    return tuple(out)


def _static_int(name: str, what: str, v: Any) -> int:
    v = concrete_or_error(v, f"{name}: argument '{what}'")
    try:
        return operator.index(v)
    except TypeError:
        raise FtransTypeError(f"{name}: argument '{what}' must be an integer, got {v!r}") from None


def _broadcast_scalar(v: Any, shape: tuple[int, ...]) -> Any:
    """A rank-0 array broadcast to ``shape`` (materialised eagerly, a broadcast_in_dim when staged)."""
    if not shape:
        return v
    if is_eager() and type(v) is Array:
        return _frozen(np.full(shape, v._value, v._value.dtype), v.weak_type)
    return S.broadcast_in_dim_p.bind(v, shape=shape, broadcast_dimensions=())


def _iota(dtype: np.dtype, shape: tuple[int, ...], dimension: int = 0) -> Any:
    return S.iota_p.bind(dtype=dtype, shape=tuple(shape), dimension=dimension)


def _to_inexact(d: np.dtype) -> np.dtype:
    return d if dtypes.is_inexact(d) else dtypes.default_float()


def _ew(prim: Any, x: Any, y: Any) -> Any:
    """A binary elementwise primitive on operands of one dtype, broadcasting NumPy style."""
    xs, ys = tuple(shape_of(x)), tuple(shape_of(y))
    if xs != ys and xs and ys:
        shape = broadcast_shapes(prim.name, [xs, ys])
        x, y = broadcast_to_shape(x, shape), broadcast_to_shape(y, shape)
    return prim.bind(x, y)


# ---------------------------------------------------------------- array / asarray
def _leaves(obj: Any, out: list) -> None:
    if isinstance(obj, (list, tuple)):
        for e in obj:
            _leaves(e, out)
    else:
        out.append(obj)


def _jax_array(obj: Any) -> Any:
    """Objects that define ``__jax_array__`` convert through it, as in JAX."""
    conv = getattr(obj, "__jax_array__", None)
    return conv() if conv is not None and not isinstance(obj, (Array, Tracer)) else obj


def _nested_dtype(leaves: list) -> np.dtype:
    """JAX's dtype for nested data: the promotion of its leaves (the result itself is strong)."""
    if not leaves:
        return dtypes.default_float()
    pairs = []
    for leaf in leaves:
        if isinstance(leaf, (str, bytes)):
            raise FtransTypeError(f"jnp.array: the string {leaf!r} cannot be converted to an array")
        pairs.append(_dtype_weak_of("jnp.array", leaf))
    return dtypes.promote(tuple(pairs))[0]


def _host(obj: Any) -> Any:
    if isinstance(obj, (list, tuple)):
        return [_host(e) for e in obj]
    return obj._value if isinstance(obj, Array) else obj


def _none_error() -> None:
    raise FtransValueError("None is not a valid value for jnp.array (as in JAX); use jnp.nan or a "
                           "masked value for missing entries")


def _from_sequence(obj: Any, dtype: np.dtype | None) -> Any:
    """A nested list/tuple as one array; traced elements are stacked so the result stays traced."""
    obj = _map_nested(_jax_array, obj)
    leaves: list = []
    _leaves(obj, leaves)
    if any(leaf is None for leaf in leaves):
        _none_error()
    target = dtype or _nested_dtype(leaves)
    if any(isinstance(leaf, Tracer) for leaf in leaves):
        return _stack_nested(obj, target)
    try:
        with np.errstate(all="ignore"):
            arr = np.asarray(_host(obj), dtype=target)
    except OverflowError:
        raise
    except (ValueError, TypeError) as e:
        raise FtransValueError(f"jnp.array: cannot build an array from this nested sequence: {e}") from None
    return _frozen(arr, False)


def _map_nested(fn: Any, obj: Any) -> Any:
    if isinstance(obj, (list, tuple)):
        return [_map_nested(fn, e) for e in obj]
    return fn(obj)


def _place(out: Any, device: Any) -> Any:
    """Honour ``device=``: the result is committed to that device, as in JAX. Traced, it is a
    ``device_put`` equation of the program (JAX's ``jnp.arange(..., device=d)`` stages one too): a
    sharding over a mesh lays the value out (``device_put``'s annotation), a device is the identity.
    """
    if device is None:
        return out
    from ftrans.devices import device_put

    return device_put(out, device)


def _on_context_mesh(out: Any, typed: bool) -> Any:
    """An array made eagerly under ``set_mesh``/``use_mesh`` lives on the context mesh, replicated, as JAX's
    (whose creation functions are programs placed there): over a mesh with Explicit axes a filled array is
    typed ``P(None, ...)`` (``typed``), what ``jnp.array`` makes ``P()``. Anything else as it is."""
    if not (type(out) is Array or (type(out) is DeviceArray and not out._committed)) or not is_eager():
        return out
    from ftrans.core.sharding import AxisType, NamedSharding, PartitionSpec, context_mesh

    mesh = context_mesh()
    if mesh is None or mesh.empty:
        return out
    from ftrans.devices import device_put

    typed = typed and AxisType.Explicit in mesh.axis_types
    return loosen(device_put(out, NamedSharding(mesh, PartitionSpec(*([None] * out.ndim if typed else ())))))


def _placed(fn: Any) -> Any:
    """Give ``fn``'s keyword ``device`` effect (the body builds the array; this places it)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        sharding = kwargs.pop("out_sharding", None)
        out = fn(*args, **kwargs)
        device = kwargs.get("device")
        if sharding is not None:  # laid out as given; over Explicit mesh axes, its sharding type
            if device is not None:
                raise FtransValueError(f"{fn.__name__}: only one of `device` or `out_sharding` can be set, got "
                                       f"device={device} and out_sharding={sharding}")
            from ftrans.lax._sharding import with_out_sharding

            return with_out_sharding(fn.__name__, sharding, lambda: out)
        if device is None:
            return _on_context_mesh(out, True) if _trace._mesh_eager else out
        return _place(out, device)

    return wrapper


def _stack_nested(obj: Any, target: np.dtype) -> Any:
    if not isinstance(obj, (list, tuple)):
        check_arraylike("jnp.array", obj)
        return retype(as_operand(obj), target, False)
    if not obj:
        return _frozen(np.zeros((0,), target), False)
    return _shape.stack([_stack_nested(e, target) for e in obj])


def _buffer_array(obj: Any) -> np.ndarray | None:
    """A NumPy array over an object with the buffer protocol (``bytearray``, ``array.array``,
    ``memoryview``), as JAX reads them; None for anything else."""
    try:
        view = memoryview(obj)
    except TypeError:
        return None
    return np.array(view)


def array(object: Any, dtype: Any = None, *args: Any, copy: bool = True, order: str | None = "K",  # noqa: A002
          ndmin: int = 0, device: Any = None, out_sharding: Any = None) -> Any:
    """Create an array from an array, a scalar, or a (nested) sequence of them.

    Unlike NumPy the result is an immutable ftrans `Array`, and the default dtypes are JAX's: 32-bit unless
    x64 is enabled. The result is weakly typed only when `dtype` is None and `object` is itself weak (a Python
    scalar or a weak array); lists never are. `copy`, `order` and `ndmin` given positionally still work, with
    JAX's DeprecationWarning.

    Args:
        object: Array, scalar, or nested sequence of them (or any object with `__array__`).
        dtype: Optional dtype of the result; by default it is inferred from `object` with JAX's rules.
        *args: Deprecated positional form of `copy`, `order` and `ndmin`.
        copy: If True (the default) the result is a new array; arrays are immutable, so this only matters for
            identity.
        order: Must be `'K'` (the default) or None; other layouts are not supported (NotImplementedError).
        ndmin: Minimum number of dimensions; leading size-1 axes are added as needed.
        device: Optional device (or sharding) to place the result on.
        out_sharding: Optional sharding that places the result as `device` does (at most one of the two may be
            given).
    Returns:
        A new array holding the data of `object`.

    Examples:
        >>> jnp.array([1, 2, 3])
        Array([1, 2, 3], dtype=int32)
        >>> jnp.array([[1.5, 2], [3, 4]])
        Array([[1.5, 2. ],
               [3. , 4. ]], dtype=float32)
        >>> jnp.array(2.0)
        Array(2., dtype=float32, weak_type=True)
        >>> jnp.array([1, 2], dtype=jnp.float32, ndmin=2)
        Array([[1., 2.]], dtype=float32)

    See also:
        `asarray` (no copy when nothing changes), `zeros`, `arange`.
    """
    if type(object) is np.ndarray and object.dtype == _FLOAT0 and (dtype is None or _is_float0(dtype)):
        # a float0 tangent or cotangent (jvp/vjp/grad of an integer) stays one, a NumPy array, as JAX's
        return _float0_array(object.shape)
    if device is not None and out_sharding is not None:
        raise FtransValueError(f"jnp.array: only one of `device` or `out_sharding` can be set, got "
                               f"device={device} and out_sharding={out_sharding}")
    device = device if out_sharding is None else out_sharding
    if args:
        copy, order, ndmin = _positional_array_args(args, copy, order, ndmin)
    try:
        d = _dtype_arg("jnp.array", dtype)
    except FtransTypeError:
        if not _strings.is_string_dtype(dtype):
            raise
        return _strings.from_numpy_checked(object, dtype, ndmin, device)  # (JAX's string arrays: data only)
    if order not in (None, "K"):
        raise NotImplementedError(f"jnp.array: order={order!r} is not supported (only 'K')")
    obj = _jax_array(object)
    if isinstance(obj, (Array, Tracer)):
        if copy and isinstance(obj, Tracer):  # a traced copy is a copy equation, as in JAX
            obj = E.copy_p.bind(obj)
        elif copy and isinstance(obj, (DeviceArray, ShardedArray)):  # new device buffers, laid out alike
            from ftrans.devices import device_put

            obj = device_put(obj, may_alias=False)
        out = obj if d is None else retype(obj, d, False)
    elif type(obj) in _PY_SCALARS or isinstance(obj, (np.ndarray, np.generic)):
        if isinstance(obj, np.ma.MaskedArray) and d is None and not copy:
            # As JAX: an uncopied masked array (jnp.asarray(m)) is refused; jnp.array(m) and a
            # dtype conversion read its data (the mask is dropped).
            raise masked_array_error("jnp.asarray" if copy is False else "jnp.array")
        # The range check is NumPy's integers' (JAX's too): a Python int given a 2- or 4-bit integer
        # dtype wraps, as in JAX.
        if type(obj) is int and d is not None and d.kind in "iu":
            info = np.iinfo(d)
            if not info.min <= obj <= info.max:
                raise OverflowError(f"Python integer {obj} out of bounds for {d.name}")
        try:
            od, ow = _dtype_weak_of("jnp.array", obj)
        except FtransTypeError:  # (refused dtypes): NumPy 2's StringDType makes a string array, JAX's rules
            if not _strings.is_string_array(obj):
                raise
            return _strings.from_numpy_checked(obj, dtype, ndmin, device)
        out = retype(obj, d or od, ow and d is None)
    elif isinstance(obj, (list, tuple)):
        out = _from_sequence(obj, d)
    elif isinstance(obj, (str, bytes)):
        raise FtransTypeError(f"jnp.array: the string {obj!r} cannot be converted to an array")
    elif is_foreign_array(obj):  # a jax.Array (kept on its device, uncopied unless copy=True), or
        f = from_foreign(obj, copy=copy)  # anything with __array__ / __dlpack__ (read and copied)
        if f is None:
            raise FtransTypeError(f"jnp.array: cannot convert an object of type {type(obj).__name__} "
                                  "(its __array__ gives an object array) to an array")
        out = f if d is None else retype(f, d, False)
    else:
        if obj is None:
            _none_error()
        if isinstance(obj, range):  # jnp.array(range(5)): JAX's docstring example; int32 (int64 with x64), strong
            vals = np.arange(obj.start, obj.stop, obj.step) if len(obj) else np.zeros(0)  # empty: float, as JAX
            return array(vals, dtype, copy=False, ndmin=ndmin, device=device)
        buf = _buffer_array(obj)
        if buf is None:
            hint = (": a Ref can't be passed where an array is expected; read its value with `ref[...]`"
                    if type(obj).__name__ == "Ref" else "")
            raise FtransTypeError(f"jnp.array: cannot convert an object of type {type(obj).__name__} to an "
                                  f"array{hint}")
        return array(buf, dtype, copy=False, ndmin=ndmin, device=device)
    nd = len(shape_of(out))
    if ndmin > nd:
        out = _shape.reshape(out, (1,) * (ndmin - nd) + tuple(shape_of(out)))
    if copy and out is object and type(out) is Array:
        out = Array._new(out._value, out.weak_type)
    if device is not None:
        _check_committed_devices(obj, device)
    if device is None:
        return _on_context_mesh(out, False) if _trace._mesh_eager else out
    return _place(out, device)


def _check_committed_devices(obj: Any, device: Any) -> None:
    """An array committed to some devices is not moved by ``device=`` to others (JAX raises, as for a jitted
    computation given arguments on different devices): ``device_put`` moves it."""
    if not getattr(obj, "committed", False) or isinstance(obj, Tracer):
        return
    from ftrans.core.sharding import as_sharding

    target = as_sharding(device)
    want = getattr(target, "device_set", None)
    if want is None:
        if not hasattr(device, "platform") or not hasattr(device, "id"):
            return  # a bare spec (laid out under the current mesh) or no placement: the placement reports it
        want = {device}
    have = obj.sharding.device_set
    if {d.id for d in have} != {d.id for d in want}:
        plat = next(iter(have)).platform.upper()
        raise FtransValueError(
            f"Received incompatible devices for jnp.array: the argument of shape {tuple(obj.shape)} is committed "
            f"to device ids {sorted(d.id for d in have)} on platform {plat}, and device= asks for device ids "
            f"{sorted(d.id for d in want)}; move it with ftrans.device_put first")


def _positional_array_args(args: tuple, copy: Any, order: Any, ndmin: Any) -> tuple:
    if len(args) > 3:
        raise FtransTypeError(f"array() takes at most 5 positional arguments but {len(args) + 2} were given")
    given = [copy, order, ndmin]
    for i, (name, default) in enumerate(zip(("copy", "order", "ndmin"), (True, "K", 0))):
        if i < len(args) and given[i] != default:
            raise FtransTypeError(f"array() got multiple values for argument '{name}'")
    warnings.warn("Passing the copy, order, and ndmin arguments to jnp.array positionally is deprecated. Use "
                  "keyword arguments instead.", DeprecationWarning, stacklevel=user_stacklevel())
    return tuple(list(args) + given[len(args):])


def asarray(a: Any, dtype: Any = None, order: str | None = None, *, copy: bool | None = None,
            device: Any = None, out_sharding: Any = None) -> Any:
    """Convert the input to an array, without copying when nothing needs to change.

    Like `array`, but returns `a` itself when it is already an ftrans array of the requested dtype.
    `out_sharding` places the result as `array`'s does.

    Args:
        a: Array, scalar, or nested sequence to convert.
        dtype: Optional dtype of the result; by default it is inferred from `a` with JAX's rules.
        order: Accepted for NumPy compatibility (the layout is always row-major).
        copy: If True, always make a new array; otherwise a copy is made only when needed.
        device: Optional device (or sharding) to place the result on.
        out_sharding: Optional sharding to lay the result out with (as JAX's `out_sharding`).
    Returns:
        An array with the data of `a`.

    Examples:
        >>> jnp.asarray([1, 2, 3])
        Array([1, 2, 3], dtype=int32)
        >>> x = jnp.arange(3)
        >>> jnp.asarray(x) is x
        True
        >>> jnp.asarray(np.array([1.0, 2.0]), dtype=jnp.int32)
        Array([1, 2], dtype=int32)

    See also:
        `array`.
    """
    if dtype is None and device is None and out_sharding is None and (type(a) is Array or isinstance(a, Tracer)):
        return a
    if dtype is not None and isinstance(a, Tracer) and is_user_edtype(a.aval.dtype):
        # an array of a user-defined extended dtype (``jnp.int8(x)``): convert_element_type's conversion
        from ftrans import lax

        return lax.convert_element_type(a, dtype)
    if copy is False and not isinstance(a, (Array, Tracer)) and not is_foreign_array(a):
        _check_no_copy_needed(a, device)
    if dtype is not None and dtypes.narrowed(dtype) is not None:  # JAX's warning names asarray, not array
        dtype = _dtype_arg("asarray", dtype)
    return array(a, dtype=dtype, copy=bool(copy), order=order, device=device, out_sharding=out_sharding)


def _check_no_copy_needed(a: Any, device: Any) -> None:
    """``asarray(copy=False)`` of a buffer-protocol object (the array API's rule, as JAX applies it): its
    host memory can become an array of a device other than the CPU only by copying, which copy=False
    forbids."""
    try:
        memoryview(a)
    except TypeError:
        return
    from ftrans.devices import default_device

    if device is None:
        platform = default_device().platform
    elif isinstance(device, str):
        platform = device
    elif hasattr(device, "platform"):
        platform = device.platform
    else:  # a sharding
        platform = next(iter(device.device_set)).platform
    if platform != "cpu":
        raise FtransValueError(
            f"jnp.asarray: cannot convert object of type {type(a)} to JAX Array on platform={platform} with "
            "copy=False. Consider using copy=None or copy=True instead.")


def copy(a: Any, order: str | None = None) -> Any:
    """Return a copy of an array.

    Arrays are immutable, so this is `array(a, copy=True)`; it is rarely needed.

    Args:
        a: Input array or array-like.
        order: Accepted for NumPy compatibility (the layout is always row-major).
    Returns:
        A new array equal to `a`, with its dtype.

    Examples:
        >>> x = jnp.array([1, 2, 3])
        >>> y = jnp.copy(x)
        >>> y
        Array([1, 2, 3], dtype=int32)
        >>> y is x
        False

    See also:
        `array`.
    """
    return array(a, copy=True, order=order)


# ---------------------------------------------------------------- filled arrays
@_placed
def full(shape: Any, fill_value: Any, dtype: Any = None, *, device: Any = None, out_sharding: Any = None) -> Any:
    """Return an array of the given shape filled with one value.

    The result is weakly typed when `dtype` is None and `fill_value` is a Python scalar, so it takes the other
    operand's dtype in mixed arithmetic, as in JAX. `fill_value` may also be an array that broadcasts to
    `shape`.

    Args:
        shape: An int or a tuple of ints (static).
        fill_value: Scalar or array broadcastable to `shape`.
        dtype: Optional dtype; by default that of `fill_value`.
        device: Optional device (or sharding) to place the result on.
        out_sharding: Optional sharding to lay the result out with (as JAX's `out_sharding`).
    Returns:
        An array of shape `shape` filled with `fill_value`.

    Examples:
        >>> jnp.full(3, 7)
        Array([7, 7, 7], dtype=int32, weak_type=True)
        >>> jnp.full((2, 2), 0.5)
        Array([[0.5, 0.5],
               [0.5, 0.5]], dtype=float32, weak_type=True)
        >>> jnp.full((2, 3), jnp.array([1, 2, 3]))
        Array([[1, 2, 3],
               [1, 2, 3]], dtype=int32)

    See also:
        `full_like`, `zeros`, `ones`.
    """
    shp = _shape_arg("full", shape)
    if _is_float0(dtype):
        return _float0_array(shp)
    d = _dtype_arg("full", dtype)
    if isinstance(fill_value, (list, tuple)) or np.ndim(_shape_probe(fill_value)) > 0:
        return _shape.broadcast_to(asarray(fill_value, dtype=d), shp)
    check_arraylike("full", fill_value)
    fd, fw = dtype_weak(fill_value)
    return _broadcast_scalar(retype(fill_value, d or fd, fw and d is None), shp)


def _shape_probe(x: Any) -> Any:
    """Something ``np.ndim`` can measure without converting a traced value."""
    return np.empty(shape_of(x), np.int8) if isinstance(x, (Array, Tracer)) else x


_FLOAT0 = np.dtype([("float0", np.void, 0)])  # JAX's float0 (the tangent type of integers), as NumPy spells it


def _is_float0(dtype: Any) -> bool:
    if dtype is None or isinstance(dtype, str):
        return False
    try:
        return np.dtype(dtype) == _FLOAT0
    except TypeError:
        return False


def _float0_array(shape: tuple) -> np.ndarray:
    """An array of float0 (it holds no data): a plain NumPy array, as JAX's creation functions give."""
    return np.zeros(shape, _FLOAT0)


def _filled(name: str, shape: Any, value: int, dtype: Any) -> Any:
    if isinstance(dtype, int) and not isinstance(dtype, bool) and isinstance(shape, int):
        # jnp.zeros(2, 3): the shape's second entry went to dtype
        raise FtransTypeError(
            f"{name}: invalid dtype {dtype!r}: an int is not a dtype. Did you accidentally write "
            f"`jax.numpy.{name}({shape}, {dtype})` when you meant `jax.numpy.{name}(({shape}, {dtype}))`, "
            "i.e. with the shape as a tuple?")
    shp = _shape_arg(name, shape)
    if _is_float0(dtype):
        return _float0_array(shp)
    d = _dtype_arg(name, dtype) or dtypes.default_float()
    if is_eager():
        return _frozen(np.full(shp, value, d), False)
    # Staged as a broadcast of a literal, so traced programs carry no big constants.
    return _broadcast_scalar(_scalar(value, d), shp)


@_placed
def zeros(shape: Any, dtype: Any = None, *, device: Any = None, out_sharding: Any = None) -> Any:
    """Return an array of the given shape filled with zeros.

    The default dtype is the default float (float32 unless x64 is on), as in JAX.

    Args:
        shape: An int or a tuple of ints (static).
        dtype: Optional dtype; defaults to the default float dtype.
        device: Optional device (or sharding) to place the result on.
        out_sharding: Optional sharding to lay the result out with (as JAX's `out_sharding`).
    Returns:
        An array of shape `shape` and dtype `dtype` filled with 0.

    Examples:
        >>> jnp.zeros(3)
        Array([0., 0., 0.], dtype=float32)
        >>> jnp.zeros((2, 2), dtype=jnp.int32)
        Array([[0, 0],
               [0, 0]], dtype=int32)

    See also:
        `zeros_like`, `ones`, `full`, `empty`.
    """
    return _filled("zeros", shape, 0, dtype)


@_placed
def ones(shape: Any, dtype: Any = None, *, device: Any = None, out_sharding: Any = None) -> Any:
    """Return an array of the given shape filled with ones.

    The default dtype is the default float (float32 unless x64 is on), as in JAX.

    Args:
        shape: An int or a tuple of ints (static).
        dtype: Optional dtype; defaults to the default float dtype.
        device: Optional device (or sharding) to place the result on.
        out_sharding: Optional sharding to lay the result out with (as JAX's `out_sharding`).
    Returns:
        An array of shape `shape` and dtype `dtype` filled with 1.

    Examples:
        >>> jnp.ones(3)
        Array([1., 1., 1.], dtype=float32)
        >>> jnp.ones((2, 3), dtype=bool)
        Array([[ True,  True,  True],
               [ True,  True,  True]], dtype=bool)

    See also:
        `ones_like`, `zeros`, `full`.
    """
    return _filled("ones", shape, 1, dtype)


@_placed
def empty(shape: Any, dtype: Any = None, *, device: Any = None, out_sharding: Any = None) -> Any:
    """Return an array of the given shape, filled with zeros.

    Arrays are immutable, so uninitialised memory would be useless: as in JAX, `empty` gives zeros.

    Args:
        shape: An int or a tuple of ints (static).
        dtype: Optional dtype; defaults to the default float dtype.
        device: Optional device (or sharding) to place the result on.
        out_sharding: Optional sharding to lay the result out with (as JAX's `out_sharding`).
    Returns:
        An array of shape `shape` and dtype `dtype` (all zeros).

    Examples:
        >>> jnp.empty(2)
        Array([0., 0.], dtype=float32)
        >>> jnp.empty((1, 2), dtype=jnp.int32)
        Array([[0, 0]], dtype=int32)

    See also:
        `zeros`, `empty_like`.
    """
    return _filled("empty", shape, 0, dtype)


def _like(name: str, a: Any, fill: Any, dtype: Any, shape: Any) -> Any:
    from ftrans.transforms.shard_map import like_vma

    return like_vma(a, _like_value(name, a, fill, dtype, shape))


def _like_value(name: str, a: Any, fill: Any, dtype: Any, shape: Any) -> Any:
    """``full_like`` and friends: ``a``'s dtype and shape, weak when ``a`` is and no dtype is given."""
    if getattr(a, "__jax_array__", None) is not None and not isinstance(a, (Array, Tracer)):
        # As JAX's: a duck-typed array's own shape and dtype when it has them, else what it stands for.
        if hasattr(a, "shape") and hasattr(a, "dtype"):
            a = ShapeDtypeStruct(tuple(a.shape), a.dtype)
        else:
            a = a.__jax_array__()
    if _is_float0(dtype) or (dtype is None and _is_float0(getattr(a, "dtype", None))):
        return _float0_array(tuple(np.shape(a)) if shape is None else _shape_arg(name, shape))
    ad, aw = _dtype_weak_of(name, a)
    d = _dtype_arg(name, dtype)
    shp = tuple(np.shape(a) if not hasattr(a, "shape") else a.shape) if shape is None else _shape_arg(name, shape)
    target = d or ad
    if isinstance(fill, (list, tuple)) or np.ndim(_shape_probe(fill)) > 0:
        out = _shape.broadcast_to(asarray(fill, dtype=target), shp)
    else:
        check_arraylike(name, fill)
        out = _broadcast_scalar(retype(fill, target, aw and d is None), shp)
    from ftrans.lax._extras import like_sharding

    sh = like_sharding(a, shp, aw and d is None, shape is None)  # lax.full_like's rule, as JAX's jnp follows it
    if sh is None:
        return out
    if isinstance(a, Tracer):  # a traced operand with a sharding type: the result has that type
        from ftrans.lax._sharding import with_out_sharding

        return with_out_sharding(name, sh, lambda: out)
    if not is_eager():
        m = getattr(sh, "mesh", None)
        if isinstance(a, ShapeDtypeStruct) and m is not None and not m.empty and m.are_all_axes_explicit:
            from ftrans.lax._sharding import with_out_sharding  # (its sharding type, as JAX's full_like)

            return with_out_sharding(name, sh, lambda: out)
        return out
    from ftrans.core.sharding import AbstractMesh, get_mesh
    from ftrans.devices import device_put

    if isinstance(getattr(sh, "mesh", None), AbstractMesh) and get_mesh() is None:
        return out  # (no devices to lay it out on)
    return device_put(out, sh)


@_placed
def zeros_like(a: Any, dtype: Any = None, shape: Any = None, *, device: Any = None) -> Any:
    """Return an array of zeros with the shape and dtype of another.

    The weak type of `a` is kept, unless `dtype` overrides it.

    Args:
        a: Array (or array-like) whose shape and dtype are used.
        dtype: Optional dtype to use instead of `a`'s.
        shape: Optional shape to use instead of `a`'s.
        device: Optional device (or sharding) to place the result on.
    Returns:
        An array of zeros with `a`'s (or the given) shape and dtype.

    Examples:
        >>> jnp.zeros_like(jnp.array([1, 2, 3]))
        Array([0, 0, 0], dtype=int32)
        >>> jnp.zeros_like(jnp.ones((2, 2)), dtype=bool)
        Array([[False, False],
               [False, False]], dtype=bool)

    See also:
        `zeros`, `ones_like`, `full_like`.
    """
    return _like("zeros_like", a, 0, dtype, shape)


@_placed
def ones_like(a: Any, dtype: Any = None, shape: Any = None, *, device: Any = None) -> Any:
    """Return an array of ones with the shape and dtype of another.

    The weak type of `a` is kept, unless `dtype` overrides it.

    Args:
        a: Array (or array-like) whose shape and dtype are used.
        dtype: Optional dtype to use instead of `a`'s.
        shape: Optional shape to use instead of `a`'s.
        device: Optional device (or sharding) to place the result on.
    Returns:
        An array of ones with `a`'s (or the given) shape and dtype.

    Examples:
        >>> jnp.ones_like(jnp.array([1.5, 2.5]))
        Array([1., 1.], dtype=float32)
        >>> jnp.ones_like(jnp.arange(4), shape=(2, 2))
        Array([[1, 1],
               [1, 1]], dtype=int32)

    See also:
        `ones`, `zeros_like`, `full_like`.
    """
    return _like("ones_like", a, 1, dtype, shape)


@_placed
def empty_like(prototype: Any, dtype: Any = None, shape: Any = None, *, device: Any = None) -> Any:
    """Return an array with the shape and dtype of another, filled with zeros.

    As in JAX (arrays are immutable) the result is zeros, not uninitialised memory.

    Args:
        prototype: Array (or array-like) whose shape and dtype are used.
        dtype: Optional dtype to use instead of `prototype`'s.
        shape: Optional shape to use instead of `prototype`'s.
        device: Optional device (or sharding) to place the result on.
    Returns:
        An array of zeros with `prototype`'s (or the given) shape and dtype.

    Examples:
        >>> jnp.empty_like(jnp.array([1, 2, 3]))
        Array([0, 0, 0], dtype=int32)

    See also:
        `zeros_like`, `empty`.
    """
    return _like("empty_like", prototype, 0, dtype, shape)


@_placed
def full_like(a: Any, fill_value: Any, dtype: Any = None, shape: Any = None, *, device: Any = None) -> Any:
    """Return an array filled with one value, with the shape and dtype of another.

    `fill_value` is cast to `a`'s dtype unless `dtype` is given.

    Args:
        a: Array (or array-like) whose shape and dtype are used.
        fill_value: Scalar or array broadcastable to the result's shape.
        dtype: Optional dtype to use instead of `a`'s.
        shape: Optional shape to use instead of `a`'s.
        device: Optional device (or sharding) to place the result on.
    Returns:
        An array of `a`'s (or the given) shape and dtype filled with `fill_value`.

    Examples:
        >>> jnp.full_like(jnp.array([1, 2, 3]), 9)
        Array([9, 9, 9], dtype=int32)
        >>> jnp.full_like(jnp.array([1, 2, 3]), 2.7)
        Array([2, 2, 2], dtype=int32)
        >>> jnp.full_like(jnp.zeros(2), 1, dtype=jnp.int32, shape=(2, 2))
        Array([[1, 1],
               [1, 1]], dtype=int32)

    See also:
        `full`, `zeros_like`, `ones_like`.
    """
    return _like("full_like", a, fill_value, dtype, shape)


# ---------------------------------------------------------------- ranges
def _arange_scalar(name: str, v: Any) -> Any:
    """A concrete, rank-0, non-complex value for an ``arange`` bound, as a Python number."""
    c = concrete_or_error(v, f"jnp.arange argument '{name}'")
    if np.ndim(c) != 0:
        raise FtransValueError(f"jnp.arange: arguments must be scalars; got {name} of shape {np.shape(c)}")
    if np.iscomplexobj(c):
        raise FtransValueError(f"jnp.arange: complex {name}={c!r} is not supported (as in JAX)")
    return c.item() if isinstance(c, (np.ndarray, np.generic)) else c


@_placed
def arange(start: Any, stop: Any = None, step: Any = None, dtype: Any = None, *, device: Any = None) -> Any:
    """Return evenly spaced values in the half-open interval `[start, stop)`.

    The bounds and step must be concrete (not traced), since they decide the length. Values are computed as
    `start + step * iota` in the result dtype rather than materialised by `np.arange`, which keeps traced
    programs free of large constants and gives JAX's rounding.

    Args:
        start: First value; if `stop` is None it is the stop and the range starts at 0.
        stop: End of the interval (excluded).
        step: Spacing between values (default 1).
        dtype: Optional dtype; by default inferred from the arguments (int32 or float32 unless x64 is on).
        device: Optional device (or sharding) to place the result on.
    Returns:
        A 1-D array of `ceil((stop - start) / step)` values.

    Examples:
        >>> jnp.arange(5)
        Array([0, 1, 2, 3, 4], dtype=int32)
        >>> jnp.arange(2, 8, 2)
        Array([2, 4, 6], dtype=int32)
        >>> jnp.arange(0.0, 1.0, 0.25)
        Array([0.  , 0.25, 0.5 , 0.75], dtype=float32)
        >>> jnp.arange(3, dtype=jnp.float32)
        Array([0., 1., 2.], dtype=float32)

    See also:
        `linspace` (a number of samples instead of a step).
    """
    d = _dtype_arg("arange", dtype)
    if any(isinstance(v, DimExpr) for v in (start, stop, step)):
        return _symbolic_arange(start, stop, step, d)
    check_arraylike("arange", *(v for v in (start, stop, step) if v is not None))
    start_name = "stop" if stop is None and step is None else "start"
    lo = _arange_scalar(start_name, start)
    hi = None if stop is None else _arange_scalar("stop", stop)
    st = None if step is None else _arange_scalar("step", step)
    if d is None:
        d = dtypes.promote(tuple(dtype_weak(v) for v in (start, stop, step) if v is not None))[0]
    if d == dtypes.bool_:
        raise FtransTypeError("jnp.arange: dtype bool is not supported; use an integer or float dtype")
    if d.kind == "c":  # as JAX: the real sequence, as complex numbers
        part = dtypes.float64 if d == dtypes.complex128 else dtypes.float32
        return retype(arange(start, stop, step, dtype=part), d, False)
    if hi is None:
        lo, hi = 0, lo
    if st is not None:
        if st == 0:
            raise FtransValueError("jnp.arange: step must not be zero")
        size = max(0, int(np.ceil((hi - lo) / st)))
        work = dtypes.float32 if dtypes.is_float(d) and d.itemsize < 4 else d
        out = _ew(E.add_p, _scalar(lo, work), _ew(E.mul_p, _scalar(st, work), _iota(work, (size,))))
        return retype(out, d, False)
    if lo == 0:
        return _iota(d, (max(0, int(np.ceil(hi))),))
    size = max(0, int(np.ceil(hi - lo)))
    return _ew(E.add_p, _scalar(lo, d), _iota(d, (size,)))


def _symbolic_arange(start: Any, stop: Any, step: Any, d: Any) -> Any:
    """``arange`` with a symbolic bound or step (shape polymorphism): integer bounds and step, the step's sign
    known statically, as JAX allows."""
    from ftrans.core.shape_poly import max_dim
    from ftrans.errors import InconclusiveDimensionOperation

    lo, hi = (0, start) if stop is None else (start, stop)
    st = 1 if step is None else step
    if not all(isinstance(v, (int, np.integer, DimExpr)) for v in (lo, hi, st)):
        raise FtransValueError("In arange with non-constant arguments all of start, stop, and step must be either "
                               f"dimension expressions or integers: start={start}, stop={stop}, step={step}")
    if isinstance(st, int | np.integer) and st == 0:
        raise FtransValueError("arange has step == 0")
    try:
        up = st > 0
    except InconclusiveDimensionOperation as e:
        raise InconclusiveDimensionOperation(
            f"In arange with non-constant arguments the step ({st}) must be resolved statically if it is > 0 "
            f"or < 0.\nDetails: {e}") from None
    gap, distance = (st, hi - lo) if up else (-st, lo - hi)
    size = max_dim(0, distance + gap - 1) // gap
    d = d if d is not None else dtypes.default_int()

    def value(v: Any) -> Any:
        if isinstance(v, DimExpr):
            return retype(S.dim_as_value_p.bind(dim=v), d, False)
        return _scalar(v, d)

    out = _iota(d, (size,))
    if not (isinstance(st, int | np.integer) and st == 1):
        out = _ew(E.mul_p, value(st), out)
    return out if isinstance(lo, int | np.integer) and lo == 0 else _ew(E.add_p, value(lo), out)


def _space_dtypes(name: str, start: Any, stop: Any, dtype: Any) -> tuple[np.dtype, np.dtype]:
    """(result dtype, computation dtype) for linspace/logspace/geomspace."""
    check_arraylike(name, start, stop)
    d = _dtype_arg(name, dtype)
    if d is None:
        d = _to_inexact(dtypes.promote((dtype_weak(start), dtype_weak(stop)))[0])
    return d, _to_inexact(d)


@_placed
def linspace(start: Any, stop: Any, num: int = 50, endpoint: bool = True, retstep: bool = False,
             dtype: Any = None, axis: int = 0, *, device: Any = None) -> Any:
    """Return `num` evenly spaced samples over the interval `[start, stop]`.

    Each value is `start * (1 - t) + stop * t` for `t = i / div`, which hits both ends exactly. `start` and
    `stop` may be arrays (even traced), giving one sequence per element along `axis`; `num` must be static.

    Args:
        start: Starting value(s).
        stop: End value(s); included unless `endpoint` is False.
        num: Number of samples (static, default 50).
        endpoint: Whether `stop` is the last sample.
        retstep: If True, also return the spacing between samples.
        dtype: Optional dtype; by default the inexact type of the inputs.
        axis: Axis of the result along which the samples lie, when `start`/`stop` are arrays.
        device: Optional device (or sharding) to place the result on.
    Returns:
        An array of `num` samples (with `start`/`stop`'s shape inserted at `axis`); with `retstep`, a pair
        `(samples, step)`.

    Examples:
        >>> jnp.linspace(0, 1, 5)
        Array([0.  , 0.25, 0.5 , 0.75, 1.  ], dtype=float32)
        >>> jnp.linspace(0, 1, 4, endpoint=False)
        Array([0.  , 0.25, 0.5 , 0.75], dtype=float32)
        >>> samples, step = jnp.linspace(0, 10, 3, retstep=True)
        >>> step
        Array(5., dtype=float32)

    See also:
        `arange`, `logspace`, `geomspace`.
    """
    if not isinstance(num, DimExpr):  # (a symbolic count is a size: its cases are decided as sizes are)
        num = _static_int("linspace", "num", num)
    if num < 0:
        raise FtransValueError(f"linspace: number of samples, {num}, must be non-negative")
    d, cd = _space_dtypes("linspace", start, stop, dtype)
    s, e = retype(as_operand(start), cd), retype(as_operand(stop), cd)
    bshape = broadcast_shapes("linspace", [tuple(shape_of(s)), tuple(shape_of(e))])
    s, e = broadcast_to_shape(s, bshape), broadcast_to_shape(e, bshape)
    ax = canonicalize_axis("linspace", axis, len(bshape) + 1)
    keep = list(bshape)
    keep.insert(ax, 1)
    div = num - 1 if endpoint else num

    def div_as(dt):
        return retype(div.__jax_array__(), dt) if isinstance(div, DimExpr) else _scalar(div, dt)

    if num > 1:
        delta = _ew(E.div_p, _ew(E.sub_p, e, s), div_as(cd))
        real = np.dtype(np.finfo(cd).dtype) if cd.kind == "c" else cd
        tshape = [1] * len(keep)
        tshape[ax] = div
        # JAX's ``t = i / div`` and ``start * (1 - t) + stop * t``, in the form XLA's simplifier compiles it to
        # (``t = i * (1 / div)``, ``stop * t`` as ``i * (stop * (1 / div))``), so that the values are JAX's to
        # the bit, eagerly as well (linspace(0., 25., 6)[3] is 15.0, where the plain form gives 15.000001).
        r = (_ew(E.div_p, _scalar(1, real), div_as(real)) if isinstance(div, DimExpr)
             else _scalar(np.asarray(1 / div, real), real))
        i = _shape.reshape(_iota(real, (div,)), tuple(tshape))
        t = retype(_ew(E.mul_p, i, r), cd)
        s1, e1 = _shape.reshape(s, tuple(keep)), _shape.reshape(e, tuple(keep))
        out = _ew(E.add_p, _ew(E.mul_p, s1, _ew(E.sub_p, _scalar(1, cd), t)),
                  _ew(E.mul_p, retype(i, cd), _ew(E.mul_p, e1, retype(r, cd))))
        if endpoint:
            out = _shape.concatenate([out, e1], axis=ax)
    elif num == 1:
        delta = _scalar(np.nan, cd) if endpoint else _ew(E.sub_p, e, s)
        out = _shape.reshape(s, tuple(keep))
    else:
        delta = _scalar(np.nan, cd)
        zshape = list(bshape)
        zshape.insert(ax, 0)
        out = zeros(tuple(zshape), cd)
    if dtypes.is_int(d) and dtypes.is_float(cd):
        out = E.floor_p.bind(out)
    result = retype(out, d, False)
    return (result, delta) if retstep else result


def logspace(start: Any, stop: Any, num: int = 50, endpoint: bool = True, base: Any = 10.0,
             dtype: Any = None, axis: int = 0) -> Any:
    """Return numbers spaced evenly on a log scale.

    This is `base ** linspace(start, stop, num)`, computed in the inexact dtype.

    Args:
        start: `base ** start` is the first value.
        stop: `base ** stop` is the last value (unless `endpoint` is False).
        num: Number of samples (static, default 50).
        endpoint: Whether `base ** stop` is included.
        base: Base of the log space (default 10).
        dtype: Optional dtype; by default the inexact type of the inputs.
        axis: Axis of the result along which the samples lie, when the bounds are arrays.
    Returns:
        An array of `num` samples.

    Examples:
        >>> jnp.logspace(0, 3, 4)
        Array([   1.,   10.,  100., 1000.], dtype=float32)
        >>> jnp.logspace(0, 3, 4, base=2)
        Array([1., 2., 4., 8.], dtype=float32)

    See also:
        `geomspace`, `linspace`.
    """
    from ftrans.numpy._elementwise import power

    d, cd = _space_dtypes("logspace", start, stop, dtype)
    lin = linspace(retype(as_operand(start), cd), retype(as_operand(stop), cd), num,
                   endpoint=endpoint, axis=axis)
    return retype(power(base, lin), d, False)


def geomspace(start: Any, stop: Any, num: int = 50, endpoint: bool = True, dtype: Any = None,
              axis: int = 0) -> Any:
    """Return numbers spaced evenly on a log scale, given the end values themselves.

    Both ends must have the same sign, which the result keeps.

    Args:
        start: First value of the sequence (nonzero).
        stop: Last value of the sequence (unless `endpoint` is False).
        num: Number of samples (static, default 50).
        endpoint: Whether `stop` is included.
        dtype: Optional dtype; by default the inexact type of the inputs.
        axis: Axis of the result along which the samples lie, when the bounds are arrays.
    Returns:
        An array of `num` samples forming a geometric progression.

    Examples:
        >>> jnp.geomspace(1, 1000, 4)
        Array([   1.,   10.,  100., 1000.], dtype=float32)
        >>> jnp.geomspace(-1, -16, 5)
        Array([ -1.       ,  -2.       ,  -4.0000005,  -8.       , -16.000002 ], dtype=float32)

    See also:
        `logspace`, `linspace`.
    """
    from ftrans.numpy._elementwise import log10, multiply, sign, true_divide

    d, cd = _space_dtypes("geomspace", start, stop, dtype)
    s, e = retype(as_operand(start), cd), retype(as_operand(stop), cd)
    sgn = sign(s)
    res = multiply(sgn, logspace(log10(true_divide(s, sgn)), log10(true_divide(e, sgn)), num,
                                 endpoint=endpoint, base=10.0, dtype=cd, axis=0))
    nd = len(shape_of(res))
    ax = canonicalize_axis("geomspace", axis, nd)
    if ax:
        res = _shape.moveaxis(res, 0, ax)
    return retype(res, d, False)


# ---------------------------------------------------------------- matrices
def _dim(name: str, what: str, n: Any) -> int:
    if isinstance(n, DimExpr):
        return n
    v = _static_int(name, what, n)
    if v < 0:
        raise FtransValueError(f"{name}: negative dimensions are not allowed, got {what}={v}")
    return v


def _offset_arg(name: str, k: Any) -> Any:
    """The diagonal offset: a static int, or (where JAX allows it) a traced integer scalar."""
    if isinstance(k, Tracer):
        if k.shape != () or not dtypes.is_int(k.dtype):
            raise FtransTypeError(f"{name}: k must be an integer scalar, got {k.aval.str_short()}")
        return retype(k, dtypes.int32)
    if isinstance(k, DimExpr):  # a symbolic offset: its value, computed when the program runs
        return retype(k.__jax_array__(), dtypes.int32)
    return _static_int(name, "k", k)


def _diagonal_mask(name: str, n: int, m: int, k: Any, prim: Any) -> Any:
    """Boolean ``prim(row + k, col)`` over an ``(n, m)`` grid, built from iotas (no constants)."""
    rows = _iota(dtypes.int32, (n, m), 0)
    cols = _iota(dtypes.int32, (n, m), 1)
    if isinstance(k, Tracer) or k != 0:
        rows = _ew(E.add_p, rows, k if isinstance(k, Tracer) else _scalar(k, dtypes.int32))
    return prim.bind(rows, cols)


@_placed
def eye(N: Any, M: Any = None, k: Any = 0, dtype: Any = None, *, device: Any = None) -> Any:
    """Return a 2-D array with ones on a diagonal and zeros elsewhere.

    Built as a comparison of two iotas (not a stored constant), so it is cheap under `jit`.

    Args:
        N: Number of rows.
        M: Number of columns (default `N`).
        k: Index of the diagonal: 0 is the main one, positive values are above it, negative below.
        dtype: Optional dtype; defaults to the default float dtype.
        device: Optional device (or sharding) to place the result on.
    Returns:
        An `(N, M)` array with ones on the `k`-th diagonal.

    Examples:
        >>> jnp.eye(3)
        Array([[1., 0., 0.],
               [0., 1., 0.],
               [0., 0., 1.]], dtype=float32)
        >>> jnp.eye(2, 3, k=1, dtype=jnp.int32)
        Array([[0, 1, 0],
               [0, 0, 1]], dtype=int32)

    See also:
        `identity`, `diag`, `tri`.
    """
    n = _dim("eye", "N", N)
    m = n if M is None else _dim("eye", "M", M)
    d = _dtype_arg("eye", dtype) or dtypes.default_float()
    k = _offset_arg("eye", k)
    if not isinstance(k, Tracer):  # JAX's eye takes any Python int: past an edge no diagonal element is set
        k = max(-n, min(m, k))
    return retype(_diagonal_mask("eye", n, m, k, E.eq_p), d)


def identity(n: Any, dtype: Any = None) -> Any:
    """Return the square identity matrix.

    Args:
        n: Number of rows and columns.
        dtype: Optional dtype; defaults to the default float dtype.
    Returns:
        An `(n, n)` array with ones on the main diagonal.

    Examples:
        >>> jnp.identity(2)
        Array([[1., 0.],
               [0., 1.]], dtype=float32)
        >>> jnp.identity(3, dtype=bool)
        Array([[ True, False, False],
               [False,  True, False],
               [False, False,  True]], dtype=bool)

    See also:
        `eye`.
    """
    return eye(n, dtype=_dtype_arg("identity", dtype))  # (JAX's warning for a 64-bit dtype names identity)


def tri(N: Any, M: Any = None, k: Any = 0, dtype: Any = None) -> Any:
    """Return an array with ones at and below a diagonal and zeros elsewhere.

    Args:
        N: Number of rows.
        M: Number of columns (default `N`).
        k: The diagonal at and below which the array is filled: 0 is the main one, positive values are above
            it.
        dtype: Optional dtype; defaults to the default float dtype.
    Returns:
        An `(N, M)` array of that lower-triangular pattern.

    Examples:
        >>> jnp.tri(3)
        Array([[1., 0., 0.],
               [1., 1., 0.],
               [1., 1., 1.]], dtype=float32)
        >>> jnp.tri(2, 3, k=1, dtype=jnp.int32)
        Array([[1, 1, 0],
               [1, 1, 1]], dtype=int32)

    See also:
        `tril`, `triu`.
    """
    n = _dim("tri", "N", N)
    m = n if M is None else _dim("tri", "M", M)
    d = _dtype_arg("tri", dtype) or dtypes.default_float()
    return retype(_diagonal_mask("tri", n, m, _offset_arg("tri", k), E.ge_p), d)


def _triangle(name: str, m: Any, k: Any, lower: bool) -> Any:
    check_arraylike(name, m)
    x = as_operand(m)
    shp = tuple(shape_of(x))
    if len(shp) < 2:
        raise FtransValueError(f"{name}: the argument must be at least 2-D, got shape {shp}")
    kk = _offset_arg(name, k)
    if not lower:
        kk = _ew(E.sub_p, kk, _scalar(1, dtypes.int32)) if isinstance(kk, Tracer) else kk - 1
    mask = _diagonal_mask(name, shp[-2], shp[-1], kk, E.ge_p)
    if len(shp) > 2:
        mask = S.broadcast_in_dim_p.bind(mask, shape=shp, broadcast_dimensions=(len(shp) - 2, len(shp) - 1))
    d, w = dtype_weak(x)
    zero = _broadcast_scalar(retype(0, d, w), shp)
    # select_n picks case 0 where the mask is False.
    return S.select_n_p.bind(mask, zero, x) if lower else S.select_n_p.bind(mask, x, zero)


def tril(m: Any, k: Any = 0) -> Any:
    """Return the lower triangle of a matrix (or of a stack of matrices).

    Everything above the `k`-th diagonal of the last two axes is set to zero.

    Args:
        m: Array with at least 2 dimensions.
        k: Diagonal above which to zero elements: 0 is the main one, positive values are above it.
    Returns:
        An array of `m`'s shape and dtype.

    Examples:
        >>> x = jnp.arange(1, 10).reshape(3, 3)
        >>> jnp.tril(x)
        Array([[1, 0, 0],
               [4, 5, 0],
               [7, 8, 9]], dtype=int32)
        >>> jnp.tril(x, k=-1)
        Array([[0, 0, 0],
               [4, 0, 0],
               [7, 8, 0]], dtype=int32)

    See also:
        `triu`, `tri`.
    """
    return _triangle("tril", m, k, lower=True)


def triu(m: Any, k: Any = 0) -> Any:
    """Return the upper triangle of a matrix (or of a stack of matrices).

    Everything below the `k`-th diagonal of the last two axes is set to zero.

    Args:
        m: Array with at least 2 dimensions.
        k: Diagonal below which to zero elements: 0 is the main one, positive values are above it.
    Returns:
        An array of `m`'s shape and dtype.

    Examples:
        >>> x = jnp.arange(1, 10).reshape(3, 3)
        >>> jnp.triu(x)
        Array([[1, 2, 3],
               [0, 5, 6],
               [0, 0, 9]], dtype=int32)
        >>> jnp.triu(x, k=1)
        Array([[0, 2, 3],
               [0, 0, 6],
               [0, 0, 0]], dtype=int32)

    See also:
        `tril`.
    """
    return _triangle("triu", m, k, lower=False)


def meshgrid(*xi: Any, copy: bool = True, sparse: bool = False, indexing: str = "xy") -> list:
    """Return coordinate grids built from 1-D coordinate vectors.

    Args:
        *xi: 1-D arrays of coordinates, one per dimension.
        copy: Accepted for NumPy compatibility (arrays are immutable).
        sparse: If True, return broadcastable arrays with size-1 axes instead of full grids.
        indexing: `'xy'` (Cartesian, the default: the first two output axes are swapped) or `'ij'` (matrix
            indexing).
    Returns:
        A list of `len(xi)` arrays, one per coordinate.

    Examples:
        >>> x, y = jnp.meshgrid(jnp.array([1, 2, 3]), jnp.array([10, 20]))
        >>> x
        Array([[1, 2, 3],
               [1, 2, 3]], dtype=int32)
        >>> y
        Array([[10, 10, 10],
               [20, 20, 20]], dtype=int32)
        >>> [g.shape for g in jnp.meshgrid(jnp.arange(3), jnp.arange(2), indexing="ij")]
        [(3, 2), (3, 2)]
        >>> [g.shape for g in jnp.meshgrid(jnp.arange(3), jnp.arange(2), sparse=True)]
        [(1, 3), (2, 1)]

    See also:
        `indices`, `ix_`.
    """
    check_arraylike("meshgrid", *xi)
    if indexing not in ("xy", "ij"):
        raise FtransValueError(f"meshgrid: valid values for indexing are 'xy' and 'ij', got {indexing!r}")
    args = [as_operand(x) for x in xi]
    shapes = [tuple(shape_of(a)) for a in args]
    if any(len(s) != 1 for s in shapes):
        raise FtransValueError(f"meshgrid: arguments must be 1-D, got shapes {shapes}")
    n = len(args)
    dims = list(range(n))
    if indexing == "xy" and n >= 2:
        dims[0], dims[1] = 1, 0
    out_shape = [0] * n
    for a, dim in zip(args, dims):
        out_shape[dim] = shape_of(a)[0]
    out = []
    for a, dim in zip(args, dims):
        if sparse:
            s = [1] * n
            s[dim] = out_shape[dim]
            out.append(_shape.reshape(a, tuple(s)))
        else:
            out.append(S.broadcast_in_dim_p.bind(a, shape=tuple(out_shape), broadcast_dimensions=(dim,)))
    return out


def diag(v: Any, k: int = 0) -> Any:
    """Extract a diagonal of a matrix, or build a diagonal matrix from a vector.

    A 1-D input becomes a square matrix with it on the `k`-th diagonal; a 2-D input gives its `k`-th diagonal.

    Args:
        v: A 1-D or 2-D array.
        k: Index of the diagonal: 0 is the main one, positive values are above it, negative below.
    Returns:
        For 1-D `v`, a 2-D array of size `len(v) + abs(k)` per side; for 2-D `v`, the 1-D diagonal.

    Examples:
        >>> jnp.diag(jnp.array([1, 2]))
        Array([[1, 0],
               [0, 2]], dtype=int32)
        >>> jnp.diag(jnp.arange(9).reshape(3, 3), k=1)
        Array([1, 5], dtype=int32)

    See also:
        `diagonal`, `diagflat`, `eye`.
    """
    check_arraylike("diag", v)
    x = as_operand(v)
    kk = _static_int("diag", "k", k)
    shp = tuple(shape_of(x))
    if len(shp) == 1:
        return _diag_from_vector(x, kk)
    if len(shp) == 2:
        # Strongly typed, as JAX's (gather-based) diagonal is.
        return retype(_diagonal_2d(x, kk), dtype_weak(x)[0], False)
    raise FtransValueError(f"diag: the input must be 1-D or 2-D, got shape {shp}")


def _diag_from_vector(x: Any, k: int) -> Any:
    n = shape_of(x)[0] + abs(k)
    d, w = dtype_weak(x)
    zero = retype(0, d, w)
    # Pad so that column j of the square holds the element destined for it.
    padded = S.pad_p.bind(x, zero, padding_config=((max(k, 0), max(-k, 0), 0),))
    rows = S.broadcast_in_dim_p.bind(padded, shape=(n, n), broadcast_dimensions=(1,))
    mask = _diagonal_mask("diag", n, n, k, E.eq_p)
    return S.select_n_p.bind(mask, _broadcast_scalar(zero, (n, n)), rows)


def _diagonal_2d(x: Any, k: int) -> Any:
    """The ``k``-th diagonal as one strided slice of the flattened matrix (no gather needed)."""
    n, m = shape_of(x)
    length = max(0, min(n, m - k)) if k >= 0 else max(0, min(n + k, m))
    flat = _shape.reshape(x, (n * m,))
    if length == 0:
        return S.slice_p.bind(flat, start_indices=(0,), limit_indices=(0,), strides=(1,))
    first = k if k >= 0 else -k * m
    return S.slice_p.bind(flat, start_indices=(first,), limit_indices=(first + (length - 1) * (m + 1) + 1,),
                          strides=(m + 1,))


def diagflat(v: Any, k: int = 0) -> Any:
    """Build a 2-D array with the flattened input on a diagonal.

    As in JAX the result is strongly typed.

    Args:
        v: Input array of any shape; it is flattened.
        k: Index of the diagonal: 0 is the main one, positive values are above it, negative below.
    Returns:
        A square 2-D array with the elements of `v` on the `k`-th diagonal.

    Examples:
        >>> jnp.diagflat(jnp.array([[1, 2], [3, 4]]))
        Array([[1, 0, 0, 0],
               [0, 2, 0, 0],
               [0, 0, 3, 0],
               [0, 0, 0, 4]], dtype=int32)

    See also:
        `diag`.
    """
    check_arraylike("diagflat", v)
    out = diag(_shape.ravel(as_operand(v)), k)
    return retype(out, dtype_weak(out)[0], False)
