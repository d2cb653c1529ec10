"""Host-side helpers of JAX's ``numpy``: printing options, file and buffer I/O, DLPack,
``fromfunction`` and ``einsum_path``.

These run on concrete data (or on shapes only), so most are NumPy's own
functions; the ones that produce arrays wrap the NumPy result with
``asarray`` so dtypes are canonicalised (float64 data becomes float32
unless x64 is enabled), as in JAX.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import IO, Any

import numpy as np

import ftrans.numpy as jnp
from ftrans.core import dtypes

__all__ = [
    "ComplexWarning", "printoptions", "get_printoptions", "set_printoptions", "array_repr", "array_str",
    "save", "savez", "load", "frombuffer", "fromstring", "fromfile", "fromiter", "fromfunction",
    "einsum_path", "object_", "character", "flexible",
]

ComplexWarning = np.exceptions.ComplexWarning
printoptions = np.printoptions
get_printoptions = np.get_printoptions
set_printoptions = np.set_printoptions
array_repr = np.array_repr
array_str = np.array_str
save = np.save
savez = np.savez
# NumPy's abstract and object scalar types, for isinstance/issubdtype checks.
object_, character, flexible = np.object_, np.character, np.flexible


def load(file: IO[bytes] | str, *args: Any, **kwargs: Any) -> Any:
    """Load arrays from a `.npy` or `.npz` file.

    It is `np.load`, with a plain array result turned into an ftrans array (raw two-byte void data is read
    back as bfloat16, as JAX saves it).

    Args:
        file: A file name or open binary file.
        *args: Further positional arguments for `np.load`.
        **kwargs: Further keyword arguments for `np.load`.
    Returns:
        An array, or what `np.load` returns for `.npz` files.

    Examples:
        >>> import io
        >>> buf = io.BytesIO()
        >>> np.save(buf, np.arange(3))
        >>> _ = buf.seek(0)
        >>> jnp.load(buf)
        Array([0, 1, 2], dtype=int32)
    """
    out = np.load(file, *args, **kwargs)
    if isinstance(out, np.ndarray):
        if out.dtype == "V2":
            out = out.view(dtypes.bfloat16)
        try:
            out = jnp.asarray(out)
        except (TypeError, ValueError):
            pass
    return out


def frombuffer(buffer: Any, dtype: Any = float, count: int = -1, offset: int = 0) -> Any:
    r"""Interpret a buffer as a 1-D array.

    Args:
        buffer: A bytes-like object.
        dtype: Dtype of the elements.
        count: Number of elements to read (-1: all).
        offset: Byte offset at which to start.
    Returns:
        A 1-D array.

    Examples:
        >>> jnp.frombuffer(b"\x01\x02\x03", dtype=jnp.uint8)
        Array([1, 2, 3], dtype=uint8)

    See also:
        `fromstring`.
    """
    return jnp.asarray(np.frombuffer(buffer=buffer, dtype=dtype, count=count, offset=offset))


def fromstring(string: str, dtype: Any = float, count: int = -1, *, sep: str) -> Any:
    """Build a 1-D array from numbers written in a string.

    Args:
        string: The text.
        dtype: Dtype of the elements.
        count: Number of elements to read (-1: all).
        sep: The separator between numbers (required).
    Returns:
        A 1-D array.

    Examples:
        >>> jnp.fromstring("1 2 3", dtype=int, sep=" ")
        Array([1, 2, 3], dtype=int32)

    See also:
        `frombuffer`.
    """
    return jnp.asarray(np.fromstring(string, dtype=dtype, count=count, sep=sep))


def fromfile(*args: Any, **kwargs: Any) -> Any:
    """``jnp.fromfile`` is deliberately unsupported (as in JAX): reading a file is a side effect."""
    raise NotImplementedError(
        "fromfile: reading files is not supported because it may be non-pure; "
        "use jnp.asarray(np.fromfile(...)) outside transformed functions instead"
    )


def fromiter(*args: Any, **kwargs: Any) -> Any:
    """``jnp.fromiter`` is deliberately unsupported (as in JAX): consuming an iterator is a side effect."""
    raise NotImplementedError(
        "fromiter: consuming iterators is not supported because it may be non-pure; "
        "use jnp.asarray(np.fromiter(...)) outside transformed functions instead"
    )


def fromfunction(function: Callable[..., Any], shape: Any, *, dtype: Any = float, **kwargs: Any) -> Any:
    """Construct an array by calling a function on every index.

    The function is mapped with `vmap` over every index of `shape`, as in JAX: it sees scalar indices (not
    NumPy's grids of index arrays) and may return a pytree.

    Args:
        function: Function of `len(shape)` scalar indices.
        shape: Shape of the result.
        dtype: Dtype of the indices passed to `function`.
        **kwargs: Extra keyword arguments for `function`.
    Returns:
        The array (or pytree of arrays) of values, of shape `shape`.

    Examples:
        >>> jnp.fromfunction(lambda i, j: i * 10 + j, (2, 3), dtype=int)
        Array([[ 0,  1,  2],
               [10, 11, 12]], dtype=int32)

    See also:
        `indices`, `vectorize`.
    """
    from ftrans.transforms.batching import vmap

    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    fn = function
    for i in range(len(shape)):
        fn = vmap(fn, in_axes=tuple(0 if j == i else None for j in range(len(shape)))[::-1])
    return fn(*(jnp.arange(n, dtype=dtype) for n in shape), **kwargs)


def _unoptimized() -> Any:
    """The contraction-order strategy for ``optimize=False``: contract left to right."""
    from opt_einsum import paths

    class Unoptimized(paths.PathOptimizer):
        def __call__(self, inputs: Any, output: Any, size_dict: Any, memory_limit: Any = None) -> list:
            return [(0, 1)] * (len(inputs) - 1)

    return Unoptimized()


def einsum_path(subscripts: str, /, *operands: Any, optimize: bool | str | list = "auto") -> tuple[list, Any]:
    """Compute the pairwise contraction order `einsum` would use.

    The order comes from opt_einsum.

    Args:
        subscripts: The subscripts string.
        *operands: The arrays (only their shapes matter).
        optimize: Contraction-order strategy (`"auto"`, `"greedy"`, `"optimal"`, ...).
    Returns:
        A pair `(path, description)`: the list of contractions (`["einsum_path", (i, j), ...]`) and
        opt_einsum's report.

    Examples:
        >>> path, info = jnp.einsum_path("ij,jk,kl->il", jnp.ones((2, 3)), jnp.ones((3, 4)), jnp.ones((4, 5)))
        >>> path
        [(0, 1), (0, 1)]

    See also:
        `einsum`.
    """
    import opt_einsum

    if isinstance(optimize, bool):
        optimize = "optimal" if optimize else _unoptimized()
    return opt_einsum.contract_path(subscripts, *operands, optimize=optimize)
