"""Values, first and second derivatives at special points, against jax, eagerly and under ``jit``.

Every differentiable function of ``ftrans.numpy``, ``ftrans.lax``, ``ftrans.nn``
and ``ftrans.scipy.special`` that has a counterpart in jax is evaluated at the
points where implementations usually disagree: signed zeros, ties ``(x, x)``
of binary functions, infinities, NaN, huge (``1e30``, ``3e38``) and tiny
(``1e-30``, the subnormal ``1e-45``) magnitudes and values just inside the
edges of a domain (``1 - 1e-7`` for ``arctanh``). For each function one
scalar objective ``F = sum(w * f(args))`` is formed and ``(f(args), grad F,
grad of sum(grad F))`` -- values, first derivatives and (for elementwise
functions, per element) second derivatives -- are computed in one program:
jax's under ``jax.jit``, ftrans's eagerly and under ``ftrans.jit``.

Comparisons are in float32 (x64 off). NaN equals NaN, infinities must match
in sign, finite numbers within ``rtol`` (1e-5 for values, 1e-4 for
derivatives) plus small absolute floors: float32's smallest normal (XLA flushes
subnormal results to zero, see docs/differences.md), a few ulps of the row's
input magnitude for values, 1e-6 for derivatives, and for the gradient of a
reduction ``rtol`` of its largest entry (vectors are compared normwise).
Eagerly, ftrans computes with NumPy, which keeps subnormals where XLA flushes
them (a documented difference), so eager results at subnormal inputs
(``1e-45``) are not compared; under ``jit`` they are. Every other difference
fails, except for the short list of ``SKIP`` pairs below, each with its reason.

Where jax before 0.12 gives NaN or a wrong number and ftrans (as jax 0.12) the correct value, the
oracle's entry is replaced by that value (``FIXED_IN_JAX012``: case, quantity, point, value and reason;
``ALWAYS_FIXED`` where every jax so far gives NaN); before jax 0.12, ``hypot``'s oracle is ``jnp.hypot``
with jax 0.12's derivative rule (``_hypot_012``). Under jax 0.12 only ``ALWAYS_FIXED`` applies.
"""

from __future__ import annotations

import itertools
import types

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import ftrans
import ftrans.lax as flax
import ftrans.nn as fnn
import ftrans.numpy as fnp
import ftrans.scipy.special as fsp
from tests.backend_util import host_oracle, on_cpu

F32 = np.float32
TINY = float(np.finfo(F32).tiny)
EPS = float(np.finfo(F32).eps)

FT = types.SimpleNamespace(np=fnp, lax=flax, nn=fnn, sp=fsp, linalg=fnp.linalg)
JX = types.SimpleNamespace(np=jjnp, lax=jax.lax, nn=jax.nn, sp=jax.scipy.special, linalg=jjnp.linalg)

# The special points of a unary function (float32).
UNARY_POINTS = [
    0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, 6.0, -3.0, 10.0, -10.0, 20.0, -20.0, 100.0, -100.0,
    np.inf, -np.inf, np.nan, 1e30, -1e30, 3e38, -3e38, 1e-30, -1e-30, 1e-45, -1e-45,
    1 - 1e-7, -(1 - 1e-7), 1 + 1e-7, -(1 + 1e-7), 1e-7, -1e-7,
]
# Binary functions take every pair of these (ties (x, x) included).
BINARY_POINTS = [0.0, -0.0, 1.0, -1.0, 0.5, 2.0, -3.0, np.inf, -np.inf, np.nan, 1e30, 3e38, -3e38, 1e-30, 1e-45]


def _unary_args(extra=()):
    return (np.array(UNARY_POINTS + list(extra), F32),)


def _binary_args(extra=()):
    pts = BINARY_POINTS + list(extra)
    pairs = np.array(list(itertools.product(pts, pts)), F32)
    return pairs[:, 0].copy(), pairs[:, 1].copy()


