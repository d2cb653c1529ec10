"""JAX's ``nn.initializers``: parameter initializers ``init(key, shape, dtype) -> Array``.

They draw from ``ftrans.random`` with the same calls, in the same order, as
JAX's initializers, so the same key gives the same values bit for bit.
``ftrans.random`` is imported inside the functions, which keeps importing
``ftrans.nn`` independent of it.
"""

from __future__ import annotations

import math
import typing
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from ftrans import numpy as jnp
from ftrans.core import dtypes

__all__ = [
    "Initializer", "constant", "delta_orthogonal", "glorot_normal", "glorot_uniform", "he_normal",
    "he_uniform", "kaiming_normal", "kaiming_uniform", "lecun_normal", "lecun_uniform", "normal", "ones",
    "orthogonal", "truncated_normal", "uniform", "variance_scaling", "xavier_normal", "xavier_uniform",
    "zeros",
]


@typing.runtime_checkable
class Initializer(Protocol):
    """What every initializer is: ``init(key, shape, dtype=None, out_sharding=None) -> Array``."""

    def __call__(self, key: Any, shape: Sequence[int], dtype: Any = None, out_sharding: Any = None) -> Any:
        raise NotImplementedError


def _random() -> Any:
    from ftrans import random

    return random


def _dtype(dtype: Any) -> np.dtype:
    return dtypes.default_float() if dtype is None else dtypes.to_dtype(dtype)


def _no_sharding(name: str, out_sharding: Any) -> None:
    if out_sharding is not None:
        raise NotImplementedError(f"nn.initializers.{name}: the out_sharding argument is not supported")


def _shape(shape: Any) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)):
        return (int(shape),)
    return tuple(int(d) for d in shape)


def zeros(key: Any, shape: Sequence[int], dtype: Any = None, out_sharding: Any = None) -> Any:
    """An array of zeros (the key is ignored)."""
    return jnp.zeros(shape, _dtype(dtype), out_sharding=out_sharding)


def ones(key: Any, shape: Sequence[int], dtype: Any = None, out_sharding: Any = None) -> Any:
    """An array of ones (the key is ignored)."""
    return jnp.ones(shape, _dtype(dtype), out_sharding=out_sharding)


def constant(value: Any, dtype: Any = None) -> Initializer:
    """An initializer giving arrays full of ``value``."""

    def init(key: Any, shape: Sequence[int], dtype: Any = dtype, out_sharding: Any = None) -> Any:
        return jnp.full(shape, value, dtype=_dtype(dtype), out_sharding=out_sharding)

    return init


def uniform(scale: Any = 1e-2, dtype: Any = None) -> Initializer:
    """An initializer drawing uniformly from ``[0, scale)``."""

    def init(key: Any, shape: Sequence[int], dtype: Any = dtype, out_sharding: Any = None) -> Any:
        dt = _dtype(dtype)
        return _random().uniform(key, shape, dt, out_sharding=out_sharding) * jnp.array(scale, dt)

    return init


def normal(stddev: Any = 1e-2, dtype: Any = None) -> Initializer:
    """An initializer drawing from a normal distribution with mean 0 and standard deviation ``stddev``."""

    def init(key: Any, shape: Sequence[int], dtype: Any = dtype, out_sharding: Any = None) -> Any:
        dt = _dtype(dtype)
        return _random().normal(key, shape, dt, out_sharding=out_sharding) * jnp.array(stddev, dt)

    return init


def truncated_normal(stddev: Any = 1e-2, dtype: Any = None, lower: Any = -2.0, upper: Any = 2.0) -> Initializer:
    """An initializer drawing ``stddev * z`` with ``z`` a standard normal truncated to ``(lower, upper)``."""

    def init(key: Any, shape: Sequence[int], dtype: Any = dtype, out_sharding: Any = None) -> Any:
        dt = _dtype(dtype)
        return _random().truncated_normal(key, lower, upper, shape, dt,
                                          out_sharding=out_sharding) * jnp.array(stddev, dt)

    return init


def _compute_fans(shape: Sequence[int], in_axis: Any = -2, out_axis: Any = -1, batch_axis: Any = ()
                  ) -> tuple[float, float]:
    """Effective fan-in and fan-out; the axes named nowhere form the receptive field."""
    if isinstance(in_axis, int) and in_axis == -2 and len(shape) <= 1:
        raise ValueError(
            f"Can't compute input and output sizes of a {len(shape)}-dimensional weights tensor with "
            "default in_axis. Must be at least 2D or specify in_axis explicitly."
        )

    def size(axes: Any) -> int:
        if isinstance(axes, int):
            return shape[axes]
        return math.prod(shape[i] for i in axes)

    in_size, out_size, batch_size = size(in_axis), size(out_axis), size(batch_axis)
    receptive = math.prod(shape) / in_size / out_size / batch_size
    return in_size * receptive, out_size * receptive


