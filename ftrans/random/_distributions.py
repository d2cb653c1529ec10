"""The distributions of JAX's ``random`` beyond uniform/normal, producing JAX's bits.

Each sampler reproduces the operation sequence of the corresponding JAX
sampler (jax 0.10) on ftrans primitives: the same key splits, the same
uniform/normal draws and the same arithmetic, so that XLA computes the same
values.  The rejection samplers keep JAX's loop structure: Marsaglia and
Tsang's method for ``gamma`` (one ``while_loop`` per element, mapped over
per-element keys), Knuth's method and Hormann's transformed rejection for
``poisson``, inversion and BTRS for ``binomial``.

``gamma`` (and everything built on it: ``loggamma``, ``beta``,
``dirichlet``, ``t``, ``chisquare``, ``f``, ``generalized_normal``,
``ball``) differentiates in its shape parameter by implicit
reparameterisation, as JAX does: JAX's ``random_gamma`` primitive
(``core/prims/random.py``, drawing by ``_phys_gamma``), whose tangent is
``d sample / d alpha = -(dF/dalpha) / (dF/dx)`` for the gamma CDF ``F``,
computed by the series / continued fraction of the incomplete gamma function.

The public functions validate their arguments in Python, where the user's
line and the concrete values are at hand, then call jitted cores whose
static arguments are the shape, dtype and options.
"""

from __future__ import annotations

import math
import operator
from typing import Any

import ml_dtypes
import numpy as np

from ftrans import lax
from ftrans import numpy as jnp
from ftrans.core import dtypes
from ftrans.core import key_reuse as _kr
from ftrans.core.keys import KeyDtype, PRNGKeyArray, is_key
from ftrans.core.operands import dtype_weak, shape_of
from ftrans.core.prims import random as R
from ftrans.core.trace import Tracer
from ftrans.errors import FtransTypeError, FtransValueError
from ftrans.lax._ops import convert_quiet as _convert  # (no warning for 64-bit dtypes it narrows)
from ftrans.random import _prng
from ftrans.random._prng import core_jit
from ftrans.random._samplers import (
    _asarray,
    _broadcast_param_shapes,
    _canonical_shape,
    _check_arraylike,
    _check_key,
    _check_param_shape,
    _finfo,
    _float_dtype,
    _normal_core,
    _normal_real,
    _param,
    _uniform_core,
    sharded_sampler,
)
from ftrans.transforms.batching import vmap

__all__ = [
    "exponential", "laplace", "logistic", "cauchy", "rademacher", "maxwell", "double_sided_maxwell",
    "weibull_min", "gamma", "loggamma", "beta", "dirichlet", "t", "chisquare", "f", "pareto",
    "poisson", "geometric", "rayleigh", "wald", "triangular", "lognormal", "generalized_normal",
    "ball", "orthogonal", "multivariate_normal", "binomial", "multinomial", "clone", "key_impl",
    "key_dtype",
]

_U32 = np.dtype(np.uint32)


# ---------------------------------------------------------------- argument helpers
def _c(v: Any, d: np.dtype) -> np.ndarray:
    return np.asarray(v, d)


def _split2(k: Any) -> tuple[Any, Any]:
    ks = _prng.split(k, (2,))
    return ks[0], ks[1]


def _int_dtype(name: str, dtype: Any) -> np.dtype:
    dtypes.check_requested(dtype, f"random.{name}")
    d = dtypes.default_int() if dtype is None else dtypes.to_dtype(dtype)
    if d.kind not in "iu":
        raise FtransValueError(f"ftrans.random.{name}: dtype must be an integer dtype, got {d.name}")
    return d


def _check_safe_cast(name: str, dtype: np.dtype, *params: Any) -> None:
    """JAX's ``safe_to_cast``: a parameter must not lose precision or kind when cast to ``dtype``."""
    for p in params:
        d, weak = dtype_weak(p)
        if d == dtype:
            continue
        if dtypes.promote(((d, weak), (dtype, False)))[0] != dtype:
            from ftrans.errors import TypePromotionError

            raise TypePromotionError(
                f"ftrans.random.{name}: cannot safely cast a parameter of dtype {d.name} to the "
                f"requested dtype {dtype.name}; pass dtype={d.name} "
                f"or convert the parameter with .astype({dtype.name})")


def _real_param(name: str, *params: Any) -> None:
    _check_arraylike(name, *params)
    for p in params:
        d, _ = dtype_weak(p)
        if d.kind == "c":
            raise FtransTypeError(
                f"ftrans.random.{name}: distribution parameters must be real, got a {d.name} value")


def _shape_for(name: str, shape: Any, *params: Any) -> tuple[int, ...]:
    """``shape`` canonicalised and checked against the parameters, or their broadcast shape."""
    if shape is None:
        return _broadcast_param_shapes(name, *params)
    shape = _canonical_shape(name, shape)
    _check_param_shape(name, shape, *params)
    return shape


def _float_sampler_args(name: str, key: Any, dtype: Any, shape: Any, *params: Any) -> tuple[Any, np.dtype, tuple]:
    """The checks every float sampler with real parameters makes, in JAX's order: the key, the float
    dtype, real parameters, the output shape they broadcast to, and a safe cast of them to the dtype."""
    k = _check_key(name, key)
    d = _float_dtype(name, dtype)
    _real_param(name, *params)
    shape = _shape_for(name, shape, *params)
    _check_safe_cast(name, d, *params)
    return k, d, shape


def _check_method(name: str, method: Any) -> None:
    """JAX's ``method=`` of the gamma-family samplers and ``poisson`` (jax 0.11): ``'exact'`` or
    ``'approximate'``. ftrans draws both with the exact sampler (docs/differences.md)."""
    if method not in ("exact", "approximate"):
        raise FtransValueError(f"ftrans.random.{name}: method argument to `{name}` must be one of "
                               f"{{'exact', 'approximate'}}, got {method!r}")


def _static_int(name: str, what: str, v: Any) -> int:
    if isinstance(v, Tracer):
        operator.index(v)  # raises the concretization error that names the user's line
    if isinstance(v, (bool, np.bool_)):
        raise FtransTypeError(f"ftrans.random.{name}: {what} must be an integer, got a bool")
    try:
        return operator.index(v)
    except TypeError:
        raise FtransTypeError(
            f"ftrans.random.{name}: {what} must be a concrete integer, got {v!r}") from None


def _promote_inexact(*xs: Any) -> list[Any]:
    """JAX's ``promote_dtypes_inexact``: a common dtype, made floating when it is not."""
    arrs = [_asarray(x) for x in xs]
    d, weak = dtypes.promote(tuple(dtype_weak(a) for a in arrs))
    if not dtypes.is_inexact(d):
        d, weak = dtypes.default_float(), weak
    return [_convert(a, d) if not weak else jnp.asarray(a, dtype=d) for a in arrs]


