"""``ftrans.scipy.special``: JAX's ``scipy.special`` subset, on ``ftrans.numpy`` and ``ftrans.lax``.

Every function promotes its arguments to an inexact dtype first (integers
become the default float), as JAX's do. ``logit``, ``xlogy``, ``xlog1py`` and
``entr`` carry JAX's custom derivative rules, so their gradients agree with
JAX's at the special points too (``xlogy(0, y)``, ``entr(0)``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ftrans import lax
from ftrans import numpy as jnp
from ftrans.core import dtypes
from ftrans.core.operands import canonicalize_axes, ndim_of
from ftrans.numpy._elementwise import _inexact
from ftrans.transforms.custom_derivatives import custom_jvp

__all__ = [
    "digamma", "entr", "erf", "erfc", "erfinv", "expit", "gammaln", "logit", "logsumexp", "ndtr",
    "xlog1py", "xlogy",
]


def _const(x: Any, value: Any) -> Any:
    """A scalar of ``x``'s dtype (JAX's ``_lax_const``)."""
    return np.asarray(value, dtype=x.dtype)[()]


def gammaln(x: Any) -> Any:
    """``log |Gamma(x)|`` (``lax.lgamma``)."""
    (x,) = _inexact("gammaln", x)
    return lax.lgamma(x)


def digamma(x: Any) -> Any:
    """The logarithmic derivative of Gamma (``lax.digamma``)."""
    (x,) = _inexact("digamma", x)
    return lax.digamma(x)


def erf(x: Any) -> Any:
    """The error function."""
    (x,) = _inexact("erf", x)
    return lax.erf(x)


def erfc(x: Any) -> Any:
    """The complementary error function ``1 - erf(x)``, accurate for large ``x``."""
    (x,) = _inexact("erfc", x)
    return lax.erfc(x)


def erfinv(x: Any) -> Any:
    """The inverse error function."""
    (x,) = _inexact("erfinv", x)
    return lax.erf_inv(x)


def expit(x: Any) -> Any:
    """The logistic sigmoid ``1 / (1 + exp(-x))``."""
    (x,) = _inexact("expit", x)
    return lax.logistic(x)


@custom_jvp
def logit(x: Any) -> Any:
    """``log(x / (1 - x))``, the inverse of ``expit``; its derivative is ``1 / (x (1 - x))``."""
    (x,) = _inexact("logit", x)
    return lax.log(lax.div(x, lax.sub(_const(x, 1), x)))


logit.defjvps(lambda g, ans, x: lax.div(g, lax.mul(x, lax.sub(_const(x, 1), x))))


@custom_jvp
def xlogy(x: Any, y: Any) -> Any:
    """``x * log(y)``, defined as 0 where ``x == 0`` (unless ``y`` is NaN)."""
    x, y = _inexact("xlogy", x, y)
    x_ok = x != 0.0
    return jnp.where(x_ok | jnp.isnan(y), lax.mul(x, lax.log(y)), jnp.zeros_like(x))


@xlogy.defjvp
def _xlogy_jvp(primals: tuple, tangents: tuple) -> tuple:
    x, y = primals
    x_dot, y_dot = tangents
    result = xlogy(x, y)
    return result, (x_dot * lax.log(y) + y_dot * x / y).astype(result.dtype)


@custom_jvp
def xlog1py(x: Any, y: Any) -> Any:
    """``x * log1p(y)``, defined as 0 where ``x == 0`` (unless ``y`` is NaN)."""
    x, y = _inexact("xlog1py", x, y)
    x_ok = x != 0.0
    return jnp.where(x_ok | jnp.isnan(y), lax.mul(x, lax.log1p(y)), jnp.zeros_like(x))


@xlog1py.defjvp
def _xlog1py_jvp(primals: tuple, tangents: tuple) -> tuple:
    x, y = primals
    x_dot, y_dot = tangents
    result = xlog1py(x, y)
    return result, (x_dot * lax.log1p(y) + y_dot * x / (1 + y)).astype(result.dtype)


@custom_jvp
def _xlogx(x: Any) -> Any:
    return xlogy(x, x)


@_xlogx.defjvp
def _xlogx_jvp(primals: tuple, tangents: tuple) -> tuple:
    (x,) = primals
    (x_dot,) = tangents
    return _xlogx(x), x_dot * (lax.log(x) + 1)


def entr(x: Any) -> Any:
    """The elementwise entropy ``-x log x`` (0 at 0, ``-inf`` for negative ``x``)."""
    (x,) = _inexact("entr", x)
    if dtypes.issubdtype(x.dtype, np.complexfloating):
        raise ValueError("entr does not support complex-valued inputs.")
    return jnp.where(x < _const(x, 0), jnp.full_like(x, -np.inf), -_xlogx(x))


def ndtr(x: Any) -> Any:
    """The standard normal CDF, from ``erf`` near 0 and ``erfc`` in the tails."""
    x = jnp.asarray(x)
    if x.dtype not in (np.float32, np.float64):
        raise TypeError(f"x.dtype={x.dtype} is not supported, see docstring for supported types.")
    t = x.dtype.type
    half_sqrt_2 = t(0.5) * np.sqrt(2.0, dtype=x.dtype)
    w = x * half_sqrt_2
    z = lax.abs(w)
    y = jnp.where(z < half_sqrt_2, t(1.0) + lax.erf(w),
                  jnp.where(w > t(0.0), t(2.0) - lax.erfc(z), lax.erfc(z)))
    return t(0.5) * y


def logsumexp(a: Any, axis: Any = None, b: Any = None, keepdims: bool = False, return_sign: bool = False,
              where: Any = None) -> Any:
    """``log(sum(b * exp(a)))`` over ``axis``, computed stably.

    The largest element (a ``stop_gradient`` constant, replaced by 0 when it is
    not finite) is subtracted before exponentiating, so large inputs do not
    overflow, ``-inf`` entries contribute nothing, and gradients equal
    ``softmax`` weights. With ``b`` the sum may be negative: ``return_sign=True``
    returns ``(log|sum|, sign)``; otherwise a negative sum gives NaN.
    """
    if where is not None:
        a = jnp.where(where, a, 0)
    if b is not None:
        a_arr, b_arr = _inexact("logsumexp", a, b)
        a_arr = jnp.where(b_arr != 0, a_arr, -np.inf)
    else:
        (a_arr,) = _inexact("logsumexp", a)
        b_arr = None
    complex_in = dtypes.issubdtype(a_arr.dtype, np.complexfloating)
    dims = canonicalize_axes("logsumexp", axis, ndim_of(a_arr))
    real = jnp.real(a_arr) if complex_in else a_arr
    amax = jnp.max(real, axis=dims, keepdims=keepdims, where=where, initial=-np.inf)
    amax = lax.stop_gradient(jnp.where(jnp.isfinite(amax), amax, jnp.zeros_like(amax)))
    amax_with_dims = amax if keepdims else lax.expand_dims(amax, sorted(dims))
    # (jnp, not lax: the reduced dims are size 1 here and need broadcasting)
    exp_a = jnp.exp(jnp.subtract(a_arr, amax_with_dims.astype(a_arr.dtype)))
    if b_arr is not None:
        exp_a = jnp.multiply(exp_a, b_arr)
    sumexp = jnp.sum(exp_a, axis=dims, keepdims=keepdims, where=where)
    sign = lax.sign(sumexp)
    if return_sign or not complex_in:
        sumexp = jnp.abs(sumexp)
    out = jnp.add(jnp.log(sumexp), amax.astype(sumexp.dtype))
    if return_sign:
        return out, sign
    if b_arr is not None and not complex_in:
        out = jnp.where(sign < 0, jnp.array(np.nan, dtype=out.dtype), out)
    return out
