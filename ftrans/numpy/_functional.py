"""The functional and numerical helpers of JAX's ``numpy`` that the other modules lacked.

``vectorize``, ``apply_along_axis`` and ``piecewise`` are built on ``vmap``
(as JAX's are), so the function they wrap is traced once on one element (or
one core slice) and batched, not called per element. ``gradient``, ``block``,
``extract``/``place``, ``angle``, ``matvec``/``vecmat``, the remaining
polynomial functions (``poly``, ``polydiv``, ``polyfit``, ``roots``) and the
multi-dimensional histograms are compositions of other ``ftrans.numpy``
functions, with JAX's dtype rules and concreteness requirements.
"""

from __future__ import annotations

import builtins
import functools
import math
import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import ftrans.numpy as jnp
from ftrans import lax
from ftrans.core import dtypes
from ftrans.core.config import config as _config
from ftrans.core.operands import (
    canonicalize_axis,
    check_arraylike,
    concrete_or_error,
    promote_dtypes,
    rank_promotion,
)
from ftrans.errors import FtransTypeError, FtransValueError
from ftrans.numpy._extras import _inexact_nobcast
from ftrans.transforms.batching import vmap
from ftrans.transforms.jit import jit

__all__ = [
    "angle", "apply_along_axis", "apply_over_axes", "block", "extract", "gradient", "histogram2d",
    "histogramdd", "matvec", "piecewise", "place", "poly", "polydiv", "polyfit", "roots", "vecmat",
    "vectorize",
]


def _arr(name: str, x: Any) -> Any:
    check_arraylike(name, x)
    return jnp.asarray(x)


# ---------------------------------------------------------------- elementwise odds and ends
def angle(z: Any, deg: bool = False) -> Any:
    """Return the angle (argument) of complex numbers, elementwise.

    The angle is `atan2(imag, real)`, in radians unless `deg`. Integer and boolean inputs, and real rank-0
    inputs, give the default float dtype (as in JAX).

    Args:
        z: Input array.
        deg: If True, return degrees instead of radians.
    Returns:
        A real array of `z`'s shape.

    Examples:
        >>> jnp.angle(jnp.array([1j, -1, 1 + 1j]))
        Array([1.5707964, 3.1415927, 0.7853981], dtype=float32)
        >>> jnp.angle(jnp.array([1j, -1]), deg=True)
        Array([ 90., 180.], dtype=float32)

    See also:
        `arctan2`, `absolute`.
    """
    z = _arr("angle", z)
    re_, im = jnp.real(z), jnp.imag(z)
    dt = re_.dtype
    if not dtypes.is_inexact(dt) or (dtypes.is_float(z.dtype) and z.ndim == 0):
        dt = dtypes.default_float()
        re_, im = re_.astype(dt), im.astype(dt)
    out = lax.atan2(im, re_)
    return jnp.degrees(out) if deg else out


def matvec(x1: Any, x2: Any, /) -> Any:
    """Matrix-vector product over the last axes, batched.

    The last two axes of `x1` are the matrix and the last of `x2` the vector; the rest broadcast.

    Args:
        x1: Array of matrices, shape `(..., M, N)`.
        x2: Array of vectors, shape `(..., N)`.
    Returns:
        An array of shape `(..., M)`.

    Examples:
        >>> jnp.matvec(jnp.array([[1, 2], [3, 4]]), jnp.array([1, 1]))
        Array([3, 7], dtype=int32)

    See also:
        `vecmat`, `matmul`.
    """
    x1, x2 = _arr("matvec", x1), _arr("matvec", x2)
    return vectorize(jnp.matmul, signature="(n,m),(m)->(n)")(x1, x2)


def vecmat(x1: Any, x2: Any, /) -> Any:
    """Vector-matrix product over the last axes, batched, conjugating the vector.

    It is `conj(x1) @ x2` for a vector `x1` and a matrix `x2` (the last axes); the rest broadcast.

    Args:
        x1: Array of vectors, shape `(..., M)`.
        x2: Array of matrices, shape `(..., M, N)`.
    Returns:
        An array of shape `(..., N)`.

    Examples:
        >>> jnp.vecmat(jnp.array([1, 1]), jnp.array([[1, 2], [3, 4]]))
        Array([4, 6], dtype=int32)

    See also:
        `matvec`, `matmul`.
    """
    x1, x2 = _arr("vecmat", x1), _arr("vecmat", x2)
    return vectorize(lambda a, b: jnp.matmul(jnp.conj(a), b), signature="(n),(n,m)->(m)")(x1, x2)