# Rows of a reduction's operand: each row is one case, reduced along the last axis.
REDUCTION_ROWS = np.array([
    [0.0, 0.0, 0.0], [-0.0, 0.0, -0.0], [1.0, 1.0, 1.0], [1.0, 2.0, 3.0], [-1.0, 0.5, 2.0],
    [np.inf, 1.0, 2.0], [-np.inf, 1.0, 2.0], [-np.inf, -np.inf, -np.inf], [np.inf, np.inf, 1.0],
    [np.inf, -np.inf, 0.0], [np.nan, 1.0, 2.0], [1e30, 1e30, 1.0], [3e38, 3e38, -3e38], [1e-30, 0.0, -1e-30],
    [1e-45, 1e-45, 0.0], [100.0, -100.0, 0.0], [3.0, 3.0, -1.0],
], F32)


class Case:
    """One function: how to get it from a namespace, its arguments, and how its output is summed."""

    def __init__(self, name, get, args, *, elementwise=True, nondiff=(), kw=None):
        self.name, self.get, self.args = name, get, args
        self.elementwise = elementwise
        self.nondiff = nondiff  # positions of integer arguments (not differentiated)
        self.kw = kw or {}

    def __repr__(self):
        return self.name


def U(name, get, extra=(), **kw):
    return Case(name, get, _unary_args(extra), **kw)


def B(name, get, extra=(), **kw):
    return Case(name, get, _binary_args(extra), **kw)


def R(name, get, **kw):
    return Case(name, get, (REDUCTION_ROWS,), elementwise=False, **kw)


def _np(n):
    return lambda M: getattr(M.np, n)


def _lax(n):
    return lambda M: getattr(M.lax, n)


def _nn(n):
    return lambda M: getattr(M.nn, n)


def _sp(n):
    return lambda M: getattr(M.sp, n)


NP_UNARY = [
    "abs", "negative", "positive", "sign", "square", "reciprocal", "sqrt", "cbrt", "exp", "exp2", "expm1",
    "log", "log2", "log10", "log1p", "sin", "cos", "tan", "arcsin", "arccos", "arctan", "sinh", "cosh",
    "tanh", "arcsinh", "arccosh", "arctanh", "deg2rad", "rad2deg", "floor", "ceil", "trunc", "rint",
    "round", "sinc", "i0", "fabs", "nan_to_num", "real", "imag", "conj", "degrees", "radians",
]
NP_BINARY = [
    "add", "subtract", "multiply", "divide", "true_divide", "floor_divide", "remainder", "mod", "fmod",
    "power", "float_power", "maximum", "minimum", "fmax", "fmin", "arctan2", "hypot", "logaddexp",
    "logaddexp2", "copysign", "heaviside",
]
LAX_UNARY = [
    "neg", "abs", "sign", "floor", "ceil", "exp", "exp2", "log", "log1p", "expm1", "tanh", "logistic", "sin",
    "cos", "tan", "sqrt", "rsqrt", "cbrt", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh",
    "erf", "erfc", "erf_inv", "lgamma", "digamma", "square",
]
LAX_BINARY = ["add", "sub", "mul", "div", "rem", "max", "min", "atan2", "pow"]
NN_UNARY = [
    "relu", "relu6", "leaky_relu", "hard_tanh", "elu", "celu", "selu", "sigmoid", "softplus", "log_sigmoid",
    "silu", "swish", "mish", "gelu", "squareplus", "soft_sign", "sparse_plus", "sparse_sigmoid",
    "hard_sigmoid", "hard_silu", "hard_swish", "log1mexp", "tanh", "identity",
]
SP_UNARY = ["gammaln", "digamma", "erf", "erfc", "erfinv", "expit", "logit", "entr", "ndtr"]
SP_BINARY = ["xlogy", "xlog1py"]

