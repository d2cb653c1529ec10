"""Activation functions and the other functions of JAX's ``nn`` module, written with ``ftrans.numpy`` and ``ftrans.lax``.

Each function follows the formula JAX uses (the same operations in the same
order), so values agree to the last bit on the same backend, and derivatives
agree too: ``relu``/``relu6`` carry custom JVP rules with derivative 0 at the
kinks, and ``log_softmax``/``softmax``/``logsumexp`` subtract a
``stop_gradient``-ed maximum, as JAX's defaults do.
"""

from __future__ import annotations

import operator
import warnings
from typing import Any

import numpy as np

from ftrans import lax
from ftrans import numpy as jnp
from ftrans.core import dtypes
from ftrans.core.operands import canonicalize_axes, check_arraylike, ndim_of, shape_of
from ftrans.numpy._elementwise import _inexact
from ftrans.scipy.special import logsumexp
from ftrans.transforms.custom_derivatives import custom_jvp

__all__ = [
    "celu", "elu", "gelu", "glu", "hard_sigmoid", "hard_silu", "hard_swish", "hard_tanh", "identity",
    "leaky_relu", "log1mexp", "log_sigmoid", "log_softmax", "logmeanexp", "logsumexp", "mish", "one_hot",
    "relu", "relu6", "selu", "sigmoid", "silu", "soft_sign", "softmax", "softplus", "sparse_plus",
    "sparse_sigmoid", "squareplus", "standardize", "swish", "tanh",
]


def _arraylike(name: str, x: Any) -> Any:
    """JAX's ``ensure_arraylike``: arrays and scalars pass (as arrays), lists and other objects are refused."""
    check_arraylike(name, x)
    return jnp.asarray(x)


def identity(x: Any) -> Any:
    """JAX's ``nn.identity``: the argument, as an array."""
    return _arraylike("identity", x)


# ----------------------------------------------------------------------------
# rectifiers: derivative 0 at the kinks, as JAX defines it


@custom_jvp
def relu(x: Any) -> Any:
    """``max(x, 0)``; its derivative at 0 is 0 (a custom JVP, as in JAX)."""
    return jnp.maximum(x, 0)


relu.defjvps(lambda g, ans, x: jnp.where(x > 0, g, jnp.zeros_like(g)))


@custom_jvp
def relu6(x: Any) -> Any:
    """``min(max(x, 0), 6)``; its derivative is 0 at both 0 and 6."""
    return jnp.minimum(jnp.maximum(x, 0), 6.0)


relu6.defjvps(lambda g, ans, x: jnp.where((x > 0) & (x < 6), g, jnp.zeros_like(g)))


def leaky_relu(x: Any, negative_slope: Any = 1e-2) -> Any:
    """``x`` where ``x >= 0``, ``negative_slope * x`` elsewhere."""
    x = _arraylike("leaky_relu", x)
    return jnp.where(x >= 0, x, negative_slope * x)


def hard_tanh(x: Any) -> Any:
    """``x`` clipped to ``[-1, 1]``."""
    x = _arraylike("hard_tanh", x)
    return jnp.where(x > 1, 1, jnp.where(x < -1, -1, x))


def elu(x: Any, alpha: Any = 1.0) -> Any:
    """``x`` for ``x > 0``, ``alpha * (exp(x) - 1)`` otherwise (the exp never sees positive inputs)."""
    x = _arraylike("elu", x)
    pos = x > 0
    return jnp.where(pos, x, alpha * jnp.expm1(jnp.where(pos, 0.0, x)))


def celu(x: Any, alpha: Any = 1.0) -> Any:
    """``max(x, 0) + alpha * expm1(min(x, 0) / alpha)``."""
    return jnp.maximum(x, 0.0) + alpha * jnp.expm1(jnp.minimum(x, 0.0) / alpha)


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def selu(x: Any) -> Any:
    """``scale * elu(x, alpha)`` with the self-normalising constants."""
    return _SELU_SCALE * elu(x, _SELU_ALPHA)


# ----------------------------------------------------------------------------
# smooth activations


def sigmoid(x: Any) -> Any:
    """The logistic function ``1 / (1 + exp(-x))`` (``lax.logistic``)."""
    return lax.logistic(x)


def softplus(x: Any) -> Any:
    """``log(1 + exp(x))``, as ``logaddexp(x, 0)``: exact for large ``|x|``; ``softplus'(0) = 1/2``.

    ``jnp.logaddexp`` carries JAX's derivative rule (``exp(x - out)``), so the
    derivatives are JAX's too.
    """
    return jnp.logaddexp(*_inexact("softplus", x, 0))