def _real_dtype(dt: np.dtype) -> np.dtype:
    return np.array(0, dt).real.dtype


def _complex_uniform(key: Any, shape: Sequence[int], dt: np.dtype) -> Any:
    """Uniform on a disk of the complex plane, mean 0 and variance 1."""
    random = _random()
    key_r, key_theta = random.split(key)
    real = _real_dtype(dt)
    r = jnp.sqrt(2 * random.uniform(key_r, shape, real)).astype(dt)
    theta = 2 * np.pi * random.uniform(key_theta, shape, real).astype(dt)
    return r * jnp.exp(1j * theta)


def _complex_truncated_normal(key: Any, upper: Any, shape: Sequence[int], dt: np.dtype) -> Any:
    """A centred complex normal (variance 1 before truncation) whose modulus is truncated at ``upper``."""
    random = _random()
    key_r, key_theta = random.split(key)
    real = _real_dtype(dt)
    t = (1 - jnp.exp(jnp.array(-(upper**2), dt))) * random.uniform(key_r, shape, real).astype(dt)
    r = jnp.sqrt(-jnp.log(1 - t))
    theta = 2 * np.pi * random.uniform(key_theta, shape, real).astype(dt)
    return r * jnp.exp(1j * theta)


def variance_scaling(scale: Any, mode: str, distribution: str, in_axis: Any = -2, out_axis: Any = -1,
                     batch_axis: Any = (), dtype: Any = None) -> Initializer:
    """Samples with variance ``scale / n``, ``n`` the fan given by ``mode``.

    ``mode``: ``"fan_in"``, ``"fan_out"``, ``"fan_avg"`` or ``"fan_geo_avg"``;
    ``distribution``: ``"truncated_normal"`` (truncated at 2 standard
    deviations and rescaled so the variance is right), ``"normal"`` or
    ``"uniform"`` (a disk for complex dtypes).
    """

    def init(key: Any, shape: Sequence[int], dtype: Any = dtype, out_sharding: Any = None) -> Any:
        shape = _shape(shape)
        dt = _dtype(dtype)
        fan_in, fan_out = _compute_fans(shape, in_axis, out_axis, batch_axis)
        if mode == "fan_in":
            denominator = fan_in
        elif mode == "fan_out":
            denominator = fan_out
        elif mode == "fan_avg":
            denominator = (fan_in + fan_out) / 2
        elif mode == "fan_geo_avg":
            denominator = (fan_in * fan_out) ** 0.5
        else:
            raise ValueError(f"invalid mode for variance scaling initializer: {mode}")
        variance = jnp.array(scale / denominator, dtype=dt)
        random = _random()
        floating = dtypes.issubdtype(dt, np.floating)
        if distribution == "truncated_normal":
            if floating:
                stddev = jnp.sqrt(variance) / jnp.array(0.87962566103423978, dt)
                return random.truncated_normal(key, -2, 2, shape, dt, out_sharding=out_sharding) * stddev
            stddev = jnp.sqrt(variance) / jnp.array(0.95311164380491208, dt)
            return _complex_truncated_normal(key, 2, shape, dt) * stddev  # as JAX: out_sharding unused
        if distribution == "normal":
            return random.normal(key, shape, dt, out_sharding=out_sharding) * jnp.sqrt(variance)
        if distribution == "uniform":
            if floating:
                return random.uniform(key, shape, dt, -1, out_sharding=out_sharding) * jnp.sqrt(3 * variance)
            return _complex_uniform(key, shape, dt) * jnp.sqrt(variance)
        raise ValueError(f"invalid distribution for variance scaling initializer: {distribution}")

    return init


def glorot_uniform(in_axis: Any = -2, out_axis: Any = -1, batch_axis: Any = (), dtype: Any = None) -> Initializer:
    """``variance_scaling(1.0, "fan_avg", "uniform")`` (Xavier uniform)."""
    return variance_scaling(1.0, "fan_avg", "uniform", in_axis=in_axis, out_axis=out_axis,
                            batch_axis=batch_axis, dtype=dtype)


def glorot_normal(in_axis: Any = -2, out_axis: Any = -1, batch_axis: Any = (), dtype: Any = None) -> Initializer:
    """``variance_scaling(1.0, "fan_avg", "truncated_normal")`` (Xavier normal)."""
    return variance_scaling(1.0, "fan_avg", "truncated_normal", in_axis=in_axis, out_axis=out_axis,
                            batch_axis=batch_axis, dtype=dtype)


