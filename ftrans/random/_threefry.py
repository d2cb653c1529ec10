"""The threefry2x32 block cipher and the key operations built on it, from ftrans primitives.

Threefry-2x32 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3",
SC 2011) with 20 rounds: a pair of 32-bit key words ``(k0, k1)`` enciphers a
pair of 32-bit counter words ``(x0, x1)``.  Every round is an addition, a
rotation and an exclusive or on ``uint32``, so the whole cipher is a short
program of ``add``/``shift_left``/``shift_right_logical``/``or``/``xor``
primitives: it runs eagerly through NumPy, stages into ``jit``, batches under
``vmap`` and has no derivative to take.

The counter layout reproduces JAX's defaults (``jax_threefry_partitionable``
on, which JAX enables by default since 0.5):

* ``random_bits(key, 32, shape)`` enciphers, for the element at row-major
  position ``i``, the counter pair ``(i >> 32, i & 0xFFFFFFFF)`` and xors the
  two output words (64-bit draws concatenate them instead, 8- and 16-bit draws
  truncate the xor);
* ``split(key, shape)`` uses the same counters and keeps both output words as
  the new key;
* ``fold_in(key, d)`` enciphers the single counter pair ``(0, d)``;
* a seed ``s`` becomes the key ``(s >> 32, s & 0xFFFFFFFF)`` of its 64-bit
  two's-complement value (``(0, s mod 2**32)`` for types of 32 bits or less).
"""

from __future__ import annotations

import math

import numpy as np

from ftrans import lax
from ftrans.core.shape_poly import DimExpr
from ftrans.core.trace import Tracer
from ftrans.lax._ops import convert_quiet as _convert  # (no warning for 64-bit dtypes it narrows)

__all__ = ["threefry2x32", "counters", "random_bits", "split_keys", "fold_in_key", "seed_key"]

_U32 = np.dtype(np.uint32)
_U64 = np.dtype(np.uint64)
# Rotation distances of the two alternating groups of four rounds, and the key
# schedule's parity constant (Skein's C240 for 32-bit words).
_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
_PARITY = np.uint32(0x1BD11BDA)


def _u32(v: int) -> np.ndarray:
    return np.asarray(v, _U32)


_ROT_CONSTS = tuple(tuple((_u32(r), _u32(32 - r)) for r in group) for group in _ROTATIONS)
_INJECTION = tuple(_u32(i) for i in range(6))


def _rotl(x, left, right):
    return lax.bitwise_or(lax.shift_left(x, left), lax.shift_right_logical(x, right))


def threefry2x32(k0, k1, x0, x1):
    """Encipher counters ``(x0, x1)`` under key ``(k0, k1)``; all ``uint32``.

    ``k0``/``k1`` are rank-0 (or shaped like the counters); ``x0``/``x1`` share
    one shape.  Returns the two enciphered words, shaped like the counters.
    """
    ks = (k0, k1, lax.bitwise_xor(lax.bitwise_xor(k0, k1), _PARITY))
    a = lax.add(x0, k0)
    b = lax.add(x1, k1)
    for block in range(5):
        for left, right in _ROT_CONSTS[block % 2]:
            a = lax.add(a, b)
            b = lax.bitwise_xor(a, _rotl(b, left, right))
        # Key injection after every four rounds: the schedule rotates through
        # the three key words and the second word also absorbs the block number.
        a = lax.add(a, ks[(block + 1) % 3])
        b = lax.add(lax.add(b, ks[(block + 2) % 3]), _INJECTION[block + 1])
    return a, b


def counters(shape: tuple[int, ...]):
    """The high and low words of the row-major position of each element of ``shape``."""
    n = math.prod(shape)
    if not shape:
        zero = _u32(0)
        return zero, zero
    # A symbolic size counts in one word, as for any size under 2**32 (which a symbolic one is taken to be).
    if isinstance(n, DimExpr) or n < 2**32:
        if len(shape) == 1 or any(isinstance(d, DimExpr) for d in shape):
            lo = lax.iota(_U32, n)
            if len(shape) != 1:
                lo = lax.reshape(lo, shape)
        else:  # as JAX builds them: a sum of iotas along each axis times its stride, which XLA partitions
            strides = [math.prod(shape[d + 1:]) for d in range(len(shape))]
            lo = None
            for d, st in enumerate(strides):
                term = lax.broadcasted_iota(_U32, shape, d)
                if st != 1:
                    term = lax.mul(term, lax.broadcast_in_dim(_u32(st), shape, ()))
                lo = term if lo is None else lax.add(lo, term)
        hi = lax.broadcast_in_dim(_u32(0), shape, ())
        return hi, lo
    return _wide_counters(shape)