CASES = (
    [U(f"np.{n}", _np(n)) for n in NP_UNARY]
    + [B(f"np.{n}", _np(n)) for n in NP_BINARY if n != "hypot"]
    + [B("np.hypot", lambda M: _hypot_012(M))]
    + [
        Case("np.frexp", lambda M: lambda x: M.np.frexp(x)[0], _unary_args()),
        Case("np.modf", lambda M: lambda x: M.np.modf(x)[0], _unary_args()),
        Case("np.ldexp", _np("ldexp"), (np.array(UNARY_POINTS, F32), np.resize(np.arange(-3, 4, dtype=np.int32),
                                                                             len(UNARY_POINTS))), nondiff=(1,)),
        U("np.power_int2", lambda M: lambda x: M.np.power(x, 2)),
        U("np.power_int3", lambda M: lambda x: M.np.power(x, 3)),
        U("np.power_half", lambda M: lambda x: M.np.power(x, 0.5)),
        U("np.power_neg1", lambda M: lambda x: M.np.power(x, -1)),
        U("np.logaddexp_neg", lambda M: lambda x: M.np.logaddexp(x, -x)),
        U("np.logaddexp2_neg", lambda M: lambda x: M.np.logaddexp2(x, -x)),
        U("np.logaddexp_self", lambda M: lambda x: M.np.logaddexp(x, x)),
        U("np.clip", lambda M: lambda x: M.np.clip(x, -1.0, 2.0)),
        U("np.where_pos", lambda M: lambda x: M.np.where(x > 0, x, 0.0)),
    ]
    + [U(f"lax.{n}", _lax(n)) for n in LAX_UNARY]
    + [B(f"lax.{n}", _lax(n)) for n in LAX_BINARY]
    + [U(f"lax.integer_pow{y}", (lambda y: lambda M: lambda x: M.lax.integer_pow(x, y))(y))
       for y in (2, 3, -1, -2, 0, 1)]
    + [U("lax.clamp", lambda M: lambda x: M.lax.clamp(F32(-1.0), x, F32(2.0)))]
    + [U(f"nn.{n}", _nn(n)) for n in NN_UNARY]
    + [U("nn.gelu_exact", lambda M: lambda x: M.nn.gelu(x, approximate=False))]
    + [U(f"sp.{n}", _sp(n)) for n in SP_UNARY]
    + [B(f"sp.{n}", _sp(n)) for n in SP_BINARY]
    + [
        R("np.sum", lambda M: lambda x: M.np.sum(x, axis=-1)),
        R("np.prod", lambda M: lambda x: M.np.prod(x, axis=-1)),
        R("np.mean", lambda M: lambda x: M.np.mean(x, axis=-1)),
        R("np.var", lambda M: lambda x: M.np.var(x, axis=-1)),
        R("np.std", lambda M: lambda x: M.np.std(x, axis=-1)),
        R("np.max", lambda M: lambda x: M.np.max(x, axis=-1)),
        R("np.min", lambda M: lambda x: M.np.min(x, axis=-1)),
        R("np.ptp", lambda M: lambda x: M.np.ptp(x, axis=-1)),
        R("np.cumsum", lambda M: lambda x: M.np.cumsum(x, axis=-1)),
        R("np.cumprod", lambda M: lambda x: M.np.cumprod(x, axis=-1)),
        R("np.linalg.norm", lambda M: lambda x: M.linalg.norm(x, axis=-1)),
        R("np.linalg.norm1", lambda M: lambda x: M.linalg.norm(x, ord=1, axis=-1)),
        R("np.linalg.norm_inf", lambda M: lambda x: M.linalg.norm(x, ord=np.inf, axis=-1)),
        R("sp.logsumexp", lambda M: lambda x: M.sp.logsumexp(x, axis=-1)),
        R("nn.logsumexp", lambda M: lambda x: M.nn.logsumexp(x, axis=-1)),
        R("nn.softmax", lambda M: lambda x: M.nn.softmax(x, axis=-1)),
        R("nn.log_softmax", lambda M: lambda x: M.nn.log_softmax(x, axis=-1)),
        R("nn.standardize", lambda M: lambda x: M.nn.standardize(x, axis=-1)),
        R("nn.logmeanexp", lambda M: lambda x: M.nn.logmeanexp(x, axis=-1)),
        R("nn.glu", lambda M: lambda x: M.nn.glu(M.np.concatenate([x, x[:, ::-1]], axis=-1), axis=-1)),
    ]
)


