"""JAX's four-word counter-based generators: ``threefry4x32`` and ``philox4x32`` (Random123's Threefry-4x32
with 20 rounds and Philox-4x32 with 10), from ftrans primitives.

Each enciphers a four-word counter under a key (four words for Threefry, two for Philox).  The counter
layout is JAX's: an element's row-major position ``i`` is the word pair ``(i >> 32, i & 0xFFFFFFFF)``
(``_threefry.counters``); ``random_bits`` puts it in the first two counter words, ``split`` in the last
two, ``fold_in`` enciphers ``(0, 0, 0, data)``; a seed's words ``(hi, lo)`` are enciphered (Threefry: as the
key's first two words under a zero counter; Philox: as the counter's first two words under a zero key).
32-bit (and narrower) draws xor the four output words; 64-bit draws join two words (Threefry: ``y0 ^ y2``
and ``y1 ^ y3``; Philox: ``y0`` and ``y1``).
"""

from __future__ import annotations

import numpy as np

from ftrans import lax
from ftrans.lax._ops import convert_quiet as _convert  # (no warning for 64-bit dtypes it narrows)
from ftrans.random import _threefry as _tf

__all__ = ["threefry4x32", "philox4x32", "threefry4x32_ops", "philox4x32_ops"]

_U32 = np.dtype(np.uint32)
_U64 = np.dtype(np.uint64)
_UINT = {8: np.dtype(np.uint8), 16: np.dtype(np.uint16), 32: _U32}
_ZERO = np.uint32(0)

# Threefry-4x32: the rotation pair of each of the eight rounds of a cycle, and the key schedule's parity word.
_R4 = ((10, 26), (11, 21), (13, 27), (23, 5), (6, 20), (17, 11), (25, 10), (18, 20))
_PARITY = np.uint32(0x1BD11BDA)
# Philox-4x32: the two round multipliers and the two Weyl increments of the key.
_M0, _M1 = 0xD2511F53, 0xCD9E8D57
_W0, _W1 = np.uint32(0x9E3779B9), np.uint32(0xBB67AE85)


def _rotl(x, r: int):
    return lax.bitwise_or(lax.shift_left(x, np.uint32(r)), lax.shift_right_logical(x, np.uint32(32 - r)))


def _mix(x: list, a: int, b: int, r: int) -> None:
    x[a] = lax.add(x[a], x[b])
    x[b] = lax.bitwise_xor(x[a], _rotl(x[b], r))


def threefry4x32(k: tuple, x: tuple) -> tuple:
    """Twenty Threefry-4x32 rounds on the counter words ``x`` under the key words ``k`` (``uint32``)."""
    par = _PARITY
    for w in k:
        par = lax.bitwise_xor(par, w)
    ks = (*k, par)
    x = [lax.add(x[i], ks[i]) for i in range(4)]
    for rnd in range(20):
        r0, r1 = _R4[rnd % 8]
        if rnd % 2 == 0:
            _mix(x, 0, 1, r0)
            _mix(x, 2, 3, r1)
        else:
            _mix(x, 0, 3, r0)
            _mix(x, 2, 1, r1)
        if rnd % 4 == 3:
            s = rnd // 4 + 1
            x = [lax.add(x[i], ks[(s + i) % 5]) for i in range(4)]
            x[3] = lax.add(x[3], np.uint32(s))
    return tuple(x)


def philox4x32(k: tuple, x: tuple) -> tuple:
    """Ten Philox-4x32 rounds on the counter words ``x`` under the two key words ``k`` (``uint32``)."""
    k0, k1 = k
    x0, x1, x2, x3 = x
    for rnd in range(10):
        if rnd:
            k0, k1 = lax.add(k0, _W0), lax.add(k1, _W1)
        hi0, lo0 = _tf._mul_wide(x0, _M0)
        hi1, lo1 = _tf._mul_wide(x2, _M1)
        x0, x1, x2, x3 = (lax.bitwise_xor(lax.bitwise_xor(hi1, x1), k0), lo1,
                          lax.bitwise_xor(lax.bitwise_xor(hi0, x3), k1), lo0)
    return x0, x1, x2, x3


def _words(key, n: int) -> tuple:
    key = _tf._materialize(key)
    return tuple(lax.squeeze(lax.slice(key, (i,), (i + 1,)), (0,)) for i in range(n))


def _pack(ys, shape: tuple) -> object:
    return lax.concatenate([lax.reshape(y, (*shape, 1)) for y in ys], len(shape))


def _full(v, shape: tuple):
    return lax.broadcast_in_dim(np.asarray(v, _U32), shape, ())


def _ops(cipher, n_key: int, n_out: int, wide):
    """(seed_from_half, split, fold_in, random_bits) of a four-word cipher with ``n_key`` key words whose
    keys keep the first ``n_out`` output words."""

    def seed_from_half(half):
        hi, lo = _words(_convert(half, _U32), 2)
        if n_key == 4:
            ys = cipher((hi, lo, _ZERO, _ZERO), (_ZERO, _ZERO, _ZERO, _ZERO))
        else:
            ys = cipher((_ZERO, _ZERO), (hi, lo, _ZERO, _ZERO))
        return _pack(ys[:n_out], ())

    def split(key, shape: tuple):
        hi, lo = _tf.counters(shape)
        z = _full(0, shape)
        return _pack(cipher(_words(key, n_key), (z, z, hi, lo))[:n_out], shape)

    def fold_in(key, data):
        return _pack(cipher(_words(key, n_key), (_ZERO, _ZERO, _ZERO, data))[:n_out], ())

    def random_bits(key, bit_width: int, shape: tuple):
        hi, lo = _tf.counters(shape)
        z = _full(0, shape)
        y = cipher(_words(key, n_key), (hi, lo, z, z))
        if bit_width == 64:
            a, b = wide(y)
            return lax.bitwise_or(lax.shift_left(_convert(a, _U64), np.asarray(32, _U64)),
                                  _convert(b, _U64))
        bits = lax.bitwise_xor(lax.bitwise_xor(y[0], y[1]), lax.bitwise_xor(y[2], y[3]))
        return bits if bit_width == 32 else _convert(bits, _UINT[bit_width])

    return seed_from_half, split, fold_in, random_bits


threefry4x32_ops = _ops(threefry4x32, 4, 4, lambda y: (lax.bitwise_xor(y[0], y[2]), lax.bitwise_xor(y[1], y[3])))
philox4x32_ops = _ops(philox4x32, 2, 2, lambda y: (y[0], y[1]))
