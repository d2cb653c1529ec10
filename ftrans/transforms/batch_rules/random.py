"""Batching rules of the PRNG primitives: each acts on every key of its key array alike (the key axes
lead, the results' own axes follow), so the batch axis moves to the front and the primitive runs once
over the larger key array."""

from __future__ import annotations

from typing import Any

from ftrans.core.prims import random as R
from ftrans.transforms.batching import bdim_at_front, moveaxis, register_batching


@register_batching(R.random_seed_p)
def _seed_batch(vals: list, dims: list, *, frame: Any, impl: Any):
    (x,), (d,) = vals, dims
    return R.random_seed_p.bind(x, impl=impl), d


@register_batching(R.random_bits_p)
def _bits_batch(vals: list, dims: list, *, frame: Any, bit_width: int, shape: tuple):
    (k,), (d,) = vals, dims
    return R.random_bits_p.bind(moveaxis(k, d, 0), bit_width=bit_width, shape=shape), 0


@register_batching(R.random_split_p)
def _split_batch(vals: list, dims: list, *, frame: Any, shape: tuple):
    (k,), (d,) = vals, dims
    return R.random_split_p.bind(moveaxis(k, d, 0), shape=shape), 0


@register_batching(R.random_fold_in_p)
def _fold_in_batch(vals: list, dims: list, *, frame: Any):
    (k, m), (dk, dm) = vals, dims
    k = bdim_at_front(k, dk, frame.size)
    m = bdim_at_front(m, dm, frame.size)
    return R.random_fold_in_p.bind(k, m), 0


@register_batching(R.random_wrap_p)
def _wrap_batch(vals: list, dims: list, *, frame: Any, impl: Any):
    (x,), (d,) = vals, dims
    return R.random_wrap_p.bind(moveaxis(x, d, 0), impl=impl), 0


@register_batching(R.random_unwrap_p)
def _unwrap_batch(vals: list, dims: list, *, frame: Any):
    (k,), (d,) = vals, dims
    return R.random_unwrap_p.bind(k), d




@register_batching(R.random_clone_p)
def _clone_batch(vals: list, dims: list, *, frame: Any):
    (k,), (d,) = vals, dims
    return R.random_clone_p.bind(k), d


@register_batching(R.consume_p)
def _consume_batch(vals: list, dims: list, *, frame: Any):
    (k,), (d,) = vals, dims
    return R.consume_p.bind(k), d


@register_batching(R.random_gamma_p)
def _gamma_batch(vals: list, dims: list, *, frame: Any, log_space: bool):
    (k, a), (dk, da) = vals, dims
    k = bdim_at_front(k, dk, frame.size)
    a = bdim_at_front(a, da, frame.size)
    return R.random_gamma_p.bind(k, a, log_space=log_space), 0