# (case name, input row or None for every row) -> reason. A point listed here is excluded from the
# comparisons named in its entry ("eager", "jit" or "all").
# Elementwise cases are keyed by the input point (a float, or a pair for binary functions);
# reductions by the row index of REDUCTION_ROWS.
_ROW_EQUAL = 2  # [1, 1, 1]
_ROW_OVERFLOW = 12  # [3e38, 3e38, -3e38]
SKIP: dict[tuple[str, object], tuple[str, str]] = {
    # sinc'' at +-1e-7 is computed through sin(t)/t**3-like terms that cancel catastrophically; the
    # garbage (jax: -6.6e6, true value -3.29) depends on the last bits of sin: NumPy's are not XLA's.
    ("np.sinc", F32(1e-7).item()): ("eager", "cancellation garbage, NumPy vs XLA sin"),
    ("np.sinc", F32(-1e-7).item()): ("eager", "cancellation garbage, NumPy vs XLA sin"),
    # mish'' at 6 is a difference of nearly equal terms (tanh(softplus(6)) is 1 - 1.2e-5): a few ulps
    # of NumPy's tanh/log1p against XLA's move it by 0.5%.
    ("nn.mish", 6.0): ("eager", "cancellation, NumPy vs XLA tanh/log1p ulps"),
    # standardize of equal entries divides by sqrt(var + 1e-5) with var exactly 0 in NumPy and a few
    # ulps in XLA's mean; the derivative amplifies those ulps by 1/sqrt(1e-5)**3.
    ("nn.standardize", _ROW_EQUAL): ("eager", "zero variance: NumPy vs XLA rounding of the mean"),
    # cumprod of [3e38, 3e38, -3e38] overflows; XLA's simplifier folds a product of the overflowed
    # inf with a padded zero that NumPy evaluates as NaN. Under jit ftrans's fold_constants pass hands
    # XLA that padding as a materialised constant, so XLA no longer folds it and gives IEEE's NaN too.
    ("np.cumprod", _ROW_OVERFLOW): ("all", "overflow: inf * 0 folded by XLA's simplifier, NaN in IEEE/NumPy"),
    # cumsum of [3e38, 3e38, -3e38]: NumPy and XLA give [3e38, inf, inf]; ftrans's eager cumsum gives
    # 3e38 last (it does not carry the overflowed partial sum): a known eager gap, found when infinite
    # oracle values stopped accepting finite results (see _mismatches).
    ("np.cumsum", _ROW_OVERFLOW): ("eager", "eager cumsum after an overflow (known gap)"),
    # d/dy xlogy(x, y) = x / y, transposed by reverse mode into (ct / y) * x: 1/3e38 is subnormal,
    # kept by NumPy (x / y = 0.99999994, inf / 3e38 = inf) and flushed by XLA (0, and 0 * inf = NaN):
    # docs/differences.md, subnormals. Under jit ftrans gives JAX's values.
    **{(f, (sx * x, sy * F32(3e38).item())): ("eager", "subnormal 1/y (docs/differences.md)")
       for f in ("sp.xlogy", "sp.xlog1py") for x in (np.inf, F32(3e38).item())
       for sx in (1, -1) for sy in (1, -1)},
    # I0'(x) = I1(x) overflows float32 for |x| > ~88.7: ftrans gives +-inf, JAX's product rule
    # exp(|x|) * i0e(x) gives inf * (i1e - i0e) - inf = NaN at some of these points (documented in
    # docs/differences.md, pinned in tests/test_differences.py).
    ("np.i0", 100.0): ("all", "documented: I0' overflows to inf (jax 0.10: NaN; jax 0.11 agrees)"),
    ("np.i0", -100.0): ("all", "documented: I0' overflows to -inf (jax 0.10: NaN; jax 0.11 agrees)"),
    # I0'' at 0 is I1'(0) = 1/2 in ftrans and jax 0.11; jax 0.10's rule (I0' set to 0 at 0) gives 0
    **{("np.i0", v): ("all", "I0''(0) = 1/2, as in jax 0.11 (jax 0.10: 0)")
       for v in (0.0, float(F32(1e-45)), -float(F32(1e-45)))},
}

