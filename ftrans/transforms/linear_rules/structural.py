"""Transpose rules of the structural primitives: data movement is linear, so each moves the cotangent back.

Integer operands (start indices, the ``select_n`` selector) are never
linear; they are read as values.  ``convert_element_type`` converts the
cotangent back to the operand's type; ``pad`` is linear in the operand and
the padding value jointly (the padding value's cotangent is the sum over the
padded positions); ``dynamic_update_slice`` in the operand and the update.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ftrans.core.primitive import mark_unsupported
from ftrans.core.prims import reductions as R
from ftrans.core.prims import structural as S
from ftrans.core.trace import aval_of
from ftrans.transforms.ad import Zero
from ftrans.transforms.linear_rules._util import ct_zeros, zeros
from ftrans.transforms.transpose import is_undefined, register_transpose


@register_transpose(S.convert_element_type_p)
def _convert_t(ct: Any, x: Any, *, new_dtype: Any, weak_type: bool) -> list:
    old = x.aval
    c = aval_of(ct)
    if c.dtype == old.dtype and c.weak_type == old.weak_type:
        return [ct]
    if aval_of(ct).dtype.kind == "c" and old.dtype.kind != "c":
        from ftrans.core.prims import elementwise as E

        ct = E.real_p.bind(ct)
    return [S.convert_element_type_p.bind(ct, new_dtype=old.dtype, weak_type=old.weak_type)]


@register_transpose(S.select_n_p)
def _select_n_t(ct: Any, which: Any, *cases: Any) -> list:
    if is_undefined(which):
        raise NotImplementedError("transpose of `select_n` in its selector: the selector is not linear")
    zero = None
    out: list = [None]
    for i, c in enumerate(cases):
        if not is_undefined(c):
            out.append(None)
            continue
        if zero is None:
            zero = ct_zeros(c.aval, ct)
        out.append(S.select_n_p.bind(which, *[ct if j == i else zero for j in range(len(cases))]))
    return out


@register_transpose(S.broadcast_in_dim_p)
def _broadcast_in_dim_t(ct: Any, x: Any, *, shape: tuple, broadcast_dimensions: tuple) -> list:
    in_shape = tuple(x.aval.shape)
    new_dims = tuple(d for d in range(len(shape)) if d not in broadcast_dimensions)
    expanded = tuple(d for i, d in enumerate(broadcast_dimensions) if in_shape[i] == 1 and shape[d] != 1)
    axes = tuple(sorted(new_dims + expanded))
    if axes:
        ct = R.reduce_sum_p.bind(ct, axes=axes)
    if tuple(aval_of(ct).shape) != in_shape:
        ct = S.reshape_p.bind(ct, new_sizes=in_shape, dimensions=None)
    return [ct]


def _reshape_back(ct: Any, x: Any, **_: Any) -> list:
    return [S.reshape_p.bind(ct, new_sizes=tuple(x.aval.shape), dimensions=None)]


for _p in (S.squeeze_p, S.expand_dims_p):
    register_transpose(_p)(_reshape_back)


@register_transpose(S.reshape_p)
def _reshape_t(ct: Any, x: Any, *, new_sizes: tuple, dimensions: Any) -> list:
    if dimensions is not None:
        # reshape with `dimensions` transposes first: undo the reshape, then the transpose.
        perm = tuple(dimensions)
        shape = tuple(x.aval.shape[d] for d in perm)
        back = S.reshape_p.bind(ct, new_sizes=shape, dimensions=None)
        return [S.transpose_p.bind(back, permutation=tuple(int(i) for i in np.argsort(perm)))]
    return _reshape_back(ct, x)


@register_transpose(S.transpose_p)
def _transpose_t(ct: Any, x: Any, *, permutation: tuple) -> list:
    return [S.transpose_p.bind(ct, permutation=tuple(int(i) for i in np.argsort(permutation)))]


@register_transpose(S.rev_p)
def _rev_t(ct: Any, x: Any, *, dimensions: tuple) -> list:
    return [S.rev_p.bind(ct, dimensions=dimensions)]


@register_transpose(S.slice_p)
def _slice_t(ct: Any, x: Any, *, start_indices: tuple, limit_indices: tuple, strides: Any) -> list:
    shape = tuple(x.aval.shape)
    strides = tuple(strides) if strides is not None else (1,) * len(shape)
    ct_shape = tuple(aval_of(ct).shape)
    config = []
    for n, s, k, st in zip(shape, start_indices, ct_shape, strides):
        last = s + (k - 1) * st + 1 if k > 0 else s
        config.append((s, n - last, st - 1 if k > 1 else 0))
    # (JAX pads with a strong zero, so the result is strongly typed even for a weak cotangent)
    return [S.pad_p.bind(ct, zeros(aval_of(ct).update(shape=(), weak_type=False)), padding_config=tuple(config))]


@register_transpose(S.pad_p)
def _pad_t(ct: Any, x: Any, padv: Any, *, padding_config: tuple) -> list:
    lo, hi, interior = zip(*padding_config) if padding_config else ((), (), ())
    unpad = tuple((-a, -b, 0) for a, b in zip(lo, hi))
    scalar0 = zeros(aval_of(ct).update(shape=(), weak_type=False))  # (JAX's is a strong np.array(0., dtype))
    inner = S.pad_p.bind(ct, scalar0, padding_config=unpad)
    inner_shape = tuple(aval_of(inner).shape)
    t_x = S.slice_p.bind(inner, start_indices=(0,) * len(inner_shape), limit_indices=inner_shape,
                         strides=tuple(i + 1 for i in interior))
    out: list = [t_x if is_undefined(x) else None, None]
    if is_undefined(padv):
        from ftrans.core.prims import elementwise as E

        axes = tuple(range(len(inner_shape)))
        total = R.reduce_sum_p.bind(ct, axes=axes)
        out[1] = E.sub_p.bind(total, R.reduce_sum_p.bind(t_x, axes=axes))
    return out


@register_transpose(S.split_p)
def _split_t(cts: list, x: Any, *, sizes: tuple, axis: int) -> list:
    # JAX's: the cotangents concatenated, a missing one as zeros of its piece's type (weak when it is)
    if all(type(ct) is Zero for ct in cts):
        return [None]
    full = [zeros(ct.aval) if type(ct) is Zero else ct for ct in cts]
    return [full[0] if len(full) == 1 else S.concatenate_p.bind(*full, dimension=axis)]


@register_transpose(S.concatenate_p)
def _concatenate_t(ct: Any, *xs: Any, dimension: int) -> list:
    out = []
    start = 0
    ct_shape = tuple(aval_of(ct).shape)
    for x in xs:
        size = (x.aval if is_undefined(x) else aval_of(x)).shape[dimension]
        if is_undefined(x):
            starts = [0] * len(ct_shape)
            limits = list(ct_shape)
            starts[dimension], limits[dimension] = start, start + size
            out.append(S.slice_p.bind(ct, start_indices=tuple(starts), limit_indices=tuple(limits), strides=None))
        else:
            out.append(None)
        start += size
    return out


@register_transpose(S.dynamic_slice_p)
def _dynamic_slice_t(ct: Any, x: Any, *starts: Any, slice_sizes: tuple) -> list:
    if any(is_undefined(s) for s in starts):
        raise NotImplementedError("transpose of `dynamic_slice` in its start indices (they are integers)")
    base = zeros(x.aval.update(weak_type=False))  # JAX's are lax.full(shape, 0, dtype): strong
    return [S.dynamic_update_slice_p.bind(base, ct, *starts)] + [None] * len(starts)


@register_transpose(S.dynamic_update_slice_p)
def _dynamic_update_slice_t(ct: Any, x: Any, update: Any, *starts: Any) -> list:
    if any(is_undefined(s) for s in starts):
        raise NotImplementedError("transpose of `dynamic_update_slice` in its start indices (they are integers)")
    up_aval = update.aval if is_undefined(update) else aval_of(update)
    t_x = S.dynamic_update_slice_p.bind(ct, ct_zeros(up_aval, ct), *starts) if is_undefined(x) else None
    t_up = (S.dynamic_slice_p.bind(ct, *starts, slice_sizes=tuple(up_aval.shape))
            if is_undefined(update) else None)
    return [t_x, t_up] + [None] * len(starts)


@register_transpose(S.to_edtype_p)
def _to_edtype_transpose(ct: Any, x: Any, *, edtype: Any) -> list:
    """As JAX's: the cotangent converted back to the operand's (representation) dtype."""
    return [S.from_edtype_p.bind(ct, dtype=x.aval.dtype)]


@register_transpose(S.from_edtype_p)
def _from_edtype_transpose(ct: Any, x: Any, *, dtype: Any) -> list:
    """As JAX's: the cotangent converted to the operand's extended dtype."""
    return [S.to_edtype_p.bind(ct, edtype=x.aval.dtype)]


for _p, _why in ((S.bitcast_convert_type_p, "a bitcast reinterprets bits; it is not linear"),
                 (S.clamp_p, "clamp is not linear"),
                 (S.iota_p, "iota has no operands"),
                 (S.dim_as_value_p, "dim_as_value has no operands"),
                 (S.rng_bit_generator_p, "rng_bit_generator makes random bits; it is not linear")):
    mark_unsupported(_p, "transpose", _why)
