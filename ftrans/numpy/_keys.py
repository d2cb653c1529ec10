"""``ftrans.numpy`` on typed key arrays (``random.key``): the structural functions act on the key axes.

A key array's base array is its ``uint32`` data with the implementation's ``key_shape`` as trailing
axes, so every structural function here translates its arguments (axes, shapes, indices, conditions)
from the key array's axes to the base array's and wraps the result again.  ``install`` replaces the
public functions of ``ftrans.numpy`` by versions that take this path when an argument is a key array
and call the plain function otherwise.  Numeric functions refuse key arrays (``core/operands``).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from ftrans.core import key_reuse as _kr
from ftrans.core import keys as K
from ftrans.core.keys import PRNGKeyArray, is_key
from ftrans.errors import FtransIndexError, FtransTypeError, FtransValueError

_orig: dict[str, Any] = {}


def _f(name: str) -> Any:
    return _orig[name]


def _nd(k: PRNGKeyArray) -> int:
    return k._key_ndim


def _wrap_like(k: PRNGKeyArray, base: Any) -> PRNGKeyArray:
    return _kr.alias(k, PRNGKeyArray(k._impl, base))  # a structural view shares k's consumption


def _shape_arg(name: str, shape: Any) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)):
        return (operator.index(shape),)
    try:
        return tuple(operator.index(d) for d in shape)
    except TypeError:
        raise FtransTypeError(f"{name}: shape must be a sequence of integers, got {shape!r}") from None


# ---------------------------------------------------------------- shape functions
def reshape(a: Any, shape: Any = None, order: str = "C", *, newshape: Any = None, copy: Any = None) -> Any:
    if shape is None:
        shape = newshape
    s = list(_shape_arg("reshape", shape))
    if s.count(-1) == 1:
        known = math.prod(d for d in s if d != -1)
        s[s.index(-1)] = a.size // known if known else 0
    if math.prod(s) != a.size:
        raise FtransTypeError(
            f"reshape: cannot reshape a key array of shape {a.shape} (size {a.size}) into shape {tuple(s)}")
    return _wrap_like(a, _f("reshape")(a._base_array, (*s, *a._key_tail), order=order))


def ravel(a: Any, order: str = "C") -> Any:
    return reshape(a, (a.size,), order=order)


def transpose(a: Any, axes: Any = None) -> Any:
    nd = a.ndim
    perm = tuple(reversed(range(nd))) if axes is None else tuple(
        K.normalize_axis("transpose", ax, nd) for ax in axes)
    if sorted(perm) != list(range(nd)):
        raise FtransValueError(f"transpose: axes {tuple(axes)} are not a permutation of the {nd} key axes")
    return _wrap_like(a, _f("transpose")(a._base_array, (*perm, *range(nd, nd + _nd(a)))))


def swapaxes(a: Any, axis1: int, axis2: int) -> Any:
    nd = a.ndim
    i, j = K.normalize_axis("swapaxes", axis1, nd), K.normalize_axis("swapaxes", axis2, nd)
    perm = list(range(nd))
    perm[i], perm[j] = perm[j], perm[i]
    return transpose(a, perm)


def moveaxis(a: Any, source: Any, destination: Any) -> Any:
    nd = a.ndim
    src = [K.normalize_axis("moveaxis", s, nd) for s in np.atleast_1d(source).tolist()]
    dst = [K.normalize_axis("moveaxis", s, nd) for s in np.atleast_1d(destination).tolist()]
    return _wrap_like(a, _f("moveaxis")(a._base_array, src, dst))


def squeeze(a: Any, axis: Any = None) -> Any:
    nd = a.ndim
    if axis is None:
        axes = tuple(i for i, d in enumerate(a.shape) if d == 1)
    else:
        axes = tuple(K.normalize_axis("squeeze", ax, nd) for ax in np.atleast_1d(axis).tolist())
    return _wrap_like(a, _f("squeeze")(a._base_array, axes))


def expand_dims(a: Any, axis: Any) -> Any:
    axes = np.atleast_1d(axis).tolist()
    out_nd = a.ndim + len(axes)
    axes = tuple(K.normalize_axis("expand_dims", ax, out_nd) for ax in axes)
    return _wrap_like(a, _f("expand_dims")(a._base_array, axes))


def broadcast_to(array: Any, shape: Any) -> Any:
    s = _shape_arg("broadcast_to", shape)
    return _wrap_like(array, _f("broadcast_to")(array._base_array, (*s, *array._key_tail)))


def broadcast_arrays(*args: Any) -> list:
    shape = np.broadcast_shapes(*(tuple(np.shape(a)) for a in args))
    return [broadcast_to(a, shape) if is_key(a) else _f("broadcast_to")(a, shape) for a in args]


def concatenate(arrays: Any, axis: int | None = 0, dtype: Any = None) -> Any:
    arrays = list(arrays)
    impl = K.check_all_keys("concatenate", arrays)
    arrays = K.unify(arrays)
    if axis is None:
        arrays, axis = [ravel(k) for k in arrays], 0
    nd = arrays[0].ndim
    if nd == 0:
        raise FtransValueError("concatenate: zero-dimensional key arrays cannot be concatenated")
    ax = K.normalize_axis("concatenate", axis, nd)
    return _kr.consumed_all(arrays, "concatenate",
                            PRNGKeyArray(impl, _f("concatenate")([k._base_array for k in arrays], axis=ax)))


def stack(arrays: Any, axis: int = 0, out: None = None, dtype: Any = None) -> Any:
    arrays = list(arrays) if not is_key(arrays) else [arrays[i] for i in range(len(arrays))]
    impl = K.check_all_keys("stack", arrays)
    arrays = K.unify(arrays)
    ax = K.normalize_axis("stack", axis, arrays[0].ndim + 1)
    return _kr.consumed_all(arrays, "concatenate",
                            PRNGKeyArray(impl, _f("stack")([k._base_array for k in arrays], axis=ax)))


def unstack(x: Any, /, *, axis: int = 0) -> tuple:
    if x.ndim == 0:
        raise FtransValueError("unstack: the input must be at least 1-D")
    ax = K.normalize_axis("unstack", axis, x.ndim)
    return tuple(_wrap_like(x, b) for b in _f("unstack")(x._base_array, axis=ax))


def _splitter(name: str) -> Any:
    def split(ary: Any, indices_or_sections: Any, axis: int = 0) -> list:
        if ary.ndim == 0:
            raise FtransValueError(f"{name}: the input must be at least 1-D")
        ax = K.normalize_axis(name, axis, ary.ndim)
        return [_wrap_like(ary, b) for b in _f(name)(ary._base_array, indices_or_sections, axis=ax)]

    split.__name__ = name
    return split


def append(arr: Any, values: Any, axis: int | None = None) -> Any:
    if axis is None:
        return concatenate([ravel(arr), ravel(values)], 0)
    return concatenate([arr, values], axis)


def tile(A: Any, reps: Any) -> Any:  # noqa: N803
    reps = _shape_arg("tile", reps)
    full = (1,) * (A.ndim - len(reps)) + tuple(reps)
    base = A._base_array
    if len(full) > A.ndim:
        base = _f("reshape")(base, (1,) * (len(full) - A.ndim) + tuple(base.shape))
    return _wrap_like(A, _f("tile")(base, (*full, *(1,) * _nd(A))))


def where(condition: Any, x: Any = None, y: Any = None, /, **kwargs: Any) -> Any:
    if is_key(condition):
        raise K.reject_keys("where", (condition,))
    if x is None or y is None:
        raise FtransValueError("where: give both x and y to choose between key arrays")
    impl = K.check_all_keys("where", [x, y])
    x, y = K.unify([x, y])
    nd = x._key_ndim
    c = _f("asarray")(condition)
    c = _f("reshape")(c, (*np.shape(c), *(1,) * nd))
    return PRNGKeyArray(impl, _f("where")(c, x._base_array, y._base_array, **kwargs))


# ---------------------------------------------------------------- indexing
def _base_index(k: PRNGKeyArray, idx: Any) -> tuple:
    """The index of the base array that selects what ``idx`` selects of the key array ``k``."""
    if is_key(idx):
        raise FtransIndexError("a key array cannot be used as an index")
    idx = idx if isinstance(idx, tuple) else (idx,)
    used = 0
    for i in idx:
        if i is None or i is Ellipsis:
            continue
        if isinstance(i, (bool, np.bool_)):
            continue
        d = getattr(i, "dtype", None)
        used += max(1, len(np.shape(i))) if d is not None and np.dtype(d) == np.bool_ else 1
    if used > k.ndim:
        raise FtransIndexError(
            f"Too many indices for a key array: the key array is {k.ndim}-dimensional (shape {k.shape}), "
            f"but {used} were indexed")
    tail = (slice(None),) * _nd(k)
    if any(i is Ellipsis for i in idx):
        return (*idx, *tail)
    return (*idx, Ellipsis, *tail)


def _getitem(x: Any, idx: Any) -> Any:
    return _kr.taken(x, idx, PRNGKeyArray(x._impl, _f("_getitem")(x._base_array, _base_index(x, idx))))


def take(a: Any, indices: Any, axis: int | None = None, **kwargs: Any) -> Any:
    if axis is None:
        a, axis = ravel(a), 0
    ax = K.normalize_axis("take", axis, a.ndim)
    return _wrap_like(a, _f("take")(a._base_array, indices, axis=ax, **kwargs))


class _KeyIndexRef:
    __slots__ = ("keys", "idx")

    def __init__(self, keys: PRNGKeyArray, idx: Any) -> None:
        self.keys, self.idx = keys, idx

    def get(self, **kwargs: Any) -> PRNGKeyArray:
        base = _f("_IndexUpdateHelper")(self.keys._base_array)[_base_index(self.keys, self.idx)]
        return _wrap_like(self.keys, base.get(**kwargs))

    def set(self, values: Any, **kwargs: Any) -> PRNGKeyArray:
        if not is_key(values):
            raise FtransTypeError(
                f"at[...].set: a key array ({self.keys.dtype.name}) can only take keys; got a value of "
                f"dtype {K._dtype_name(values)}; wrap key data with ftrans.random.wrap_key_data")
        impl = K.common_impl("at[...].set", [self.keys, values])
        keys, values = K.unify([self.keys, values])
        base = _f("_IndexUpdateHelper")(keys._base_array)[_base_index(keys, self.idx)]
        return PRNGKeyArray(impl, base.set(values._base_array, **kwargs))

    def _numeric(self, name: str):
        def refuse(*args: Any, **kwargs: Any) -> Any:
            raise K.reject_keys(f"at[...].{name}", (self.keys,))
        return refuse

    def __getattr__(self, name: str) -> Any:
        if name in ("add", "multiply", "mul", "divide", "power", "min", "max", "subtract"):
            return self._numeric(name)
        raise AttributeError(name)


class _KeyIndexHelper:
    __slots__ = ("keys",)

    def __init__(self, keys: PRNGKeyArray) -> None:
        self.keys = keys

    def __getitem__(self, idx: Any) -> _KeyIndexRef:
        return _KeyIndexRef(self.keys, idx)


def _IndexUpdateHelper(array: Any) -> Any:  # noqa: N802
    return _KeyIndexHelper(array)


# ---------------------------------------------------------------- creation and conversion
def _check_key_dtype(name: str, k: PRNGKeyArray, dtype: Any) -> None:
    if dtype is not None and dtype != k.dtype:
        raise FtransValueError(
            f"{name}: cannot convert a key array ({k.dtype.name}) to dtype {dtype}; use "
            "ftrans.random.key_data for its uint32 data")


def asarray(a: Any, dtype: Any = None, *args: Any, **kwargs: Any) -> Any:
    _check_key_dtype("asarray", a, dtype)
    return a


def array(object: Any, dtype: Any = None, *args: Any, copy: bool = True, **kwargs: Any) -> Any:  # noqa: A002
    if isinstance(object, (list, tuple)):
        return stack(object)
    _check_key_dtype("array", object, dtype)
    return object.copy() if copy else object


def copy(a: Any, order: str | None = None) -> Any:
    return a.copy()


def astype(x: Any, dtype: Any, /, *, copy: bool = False, device: Any = None) -> Any:
    """``jnp.astype`` with a key array or a key dtype: a key array to its own key dtype is itself (a new
    array with ``copy=True``), as in JAX; between keys and numbers, or two key implementations, there is
    no conversion."""
    if is_key(x) and K.is_key_dtype(dtype) and dtype == x.dtype:
        return x.copy() if copy else x
    src = x.dtype if is_key(x) else np.asarray(x).dtype
    dst = dtype if K.is_key_dtype(dtype) else np.dtype(dtype)
    raise FtransValueError(
        f"Cannot convert_element_type from {src.name} to {dst.name}: key arrays do not convert to or from "
        "numbers or other key types; use ftrans.random.key_data or ftrans.random.wrap_key_data")


def _like(name: str, fill: Any):
    def fn(a: Any, *args: Any, dtype: Any = None, shape: Any = None, **kwargs: Any) -> Any:
        _check_key_dtype(name, a, dtype)
        s = a.shape if shape is None else _shape_arg(name, shape)
        value = args[0] if fill is None else fill
        return full(s, value, a.dtype)
    fn.__name__ = name
    return fn


def full(shape: Any, fill_value: Any, dtype: Any = None, **kwargs: Any) -> Any:
    s = _shape_arg("full", shape)
    if is_key(fill_value):
        if dtype is not None and dtype != fill_value.dtype:
            raise FtransTypeError(f"full: the fill key ({fill_value.dtype.name}) is not of dtype {dtype}")
        return broadcast_to(fill_value, s)
    if dtype is None or not K.is_key_dtype(dtype):
        raise K.reject_keys("full", (fill_value,))
    impl = dtype._impl
    base = _f("full")((*s, *impl.key_shape), fill_value, np.dtype(np.uint32))
    return PRNGKeyArray(impl, base)


zeros_like = _like("zeros_like", 0)
ones_like = _like("ones_like", 1)
empty_like = _like("empty_like", 0)
full_like = _like("full_like", None)


def _creator(name: str, value: int):
    def fn(shape: Any, dtype: Any = None, **kwargs: Any) -> Any:
        return full(shape, value, dtype)
    fn.__name__ = name
    return fn


def equal(x: Any, y: Any, /) -> Any:
    impl = K.check_all_keys("equal", [x, y])
    n = len(impl.key_shape)
    axes = tuple(range(-n, 0))
    dx, dy = K.key_data_of(x), K.key_data_of(y)
    # numpy_rank_promotion reads the keys' shapes, whose rank-0 keys broadcast freely; the data's trailing
    # key axes are no rank of the user's, so the data get their missing leading axes here
    sx, sy = tuple(dx.shape[:dx.ndim - n]), tuple(dy.shape[:dy.ndim - n])
    if len(sx) != len(sy):
        if sx and sy:
            from ftrans.core.config import config
            from ftrans.core.operands import rank_promotion

            if config.numpy_rank_promotion != "allow":
                rank_promotion("equal", [sx, sy])
        r = max(len(sx), len(sy))
        dx = _f("reshape")(dx, (1,) * (r - len(sx)) + tuple(dx.shape))
        dy = _f("reshape")(dy, (1,) * (r - len(sy)) + tuple(dy.shape))
    return _orig["all"](_f("equal")(dx, dy), axis=axes)


def not_equal(x: Any, y: Any, /) -> Any:
    return _orig["logical_not"](equal(x, y))


def result_type(*args: Any) -> Any:
    keys = [a for a in args if is_key(a) or K.is_key_dtype(a)]
    dts = list(dict.fromkeys(a if K.is_key_dtype(a) else a.dtype for a in keys))
    if len(dts) == 1 and len(keys) == len(args):
        return dts[0]
    raise FtransTypeError(
        f"result_type: key dtypes ({', '.join(d.name for d in dts)}) do not promote with other dtypes")


# ---------------------------------------------------------------- dispatch
def _any_key(args: Any) -> bool:
    for a in args:
        if type(a) is PRNGKeyArray:
            return True
        if isinstance(a, (list, tuple)) and any(type(b) is PRNGKeyArray for b in a):
            return True
    return False


def _first_is_key(args: Any, kwargs: Any) -> bool:
    return bool(args) and type(args[0]) is PRNGKeyArray


def _seq_has_key(args: Any, kwargs: Any) -> bool:
    seq = args[0] if args else next(iter(kwargs.values()), ())
    if type(seq) is PRNGKeyArray:
        return True
    return isinstance(seq, (list, tuple)) and any(type(b) is PRNGKeyArray for b in seq)


def _all_args(args: Any, kwargs: Any) -> bool:
    return _any_key(args) or _any_key(kwargs.values())


def _dtype_is_key(args: Any, kwargs: Any) -> bool:
    d = kwargs.get("dtype", args[2] if len(args) > 2 else None)
    return K.is_key_dtype(d) or _any_key(args[1:2]) or _any_key([kwargs.get("fill_value")])


def _dtype_is_key2(args: Any, kwargs: Any) -> bool:
    d = kwargs.get("dtype", args[1] if len(args) > 1 else None)
    return K.is_key_dtype(d)


def _dtype_is_key2_or_first(args: Any, kwargs: Any) -> bool:
    return _first_is_key(args, kwargs) or _dtype_is_key2(args, kwargs)


# public name -> (key version, test on the call's arguments)
_TABLE: dict[str, tuple[Any, Any]] = {
    "reshape": (reshape, _first_is_key), "ravel": (ravel, _first_is_key),
    "transpose": (transpose, _first_is_key), "permute_dims": (transpose, _first_is_key),
    "swapaxes": (swapaxes, _first_is_key), "moveaxis": (moveaxis, _first_is_key),
    "squeeze": (squeeze, _first_is_key), "expand_dims": (expand_dims, _first_is_key),
    "broadcast_to": (broadcast_to, _first_is_key), "broadcast_arrays": (broadcast_arrays, _all_args),
    "concatenate": (concatenate, _seq_has_key), "concat": (concatenate, _seq_has_key),
    "stack": (stack, _seq_has_key), "unstack": (unstack, _first_is_key),
    "split": (_splitter("split"), _first_is_key), "array_split": (_splitter("array_split"), _first_is_key),
    "append": (append, _all_args), "tile": (tile, _first_is_key),
    "where": (where, _all_args), "take": (take, _first_is_key), "_getitem": (_getitem, _first_is_key),
    "asarray": (asarray, _first_is_key), "astype": (astype, _dtype_is_key2_or_first), "array": (array, _seq_has_key), "copy": (copy, _first_is_key),
    "zeros_like": (zeros_like, _first_is_key), "ones_like": (ones_like, _first_is_key),
    "empty_like": (empty_like, _first_is_key), "full_like": (full_like, _first_is_key),
    "full": (full, _dtype_is_key), "zeros": (_creator("zeros", 0), _dtype_is_key2),
    "ones": (_creator("ones", 1), _dtype_is_key2), "empty": (_creator("empty", 0), _dtype_is_key2),
    "equal": (equal, _all_args), "not_equal": (not_equal, _all_args), "result_type": (result_type, _all_args),
}


def _result_type_test(args: Any, kwargs: Any) -> bool:
    return any(is_key(a) or K.is_key_dtype(a) for a in args)


_TABLE["result_type"] = (result_type, _result_type_test)


def install(namespace: dict) -> None:
    """Replace ``namespace``'s (``ftrans.numpy``'s) structural functions by key-aware ones."""
    for name in ("all", "logical_not", "_IndexUpdateHelper"):
        _orig[name] = namespace[name]
    namespace["_key_index_helper"] = _IndexUpdateHelper
    for name, (keyed, test) in _TABLE.items():
        plain = namespace[name]
        _orig[name] = plain
        namespace[name] = K.key_dispatching(plain, keyed, test)


__all__: Sequence[str] = []