# Points where jax 0.10 and jax 0.11 differ: ftrans keeps one behaviour, so the other jax's is skipped there.
_F = lambda v: F32(v).item()  # noqa: E731
if jax.__version_info__ < (0, 11):
    # ftrans follows jax 0.11 here (bug fixes): acosh' = rsqrt(x - 1) rsqrt(x + 1) is NaN outside x >= 1
    # (jax 0.10's rsqrt(x**2 - 1) was finite for x <= -1, and its second derivative NaN at inf, 3e38);
    # I0''(0) = 1/2 (jax 0.10: 0); digamma(+-0) = -inf (jax 0.10: NaN; under jit XLA flushes +-1e-45 to 0).
    SKIP.update({(f, _F(p)): ("all", "jax 0.10's acosh' outside its domain") for f in ("np.arccosh", "lax.acosh")
                 for p in UNARY_POINTS if p <= -1 or p >= 3e38})
    SKIP.update({("np.i0", _F(p)): ("all", "jax 0.10's I0''(0) = 0") for p in (0.0, -0.0, 1e-45, -1e-45)})
    SKIP.update({(f, _F(p)): ("all", "jax 0.10's digamma(0) = NaN") for p in (0.0, -0.0, 1e-45, -1e-45)
                 for f in ("lax.digamma", "sp.digamma", "lax.lgamma", "sp.gammaln")})
    # sinc' at +-1e-7 is the cancellation garbage of the eager entry above (true value -3.3e-7): under jit it
    # depends on how XLA fuses the program, and jax 0.10's program (sin(pi x)/(pi x) alone) is fused otherwise.
    SKIP.update({("np.sinc", _F(p)): ("all", "cancellation garbage, XLA's fusion") for p in (1e-7, -1e-7)})
else:
    # ftrans keeps jax 0.10's atanh' = 1/(1+x) * (t/(1-x)) (second derivative NaN at +-1, 0 at +-inf; jax
    # 0.11 divides by its one_minus_square primitive: +-inf at +-1, NaN at +-inf) and sinc's (jax 0.11 gives
    # sinc(+-inf) = 0 and sums a Taylor series for |pi x| < 1, exact in the derivatives at 1e-30 and 1e-7):
    # docs/differences.md.
    SKIP.update({(f, _F(p)): ("all", "jax 0.11's atanh'' (one_minus_square)") for f in ("np.arctanh", "lax.atanh")
                 for p in (1.0, -1.0, np.inf, -np.inf, 3e38, -3e38)})
    SKIP.update({("np.sinc", _F(p)): ("all", "jax 0.11's Taylor series for sinc") for p in (1e-30, -1e-30, 1e-7, -1e-7, np.inf, -np.inf)})


# The correct values where jax before 0.12 gives NaN or a wrong number: (case, quantity, point) -> (value, reason).
# ftrans gives them whichever jax is installed (jax 0.12 gives them too), so against an older jax the oracle's
# entry there is replaced by the table's value (quantities as in ``_flatten``: "value", "d0", "d0d0", ...).
_HUGE = [_F(3e38), _F(-3e38)]
FIXED_IN_JAX012: dict[tuple[str, str, object], tuple[float, str]] = {
    # asinh'' = -x / (x**2 + 1)**1.5 ~ -1/x**2, 0 in float32: jax 0.12 scales x before squaring (0.10: inf * 0).
    **{(f, "d0d0", p): (0.0, "asinh'' = -x/(x**2+1)**1.5 underflows to 0") for f in ("np.arcsinh", "lax.asinh")
       for p in _HUGE},
    # erf'' = -2x * 2/sqrt(pi) exp(-x**2) -> 0 (0.10: -2x * 0 = inf * 0 = NaN at +-inf, +-3e38); so for erfc,
    # ndtr and gelu (exact) built on them.
    **{(f, "d0d0", p): (0.0, "erf'' -> 0 as |x| -> inf") for f in ("lax.erf", "lax.erfc", "sp.erf", "sp.erfc", "sp.ndtr")
       for p in _HUGE + [np.inf, -np.inf]},
    **{("nn.gelu_exact", "d0d0", p): (0.0, "gelu'' -> 0 as |x| -> inf") for p in _HUGE},
    # Every float32 beyond 2**25 is an even integer: sinc is exactly 0 there and its derivatives 1/x, -2/x**2
    # underflow (0.10/0.11: sin(pi x) with pi x = inf, NaN).
    **{("np.sinc", q, p): (0.0, "sinc(x) = 0 at even integers x, derivatives O(1/x)") for q in ("value", "d0", "d0d0")
       for p in _HUGE},
    # d/dx ldexp(x, n) = 2**n everywhere (0.10/0.11: 1 at 0 and -inf, where the value passes x through, and 1 or 0
    # where their frexp route's intermediate is subnormal or flushed).
    **{("np.ldexp", "d0", (_F(x), n)): (2.0 ** n, "d/dx ldexp(x, n) = 2**n")
       for x, n in ((0.0, -3.0), (-0.0, -2.0), (-np.inf, 1.0), (3e38, -2.0), (-3e38, -1.0), (1e-45, 2.0),
                    (-1e-45, 3.0))},
    # Under jit XLA flushes the subnormal operand: frexp(+-1e-45) is frexp(+-0) = (+-0, 0), as jax 0.12 gives
    # (0.10/0.11: 0.5 from the bits of the flushed product x * 2**23). Eagerly (not compared at subnormals)
    # ftrans keeps NumPy's (0.5, -148).
    **{("np.frexp", q, _F(p)): (v, "XLA flushes the subnormal operand: frexp(0)") for p in (1e-45, -1e-45)
       for q, v in (("value", p * 0.0), ("d0", 1.0))},
    # lgamma(x) = -log|x| - euler_gamma x + ... = 103.27893 at +-1e-45 (0.10/0.11 under jit: XLA's lgamma of the
    # flushed operand, lgamma(0) = inf; ftrans reads the subnormal from its bits, jax 0.12 too).
    **{(f, "value", _F(p)): (-float(np.log(abs(np.float64(F32(p))))), "lgamma(x) = -log|x| at subnormals")
       for f in ("lax.lgamma", "sp.gammaln") for p in (1e-45, -1e-45)},
}
# Where every jax so far (0.12 included) gives NaN and ftrans the finite limit, the same replacement applies always.
ALWAYS_FIXED: dict[tuple[str, str, object], tuple[float, str]] = {
    # gelu''(x) = (2 - x**2) phi(x) -> 0 at +-inf; jax's product rule multiplies x = inf by erfc''(-inf) = 0
    # (docs/differences.md). ftrans's erf derivatives clamp x by a select, whose transpose blocks that NaN.
    **{("nn.gelu_exact", "d0d0", p): (0.0, "gelu'' -> 0 at +-inf (jax: inf * 0 = NaN)") for p in (np.inf, -np.inf)},
}
JAX012 = jax.__version_info__ >= (0, 12)


