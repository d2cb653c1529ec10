"""``ftrans.lax`` on typed key arrays (``random.key``): the structural operations act on the key axes.

As ``ftrans/numpy/_keys.py`` for ``ftrans.numpy``: each operation translates its axes, shapes and start
indices from the key array's axes to those of its ``uint32`` base array (whose trailing axes are the
implementation's ``key_shape``), runs the plain operation on the base array and wraps the result;
``install`` puts these versions in front of the plain ones.  ``convert_element_type`` refuses to convert
keys to numbers and back (``random.key_data`` and ``random.wrap_key_data`` do that).
"""

from __future__ import annotations

import builtins
from typing import Any

import numpy as np

from ftrans.core import key_reuse as _kr
from ftrans.core.keys import (
    PRNGKeyArray,
    check_all_keys,
    is_key,
    is_key_dtype,
    key_dispatching,
    normalize_axis,
    unify,
)
from ftrans.errors import FtransValueError

_orig: dict[str, Any] = {}


def _ks(k: PRNGKeyArray) -> tuple[int, ...]:
    return k._key_tail


def _rewrap(k: PRNGKeyArray, base: Any) -> PRNGKeyArray:
    return _kr.alias(k, PRNGKeyArray(k._impl, base))  # a structural view shares k's consumption


def _pred_like(pred: Any, k: PRNGKeyArray) -> Any:
    """A predicate (or selector) over the keys, broadcast along the key-data axes of the base array."""
    shape = tuple(np.shape(pred))
    if not shape:
        return pred
    return _orig["broadcast_in_dim"](pred, tuple(k._base_array.shape), tuple(range(len(shape))))


def select(pred: Any, on_true: Any, on_false: Any) -> Any:
    impl = check_all_keys("lax.select", [on_true, on_false])
    on_true, on_false = unify([on_true, on_false])
    return PRNGKeyArray(impl, _orig["select"](_pred_like(pred, on_true), on_true._base_array,
                                              on_false._base_array))


def select_n(which: Any, *cases: Any) -> Any:
    impl = check_all_keys("lax.select_n", list(cases))
    cases = unify(list(cases))
    return PRNGKeyArray(impl, _orig["select_n"](_pred_like(which, cases[0]), *(c._base_array for c in cases)))


def slice(operand: Any, start_indices: Any, limit_indices: Any, strides: Any = None) -> Any:  # noqa: A001
    ks = _ks(operand)
    st = None if strides is None else (*strides, *(1,) * len(ks))
    out = PRNGKeyArray(operand._impl, _orig["slice"](operand._base_array, (*start_indices, *(0,) * len(ks)),
                                                     (*limit_indices, *ks), st))
    idx = tuple(builtins.slice(a, b, c) for a, b, c in zip(start_indices, limit_indices, strides or
                                                            (1,) * len(start_indices)))
    return _kr.taken(operand, idx, out)


def _with_axis(name: str, axis_pos: int, axis_kw: str = "axis", default: Any = 0):
    """A key version of ``name`` whose ``axis`` (positional ``axis_pos`` or keyword) is normalized against
    the key array's rank, the rest passed through."""
    def fn(operand: Any, *args: Any, **kwargs: Any) -> Any:
        args = list(args)
        if axis_kw in kwargs:
            kwargs[axis_kw] = normalize_axis(f"lax.{name}", kwargs[axis_kw], operand.ndim)
        elif len(args) > axis_pos:
            args[axis_pos] = normalize_axis(f"lax.{name}", args[axis_pos], operand.ndim)
        elif default is not None:
            kwargs[axis_kw] = normalize_axis(f"lax.{name}", default, operand.ndim)
        return _rewrap(operand, _orig[name](operand._base_array, *args, **kwargs))

    fn.__name__ = name
    return fn


def _update_with_axis(name: str):
    def fn(operand: Any, update: Any, index: Any, axis: int, **kwargs: Any) -> Any:
        impl = check_all_keys(f"lax.{name}", [operand, update])
        operand, update = unify([operand, update])
        ax = normalize_axis(f"lax.{name}", axis, operand.ndim)
        return PRNGKeyArray(impl, _orig[name](operand._base_array, update._base_array, index, ax, **kwargs))

    fn.__name__ = name
    return fn


def _zeros_like_index(start_indices: Any, n: int) -> list:
    """``n`` zero start indices of the dtype of ``start_indices`` (``lax`` wants one index dtype)."""
    items = list(start_indices)
    d = next((np.dtype(i.dtype) for i in items if hasattr(i, "dtype")), None)
    return [np.zeros((), d) if d is not None else 0 for _ in range(n)]


def _indices(start_indices: Any, k: PRNGKeyArray) -> Any:
    n = len(_ks(k))
    if hasattr(start_indices, "shape") and not isinstance(start_indices, (list, tuple)):
        start_indices = [start_indices[i] for i in range(start_indices.shape[0])]
    return [*start_indices, *_zeros_like_index(start_indices, n)]


def dynamic_slice(operand: Any, start_indices: Any, slice_sizes: Any, **kwargs: Any) -> Any:
    return _rewrap(operand, _orig["dynamic_slice"](operand._base_array, _indices(start_indices, operand),
                                                   (*slice_sizes, *_ks(operand)), **kwargs))


def dynamic_update_slice(operand: Any, update: Any, start_indices: Any, **kwargs: Any) -> Any:
    impl = check_all_keys("lax.dynamic_update_slice", [operand, update])
    operand, update = unify([operand, update])
    _kr.sink(update, "dynamic_update_slice", idx=1)  # JAX's signature: the update consumed, the operand forwarded
    return _kr.alias(operand, PRNGKeyArray(impl, _orig["dynamic_update_slice"](
        operand._base_array, update._base_array, _indices(start_indices, operand), **kwargs)))


