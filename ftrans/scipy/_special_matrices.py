"""The structured matrices of JAX's ``scipy.linalg`` (Toeplitz, Hankel, circulant, companion, Pascal, ...).

Matrices built from array arguments are one gather from a static index
pattern (the index of each entry into the defining vector), so they batch over
leading axes, trace to a handful of equations and differentiate through the
gather. Matrices of a static size ``n`` alone (Hilbert, Pascal, Helmert,
Hadamard, the DFT) are computed in float64 with NumPy when the program is
built, where their binomial coefficients are exact, and become constants of
the default float (or complex) dtype.
"""

from __future__ import annotations

import math
import operator
from typing import Any

import numpy as np

from ftrans import numpy as jnp
from ftrans.core import dtypes
from ftrans.errors import FtransTypeError, FtransValueError

__all__ = ["circulant", "companion", "convolution_matrix", "dft", "fiedler", "fiedler_companion", "hadamard",
           "hankel", "helmert", "hilbert", "invhilbert", "invpascal", "leslie", "pascal", "toeplitz"]


def _vector(name: str, what: str, x: Any) -> Any:
    x = jnp.asarray(x)
    if x.ndim == 0:
        x = jnp.reshape(x, (1,))
    return x


def _lead(*xs: Any) -> tuple:
    """The broadcast leading (batch) shape of vectors whose last axis is their own."""
    return tuple(np.broadcast_shapes(*[tuple(x.shape[:-1]) for x in xs]))


def _pick(v: Any, idx: np.ndarray) -> Any:
    """``v[..., idx]`` for a static integer index array (the matrix's pattern into ``v``)."""
    if v.shape[-1] == 0 or idx.size == 0:
        return jnp.zeros(tuple(v.shape[:-1]) + idx.shape, v.dtype)
    return jnp.take(v, jnp.asarray(idx.astype(np.int32)), axis=-1)


def toeplitz(c: Any, r: Any = None) -> Any:
    """The Toeplitz matrix with first column ``c`` and first row ``r`` (default ``conj(c)``; ``r[0]`` is
    ignored): ``A[i, j] = c[i - j]`` below the diagonal, ``r[j - i]`` above. Leading axes are batch axes."""
    c = _vector("toeplitz", "c", c)
    r = jnp.conjugate(c) if r is None else _vector("toeplitz", "r", r)
    dt = jnp.promote_types(c.dtype, r.dtype)
    lead = _lead(c, r)
    n, m = c.shape[-1], r.shape[-1]
    if n == 0 or m == 0:
        return jnp.zeros(lead + (n, m), dt)
    c = jnp.broadcast_to(c.astype(dt), lead + (n,))
    r = jnp.broadcast_to(r.astype(dt), lead + (m,))
    v = jnp.concatenate([jnp.flip(c, -1), r[..., 1:]], axis=-1)  # v[n - 1 + k] is diagonal k
    i, j = np.arange(n)[:, None], np.arange(m)[None, :]
    return _pick(v, n - 1 + j - i)


def hankel(c: Any, r: Any = None) -> Any:
    """The Hankel matrix with first column ``c`` and last row ``r`` (default zeros; ``r[0]`` is ignored):
    ``A[i, j] = c[i + j]`` while ``i + j < len(c)``, then ``r[i + j - len(c) + 1]``."""
    c = jnp.asarray(c)
    r = jnp.zeros_like(c) if r is None else jnp.asarray(r)
    for what, x in (("c", c), ("r", r)):
        if x.ndim == 0:
            raise FtransValueError(f"hankel: {what} must be at least 1-dimensional, got a scalar")
    dt = jnp.result_type(c, r)
    lead = _lead(c, r)
    n, m = c.shape[-1], r.shape[-1]
    if n == 0 or m == 0:
        return jnp.zeros(lead + (n, m), dt)
    v = jnp.concatenate([jnp.broadcast_to(c.astype(dt), lead + (n,)),
                         jnp.broadcast_to(r.astype(dt), lead + (m,))[..., 1:]], axis=-1)
    return _pick(v, np.arange(n)[:, None] + np.arange(m)[None, :])


def circulant(c: Any) -> Any:
    """The circulant matrix with first column ``c``: ``A[i, j] = c[(i - j) mod n]``."""
    c = _vector("circulant", "c", c)
    n = c.shape[-1]
    return _pick(c, (np.arange(n)[:, None] - np.arange(n)[None, :]) % max(n, 1))


def leslie(f: Any, s: Any) -> Any:
    """The Leslie matrix: fecundities ``f`` in the first row, survival rates ``s`` on the subdiagonal."""
    f, s = _vector("leslie", "f", f), _vector("leslie", "s", s)
    n = f.shape[-1]
    if n < 2:
        raise FtransValueError(f"leslie: the last axis of f must have length at least 2; got shape {tuple(f.shape)}")
    if s.shape[-1] != n - 1:
        raise FtransValueError(f"leslie: the last axis of s must be one shorter than f's; got f of shape "
                               f"{tuple(f.shape)} and s of shape {tuple(s.shape)}")
    dt = jnp.promote_types(f.dtype, s.dtype)
    lead = _lead(f, s)
    zero = jnp.zeros(lead + (1,), dt)
    v = jnp.concatenate([jnp.broadcast_to(f.astype(dt), lead + (n,)), jnp.broadcast_to(s.astype(dt), lead + (n - 1,)),
                         zero], axis=-1)
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    idx = np.where(i == 0, j, np.where(j == i - 1, n + j, 2 * n - 1))
    return _pick(v, idx)


