"""Transpose rule of ``reduce_window_sum`` (sum pooling), the one linear windowed primitive.

Each input element receives the sum of the cotangents of the windows that
contain it.  That is again a windowed sum: spread the cotangent out by the
strides (interior padding), pad its edges so every input position sees each
window that covered it, and sum windows of the same size and dilation with
the base dilation as the stride.  ``reduce_window_max``/``min`` are not linear;
their derivatives are built from gathers.
"""

from __future__ import annotations

from typing import Any

from ftrans.core.primitive import mark_unsupported
from ftrans.core.prims import structural as S
from ftrans.core.prims import windowed as W
from ftrans.core.trace import aval_of
from ftrans.transforms.linear_rules._util import zeros
from ftrans.transforms.transpose import register_transpose


def _dilated(n: int, d: int) -> int:
    return 0 if n == 0 else 1 + d * (n - 1)


@register_transpose(W.reduce_window_sum_p)
def _reduce_window_sum_t(ct: Any, x: Any, *, window_dimensions: tuple, window_strides: tuple, padding: tuple,
                         base_dilation: tuple, window_dilation: tuple) -> list:
    in_shape = tuple(x.aval.shape)
    if not in_shape:
        return [ct]
    out_shape = tuple(aval_of(ct).shape)
    config = []
    for n, w, s, (lo, _hi), bd, wd, m in zip(in_shape, window_dimensions, window_strides, padding, base_dilation,
                                             window_dilation, out_shape):
        lhs, rhs, out = _dilated(n, bd), _dilated(w, wd), _dilated(m, s)
        before = rhs - lo - 1
        after = lhs + rhs - 1 - out - before
        config.append((before, after, s - 1))
    padded = S.pad_p.bind(ct, zeros(aval_of(ct).update(shape=())), padding_config=tuple(config))
    nd = len(in_shape)
    out = W.reduce_window_sum_p.bind(padded, window_dimensions=tuple(window_dimensions),
                                     window_strides=tuple(base_dilation), padding=((0, 0),) * nd,
                                     base_dilation=(1,) * nd, window_dilation=tuple(window_dilation))
    return [out]


for _p in (W.reduce_window_max_p, W.reduce_window_min_p, W.reduce_window_p):
    mark_unsupported(_p, "transpose", f"`{_p.name}` is not linear")