def transpose(operand: Any, permutation: Any) -> Any:
    nd = operand.ndim
    perm = tuple(normalize_axis("lax.transpose", p, nd) for p in permutation)
    return _rewrap(operand, _orig["transpose"](operand._base_array,
                                               (*perm, *range(nd, nd + len(_ks(operand))))))


def reshape(operand: Any, new_sizes: Any, dimensions: Any = None, **kwargs: Any) -> Any:
    nd = operand.ndim
    dims = None if dimensions is None else (*dimensions, *range(nd, nd + len(_ks(operand))))
    return _rewrap(operand, _orig["reshape"](operand._base_array, (*new_sizes, *_ks(operand)), dims, **kwargs))


def broadcast(operand: Any, sizes: Any, **kwargs: Any) -> Any:
    return _rewrap(operand, _orig["broadcast"](operand._base_array, sizes, **kwargs))


def broadcast_in_dim(operand: Any, shape: Any, broadcast_dimensions: Any, **kwargs: Any) -> Any:
    n = len(shape)
    dims = (*broadcast_dimensions, *range(n, n + len(_ks(operand))))
    return _rewrap(operand, _orig["broadcast_in_dim"](operand._base_array, (*shape, *_ks(operand)), dims,
                                                      **kwargs))


def concatenate(operands: Any, dimension: int) -> Any:
    operands = list(operands)
    impl = check_all_keys("lax.concatenate", operands)
    operands = unify(operands)
    ax = normalize_axis("lax.concatenate", dimension, operands[0].ndim)
    return _kr.consumed_all(operands, "concatenate",
                            PRNGKeyArray(impl, _orig["concatenate"]([k._base_array for k in operands], ax)))


def squeeze(array: Any, dimensions: Any) -> Any:
    dims = tuple(normalize_axis("lax.squeeze", d, array.ndim) for d in dimensions)
    return _rewrap(array, _orig["squeeze"](array._base_array, dims))


def expand_dims(array: Any, dimensions: Any) -> Any:
    out_nd = array.ndim + len(dimensions)
    dims = tuple(normalize_axis("lax.expand_dims", d, out_nd) for d in dimensions)
    return _rewrap(array, _orig["expand_dims"](array._base_array, dims))


def rev(operand: Any, dimensions: Any) -> Any:
    dims = tuple(normalize_axis("lax.rev", d, operand.ndim) for d in dimensions)
    return _rewrap(operand, _orig["rev"](operand._base_array, dims))


def convert_element_type(operand: Any, new_dtype: Any) -> Any:
    src = operand.dtype if is_key(operand) else getattr(np.asarray(operand), "dtype", None)
    dst = new_dtype if is_key_dtype(new_dtype) else np.dtype(new_dtype if new_dtype is not int else np.int32)
    if is_key(operand) and is_key_dtype(new_dtype) and operand.dtype == new_dtype:
        return operand
    raise FtransValueError(
        f"Cannot convert_element_type from {getattr(src, 'name', src)} to {getattr(dst, 'name', dst)}: key "
        "arrays do not convert to or from numbers; use ftrans.random.key_data or ftrans.random.wrap_key_data")


def _first_is_key(args: Any, kwargs: Any) -> bool:
    return bool(args) and type(args[0]) is PRNGKeyArray


def _cases_are_keys(args: Any, kwargs: Any) -> bool:
    return any(type(a) is PRNGKeyArray for a in args[1:])


def _seq_has_key(args: Any, kwargs: Any) -> bool:
    seq = args[0] if args else kwargs.get("operands", ())
    return any(type(a) is PRNGKeyArray for a in seq)


def _convert_test(args: Any, kwargs: Any) -> bool:
    d = args[1] if len(args) > 1 else kwargs.get("new_dtype")
    return _first_is_key(args, kwargs) or is_key_dtype(d)


_TABLE = {
    "select": (select, _cases_are_keys), "select_n": (select_n, _cases_are_keys),
    "slice": (slice, _first_is_key),
    "slice_in_dim": (_with_axis("slice_in_dim", 3), _first_is_key),
    "index_in_dim": (_with_axis("index_in_dim", 1), _first_is_key),
    "dynamic_slice": (dynamic_slice, _first_is_key),
    "dynamic_slice_in_dim": (_with_axis("dynamic_slice_in_dim", 2), _first_is_key),
    "dynamic_index_in_dim": (_with_axis("dynamic_index_in_dim", 1), _first_is_key),
    "dynamic_update_slice": (dynamic_update_slice, _first_is_key),
    "dynamic_update_slice_in_dim": (_update_with_axis("dynamic_update_slice_in_dim"), _first_is_key),
    "dynamic_update_index_in_dim": (_update_with_axis("dynamic_update_index_in_dim"), _first_is_key),
    "transpose": (transpose, _first_is_key), "reshape": (reshape, _first_is_key),
    "broadcast": (broadcast, _first_is_key), "broadcast_in_dim": (broadcast_in_dim, _first_is_key),
    "concatenate": (concatenate, _seq_has_key), "squeeze": (squeeze, _first_is_key),
    "expand_dims": (expand_dims, _first_is_key), "rev": (rev, _first_is_key),
    "convert_element_type": (convert_element_type, _convert_test),
}


def install(namespace: dict) -> None:
    """Put the key-aware versions in front of ``namespace``'s (``ftrans.lax``'s) plain operations."""
    for name, (keyed, test) in _TABLE.items():
        plain = namespace[name]
        _orig[name] = plain
        namespace[name] = key_dispatching(plain, keyed, test)