def _mul_wide(a, b: int):
    """The 64-bit product of the ``uint32`` array ``a`` and the 32-bit ``b``, as (high, low) words: one
    ``uint64`` multiplication, as JAX's Philox computes it (64-bit values inside a program need no x64).

    (It was four 16-bit partial products summed with their carries: the same bits, but XLA 0.11 and later
    took over a minute to compile Philox's ten rounds of that on the CPU, against 0.1 s for this.)"""
    from ftrans.core.prims import structural as S

    def wide(x):
        return S.convert_element_type_p.bind(x, new_dtype=_U64, weak_type=False)

    shape = tuple(getattr(a, "shape", ()))
    product = lax.mul(wide(a), wide(lax.broadcast_in_dim(_u32(b), shape, ())))
    hi = lax.shift_right_logical(product, wide(lax.broadcast_in_dim(_u32(32), shape, ())))
    narrow = S.convert_element_type_p
    return (narrow.bind(hi, new_dtype=_U32, weak_type=False),
            narrow.bind(product, new_dtype=_U32, weak_type=False))


def _axis_index(shape: tuple[int, ...], axis: int):
    """The index along ``axis`` of each element of ``shape``: a ``uint32`` array, or a (high, low) pair of
    them for an axis of ``2**32`` or more (built from a ``(rows, 2**16)`` grid of two short iotas)."""
    n = shape[axis]
    if n < 2**32:
        return lax.broadcasted_iota(_U32, shape, axis)
    rows = -(-n // 2**16)
    r = lax.broadcasted_iota(_U32, (rows, 2**16), 0)
    c = lax.broadcasted_iota(_U32, (rows, 2**16), 1)
    hi = lax.slice(lax.reshape(lax.shift_right_logical(r, _u32(16)), (rows * 2**16,)), (0,), (n,))
    lo = lax.slice(lax.reshape(lax.bitwise_or(lax.shift_left(r, _u32(16)), c), (rows * 2**16,)), (0,), (n,))
    return (lax.broadcast_in_dim(hi, shape, (axis,)), lax.broadcast_in_dim(lo, shape, (axis,)))


def _wide_counters(shape: tuple[int, ...]):
    """``counters`` for ``2**32`` elements or more (JAX's counters there)."""
    return positions([_axis_index(shape, axis) for axis in range(len(shape))], shape)


def positions(indices, shape: tuple[int, ...]):
    """The row-major positions in ``shape`` of the elements at ``indices`` (per axis, a ``uint32`` index
    array or a (high, low) pair of them; all of one shape) as (high, low) words: the sum over axes of the
    index times the axis stride, in 64-bit arithmetic on pairs of ``uint32`` words."""
    hi = lo = None
    stride = 1
    for axis in reversed(range(len(shape))):
        if shape[axis] > 1:
            idx = indices[axis]
            i_hi, idx = idx if isinstance(idx, tuple) else (None, idx)
            p_hi, p_lo = _mul_wide(idx, stride & 0xFFFFFFFF)
            p_hi = lax.add(p_hi, lax.mul(idx, _u32(stride >> 32)))
            if i_hi is not None:
                p_hi = lax.add(p_hi, lax.mul(i_hi, _u32(stride & 0xFFFFFFFF)))
            if hi is None:
                hi, lo = p_hi, p_lo
            else:
                new_lo = lax.add(lo, p_lo)
                carry = _convert(lax.lt(new_lo, lo), _U32)
                hi, lo = lax.add(lax.add(hi, p_hi), carry), new_lo
        stride *= shape[axis]
    if hi is None:
        first = indices[0][1] if isinstance(indices[0], tuple) else indices[0]
        hi = lo = lax.mul(first, _u32(0))
    return hi, lo


def _materialize(key):
    """``key`` unchanged, computed into its own buffer when staged.

    XLA fuses cheap elementwise producers into each consumer, so a key that
    is itself a cipher output (``split`` then draw) would be re-enciphered
    for every element drawn from it: the work multiplies, and LLVM's compile
    time explodes for some shapes (seconds for a (3, 4) draw).  A sort is
    never fused into its consumers; sorting the two words by their position
    is an identity that forces the key into memory once.
    """
    if not isinstance(key, Tracer):
        return key
    nd = len(key.shape)
    pos = lax.broadcasted_iota(np.dtype(np.int32), key.shape, nd - 1)
    return lax.sort([pos, key], dimension=nd - 1, num_keys=1)[1]


def _key_words(key):
    key = _materialize(key)
    return lax.squeeze(lax.slice(key, (0,), (1,)), (0,)), lax.squeeze(lax.slice(key, (1,), (2,)), (0,))


def _partitionable() -> bool:
    """``jax_threefry_partitionable`` (on by default): off, ``split`` and ``random_bits`` use JAX's original
    counter scheme (``_split_original``, ``_random_bits_original``)."""
    from ftrans.core.config import config

    return config.threefry_partitionable is not False


def _encipher_flat(k0, k1, count):
    """JAX's original scheme's cipher of a flat ``uint32`` count array: padded to an even length, its first
    half enciphered as the first words and its second half as the second words, the two halves of the
    output concatenated (and the padding dropped)."""
    n = count.shape[0]
    if n % 2:
        count = lax.concatenate([count, np.zeros((1,), _U32)], 0)
    half = (n + 1) // 2
    y0, y1 = threefry2x32(k0, k1, lax.slice(count, (0,), (half,)), lax.slice(count, (half,), (2 * half,)))
    out = lax.concatenate([y0, y1], 0)
    return lax.slice(out, (0,), (n,)) if n % 2 else out


def _original_scheme_size(shape: tuple[int, ...], what: str) -> int:
    if any(isinstance(d, DimExpr) for d in shape):
        from ftrans.errors import FtransNotImplementedError

        raise FtransNotImplementedError(
            f"random {what} of the symbolic shape {shape} with jax_threefry_partitionable=False: ftrans draws "
            "symbolic shapes with the partitionable scheme only (JAX's default); leave the option on")
    return math.prod(shape)


def _split_original(key, shape: tuple[int, ...]):
    """``split`` under ``jax_threefry_partitionable=False``: the keys enciphered from the counts
    ``0 .. 2n-1`` by ``_encipher_flat``, in pairs."""
    k0, k1 = _key_words(key)
    n = _original_scheme_size(shape, "split")
    return lax.reshape(_encipher_flat(k0, k1, lax.iota(_U32, 2 * n)), (*shape, 2))


def _random_bits_original(k0, k1, bit_width: int, shape: tuple[int, ...]):
    """``random_bits`` under ``jax_threefry_partitionable=False``: ``ceil(bit_width * size / 32)`` words
    enciphered from the counts ``0, 1, ...`` by ``_encipher_flat``; 64-bit draws join the first half (high
    words) with the second, 8- and 16-bit draws view each word's pieces, lowest first."""
    size = _original_scheme_size(shape, "bits")
    words = -(-bit_width * size // 32)
    if words >= 2**32 - 1:
        from ftrans.errors import FtransNotImplementedError

        raise FtransNotImplementedError(
            f"random bits of shape {shape} need {words} words, more than ftrans draws at once with "
            "jax_threefry_partitionable=False; leave the option on (JAX's default)")
    bits = _encipher_flat(k0, k1, lax.iota(_U32, words))
    if bit_width == 64:
        u64 = np.dtype(np.uint64)
        hi = _convert(lax.slice(bits, (0,), (size,)), u64)
        lo = _convert(lax.slice(bits, (size,), (2 * size,)), u64)
        bits = lax.bitwise_or(lax.shift_left(hi, np.asarray(32, u64)), lo)
    elif bit_width in (8, 16):
        per = 32 // bit_width
        wide = lax.broadcast_in_dim(bits, (words, per), (0,))
        shifts = lax.mul(lax.broadcasted_iota(_U32, (words, per), 1), lax.broadcast_in_dim(_u32(bit_width),
                                                                                          (words, per), ()))
        pieces = lax.bitwise_and(lax.shift_right_logical(wide, shifts),
                                 lax.broadcast_in_dim(_u32(2**bit_width - 1), (words, per), ()))
        pieces = _convert(lax.reshape(pieces, (words * per,)), np.dtype(f"uint{bit_width}"))
        bits = lax.slice(pieces, (0,), (size,))
    return lax.reshape(bits, tuple(shape))


def random_bits(key, bit_width: int, shape: tuple[int, ...]):
    """``bit_width``-bit unsigned random integers of ``shape`` from a ``uint32[2]`` key."""
    k0, k1 = _key_words(key)
    if not _partitionable():
        return _random_bits_original(k0, k1, bit_width, shape)
    hi, lo = counters(shape)
    y0, y1 = threefry2x32(k0, k1, hi, lo)
    if bit_width == 64:
        u64 = np.dtype(np.uint64)
        wide = lax.shift_left(_convert(y0, u64), np.asarray(32, u64))
        return lax.bitwise_or(wide, _convert(y1, u64))
    bits = lax.bitwise_xor(y0, y1)
    if bit_width == 32:
        return bits
    return _convert(bits, np.dtype(f"uint{bit_width}"))


def split_keys(key, shape: tuple[int, ...]):
    """``shape + (2,)`` new keys from one ``uint32[2]`` key."""
    if not _partitionable():
        return _split_original(key, shape)
    k0, k1 = _key_words(key)
    hi, lo = counters(shape)
    y0, y1 = threefry2x32(k0, k1, hi, lo)
    nd = len(shape)
    out_shape = (*shape, 1)
    return lax.concatenate([lax.reshape(y0, out_shape), lax.reshape(y1, out_shape)], nd)


def fold_in_key(key, data):
    """The key ``key`` becomes after folding in the ``uint32`` scalar ``data``."""
    k0, k1 = _key_words(key)
    y0, y1 = threefry2x32(k0, k1, _u32(0), data)
    return lax.concatenate([lax.reshape(y0, (1,)), lax.reshape(y1, (1,))], 0)


def seed_key(seed):
    """The ``uint32[2]`` key of an integer array scalar ``seed`` (traced or concrete)."""
    d = np.dtype(seed.dtype)
    lo = lax.reshape(_convert(seed, _U32), (1,))
    if d.itemsize == 8:
        hi = _convert(lax.shift_right_logical(seed, np.asarray(32, d)), _U32)
        hi = lax.reshape(hi, (1,))
    else:
        hi = np.zeros((1,), _U32)
    return lax.concatenate([hi, lo], 0)