def _inexact_vector(name: str, a: Any) -> Any:
    a = _vector(name, "a", a)
    if not jnp.issubdtype(a.dtype, jnp.inexact):
        a = a.astype(dtypes.default_float())
    return a


def companion(a: Any) -> Any:
    """The companion matrix of the polynomial with coefficients ``a`` (highest degree first): first row
    ``-a[1:] / a[0]``, ones on the subdiagonal."""
    a = _inexact_vector("companion", a)
    n = a.shape[-1]
    if n < 2:
        raise FtransValueError(f"companion: the last axis of a must have length at least 2; got shape {tuple(a.shape)}")
    first = -a[..., 1:] / a[..., :1]
    m = n - 1
    v = jnp.concatenate([first, jnp.ones(first.shape[:-1] + (1,), a.dtype), jnp.zeros(first.shape[:-1] + (1,), a.dtype)],
                        axis=-1)
    i, j = np.arange(m)[:, None], np.arange(m)[None, :]
    return _pick(v, np.where(i == 0, j, np.where(j == i - 1, m, m + 1)))


def fiedler(a: Any) -> Any:
    """The symmetric Fiedler matrix ``|a[i] - a[j]|``."""
    a = _vector("fiedler", "a", a)
    return jnp.abs(a[..., :, None] - a[..., None, :])


def fiedler_companion(a: Any) -> Any:
    """Fiedler's pentadiagonal companion matrix of the polynomial with coefficients ``a`` (same
    eigenvalues as :func:`companion`)."""
    a = _inexact_vector("fiedler_companion", a)
    if a.shape[-1] == 0:
        raise FtransValueError(f"fiedler_companion: the last axis of a must not be empty; got shape {tuple(a.shape)}")
    n = a.shape[-1] - 1
    if n == 0:
        return jnp.zeros(tuple(a.shape[:-1]) + (0, 0), a.dtype)
    a = a / a[..., :1]
    # v = [-a[1], ..., -a[n], 1, 0]; each entry of the matrix is one of them
    v = jnp.concatenate([-a[..., 1:], jnp.ones(a.shape[:-1] + (1,), a.dtype), jnp.zeros(a.shape[:-1] + (1,), a.dtype)],
                        axis=-1)
    one, zero = n, n + 1
    idx = np.full((n, n), zero)
    idx[0, 0] = 0  # -a[1]
    if n > 1:
        idx[1, 0] = one
    for i in range(n):
        if i % 2 == 0:
            if i + 1 < n:
                idx[i, i + 1] = min(i + 2, n) - 1  # -a[min(i + 2, n)]
            if i + 2 < n:
                idx[i, i + 2] = one
            if i >= 2:
                idx[i, i - 1] = min(i + 1, n) - 1  # -a[min(i + 1, n)]
        elif i >= 3:
            idx[i, i - 2] = one
    return _pick(v, idx)


def convolution_matrix(a: Any, n: int, mode: str = "full") -> Any:
    """The matrix ``A`` with ``A @ v == convolve(a, v, mode)`` for every ``v`` of length ``n``."""
    try:
        n = operator.index(n)
    except TypeError:
        raise FtransTypeError(f"convolution_matrix: n must be an integer, got {n!r}") from None
    if n <= 0:
        raise FtransValueError(f"convolution_matrix: n must be a positive integer; got {n}")
    a = jnp.asarray(a)
    if a.ndim == 0:
        raise FtransValueError("convolution_matrix: a must be at least 1-dimensional, got a scalar")
    m = a.shape[-1]
    if m < 1:
        raise FtransValueError(f"convolution_matrix: a must not be empty; got shape {tuple(a.shape)}")
    if mode not in ("full", "valid", "same"):
        raise FtransValueError(f"convolution_matrix: mode must be 'full', 'valid' or 'same'; got {mode!r}")
    length = m + n - 1
    if mode == "full":
        start, rows = 0, length
    elif mode == "same":
        start, rows = (min(n, m) - 1) // 2, max(n, m)
    else:
        start, rows = min(n, m) - 1, max(n, m) - min(n, m) + 1
    # A[i, j] = a[i + start - j] where that index is in range, else 0
    v = jnp.concatenate([a, jnp.zeros(tuple(a.shape[:-1]) + (1,), a.dtype)], axis=-1)
    k = np.arange(rows)[:, None] + start - np.arange(n)[None, :]
    return _pick(v, np.where((k >= 0) & (k < m), k, m))


# ------------------------------------------------------------------ matrices of a size alone


