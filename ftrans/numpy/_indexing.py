"""NumPy indexing (``x[idx]``), ``x.at[idx]`` updates, take, nonzero, ..."""

from __future__ import annotations

from typing import Any

from ftrans.core.prims import structural as S
from ftrans.errors import FtransIndexError, FtransTypeError
from ftrans.numpy._util import as_operand

__all__: list[str] = []


def _getitem(x: Any, idx: Any) -> Any:
    """Basic indexing with static ints and slices (the full version replaces this)."""
    x = as_operand(x)
    if not isinstance(idx, tuple):
        idx = (idx,)
    starts, limits, strides, squeeze = [], [], [], []
    for ax, (n, i) in enumerate(zip(x.shape, list(idx) + [slice(None)] * (len(x.shape) - len(idx)))):
        if isinstance(i, int):
            if not -n <= i < n:
                raise FtransIndexError(f"index {i} is out of bounds for axis {ax} with size {n}")
            i %= n
            starts.append(i), limits.append(i + 1), strides.append(1), squeeze.append(ax)
        elif isinstance(i, slice):
            s, e, k = i.indices(n)
            if k < 0:
                raise FtransTypeError("negative slice steps are handled by the full indexing module")
            starts.append(s), limits.append(max(s, e)), strides.append(k)
        else:
            raise FtransTypeError(f"unsupported index {i!r}")
    out = S.slice_p.bind(x, start_indices=tuple(starts), limit_indices=tuple(limits), strides=tuple(strides))
    return S.squeeze_p.bind(out, dimensions=tuple(squeeze)) if squeeze else out


class _IndexUpdateHelper:
    """``x.at``: indexed, functional updates."""

    __slots__ = ("array",)

    def __init__(self, array: Any):
        self.array = array

    def __getitem__(self, idx: Any) -> Any:
        raise FtransTypeError("x.at[...] updates are provided by the full indexing module")