def _corrected(case, res):
    """``res`` (an oracle's result) with the entries of ``ALWAYS_FIXED`` (and, before jax 0.12, of
    ``FIXED_IN_JAX012``) for ``case`` replaced by their correct values."""
    table = dict(ALWAYS_FIXED) if JAX012 else {**FIXED_IN_JAX012, **ALWAYS_FIXED}
    table = {k: v for k, v in table.items() if k[0] == case.name}
    if not table:
        return res
    value, g, second = res
    arrays = {"value": np.array(value)}
    arrays.update({f"d{i}": np.array(gi) for i, gi in enumerate(g)})
    arrays.update({f"d{k}d{i}": np.array(sij) for k, sk in enumerate(second) for i, sij in enumerate(sk)})
    cols = [np.asarray(a, np.float64) for a in case.args]
    for (_, q, point), (v, _reason) in table.items():
        pt = point if isinstance(point, tuple) else (point,)
        rows = np.all([c == p for c, p in zip(cols, pt)], axis=0)
        assert rows.any(), (case.name, q, point)
        arrays[q][rows] = v
    return (arrays["value"], tuple(arrays[f"d{i}"] for i in range(len(g))),
            tuple(tuple(arrays[f"d{k}d{i}"] for i in range(len(sk))) for k, sk in enumerate(second)))


def _hypot_012(M):
    """jnp.hypot with jax 0.12's derivative rule, for a jax before 0.12 (ftrans's own hypot otherwise).

    jax 0.12 differentiates hypot through its unit vector ``u = (a, b) / r``: ``dr = u . (da, db)`` and
    ``du = ((da, db) - u dr) / r``, finite where ``a**2``, ``1/r`` or ``r`` overflow (jax 0.10/0.11 differentiate
    the scaled formula ``hi sqrt(1 + (lo/hi)**2)``: 1.06 instead of 0.707 at (1e30, 1e30), NaN at (1e-30, 0),
    0.5 at (0, 0) where hypot has no derivative and jax 0.12 gives NaN). Written here for the oracle; the
    values stay jax's own ``jnp.hypot``.
    """
    if M is FT or JAX012:
        return M.np.hypot

    @jax.custom_jvp
    def hyp(a, b):
        return jjnp.hypot(a, b)

    @jax.custom_jvp
    def units(a, b):
        hi = jjnp.maximum(jjnp.abs(a), jjnp.abs(b))
        s = jax.lax.rsqrt(1 + jjnp.square(jjnp.minimum(jjnp.abs(a), jjnp.abs(b)) / hi))
        return a / hi * s, b / hi * s

    @hyp.defjvp
    def _(p, t):
        ua, ub = units(*p)
        return hyp(*p), ua * t[0] + ub * t[1]

    @units.defjvp
    def _(p, t):
        r, (ua, ub) = hyp(*p), units(*p)
        dr = ua * t[0] + ub * t[1]
        return (ua, ub), ((t[0] - ua * dr) / r, (t[1] - ub * dr) / r)

    return hyp