def log_sigmoid(x: Any) -> Any:
    """``log(sigmoid(x)) = -softplus(-x)``."""
    x = _arraylike("log_sigmoid", x)
    return -softplus(-x)


def silu(x: Any) -> Any:
    """``x * sigmoid(x)`` (also ``swish``)."""
    x = _arraylike("silu", x)
    return x * sigmoid(x)


swish = silu


def mish(x: Any) -> Any:
    """``x * tanh(softplus(x))``."""
    x = _arraylike("mish", x)
    return x * jnp.tanh(softplus(x))


def tanh(x: Any) -> Any:
    """``jnp.tanh``."""
    return jnp.tanh(x)


def gelu(x: Any, approximate: bool = True) -> Any:
    """Gaussian error linear unit: the tanh approximation by default, ``erfc``-based when ``approximate=False``."""
    (x,) = _inexact("gelu", x)
    dt = x.dtype
    if approximate:
        c = np.asarray(np.sqrt(2 / np.pi)).astype(dt)[()]
        cdf = 0.5 * (1.0 + jnp.tanh(c * (x + 0.044715 * (x**3))))
        return x * cdf
    sqrt_half = np.asarray(np.sqrt(0.5)).astype(dt)[()]
    return jnp.array(0.5 * x * lax.erfc(-x * sqrt_half), dtype=dt)


def glu(x: Any, axis: int = -1) -> Any:
    """Gated linear unit: split ``x`` in two halves along ``axis``, return ``first * sigmoid(second)``."""
    x = _arraylike("glu", x)
    size = shape_of(x)[axis]
    if size % 2:
        raise ValueError(f"glu: the size of axis {axis} must be divisible by 2, got {size}")
    x1, x2 = jnp.split(x, 2, axis)
    return x1 * sigmoid(x2)


def squareplus(x: Any, b: Any = 4) -> Any:
    """``(x + sqrt(x**2 + b)) / 2``."""
    check_arraylike("squareplus", x, b)
    x, b = jnp.asarray(x), jnp.asarray(b)
    return (x + jnp.sqrt(jnp.square(x) + b)) / 2


def soft_sign(x: Any) -> Any:
    """``x / (|x| + 1)``."""
    x = _arraylike("soft_sign", x)
    return x / (jnp.abs(x) + 1)


def sparse_plus(x: Any) -> Any:
    """0 below -1, ``x`` above 1, ``(x + 1)**2 / 4`` between."""
    x = _arraylike("sparse_plus", x)
    return jnp.where(x <= -1.0, 0.0, jnp.where(x >= 1.0, x, (x + 1.0) ** 2 / 4))


def sparse_sigmoid(x: Any) -> Any:
    """``clip((x + 1) / 2, 0, 1)``, the derivative of ``sparse_plus``."""
    return 0.5 * jnp.clip(x + 1.0, 0.0, 2.0)


def hard_sigmoid(x: Any) -> Any:
    """``relu6(x + 3) / 6``."""
    return relu6(x + 3.0) / 6.0


def hard_silu(x: Any) -> Any:
    """``x * hard_sigmoid(x)`` (also ``hard_swish``)."""
    x = _arraylike("hard_silu", x)
    return x * hard_sigmoid(x)


hard_swish = hard_silu


@custom_jvp
def log1mexp(x: Any) -> Any:
    """``log(1 - exp(-x))``, switching formulas at ``log 2`` for accuracy."""
    x = _arraylike("log1mexp", x)
    c = jnp.log(2.0)
    return jnp.where(x < c, jnp.log(-jnp.expm1(-x)), jnp.log1p(-jnp.exp(-x)))


log1mexp.defjvps(lambda g, ans, x: g / jnp.expm1(x))


# ----------------------------------------------------------------------------
# normalisations over axes


def _count(x: Any, axis: Any, where: Any, keepdims: bool, dtype: Any) -> Any:
    """How many elements a reduction over ``axis`` (masked by ``where``) sees, in ``dtype``."""
    shape = shape_of(x)
    if where is None:
        n = 1
        for a in canonicalize_axes("logmeanexp", axis, len(shape)):
            n *= shape[a]
        return jnp.asarray(n, dtype=dtype)
    return jnp.sum(jnp.broadcast_to(where, shape), axis=axis, keepdims=keepdims, dtype=dtype)


def logmeanexp(x: Any, axis: Any = None, where: Any = None, keepdims: bool = False) -> Any:
    """``logsumexp(x) - log(n)``, ``n`` the number of elements reduced."""
    lse = logsumexp(x, axis=axis, where=where, keepdims=keepdims)
    count = _count(jnp.asarray(x), axis, where, keepdims, lse.dtype)
    return lse - jnp.log(count)


