"""Array creation: ``array``, ``asarray``, ``zeros``, ``ones``, ``arange``, ..."""

from __future__ import annotations

from typing import Any

import numpy as np

from ftrans.core import dtypes
from ftrans.core.array import Array
from ftrans.core.prims import structural as S
from ftrans.core.trace import Tracer, state
from ftrans.errors import FtransTypeError
from ftrans.numpy._util import as_operand, check_dtype_arg, convert, dtype_weak

__all__ = ["array", "asarray", "zeros", "ones", "full", "empty", "zeros_like", "ones_like",
           "full_like", "empty_like"]


def _shape_arg(name: str, shape: Any) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)):
        shape = (int(shape),)
    try:
        out = tuple(int(d) if not isinstance(d, Tracer) else d.__index__() for d in shape)
    except TypeError:
        raise FtransTypeError(f"{name}: shape must be an int or a tuple of ints, got {shape!r}") from None
    if any(d < 0 for d in out):
        from ftrans.errors import FtransValueError

        raise FtransValueError(f"{name}: negative dimensions are not allowed, got shape {out}")
    return out


def _from_nested(obj: Any, dtype: np.dtype | None) -> Any:
    """A (possibly nested) list/tuple of scalars and arrays as one array."""
    leaves_traced = []

    def scan(o):
        if isinstance(o, (list, tuple)):
            for e in o:
                scan(e)
        elif isinstance(o, Tracer):
            leaves_traced.append(o)

    scan(obj)
    if not leaves_traced:
        def host(o):
            if isinstance(o, (list, tuple)):
                return [host(e) for e in o]
            if isinstance(o, Array):
                return o._value
            return o

        return np.asarray(host(obj)), _all_weak_scalars(obj)
    # Traced elements: stack them (after promoting) so the result stays traced.
    from ftrans.numpy._shape import stack

    return stack([asarray(e, dtype) if isinstance(e, (list, tuple)) else e for e in obj]), False


def _all_weak_scalars(obj: Any) -> bool:
    if isinstance(obj, (list, tuple)):
        return bool(obj) and all(_all_weak_scalars(e) for e in obj)
    return dtypes.is_weak_scalar(obj)


def _infer_dtype(obj: Any) -> tuple[np.dtype, bool]:
    """JAX's dtype for nested Python data: promotion over the leaves (weak Python scalars)."""
    leaves = []

    def scan(o):
        if isinstance(o, (list, tuple)):
            for e in o:
                scan(e)
        else:
            leaves.append(dtype_weak(o) if not isinstance(o, (str, bytes)) else None)

    scan(obj)
    if any(lv is None for lv in leaves):
        raise FtransTypeError("strings cannot be converted to ftrans arrays")
    if not leaves:
        return dtypes.default_float(), False
    return dtypes.promote(tuple(leaves))


def array(object: Any, dtype: Any = None, copy: bool = True, order: str | None = None,  # noqa: A002
          ndmin: int = 0) -> Any:
    """``jnp.array``: a new array from an array, scalar, or nested sequence."""
    d = check_dtype_arg(dtype)
    if order not in (None, "K", "C", "A"):
        raise NotImplementedError(f"jnp.array: order={order!r} is not supported")
    if isinstance(object, (Array, Tracer)):
        out = convert(object, d) if d is not None else object
    elif type(object) in (int, float, complex, bool) or isinstance(object, (np.ndarray, np.generic)):
        od, ow = dtype_weak(object)
        out = convert(object, d or od, ow if d is None else False)
    elif isinstance(object, (list, tuple)):
        inferred, weak = _infer_dtype(object)
        target = d or inferred
        val, _ = _from_nested(object, target)
        if isinstance(val, np.ndarray):
            with np.errstate(all="ignore"):
                out = Array(val.astype(target), weak and d is None)
        else:
            out = convert(val, target)
    elif hasattr(object, "__array__") or hasattr(object, "__jax_array__"):
        arr = np.asarray(object)
        out = convert(arr, d or dtypes.canonicalize(arr.dtype))
    else:
        raise FtransTypeError(f"jnp.array: cannot convert an object of type {type(object).__name__} to an array")
    if ndmin and out.ndim < ndmin:
        from ftrans.numpy._shape import reshape

        out = reshape(out, (1,) * (ndmin - out.ndim) + tuple(out.shape))
    if copy and type(out) is Array and out is object:
        out = Array._new(out._value, out.weak_type)
    return out


def asarray(a: Any, dtype: Any = None, order: str | None = None, *, copy: bool | None = None) -> Any:
    """``jnp.asarray``: like ``array`` but returns ``a`` itself when nothing changes."""
    if type(a) is Array and dtype is None:
        return a
    return array(a, dtype=dtype, copy=bool(copy), order=order)


def full(shape: Any, fill_value: Any, dtype: Any = None) -> Any:
    shape = _shape_arg("full", shape)
    d = check_dtype_arg(dtype)
    fv = as_operand(fill_value) if not isinstance(fill_value, (list, tuple)) else asarray(fill_value)
    if d is not None:
        fv = convert(fv, d)
    from ftrans.numpy._util import broadcast_to_shape, shape_of

    if state.eval_only and type(fv) is Array:
        return Array._new(np.broadcast_to(fv._value, shape), fv.weak_type if d is None else False)
    if not shape_of(fv) and not shape:
        return fv
    return broadcast_to_shape(fv, shape) if shape_of(fv) or shape else fv


def _filled(name: str, value: int):
    def fn(shape: Any, dtype: Any = None, *, device: Any = None) -> Array:
        shp = _shape_arg(name, shape)
        d = check_dtype_arg(dtype) or dtypes.default_float()
        if not state.eval_only:
            # Staged as a broadcast of a literal, so traced programs carry no big constants.
            return full(shp, value, d)
        return Array._new(np.full(shp, value, d), False)

    fn.__name__ = name
    fn.__doc__ = f"``jnp.{name}``: an array of {value}s (float32 unless ``dtype`` says otherwise)."
    return fn


zeros = _filled("zeros", 0)
ones = _filled("ones", 1)
empty = _filled("empty", 0)


def _like(name: str, value: int | None):
    def fn(a: Any, dtype: Any = None, shape: Any = None, **kw: Any) -> Any:
        if value is None:
            fill = kw.pop("fill_value")
        else:
            fill = value
        if kw:
            raise NotImplementedError(f"jnp.{name}: unsupported arguments {sorted(kw)}")
        x = as_operand(a)
        d = check_dtype_arg(dtype) or x.dtype
        shp = tuple(x.shape) if shape is None else _shape_arg(name, shape)
        if isinstance(fill, (Array, Tracer)) or not state.eval_only:
            return full(shp, fill, d)
        return Array._new(np.full(shp, fill, d), False)

    fn.__name__ = name
    return fn


zeros_like = _like("zeros_like", 0)
ones_like = _like("ones_like", 1)
empty_like = _like("empty_like", 0)
_full_like = _like("full_like", None)


def full_like(a: Any, fill_value: Any, dtype: Any = None, shape: Any = None) -> Any:
    return _full_like(a, dtype, shape, fill_value=fill_value)


del S
