"""``ftrans.scipy.special``: JAX's ``scipy.special`` subset, on ``ftrans.numpy`` and ``ftrans.lax``.

Every function promotes its arguments to an inexact dtype first (integers
become the default float), as JAX's do. The functions without an XLA
primitive of their own are compositions: ``gammainc``/``gammaincc``/``betainc``
are series and continued fractions in ``lax.while_loop`` (with custom JVPs
for their derivatives), ``zeta``/``polygamma`` an Euler-Maclaurin sum, ``hyp2f1``
Gauss's series with the classical transformations, complex ``gamma``/``loggamma``
a shift to the right half-plane and Stirling's series,
``ndtri``/``log_ndtr`` Cephes'
approximations. ``logit``, ``xlogy``, ``xlog1py`` and
``entr`` carry JAX's custom derivative rules, so their gradients agree with
JAX's at the special points too (``xlogy(0, y)``, ``entr(0)``).
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from ftrans import lax
from ftrans import numpy as jnp
from ftrans.core import dtypes
from ftrans.core.operands import canonicalize_axes, ndim_of
from ftrans.core.trace import outputs_checked
from ftrans.numpy._elementwise import _inexact
from ftrans.transforms.custom_derivatives import custom_jvp

__all__ = [
    "bernoulli", "bessel_jn", "beta", "betainc", "betaln", "boxcox", "boxcox1p", "comb", "dawsn", "digamma", "entr", "erf", "erfcx", "exp1", "expi", "expn", "erfc", "fresnel",
    "erfcinv", "erfinv", "expit", "factorial", "gamma", "gammainc", "gammaincc", "gammaln", "gammasgn", "hyp1f1", "i0", "i0e",
    "hyp2f1", "i1", "i1e", "kl_div", "log_ndtr", "log_softmax", "loggamma", "logit", "logsumexp", "multigammaln",
    "ndtr", "ndtri", "owens_t", "poch", "polygamma", "rel_entr", "sici", "softmax", "spence", "sph_harm_y", "wofz", "xlog1py", "xlogy",
    "zeta",
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
    return jnp.where(x_ok | jnp.isnan(y), x * lax.log(y), jnp.zeros_like(x))


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
    return jnp.where(x_ok | jnp.isnan(y), x * lax.log1p(y), jnp.zeros_like(x))


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


@outputs_checked
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
    # (lax.sub, as JAX's: it broadcasts the size-1 reduced dims, and a weakly typed ``a`` stays uncast, so its
    # cotangent is strongly typed as JAX's)
    exp_a = jnp.exp(lax.sub(a_arr, amax_with_dims.astype(a_arr.dtype)))
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


# ----------------------------------------------------------------------------
# Gamma and Beta families


def gammasgn(x: Any) -> Any:
    """The sign of the Gamma function: 1 or -1, NaN at the poles (non-positive integers) and for NaN."""
    (x,) = _inexact("gammasgn", x)
    if dtypes.issubdtype(x.dtype, np.complexfloating):
        raise ValueError("gammasgn does not support complex-valued inputs.")
    t = x.dtype.type
    fl = lax.floor(x)
    neg = x < t(0)
    return jnp.select([(neg & (x == fl)) | jnp.isnan(x), (neg & (fl % t(2) != t(0))) | ((x == t(0)) & jnp.signbit(x))],
                      [t(np.nan), t(-1.0)], t(1.0))


# B_2k / (2k (2k - 1)) for k = 1..9: the coefficients of Stirling's series for log Gamma
_STIRLING_COEFFS = tuple(float(b) / ((2 * k) * (2 * k - 1)) for k, b in enumerate(
    (1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6, -3617 / 510, 43867 / 798), start=1))
_STIRLING_FROM = 9.0  # Re(z) from which Stirling's series (nine terms) reaches float64 precision


def _complex_loggamma(z: Any) -> Any:
    """The principal branch of ``log Gamma(z)`` for complex ``z`` (one cut, along the negative real axis).

    ``z`` is moved right by ``n = max(0, ceil(9 - Re z))`` with ``log Gamma(z) =
    log Gamma(z + n) - sum_{k<n} log(z + k)``: a sum of principal logarithms, so
    the imaginary part is the one that is continuous off the negative real
    axis, as SciPy's. ``log Gamma(z + n)`` is Stirling's series. The poles
    (non-positive integers) and NaN inputs give ``nan+nanj``.
    """
    ct = z.dtype.type
    rt = np.dtype(np.float64 if z.dtype == np.complex128 else np.float32).type
    re, im = jnp.real(z), jnp.imag(z)
    bad = jnp.isnan(re) | jnp.isnan(im) | ((im == rt(0)) & (re <= rt(0)) & (re == lax.floor(re)))
    zs = jnp.where(bad, ct(1), z)
    n = jnp.maximum(lax.ceil(rt(_STIRLING_FROM) - jnp.real(zs)), rt(0))

    def cond(s: Any) -> Any:
        k, _ = s
        return jnp.any(k < n)

    def body(s: Any) -> Any:
        k, acc = s
        more = k < n
        return k + rt(1), acc + jnp.where(more, jnp.log(jnp.where(more, zs + k.astype(z.dtype), ct(1))), ct(0))

    _, shift = lax.while_loop(cond, body, (rt(0), jnp.zeros_like(zs)))
    w = zs + n.astype(z.dtype)
    iw = ct(1) / w
    iw2 = iw * iw
    series = jnp.full_like(w, ct(_STIRLING_COEFFS[-1]))
    for c in _STIRLING_COEFFS[-2::-1]:
        series = series * iw2 + ct(c)
    lg = (w - ct(0.5)) * jnp.log(w) - w + ct(0.5 * np.log(2 * np.pi)) + series * iw
    return jnp.where(bad, ct(complex(np.nan, np.nan)), lg - shift)


def gamma(x: Any) -> Any:
    """The Gamma function: ``gammasgn(x) * exp(gammaln(x))`` for real ``x``; ``exp(loggamma(z))`` for
    complex ``z`` (``nan+nanj`` at the poles, the non-positive integers)."""
    (x,) = _inexact("gamma", x)
    if dtypes.issubdtype(x.dtype, np.complexfloating):
        return jnp.exp(_complex_loggamma(x))
    return gammasgn(x) * lax.exp(lax.lgamma(x))


def loggamma(x: Any) -> Any:
    """The principal branch of ``log Gamma``: ``gammaln(x)`` for real ``x > 0`` (NaN for other real
    ``x``, as SciPy's); for complex ``z`` the analytic continuation with one branch cut along the
    negative real axis (a shift to the right half-plane, then Stirling's series)."""
    (x,) = _inexact("loggamma", x)
    if dtypes.issubdtype(x.dtype, np.complexfloating):
        return _complex_loggamma(x)
    return jnp.where(x > _const(x, 0), lax.lgamma(x), _const(x, np.nan))


# Stirling's series for lgamma's remainder, del(x) = lgamma(x) - ((x - 1/2) log x - x + log(2 pi) / 2)
# = sum_k B_2k / (2k (2k - 1) x^(2k-1)), enough terms for float64 from x >= 8 on.
_STIRLING = (1 / 12, -1 / 360, 1 / 1260, -1 / 1680, 1 / 1188, -691 / 360360)


def _stirling_del(x: Any) -> Any:
    t = _const(x, 1) / x
    t2 = t * t
    acc = _const(x, _STIRLING[-1])
    for c in _STIRLING[-2::-1]:
        acc = acc * t2 + _const(x, c)
    return acc * t


def betaln(a: Any, b: Any) -> Any:
    """``log |B(a, b)|``: ``gammaln(a) + gammaln(b) - gammaln(a + b)`` while ``max(a, b) < 8``; beyond,
    ``gammaln(b) - gammaln(a + b)`` from Stirling's series, in which the large terms cancel exactly (the
    plain difference loses every digit once ``b`` dwarfs ``a``: ``betaln(1, 1e30)`` must be ``-log(1e30)``)."""
    a, b = _inexact("betaln", a, b)
    a, b = jnp.minimum(a, b), jnp.maximum(a, b)
    small = b < _const(b, 8)
    by_lgamma = lax.lgamma(a) + (lax.lgamma(b) - lax.lgamma(a + b))
    bs = jnp.where(small, _const(b, 8), b)  # the unused branch stays finite, and so do its derivatives
    as_ = jnp.where(small, _const(a, 1), a)
    # gammaln(b) - gammaln(a + b) = -a (log b - 1) - (a + b - 1/2) log1p(a / b) + del(b) - del(a + b)
    ratio = (_stirling_del(bs) - _stirling_del(as_ + bs)) - as_ * (lax.log(bs) - _const(b, 1))
    by_series = lax.lgamma(as_) + (ratio - (as_ + (bs - _const(b, 0.5))) * lax.log1p(as_ / bs))
    return jnp.where(small, by_lgamma, by_series)


def beta(a: Any, b: Any) -> Any:
    """The Beta function ``Gamma(a) Gamma(b) / Gamma(a + b)``, signed."""
    a, b = _inexact("beta", a, b)
    if dtypes.issubdtype(a.dtype, np.complexfloating):
        raise ValueError("beta does not support complex-valued inputs.")
    return gammasgn(a) * gammasgn(b) * gammasgn(a + b) * lax.exp(betaln(a, b))


def factorial(n: Any, exact: bool = False) -> Any:
    """``n! = Gamma(n + 1)`` as a float (0 for negative ``n``); ``exact=True`` is not supported, as in JAX."""
    if exact:
        raise NotImplementedError("factorial with exact=True")
    (n,) = _inexact("factorial", n)
    return jnp.where(n < _const(n, 0), _const(n, 0), lax.exp(lax.lgamma(n + _const(n, 1))))


def comb(N: Any, k: Any, *, exact: bool = False, repetition: bool = False) -> Any:  # noqa: N803 - SciPy's name
    """The binomial coefficient ``N choose k`` from ``gammaln`` (0 outside ``0 <= k <= N``)."""
    if exact:
        raise NotImplementedError("comb with exact=True")
    N, k = _inexact("comb", N, k)
    if repetition:
        return jnp.where((k == _const(k, 0)) & (N >= _const(N, 0)), _const(N, 1), comb(N + k - _const(N, 1), k))
    ok = (k <= N) & (N >= _const(N, 0)) & (k >= _const(k, 0))
    sn = jnp.where(ok, N, _const(N, 0))
    sk = jnp.where(ok, k, _const(k, 0))
    one = _const(N, 1)
    out = lax.exp(lax.lgamma(sn + one) - lax.lgamma(sk + one) - lax.lgamma(sn + one - sk))
    return jnp.where(ok, out, _const(N, 0))


@custom_jvp
def poch(z: Any, m: Any) -> Any:
    """The Pochhammer symbol ``Gamma(z + m) / Gamma(z)`` (1 where ``m == 0``); derivatives use ``digamma``."""
    z, m = _inexact("poch", z, m)
    if dtypes.issubdtype(z.dtype, np.complexfloating):
        raise ValueError("poch does not support complex-valued inputs.")
    return jnp.where(m == _const(m, 0), _const(z, 1), gamma(z + m) / gamma(z))


@poch.defjvp
def _poch_jvp(primals: tuple, tangents: tuple) -> tuple:
    z, m = _inexact("poch", *primals)
    tz, tm = tangents
    y = poch(z, m)
    dz = (lax.digamma(z + m) - lax.digamma(z)) * y
    dm = lax.digamma(z + m) * y
    return y, (tz * dz + tm * dm).astype(y.dtype)


def multigammaln(a: Any, d: int) -> Any:
    """The log of the multivariate Gamma function of dimension ``d`` (a concrete int)."""
    from ftrans.core.operands import concrete_or_error

    d = int(concrete_or_error(d, "multigammaln's dimension d"))
    (a,) = _inexact("multigammaln", a)
    t = a.dtype.type
    const = t(0.25 * d * (d - 1) * np.log(np.pi))
    b = np.arange(d, dtype=a.dtype) / t(2)
    return jnp.sum(lax.lgamma(jnp.expand_dims(a, -1) - b), axis=-1) + const


def rel_entr(p: Any, q: Any) -> Any:
    """``p log(p / q)`` for ``p, q > 0``; 0 where ``p == 0 <= q``; NaN where either is NaN; ``inf`` elsewhere.

    ``log(p / q)`` is SciPy's: ``log1p((p - q) / q)`` for ``1/2 < p/q < 2``, ``log(p/q)`` while the
    ratio is normal and finite, ``log p - log q`` otherwise. The derivatives are ``log(p/q) + 1`` and
    ``-p/q`` where ``p, q > 0``, NaN at a NaN, 0 elsewhere (jax 0.12's values and rule, under every
    jax: jax 0.10/0.11 give ``inf`` at a NaN and no derivative NaN there).
    """
    p, q = _inexact("rel_entr", p, q)
    if dtypes.issubdtype(p.dtype, np.complexfloating):
        raise ValueError("rel_entr does not support complex-valued inputs.")
    p, q = jnp.broadcast_arrays(p, q)
    return _rel_entr(False, p, q)


def kl_div(p: Any, q: Any) -> Any:
    """``p log(p / q) - p + q`` for ``p, q > 0``; ``q`` where ``p == 0 <= q``; NaN at a NaN; ``inf`` elsewhere.

    Near ``p == q`` (``|p - q| < q / 20``) it sums ``(p - q) u (1/2 - u/6 + u**2/12 - u**3/20 + u**4/30)``
    with ``u = (p - q) / q`` (SciPy's and jax 0.12's series: no cancellation, never negative); the derivatives
    are ``log(p/q)`` and ``1 - p/q`` where ``p, q > 0``, ``(0, 1)`` where ``p == 0 <= q``, NaN at a NaN, 0
    elsewhere (jax 0.10/0.11 differentiate ``rel_entr(p, q) - p + q``: ``(-1, 1)`` outside the domain).
    """
    p, q = _inexact("kl_div", p, q)
    if dtypes.issubdtype(p.dtype, np.complexfloating):
        raise ValueError("kl_div does not support complex-valued inputs.")
    p, q = jnp.broadcast_arrays(p, q)
    return _rel_entr(True, p, q)


def _log_ratio(p: Any, q: Any) -> tuple[Any, Any, Any, Any]:
    """``log(p / q)`` for ``p, q > 0``, with ``p / q``, whether ``1/2 < p/q < 2`` and ``(p - q) / q`` there."""
    t = p.dtype.type
    r = p / q
    near = (r > t(0.5)) & (r < t(2))
    normal = (r > t(np.finfo(p.dtype).tiny)) & (r < t(np.inf))
    qn = jnp.where(near, q, t(1))
    u = (jnp.where(near, p, t(1)) - qn) / qn
    via_ratio = lax.log(jnp.where(normal, r, t(1)))
    log_r = jnp.where(near, lax.log1p(u), jnp.where(normal, via_ratio, lax.log(p) - lax.log(q)))
    return log_r, r, near, u


def _rel_entr_fun(kl: bool, p: Any, q: Any) -> Any:
    t = p.dtype.type
    nan = jnp.isnan(p) | jnp.isnan(q)
    both = (p > t(0)) & (q > t(0))
    p_at_zero = (p == t(0)) & (q >= t(0))
    ps, qs = jnp.where(both, p, t(1)), jnp.where(both, q, t(1))
    log_r, _, near, u = _log_ratio(ps, qs)
    inside = ps * log_r
    if kl:
        series = (ps - qs) * u * (t(1 / 2) - u * (t(1 / 6) - u * (t(1 / 12) - u * (t(1 / 20) - u * t(1 / 30)))))
        inside = jnp.where(near & (lax.abs(u) < t(0.05)), series, inside - (ps - qs))
    edge = jnp.where(p_at_zero, q if kl else jnp.zeros_like(p), t(np.inf))
    return jnp.where(nan, t(np.nan), jnp.where(both, inside, edge))


_rel_entr = custom_jvp(_rel_entr_fun, nondiff_argnums=(0,))


@_rel_entr.defjvp
def _rel_entr_jvp(kl: bool, primals: tuple, tangents: tuple) -> tuple:
    (p, q), (tp, tq) = primals, tangents
    t = p.dtype.type
    nan = jnp.isnan(p) | jnp.isnan(q)
    both = (p > t(0)) & (q > t(0))
    p_at_zero = (p == t(0)) & (q >= t(0))
    ps, qs = jnp.where(both, p, t(1)), jnp.where(both, q, t(1))
    log_r, r, _, _ = _log_ratio(ps, qs)
    if kl:
        finite_q = qs < t(np.inf)
        qf = jnp.where(finite_q, qs, t(1))
        dp, dq = log_r, jnp.where(finite_q, -((jnp.where(finite_q, ps, t(1)) - qf) / qf), t(1))
    else:
        dp, dq = log_r + t(1), -r
    zero = jnp.zeros_like(p)
    dp = jnp.where(nan, t(np.nan), jnp.where(both, dp, zero))
    dq = jnp.where(nan, t(np.nan), jnp.where(both, dq, jnp.where(p_at_zero, t(1 if kl else 0), zero)))
    return _rel_entr(kl, p, q), tp * dp + tq * dq


def boxcox(x: Any, lmbda: Any) -> Any:
    """The Box-Cox transform ``(x**lmbda - 1) / lmbda`` (``log x`` at ``lmbda == 0``)."""
    x, lmbda = _inexact("boxcox", x, lmbda)
    zero = lmbda == _const(lmbda, 0)
    safe = jnp.where(zero, jnp.ones_like(lmbda), lmbda)
    lx = jnp.log(x)
    return jnp.where(zero, lx, jnp.expm1(safe * lx) / safe)


def boxcox1p(x: Any, lmbda: Any) -> Any:
    """The Box-Cox transform of ``1 + x`` (``log1p x`` at ``lmbda == 0``)."""
    x, lmbda = _inexact("boxcox1p", x, lmbda)
    zero = lmbda == _const(lmbda, 0)
    safe = jnp.where(zero, jnp.ones_like(lmbda), lmbda)
    lx = jnp.log1p(x)
    return jnp.where(zero, lx, jnp.expm1(safe * lx) / safe)


def _softmax(x: Any, axis: Any = -1, where: Any = None) -> Any:
    """``exp(x - max) / sum(exp(x - max))``, the maximum a ``stop_gradient`` constant (shared with ``nn``)."""
    initial = -np.inf
    x_max = jnp.max(x, axis, where=where, initial=initial, keepdims=True)
    x_safe = x if where is None else jnp.where(where, x, initial)
    unnormalized = jnp.exp(x_safe - lax.stop_gradient(x_max))
    result = unnormalized / jnp.sum(unnormalized, axis, where=where, keepdims=True)
    if where is not None:
        result = jnp.where(where, result, 0)
    return result


def _log_softmax(x: Any, axis: Any = -1, where: Any = None) -> Any:
    """``x - logsumexp(x)`` from ``x - stop_gradient(max x)``; masked entries ``-inf`` (shared with ``nn``)."""
    x_max = jnp.max(x, axis, where=where, initial=-np.inf, keepdims=True)
    x_safe = x if where is None else jnp.where(where, x, -np.inf)
    shifted = x_safe - lax.stop_gradient(x_max)
    shifted_lse = jnp.log(jnp.sum(jnp.exp(shifted), axis, where=where, keepdims=True))
    result = shifted - shifted_lse
    if where is not None:
        return jnp.where(where, result, -np.inf)
    return result


def softmax(x: Any, /, *, axis: Any = None) -> Any:
    """The softmax over ``axis`` (all axes by default, as SciPy's; ``ftrans.nn.softmax`` defaults to -1)."""
    from ftrans.core.operands import check_arraylike

    check_arraylike("softmax", x)
    return _softmax(jnp.asarray(x), axis)


def log_softmax(x: Any, /, *, axis: Any = None) -> Any:
    """The log-softmax over ``axis`` (all axes by default, as SciPy's; ``ftrans.nn.log_softmax`` defaults to -1)."""
    from ftrans.core.operands import check_arraylike

    check_arraylike("log_softmax", x)
    return _log_softmax(jnp.asarray(x), axis)


def bernoulli(n: int) -> Any:
    """The Bernoulli numbers ``B_0 .. B_n`` (``B_1 = -1/2``), for a concrete ``n >= 0``, as float32/64."""
    import operator

    from ftrans.core.operands import concrete_or_error

    n = operator.index(concrete_or_error(n, "bernoulli's n"))
    if n < 0:
        raise ValueError(f"bernoulli: n must be a non-negative integer, got {n}")
    dt = dtypes.default_float()
    b = np.zeros(n + 1)
    b[: min(n + 1, 3)] = [1.0, -0.5, 1.0 / 6.0][: n + 1]
    # B_2k = (-1)^(k+1) 2 (2k)! zeta(2k) / (2 pi)^(2k), with zeta summed directly (2**-50 < eps)
    for k2 in range(4, n + 1, 2):
        zeta_k = 1.0 + sum(float(j) ** -k2 for j in range(2, 50))
        b[k2] = (-1) ** (k2 // 2 + 1) * 2.0 * math.factorial(k2) * zeta_k / (2 * np.pi) ** k2
    return jnp.asarray(b.astype(dt))


# ----------------------------------------------------------------------------
# the normal distribution: log_ndtr, ndtri


def _norm_logpdf(x: Any) -> Any:
    t = x.dtype.type
    return t(-0.5) * lax.square(x) - t(0.5 * np.log(2 * np.pi))


def _ndtr_any(x: Any) -> Any:
    return ndtr(x)


def _log_ndtr_series(x: Any, order: int) -> Any:
    """``log ndtr(x)`` for very negative ``x`` from the asymptotic series of Mills' ratio."""
    t = x.dtype.type
    x2 = lax.square(x)
    log_scale = t(-0.5) * x2 - lax.log(-x) - t(0.5 * np.log(2 * np.pi))
    total = jnp.ones_like(x)
    x2n = x2
    for k in range(1, order + 1):
        term = t(float(np.prod(np.arange(2 * k - 1, 1, -2)))) / x2n
        total = total - term if k % 2 else total + term
        x2n = x2n * x2
    return log_scale + lax.log(total)


def log_ndtr(x: Any, series_order: int = 3) -> Any:
    """``log(ndtr(x))``, accurate far into both tails.

    For ``x`` above a dtype-dependent cut (5 in float32, 8 in float64) it is
    ``-ndtr(-x)``; below ``-10`` (``-20``) an asymptotic series of
    ``series_order`` terms; in between ``log(ndtr(x))``. Its derivative is
    ``exp(norm_logpdf(x) - log_ndtr(x))``, as JAX defines it.
    """
    if not isinstance(series_order, int):
        raise TypeError("series_order must be a Python integer.")
    if series_order < 0:
        raise ValueError("series_order must be non-negative.")
    if series_order > 30:
        raise ValueError("series_order must be <= 30.")
    return _log_ndtr(jnp.asarray(x), series_order)


def _log_ndtr_impl(x: Any, order: int) -> Any:
    if x.dtype == np.float64:
        lower, upper = -20.0, 8.0
    elif x.dtype == np.float32:
        lower, upper = -10.0, 5.0
    else:
        raise TypeError(f"x.dtype={x.dtype} is not supported; pass float32 or float64.")
    t = x.dtype.type
    lower, upper = t(lower), t(upper)
    above = x > upper
    arg = jnp.where(above, -x, lax.max(x, lower))
    res = ndtr(arg)
    return jnp.where(above, -res, jnp.where(x > lower, lax.log(res), _log_ndtr_series(lax.min(x, lower), order)))


_log_ndtr = custom_jvp(_log_ndtr_impl, nondiff_argnums=(1,))


@_log_ndtr.defjvp
def _log_ndtr_jvp(order: int, primals: tuple, tangents: tuple) -> tuple:
    (x,), (t,) = primals, tangents
    y = _log_ndtr(x, order)
    return y, t * lax.exp(_norm_logpdf(x) - y)


# Cephes' rational approximations for the inverse of the normal CDF (ndtri.c).
_NDTRI_P0 = (-5.99633501014107895267E1, 9.80010754185999661536E1, -5.66762857469070293439E1,
             1.39312609387279679503E1, -1.23916583867381258016E0)
_NDTRI_Q0 = (1.0, 1.95448858338141759834E0, 4.67627912898881538453E0, 8.63602421390890590575E1,
             -2.25462687854119370527E2, 2.00260212380060660359E2, -8.20372256168333339912E1,
             1.59056225126211695515E1, -1.18331621121330003142E0)
_NDTRI_P1 = (4.05544892305962419923E0, 3.15251094599893866154E1, 5.71628192246421288162E1,
             4.40805073893200834700E1, 1.46849561928858024014E1, 2.18663306850790267539E0,
             -1.40256079171354495875E-1, -3.50424626827848203418E-2, -8.57456785154685413611E-4)
_NDTRI_Q1 = (1.0, 1.57799883256466749731E1, 4.53907635128879210584E1, 4.13172038254672030440E1,
             1.50425385692907503408E1, 2.50464946208309415979E0, -1.42182922854787788574E-1,
             -3.80806407691578277194E-2, -9.33259480895457427372E-4)
_NDTRI_P2 = (3.23774891776946035970E0, 6.91522889068984211695E0, 3.93881025292474443415E0,
             1.33303460815807542389E0, 2.01485389549179081538E-1, 1.23716634817820021358E-2,
             3.01581553508235416007E-4, 2.65806974686737550832E-6, 6.23974539184983293730E-9)
_NDTRI_Q2 = (1.0, 6.02427039364742014255E0, 3.67983563856160859403E0, 1.37702099489081330271E0,
             2.16236993594496635890E-1, 1.34204006088543189037E-2, 3.28014464682127739104E-4,
             2.89247864745380683936E-6, 6.79019408009981274425E-9)


def _horner(coeffs: tuple, x: Any) -> Any:
    t = x.dtype.type
    acc = jnp.full_like(x, t(coeffs[0]))
    for c in coeffs[1:]:
        acc = acc * x + t(c)
    return acc


@outputs_checked
def ndtri(p: Any) -> Any:
    """The inverse of ``ndtr``: ``x`` with ``ndtr(x) = p`` (``-inf``/``inf`` at 0/1, NaN outside [0, 1]).

    Cephes' piecewise rational approximations in ``p`` (central part) and in
    ``sqrt(-2 log p)`` (tails). The derivative is ``sqrt(2 pi) exp(x**2 / 2)``,
    taken in the tails as ``sqrt(pi / 2) erfcx(|x| / sqrt(2)) / min(p, 1 - p)``
    (no ``x**2``-fold amplification of ``x``'s rounding), ``inf`` at 0 and 1;
    the second derivative is ``x ndtri'(p)**2`` (jax 0.12's rules; jax 0.10
    and 0.11 differentiate the approximation and give 0 or NaN at the ends).
    """
    (p,) = _inexact("ndtri", p)
    if p.dtype not in (np.float32, np.float64):
        raise TypeError(f"x.dtype={p.dtype} is not supported, see docstring for supported types.")
    return _ndtri(p)


@custom_jvp
def _ndtri(p: Any) -> Any:
    t = p.dtype.type
    comp = jnp.where(p > t(-np.expm1(-2.0)), t(1) - p, p)
    safe = jnp.where(comp == t(0), jnp.full_like(p, t(0.5)), comp)
    w = safe - t(0.5)
    ww = lax.square(w)
    big = (w + w * ww * (_horner(_NDTRI_P0, ww) / _horner(_NDTRI_Q0, ww))) * -t(np.sqrt(2 * np.pi))
    z = lax.sqrt(t(-2) * lax.log(safe))
    first = z - lax.log(z) / z
    iz = t(1) / z
    tail_far = first - _horner(_NDTRI_P2, iz) / _horner(_NDTRI_Q2, iz) / z
    tail = first - _horner(_NDTRI_P1, iz) / _horner(_NDTRI_Q1, iz) / z
    x = jnp.where(safe > t(np.exp(-2.0)), big, jnp.where(z >= t(8), tail_far, tail))
    x = jnp.where(p > t(1 - np.exp(-2.0)), x, -x)
    return jnp.where(p == t(0), t(-np.inf), jnp.where(p == t(1), t(np.inf), x))


@_ndtri.defjvp
def _ndtri_jvp(primals: tuple, tangents: tuple) -> tuple:
    (p,), (g,) = primals, tangents
    x = _ndtri(p)
    return x, g * _ndtri_slope(p, x)


@custom_jvp
def _ndtri_slope(p: Any, x: Any) -> Any:
    """``ndtri'(p)`` given ``x = ndtri(p)``."""
    t = p.dtype.type
    u = lax.abs(x) * t(np.sqrt(0.5))
    tail = u > t(1)
    central = t(np.sqrt(2 * np.pi)) * lax.exp(t(0.5) * lax.square(jnp.where(tail, t(0), x)))
    # in the tails 1 - p is exact (p >= 1/2) and min(p, 1 - p) = erfc(u) / 2 = exp(-u**2) erfcx(u) / 2
    a = jnp.where(p > t(0.5), t(1) - p, p)
    ok = tail & (a > t(0))
    far = t(np.sqrt(np.pi / 2)) * _erfcx(jnp.where(ok, u, t(1))) / jnp.where(ok, a, t(1))
    far = jnp.where(a == t(0), t(np.inf), far)
    return jnp.where(tail, far, central)


@_ndtri_slope.defjvp
def _ndtri_slope_jvp(primals: tuple, tangents: tuple) -> tuple:
    # x is ndtri(p), not a free argument: d/dp ndtri'(p) = x ndtri'(p)**2 (x's tangent is ignored)
    (p, x), (g, _) = primals, tangents
    d = _ndtri_slope(p, x)
    return d, g * ((x * d) * d)


@outputs_checked
def erfcinv(y: Any) -> Any:
    """The inverse of the complementary error function on ``[0, 2]``.

    ``erfcinv(y) = -ndtri(y / 2) / sqrt(2)`` (``y / 2`` is exact, and ``ndtri``
    takes ``1 - p`` exactly for ``y`` near 2). ``erfcinv(0)`` is ``inf``,
    ``erfcinv(2)`` is ``-inf``, ``y`` outside ``[0, 2]`` or NaN gives NaN. Its
    derivative is ``-sqrt(pi) / 2 exp(erfcinv(y)**2)`` (from ``ndtri``'s rule,
    accurate in the tails), ``-inf`` at both ends. Half-precision inputs are
    computed in float32 and rounded back, as in JAX. New in jax 0.12; ftrans
    has it under every jax.

    Args:
        y: array-like, real-valued.

    Returns:
        An array of the values ``x`` with ``erfc(x) = y``, in ``y``'s inexact dtype.

    Raises:
        ValueError: for complex ``y``.

    Examples:
        >>> import ftrans.numpy as jnp
        >>> from ftrans.scipy.special import erfcinv
        >>> erfcinv(jnp.array([0.0, 0.5, 1.0, 1.5, 2.0]))
        Array([        inf,  0.47693628,  0.        , -0.47693628,        -inf], dtype=float32)
    """
    (y,) = _inexact("erfcinv", y)
    if dtypes.issubdtype(y.dtype, np.complexfloating):
        raise ValueError("erfcinv does not support complex-valued inputs.")
    if dtypes.finfo(y.dtype).bits < 32:
        return _erfcinv(y.astype(np.float32)).astype(y.dtype)
    return _erfcinv(y)


@custom_jvp
def _erfcinv(y: Any) -> Any:
    t = y.dtype.type
    inside = (y >= t(0)) & (y <= t(2))
    x = _ndtri(jnp.where(inside, y * t(0.5), t(0.5))) * t(np.sqrt(0.5))
    # +0, not -0, at y = 1 (XLA folds 0 - x into -x); the derivative comes from the rule below
    tails = jnp.where(x == t(0), t(0), -x)
    # between 1/2 and 3/2, 1 - y is exact and erf_inv is the more accurate there
    central = (y >= t(0.5)) & (y <= t(1.5))
    mid = lax.erf_inv(jnp.where(central, t(1) - y, t(0)))
    return jnp.where(inside, jnp.where(central, mid, tails), t(np.nan))


@_erfcinv.defjvp
def _erfcinv_jvp(primals: tuple, tangents: tuple) -> tuple:
    # the rule multiplies the tangent by a slope that is NaN outside [0, 2], so forward and reverse mode
    # both give NaN there (a select on the argument would transpose to a 0 cotangent)
    (y,), (g,) = primals, tangents
    x = _erfcinv(y)
    return x, g * _erfcinv_slope(y, x)


@custom_jvp
def _erfcinv_slope(y: Any, x: Any) -> Any:
    """``erfcinv'(y) = -sqrt(pi) / 2 exp(x**2)`` given ``x = erfcinv(y)``: ``-ndtri'(y / 2) / (2 sqrt(2))``."""
    t = y.dtype.type
    return _ndtri_slope(y * t(0.5), x * t(-np.sqrt(2.0))) * t(-0.25 * np.sqrt(2.0))


@_erfcinv_slope.defjvp
def _erfcinv_slope_jvp(primals: tuple, tangents: tuple) -> tuple:
    # x is erfcinv(y), not a free argument: d/dy erfcinv'(y) = 2 x erfcinv'(y)**2
    (y, x), (g, _) = primals, tangents
    d = _erfcinv_slope(y, x)
    return d, g * ((x.dtype.type(2) * x * d) * d)


# ----------------------------------------------------------------------------
# modified Bessel functions of order 0 and 1


def i0e(x: Any) -> Any:
    """The exponentially scaled modified Bessel function of order 0, ``exp(-|x|) I0(x)`` (``lax.bessel_i0e``)."""
    (x,) = _inexact("i0e", x)
    return lax.bessel_i0e(x)


def i1e(x: Any) -> Any:
    """The exponentially scaled modified Bessel function of order 1, ``exp(-|x|) I1(x)`` (``lax.bessel_i1e``)."""
    (x,) = _inexact("i1e", x)
    return lax.bessel_i1e(x)


def i0(x: Any) -> Any:
    """The modified Bessel function of order 0, ``exp(|x|) i0e(x)``; its derivative is ``i1`` (jax 0.11's
    rule: jax 0.10 differentiated the product, which gave 1 at 0)."""
    (x,) = _inexact("i0", x)
    return _i0(x)


@custom_jvp
def _i0(x: Any) -> Any:
    return lax.exp(lax.abs(x)) * lax.bessel_i0e(x)


@_i0.defjvp
def _i0_jvp(primals: tuple, tangents: tuple) -> tuple:
    from ftrans.numpy._extras import bessel_i1

    (x,), (t,) = primals, tangents
    return _i0.fun(x), t * bessel_i1(x)


def i1(x: Any) -> Any:
    """The modified Bessel function of order 1, ``exp(|x|) i1e(x)``; its derivatives near 0 come from its
    series, as jax 0.11's (jax 0.10's second derivative at 0 was 1, not 0)."""
    from ftrans.numpy._extras import bessel_i1

    (x,) = _inexact("i1", x)
    return bessel_i1(x)


# ----------------------------------------------------------------------------
# Hurwitz zeta and polygamma

# B_2k / (2k)! for k = 1..12, the Euler-Maclaurin correction coefficients
_EM_COEFFS = tuple(float(b) for b in (
    1 / 12, -1 / 720, 1 / 30240, -1 / 1209600, 1 / 47900160, -691 / 1307674368000, 1 / 74724249600,
    -3617 / 10670622842880000, 43867 / 5109094217170944000, -174611 / 802857662698291200000,
    77683 / 14101100039391805440000, -236364091 / 1693824136731743669452800000))
_ZETA_DIRECT = 12


@outputs_checked
def zeta(x: Any, q: Any = None) -> Any:
    """The Hurwitz zeta function ``sum_k (q + k)**-x`` (``q`` is required, as in JAX).

    Twelve direct terms, then the Euler-Maclaurin tail with twelve Bernoulli
    corrections. ``x == 1`` gives ``inf``, ``x < 1`` NaN, a non-positive integer
    ``q`` ``inf``. Derivatives are those of the formula, in both arguments,
    except where the value is NaN (both NaN) and at ``x == 1`` (``-inf`` in ``x``,
    NaN in ``q``): jax 0.12's rule, under every jax (jax 0.10/0.11 give the
    derivatives of an analytic continuation where the value is NaN).
    """
    if q is None:
        raise NotImplementedError("Riemann zeta function not implemented; pass q != None to compute the "
                                  "Hurwitz Zeta function.")
    x, q = _inexact("zeta", x, q)
    x, q = jnp.broadcast_arrays(x, q)
    return _zeta(x, q)


def _zeta_formula(x: Any, q: Any) -> Any:
    t = x.dtype.type
    bad = x < t(1)
    one = x == t(1)
    pole = (q <= t(0)) & (q == lax.floor(q))
    xs = jnp.where(bad | one, t(2), x)
    qs = jnp.where(pole, t(1), q)
    total = jnp.zeros_like(qs)
    for k in range(_ZETA_DIRECT):
        total = total + jnp.power(qs + t(k), -xs)
    a = qs + t(_ZETA_DIRECT)
    a_pow = jnp.power(a, -xs)
    total = total + a * a_pow / (xs - t(1)) + t(0.5) * a_pow
    fac = xs * a_pow / a  # s (s+1)...(s+2j-2) a^(-s-2j+1), j = 1
    inv_a2 = t(1) / (a * a)
    for j, c in enumerate(_EM_COEFFS, start=1):
        total = total + t(c) * fac
        fac = fac * (xs + t(2 * j - 1)) * (xs + t(2 * j)) * inv_a2
    total = jnp.where(pole, t(np.inf), total)
    return jnp.where(bad, t(np.nan), jnp.where(one, t(np.inf), total))


_zeta = custom_jvp(_zeta_formula)


@_zeta.defjvp
def _zeta_jvp(primals: tuple, tangents: tuple) -> tuple:
    from ftrans.transforms.reverse import vjp

    (x, q), (tx, tq) = primals, tangents
    t = x.dtype.type
    # the elementwise partials, apart (a forward tangent (0, 1) would meet d/dx's NaN at negative q + k)
    out, pullback = vjp(_zeta_formula, x, q)
    dx, dq = pullback(jnp.ones_like(out))
    # the partials as arrays, so the tangent stays linear and reverse mode sees the NaNs too
    undefined = jnp.isnan(out)
    dx = jnp.where(undefined, t(np.nan), jnp.where(x == t(1), t(-np.inf), dx))
    dq = jnp.where(undefined | (x == t(1)), t(np.nan), dq)
    return out, tx * dx + tq * dq


@outputs_checked
def polygamma(n: Any, x: Any) -> Any:
    """The ``n``-th derivative of ``digamma`` (``n`` an integer array or scalar).

    ``n = 0`` is ``digamma``; ``n >= 1`` is ``(-1)**(n+1) n! zeta(n + 1, x)``.
    """
    if not dtypes.issubdtype(jnp.asarray(n).dtype, np.integer):
        raise ValueError(f"Argument `n` to polygamma must be of integer type. Got dtype {jnp.asarray(n).dtype}.")
    n, x = _inexact("polygamma", n, x)
    if dtypes.issubdtype(x.dtype, np.complexfloating):
        raise ValueError("polygamma does not support complex-valued inputs.")
    t = x.dtype.type
    is0 = n == t(0)
    ns = lax.stop_gradient(jnp.where(is0, t(1), n))
    sign = jnp.where(lax.rem(ns, t(2)) == t(0), t(-1), t(1))
    higher = sign * lax.exp(lax.lgamma(ns + t(1))) * zeta(ns + t(1), x)
    out = jnp.where(is0, lax.digamma(x), higher)
    return jnp.where((n < t(0)) | (n != lax.floor(n)), t(np.nan), out)


# ----------------------------------------------------------------------------
# incomplete Gamma and Beta functions

_MAX_ITERS = 2000


def _tiny(dt: Any) -> Any:
    return np.finfo(dt).tiny * 16


def _igamma_series(a: Any, x: Any, active: Any) -> Any:
    """``P(a, x)`` from ``x^a e^-x / Gamma(a+1) * sum_n x^n / ((a+1)...(a+n))``; converges for ``x < a + 1``."""
    t = x.dtype.type
    eps = t(np.finfo(x.dtype).eps)

    # each element stops when its own term is below eps (a batch-mate's slower convergence leaves it be,
    # as jax 0.12's loops do: an element's value does not depend on the others in its batch)
    def cond(s: Any) -> Any:
        return (s[0] < _MAX_ITERS) & jnp.any(s[4])

    def body(s: Any) -> Any:
        i, r, c, ans, live = s
        r2 = r + t(1)
        c2 = c * x / r2
        ans2 = ans + c2
        r, c, ans = jnp.where(live, r2, r), jnp.where(live, c2, c), jnp.where(live, ans2, ans)
        return i + 1, r, c, ans, live & (jnp.abs(c2) > jnp.abs(ans2) * eps)

    init = (0, a, jnp.where(active, t(1), t(0)), jnp.ones_like(x), jnp.asarray(active))
    _, _, _, ans, _ = lax.while_loop(cond, body, init)
    logax = a * lax.log(x) - x - lax.lgamma(a + t(1))
    return lax.exp(logax) * ans


def _igammac_cf(a: Any, x: Any, active: Any) -> Any:
    """``Q(a, x)`` from Legendre's continued fraction (modified Lentz); converges for ``x >= a + 1``.

    Each element stops at its own convergence (see ``_igamma_series``). An integer ``a`` makes a partial
    numerator 0: the value is then exact and every later delta 1, but the derivative in ``a`` (taken by
    forward mode through this loop) still needs the tail, so such an element runs until a shadow fraction
    at ``a + 1/2`` (the same convergence rate, no zero numerator) converges too.
    """
    t = x.dtype.type
    eps = t(np.finfo(x.dtype).eps)
    tiny = t(_tiny(x.dtype))
    integer_a = a == lax.floor(a)

    def guard(v: Any) -> Any:
        return jnp.where(jnp.abs(v) < tiny, tiny, v)

    def lentz(an: Any, b: Any, c: Any, d: Any) -> tuple:
        d = t(1) / guard(an * d + b)
        c = guard(b + an / c)
        return c, d, d * c

    b0 = x + t(1) - a
    d0 = t(1) / guard(b0)

    def cond(s: Any) -> Any:
        return (s[0] < _MAX_ITERS) & jnp.any(s[-1])

    def body(s: Any) -> Any:
        i, b, c, d, h, cs, ds, live = s
        k = t(1) * (i + 1)
        b2 = b + t(2)
        c2, d2, delta = lentz(-k * (k - a), b2, c, d)
        cs2, ds2, delta_s = lentz(-k * (k - a - t(0.5)), b2 - t(0.5), cs, ds)
        going = (jnp.abs(delta - t(1)) > eps) | (integer_a & (jnp.abs(delta_s - t(1)) > eps))
        pairs = ((b2, b), (c2, c), (d2, d), (h * delta, h), (cs2, cs), (ds2, ds))
        return (i + 1, *[jnp.where(live, new, old) for new, old in pairs], live & going)

    big = jnp.full_like(x, t(1) / tiny)
    init = (0, b0, big, d0, d0, big, t(1) / guard(b0 - t(0.5)), jnp.asarray(active))
    h = lax.while_loop(cond, body, init)[4]
    return lax.exp(a * lax.log(x) - x - lax.lgamma(a)) * h


def _igamma_both(a: Any, x: Any) -> tuple[Any, Any]:
    """``(P(a, x), Q(a, x))`` with the series or the continued fraction, whichever converges there."""
    t = x.dtype.type
    nan = (x < t(0)) | (a < t(0)) | jnp.isnan(a) | jnp.isnan(x) | ((a == t(0)) & (x == t(0)))
    trivial = nan | (x == t(0)) | (a == t(0)) | jnp.isinf(x)
    use_series = (x < a + t(1)) & ~trivial
    use_cf = ~use_series & ~trivial
    xs = jnp.where(use_series, x, t(0.5))
    as_ = jnp.where(use_series, a, t(1))
    xc = jnp.where(use_cf, x, t(2))
    ac = jnp.where(use_cf, a, t(1))
    p_series = _igamma_series(as_, xs, use_series)
    q_cf = _igammac_cf(ac, xc, use_cf)
    p = jnp.where(use_series, p_series, t(1) - q_cf)
    q = jnp.where(use_series, t(1) - p_series, q_cf)
    p_edge = jnp.where(x == t(0), t(0), t(1))  # a == 0 or x == inf: 1; x == 0: 0
    p = jnp.where(trivial, p_edge, p)
    q = jnp.where(trivial, t(1) - p_edge, q)
    return jnp.where(nan, t(np.nan), p), jnp.where(nan, t(np.nan), q)


def _igamma_dx(a: Any, x: Any) -> Any:
    """``d/dx P(a, x) = x^(a-1) e^-x / Gamma(a)``."""
    return lax.exp((a - 1) * lax.log(x) - x - lax.lgamma(a))


def _igamma_da(a: Any, x: Any) -> Any:
    """``d/da P(a, x)``, by forward-mode differentiation of the series / continued fraction (a primal value,
    so reverse mode only multiplies by it)."""
    from ftrans.transforms.ad import jvp

    return jvp(lambda aa: _igamma_both(aa, x)[0], (a,), (jnp.ones_like(a),))[1]


@custom_jvp
def _gammainc(a: Any, x: Any) -> Any:
    return _igamma_both(a, x)[0]


@_gammainc.defjvp
def _gammainc_jvp(primals: tuple, tangents: tuple) -> tuple:
    (a, x), (ta, tx) = primals, tangents
    return _gammainc(a, x), ta * _igamma_da(a, x) + tx * _igamma_dx(a, x)


@custom_jvp
def _gammaincc(a: Any, x: Any) -> Any:
    return _igamma_both(a, x)[1]


@_gammaincc.defjvp
def _gammaincc_jvp(primals: tuple, tangents: tuple) -> tuple:
    (a, x), (ta, tx) = primals, tangents
    return _gammaincc(a, x), -(ta * _igamma_da(a, x) + tx * _igamma_dx(a, x))


@outputs_checked
def gammainc(a: Any, x: Any) -> Any:
    """The regularized lower incomplete Gamma function ``P(a, x)``.

    A power series where ``x < a + 1``, Legendre's continued fraction
    elsewhere; NaN for negative arguments. Differentiable in both arguments
    (``d/da`` by differentiating the series, like JAX's ``igamma_grad_a``).
    """
    a, x = _inexact("gammainc", a, x)
    return _gammainc(a, x)


@outputs_checked
def gammaincc(a: Any, x: Any) -> Any:
    """The regularized upper incomplete Gamma function ``Q(a, x) = 1 - P(a, x)``, accurate in the upper tail."""
    a, x = _inexact("gammaincc", a, x)
    return _gammaincc(a, x)


def _betacf(a: Any, b: Any, x: Any, active: Any) -> Any:
    """The continued fraction of ``I_x(a, b)`` (modified Lentz), converging for ``x < (a+1)/(a+b+2)``."""
    t = x.dtype.type
    eps = t(np.finfo(x.dtype).eps)
    tiny = t(_tiny(x.dtype))

    def guard(v: Any) -> Any:
        return jnp.where(jnp.abs(v) < tiny, tiny, v)

    qab, qap, qam = a + b, a + t(1), a - t(1)
    d0 = t(1) / guard(t(1) - qab * x / qap)

    def cond(s: Any) -> Any:
        return (s[0] < _MAX_ITERS) & jnp.any(s[4])

    def body(s: Any) -> Any:  # converged elements keep their state (see _igamma_series)
        i, c0, d0_, h0, live = s
        m = t(1) * (i + 1)
        m2 = m + m
        even = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = t(1) / guard(t(1) + even * d0_)
        c = guard(t(1) + even / c0)
        h = h0 * d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = t(1) / guard(t(1) + aa * d)
        c = guard(t(1) + aa / c)
        delta = d * c
        keep = [jnp.where(live, new, old) for new, old in ((c, c0), (d, d0_), (h * delta, h0))]
        return (i + 1, *keep, live & (jnp.abs(delta - t(1)) > eps))

    init = (0, jnp.ones_like(x), d0, d0, jnp.asarray(active))
    return lax.while_loop(cond, body, init)[3]


def _betainc_impl(a: Any, b: Any, x: Any) -> Any:
    t = x.dtype.type
    inf = t(np.inf)
    nan = (x < t(0)) | (x > t(1)) | (a < t(0)) | (b < t(0)) | ((a == t(0)) & (b == t(0))) | \
        ((a == inf) & (b == inf)) | jnp.isnan(a) | jnp.isnan(b) | jnp.isnan(x)
    # SciPy's boundary values: the ends of [0, 1] first (0 at x == 0, 1 at x == 1), then the limits in
    # the parameters (a -> 0 or b -> inf: 1; b -> 0 or a -> inf: 0)
    trivial = nan | (x == t(0)) | (x == t(1)) | (a == t(0)) | (b == t(0)) | (a == inf) | (b == inf)
    one = (x == t(1)) | ((x != t(0)) & ((a == t(0)) | (b == inf)))
    edge = jnp.where(one, t(1), t(0))
    flip = x > (a + t(1)) / (a + b + t(2))
    aa = jnp.where(trivial, t(1), jnp.where(flip, b, a))
    bb = jnp.where(trivial, t(1), jnp.where(flip, a, b))
    xx = jnp.where(trivial, t(0.25), jnp.where(flip, t(1) - x, x))
    front = lax.exp(aa * lax.log(xx) + bb * lax.log1p(-xx) - betaln(aa, bb)) / aa
    val = front * _betacf(aa, bb, xx, ~trivial)
    val = jnp.where(flip, t(1) - val, val)
    return jnp.where(nan, t(np.nan), jnp.where(trivial, edge, val))


@custom_jvp
def _betainc(a: Any, b: Any, x: Any) -> Any:
    return _betainc_impl(a, b, x)


def _betainc_jvp(primals: tuple, tangents: tuple) -> tuple:
    from ftrans.transforms.custom_derivatives import SymbolicZero

    (a, b, x), (ta, tb, tx) = primals, tangents
    if not isinstance(ta, SymbolicZero) or not isinstance(tb, SymbolicZero):
        raise ValueError("Betainc gradient with respect to a and b not supported.")
    y = _betainc(a, b, x)
    if isinstance(tx, SymbolicZero):
        return y, jnp.zeros_like(y)
    dx = lax.exp((a - 1) * lax.log(x) + (b - 1) * lax.log1p(-x) - betaln(a, b))
    return y, tx * dx


_betainc.defjvp(_betainc_jvp, symbolic_zeros=True)


@outputs_checked
def betainc(a: Any, b: Any, x: Any) -> Any:
    """The regularized incomplete Beta function ``I_x(a, b)``, by its continued fraction (on ``1 - x`` with
    ``a`` and ``b`` swapped past the mean). Differentiable in ``x`` only, as in JAX."""
    a, b, x = _inexact("betainc", a, b, x)
    if dtypes.issubdtype(x.dtype, np.complexfloating):
        raise ValueError("betainc does not support complex-valued inputs.")
    return _betainc(a, b, x)


# ----------------------------------------------------------------------------
# erfcx, exponential integrals, Spence's function

_ERFCX_CF_TERMS = 60


def _erfcx_cf(x: Any) -> tuple[Any, Any, Any]:
    """The last three levels ``c1, c2, c3`` of erfc's continued fraction at ``x >= 2``, evaluated backwards:
    ``c_k = x + (k/2) / c_(k+1)``, so ``erfcx(x) = 1 / (sqrt(pi) c1)``, ``x - c1 = -1 / (2 c2)`` and
    ``c2 - x = 1 / c3``."""
    t = x.dtype.type
    cf = x
    levels = []
    for k in range(_ERFCX_CF_TERMS, 0, -1):
        cf = x + t(k / 2) / cf
        if k <= 3:
            levels.append(cf)
    c3, c2, c1 = levels
    return c1, c2, c3


def _erfcx_impl(x: Any) -> Any:
    t = x.dtype.type
    ax = jnp.abs(x)
    small = ax < t(2)
    xs = jnp.where(small, ax, t(0))
    near = lax.exp(xs * xs) * lax.erfc(xs)
    far = t(1 / np.sqrt(np.pi)) / _erfcx_cf(jnp.where(small, t(2), ax))[0]
    pos = jnp.where(small, near, far)
    neg = t(2) * lax.exp(x * x) - pos  # erfcx(-|x|) = 2 exp(x^2) - erfcx(|x|)
    return jnp.where(x < t(0), neg, pos)


@custom_jvp
def _erfcx(x: Any) -> Any:
    return _erfcx_impl(x)


@_erfcx.defjvp
def _erfcx_jvp(primals: tuple, tangents: tuple) -> tuple:
    (x,), (g,) = primals, tangents
    y = _erfcx(x)
    return y, g * _erfcx_slope(x, y)


# ``erfcx' = 2 x erfcx - 2/sqrt(pi)`` and ``erfcx'' = 2 erfcx + 2 x erfcx'`` cancel more and more bits as
# ``x`` grows (jax 0.12 fits polynomials to the derivative instead); from 2 on ftrans takes them from the
# continued fraction's levels, where no subtraction is left: ``erfcx' = -1 / (sqrt(pi) c1 c2)``,
# ``erfcx'' = 2 / (sqrt(pi) c1 c2 c3)``; -0 and 0 at ``inf`` (jax 0.10/0.11: ``inf * 0``, NaN). The fraction's
# 60 levels are float32-exact from x = 1 on, float64-exact from 2.


def _erfcx_slope_cut(x: Any) -> Any:
    return x.dtype.type(2.0 if x.dtype == np.float64 else 1.0)


@custom_jvp
def _erfcx_slope(x: Any, y: Any) -> Any:
    """``erfcx'(x)`` given ``y = erfcx(x)``."""
    t = x.dtype.type
    cut = _erfcx_slope_cut(x)
    far = x >= cut
    c1, c2, _ = _erfcx_cf(jnp.where(far, x, cut))
    return jnp.where(far, t(-1 / np.sqrt(np.pi)) / (c1 * c2), t(2) * x * y - t(2 / np.sqrt(np.pi)))


@_erfcx_slope.defjvp
def _erfcx_slope_jvp(primals: tuple, tangents: tuple) -> tuple:
    # y is erfcx(x), not a free argument: only x's tangent counts
    (x, y), (g, _) = primals, tangents
    t = x.dtype.type
    d = _erfcx_slope(x, y)
    cut = _erfcx_slope_cut(x)
    far = x >= cut
    xf = jnp.where(far, x, cut)
    c1, c2, c3 = _erfcx_cf(xf)
    near = t(2) * jnp.where(far, t(0), y) + t(2) * jnp.where(far, t(0), x) * jnp.where(far, t(0), d)
    return d, g * jnp.where(far, t(2 / np.sqrt(np.pi)) / (c1 * c2 * c3), near)


def erfcx(x: Any) -> Any:
    """The scaled complementary error function ``exp(x**2) erfc(x)`` (real arguments).

    ``exp(x**2) erfc(x)`` for ``|x| < 2``, erfc's continued fraction beyond
    (no overflow or underflow), ``2 exp(x**2) - erfcx(-x)`` for negative ``x``.
    Its derivative is ``2 x erfcx(x) - 2/sqrt(pi)``, from ``x = 1`` (float64: 2) on (where that
    subtraction cancels) ``-1 / (sqrt(pi) c1 c2)`` from the continued fraction's
    last levels (-0 at ``inf``), and likewise its second derivative. Half
    precision is computed in float32 and rounded (jax 0.12). Complex ``x`` gives
    ``wofz(i x)``.
    """
    (x,) = _inexact("erfcx", x)
    if dtypes.issubdtype(x.dtype, np.complexfloating):
        return _wofz(1j * x)  # erfcx(z) = w(i z)
    if dtypes.finfo(x.dtype).bits < 32:  # half precision through float32, as jax 0.12 (0.10/0.11: in place)
        return _erfcx(x.astype(np.float32)).astype(x.dtype)
    return _erfcx(x)


_EXPN_TERMS = 100


def _expn_cf(n: Any, x: Any) -> Any:
    """``E_n(x)`` for ``x > 1`` from its continued fraction ``e^-x / (x + n - 1 n / (x + n + 2 - 2 (n + 1) / ...))``.

    Evaluated from its tail backwards (a fixed depth: 100 levels in float64, enough from ``x = 1``; 40 in
    float32), which rounds once per level instead of compounding a forward recurrence's products: about one
    ulp against SciPy for small ``n`` (the forward Lentz iteration drifted to 6-40 ulp).
    """
    t = x.dtype.type
    depth = 100 if x.dtype == np.float64 else 40
    base = x + n

    def body(i: Any, f: Any) -> Any:
        k = t(depth) - t(1) * i
        return (base + t(2) * (k - t(1))) + (-k * (n - t(1) + k)) / f

    f = lax.fori_loop(0, depth, body, base + t(2 * depth))
    return lax.exp(-x) / f


def _expn_series(n: Any, x: Any) -> Any:
    """``E_n(x)`` for ``0 < x <= 1`` from its power series (the ``k = n - 1`` term carries ``digamma(n)``).

    ``n`` is an integer, so ``digamma(n) = -euler_gamma + H_(n-1)``, the harmonic sum carried along the loop
    (XLA's float32 ``digamma(2)`` is 7 ulp off, which reached ``E_2(1)``).
    """
    t = x.dtype.type
    lx = lax.log(x)
    n1 = n - t(1)
    first = jnp.where(n1 != t(0), t(1) / jnp.where(n1 != t(0), n1, t(1)), -lx - t(np.euler_gamma))

    def body(i: Any, s: Any) -> Any:
        fact, harmonic, ans = s
        k = t(1) * i
        fact = fact * -x / k
        harmonic = harmonic + t(1) / k
        regular = -fact / jnp.where(k == n1, t(1), k - n1)
        special_term = fact * (-lx - t(np.euler_gamma) + harmonic)
        return fact, harmonic, ans + jnp.where(k == n1, special_term, regular)

    return lax.fori_loop(1, 30, body, (jnp.ones_like(x), jnp.zeros_like(x), first))[2]


def _expn_invalid(n: Any, x: Any) -> Any:
    """Where ``E_n(x)`` is undefined: a negative, infinite or NaN order (already truncated), ``x < 0`` or NaN."""
    t = x.dtype.type
    return (n < t(0)) | (x < t(0)) | jnp.isnan(n) | jnp.isnan(x) | jnp.isinf(n)


def _expn_impl(n: Any, x: Any) -> Any:
    # ``n`` arrives truncated to an integer (SciPy's and jax 0.12's reading of a fractional order)
    t = x.dtype.type
    maxlog = t(np.log(np.finfo(x.dtype).max))
    big = x > t(1)
    xs = jnp.where(big, t(0.5), jnp.where(x > t(0), x, t(0.5)))
    xl = jnp.where(big & (x <= maxlog), x, t(2))
    ns = jnp.where((n >= t(0)) & jnp.isfinite(n), n, t(1))
    val = jnp.where(big, _expn_cf(ns, xl), _expn_series(ns, xs))
    x0 = jnp.where(x > t(0), x, t(1))
    val = jnp.where(n == t(0), lax.exp(-x0) / x0, val)
    # beyond log(max) e^-x underflows: E_n(x) < e^-x / x is 0 (at +inf too), as in jax 0.12 (jax 0.10/0.11: NaN at inf)
    val = jnp.where(x > maxlog, t(0), val)
    at_zero = jnp.where(n < t(2), t(np.inf), t(1) / jnp.where(n < t(2), t(1), n - t(1)))
    val = jnp.where(x == t(0), at_zero, val)
    return jnp.where(_expn_invalid(n, x), t(np.nan), val)


@custom_jvp
def _expn(n: Any, x: Any) -> Any:
    return _expn_impl(n, x)


@_expn.defjvp
def _expn_jvp(primals: tuple, tangents: tuple) -> tuple:
    # dE_n/dx = -E_{n-1}(x) for n >= 1; E_0(x) = e^-x / x has the derivative -(x + 1) e^-x / x**2 (jax 0.12's
    # rule; jax 0.10/0.11 asked for E_{-1} there and gave NaN)
    (n, x), (_, tx) = primals, tangents
    t = x.dtype.type
    maxlog = t(np.log(np.finfo(x.dtype).max))
    xs = jnp.where((x > t(0)) & (x <= maxlog), x, t(1))
    d0 = jnp.where(x == t(0), t(-np.inf), jnp.where(x > maxlog, t(0), -(xs + t(1)) * lax.exp(-xs) / (xs * xs)))
    d = jnp.where(n == t(0), d0, -_expn(jnp.where(n >= t(1), n - t(1), t(0)), x))
    d = jnp.where(_expn_invalid(n, x), t(np.nan), d)
    return _expn(n, x), tx * d


def expn(n: Any, x: Any) -> Any:
    """The generalized exponential integral ``E_n(x) = int_1^inf exp(-x t) / t**n dt`` (integer ``n >= 0``).

    A power series for ``x <= 1``, a continued fraction above; ``dE_n/dx =
    -E_{n-1}`` (``-(x + 1) exp(-x) / x**2`` for ``n = 0``). A fractional ``n``
    is truncated to an integer, as SciPy and jax 0.12 do; ``E_n(x)`` is 0
    beyond ``log`` of the dtype's largest float (and at ``inf``); negative,
    infinite or NaN ``n``, negative or NaN ``x`` give NaN.
    """
    n, x = _inexact("expn", n, x)
    if dtypes.issubdtype(x.dtype, np.complexfloating):
        raise ValueError("expn does not support complex-valued inputs.")
    # the series and continued fraction carry values of the result's shape through their loops
    n, x = jnp.broadcast_arrays(n, x)
    return _expn(lax.floor(n), x)


def exp1(x: Any) -> Any:
    """The exponential integral ``E_1(x)`` (``expn(1, x)``; NaN for negative ``x``, 0 at ``inf``)."""
    (x,) = _inexact("exp1", x)
    if dtypes.issubdtype(x.dtype, np.complexfloating):
        raise ValueError("exp1 does not support complex-valued inputs.")
    return _expn(jnp.ones_like(x), x)


def _expi_pos(x: Any) -> Any:
    """``Ei(x)`` for ``x > 0``: its power series up to 40, the asymptotic series ``e^x/x sum k!/x^k`` beyond."""
    t = x.dtype.type
    small = x <= t(40)
    xs = jnp.where(small, x, t(1))

    def body(k: Any, s: Any) -> Any:
        term, total = s
        kk = t(1) * k
        term = term * xs / kk
        return term, total + term / kk

    series = lax.fori_loop(1, 160, body, (jnp.ones_like(xs), jnp.zeros_like(xs)))[1]
    series = series + t(np.euler_gamma) + lax.log(xs)
    xl = jnp.where(small, t(50), x)
    acc = jnp.ones_like(xl)
    term = jnp.ones_like(xl)
    for k in range(1, 40):
        term = term * t(k) / xl
        acc = acc + term
    asym = lax.exp(xl) / xl * acc
    return jnp.where(small, series, asym)


@custom_jvp
def _expi(x: Any) -> Any:
    t = x.dtype.type
    pos = _expi_pos(jnp.where(x > t(0), x, t(1)))
    neg = -_expn(jnp.ones_like(x), jnp.where(x < t(0), -x, t(1)))  # -0 at -inf
    out = jnp.where(x > t(0), pos, neg)
    # Ei(0) = -inf, the log's limit (jax 0.12, SciPy; jax 0.10/0.11: NaN); Ei(+inf) stays NaN as in every jax
    out = jnp.where(x == t(0), t(-np.inf), out)
    return jnp.where((x == t(np.inf)) | jnp.isnan(x), t(np.nan), out)


@_expi.defjvp
def _expi_jvp(primals: tuple, tangents: tuple) -> tuple:
    (x,), (g,) = primals, tangents
    return _expi(x), g * lax.exp(x) / x


def expi(x: Any) -> Any:
    """The exponential integral ``Ei(x)``; ``-E_1(-x)`` for negative ``x``; derivative ``exp(x)/x``.

    ``Ei(0)`` is ``-inf`` and ``Ei(-inf)`` is ``-0`` (SciPy's and jax 0.12's values); ``Ei(inf)`` is NaN,
    as in every jax.
    """
    (x,) = _inexact("expi", x)
    if dtypes.issubdtype(x.dtype, np.complexfloating):
        raise ValueError("expi does not support complex-valued inputs.")
    return _expi(x)


def _li2_series(w: Any) -> Any:
    """``sum_k w**k / k**2`` for ``0 <= w <= 1/2`` (Horner, 60 terms)."""
    t = w.dtype.type
    acc = jnp.zeros_like(w)
    for k in range(60, 0, -1):
        acc = (acc + t(1.0 / (k * k))) * w
    return acc


@outputs_checked
def spence(x: Any) -> Any:
    """Spence's function ``int_1^x log(t)/(1 - t) dt = Li2(1 - x)`` for ``x >= 0`` (NaN below).

    The dilogarithm's power series after the reflection
    ``Li2(v) = pi^2/6 - log v log(1 - v) - Li2(1 - v)`` and, for ``x > 1``,
    Landen's identity, so the series always runs on an argument in [0, 1/2].
    """
    x = jnp.asarray(x)
    if x.dtype not in (np.float32, np.float64):
        raise TypeError(f"x.dtype={x.dtype} is not supported, see docstring for supported types.")
    t = x.dtype.type
    pi2_6 = t(np.pi**2 / 6)
    above = x > t(1)
    xs = jnp.where((x > t(0)) & jnp.isfinite(x), x, t(0.5))
    # Li2(u) with u = 1 - x: for x > 1 by Landen, Li2(u) = -Li2(v) - log(x)^2 / 2 with v = 1 - 1/x
    v = jnp.where(above, t(1) - t(1) / xs, t(1) - xs)
    one_minus_v = jnp.where(above, t(1) / xs, xs)
    lo = v <= t(0.5)
    w = jnp.where(lo, v, one_minus_v)
    s = _li2_series(w)
    lv = lax.log(jnp.where(lo, t(0.5), v))
    l1v = lax.log(jnp.where(lo, t(0.5), one_minus_v))
    li2v = jnp.where(lo, s, pi2_6 - lv * l1v - s)
    lx = lax.log(xs)
    out = jnp.where(above, -li2v - t(0.5) * lx * lx, li2v)
    out = jnp.where(x == t(0), pi2_6, out)
    return jnp.where((x < t(0)) | jnp.isnan(x) | jnp.isinf(x), t(np.nan), out)


# ----------------------------------------------------------------------------
# Bessel functions of the first kind


@outputs_checked
def bessel_jn(z: Any, *, v: int, n_iter: int = 50) -> Any:
    """``J_0(z) .. J_v(z)`` stacked on a new leading axis, by Miller's backward recurrence.

    ``J_{k-1} = 2k/z J_k - J_{k+1}`` runs down from ``k = n_iter`` (a concrete
    int, more iterations for larger ``z``) and is normalized by
    ``J_0 + 2 (J_2 + J_4 + ...) = 1``.
    """
    import operator

    from ftrans.core.operands import concrete_or_error

    (z,) = _inexact("bessel_jn", z)
    if dtypes.issubdtype(z.dtype, np.complexfloating):
        raise ValueError("complex input not supported.")
    v = operator.index(concrete_or_error(v, "bessel_jn's order v"))
    n_iter = int(concrete_or_error(n_iter, "bessel_jn's n_iter"))
    t = z.dtype.type

    def step(carry: tuple, k: Any) -> tuple:
        f_next, f_cur, even_sum = carry  # f_{k+2}, f_{k+1}
        f = t(2) * (k + t(1)) * f_cur / z - f_next
        even_sum = jnp.where(lax.rem(k, t(2)) == t(0), even_sum + t(2) * f, even_sum)
        return (f_cur, f, even_sum), f

    init = (jnp.zeros_like(z), jnp.full_like(z, t(1e-16)), jnp.zeros_like(z))
    ks = jnp.arange(n_iter + 1, dtype=z.dtype)
    (_, _, even_sum), vals = lax.scan(step, init, ks, reverse=True)
    return vals[: v + 1] / (even_sum - vals[0])


# ----------------------------------------------------------------------------
# sine/cosine integrals and Dawson's integral


def _sici_series(t: Any) -> tuple[Any, Any]:
    """Power series of ``Si`` and ``Ci - gamma - log t`` for ``0 < t <= 2``."""
    ty = t.dtype.type
    si = jnp.zeros_like(t)
    ci = jnp.zeros_like(t)
    term = jnp.ones_like(t)  # t^k / k!
    for k in range(1, 30):
        term = term * t / ty(k)
        sign = ty(-1.0 if (k // 2) % 2 else 1.0)
        if k % 2:
            si = si + sign * term / ty(k)
        else:
            ci = ci + sign * term / ty(k)
    return si, ci


def _sici_cf(t: Any) -> tuple[Any, Any]:
    """``Si`` and ``Ci`` for ``t > 2`` from the continued fraction of ``E1(i t)`` (modified Lentz, complex)."""
    ty = t.dtype.type
    cdt = np.complex128 if t.dtype == np.float64 else np.complex64
    tiny = ty(_tiny(t.dtype))
    tc = t.astype(cdt)
    b0 = jnp.ones_like(tc) + 1j * tc
    d0 = 1 / b0

    def guard(v: Any) -> Any:
        return jnp.where(jnp.abs(v) < tiny, cdt(tiny), v)

    def body(i: Any, s: Any) -> Any:
        b, c, d, h = s
        k = (i - 1).astype(t.dtype)
        an = (-(k * k)).astype(cdt)
        b = b + cdt(2)
        d = 1 / guard(an * d + b)
        c = guard(b + an / c)
        return b, c, d, h * (c * d)

    h = lax.fori_loop(2, 100, body, (b0, jnp.full_like(tc, cdt(1 / tiny)), d0, d0))[3]
    h = (jnp.cos(t) - 1j * jnp.sin(t)).astype(cdt) * h
    return ty(np.pi / 2) + jnp.imag(h), -jnp.real(h)


@custom_jvp
def _sici(x: Any) -> tuple[Any, Any]:
    ty = x.dtype.type
    t = jnp.abs(x)
    small = t <= ty(2)
    ts = jnp.where(small & (t > ty(0)), t, ty(1))
    tl = jnp.where(small | jnp.isinf(t), ty(3), t)
    si_s, ci_s = _sici_series(ts)
    ci_s = ci_s + ty(np.euler_gamma) + lax.log(ts)
    si_l, ci_l = _sici_cf(tl)
    si = jnp.where(small, si_s, si_l)
    ci = jnp.where(small, ci_s, ci_l)
    si = jnp.where(jnp.isinf(t), ty(np.pi / 2), jnp.where(t == ty(0), ty(0), si))
    ci = jnp.where(jnp.isinf(t), ty(0), jnp.where(t == ty(0), ty(-np.inf), ci))
    si = jnp.where(jnp.signbit(x), -si, si)  # (Si(-0.0) is -0.0)
    nan = jnp.isnan(x)
    # Ci has no real value on the negative axis's far end: Ci(-inf) is NaN (SciPy), Ci(inf) is 0
    return jnp.where(nan, ty(np.nan), si), jnp.where(nan | (x == ty(-np.inf)), ty(np.nan), ci)


@_sici.defjvp
def _sici_jvp(primals: tuple, tangents: tuple) -> tuple:
    (x,), (g,) = primals, tangents
    si, ci = _sici(x)
    return (si, ci), (g * jnp.sin(x) / x, g * jnp.cos(x) / x)


def sici(x: Any) -> tuple[Any, Any]:
    """The sine and cosine integrals ``(Si(x), Ci(x))``; ``Ci`` of a negative argument is ``Ci(|x|)`` (NaN at ``-inf``).

    Power series up to ``|x| = 2``, the continued fraction of ``E1(i x)``
    beyond; derivatives ``sin(x)/x`` and ``cos(x)/x``.
    """
    (x,) = _inexact("sici", x)
    if dtypes.issubdtype(x.dtype, np.complexfloating):
        raise ValueError(f"Argument `x` to sici must be real-valued. Got dtype {x.dtype}.")
    return _sici(x)


def _dawsn_plan(wide: bool) -> tuple[float, tuple[float, ...], int]:
    """Rybicki's step ``h``, his sum's weights ``exp(-((2i - 1) h)**2)`` and the Taylor series' length, per
    precision. The sum's error is about ``exp(-(pi / 2h)**2)``: ``h = 0.4`` (six terms) gives 2e-7, enough
    for float32; float64 takes ``h = 1/4`` (1e-17, thirteen terms), which is exact in binary, so
    ``|x| - n h`` is exact too. The Taylor series serves below 0.2: four terms for float32, nine for float64."""
    h, n, taylor = (0.25, 13, 9) if wide else (0.4, 6, 4)
    return h, tuple(float(np.exp(-(((2 * i - 1) * h) ** 2))) for i in range(1, n + 1)), taylor


_DAWSN_ASYMPTOTIC = 1e4  # beyond: 1/(2x) (1 + 1/(2x^2) + 3/(4x^4)), exact to float64's precision


def dawsn(x: Any) -> Any:
    """Dawson's integral ``exp(-x**2) int_0^x exp(t**2) dt``.

    Its Taylor series below 0.2, Rybicki's exponentially convergent sampling sum above (``_dawsn_plan``),
    and the asymptotic series beyond ``|x| = 1e4``, where the sum's reduction of ``|x|`` by a multiple of
    its step would lose every digit (NaN at 1e10 in float32 once compiled).
    """
    (x,) = _inexact("dawsn", x)
    if dtypes.issubdtype(x.dtype, np.complexfloating):
        raise ValueError("dawsn does not support complex-valued inputs.")
    t = x.dtype.type
    h, weights, taylor = _dawsn_plan(x.dtype.itemsize > 4)
    x2 = x * x
    near = t(1)
    for k in range(taylor - 1, 0, -1):  # x sum_k (-2 x^2)^k / (2k + 1)!!, nested
        near = t(1) - t(2 / (2 * k + 1)) * x2 * near
    near = x * near
    ax = jnp.abs(x)
    big = ax >= t(0.2)
    huge = ax >= t(_DAWSN_ASYMPTOTIC)
    xx = jnp.where(big & ~huge, ax, t(1))
    n0 = t(2) * jnp.round(t(0.5) * xx / t(h))
    xp = xx - n0 * t(h)
    e1 = lax.exp(t(2 * h) * xp)
    e2 = e1 * e1
    d1 = n0 + t(1)
    d2 = d1 - t(2)
    total = jnp.zeros_like(xx)
    for c in weights:
        total = total + t(c) * (e1 / d1 + t(1) / (d2 * e1))
        d1, d2, e1 = d1 + t(2), d2 - t(2), e1 * e2
    far = t(1 / np.sqrt(np.pi)) * jnp.sign(x) * lax.exp(-xp * xp) * total
    inv = t(1) / jnp.where(huge, x, t(1e4))  # 1/x is -0/+0 at -inf/inf, as the limit is
    inv2 = inv * inv
    tail = t(0.5) * inv * (t(1) + t(0.5) * inv2 * (t(1) + t(1.5) * inv2))
    return jnp.where(big, jnp.where(huge, tail, far), near)


# ----------------------------------------------------------------------------
# Fresnel integrals


def _fresnel_series(x: Any) -> tuple[Any, Any]:
    """``S`` and ``C`` for ``0 <= x <= 1.5`` from their power series in ``pi x^2 / 2``."""
    t = x.dtype.type
    fact = t(np.pi / 2) * x * x
    term = x
    s = jnp.zeros_like(x)
    c = x
    for k in range(1, 40):
        term = term * fact / t(k)
        sign = t(-1.0 if (k // 2) % 2 else 1.0)  # (-1)^n for the k = 2n (C) and k = 2n + 1 (S) terms
        if k % 2:
            s = s + sign * term / t(2 * k + 1)
        else:
            c = c + sign * term / t(2 * k + 1)
    return s, c


def _fresnel_cf(x: Any) -> tuple[Any, Any]:
    """``S`` and ``C`` for ``x > 1.5`` from the complex continued fraction of ``erfc`` (modified Lentz)."""
    t = x.dtype.type
    cdt = np.complex128 if x.dtype == np.float64 else np.complex64
    tiny = t(_tiny(x.dtype))
    xc = x.astype(cdt)
    b0 = jnp.ones_like(xc) - 1j * cdt(np.pi) * xc * xc
    d0 = 1 / b0

    def guard(v: Any) -> Any:
        return jnp.where(jnp.abs(v) < tiny, cdt(tiny), v)

    def body(k: Any, st: Any) -> Any:
        b, cc, d, h = st
        n = (2 * k - 3).astype(x.dtype)  # 1, 3, 5, ...
        an = (-n * (n + t(1))).astype(cdt)
        b = b + cdt(4)
        d = 1 / guard(an * d + b)
        cc = guard(b + an / cc)
        return b, cc, d, h * (cc * d)

    h = lax.fori_loop(2, 100, body, (b0, jnp.full_like(xc, cdt(1 / tiny)), d0, d0))[3]
    h = h * (xc - 1j * xc)
    arg = t(np.pi / 2) * x * x
    cs = cdt(0.5 + 0.5j) * (1 - (jnp.cos(arg) + 1j * jnp.sin(arg)).astype(cdt) * h)
    return jnp.imag(cs), jnp.real(cs)


@custom_jvp
def _fresnel(x: Any) -> tuple[Any, Any]:
    t = x.dtype.type
    ax = jnp.abs(x)
    small = ax <= t(1.5)
    xs = jnp.where(small, ax, t(1))
    xl = jnp.where(small | jnp.isinf(ax), t(2), ax)
    s_s, c_s = _fresnel_series(xs)
    s_l, c_l = _fresnel_cf(xl)
    s = jnp.where(small, s_s, s_l)
    c = jnp.where(small, c_s, c_l)
    s = jnp.where(jnp.isinf(ax), t(0.5), s)
    c = jnp.where(jnp.isinf(ax), t(0.5), c)
    neg = x < t(0)
    nan = jnp.isnan(x)
    s = jnp.where(neg, -s, s)
    c = jnp.where(neg, -c, c)
    return jnp.where(nan, t(np.nan), s), jnp.where(nan, t(np.nan), c)


@_fresnel.defjvp
def _fresnel_jvp(primals: tuple, tangents: tuple) -> tuple:
    (x,), (g,) = primals, tangents
    arg = x.dtype.type(np.pi / 2) * x * x
    return _fresnel(x), (g * jnp.sin(arg), g * jnp.cos(arg))


def fresnel(x: Any) -> tuple[Any, Any]:
    """The Fresnel integrals ``(S(x), C(x))`` = ``int_0^x (sin, cos)(pi t^2 / 2) dt``.

    Power series up to ``|x| = 1.5``, a complex continued fraction beyond;
    derivatives ``sin(pi x^2/2)`` and ``cos(pi x^2/2)``.
    """
    (x,) = _inexact("fresnel", x)
    if dtypes.issubdtype(x.dtype, np.complexfloating):
        raise ValueError("fresnel does not support complex-valued inputs.")
    return _fresnel(x)


# ----------------------------------------------------------------------------
# Kummer's confluent hypergeometric function and Owen's T function


def _hyp1f1_sum(first: Any, ratio: Any, x: Any) -> Any:
    """``1 + sum_k term_k`` with ``term_1 = first`` and ``term_{k+1} = term_k * ratio(k)``, until every
    element's term is below eps relative to its sum (at most 250 terms)."""
    t = x.dtype.type
    eps = t(np.finfo(x.dtype).eps)

    def cond(s: Any) -> Any:
        total, k, term = s
        return (k < 250) & jnp.any(jnp.abs(term) > jnp.abs(total) * eps)

    def body(s: Any) -> Any:
        total, k, term = s
        kk = t(1) * k
        return total + term, k + 1, term * ratio(kk)

    return lax.while_loop(cond, body, (jnp.ones_like(x), 1, first))[0]


def _hyp1f1_general(a: Any, b: Any, x: Any) -> Any:
    """The series (``|x| < 100``) or the asymptotic series, without the special cases."""
    t = x.dtype.type
    near = jnp.abs(x) < t(100)
    xs = jnp.where(near, x, t(0))
    series = _hyp1f1_sum(a / b * xs, lambda k: (a + k) / (b + k) * xs / (k + t(1)), xs)
    xl = jnp.where(near, t(100), x)
    asym_sum = _hyp1f1_sum((b - a) * (t(1) - a) / xl, lambda k: (b - a + k) * (t(1) - a + k) / (k + t(1)) / xl, xl)
    asym = gamma(b) / gamma(a) * lax.exp(xl) * xl ** (a - b) * asym_sum
    return jnp.where(near, series, asym)


def _hyp1f1_impl(a: Any, b: Any, x: Any) -> Any:
    t = x.dtype.type
    out = _hyp1f1_general(a, b, x)
    out = jnp.where((b == t(0)) & (a != t(0)), t(np.inf), out)
    out = jnp.where((a == b) & (a != t(0)), lax.exp(x), out)
    return jnp.where(a == t(0), t(1), out)


@custom_jvp
def _hyp1f1(a: Any, b: Any, x: Any) -> Any:
    return _hyp1f1_impl(a, b, x)


@_hyp1f1.defjvp
def _hyp1f1_jvp(primals: tuple, tangents: tuple) -> tuple:
    from ftrans.transforms.ad import jvp

    (a, b, x), (ta, tb, tx) = primals, tangents
    y = _hyp1f1(a, b, x)
    one = x.dtype.type(1)
    dx = a / b * _hyp1f1(a + one, b + one, x)
    da = jvp(lambda u: _hyp1f1_general(u, b, x), (a,), (jnp.ones_like(a),))[1]
    db = jvp(lambda u: _hyp1f1_general(a, u, x), (b,), (jnp.ones_like(b),))[1]
    return y, ta * da + tb * db + tx * dx


def hyp1f1(a: Any, b: Any, x: Any) -> Any:
    """Kummer's confluent hypergeometric function ``1F1(a; b; x)``.

    Its power series for ``|x| < 100``, the large-``x`` asymptotic series
    beyond; 1 for ``a = 0``, ``exp(x)`` for ``a = b``, ``inf`` for ``b = 0``.
    ``d/dx = a/b 1F1(a+1; b+1; x)``; ``d/da`` and ``d/db`` differentiate the
    series.
    """
    a, b, x = _inexact("hyp1f1", a, b, x)
    if dtypes.issubdtype(x.dtype, np.complexfloating):
        raise ValueError("hyp1f1 does not support complex-valued inputs.")
    a, b, x = jnp.broadcast_arrays(a, b, x)
    return _hyp1f1(a, b, x)


# ----------------------------------------------------------------------------
# Gauss's hypergeometric function 2F1

_HYP2F1_MAX_TERMS = 3000


def _hyp2f1_series(a: Any, b: Any, c: Any, x: Any, derivs: bool = False) -> Any:
    """Gauss's series ``sum_k (a)_k (b)_k / ((c)_k k!) x**k`` until every term is below eps of its sum.

    With ``derivs`` it also sums the series' derivatives in ``a``, ``b`` and
    ``c``: ``d term_k / da = term_k * sum_{j<k} 1 / (a + j)`` (and alike), the
    harmonic sums carried along; returns ``(F, dF/da, dF/db, dF/dc)``. A
    non-positive integer ``a`` or ``b`` ends the series exactly.
    """
    t = x.dtype.type
    eps = t(np.finfo(x.dtype).eps)
    zero = jnp.zeros_like(x)

    def inv(v: Any) -> Any:
        return jnp.where(v == t(0), t(0), t(1) / jnp.where(v == t(0), t(1), v))

    def cond(s: Any) -> Any:
        k, term, total = s[0], s[1], s[2]
        big = jnp.abs(term) > eps * jnp.abs(total)
        if derivs:
            for h, dsum in zip(s[3:6], s[6:9]):
                big = big | (jnp.abs(term * h) > eps * jnp.abs(dsum))
        return (k < t(_HYP2F1_MAX_TERMS)) & jnp.any(big)

    def body(s: Any) -> Any:
        k, term, total = s[0], s[1], s[2]
        nxt = term * ((a + k) * (b + k) / ((c + k) * (k + t(1)))) * x
        out = (k + t(1), nxt, total + nxt)
        if derivs:
            ha, hb, hc = s[3] + inv(a + k), s[4] + inv(b + k), s[5] - inv(c + k)
            out = out + (ha, hb, hc, s[6] + nxt * ha, s[7] + nxt * hb, s[8] + nxt * hc)
        return out

    init = (t(0), jnp.ones_like(x), jnp.ones_like(x))
    if derivs:
        init = init + (zero,) * 6
    res = lax.while_loop(cond, body, init)
    return (res[2], res[6], res[7], res[8]) if derivs else res[2]


def _rgamma(x: Any) -> Any:
    """``1 / Gamma(x)``, 0 at the poles."""
    t = x.dtype.type
    pole = (x <= t(0)) & (x == lax.floor(x))
    return jnp.where(pole, t(0), t(1) / gamma(jnp.where(pole, t(1), x)))


def _hyp2f1_unit(a: Any, b: Any, c: Any, x: Any) -> Any:
    """``2F1`` for ``0 <= x < 1`` (and ``c - a - b > -1`` or no transformation needed).

    Near 1, where the series converges slowly, a ``c - a - b`` away from the
    integers takes the connection formula to series in ``1 - x``; otherwise (and
    for terminating series) Gauss's series itself.
    """
    t = x.dtype.type
    d = c - a - b
    whole = lambda v: (v <= t(0)) & (v == lax.floor(v))  # noqa: E731
    terminating = whole(a) | whole(b)
    far = jnp.abs(d - lax.round(d)) > t(0.01)
    use_cf = (x > t(0.9)) & far & ~terminating
    xs = jnp.where(use_cf, t(0), x)
    direct = _hyp2f1_series(a, b, c, xs)
    dd = jnp.where(use_cf, d, t(0.5))
    y = jnp.where(use_cf, t(1) - x, t(0))
    g_c = gamma(c)
    first = g_c * gamma(dd) * _rgamma(c - a) * _rgamma(c - b) * _hyp2f1_series(a, b, t(1) - dd, y)
    second = g_c * gamma(-dd) * _rgamma(a) * _rgamma(b) * y ** dd * _hyp2f1_series(c - a, c - b, dd + t(1), y)
    return jnp.where(use_cf, first + second, direct)


def _hyp2f1_general(a: Any, b: Any, c: Any, x: Any) -> Any:
    """``2F1`` for ``x < 1``: negative ``x`` by Pfaff's transformation
    ``(1 - x)**-a 2F1(a, c - b; c; x / (x - 1))`` onto ``[0, 1)``."""
    t = x.dtype.type
    neg = x < t(0)
    xn = jnp.where(neg, x, t(-1))
    pfaff = (t(1) - xn) ** -a * _hyp2f1_unit(a, c - b, c, xn / (xn - t(1)))
    xp = jnp.where(neg | (x >= t(1)), t(0), x)
    return jnp.where(neg, pfaff, _hyp2f1_unit(a, b, c, xp))


def _hyp2f1_impl(a: Any, b: Any, c: Any, x: Any) -> Any:
    t = x.dtype.type
    inf = t(np.inf)
    d = c - a - b
    s = t(1) - x
    whole_d = d == lax.round(d)
    c_pole = (c <= t(0)) & (c == lax.floor(c))
    # Euler's transformation 2F1(a, b; c; x) = (1 - x)**d 2F1(c - a, c - b; c; x) for d <= -1
    euler = (d <= t(-1)) & (whole_d | (s >= t(0)))
    xe = jnp.where(euler & (x < t(1)), x, t(0))
    out = jnp.where(x < t(1), _hyp2f1_general(a, b, c, jnp.where(euler, t(0), x)), inf)
    out = jnp.where(euler, s ** d * _hyp2f1_general(c - a, c - b, c, xe), out)
    # Gauss's sum at x = 1 (c - a - b > 0)
    gauss = gamma(c) * gamma(jnp.where(d > t(0), d, t(1))) * _rgamma(c - a) * _rgamma(c - b)
    out = jnp.where((x == t(1)) & ~euler, jnp.where(d > t(0), gauss, inf), out)
    out = jnp.where((x < t(1)) & (a == c) & ~euler, s ** -b, out)
    out = jnp.where((x < t(1)) & (b == c) & ~euler, s ** -a, out)
    out = jnp.where(c_pole, inf, out)
    one = (x == t(0)) | (((a == t(0)) | (b == t(0))) & (c != t(0)))
    out = jnp.where(one, t(1), out)
    return jnp.where(jnp.isnan(a) | jnp.isnan(b) | jnp.isnan(c) | jnp.isnan(x), t(np.nan), out)


@custom_jvp
def _hyp2f1(a: Any, b: Any, c: Any, x: Any) -> Any:
    return _hyp2f1_impl(a, b, c, x)


@_hyp2f1.defjvp
def _hyp2f1_jvp(primals: tuple, tangents: tuple) -> tuple:
    (a, b, c, x), (ta, tb, tc, tx) = primals, tangents
    t = x.dtype.type
    y = _hyp2f1(a, b, c, x)
    # d/dx = ab/c 2F1(a+1, b+1; c+1; x); d/da, d/db, d/dc from Gauss's series (|x| < 1)
    dx = a * b / c * _hyp2f1(a + t(1), b + t(1), c + t(1), x)
    _, da, db, dc = _hyp2f1_series(a, b, c, jnp.where(jnp.abs(x) < t(1), x, t(0)), derivs=True)
    return y, ta * da + tb * db + tc * dc + tx * dx


def hyp2f1(a: Any, b: Any, c: Any, x: Any) -> Any:
    """Gauss's hypergeometric function ``2F1(a, b; c; x) = sum_k (a)_k (b)_k / (c)_k x**k / k!``.

    Real arguments. Gauss's series on ``[0, 1)``, with the ``1 - x``
    connection formula near 1 (when ``c - a - b`` is not near an integer),
    Euler's transformation for ``c - a - b <= -1`` and Pfaff's for ``x < 0``;
    closed forms where ``a`` or ``b`` equals ``c``, Gauss's sum at ``x = 1``.
    1 at ``x = 0`` or ``a = 0`` or ``b = 0``; ``inf`` at non-positive integer
    ``c``, beyond 1 and where the sum at 1 diverges, as in JAX. Derivatives:
    ``d/dx = ab/c 2F1(a+1, b+1; c+1; x)``, ``d/da``, ``d/db``, ``d/dc`` from
    the series (for ``|x| < 1``).
    """
    a, b, c, x = _inexact("hyp2f1", a, b, c, x)
    if dtypes.issubdtype(x.dtype, np.complexfloating):
        raise ValueError("hyp2f1 does not support complex-valued inputs.")
    a, b, c, x = jnp.broadcast_arrays(a, b, c, x)
    return _hyp2f1(a, b, c, x)


@functools.cache
def _gauss_legendre(n: int) -> tuple[np.ndarray, np.ndarray]:
    return np.polynomial.legendre.leggauss(n)


def _owens_t_quad(h: Any, a: Any) -> Any:
    """``(1/2pi) int_0^a exp(-h^2 (1 + s^2)/2) / (1 + s^2) ds`` for ``0 <= a <= 1``, 48-point Gauss-Legendre."""
    t = h.dtype.type
    nodes, weights = _gauss_legendre(48)
    half = a / t(2)
    total = jnp.zeros_like(h)
    hh = t(-0.5) * h * h
    for s_node, w in zip(nodes, weights):
        s = half * (t(s_node) + t(1))
        q = t(1) + s * s
        total = total + t(w) * lax.exp(hh * q) / q
    return total * half / t(2 * np.pi)


def _owens_t_value(h: Any, a: Any) -> Any:
    t = h.dtype.type
    h = jnp.abs(h)
    aa = jnp.abs(a)
    r2 = t(np.sqrt(2))
    inside = aa <= t(1)
    ma = jnp.where(inside, aa, t(1) / jnp.where(aa == t(0), t(1), aa))
    mh = jnp.where(inside, h, aa * h)
    out = _owens_t_quad(mh, ma)
    out = jnp.where(mh == t(0), jnp.arctan(ma) / t(2 * np.pi), out)
    out = jnp.where(ma == t(1), t(0.125) * lax.erfc(-mh / r2) * lax.erfc(mh / r2), out)
    hn = h / r2
    eh, eah = lax.erfc(hn), lax.erfc(aa * hn)
    flipped = jnp.where(aa * h <= t(0.67), t(0.25) - t(0.25) * lax.erf(hn) * lax.erf(aa * hn) - out,
                        t(0.25) * (eh + eah - eh * eah) - out)
    out = jnp.sign(a) * jnp.where(aa > t(1), flipped, out)
    return jnp.where(jnp.isnan(a) | jnp.isnan(h), t(np.nan), out)


@custom_jvp
def _owens_t(h: Any, a: Any) -> Any:
    return _owens_t_value(h, a)


@_owens_t.defjvp
def _owens_t_jvp(primals: tuple, tangents: tuple) -> tuple:
    (h, a), (dh, da) = primals, tangents
    t = h.dtype.type
    d_h = -lax.exp(t(-0.5) * h * h) * lax.erf(a * h / t(np.sqrt(2))) / t(2 * np.sqrt(2 * np.pi))
    q = a * a + t(1)
    d_a = lax.exp(t(-0.5) * q * h * h) / (t(2 * np.pi) * q)
    return _owens_t(h, a), d_h * dh + d_a * da


def owens_t(h: Any, a: Any) -> Any:
    """Owen's T function ``T(h, a) = (1/2pi) int_0^a exp(-h^2 (1+x^2)/2) / (1+x^2) dx``.

    Gauss-Legendre quadrature for ``|a| <= 1`` and the reciprocal identity
    beyond; its derivatives are the closed forms.
    """
    h, a = _inexact("owens_t", h, a)
    h, a = jnp.broadcast_arrays(h, a)
    return _owens_t(h, a)


# ----------------------------------------------------------------------------
# spherical harmonics


def _normalized_legendre_table(n_max: int, x: Any) -> Any:
    """Orthonormal associated Legendre values ``P_l^m(x) sqrt((2l+1)/(4 pi) (l-m)!/(l+m)!)`` (with the
    Condon-Shortley phase) for ``0 <= m, l <= n_max``: shape ``(n_max+1, n_max+1, *x.shape)``, 0 for ``l < m``.

    The diagonal by ``P_m^m = -sqrt((2m+1)/(2m)) sqrt(1-x^2) P_{m-1}^{m-1}``, then up in ``l`` by the
    stable three-term recurrence of the normalized functions.
    """
    t = x.dtype.type
    s = jnp.sqrt(jnp.maximum(t(1) - x * x, t(0)))
    zero = jnp.zeros_like(x)
    table = [[zero] * (n_max + 1) for _ in range(n_max + 1)]
    diag = jnp.full_like(x, t(np.sqrt(1 / (4 * np.pi))))
    for m in range(n_max + 1):
        if m > 0:
            diag = -t(np.sqrt((2 * m + 1) / (2 * m))) * s * diag
        table[m][m] = diag
        if m + 1 <= n_max:
            table[m][m + 1] = t(np.sqrt(2 * m + 3)) * x * diag
        for ell in range(m + 2, n_max + 1):
            a_lm = np.sqrt((4 * ell * ell - 1) / (ell * ell - m * m))
            b_lm = np.sqrt(((ell - 1) ** 2 - m * m) / (4 * (ell - 1) ** 2 - 1))
            table[m][ell] = t(a_lm) * (x * table[m][ell - 1] - t(b_lm) * table[m][ell - 2])
    return jnp.stack([jnp.stack(row) for row in table])


def sph_harm_y(n: Any, m: Any, theta: Any, phi: Any, diff_n: int | None = None, n_max: int | None = None) -> Any:
    """The spherical harmonic ``Y_n^m(theta, phi)`` (``theta`` the polar angle, ``phi`` the azimuth), SciPy's
    convention, for 1-d ``n``, ``m``, ``theta``, ``phi`` of one length.

    ``n_max`` (default ``max(n)``, which needs concrete ``n``) sizes the
    Legendre table and must be static under ``jit``; ``diff_n`` is not
    supported (as in JAX).
    """
    from ftrans.core.operands import concrete_or_error

    if diff_n is not None:
        raise NotImplementedError("The 'diff_n' argument to sph_harm_y is not supported.")
    if jnp.isscalar(theta):
        theta = jnp.array([theta])
    if n_max is None:
        n_max = np.max(np.asarray(concrete_or_error(n, "sph_harm_y's n (pass n_max to trace n)")))
    n_max = int(concrete_or_error(n_max, "sph_harm_y's n_max"))
    n, m = jnp.asarray(n), jnp.asarray(m)
    (theta,) = _inexact("sph_harm_y", theta)
    (phi,) = _inexact("sph_harm_y", phi)
    table = _normalized_legendre_table(n_max, jnp.cos(theta))
    am = jnp.abs(m)
    idx = jnp.arange(theta.shape[0])
    val = table.at[am, n, idx].get(mode="clip")
    ang = am.astype(phi.dtype) * phi
    y = lax.complex(val * jnp.cos(ang), val * jnp.sin(ang))
    sign = jnp.where(am % 2 == 1, -1.0, 1.0).astype(val.dtype)
    return jnp.where(m < 0, sign * jnp.conj(y), y)


# ----------------------------------------------------------------------------
# the Faddeeva function


@functools.cache
def _weideman(n: int = 32) -> tuple[float, np.ndarray]:
    """Weideman's (1994) rational-approximation constants for ``w(z)``: ``L = sqrt(n / sqrt 2)`` and the
    ``n`` polynomial coefficients, from the FFT of ``exp(-t^2) (L^2 + t^2)`` at ``t = L tan(theta/2)``."""
    m = 2 * n
    k = np.arange(-m + 1, m)
    big_l = np.sqrt(n / np.sqrt(2))
    t = big_l * np.tan(k * np.pi / m / 2)
    f = np.concatenate([[0.0], np.exp(-t * t) * (big_l**2 + t * t)])
    coeffs = np.real(np.fft.fft(np.fft.fftshift(f))) / (2 * m)
    return float(big_l), np.flipud(coeffs[1: n + 1])


def _wofz_upper(z: Any) -> Any:
    big_l, coeffs = _weideman()
    iz = 1j * z
    denom = big_l - iz
    zz = (big_l + iz) / denom
    p = jnp.zeros_like(zz)
    for c in coeffs:
        p = p * zz + c
    return 2 * p / (denom * denom) + (1 / np.sqrt(np.pi)) / denom


@custom_jvp
def _wofz(z: Any) -> Any:
    upper = jnp.imag(z) >= 0
    zu = jnp.where(upper, z, -z)
    wu = _wofz_upper(zu)
    return jnp.where(upper, wu, 2 * jnp.exp(-z * z) - wu)


@_wofz.defjvp
def _wofz_jvp(primals: tuple, tangents: tuple) -> tuple:
    (z,), (g,) = primals, tangents
    w = _wofz(z)
    return w, g * (-2 * z * w + 2j / np.sqrt(np.pi))


def wofz(z: Any) -> Any:
    """The Faddeeva function ``w(z) = exp(-z^2) erfc(-i z)`` (complex result).

    Weideman's 32-term rational approximation in the upper half plane and
    ``w(-z) = 2 exp(-z^2) - w(z)`` below; derivative ``-2 z w(z) + 2i/sqrt(pi)``.
    """
    from ftrans.core.operands import check_arraylike

    check_arraylike("wofz", z)
    z = jnp.asarray(z)
    cdt = np.complex128 if z.dtype in (np.float64, np.complex128) else np.complex64
    return _wofz(z.astype(cdt))


# Eager calls run from a program traced once per signature (``core/eager_programs.py``): these are tens to
# hundreds of primitives each, which op by op cost five to twenty-five times the program's time.
from ftrans.core import eager_programs as _eager_programs  # noqa: E402

_eager_programs.install(globals(), (
    "bessel_jn", "beta", "betainc", "betaln", "boxcox", "boxcox1p", "comb", "dawsn", "entr", "erfcinv", "erfcx", "exp1", "expi",
    "expn", "factorial", "fresnel", "gamma", "gammainc", "gammaincc", "gammasgn", "hyp1f1", "hyp2f1", "i0", "i1",
    "kl_div", "log_ndtr", "multigammaln", "log_softmax", "loggamma", "logsumexp", "ndtr", "ndtri", "owens_t", "polygamma", "rel_entr",
    "sici", "softmax", "spence", "wofz", "zeta",
))