def _size(name: str, n: Any, requirement: str = "non-negative") -> int:
    """``n`` as a Python int; a negative one is refused naming ``requirement`` (the function's whole
    condition on ``n``, so every invalid ``n`` gets the same message)."""
    try:
        n = operator.index(n)
    except TypeError:
        raise FtransTypeError(f"{name}: n must be an integer, got {n!r}") from None
    if n < 0:
        raise FtransValueError(f"{name}: n must be {requirement}; got {n}")
    return n


def _binomials(n: int) -> np.ndarray:
    """Exact ``C(i, j)`` for ``0 <= i, j < n`` (zero above the diagonal), in float64."""
    return np.array([[float(math.comb(i, j)) for j in range(n)] for i in range(n)]).reshape(n, n)


def hilbert(n: int) -> Any:
    """The Hilbert matrix ``1 / (i + j + 1)``."""
    n = _size("hilbert", n)
    i = np.arange(n, dtype=np.float64)
    return jnp.asarray(1.0 / (i[:, None] + i[None, :] + 1.0), dtype=dtypes.default_float())


def invhilbert(n: int) -> Any:
    """The inverse of the Hilbert matrix, from its closed form (integers, computed exactly)."""
    n = _size("invhilbert", n)
    out = np.empty((n, n))
    for i in range(n):
        for j in range(n):
            s = i + j
            out[i, j] = ((-1) ** s * (s + 1) * math.comb(n + i, n - j - 1) * math.comb(n + j, n - i - 1)
                         * math.comb(s, i) ** 2)
    return jnp.asarray(out, dtype=dtypes.default_float())


def _kind(name: str, kind: Any) -> str:
    kind = "symmetric" if kind is None else kind
    if kind not in ("symmetric", "lower", "upper"):
        raise FtransValueError(f"{name}: kind must be 'symmetric', 'lower' or 'upper'; got {kind!r}")
    return kind


def pascal(n: int, kind: str | None = None) -> Any:
    """The Pascal matrix: binomial coefficients, lower or upper triangular, or their symmetric product."""
    kind, n = _kind("pascal", kind), _size("pascal", n)
    low = _binomials(n)
    out = low if kind == "lower" else low.T if kind == "upper" else low @ low.T
    return jnp.asarray(out, dtype=np.float32)


def invpascal(n: int, kind: str | None = None) -> Any:
    """The inverse of :func:`pascal` (integers, computed exactly)."""
    kind, n = _kind("invpascal", kind), _size("invpascal", n)
    i = np.arange(n)
    low = (-1.0) ** (i[:, None] - i[None, :]) * _binomials(n)
    out = low if kind == "lower" else low.T if kind == "upper" else low.T @ low
    return jnp.asarray(out, dtype=dtypes.default_float())


def helmert(n: int, full: bool = False) -> Any:
    """The Helmert matrix of order ``n``: orthonormal rows orthogonal to the all-ones vector (``full``: with
    ``1/sqrt(n)`` as a first row, making it orthogonal)."""
    n = _size("helmert", n, "a positive integer")
    if n < 1:
        raise FtransValueError(f"helmert: n must be a positive integer; got {n}")
    h = np.zeros((n - 1, n))
    for k in range(1, n):
        d = math.sqrt(k * (k + 1))
        h[k - 1, :k] = 1.0 / d
        h[k - 1, k] = -k / d
    if full:
        h = np.concatenate([np.full((1, n), 1.0 / math.sqrt(n)), h])
    return jnp.asarray(h, dtype=dtypes.default_float())


def hadamard(n: int, dtype: Any = int) -> Any:
    """The Hadamard matrix of order ``n`` (a power of two), Sylvester's construction."""
    n = _size("hadamard", n, "a positive power of 2")
    if n < 1 or n & (n - 1):
        raise FtransValueError(f"hadamard: n must be a positive power of 2; got {n}")
    h = np.ones((1, 1))
    while h.shape[0] < n:
        h = np.block([[h, h], [h, -h]])
    return jnp.asarray(h, dtype=dtype)


def dft(n: int, scale: str | None = None, *, dtype: Any = None) -> Any:
    """The discrete Fourier transform matrix ``exp(-2 pi i j k / n)`` (``scale``: None, ``'sqrtn'`` or
    ``'n'`` divides by ``sqrt(n)`` or ``n``)."""
    n = _size("dft", n)
    if scale not in (None, "sqrtn", "n"):
        raise FtransValueError(f"dft: scale must be None, 'sqrtn' or 'n'; got {scale!r}")
    dt = dtypes.default_complex() if dtype is None else dtypes.to_dtype(dtype)
    if not jnp.issubdtype(dt, jnp.complexfloating):
        raise FtransValueError(f"dft: dtype must be a complex floating-point type; got {dt}")
    k = np.arange(n)
    w = np.exp(-2j * np.pi * ((k[:, None] * k[None, :]) % max(n, 1)) / max(n, 1))
    if scale == "sqrtn":
        w = w / math.sqrt(n)
    elif scale == "n":
        w = w / n
    return jnp.asarray(w, dtype=dt)