def _program(M, case):
    """``(value, grads, second)`` of ``case``'s function in namespace ``M`` (ftrans or jax)."""
    f = case.get(M)
    nargs = len(case.args)
    diff = tuple(i for i in range(nargs) if i not in case.nondiff)

    def weights(out):
        if case.elementwise:
            return 1.0
        n = out.shape[-1] if out.ndim else 1
        return (M.np.arange(n, dtype=np.float32) % 3 + 1.0) if out.ndim > 1 else 1.0

    def F(*args):
        out = f(*args)
        return M.np.sum(out * weights(out))

    if M is FT:
        grad = ftrans.grad
    else:
        grad = jax.grad

    def run(*args):
        value = f(*args)
        g = grad(F, argnums=diff)(*args)
        second = []
        for k in range(len(diff)):
            def Gk(*a, k=k):
                return M.np.sum(grad(F, argnums=diff)(*a)[k])
            second.append(grad(Gk, argnums=diff)(*args))
        return value, tuple(g), tuple(second)

    return run


def _jax_result(case):
    out = jax.jit(_program(JX, case))(*case.args)
    return _corrected(case, jax.tree_util.tree_map(np.asarray, out))


def _flatten(res):
    value, g, second = res
    parts = [("value", value)] + [(f"d{i}", gi) for i, gi in enumerate(g)]
    parts += [(f"d{k}d{i}", sij) for k, sk in enumerate(second) for i, sij in enumerate(sk)]
    return [(n, np.asarray(a)) for n, a in parts]


# Derivatives that are zero in exact arithmetic come out as a few ulps of cancellation
# (``1 - tanh(x)**2`` at 6, the middle weight of ``var``): an absolute floor for derivatives.
DERIV_ATOL = 1e-6


def _value_atol(case):
    """Per input row: 4 ulps of the row's largest finite input magnitude (at most 1).

    A value that is zero in exact arithmetic (``logaddexp2(-1, -1)``) is a few ulps
    of cancellation in float32; scaling by the inputs keeps the floor tiny for tiny
    inputs, so ``sin(1e-30)`` must still be ``1e-30``.
    """
    rows = np.stack([np.abs(np.asarray(a, np.float64)).reshape(len(a), -1).max(axis=1)
                     if np.ndim(a) else np.abs(np.float64(a)).reshape(1) for a in case.args if
                     np.asarray(a).dtype.kind == "f"], axis=1)
    rows = np.where(np.isfinite(rows), rows, 0.0).max(axis=1)
    return 4 * EPS * np.minimum(rows, 1.0)