# ---------------------------------------------------------------- simple transforms of uniform
def _exponential_core(k: Any, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    u = _uniform_core(k, 0.0, 1.0, shape, dtype)
    return lax.neg(lax.log1p(lax.neg(u)))  # log of 1 - u: (0, 1] keeps the log finite


_exponential = core_jit(_exponential_core, static_argnums=(1, 2))


@sharded_sampler
def exponential(key: Any, shape: Any = (), dtype: Any = None) -> Any:
    """Standard exponential floats, as JAX's ``random.exponential``."""
    k = _check_key("exponential", key)
    d = _float_dtype("exponential", dtype)
    return _exponential(k, _canonical_shape("exponential", shape), d)


@core_jit(static_argnums=(1, 2))
def _laplace(k: Any, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    lo = -1.0 + float(_finfo(dtype).epsneg)
    u = _uniform_core(k, lo, 1.0, shape, dtype)
    return lax.mul(lax.sign(u), lax.log1p(lax.neg(lax.abs(u))))


@sharded_sampler
def laplace(key: Any, shape: Any = (), dtype: Any = None) -> Any:
    """Standard Laplace floats, as JAX's ``random.laplace``."""
    k = _check_key("laplace", key)
    d = _float_dtype("laplace", dtype)
    return _laplace(k, _canonical_shape("laplace", shape), d)


@core_jit(static_argnums=(1, 2))
def _logistic(k: Any, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    x = _uniform_core(k, float(_finfo(dtype).tiny), 1.0, shape, dtype)
    return lax.sub(lax.log(x), lax.log1p(lax.neg(x)))


@sharded_sampler
def logistic(key: Any, shape: Any = (), dtype: Any = None) -> Any:
    """Standard logistic floats, as JAX's ``random.logistic``."""
    k = _check_key("logistic", key)
    d = _float_dtype("logistic", dtype)
    return _logistic(k, _canonical_shape("logistic", shape), d)


@core_jit(static_argnums=(1, 2))
def _cauchy(k: Any, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    u = _uniform_core(k, float(_finfo(dtype).eps), 1.0, shape, dtype)
    return lax.tan(lax.mul(_c(np.pi, dtype), lax.sub(u, _c(0.5, dtype))))


@sharded_sampler
def cauchy(key: Any, shape: Any = (), dtype: Any = None) -> Any:
    """Standard Cauchy floats, as JAX's ``random.cauchy``."""
    k = _check_key("cauchy", key)
    d = _float_dtype("cauchy", dtype)
    return _cauchy(k, _canonical_shape("cauchy", shape), d)


def _rademacher_core(k: Any, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    # bernoulli(key, 0.5): a default-float uniform below one half.
    b = lax.lt(_uniform_core(k, 0.0, 1.0, shape, dtypes.default_float()),
               _c(0.5, dtypes.default_float()))
    b = _convert(b, dtype)
    return (2 * b - 1).astype(dtype)


_rademacher = core_jit(_rademacher_core, static_argnums=(1, 2))


@sharded_sampler
def rademacher(key: Any, shape: Any = (), dtype: Any = None) -> Any:
    """-1 or +1 with equal probability, as JAX's ``random.rademacher`` (integers by default)."""
    k = _check_key("rademacher", key)
    dtypes.check_requested(dtype, "random.rademacher")
    d = dtypes.default_int() if dtype is None else dtypes.to_dtype(dtype)
    if d == np.bool_ or not (d.kind in "iuf" or d == np.dtype(ml_dtypes.bfloat16)):
        raise FtransValueError(
            f"ftrans.random.rademacher: dtype must be a signed integer or float dtype, got {d.name}")
    return _rademacher(k, _canonical_shape("rademacher", shape), d)


def _maxwell_core(k: Any, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    x = _normal_real(k, (*shape, 3), dtype)
    return jnp.sqrt(jnp.sum(x * x, axis=-1))


_maxwell = core_jit(_maxwell_core, static_argnums=(1, 2))


@sharded_sampler
def maxwell(key: Any, shape: Any = (), dtype: Any = None) -> Any:
    """Maxwell-Boltzmann floats (the norm of three standard normals), as JAX's ``random.maxwell``."""
    k = _check_key("maxwell", key)
    d = _float_dtype("maxwell", dtype)
    return _maxwell(k, _canonical_shape("maxwell", shape), d)


@core_jit(static_argnums=(3, 4))
def _double_sided_maxwell(k: Any, loc: Any, scale: Any, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    km, kr = _split2(k)
    m = _maxwell_core(km, shape, dtype)
    sign = _rademacher_core(kr, shape, dtype)
    return sign * m * scale + loc


def double_sided_maxwell(key: Any, loc: Any, scale: Any, shape: Any = (), dtype: Any = None) -> Any:
    """Double-sided Maxwell floats, as JAX's ``random.double_sided_maxwell``.

    As in JAX, the output shape is ``shape + broadcast(loc, scale).shape`` (and
    twice the parameter shape when ``shape`` is empty).
    """
    k = _check_key("double_sided_maxwell", key)
    d = _float_dtype("double_sided_maxwell", dtype)
    _real_param("double_sided_maxwell", loc, scale)
    shape = _canonical_shape("double_sided_maxwell", shape)
    pshape = _broadcast_param_shapes("double_sided_maxwell", loc, scale)
    if not shape:
        shape = pshape
    return _double_sided_maxwell(k, _param(loc), _param(scale), shape + pshape, d)


@core_jit(static_argnums=(3, 4))
def _weibull_min(k: Any, scale: Any, concentration: Any, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    u = _uniform_core(k, 0.0, 1.0, shape, dtype)
    return jnp.power(-jnp.log1p(-u), 1.0 / concentration) * scale


def weibull_min(key: Any, scale: Any, concentration: Any, shape: Any = (), dtype: Any = None) -> Any:
    """Weibull floats (inverse CDF of a uniform), as JAX's ``random.weibull_min``."""
    k = _check_key("weibull_min", key)
    d = _float_dtype("weibull_min", dtype)
    _real_param("weibull_min", scale, concentration)
    shape = _canonical_shape("weibull_min", shape)
    _check_param_shape("weibull_min", shape, scale, concentration)
    return _weibull_min(k, _param(scale), _param(concentration), shape, d)


@core_jit(static_argnums=(2, 3))
def _pareto(k: Any, b: Any, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    b = _convert(b, dtype)
    return lax.exp(_exponential_core(k, shape, dtype) / b)


@sharded_sampler
def pareto(key: Any, b: Any, shape: Any = None, dtype: Any = None) -> Any:
    """Pareto floats with shape parameter ``b``, as JAX's ``random.pareto``."""
    k, d, shape = _float_sampler_args("pareto", key, dtype, shape, b)
    return _pareto(k, _param(b), shape, d)


@core_jit(static_argnums=(2, 3))
def _rayleigh(k: Any, scale: Any, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    u = _uniform_core(k, 0.0, 1.0, shape, dtype)
    scale = jnp.broadcast_to(jnp.asarray(scale).astype(dtype), shape)
    root = lax.sqrt(lax.mul(lax.log(u), _c(-2, dtype)))
    return lax.mul(scale, root)


@sharded_sampler
def rayleigh(key: Any, scale: Any, shape: Any = None, dtype: Any = None) -> Any:
    """Rayleigh floats, as JAX's ``random.rayleigh``."""
    k, d, shape = _float_sampler_args("rayleigh", key, dtype, shape, scale)
    return _rayleigh(k, _param(scale), shape, d)


@core_jit(static_argnums=(2, 3))
def _wald(k: Any, mean: Any, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    k1, k2 = _split2(k)
    mean = jnp.broadcast_to(jnp.asarray(mean).astype(dtype), shape)
    v = _normal_real(k1, shape, dtype)
    z = _uniform_core(k2, 0.0, 1.0, shape, dtype)
    y = lax.integer_pow(v, 2)
    y_sq = lax.integer_pow(y, 2)
    mean_sq = lax.integer_pow(mean, 2)
    root = lax.sqrt(4 * mean * y + mean_sq * y_sq)
    x = mean + mean_sq * y / 2 - mean / 2 * root
    return lax.select(lax.le(z, mean / (mean + x)), x, mean_sq / x)


@sharded_sampler
def wald(key: Any, mean: Any, shape: Any = None, dtype: Any = None) -> Any:
    """Wald (inverse Gaussian) floats, as JAX's ``random.wald``."""
    k, d, shape = _float_sampler_args("wald", key, dtype, shape, mean)
    return _wald(k, _param(mean), shape, d)


@core_jit(static_argnums=(4, 5))
def _triangular(k: Any, left: Any, mode: Any, right: Any, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    left = jnp.broadcast_to(_convert(left, dtype), shape)
    right = jnp.broadcast_to(_convert(right, dtype), shape)
    mode = jnp.broadcast_to(_convert(mode, dtype), shape)
    fc = (mode - left) / (right - left)
    u = _uniform_core(k, 0.0, 1.0, shape, dtype)
    out1 = left + lax.sqrt(u * (right - left) * (mode - left))
    out2 = right - lax.sqrt((1 - u) * (right - left) * (right - mode))
    return lax.select(u < fc, out1, out2)


@sharded_sampler
def triangular(key: Any, left: Any, mode: Any, right: Any, shape: Any = None, dtype: Any = None) -> Any:
    """Triangular floats on ``[left, right]`` peaking at ``mode``, as JAX's ``random.triangular``."""
    k, d, shape = _float_sampler_args("triangular", key, dtype, shape, left, mode, right)
    return _triangular(k, _param(left), _param(mode), _param(right), shape, d)


@core_jit(static_argnums=(2, 3))
def _lognormal(k: Any, sigma: Any, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    sigma = _convert(sigma, dtype)
    return lax.exp(_normal_core(k, shape, dtype) * sigma)


@sharded_sampler
def lognormal(key: Any, sigma: Any = np.float32(1), shape: Any = None, dtype: Any = None) -> Any:
    """Log-normal floats (``exp(sigma * normal)``), as JAX's ``random.lognormal``."""
    k = _check_key("lognormal", key)
    d = _float_dtype("lognormal", dtype, allow_complex=True)
    _check_arraylike("lognormal", sigma)
    shape = _shape_for("lognormal", shape, sigma)
    _check_safe_cast("lognormal", d, sigma)
    return _lognormal(k, _param(sigma), shape, d)


@core_jit(static_argnums=(2, 3))
def _geometric(k: Any, p: Any, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    (p,) = _promote_inexact(p)
    pd = np.dtype(p.dtype)
    u = _uniform_core(k, 0.0, 1.0, shape, pd)
    u = jnp.where(u == 0, 1, u)  # JAX maps u = 0 to 1 so the log stays finite
    log_u = lax.log(u)
    log_q = jnp.broadcast_to(lax.log1p(-p), shape)
    g = lax.floor(lax.div(log_u, log_q)) + 1
    return g.astype(dtype)


@sharded_sampler
def geometric(key: Any, p: Any, shape: Any = None, dtype: Any = None) -> Any:
    """Geometric integers (trials up to the first success), as JAX's ``random.geometric``."""
    k = _check_key("geometric", key)
    d = _int_dtype("geometric", dtype)
    _real_param("geometric", p)
    shape = _shape_for("geometric", shape, p)
    return _geometric(k, _param(p), shape, d)


# ---------------------------------------------------------------- gamma (Marsaglia and Tsang)
def _gamma_one(k: Any, alpha: Any, log_space: bool) -> Any:
    """One Gamma(alpha, 1) sample (or its log) from the key ``k``; scalars."""
    d = np.dtype(alpha.dtype)
    zero, one, two, minus_one = _c(0, d), _c(1, d), _c(2, d), _c(-1, d)
    half, third, squeeze = _c(0.5, d), _c(1.0 / 3.0, d), _c(0.0331, d)
    # alpha < 1 samples Gamma(alpha + 1) * U**(1/alpha).
    boost_mask = lax.ge(alpha, one)
    alpha_orig = alpha
    alpha = lax.select(boost_mask, alpha, lax.add(alpha, one))
    dd = lax.sub(alpha, third)
    c = lax.div(third, lax.sqrt(dd))

    def reject(state):
        _, x2, v3, u = state
        return lax.bitwise_and(
            lax.ge(u, lax.sub(one, lax.mul(squeeze, lax.mul(x2, x2)))),
            lax.ge(lax.log(u), lax.add(lax.mul(x2, half),
                                       lax.mul(dd, lax.add(lax.sub(one, v3), lax.log(v3))))))

    def propose(state):
        ks = _prng.split(state[0], (3,))
        key, x_key, u_key = ks[0], ks[1], ks[2]

        def next_normal(kxv):
            nk, sub = _split2(kxv[0])
            x = _normal_real(sub, (), d)
            return nk, x, lax.add(one, lax.mul(x, c))

        _, x, v = lax.while_loop(lambda kxv: lax.le(kxv[2], zero), next_normal,
                                 (x_key, *_vary_like((zero, minus_one), x_key, c)))
        return key, lax.mul(x, x), lax.mul(lax.mul(v, v), v), _uniform_core(u_key, 0.0, 1.0, (), d)

    key, sub = _split2(k)
    # The initial state makes ``reject`` true, so the loop proposes at least once.
    _, _, v3, _ = lax.while_loop(reject, propose, (key, *_vary_like((zero, one, two), key, dd)))
    if log_space:
        log_u = lax.neg(_exponential_core(sub, (), d))
        log_boost = lax.select(lax.bitwise_or(boost_mask, lax.eq(log_u, zero)), zero,
                               lax.mul(log_u, lax.div(one, alpha_orig)))
        return lax.add(lax.add(lax.log(dd), lax.log(v3)), log_boost)
    u = 1 - _uniform_core(sub, 0.0, 1.0, (), d)
    boost = lax.select(boost_mask, one, lax.pow(u, lax.div(one, alpha_orig)))
    return lax.mul(lax.mul(dd, v3), boost)


def _phys_gamma(impl: Any, keys: Any, a: Any, *, log_space: bool) -> Any:
    """``random_gamma`` on key data: ``keys`` (``uint32``, the key shape trailing) leads ``a``'s shape; each
    key is split into one key per element of the rest of ``a``, and every element is drawn alone (mapped by
    ``vmap`` for threefry2x32, one at a time in a loop for the other implementations, as JAX's lowering)."""
    shape = tuple(shape_of(a))
    nk = len(shape_of(keys)) - len(impl.key_shape)
    m, n = math.prod(shape[:nk]), math.prod(shape[nk:])
    if m * n == 0:
        return jnp.zeros(shape, a.dtype)
    one = lambda kk, aa: _gamma_one(kk, aa, log_space)  # noqa: E731
    with _prng._impl_scope(impl):
        ks = lax.reshape(keys, (m, *impl.key_shape))
        if m == 1:
            ks = impl.split(lax.reshape(ks, tuple(impl.key_shape)), (n,))
        else:
            # a batched split (so unsafe_rbg's draws come from the batch's first key, as its bit generator batches)
            ks = vmap(lambda kk: impl.split(kk, (n,)))(ks)
        ks = lax.reshape(ks, (m * n, *impl.key_shape))
        alphas = lax.reshape(a, (m * n,))
        if impl is _prng.threefry_prng_impl:
            flat = vmap(one)(ks, alphas)
        else:
            # one element at a time: under vmap, an RngBitGenerator key would draw every element's bits
            # (from the first key of the batch).
            flat = lax.map(lambda ka: one(*ka), (ks, alphas))
    return lax.reshape(flat, shape)


def _any(pred: Any) -> Any:
    return jnp.any(pred)


def _gamma_cdf_series_dx(ax: Any, x: Any, a: Any, enabled: Any, d: np.dtype) -> Any:
    """d sample / d a where the power series of the lower incomplete gamma converges (x <= max(1, a))."""
    eps = _c(_finfo(d).eps, d)

    def body(vals):
        en, r, c, ans, xx, dc_da, dans_da = vals
        r = r + _c(1, d)
        dc_da = dc_da * (xx / r) - (c * xx) / (r * r)
        dans_da = dans_da + dc_da
        c = c * (xx / r)
        ans = ans + c
        cont = lax.bitwise_and(en, lax.abs(dc_da / dans_da) > eps)
        return (cont, lax.select(en, r, vals[1]), lax.select(en, c, vals[2]),
                lax.select(en, ans, vals[3]), lax.select(en, xx, vals[4]),
                lax.select(en, dc_da, vals[5]), lax.select(en, dans_da, vals[6]))

    ones, zeros = jnp.ones_like(a), jnp.zeros_like(a)
    vals = lax.while_loop(lambda v: _any(v[0]), body, (enabled, a, ones, ones, x, zeros, zeros))
    ans, dans_da = vals[3], vals[6]
    dlogax_da = lax.log(x) - lax.digamma(a + _c(1, d))
    return -(dans_da + ans * dlogax_da) * x / a


def _gamma_cdf_cf_dx(ax: Any, x: Any, a: Any, enabled: Any, d: np.dtype) -> Any:
    """d sample / d a from the continued fraction of the upper incomplete gamma (x > max(1, a))."""
    eps = _c(_finfo(d).eps, d)
    sel = lax.select

    def cond(vals):
        return lax.bitwise_and(vals[5] < _c(2000, d), _any(vals[0]))

    def body(vals):
        (en, ans, t, y, z, c, pkm1, qkm1, pkm2, qkm2,
         dpkm2_da, dqkm2_da, dpkm1_da, dqkm1_da, dans_da) = vals
        c = c + _c(1, d)
        y = y + _c(1, d)
        z = z + _c(2, d)
        yc = y * c
        pk = pkm1 * z - pkm2 * yc
        qk = qkm1 * z - qkm2 * yc
        nonzero = lax.ne(qk, _c(0, d))
        r = pk / qk
        t = sel(nonzero, lax.abs(lax.div(lax.sub(ans, r), r)), jnp.ones_like(r))
        ans = sel(nonzero, r, ans)
        dpk_da = dpkm1_da * z - pkm1 - dpkm2_da * yc + pkm2 * c
        dqk_da = dqkm1_da * z - qkm1 - dqkm2_da * yc + qkm2 * c
        dans_da_new = sel(nonzero, lax.div(dpk_da - ans * dqk_da, qk), dans_da)
        grad_cond = sel(nonzero, lax.abs(dans_da_new - dans_da), jnp.ones_like(dans_da))
        pkm2, pkm1, qkm2, qkm1 = pkm1, pk, qkm1, qk
        dpkm2_da, dqkm2_da, dpkm1_da, dqkm1_da = dpkm1_da, dqkm1_da, dpk_da, dqk_da
        # Rescale when the convergents grow past 1/eps.
        rescale = lax.gt(lax.abs(pk), _c(1, d) / eps)
        pkm2 = sel(rescale, lax.mul(pkm2, eps), pkm2)
        pkm1 = sel(rescale, lax.mul(pkm1, eps), pkm1)
        qkm2 = sel(rescale, lax.mul(qkm2, eps), qkm2)
        qkm1 = sel(rescale, lax.mul(qkm1, eps), qkm1)
        dpkm2_da = sel(rescale, lax.mul(dpkm2_da, eps), dpkm2_da)
        dqkm2_da = sel(rescale, lax.mul(dqkm2_da, eps), dqkm2_da)
        dpkm1_da = sel(rescale, lax.mul(dpkm1_da, eps), dpkm1_da)
        dqkm1_da = sel(rescale, lax.mul(dqkm1_da, eps), dqkm1_da)
        cont = lax.bitwise_and(en, grad_cond > eps)
        return (cont, sel(en, ans, vals[1]), sel(en, t, vals[2]), sel(en, y, vals[3]),
                sel(en, z, vals[4]), c, sel(en, pkm1, vals[6]), sel(en, qkm1, vals[7]),
                sel(en, pkm2, vals[8]), sel(en, qkm2, vals[9]), sel(en, dpkm2_da, vals[10]),
                sel(en, dqkm2_da, vals[11]), sel(en, dpkm1_da, vals[12]), sel(en, dqkm1_da, vals[13]),
                sel(en, dans_da_new, vals[14]))

    y = _c(1, d) - a
    z = x + y + _c(1, d)
    c = _c(0, d)
    pkm2 = jnp.ones_like(x)
    qkm2 = x
    pkm1 = x + _c(1, d)
    qkm1 = z * x
    ans = pkm1 / qkm1
    t = jnp.ones_like(x)
    zeros = jnp.zeros_like(x)
    dqkm1_da = -x
    dans_da = (zeros - ans * dqkm1_da) / qkm1
    vals = lax.while_loop(cond, body, (enabled, ans, t, y, z, c, pkm1, qkm1, pkm2, qkm2,
                                       zeros, zeros, zeros, dqkm1_da, dans_da))
    ans, dans_da = vals[1], vals[14]
    dlogax_da = lax.log(x) - lax.digamma(a)
    return lax.neg(lax.add(dans_da, lax.mul(ans, dlogax_da)) * x)


def _random_gamma_grad(a: Any, x: Any) -> Any:
    """d x / d a for a sample ``x`` of Gamma(a, 1) (implicit reparameterisation)."""
    d0 = np.dtype(a.dtype)
    up = d0 in (np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16))
    if up:
        a = _convert(a, np.float32)
        x = _convert(x, np.float32)
    d = np.dtype(a.dtype)
    zero = _c(0, d)
    is_nan = lax.bitwise_or(lax.ne(a, a), lax.ne(x, x))
    x_is_zero = lax.eq(x, zero)
    domain_error = lax.bitwise_or(lax.lt(x, zero), lax.le(a, zero))
    use_cf = lax.bitwise_and(lax.gt(x, _c(1, d)), lax.gt(x, a))
    ax = a * lax.log(x) - x - lax.lgamma(a)
    underflow = lax.lt(ax, -np.log(_finfo(d).max).astype(d))
    ax = lax.exp(ax)
    enabled = lax.bitwise_not(lax.bitwise_or(lax.bitwise_or(lax.bitwise_or(x_is_zero, domain_error),
                                                            underflow), is_nan))
    out = lax.select(use_cf,
                     -_gamma_cdf_cf_dx(ax, x, a, lax.bitwise_and(enabled, use_cf), d),
                     _gamma_cdf_series_dx(ax, x, a, lax.bitwise_and(enabled, lax.bitwise_not(use_cf)), d))
    out = lax.select(x_is_zero, jnp.zeros_like(out), out)
    out = lax.select(lax.bitwise_or(domain_error, is_nan), jnp.full_like(a, np.nan), out)
    return _convert(out, d0) if up else out


def _gamma_grad(sample: Any, a: Any, log_space: bool) -> Any:
    if log_space:
        # d log(x) = dx / x; exp(log x) may round to 0, which becomes the smallest normal.
        x = lax.exp(sample)
        x = lax.select(lax.eq(x, _c(0, np.dtype(x.dtype))),
                       jnp.full_like(x, _finfo(np.dtype(x.dtype)).tiny), x)
        return _random_gamma_grad(a, x) / x
    return _random_gamma_grad(a, sample)


R.physical[R.random_gamma_p] = _phys_gamma
R.derivatives[R.random_gamma_p] = _gamma_grad


def _random_gamma(k: Any, a: Any, log_space: bool) -> Any:
    """JAX's ``random_gamma`` primitive on the key ``k`` (key data is typed first) and the parameters ``a``."""
    if not _prng.is_key_value(k):
        k = R.random_wrap_p.bind(k, impl=_prng.impl_of_key(k))
    return R.random_gamma_p.bind(k, a, log_space=log_space)


def _gamma_core(k: Any, a: Any, shape: tuple[int, ...], dtype: np.dtype, log_space: bool) -> Any:
    a = _convert(a, dtype)
    if tuple(shape_of(a)) != shape:
        a = jnp.broadcast_to(a, shape)
    return _random_gamma(k, a, log_space)


_gamma = core_jit(_gamma_core, static_argnums=(2, 3, 4), name="_gamma")


def _gamma_public(name: str, key: Any, a: Any, shape: Any, dtype: Any, log_space: bool) -> Any:
    k = _check_key(name, key)
    d = _float_dtype(name, dtype)
    _real_param(name, a)
    if shape is None:
        shape = tuple(shape_of(a))
    else:
        shape = _canonical_shape(name, shape)
        _check_param_shape(name, shape, a)
    return _gamma(k, _param(a), shape, d, log_space)


@sharded_sampler
def gamma(key: Any, a: Any, shape: Any = None, dtype: Any = None, *, method: str = "exact") -> Any:
    """Gamma(a, 1) floats by Marsaglia and Tsang's method, as JAX's ``random.gamma``.

    Differentiable in ``a`` by implicit reparameterisation (as in JAX).
    """
    _check_method("gamma", method)
    return _gamma_public("gamma", key, a, shape, dtype, False)


@sharded_sampler
def loggamma(key: Any, a: Any, shape: Any = None, dtype: Any = None, *, method: str = "exact") -> Any:
    """The log of Gamma(a, 1) floats, computed in log space (accurate for small ``a``), as JAX's
    ``random.loggamma``."""
    _check_method("loggamma", method)
    return _gamma_public("loggamma", key, a, shape, dtype, True)


@core_jit(static_argnums=(3, 4))
def _beta(k: Any, a: Any, b: Any, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    a = _convert(a, dtype)
    b = _convert(b, dtype)
    ka, kb = _split2(k)
    a = jnp.broadcast_to(a, shape)
    b = jnp.broadcast_to(b, shape)
    log_ga = _gamma_core(ka, a, shape, dtype, True)
    log_gb = _gamma_core(kb, b, shape, dtype, True)
    # gamma_a / (gamma_a + gamma_b) scaled by the larger of the two, so neither underflows.
    log_max = lax.max(log_ga, log_gb)
    ga = jnp.exp(log_ga - log_max)
    gb = jnp.exp(log_gb - log_max)
    return ga / (ga + gb)


@sharded_sampler
def beta(key: Any, a: Any, b: Any, shape: Any = None, dtype: Any = None, *, method: str = "exact") -> Any:
    """Beta(a, b) floats from two log-gamma draws, as JAX's ``random.beta``; differentiable in a, b."""
    k = _check_key("beta", key)
    _check_method("beta", method)
    d = _float_dtype("beta", dtype)
    _real_param("beta", a, b)
    _check_safe_cast("beta", d, a, b)
    shape = _shape_for("beta", shape, a, b)
    return _beta(k, _param(a), _param(b), shape, d)


def _softmax_last(x: Any) -> Any:
    e = jnp.exp(x - lax.stop_gradient(jnp.max(x, axis=-1, keepdims=True)))
    return e / jnp.sum(e, axis=-1, keepdims=True)


@core_jit(static_argnums=(2, 3))
def _dirichlet(k: Any, alpha: Any, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    alpha = _convert(alpha, dtype)
    # Log space keeps small concentrations from underflowing to 0/0.
    log_g = _gamma_core(k, alpha, shape + tuple(shape_of(alpha))[-1:], dtype, True)
    return _softmax_last(log_g)


@sharded_sampler
def dirichlet(key: Any, alpha: Any, shape: Any = None, dtype: Any = None) -> Any:
    """Dirichlet(alpha) vectors along the last axis, as JAX's ``random.dirichlet``; differentiable in alpha."""
    k = _check_key("dirichlet", key)
    d = _float_dtype("dirichlet", dtype)
    _real_param("dirichlet", alpha)
    ashape = tuple(shape_of(alpha))
    if not ashape:
        raise FtransValueError(
            "ftrans.random.dirichlet: alpha must be at least 1-dimensional (the last axis holds the "
            "concentrations of one distribution), got a scalar")
    if shape is None:
        shape = ashape[:-1]
    else:
        shape = _canonical_shape("dirichlet", shape)
        try:
            ok = tuple(np.broadcast_shapes(shape, ashape[:-1])) == shape
        except ValueError:
            ok = False
        if not ok:
            raise FtransValueError(
                f"ftrans.random.dirichlet: alpha's batch shape {ashape[:-1]} (alpha.shape[:-1] of "
                f"{ashape}) must broadcast to the shape argument {shape}")
    return _dirichlet(k, _param(alpha), shape, d)


@core_jit(static_argnums=(2, 3))
def _t(k: Any, df: Any, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    df = _convert(df, dtype)
    kn, kg = _split2(k)
    n = _normal_real(kn, shape, dtype)
    half_df = lax.div(df, _c(2, dtype))
    g = _gamma_core(kg, half_df, shape, dtype, False)
    return n * jnp.sqrt(half_df / g)


@sharded_sampler
def t(key: Any, df: Any, shape: Any = None, dtype: Any = None) -> Any:
    """Student's t floats with ``df`` degrees of freedom, as JAX's ``random.t``."""
    k, d, shape = _float_sampler_args("t", key, dtype, shape, df)
    return _t(k, _param(df), shape, d)


def _chisquare_core(k: Any, df: Any, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    df = _convert(df, dtype)
    two = _c(2, dtype)
    log_g = _gamma_core(k, lax.div(df, two), shape, dtype, True)
    return lax.mul(jnp.exp(log_g), two)


_chisquare = core_jit(_chisquare_core, static_argnums=(2, 3))


@sharded_sampler
def chisquare(key: Any, df: Any, shape: Any = None, dtype: Any = None, *, method: str = "exact") -> Any:
    """Chi-square floats with ``df`` degrees of freedom, as JAX's ``random.chisquare``."""
    _check_method("chisquare", method)
    k, d, shape = _float_sampler_args("chisquare", key, dtype, shape, df)
    return _chisquare(k, _param(df), shape, d)


@core_jit(static_argnums=(3, 4))
def _f(k: Any, dfnum: Any, dfden: Any, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    dfden = _convert(dfden, dtype)
    dfnum = _convert(dfnum, dtype)
    k_den, k_num = _split2(k)
    num = lax.div(_chisquare_core(k_num, dfnum, shape, dtype), dfnum)
    den = lax.div(_chisquare_core(k_den, dfden, shape, dtype), dfden)
    return lax.div(num, den)


@sharded_sampler
def f(key: Any, dfnum: Any, dfden: Any, shape: Any = None, dtype: Any = None) -> Any:
    """F-distributed floats, as JAX's ``random.f``."""
    k, d, shape = _float_sampler_args("f", key, dtype, shape, dfnum, dfden)
    return _f(k, _param(dfnum), _param(dfden), shape, d)


def _generalized_normal_core(k: Any, p: Any, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    k1, k2 = _split2(k)
    g = _gamma_core(k1, 1 / p, shape, dtype, False)
    r = _rademacher_core(k2, shape, dtype)
    return r * g ** (1 / p)


_generalized_normal = core_jit(_generalized_normal_core, static_argnums=(2, 3))


@sharded_sampler
def generalized_normal(key: Any, p: Any, shape: Any = (), dtype: Any = None) -> Any:
    """Generalized normal floats (density proportional to ``exp(-|x|**p)``), as JAX's
    ``random.generalized_normal``."""
    k = _check_key("generalized_normal", key)
    d = _float_dtype("generalized_normal", dtype)
    _real_param("generalized_normal", p)
    shape = _canonical_shape("generalized_normal", shape)
    _check_param_shape("generalized_normal", shape, p)
    return _generalized_normal(k, _param(p), shape, d)


@core_jit(static_argnums=(2, 3, 4))
def _ball(k: Any, p: Any, dim: int, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    k1, k2 = _split2(k)
    g = _generalized_normal_core(k1, p, (*shape, dim), dtype)
    e = _exponential_core(k2, shape, dtype)
    return g / (((jnp.abs(g) ** p).sum(-1) + e) ** (1 / p))[..., None]


@sharded_sampler
def ball(key: Any, d: int, p: float = 2, shape: Any = (), dtype: Any = None) -> Any:
    """Points uniform in the unit ``p``-norm ball of dimension ``d``, as JAX's ``random.ball``."""
    k = _check_key("ball", key)
    dt = _float_dtype("ball", dtype)
    shape = _canonical_shape("ball", shape)
    dim = _static_int("ball", "the dimension d", d)
    if dim < 0:
        raise FtransValueError(f"ftrans.random.ball: the dimension d must be non-negative, got {dim}")
    _real_param("ball", p)
    if shape_of(p):
        raise FtransValueError(f"ftrans.random.ball: p must be a scalar, got shape {tuple(shape_of(p))}")
    return _ball(k, _param(p), dim, shape, dt)


# ---------------------------------------------------------------- poisson
def _poisson_knuth(k: Any, lam: Any, shape: tuple[int, ...], dtype: np.dtype, max_iters: Any) -> Any:
    f32 = np.dtype(np.float32)

    def body(carry):
        i, n, key, log_prod = carry
        key, sub = _split2(key)
        n = lax.select(log_prod > -lam, n + 1, n)
        u = _uniform_core(sub, 0.0, 1.0, shape, f32)
        return i + 1, n, key, log_prod + jnp.log(u)

    def cond(carry):
        i, log_prod = carry[0], carry[3]
        return jnp.any(log_prod > -lam) & (i < max_iters)

    init = (np.int32(0), jnp.zeros(shape, dtype), k, jnp.zeros(shape, f32))
    n = lax.while_loop(cond, body, init)[1]
    return (n - 1).astype(dtype)


def _poisson_rejection(k: Any, lam: Any, shape: tuple[int, ...], dtype: np.dtype, max_iters: Any) -> Any:
    # Hormann's transformed rejection with squeeze (PTRS).
    ld = np.dtype(lam.dtype)
    log_lam = lax.log(lam)
    b = 0.931 + 2.53 * lax.sqrt(lam)
    a = -0.059 + 0.02483 * b
    inv_alpha = 1.1239 + 1.1328 / (b - 3.4)
    v_r = 0.9277 - 3.6224 / (b - 2)

    def body(carry):
        i, k_out, accepted, key = carry
        ks = _prng.split(key, (3,))
        key = ks[0]
        u = _uniform_core(ks[1], 0.0, 1.0, shape, ld) - 0.5
        v = _uniform_core(ks[2], 0.0, 1.0, shape, ld)
        u_shifted = 0.5 - abs(u)
        kk = lax.floor((2 * a / u_shifted + b) * u + lam + 0.43)
        s = lax.log(v * inv_alpha / (a / (u_shifted * u_shifted) + b))
        tt = -lam + kk * log_lam - lax.lgamma(kk + 1)
        accept1 = (u_shifted >= 0.07) & (v <= v_r)
        reject = (kk < 0) | ((u_shifted < 0.013) & (v > u_shifted))
        accept2 = s <= tt
        accept = accept1 | (~reject & accept2)
        k_out = lax.select(accept, kk, k_out)
        return i + 1, k_out, accepted | accept, key

    def cond(carry):
        i, _, accepted, _ = carry
        return jnp.any(~accepted) & (i < max_iters)

    init = (np.int32(0), jnp.full(shape, -1, ld), jnp.zeros(shape, bool), k)
    return lax.while_loop(cond, body, init)[1].astype(dtype)


@core_jit(static_argnums=(2, 3))
def _poisson(k: Any, lam: Any, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    lam = _convert(jnp.broadcast_to(lam, shape), np.float32)
    # Knuth's method for lam < 10 (and NaN), transformed rejection above, as TensorFlow and NumPy.
    use_knuth = lax.ne(lam, lam) | (lam < 10)
    lam_knuth = lax.select(use_knuth, lam, jnp.zeros_like(lam))
    lam_rej = lax.select(use_knuth, jnp.full_like(lam, 1e5), lam)
    max_iters = np.asarray(np.iinfo(dtype).max, dtype)
    out = lax.select(use_knuth,
                     _poisson_knuth(k, lam_knuth, shape, dtype, max_iters),
                     _poisson_rejection(k, lam_rej, shape, dtype, max_iters))
    return lax.select(lam == 0, jnp.zeros_like(out), out)


@sharded_sampler
def poisson(key: Any, lam: Any, shape: Any = None, dtype: Any = None, *, method: str = "exact") -> Any:
    """Poisson(lam) integers, as JAX's ``random.poisson`` (rates are computed in float32)."""
    k = _check_key("poisson", key)
    _check_method("poisson", method)
    impl = _prng.impl_of_key(k).name
    if impl != "threefry2x32":
        raise NotImplementedError(
            f"ftrans.random.poisson: poisson is only implemented for the threefry2x32 PRNG, not {impl} "
            "(as in JAX)")
    d = _int_dtype("poisson", dtype)
    _real_param("poisson", lam)
    if shape is None:
        shape = tuple(shape_of(lam))
    else:
        shape = _canonical_shape("poisson", shape)
        _check_param_shape("poisson", shape, lam)
    return _poisson(k, _param(lam), shape, d)


# ---------------------------------------------------------------- binomial and multinomial
_STIRLING_TAIL = np.array([
    0.0810614667953272, 0.0413406959554092, 0.0276779256849983, 0.02079067210376509,
    0.0166446911898211, 0.0138761288230707, 0.0118967099458917, 0.0104112652619720,
    0.00925546218271273, 0.00833056343336287])


def _stirling_tail(k: Any) -> Any:
    """``log k! - (k + 1/2) log(k + 1) + (k + 1) - log(2 pi)/2``: a table below 10, a series above."""
    d = np.dtype(k.dtype)
    small = k <= 9
    k = lax.clamp(_c(0.0, d), k, _c(9.0, d))
    kp1sq = (k + 1) * (k + 1)
    approx = (1.0 / 12 - (1.0 / 360 - 1.0 / 1260 / kp1sq) / kp1sq) / (k + 1)
    k = jnp.floor(k)
    return lax.select(small, jnp.asarray(_STIRLING_TAIL.astype(d))[k.astype(np.int32)], approx)


def _binomial_inversion(k: Any, count: Any, prob: Any, shape: tuple[int, ...], dtype: np.dtype,
                        max_iters: Any) -> Any:
    pd = np.dtype(prob.dtype)
    log1mp = jnp.log1p(-prob)

    def body(carry):
        i, num_geom, geom_sum, key = carry
        ks = _prng.split(key, (2,))
        sub, key = ks[0], ks[1]
        num_geom_out = lax.select(geom_sum <= count, num_geom + 1, num_geom)
        u = _uniform_core(sub, 0.0, 1.0, shape, pd)
        geom = jnp.ceil(jnp.log(u) / log1mp)
        return i + 1, num_geom_out, geom_sum + geom, key

    def cond(carry):
        i, geom_sum = carry[0], carry[2]
        return jnp.any(geom_sum <= count) & (i < max_iters)

    init = (np.int32(0), jnp.zeros(shape, pd), jnp.zeros(shape, pd), k)
    n = lax.while_loop(cond, body, init)[1]
    return (n - 1).astype(dtype)


def _btrs(k: Any, count: Any, prob: Any, shape: tuple[int, ...], dtype: np.dtype, max_iters: Any) -> Any:
    # Hormann's transformed rejection for the binomial (BTRS).
    pd = np.dtype(prob.dtype)
    stddev = jnp.sqrt(count * prob * (1 - prob))
    b = 1.15 + 2.53 * stddev
    a = -0.0873 + 0.0248 * b + 0.01 * prob
    c = count * prob + 0.5
    v_r = 0.92 - 4.2 / b
    r = prob / (1 - prob)
    alpha = (2.83 + 5.1 / b) * stddev
    m = jnp.floor((count + 1) * prob)

    def body(carry):
        i, k_out, accepted, key = carry
        ks = _prng.split(key, (3,))
        key = ks[0]
        u = _uniform_core(ks[1], 0.0, 1.0, shape, pd)
        v = _uniform_core(ks[2], 0.0, 1.0, shape, pd)
        u = u - 0.5
        us = 0.5 - jnp.abs(u)
        accept1 = (us >= 0.07) & (v <= v_r)
        kk = jnp.floor((2 * a / us + b) * u + c)
        reject = (kk < 0) | (kk > count)
        v = jnp.log(v * alpha / (a / (us * us) + b))
        ub = ((m + 0.5) * jnp.log((m + 1) / (r * (count - m + 1)))
              + (count + 1) * jnp.log((count - m + 1) / (count - kk + 1))
              + (kk + 0.5) * jnp.log(r * (count - kk + 1) / (kk + 1))
              + _stirling_tail(m) + _stirling_tail(count - m)
              - _stirling_tail(kk) - _stirling_tail(count - kk))
        accept = accept1 | (~reject & (v <= ub))
        return i + 1, lax.select(accept, kk, k_out), accepted | accept, key

    def cond(carry):
        i, accepted = carry[0], carry[2]
        return jnp.any(~accepted) & (i < max_iters)

    init = (np.int32(0), jnp.full(shape, -1, pd), jnp.zeros(shape, bool), k)
    return lax.while_loop(cond, body, init)[1].astype(dtype)


def _binomial_core(k: Any, count: Any, prob: Any, shape: tuple[int, ...] | None, dtype: np.dtype) -> Any:
    if shape is None:
        shape = tuple(np.broadcast_shapes(tuple(shape_of(count)), tuple(shape_of(prob))))
    (prob,) = _promote_inexact(prob)
    pd = np.dtype(prob.dtype)
    count = _convert(count, pd)
    count = jnp.broadcast_to(count, shape)
    prob = jnp.broadcast_to(prob, shape)
    p_lt_half = prob < 0.5
    q = lax.select(p_lt_half, prob, 1.0 - prob)
    count_bad = lax.ne(count, count) | (count < 0.0)
    count_inf = jnp.isinf(count)
    q_nan = lax.ne(q, q)
    q_neg = q < 0.0
    q = lax.select(q_nan | q_neg, jnp.full_like(q, 0.01), q)
    use_inversion = count_bad | (count * q <= 10.0)
    count = jnp.floor(count)  # float counts round down, as NumPy's binomial does
    count_inv = lax.select(use_inversion, count, jnp.zeros_like(count))
    count_btrs = lax.select(use_inversion, jnp.full_like(count, 1e4), count)
    q_btrs = lax.select(use_inversion, jnp.full_like(q, 0.5), q)
    # JAX bounds the loops by the output dtype's largest value: in effect unbounded.
    max_iters = np.int32(np.iinfo(np.int32).max)
    samples = lax.select(use_inversion,
                         _binomial_inversion(k, count_inv, q, shape, dtype, max_iters),
                         _btrs(k, count_btrs, q_btrs, shape, dtype, max_iters))
    invalid = q_neg | q_nan | count_bad
    samples = lax.select(invalid, jnp.full_like(samples, np.nan), samples)
    samples = lax.select(count_inf & ~invalid, jnp.full_like(samples, np.inf), samples)
    return lax.select(p_lt_half | count_bad | q_nan | count_inf, samples, count.astype(dtype) - samples)


_binomial = core_jit(_binomial_core, static_argnums=(3, 4))


def binomial(key: Any, n: Any, p: Any, shape: Any = None, dtype: Any = None) -> Any:
    """Binomial(n, p) counts as floats, as JAX's ``random.binomial`` (inversion for ``n*p <= 10``,
    BTRS above)."""
    k = _check_key("binomial", key)
    _real_param("binomial", n, p)
    d = _float_dtype("binomial", dtype)
    shape = _shape_for("binomial", shape, n, p)
    return _binomial(k, _param(n), _param(p), shape, d)


@core_jit(static_argnums=(3, 4, 5))
def _multinomial(k: Any, n: Any, p: Any, shape: tuple[int, ...], dtype: np.dtype, unroll: Any) -> Any:
    n, p = _promote_inexact(n, p)
    n = jnp.broadcast_to(n, shape[:-1])
    p = jnp.broadcast_to(p, shape)
    p = jnp.moveaxis(p, -1, 0)
    remaining = lax.cumsum(p, 0, reverse=True)
    ratios = p / jnp.where(remaining == 0, 1, remaining)
    keys = _prng.split(k, (shape_of(ratios)[0],))

    def step(remainder, ratio_key):
        ratio, kk = ratio_key
        count = _binomial_core(kk, remainder, jnp.clip(ratio, 0, 1), None, np.dtype(remainder.dtype))
        return remainder - count, count

    _, counts = lax.scan(step, n, (ratios, keys), unroll=unroll)
    return jnp.moveaxis(counts, 0, -1).astype(dtype)


def multinomial(key: Any, n: Any, p: Any, *, shape: Any = None, dtype: Any = None,
                unroll: int | bool = 1) -> Any:
    """Multinomial counts of ``n`` trials over the categories of ``p``'s last axis (as floats), as
    JAX's ``random.multinomial``: a scan of conditional binomials."""
    k = _check_key("multinomial", key)
    _real_param("multinomial", n, p)
    pshape = tuple(shape_of(p))
    if not pshape:
        raise FtransValueError(
            "ftrans.random.multinomial: p must be at least 1-dimensional (the last axis holds the "
            "category probabilities), got a scalar")
    d = _float_dtype("multinomial", dtype)
    if shape is None:
        shape = pshape
    else:
        shape = _canonical_shape("multinomial", shape)
        if not shape:
            raise FtransValueError(
                "ftrans.random.multinomial: shape must include the category axis (at least 1-D), got ()")
    try:
        ok_p = tuple(np.broadcast_shapes(shape, pshape)) == shape
        ok_n = tuple(np.broadcast_shapes(shape[:-1], tuple(shape_of(n)))) == shape[:-1]
    except ValueError:
        ok_p = ok_n = False
    if not (ok_p and ok_n):
        raise FtransValueError(
            f"ftrans.random.multinomial: p of shape {pshape} must broadcast to shape {shape} and n of "
            f"shape {tuple(shape_of(n))} to shape[:-1] = {shape[:-1]}")
    return _multinomial(k, _param(n), _param(p), shape, d, unroll)


# ---------------------------------------------------------------- linear-algebra samplers
@core_jit(static_argnums=(3, 4, 5))
def _multivariate_normal(k: Any, mean: Any, cov: Any, shape: tuple[int, ...], dtype: np.dtype,
                         method: str) -> Any:
    if method == "svd":
        u, s, _ = jnp.linalg.svd(cov)
        factor = u * jnp.sqrt(s[..., None, :])
    elif method == "eigh":
        w, v = jnp.linalg.eigh(cov)
        factor = v * jnp.sqrt(w[..., None, :])
    else:
        factor = jnp.linalg.cholesky(cov)
    z = _normal_real(k, shape + tuple(shape_of(mean))[-1:], dtype)
    return mean + jnp.einsum("...ij,...j->...i", factor, z)


@sharded_sampler
def multivariate_normal(key: Any, mean: Any, cov: Any, shape: Any = None, dtype: Any = None,
                        method: str = "cholesky") -> Any:
    """Multivariate normal vectors with the given mean and covariance, as JAX's
    ``random.multivariate_normal`` (``method`` factors ``cov``: 'cholesky', 'svd' or 'eigh')."""
    k = _check_key("multivariate_normal", key)
    _real_param("multivariate_normal", mean, cov)
    mean, cov = _promote_inexact(mean, cov)
    if method not in ("svd", "eigh", "cholesky"):
        raise FtransValueError(
            f"ftrans.random.multivariate_normal: method must be 'svd', 'eigh' or 'cholesky', got {method!r}")
    d = np.dtype(mean.dtype) if dtype is None else _float_dtype("multivariate_normal", dtype)
    ms, cs = tuple(shape_of(mean)), tuple(shape_of(cov))
    if len(ms) < 1:
        raise FtransValueError("ftrans.random.multivariate_normal: mean must be at least 1-dimensional "
                               "(shape (..., n)), got a scalar")
    if len(cs) < 2 or cs[-2:] != (ms[-1], ms[-1]):
        raise FtransValueError(
            f"ftrans.random.multivariate_normal: cov must have shape (..., n, n) with n = {ms[-1]} "
            f"(mean's last axis); got mean shape {ms} and cov shape {cs}")
    if shape is None:
        try:
            shape = tuple(np.broadcast_shapes(ms[:-1], cs[:-2]))
        except ValueError:
            raise FtransValueError(
                f"ftrans.random.multivariate_normal: the batch shapes of mean {ms[:-1]} and cov "
                f"{cs[:-2]} do not broadcast together") from None
    else:
        shape = _canonical_shape("multivariate_normal", shape)
        try:
            ok = tuple(np.broadcast_shapes(shape, ms[:-1], cs[:-2])) == shape
        except ValueError:
            ok = False
        if not ok:
            raise FtransValueError(
                f"ftrans.random.multivariate_normal: the batch shapes of mean {ms[:-1]} and cov "
                f"{cs[:-2]} must broadcast to the shape argument {shape}")
    return _multivariate_normal(k, mean, cov, shape, d, method)


@core_jit(static_argnums=(1, 2, 3, 4))
def _orthogonal(k: Any, n: int, m: int, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    z = _normal_core(k, (*shape, max(n, m), min(n, m)), dtype)
    q, r = jnp.linalg.qr(z)
    dg = jnp.diagonal(r, axis1=-2, axis2=-1)
    x = q * jnp.expand_dims(jnp.sign(dg), -2)
    return jnp.swapaxes(x, -1, -2) if n < m else x


@sharded_sampler
def orthogonal(key: Any, n: int, shape: Any = (), dtype: Any = None, m: int | None = None) -> Any:
    """Haar-random ``n x m`` matrices with orthonormal columns (or rows), as JAX's ``random.orthogonal``
    (unitary for a complex ``dtype``)."""
    shape = _canonical_shape("orthogonal", shape)
    k = _check_key("orthogonal", key)
    d = _float_dtype("orthogonal", dtype, allow_complex=True)
    nn = _static_int("orthogonal", "n", n)
    mm = nn if m is None else _static_int("orthogonal", "m", m)
    if nn < 0 or mm < 0:
        raise FtransValueError(f"ftrans.random.orthogonal: n and m must be non-negative, got n={nn}, m={mm}")
    return _orthogonal(k, nn, mm, shape, d)


# ---------------------------------------------------------------- key utilities
def clone(key: Any) -> Any:
    """A copy of the key that the key-reuse checker counts as fresh (``ftrans.experimental.key_reuse``); the
    same bits as the key itself."""
    k = _check_key("clone", key, allow_batched=True, legacy_check=False)
    if not is_key(k):
        return k
    base = R.random_clone_p.bind(k._base_array) if k._typed else k._base_array
    return _kr.fresh(PRNGKeyArray(k._impl, base))


def key_impl(keys: Any) -> Any:
    """The name of the keys' PRNG implementation, as JAX's ``random.key_impl``: a typed key array's own;
    for raw data, ``'threefry2x32'`` for ``uint32[..., 2]``, ``'rbg'`` (``'unsafe_rbg'`` while that is the
    default) for ``uint32[..., 4]`` and ``'philox2x32'`` for ``uint32[..., 1]``.  A user's implementation
    (``extend.random.define_prng_impl``) has no such name: its keys answer a ``PRNGSpec`` of it, which
    ``key``/``wrap_key_data`` accept as ``impl``."""
    k = _check_key("key_impl", keys, allow_batched=True)
    impl = _prng.impl_of_key(k)
    return impl.name if _prng.is_builtin(impl) else _prng.PRNGSpec(impl)


def key_dtype(impl_spec: Any = None) -> KeyDtype:
    """The key dtype of a PRNG implementation (``key<fry>`` for threefry2x32, the default), as JAX's
    ``random.key_dtype``: the dtype of the key arrays ``random.key(seed, impl=impl_spec)`` makes."""
    return KeyDtype(_prng.resolve_impl("key_dtype", impl_spec))


def _vary_like(xs: tuple, *protos: Any) -> tuple:
    """Inside a ``shard_map`` body checked with ``check_vma``: the constants ``xs`` of a loop's initial carry,
    cast to vary along the manual axes the ``protos`` (the key, the parameters) vary along, so the carry
    keeps one type through the loop (JAX's samplers cast their inputs alike)."""
    from ftrans.transforms.shard_map import pvary_tracer, vma_of

    axes = frozenset().union(*[vma_of(p) for p in protos])
    return tuple(pvary_tracer(x, tuple(sorted(axes, key=str))) for x in xs) if axes else xs