def log_softmax(x: Any, axis: Any = -1, where: Any = None) -> Any:
    """``x - logsumexp(x, axis)``, computed from ``x - stop_gradient(max x)``; masked entries give ``-inf``."""
    x = _arraylike("log_softmax", x)
    x_max = jnp.max(x, axis, where=where, initial=-np.inf, keepdims=True)
    x_safe = x if where is None else jnp.where(where, x, -np.inf)
    shifted = x_safe - lax.stop_gradient(x_max)
    shifted_lse = jnp.log(jnp.sum(jnp.exp(shifted), axis, where=where, keepdims=True))
    result = shifted - shifted_lse
    if where is not None:
        return jnp.where(where, result, -np.inf)
    return result


def softmax(x: Any, axis: Any = -1, where: Any = None) -> Any:
    """``exp(x - max) / sum(exp(x - max))`` along ``axis``; masked entries give 0.

    The maximum is a ``stop_gradient`` constant (JAX's default,
    ``jax_softmax_custom_jvp=False``), so derivatives flow through the
    exponentials and the sum alone.
    """
    x = _arraylike("softmax", x)
    initial = -np.inf
    x_max = jnp.max(x, axis, where=where, initial=initial, keepdims=True)
    x_safe = x if where is None else jnp.where(where, x, initial)
    unnormalized = jnp.exp(x_safe - lax.stop_gradient(x_max))
    result = unnormalized / jnp.sum(unnormalized, axis, where=where, keepdims=True)
    if where is not None:
        result = jnp.where(where, result, 0)
    return result


def standardize(x: Any, axis: Any = -1, mean: Any = None, variance: Any = None, epsilon: Any = 1e-5,
                where: Any = None, *, algorithm: str = "fast") -> Any:
    """``(x - mean) / sqrt(variance + epsilon)`` with the statistics taken over ``axis``.

    ``algorithm="fast"`` (JAX's default) uses ``mean(x**2) - mean(x)**2``
    clipped at 0; ``"stable"`` uses the two-pass ``mean((x - mean)**2)``.
    """
    check_arraylike("standardize", x)
    for v in (mean, variance, where):
        if v is not None:
            check_arraylike("standardize", v)
    if mean is None:
        mean = jnp.mean(x, axis, keepdims=True, where=where)
    if variance is None:
        if algorithm == "stable":
            variance = jnp.mean(jnp.square(jnp.subtract(x, mean)), axis, keepdims=True, where=where)
        elif algorithm == "fast":
            variance = jnp.mean(jnp.square(x), axis, keepdims=True, where=where) - jnp.square(mean)
            variance = jnp.clip(variance, 0)
        else:
            raise ValueError(f"Unknown algorithm '{algorithm}'. Expected 'fast' or 'stable'.")
    return jnp.subtract(x, mean) * lax.rsqrt(variance + epsilon)


def one_hot(x: Any, num_classes: int, *, dtype: Any = None, axis: Any = -1) -> Any:
    """A ``num_classes``-long indicator vector per index (out-of-range indices give all zeros).

    ``axis`` may also be the name of a ``vmap``/``pmap`` axis whose size is
    ``num_classes``: each position along it then compares with its own index.
    """
    try:
        num_classes = operator.index(num_classes)
    except TypeError:
        raise TypeError(
            "one_hot: num_classes must be a concrete Python integer (it sets the output shape), got "
            f"{type(num_classes).__name__}. Pass the number of classes as an int, or mark it static under jit (static_argnums)."
        ) from None
    x = jnp.asarray(x)
    if not dtypes.is_int(x.dtype):
        warnings.warn(f"one_hot input should be integer-typed (as in JAX); got dtype={x.dtype}",
                      DeprecationWarning, stacklevel=2)
    dtype = dtypes.default_float() if dtype is None else dtype
    nd = ndim_of(x)
    if isinstance(axis, (int, np.integer)) and not isinstance(axis, bool):
        if not -(nd + 1) <= axis <= nd:
            raise ValueError(f"one_hot: axis {axis} is out of bounds for an output of rank {nd + 1}")
        pos = int(axis) % (nd + 1)
        lhs = lax.expand_dims(x, (pos,))
        rhs_shape = [1] * nd
        rhs_shape.insert(pos, num_classes)
        rhs = lax.broadcasted_iota(x.dtype, rhs_shape, pos)
        return (lhs == rhs).astype(dtype)
    # a named (mapped) axis
    size = lax.psum(1, axis)
    if num_classes != size:
        raise ValueError(f"Expected num_classes to match the size of axis {axis}, but {num_classes} != {size}")
    return jnp.asarray(x == lax.axis_index(axis), dtype=dtype)