def _mismatches(case, ours, theirs, mode):
    """Rows (input points) where ``ours`` and ``theirs`` differ, as readable lines."""
    bad = []
    for (name, a), (_, b) in zip(_flatten(ours), _flatten(theirs)):
        assert a.shape == b.shape, (case.name, name, a.shape, b.shape)
        assert a.dtype == b.dtype, (case.name, name, a.dtype, b.dtype)
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        rtol = 1e-5 if name == "value" else 1e-4
        if name == "value":
            atol = _value_atol(case)
        else:
            # A reduction's gradient is a vector per row: compared normwise (rtol of its largest entry).
            mag = np.where(np.isfinite(b64), np.abs(b64), 0.0)
            atol = DERIV_ATOL + (rtol * mag.reshape(len(mag), -1).max(axis=1) if mag.ndim > 1 else 0.0)
        if a64.ndim > 1 and np.ndim(atol):
            atol = atol.reshape((-1,) + (1,) * (a64.ndim - 1))
        both_nan = np.isnan(a64) & np.isnan(b64)
        with np.errstate(invalid="ignore"):
            # (an infinite oracle is matched only by the same infinity: rtol * inf would accept any number)
            same = (a64 == b64) | (np.isfinite(b64) & (np.abs(a64 - b64) <= TINY + atol + rtol * np.abs(b64)))
        ok = both_nan | same
        if ok.all():
            continue
        rows = np.nonzero(~ok.reshape(ok.shape[0], -1).all(axis=1) if ok.ndim else ~ok.reshape(1))[0]
        for r in rows:
            if case.elementwise:
                point = tuple(float(x[r]) for x in case.args) if ok.ndim else ()
                skip = SKIP.get((case.name, point[0] if len(point) == 1 else point))
            else:
                point = tuple(case.args[0][r].tolist())
                skip = SKIP.get((case.name, r))
            if skip is not None and skip[0] in (mode, "all"):
                continue
            if mode == "eager" and any(0 < abs(p) < TINY for p in point):
                # Eagerly ftrans keeps subnormals (NumPy), XLA flushes them: docs/differences.md.
                continue
            bad.append(f"{name} at {point}: ftrans {a.reshape(a.shape[0], -1)[r] if a.ndim else a} "
                       f"jax {b.reshape(b.shape[0], -1)[r] if b.ndim else b}")
    return bad


# (these compare ftrans's host-side results with compiled ones at the last bits optimised code gives)
_PINNED_TO_OPTIMISED_CODE = ("nn.gelu", "nn.mish")


@pytest.mark.parametrize("case", [pytest.param(c, marks=pytest.mark.xla_optimized)
                                  if repr(c) in _PINNED_TO_OPTIMISED_CODE else c for c in CASES], ids=repr)
def test_special_points(case):
    theirs = _jax_result(case)
    if on_cpu():
        theirs_host = theirs
    else:  # ftrans's eager arithmetic runs on the host: XLA on the CPU is its oracle, not the GPU's kernels
        with host_oracle():
            theirs_host = _jax_result(case)
    args = [ftrans.numpy.asarray(a) for a in case.args]
    prog = _program(FT, case)
    eager = jax.tree_util.tree_map(np.asarray, prog(*args))
    jitted = jax.tree_util.tree_map(np.asarray, ftrans.jit(prog)(*args))
    bad = [f"eager {m}" for m in _mismatches(case, eager, theirs_host, "eager")]
    bad += [f"jit {m}" for m in _mismatches(case, jitted, theirs, "jit")]
    assert not bad, f"{case.name}: {len(bad)} mismatches\n" + "\n".join(bad[:40])


def test_cases_cover_every_function():
    """Every function the sweep names exists in both libraries, once (a typo would test nothing)."""
    assert len(CASES) == len({c.name for c in CASES})
    for case in CASES:
        assert callable(case.get(FT)) and callable(case.get(JX)), case.name


def test_complex_expm1_edges_match_jax_eagerly_and_under_jit():
    """Eager complex expm1 follows XLA's at infinities, NaN, zero imaginary parts and signed zeros.

    NumPy's complex expm1 gives ``inf + nan j`` at ``inf + 0j`` and keeps the
    sign of ``-0``; XLA (and so jax and ftrans under ``jit``) gives
    ``inf + 0j`` and unsigned zeros. Large imaginary parts are compared to
    float32 tolerance only (XLA's range reduction of sin/cos is less exact).
    """
    edges = [0.0, -0.0, 1.0, -1.0, 1e-5, -1e-5, 2.5, -3.0, 88.0, -88.0, 100.0, np.inf, -np.inf, np.nan, 1e-30]
    z = np.array([complex(a, b) for a, b in itertools.product(edges, edges)], np.complex64)
    want = np.asarray(jjnp.expm1(z))
    for got in (np.asarray(fnp.expm1(fnp.asarray(z))), np.asarray(ftrans.jit(fnp.expm1)(z))):
        assert got.dtype == np.complex64
        for part in ("real", "imag"):
            g, w = getattr(got, part), getattr(want, part)
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-6)  # NaN equals NaN, infinities by sign
            zero = (w == 0) & (g == 0)
            assert (np.signbit(g[zero]) == np.signbit(w[zero])).all(), part
