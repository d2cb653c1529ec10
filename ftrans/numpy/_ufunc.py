"""``jnp.ufunc`` and ``jnp.frompyfunc``: NumPy-style universal functions with ``outer``, ``reduce``,
``accumulate``, ``reduceat`` and ``at``.

A ``ufunc`` made by ``frompyfunc`` calls its scalar function through
``vectorize`` and reduces/accumulates with ``fori_loop``/``scan``. The
builtin binary functions (``jnp.add``, ``jnp.multiply``, ``jnp.maximum``, ...)
are ufuncs whose call is the plain function itself (a static ``__call__``, so
calling them costs nothing extra), with methods (``jnp.add.outer``,
``jnp.multiply.reduce``) backed by the dedicated reductions (``sum``,
``cumsum``, ``.at[].add``, ...) where one exists.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import numpy as np

import ftrans.numpy as jnp
from ftrans import lax
from ftrans.core.operands import canonicalize_axis, check_arraylike
from ftrans.errors import FtransValueError
from ftrans.transforms.batching import vmap

__all__ = ["frompyfunc", "ufunc"]

_AT_INPLACE = ("ufunc.at cannot modify arrays in-place, because arrays are immutable; pass inplace=False "
               "to get the updated array back")


class _UfuncType(type):
    """``isinstance(jnp.add, jnp.ufunc)`` is True, as in JAX, though the builtins stay plain functions."""

    def __instancecheck__(cls, obj: Any) -> bool:
        return type.__instancecheck__(cls, obj) or type.__instancecheck__(cls, getattr(obj, "_ftrans_ufunc", None))


class ufunc(metaclass=_UfuncType):  # noqa: N801 - NumPy's name
    """A universal function of ``nin`` inputs and ``nout`` outputs (``jnp.ufunc``)."""

    def __init__(self, func: Callable, /, nin: int, nout: int, *, name: str | None = None, nargs: int | None = None,
                 identity: Any = None, call: Callable | None = None, reduce: Callable | None = None,
                 accumulate: Callable | None = None, at: Callable | None = None, reduceat: Callable | None = None):
        put = object.__setattr__
        put(self, "__doc__", func.__doc__)
        put(self, "__name__", name or func.__name__)
        put(self, "_func", func)
        put(self, "nin", operator.index(nin))
        put(self, "nout", operator.index(nout))
        put(self, "nargs", operator.index(nargs or nin))
        put(self, "identity", identity)
        for k, v in (("_call", call), ("_reduce", reduce), ("_accumulate", accumulate), ("_at", at),
                     ("_reduceat", reduceat)):
            put(self, k, v)

    # As in JAX, a ufunc's defining properties cannot be changed after it is made.
    _READ_ONLY = frozenset({"nin", "nout", "nargs", "identity", "_func"})

    def __setattr__(self, name: str, value: Any) -> None:
        if name in self._READ_ONLY:
            raise AttributeError(f"{self!r}: the attribute {name!r} is read-only")
        object.__setattr__(self, name, value)

    def _key(self) -> tuple:
        return (self._func, self.nin, self.nout, self.nargs, self.identity, self._call, self._reduce,
                self._accumulate, self._at, self._reduceat)

    def __eq__(self, other: object) -> bool:
        """Two ufuncs made from the same function with the same properties are equal (and hash alike)."""
        if not isinstance(other, ufunc) or type(other) is not type(self):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"<jnp.ufunc '{self.__name__}'>"

    def __call__(self, *args: Any, out: None = None, where: None = None) -> Any:
        check_arraylike(self.__name__, *args)
        if out is not None:
            raise NotImplementedError(f"out argument of {self}")
        if where is not None:
            raise NotImplementedError(f"where argument of {self}")
        if self._call is not None:
            return self._call(*args)
        return jnp.vectorize(self._func)(*args)

    def _binary(self, what: str) -> None:
        if self.nin != 2:
            raise FtransValueError(f"{what} only supported for binary ufuncs; {self.__name__} takes {self.nin} inputs")
        if self.nout != 1:
            raise FtransValueError(f"{what} only supported for functions returning a single value")

    def _result_dtype(self, *args: Any) -> Any:
        from ftrans.core.jaxpr_api import eval_shape

        ones = [jnp.ones((), jnp.asarray(a).dtype) for a in args]
        return eval_shape(self._func, *ones).dtype

    def reduce(self, a: Any, axis: Any = 0, dtype: Any = None, out: None = None, keepdims: bool = False,
               initial: Any = None, where: Any = None) -> Any:
        """Combine the elements along ``axis`` (``None``: all) pairwise, left to right."""
        check_arraylike(f"{self.__name__}.reduce", a)
        self._binary("reduce")
        if out is not None:
            raise NotImplementedError(f"out argument of {self.__name__}.reduce()")
        if where is not None:
            if self.identity is None and initial is None:
                raise FtransValueError(f"reduction operation {self.__name__!r} does not have an identity, so to use a "
                                       "where mask one has to specify 'initial'.")
            if jnp.asarray(where).dtype != bool:
                raise FtransValueError(f"where argument must have dtype=bool; got dtype={jnp.asarray(where).dtype}")
        if self._reduce is not None:
            return self._reduce(a, axis=axis, dtype=dtype, keepdims=keepdims, initial=initial, where=where)
        return self._reduce_by_loop(a, axis, dtype, keepdims, initial, where)

    def _reduce_by_loop(self, arr: Any, axis: Any, dtype: Any, keepdims: bool, initial: Any, where: Any) -> Any:
        arr = jnp.asarray(arr)
        initial = self.identity if initial is None else initial
        dtype = self._result_dtype(arr, arr) if dtype is None else dtype
        if where is not None:
            where = jnp.broadcast_to(where, arr.shape)
        if isinstance(axis, tuple):
            raise NotImplementedError("tuple of axes")
        if axis is None:
            final = (1,) * arr.ndim if keepdims else ()
            arr = arr.ravel()
            where = None if where is None else where.ravel()
            axis = 0
        else:
            axis = canonicalize_axis(f"{self.__name__}.reduce", axis, arr.ndim)
            final = arr.shape[:axis] + ((1,) if keepdims else ()) + arr.shape[axis + 1:]
        arr = jnp.moveaxis(arr, axis, 0)
        where = None if where is None else jnp.moveaxis(where, axis, 0)
        if arr.shape[0] == 0:
            if initial is None:
                raise FtransValueError(f"zero-size array to reduction operation {self.__name__} which has no identity")
            return jnp.full(final, initial, dtype)

        def body(i: Any, acc: Any) -> Any:
            nxt = self(acc, arr[i].astype(dtype))
            return nxt if where is None else jnp.where(where[i], nxt, acc)

        start, init = (1, arr[0]) if initial is None else (0, initial)
        init = jnp.broadcast_to(jnp.asarray(init).astype(dtype), arr.shape[1:])
        out = lax.fori_loop(start, arr.shape[0], body, init)
        return out.reshape(final) if keepdims else out

    def accumulate(self, a: Any, axis: int = 0, dtype: Any = None, out: None = None) -> Any:
        """The running ``reduce`` along ``axis``: ``out[i] = f(out[i-1], a[i])``."""
        self._binary("accumulate")
        if out is not None:
            raise NotImplementedError(f"out argument of {self.__name__}.accumulate()")
        check_arraylike(f"{self.__name__}.accumulate", a)
        if axis is None or isinstance(axis, tuple):
            raise FtransValueError("accumulate does not allow multiple axes")
        if self._accumulate is not None:
            return self._accumulate(a, axis=axis, dtype=dtype)
        arr = jnp.asarray(a)
        dtype = self._result_dtype(arr, arr) if dtype is None else dtype
        axis = canonicalize_axis(f"{self.__name__}.accumulate", axis, arr.ndim)
        if arr.size == 0:
            return jnp.zeros(arr.shape, dtype)
        arr = jnp.moveaxis(arr, axis, 0)

        def step(acc: Any, x: Any) -> Any:
            y = self(acc, x.astype(dtype))
            return y, y

        first = arr[0].astype(dtype)
        _, rest = lax.scan(step, first, arr[1:])
        return jnp.moveaxis(jnp.concatenate([first[None], rest]), 0, axis)

    def outer(self, A: Any, B: Any, /) -> Any:  # noqa: N803 - NumPy's names
        """``f(A[i...], B[j...])`` for every pair: shape ``A.shape + B.shape``."""
        self._binary("outer")
        check_arraylike(f"{self.__name__}.outer", A, B)
        a, b = jnp.ravel(jnp.asarray(A)), jnp.ravel(jnp.asarray(B))
        out = vmap(vmap(self, (None, 0)), (0, None))(a, b)
        return out.reshape(*np.shape(A), *np.shape(B))

    def at(self, a: Any, indices: Any, b: Any = None, /, *, inplace: bool = True) -> Any:
        """``a`` with ``f(a[indices], b)`` written back at ``indices``, repeated indices applied one by one.

        Arrays are immutable, so ``inplace=False`` is required.
        """
        if inplace:
            raise NotImplementedError(_AT_INPLACE)
        if self._at is not None:
            return self._at(a, indices) if b is None else self._at(a, indices, b)
        args = () if b is None else (b,)
        check_arraylike(f"{self.__name__}.at", a, *args)
        dtype = self._result_dtype(a, *args)
        a = jnp.asarray(a).astype(dtype)
        args = tuple(jnp.asarray(x).astype(dtype) for x in args)
        idx = indices if isinstance(indices, tuple) else (indices,)
        shapes = [np.shape(i) for i in idx if not isinstance(i, slice)]
        shape = np.broadcast_shapes(*shapes) if shapes else ()
        if not shape:
            return a.at[idx].set(self(a.at[idx].get(), *args))
        count = int(np.prod(shape))
        if args:
            x = jnp.broadcast_to(args[0], (*shape, *args[0].shape[len(shape):]))
            args = (x.reshape(count, *args[0].shape[len(shape):]),)
        flat = [i if isinstance(i, slice) else jnp.broadcast_to(jnp.asarray(i), shape).ravel() for i in idx]

        def body(k: Any, arr: Any) -> Any:
            where = tuple(i if isinstance(i, slice) else i[k] for i in flat)
            return arr.at[where].set(self(arr.at[where].get(), *(x[k] for x in args)))

        return lax.fori_loop(0, count, body, a)

    def reduceat(self, a: Any, indices: Any, axis: int = 0, dtype: Any = None, out: None = None) -> Any:
        """``reduce`` over each slice ``indices[i]:indices[i+1]`` along ``axis`` (NumPy's rule for
        non-increasing indices: just ``a[indices[i]]``). A ``dtype`` converts ``a`` to it first, so the
        reduction runs and returns in it (jax 0.12's fix; jax 0.10 and 0.11 ignored ``dtype``)."""
        self._binary("reduceat")
        if out is not None:
            raise NotImplementedError(f"out argument of {self.__name__}.reduceat()")
        check_arraylike(f"{self.__name__}.reduceat", a, indices)
        a, indices = jnp.asarray(a), jnp.asarray(indices)
        if a.ndim == 0:
            raise FtransValueError(f"reduceat: a must have 1 or more dimension, got a.shape={a.shape}")
        if indices.ndim != 1:
            raise FtransValueError(f"reduceat: indices must be one-dimensional, got indices.shape={indices.shape}")
        if dtype is not None:
            a = a.astype(dtype)
        if axis is None or isinstance(axis, (tuple, list)):
            raise FtransValueError("reduceat requires a single integer axis.")
        axis = canonicalize_axis(f"{self.__name__}.reduceat", axis, a.ndim)
        if self._reduceat is not None:
            return self._reduceat(a, indices, axis=axis, dtype=dtype)
        res = jnp.take(a, indices, axis=axis)
        other = [d for d in range(res.ndim) if d != axis]
        bounds = jnp.expand_dims(jnp.append(indices, a.shape[axis]), other)
        start = lax.slice_in_dim(bounds, 0, bounds.shape[axis] - 1, axis=axis)
        end = lax.slice_in_dim(bounds, 1, bounds.shape[axis], axis=axis)

        def body(i: Any, acc: Any) -> Any:
            inside = (i > start) & (i < end)
            return jnp.where(inside, self(acc, jnp.take(a, jnp.expand_dims(i, 0), axis=axis)), acc)

        return lax.fori_loop(0, a.shape[axis], body, res)


def frompyfunc(func: Callable, /, nin: int, nout: int, *, identity: Any = None) -> ufunc:
    """Make a `ufunc` from a scalar function.

    The function is mapped with `vectorize` (so it is traced, not called per element); the result has `outer`,
    `reduce`, `accumulate`, `reduceat` and `at`.

    Args:
        func: A function of `nin` scalar arrays returning `nout` values.
        nin: Number of inputs.
        nout: Number of outputs.
        identity: Optional identity value of the reduction.
    Returns:
        A `ufunc` object.

    Examples:
        >>> add = jnp.frompyfunc(lambda x, y: x + y, nin=2, nout=1, identity=0)
        >>> add(jnp.arange(3), 10)
        Array([10, 11, 12], dtype=int32)
        >>> add.reduce(jnp.arange(4))
        Array(6, dtype=int32)
        >>> add.outer(jnp.arange(2), jnp.arange(3))
        Array([[0, 1, 2],
               [1, 2, 3]], dtype=int32)

    See also:
        `vectorize`, `ufunc`.
    """
    return ufunc(func, nin, nout, identity=identity)


def _sum_like(red: Callable) -> Callable:
    def reduce(a: Any, axis: Any = 0, dtype: Any = None, keepdims: bool = False, initial: Any = None,
               where: Any = None) -> Any:
        return red(a, axis=axis, dtype=dtype, keepdims=keepdims, initial=initial, where=where)

    return reduce


def _minmax_like(red: Callable) -> Callable:
    def reduce(a: Any, axis: Any = 0, dtype: Any = None, keepdims: bool = False, initial: Any = None,
               where: Any = None) -> Any:
        out = red(a, axis=axis, keepdims=keepdims, initial=initial, where=where)
        return out if dtype is None else out.astype(dtype)

    return reduce


def _bool_like(red: Callable) -> Callable:
    def reduce(a: Any, axis: Any = 0, dtype: Any = None, keepdims: bool = False, initial: Any = None,
               where: Any = None) -> Any:
        out = red(a, axis=axis, keepdims=keepdims, where=where)
        if initial is not None:
            out = (jnp.logical_and if red is jnp.all else jnp.logical_or)(out, initial)
        return out if dtype is None else out.astype(dtype)

    return reduce


def _cum(fn: Callable) -> Callable:
    def accumulate(a: Any, axis: int = 0, dtype: Any = None) -> Any:
        return fn(a, axis=axis, dtype=dtype)

    return accumulate


def _at_with(method: str) -> Callable:
    def at(a: Any, indices: Any, b: Any = None) -> Any:
        return getattr(jnp.asarray(a).at[indices], method)(b)

    return at


def _install() -> None:
    """Give the builtin binary functions their ufunc methods (as attributes: the call itself is untouched)."""
    specs = {
        "add": dict(identity=0, reduce=_sum_like(jnp.sum), accumulate=_cum(jnp.cumsum), at=_at_with("add")),
        "multiply": dict(identity=1, reduce=_sum_like(jnp.prod), accumulate=_cum(jnp.cumprod), at=_at_with("multiply")),
        "subtract": dict(),
        "maximum": dict(reduce=_minmax_like(jnp.max), at=_at_with("max")),
        "minimum": dict(reduce=_minmax_like(jnp.min), at=_at_with("min")),
        "logical_and": dict(identity=True, reduce=_bool_like(jnp.all)),
        "logical_or": dict(identity=False, reduce=_bool_like(jnp.any)),
        "logical_xor": dict(identity=False),
        "bitwise_and": dict(identity=-1),
        "bitwise_or": dict(identity=0),
        "bitwise_xor": dict(identity=0),
        "logaddexp": dict(identity=-np.inf),
        "logaddexp2": dict(identity=-np.inf),
    }
    for name, kw in specs.items():
        _builtin(name, 2, **kw)
    _builtin("negative", 1)


def _builtin(name: str, nin: int, **kw: Any) -> None:
    """Replace ``jnp.<name>`` by a ``ufunc`` whose call *is* the plain function: a class of its own
    holds it as a static ``__call__``, so calling costs one slot lookup more than the function, and
    the defining properties are read-only, as in JAX."""
    fn = getattr(jnp, name)
    cls = type(f"_ufunc_{name}", (ufunc,), {"__call__": staticmethod(fn), "__module__": __name__})
    u = cls(fn, nin, 1, name=name, call=fn, **kw)
    put = object.__setattr__
    put(u, "__module__", jnp.__name__)
    put(u, "__qualname__", name)
    put(u, "__wrapped__", fn)
    put(u, "_ftrans_ufunc", u)
    setattr(jnp, name, u)


def _reduce_builtin(self: ufunc) -> str:
    """A builtin ufunc pickles as the name ``ftrans.numpy.<name>`` (so it unpickles as itself)."""
    return self.__name__


ufunc.__reduce__ = lambda self: _reduce_builtin(self) if "_ftrans_ufunc" in vars(self) else object.__reduce__(self)
