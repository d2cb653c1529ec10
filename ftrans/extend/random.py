"""``ftrans.extend.random``: ftrans's PRNG implementations and the threefry cipher (JAX's ``jax.extend.random``).

``random_seed``/``seed_with_impl`` return typed key arrays, as JAX's.  ``define_prng_impl`` makes a
user's implementation from four functions on one key's ``uint32`` data (as JAX's): every ``ftrans.random``
function, ``jit``, ``vmap`` and the key arrays' structural operations take its keys.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ftrans import lax
from ftrans.core.operands import as_operand, shape_of
from ftrans.errors import FtransTypeError
from ftrans.random import _samplers
from ftrans.random._prng import (
    PRNGImpl,
    PRNGSpec,
    rbg_prng_impl,
    resolve_impl,
    threefry_prng_impl,
    unsafe_rbg_prng_impl,
)
from ftrans.random._threefry import threefry2x32
from ftrans.transforms.batching import vmap

__all__ = ["PRNGImpl", "define_prng_impl", "threefry_prng_impl", "rbg_prng_impl", "unsafe_rbg_prng_impl", "threefry_2x32",
           "random_seed", "seed_with_impl"]

_U32 = np.dtype(np.uint32)


def threefry_2x32(keypair: Any, count: Any) -> Any:
    """The threefry2x32 cipher of ``count`` (uint32, any shape) under the key ``(k1, k2)``: the flattened
    counts (padded with a zero to an even length) are enciphered as the pairs ``(x[i], x[n/2 + i])`` and
    the two halves of the result laid back in place (JAX's function)."""
    k1, k2 = (as_operand(k) for k in keypair)
    count = as_operand(count)
    got = [np.dtype(x.dtype) for x in (k1, k2, count)]
    if any(d != _U32 for d in got):
        raise FtransTypeError(f"threefry_2x32 requires uint32 arguments, got {[d.name for d in got]}")
    shape = tuple(shape_of(count))
    n = math.prod(shape)
    flat = lax.reshape(count, (n,))
    if n % 2:
        flat = lax.concatenate([flat, np.zeros((1,), _U32)], 0)
    half = (n + 1) // 2
    a, b = threefry2x32(k1, k2, lax.slice(flat, (0,), (half,)), lax.slice(flat, (half,), (2 * half,)))
    out = lax.concatenate([a, b], 0)
    if n % 2:
        out = lax.slice(out, (0,), (n,))
    return lax.reshape(out, shape)


def random_seed(seeds: Any, impl: Any) -> Any:
    """The typed keys ``impl`` makes from each integer of ``seeds`` (a key array of shape ``seeds.shape``)."""
    im = resolve_impl("random_seed", impl)
    if np.ndim(seeds) == 0:
        return _samplers.key(seeds, impl=im)
    return vmap(lambda s: random_seed(s, im))(seeds)


def seed_with_impl(impl: Any, seed: Any) -> Any:
    """``random_seed(seed, impl)``."""
    return random_seed(seed, impl)


def define_prng_impl(*, key_shape: tuple[int, ...], seed: Any, split: Any, random_bits: Any, fold_in: Any,
                     name: str = "<unnamed>", tag: str = "?") -> PRNGSpec:
    """A PRNG implementation of the user's own (JAX's ``jax.extend.random.define_prng_impl``), for
    ``random.key(seed, impl=spec)``/``wrap_key_data(data, impl=spec)``.  Each function acts on one key's
    ``uint32`` data (of shape ``key_shape``): ``seed(seed) -> key``, ``split(key, shape) -> keys`` (of
    shape ``shape + key_shape``), ``random_bits(key, bit_width, shape) -> uint bits`` and
    ``fold_in(key, uint32 data) -> key``; ``tag`` names the key dtype (``key<tag>``)."""
    return PRNGSpec(PRNGImpl(tuple(key_shape), seed, split, random_bits, fold_in, name=name, tag=tag))
