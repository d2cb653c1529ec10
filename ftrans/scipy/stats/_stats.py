"""``mode``, ``rankdata`` and ``sem``: JAX's summary statistics of ``scipy.stats``."""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from ftrans import lax
from ftrans import numpy as jnp
from ftrans.core import dtypes
from ftrans.core.operands import canonicalize_axis, check_arraylike
from ftrans.scipy.stats._common import promote
from ftrans.transforms.batching import vmap


class ModeResult(NamedTuple):
    """``mode``'s result: the most common value and how often it occurs."""

    mode: Any
    count: Any


def _check_nan_policy(name: str, nan_policy: str) -> None:
    if nan_policy not in ("propagate", "omit", "raise"):
        raise ValueError(f"Illegal nan_policy value {nan_policy!r}; expected one of {{'propagate', 'omit', 'raise'}}")
    if nan_policy == "omit":
        raise NotImplementedError(f"{name}: nan_policy='omit' is not implemented")
    if nan_policy == "raise":
        raise NotImplementedError(f"{name}: nan_policy='raise' would need to inspect the values (not traceable); "
                                  "check for NaNs outside the function")


def mode(a: Any, axis: int | None = 0, nan_policy: str = "propagate", keepdims: bool = False) -> ModeResult:
    """The most common value along ``axis`` (the smallest among ties) and its count."""
    check_arraylike("mode", a)
    x = jnp.atleast_1d(a)
    _check_nan_policy("mode", nan_policy)
    if axis is not None:
        axis = canonicalize_axis("mode", axis, x.ndim)
    shape = x.shape
    if axis is None:
        out_shape = (1,) * len(shape) if keepdims else ()
        x, axis = jnp.ravel(x), 0
    elif keepdims:
        out_shape = tuple(1 if i == axis else s for i, s in enumerate(shape))
    else:
        out_shape = tuple(s for i, s in enumerate(shape) if i != axis)

    def one(col: Any) -> tuple:
        if col.size == 0:
            f = dtypes.default_float()
            return jnp.array(np.nan, dtype=f), jnp.array(0, dtype=f)
        vals, counts = jnp.unique(col, return_counts=True, size=col.size)
        return vals[jnp.argmax(counts)], counts.max()

    x = jnp.moveaxis(x, axis, 0)
    x = x.reshape(x.shape[0], math.prod(x.shape[1:]))
    vals, counts = vmap(one, in_axes=1)(x)
    return ModeResult(vals.reshape(out_shape), counts.reshape(out_shape))


def rankdata(a: Any, method: str = "average", *, axis: int | None = None, nan_policy: str = "propagate") -> Any:
    """Ranks from 1, ties resolved by ``method`` ('average', 'min', 'max', 'dense', 'ordinal'); all NaN if any
    element is NaN."""
    check_arraylike("rankdata", a)
    _check_nan_policy("rankdata", nan_policy)
    if method not in ("average", "min", "max", "dense", "ordinal"):
        raise ValueError(f"unknown method '{method}'")
    if axis is not None:
        return jnp.apply_along_axis(rankdata, axis, a, method)
    a = jnp.ravel(a)
    out = dtypes.default_float()

    def ranks(v: Any) -> Any:
        srt, order = lax.sort_key_val(v, jnp.arange(v.size))
        inv = jnp.empty_like(order).at[order].set(jnp.arange(order.size, dtype=order.dtype))
        if method == "ordinal":
            return (inv + 1).astype(out)
        new = jnp.concatenate([jnp.array([True]), srt[1:] != srt[:-1]])
        dense = jnp.cumsum(new)[inv]
        if method == "dense":
            return dense.astype(out)
        starts = jnp.nonzero(new, size=srt.size + 1, fill_value=new.size)[0].astype(out)
        if method == "max":
            return starts[dense]
        if method == "min":
            return starts[dense - 1] + 1
        return 0.5 * (starts[dense] + starts[dense - 1] + 1)

    return lax.cond(jnp.any(jnp.isnan(a)), lambda v: jnp.full_like(v, np.nan, out), ranks, a)


def sem(a: Any, axis: int | None = 0, ddof: int = 1, nan_policy: str = "propagate", *, keepdims: bool = False) -> Any:
    """The standard error of the mean, ``std(a, ddof) / sqrt(n)``; ``nan_policy='omit'`` ignores NaNs."""
    (b,) = promote("sem", a)
    if nan_policy == "propagate":
        n = b.size if axis is None else b.shape[axis]
        return b.std(axis, ddof=ddof, keepdims=keepdims) / jnp.sqrt(n).astype(b.dtype)
    if nan_policy == "omit":
        count = (~jnp.isnan(b)).sum(axis, keepdims=keepdims)
        return jnp.nanstd(b, axis, ddof=ddof, keepdims=keepdims) / jnp.sqrt(count).astype(b.dtype)
    raise ValueError(f"{nan_policy} is not supported")