def extract(condition: Any, arr: Any, *, size: int | None = None, fill_value: Any = 0) -> Any:
    """Return the elements of an array where a condition is true.

    The elements of `ravel(arr)` where `ravel(condition)` is true. As with `compress`, `size` fixes the output
    length (padding with `fill_value`) so it can be traced.

    Args:
        condition: Array whose truth values select elements.
        arr: Input array of `condition`'s size.
        size: Optional static length of the result.
        fill_value: Value used to pad up to `size`.
    Returns:
        A 1-D array of `arr`'s dtype.

    Examples:
        >>> x = jnp.arange(6)
        >>> jnp.extract(x % 2 == 1, x)
        Array([1, 3, 5], dtype=int32)
        >>> jnp.extract(x > 3, x, size=4)
        Array([4, 5, 0, 0], dtype=int32)

    See also:
        `compress`, `nonzero`.
    """
    check_arraylike("extract", condition, arr, fill_value)
    return jnp.compress(jnp.ravel(condition), jnp.ravel(arr), size=size, fill_value=fill_value)


def place(arr: Any, mask: Any, vals: Any, *, inplace: bool = True) -> Any:
    """Return a copy of an array with masked positions filled from a sequence of values.

    The positions where `mask` is true are filled, in order, from `vals` (cycled). Arrays are immutable, so
    `inplace=True` (NumPy's behaviour, the default) raises; pass `inplace=False`.

    Args:
        arr: Input array.
        mask: Boolean array of `arr`'s shape.
        vals: Values to place, used in order and repeated as needed.
        inplace: Must be False.
    Returns:
        A new array of `arr`'s shape and dtype.

    Examples:
        >>> x = jnp.arange(6)
        >>> jnp.place(x, x % 2 == 0, jnp.array([-1, -2]), inplace=False)
        Array([-1,  1, -2,  3, -1,  5], dtype=int32)

    See also:
        `put`, `where`.
    """
    check_arraylike("place", arr, mask, vals)
    data, m, v = jnp.asarray(arr), jnp.asarray(mask), jnp.ravel(jnp.asarray(vals))
    if inplace:
        raise FtransValueError("jnp.place cannot modify arrays in-place, because arrays are immutable; "
                               "pass inplace=False to get the updated array back")
    if data.size != m.size:
        raise FtransValueError(f"place: arr and mask must be the same size, got {data.shape} and {m.shape}")
    if not v.size:
        raise FtransValueError("place: cannot place values from an empty array")
    if not data.size:
        return data
    idx = jnp.where(jnp.ravel(m), size=m.size, fill_value=m.size)[0]
    v = jnp.tile(v, -(-idx.shape[0] // v.size))[: idx.shape[0]]
    return jnp.ravel(data).at[idx].set(v, mode="drop").reshape(data.shape)


def block(arrays: Any) -> Any:
    """Assemble an array from nested lists of blocks.

    The innermost lists are joined along the last axis, the next level out along the second-to-last, and so
    on.

    Args:
        arrays: A nested list of arrays (or scalars).
    Returns:
        The assembled array.

    Examples:
        >>> a = jnp.ones((2, 2))
        >>> jnp.block([[a, jnp.zeros((2, 1))], [jnp.full((1, 3), 5.)]])
        Array([[1., 1., 0.],
               [1., 1., 0.],
               [5., 5., 5.]], dtype=float32)

    See also:
        `concatenate`, `stack`.
    """

    def depth_of(x: Any, path: tuple) -> int:
        if isinstance(x, tuple):
            raise FtransTypeError(f"block: arrays is a tuple at {path}; only lists may be nested")
        if isinstance(x, list):
            if not x:
                raise FtransValueError(f"block: list at {path} is empty; lists cannot be empty")
            ds = {depth_of(e, path + (i,)) for i, e in enumerate(x)}
            if len(ds) != 1:
                raise FtransValueError(f"block: list depths are mismatched at {path}; every list at one level "
                                       "must nest equally deep")
            return 1 + ds.pop()
        return 0

    list_depth = depth_of(arrays, ())

    def leaves(x: Any) -> list:
        return [y for e in x for y in leaves(e)] if isinstance(x, list) else [x]

    flat = [jnp.asarray(a) for a in leaves(arrays)]
    result_ndim = builtins.max([list_depth] + [a.ndim for a in flat])

    def assemble(x: Any, depth: int) -> Any:
        if isinstance(x, list):
            parts = [assemble(e, depth + 1) for e in x]
            return jnp.concatenate(parts, axis=-(list_depth - depth))
        a = jnp.asarray(x)
        return a.reshape((1,) * (result_ndim - a.ndim) + a.shape)

    if list_depth == 0:
        return jnp.array(arrays)
    return assemble(arrays, 0)


# ---------------------------------------------------------------- vectorize and friends
_DIM = r"\w+"
_CORE = rf"(?:{_DIM}(?:,{_DIM})*)?"
_ARGLIST = rf"\({_CORE}\)(?:,\({_CORE}\))*"
_SIGNATURE = re.compile(rf"^{_ARGLIST}->{_ARGLIST}$")


def _parse_signature(signature: str) -> tuple[list[tuple[str, ...]], list[tuple[str, ...]]]:
    sig = signature.replace(" ", "")
    if not _SIGNATURE.match(sig):
        raise FtransValueError(f"vectorize: not a valid gufunc signature: {signature!r} "
                               "(expected e.g. '(n),(n,m)->(m)')")
    ins, outs = sig.split("->")

    def parse(side: str) -> list[tuple[str, ...]]:
        return [tuple(d for d in grp.split(",") if d) for grp in re.findall(rf"\(({_CORE})\)", side)]

    return parse(ins), parse(outs)


def vectorize(pyfunc: Callable, *, excluded: Any = frozenset(), signature: str | None = None) -> Callable:
    """Turn a function on scalars (or core arrays) into one mapped over leading axes.

    Without `signature` the function sees scalars; with a generalised-ufunc `signature` such as
    `"(n),(n)->()"` it sees the trailing core axes. Loop axes broadcast, and the mapping is `vmap`: the
    function is traced once, not called per element (size-1 axes are not materialised). `excluded` names
    positions or keywords passed through unmapped.

    Args:
        pyfunc: The function to map.
        excluded: Set of positional indices or keyword names not to map over.
        signature: Optional generalised-ufunc signature, e.g. `"(m,n),(n)->(m)"`.
    Returns:
        The vectorised function.

    Examples:
        >>> f = jnp.vectorize(lambda a, b: jnp.where(a > b, a - b, 0))
        >>> f(jnp.array([1, 5, 3]), jnp.array([4, 2, 6]))
        Array([0, 3, 0], dtype=int32)
        >>> norm = jnp.vectorize(lambda v: jnp.sqrt(jnp.sum(v * v)), signature="(n)->()")
        >>> norm(jnp.array([[3., 4.], [6., 8.]]))
        Array([ 5., 10.], dtype=float32)

    See also:
        `ftrans.vmap`, `frompyfunc`, `apply_along_axis`.
    """
    excluded = frozenset(excluded)
    if any(not isinstance(e, (str, int)) for e in excluded):
        raise FtransTypeError(f"vectorize can only exclude integer or string arguments, but excluded={excluded!r}")
    if any(isinstance(e, int) and e < 0 for e in excluded):
        raise FtransValueError(f"vectorize: excluded={excluded!r} contains negative numbers")

    @functools.wraps(pyfunc)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        fixed_pos = {i: a for i, a in enumerate(args) if i in excluded}
        fixed_kw = {k: v for k, v in kwargs.items() if k in excluded}
        mapped = [a for i, a in enumerate(args) if i not in excluded and a is not None]
        none_pos = {i for i, a in enumerate(args) if i not in excluded and a is None}
        mapped_kw = {k: v for k, v in kwargs.items() if k not in excluded}
        kw_names = list(mapped_kw)
        n_pos = len(mapped)

        def call(*vals: Any) -> Any:
            it = iter(vals[:n_pos])
            full = [fixed_pos[i] if i in fixed_pos else (None if i in none_pos else next(it))
                    for i in range(len(args))]
            return pyfunc(*full, **fixed_kw, **dict(zip(kw_names, vals[n_pos:])))

        operands = [jnp.asarray(a) for a in mapped + list(mapped_kw.values())]
        if signature is not None:
            in_core, out_core = _parse_signature(signature)
            if none_pos:  # a None has no shape to give its core dimensions
                raise FtransValueError(f"vectorize: cannot pass None at locations {sorted(none_pos)} with "
                                       f"signature={signature!r}; pass an array there, or exclude the argument")
            if len(in_core) != len(operands):
                raise FtransTypeError(f"vectorize: wrong number of positional arguments: expected {len(in_core)}, "
                                      f"got {len(operands)} (signature {signature!r})")
        else:
            in_core, out_core = [()] * len(operands), None
        sizes: dict[str, int] = {}
        for a, core in zip(operands, in_core):
            if a.ndim < len(core):
                raise FtransValueError(f"vectorize: input with shape {a.shape} does not have enough dimensions "
                                       f"for its core dimensions {core} (signature {signature!r})")
            for name, size in zip(core, a.shape[a.ndim - len(core):]):
                if sizes.setdefault(name, size) != size:
                    raise FtransValueError(f"vectorize: inconsistent size for core dimension {name!r}: "
                                           f"{size} vs {sizes[name]} (signature {signature!r})")
        loop_shapes = [a.shape[: a.ndim - len(core)] for a, core in zip(operands, in_core)]
        if _config.numpy_rank_promotion != "allow":  # loop axes of different ranks broadcast: the option's check
            if len({len(shp) for a, shp in zip(operands, loop_shapes) if a.ndim != 0}) > 1:
                rank_promotion(f"vectorize (signature {signature!r})", [a.shape for a in operands])
        loop = np.broadcast_shapes(*loop_shapes) if loop_shapes else ()

        func = call
        if out_core is not None:
            func = _checked(call, sizes, out_core, signature)
        squeezed, filled = [], []
        for a, shp in zip(operands, loop_shapes):
            filled.append((1,) * (len(loop) - len(shp)) + shp)
            squeezed.append(jnp.squeeze(a, axis=tuple(i for i, s in enumerate(shp) if s == 1)))
        expand = []
        for d in range(len(loop) - 1, -1, -1):
            axes = tuple(None if f[d] == 1 else 0 for f in filled)
            if all(ax is None for ax in axes):
                expand.append(d)
            else:
                func = vmap(func, in_axes=axes)
        out = func(*squeezed)
        if not expand:
            return out
        if isinstance(out, tuple):
            return tuple(jnp.expand_dims(o, sorted(expand)) for o in out)
        return jnp.expand_dims(out, sorted(expand))

    return wrapped


def _checked(func: Callable, sizes: dict, out_core: list, signature: str) -> Callable:
    def run(*vals: Any) -> Any:
        out = func(*vals)
        if len(out_core) > 1 and not isinstance(out, tuple):  # TypeErrors, as in JAX
            raise FtransTypeError(f"vectorize: the signature {signature!r} declares {len(out_core)} outputs, so "
                                  f"the function's output must be a tuple, got {type(out).__name__}")
        outs = out if isinstance(out, tuple) else (out,)
        if len(outs) != len(out_core):
            raise FtransTypeError(f"vectorize: wrong number of output arguments: the function returned "
                                  f"{len(outs)} but the signature {signature!r} declares {len(out_core)}")
        for o, core in zip(outs, out_core):
            shape = jnp.shape(o)
            if len(shape) != len(core):
                raise FtransValueError(f"vectorize: output shape {shape} does not match core dimensions {core} "
                                       f"(signature {signature!r})")
            for name, size in zip(core, shape):
                if sizes.setdefault(name, size) != size:
                    raise FtransValueError(f"vectorize: inconsistent size for core dimension {name!r}: "
                                           f"{size} vs {sizes[name]} (signature {signature!r})")
        return out

    return run


def apply_along_axis(func1d: Callable, axis: int, arr: Any, *args: Any, **kwargs: Any) -> Any:
    """Apply a function to 1-D slices of an array along an axis.

    The function is mapped with `vmap`, so it is traced once on one slice rather than called per slice.

    Args:
        func1d: A function of a 1-D array.
        axis: The axis along which the slices lie.
        arr: Input array.
        *args: Extra positional arguments for `func1d`.
        **kwargs: Extra keyword arguments for `func1d`.
    Returns:
        The stacked results, with `axis` replaced by the shape of `func1d`'s output.

    Examples:
        >>> x = jnp.array([[1, 2, 3], [4, 5, 6]])
        >>> jnp.apply_along_axis(jnp.sum, 1, x)
        Array([ 6, 15], dtype=int32)
        >>> jnp.apply_along_axis(lambda v: v[::-1], 0, x)
        Array([[4, 5, 6],
               [1, 2, 3]], dtype=int32)

    See also:
        `apply_over_axes`, `vectorize`.
    """
    check_arraylike("apply_along_axis", arr)
    nd = np.ndim(arr)
    axis = canonicalize_axis("apply_along_axis", axis, nd)

    def func(a: Any) -> Any:
        return func1d(a, *args, **kwargs)

    for i in range(1, nd - axis):
        func = vmap(func, in_axes=i, out_axes=-1)
    for _ in range(axis):
        func = vmap(func, in_axes=0, out_axes=0)
    return func(jnp.asarray(arr))


def apply_over_axes(func: Callable, a: Any, axes: Sequence[int]) -> Any:
    """Apply a reduction repeatedly over several axes.

    Each step is `a = func(a, axis)`; an axis the function drops is put back with size 1.

    Args:
        func: A function `func(array, axis)`.
        a: Input array.
        axes: Sequence of axes.
    Returns:
        An array with `a`'s number of dimensions.

    Examples:
        >>> jnp.apply_over_axes(jnp.sum, jnp.arange(24).reshape(2, 3, 4), [0, 2])
        Array([[[ 60],
                [ 92],
                [124]]], dtype=int32)

    See also:
        `apply_along_axis`.
    """
    a = _arr("apply_over_axes", a)
    for axis in axes:
        b = func(a, axis)
        if b.ndim == a.ndim:
            a = b
        elif b.ndim == a.ndim - 1:
            a = jnp.expand_dims(b, axis)
        else:
            raise FtransValueError(f"apply_over_axes: function returned an array of rank {b.ndim} for an input "
                                   f"of rank {a.ndim}; it must keep the rank or drop exactly the axis")
    return a


def piecewise(x: Any, condlist: Any, funclist: list, *args: Any, **kw: Any) -> Any:
    """Evaluate a piecewise-defined function.

    At each position the value is `funclist[i](x)` for the last true `condlist[i]`. A function list one longer
    than the conditions supplies the value where no condition holds (else 0). Entries may be constants. Each
    function is traced once on a scalar and selected elementwise (`lax.switch` under `vectorize`), so the
    output has `x`'s dtype.

    Args:
        x: Input array.
        condlist: Sequence of boolean arrays of `x`'s shape.
        funclist: Functions (or constants), one per condition, plus an optional default.
        *args: Extra positional arguments for the functions.
        **kw: Extra keyword arguments for the functions.
    Returns:
        An array of `x`'s shape and dtype.

    Examples:
        >>> x = jnp.array([-2., -1., 0., 1., 2.])
        >>> jnp.piecewise(x, [x < 0, x >= 0], [lambda v: -v, lambda v: v ** 2])
        Array([2., 1., 0., 1., 4.], dtype=float32)
        >>> jnp.piecewise(x, [x > 1], [10.])
        Array([ 0.,  0.,  0.,  0., 10.], dtype=float32)

    See also:
        `select`, `where`.
    """
    x = _arr("piecewise", x)
    nc, nf = len(condlist), len(funclist)
    if nf == nc + 1:
        funclist = list(funclist[-1:]) + list(funclist[:-1])
    elif nf == nc:
        funclist = [0] + list(funclist)
    else:
        raise FtransValueError(f"piecewise: with {nc} condition(s), either {nc} or {nc + 1} functions are "
                               f"expected; got {nf}")
    consts = {i: f for i, f in enumerate(funclist) if not callable(f)}
    funcs = frozenset((i, f) for i, f in enumerate(funclist) if callable(f))
    return _piecewise_jit(x, jnp.asarray(condlist, dtype=bool), consts, funcs, *args, **kw)


def _piecewise(x: Any, conds: Any, consts: dict, funcs: frozenset, *args: Any, **kw: Any) -> Any:
    """``piecewise`` proper, compiled once per set of functions (they are static, so calling ``piecewise``
    again with the same functions does not retrace them)."""
    table = dict(funcs)
    index = jnp.zeros(jnp.broadcast_shapes(x.shape, conds.shape[1:]), dtype=np.int32)
    for i in range(conds.shape[0]):
        index = jnp.where(conds[i], np.int32(i + 1), index)
    dt = x.dtype

    def branch(i: int) -> Callable:
        if i in table:
            f = table[i]
            return lambda v: jnp.asarray(f(v, *args, **kw)).astype(dt)
        c = consts[i]
        return lambda v: jnp.asarray(c, dtype=dt)

    branches = [branch(i) for i in range(conds.shape[0] + 1)]
    return vectorize(lambda i, v: lax.switch(i, branches, v))(index, x)


_piecewise_jit = jit(_piecewise, static_argnames=("funcs",))


# ---------------------------------------------------------------- numerical gradient
def gradient(f: Any, *varargs: Any, axis: Any = None, edge_order: int | None = None) -> Any:
    """Estimate the gradient of sampled data with finite differences.

    Second-order central differences are used inside, first-order ones at the edges (`edge_order` is not
    supported, as in JAX).

    Args:
        f: Array of samples.
        *varargs: Spacings: scalars or 1-D coordinate arrays (one per axis, or one for all).
        axis: Axis or axes along which to differentiate (default: all).
        edge_order: Not supported; must be None.
    Returns:
        One array for a single axis, else a list of arrays of `f`'s shape.

    Examples:
        >>> jnp.gradient(jnp.array([1., 4., 9., 16.]))
        Array([3., 4., 6., 7.], dtype=float32)
        >>> jnp.gradient(jnp.array([1., 4., 9., 16.]), 2.)
        Array([1.5, 2. , 3. , 3.5], dtype=float32)

    See also:
        `diff`.
    """
    if edge_order is not None:
        raise NotImplementedError("The 'edge_order' argument to jnp.gradient is not supported.")
    check_arraylike("gradient", f, *varargs)
    a, *spacing = _inexact_nobcast("gradient", f, *varargs)

    def along(a: Any, h: Any, ax: int) -> Any:
        def sl(x: Any, start: Any, stop: Any) -> Any:
            return lax.slice_in_dim(x, start, stop, axis=ax)

        n = a.shape[ax]
        upper = sl(a, 1, 2) - sl(a, 0, 1)
        lower = sl(a, n - 1, n) - sl(a, n - 2, n - 1)
        if np.ndim(h) == 0:
            inner = (sl(a, 2, n) - sl(a, 0, n - 2)) * 0.5 / h
            upper, lower = upper / h, lower / h
        elif np.ndim(h) == 1:
            if h.shape[0] != n:
                raise FtransValueError(f"gradient: spacing arrays must have the same length as the dimension "
                                       f"({n}) along which the gradient is calculated, got {h.shape[0]}")
            hs = [1] * a.ndim
            hs[ax] = n
            h = h.reshape(hs)
            upper = upper / (sl(h, 1, 2) - sl(h, 0, 1))
            lower = lower / (sl(h, n - 1, n) - sl(h, n - 2, n - 1))
            dx1 = sl(h, 1, n - 1) - sl(h, 0, n - 2)
            dx2 = sl(h, 2, n) - sl(h, 1, n - 1)
            ca = -dx2 / (dx1 * (dx1 + dx2))
            cb = (dx2 - dx1) / (dx1 * dx2)
            cc = dx1 / (dx2 * (dx1 + dx2))
            inner = ca * sl(a, 0, n - 2) + cb * sl(a, 1, n - 1) + cc * sl(a, 2, n)
        else:
            raise FtransValueError(f"gradient: spacing arrays must be 1-d arrays or scalars, got rank {np.ndim(h)}")
        return jnp.concatenate((upper, inner, lower), axis=ax)

    if axis is None:
        axes = tuple(range(a.ndim))
    else:
        axes = tuple(canonicalize_axis("gradient", i, a.ndim) for i in (axis if isinstance(axis, (tuple, list)) else (axis,)))
    if not axes:
        return []
    if builtins.min(a.shape[i] for i in axes) < 2:
        raise FtransValueError(f"gradient: shape {a.shape} is too small to calculate a numerical gradient, "
                               "at least 2 elements are required along each axis")
    if not spacing:
        dx: list = [1.0] * len(axes)
    elif len(spacing) == 1:
        dx = list(spacing) * len(axes)
    elif len(spacing) == len(axes):
        dx = list(spacing)
    else:
        raise FtransTypeError(f"gradient: invalid number of spacing arguments {len(spacing)} for axis={axis}")
    out = [along(a, h, ax) for ax, h in zip(axes, dx)]
    return out[0] if len(axes) == 1 else out


# ---------------------------------------------------------------- polynomials
def poly(seq_of_zeros: Any) -> Any:
    """Return the coefficients of the monic polynomial with given roots.

    A square matrix gives its characteristic polynomial (from its eigenvalues).

    Args:
        seq_of_zeros: 1-D array of roots, or a square matrix.
    Returns:
        A 1-D coefficient array (highest power first).

    Examples:
        >>> jnp.poly(jnp.array([1., 2.]))
        Array([ 1., -3.,  2.], dtype=float32)

    See also:
        `roots`.
    """
    check_arraylike("poly", seq_of_zeros)
    (z,) = _inexact_nobcast("poly", seq_of_zeros)
    z = jnp.atleast_1d(z)
    if z.ndim == 2 and z.shape[0] == z.shape[1] and z.shape[0] != 0:
        z = jnp.linalg.eigvals(z)
    if z.ndim != 1:
        raise FtransValueError(f"poly: input must be 1-d or a non-empty square 2-d array, got shape {z.shape}")
    dt = z.dtype
    if z.shape[0] == 0:
        return jnp.ones((), dtype=dt)
    a = jnp.ones((1,), dtype=dt)
    for k in range(z.shape[0]):
        a = jnp.convolve(a, jnp.stack([jnp.ones((), dt), -z[k]]), mode="full")
    return a


def polydiv(u: Any, v: Any, *, trim_leading_zeros: bool = False) -> tuple[Any, Any]:
    """Divide one polynomial by another.

    The remainder keeps `u`'s length unless `trim_leading_zeros`, which needs concrete values.

    Args:
        u: Dividend coefficients (highest power first).
        v: Divisor coefficients.
        trim_leading_zeros: Strip the leading zeros of the remainder.
    Returns:
        A pair `(quotient, remainder)` of coefficient arrays (inexact dtype).

    Examples:
        >>> q, r = jnp.polydiv(jnp.array([1., 0., -1.]), jnp.array([1., 1.]))
        >>> q
        Array([ 1., -1.], dtype=float32)
        >>> r
        Array([0., 0., 0.], dtype=float32)

    See also:
        `polymul`.
    """
    check_arraylike("polydiv", u, v)
    u, v = _inexact_nobcast("polydiv", u, v)
    m, n = u.shape[0] - 1, v.shape[0] - 1
    scale = 1.0 / v[0]
    q = jnp.zeros(builtins.max(m - n + 1, 1), dtype=u.dtype)
    for k in range(m - n + 1):
        d = scale * u[k]
        q = q.at[k].set(d)
        u = u.at[k:k + n + 1].add(-d * v)
    if trim_leading_zeros:
        tol = float(np.sqrt(np.finfo(u.dtype).eps))
        mag = np.abs(np.asarray(concrete_or_error(u, "polydiv(trim_leading_zeros=True)'s coefficients")))
        nz = np.flatnonzero(mag > tol)
        u = u[int(nz[0]):] if nz.size else u[:0]
    return q, u


def polyfit(x: Any, y: Any, deg: int, rcond: float | None = None, full: bool = False, w: Any = None,
            cov: Any = False) -> Any:
    """Least-squares polynomial fit.

    `full=True` also returns the residuals, rank, singular values and `rcond`; `cov=True` (or `"unscaled"`)
    returns the coefficients' covariance matrix.

    Args:
        x: x coordinates of the samples.
        y: y coordinates (1-D, or 2-D for several fits at once).
        deg: Degree of the polynomial (static).
        rcond: Relative cut-off for small singular values.
        full: Whether to return diagnostic information too.
        w: Optional weights per sample.
        cov: Whether to return the covariance matrix too.
    Returns:
        The coefficients (highest power first), or a tuple with the extra results.

    Examples:
        >>> x = jnp.array([0., 1., 2., 3.])
        >>> jnp.polyfit(x, 2 * x + 1, 1).round(4)
        Array([2., 1.], dtype=float32)

    See also:
        `polyval`, `linalg.lstsq`.
    """
    if w is None:
        check_arraylike("polyfit", x, y)
    else:
        check_arraylike("polyfit", x, y, w)
    x, y = jnp.asarray(x), jnp.asarray(y)
    deg = int(concrete_or_error(deg, "polyfit's deg"))
    order = deg + 1
    if deg < 0:
        raise FtransValueError(f"polyfit: expected deg >= 0, got {deg}")
    if x.ndim != 1:
        raise FtransTypeError(f"polyfit: expected a 1-d vector for x, got shape {x.shape}")
    if x.size == 0:
        raise FtransTypeError("polyfit: expected a non-empty vector for x")
    if y.ndim < 1 or y.ndim > 2:
        raise FtransTypeError(f"polyfit: expected a 1-d or 2-d array for y, got shape {y.shape}")
    if x.shape[0] != y.shape[0]:
        raise FtransTypeError(f"polyfit: expected x and y to have the same length, got {x.shape[0]} and {y.shape[0]}")
    if rcond is None:
        rcond = len(x) * float(np.finfo(dtypes.canonicalize(x.dtype) if dtypes.is_inexact(x.dtype)
                                        else dtypes.default_float()).eps)
    rcond = float(concrete_or_error(rcond, "polyfit's rcond"))
    lhs = jnp.vander(x, order)
    rhs = y
    if w is not None:
        (w,) = _inexact_nobcast("polyfit", w)
        if w.ndim != 1:
            raise FtransTypeError(f"polyfit: expected a 1-d array for weights, got shape {w.shape}")
        if w.shape[0] != y.shape[0]:
            raise FtransTypeError(f"polyfit: expected w and y to have the same length, got {w.shape[0]} and {y.shape[0]}")
        lhs = lhs * w[:, None]
        rhs = rhs * (w[:, None] if rhs.ndim == 2 else w)
    scale = jnp.sqrt((lhs * lhs).sum(axis=0))
    lhs = lhs / scale[None, :]
    c, resids, rank, s = jnp.linalg.lstsq(lhs, rhs, rcond)
    c = (c.T / scale[None, :]).T if c.ndim > 1 else c / scale
    if full:
        return c, resids, rank, s, jnp.asarray(rcond)
    if cov:
        vbase = jnp.linalg.inv(jnp.dot(lhs.T, lhs)) / jnp.outer(scale, scale)
        if cov == "unscaled":
            fac = jnp.array(1.0)
        else:
            if len(x) <= order:
                raise FtransValueError("polyfit: the number of data points must exceed order to scale the "
                                       "covariance matrix")
            fac = resids / (len(x) - order)
        if y.ndim == 1:
            return c, vbase * jnp.atleast_1d(fac)[None]
        return c, vbase[:, :, None] * jnp.atleast_1d(fac)[None, None, :]
    return c


def _complex_of(dt: Any) -> np.dtype:
    if np.issubdtype(dt, np.complexfloating):
        return np.dtype(dt)
    return np.dtype(np.complex128) if np.dtype(dt) == np.float64 else np.dtype(np.complex64)


def _roots_no_zeros(p: Any) -> Any:
    if p.shape[0] < 2:
        return jnp.array([], dtype=_complex_of(p.dtype))
    a = jnp.diag(jnp.ones((p.shape[0] - 2,), p.dtype), -1)
    a = a.at[0, :].set(-p[1:] / p[0])
    return jnp.linalg.eigvals(a)


def roots(p: Any, *, strip_zeros: bool = True) -> Any:
    """Return the roots of a polynomial.

    The roots are the companion matrix's eigenvalues. Leading zeros are stripped, which needs concrete values;
    under `jit` pass `strip_zeros=False`, and the roots they stand for come back NaN.

    Args:
        p: Coefficients (highest power first).
        strip_zeros: Whether to strip leading zeros first.
    Returns:
        A 1-D complex array of roots.

    Examples:
        >>> jnp.sort_complex(jnp.roots(jnp.array([1., -3., 2.]))).round(4)
        Array([1.+0.j, 2.+0.j], dtype=complex64)

    See also:
        `poly`, `polyval`.
    """
    check_arraylike("roots", p)
    (p,) = _inexact_nobcast("roots", p)
    p = jnp.atleast_1d(p)
    if p.ndim != 1:
        raise FtransValueError(f"roots: input must be a rank-1 array, got shape {p.shape}")
    if p.shape[0] < 2:
        return jnp.array([], dtype=_complex_of(p.dtype))
    lead = jnp.where(jnp.all(p == 0), p.shape[0], jnp.argmin(p == 0))
    if strip_zeros:
        lead = int(concrete_or_error(lead, "roots(strip_zeros=True)'s count of leading zeros (under jit pass "
                                              "strip_zeros=False; their roots come back NaN)"))
        return _roots_no_zeros(p[lead:])
    p = jnp.where(p.shape[0] == lead, jnp.ones((), p.dtype), p)
    r = _roots_no_zeros(jnp.roll(p, -lead))
    r = lax.sort_key_val(r == 0, r)[1]
    nan = jnp.asarray(complex(np.nan, np.nan), dtype=r.dtype)
    return jnp.where(jnp.arange(r.shape[0]) < r.shape[0] - lead, r, nan)


# ---------------------------------------------------------------- histograms in several dimensions
def histogramdd(sample: Any, bins: Any = 10, range: Any = None, weights: Any = None,  # noqa: A002
                density: bool | None = None) -> tuple[Any, list]:
    """Compute the multidimensional histogram of some data.

    Args:
        sample: An `(N, D)` array of N points in D dimensions.
        bins: Number of bins (per dimension), or edge arrays.
        range: Optional `(min, max)` per dimension.
        weights: Optional weights per point.
        density: If True, return a probability density instead of counts.
    Returns:
        A pair `(hist, edges)`: the D-dimensional counts and a list of D edge arrays.

    Examples:
        >>> h, edges = jnp.histogramdd(jnp.array([[0., 0.], [1., 0.], [1., 1.]]), bins=2)
        >>> h
        Array([[1, 0],
               [1, 1]], dtype=int32)

    See also:
        `histogram`, `histogram2d`.
    """
    if weights is None:
        check_arraylike("histogramdd", sample)
        (sample,) = _inexact_nobcast("histogramdd", sample)
    else:
        check_arraylike("histogramdd", sample, weights)
        if np.shape(weights) != np.shape(sample)[:1]:
            raise FtransValueError(f"histogramdd: should have one weight for each sample; got weights of shape "
                                   f"{np.shape(weights)} for samples of shape {np.shape(sample)}")
        sample, weights = _inexact_nobcast("histogramdd", sample, weights)
    n, d = sample.shape
    if range is not None and (len(range) != d or any(r is not None and np.shape(r)[0] != 2 for r in range)):
        raise FtransValueError(f"histogramdd: for sample.shape={(n, d)}, range must be a sequence of {d} pairs "
                               f"or Nones; got range={range}")
    try:
        per_dim = list(bins)
    except TypeError:
        per_dim = d * [bins]
    else:
        if len(per_dim) != d:
            raise FtransValueError(f"histogramdd: should be a bin for each dimension ({d}), got {len(per_dim)}")
    idx, edges = [], []
    for i in builtins.range(d):
        e = jnp.histogram_bin_edges(sample[:, i], per_dim[i], None if range is None else range[i], weights)
        k = jnp.searchsorted(e, sample[:, i], side="right")
        k = jnp.where(sample[:, i] == e[-1], k - 1, k)
        idx.append(k)
        edges.append(e)
    nbins = tuple(e.shape[0] + 1 for e in edges)
    flat = jnp.ravel_multi_index(tuple(idx), nbins, mode="clip")
    hist = jnp.bincount(flat, weights, length=math.prod(nbins)).reshape(nbins)
    hist = hist[d * (slice(1, -1),)]
    if density:
        hist = hist.astype(sample.dtype)
        hist = hist / hist.sum()
        for norm in jnp.ix_(*[jnp.diff(e) for e in edges]):
            hist = hist / norm
    return hist, edges


def histogram2d(x: Any, y: Any, bins: Any = 10, range: Any = None, weights: Any = None,  # noqa: A002
                density: bool | None = None) -> tuple[Any, Any, Any]:
    """Compute the 2-D histogram of two data samples.

    Args:
        x: x coordinates of the points.
        y: y coordinates of the points.
        bins: Number of bins (per axis), or edge arrays.
        range: Optional `[[xmin, xmax], [ymin, ymax]]`.
        weights: Optional weights per point.
        density: If True, return a probability density instead of counts.
    Returns:
        A triple `(hist, xedges, yedges)`.

    Examples:
        >>> h, xe, ye = jnp.histogram2d(jnp.array([0., 1., 1.]), jnp.array([0., 0., 1.]), bins=2)
        >>> h
        Array([[1, 0],
               [1, 1]], dtype=int32)

    See also:
        `histogram`, `histogramdd`.
    """
    check_arraylike("histogram2d", x, y)
    try:
        nb = len(bins)
    except TypeError:
        nb = 1
    if nb not in (1, 2):  # one edge array for both axes: the same edges twice
        bins = [bins, bins]
    sample = jnp.stack(promote_dtypes("histogram2d", x, y)[0], axis=1)
    hist, edges = histogramdd(sample, bins, range, weights, density)
    return hist, edges[0], edges[1]