def lecun_uniform(in_axis: Any = -2, out_axis: Any = -1, batch_axis: Any = (), dtype: Any = None) -> Initializer:
    """``variance_scaling(1.0, "fan_in", "uniform")``."""
    return variance_scaling(1.0, "fan_in", "uniform", in_axis=in_axis, out_axis=out_axis,
                            batch_axis=batch_axis, dtype=dtype)


def lecun_normal(in_axis: Any = -2, out_axis: Any = -1, batch_axis: Any = (), dtype: Any = None) -> Initializer:
    """``variance_scaling(1.0, "fan_in", "truncated_normal")``."""
    return variance_scaling(1.0, "fan_in", "truncated_normal", in_axis=in_axis, out_axis=out_axis,
                            batch_axis=batch_axis, dtype=dtype)


def he_uniform(in_axis: Any = -2, out_axis: Any = -1, batch_axis: Any = (), dtype: Any = None) -> Initializer:
    """``variance_scaling(2.0, "fan_in", "uniform")`` (Kaiming uniform)."""
    return variance_scaling(2.0, "fan_in", "uniform", in_axis=in_axis, out_axis=out_axis,
                            batch_axis=batch_axis, dtype=dtype)


def he_normal(in_axis: Any = -2, out_axis: Any = -1, batch_axis: Any = (), dtype: Any = None) -> Initializer:
    """``variance_scaling(2.0, "fan_in", "truncated_normal")`` (Kaiming normal)."""
    return variance_scaling(2.0, "fan_in", "truncated_normal", in_axis=in_axis, out_axis=out_axis,
                            batch_axis=batch_axis, dtype=dtype)


xavier_uniform = glorot_uniform
xavier_normal = glorot_normal
kaiming_uniform = he_uniform
kaiming_normal = he_normal


def _orthogonal_matrix(key: Any, n: int, m: int, dt: np.dtype) -> Any:
    """An ``n x m`` matrix with orthonormal columns (or rows): the Q of a Gaussian matrix, signs fixed by R."""
    qr = getattr(jnp.linalg, "qr", None)
    if qr is None:
        raise NotImplementedError("orthogonal initializers need ftrans.numpy.linalg.qr, which is not available yet")
    z = _random().normal(key, (max(n, m), min(n, m)), dt)
    q, r = qr(z)
    d = jnp.diagonal(r, 0, -2, -1)
    q = q * jnp.expand_dims(jnp.sign(d), -2)
    return q if n >= m else q.T


def orthogonal(scale: Any = 1.0, column_axis: int = -1, dtype: Any = None) -> Initializer:
    """An initializer giving (uniformly random) orthogonal matrices along ``column_axis``, times ``scale``."""

    def init(key: Any, shape: Sequence[int], dtype: Any = dtype, out_sharding: Any = None) -> Any:
        _no_sharding("orthogonal", out_sharding)
        shape = _shape(shape)
        dt = _dtype(dtype)
        if len(shape) < 2:
            raise ValueError("orthogonal initializer requires at least a 2D shape")
        if any(d == 0 for d in shape):
            return jnp.zeros(shape, dtype=dt)
        n_rows, n_cols = math.prod(shape) // shape[column_axis], shape[column_axis]
        q = _orthogonal_matrix(key, n_rows, n_cols, dt)
        q = jnp.reshape(q, tuple(np.delete(shape, column_axis)) + (shape[column_axis],))
        q = jnp.moveaxis(q, -1, column_axis)
        return jnp.array(scale, dt) * q

    return init


def delta_orthogonal(scale: Any = 1.0, column_axis: int = -1, dtype: Any = None) -> Initializer:
    """For 3-5D convolution kernels: zeros except an orthogonal matrix at the spatial centre."""

    def init(key: Any, shape: Sequence[int], dtype: Any = dtype, out_sharding: Any = None) -> Any:
        _no_sharding("delta_orthogonal", out_sharding)
        shape = _shape(shape)
        dt = _dtype(dtype)
        if len(shape) not in (3, 4, 5):
            raise ValueError("Delta orthogonal initializer requires a 3D, 4D or 5D shape.")
        if shape[-1] < shape[-2]:
            raise ValueError("`fan_in` must be less or equal than `fan_out`. ")
        ortho = orthogonal(scale=scale, column_axis=column_axis, dtype=dt)(key, shape[-2:])
        centre = tuple((k - 1) // 2 for k in shape[:-2])
        return jnp.zeros(shape, dtype=dt).at[centre].set(ortho)

    return init
