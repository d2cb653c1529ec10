"""The special functions of JAX's ``lax`` that XLA has no op for: ``igamma``, ``igammac`` (the regularized
incomplete gamma functions ``P(a, x)``, ``Q(a, x)``), ``igamma_grad_a``, ``random_gamma_grad``, ``betainc``,
``zeta`` and ``polygamma``.

Written with ``lax`` operations and ``while_loop`` (so they run under ``jit``, ``vmap`` and the autodiff
transforms like any program): for ``P`` the power series where ``x < a + 1`` and a continued fraction for
``Q`` elsewhere (modified Lentz), for ``betainc`` its continued fraction, each iterated until every element
has converged to the dtype's precision; ``zeta`` by Euler-Maclaurin.  Half-precision inputs are computed in
float32.  Called eagerly, each runs as one compiled program (its loops in XLA, and the same bits as under
``jit``).  Derivatives are ``custom_jvp``s: in ``x`` the closed-form densities; in ``a`` (``igamma``) the
forward derivative of the same iteration.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ftrans.core import dtypes
from ftrans.core import eager_programs as _eager_programs
from ftrans.core.operands import dtype_weak, shape_of
from ftrans.core.prims import structural as S
from ftrans.core.trace import is_eager
from ftrans.errors import FtransTypeError, FtransValueError
from ftrans.lax import _ops as lax
from ftrans.lax._control_flow import while_loop
from ftrans.lax._extras import full_like
from ftrans.transforms.ad import jvp
from ftrans.transforms.custom_derivatives import SymbolicZero, custom_jvp
from ftrans.transforms.jit import jit

__all__ = ["betainc", "igamma", "igamma_grad_a", "igammac", "polygamma", "random_gamma_grad", "zeta"]

_MAX_ITERATIONS = 2000


def _compiled_when_eager(fn: Any) -> Any:
    """``fn`` as one compiled program when called eagerly (as ``ftrans.random``'s samplers are): its loops
    then run in XLA, not step by step on the host, and eager results equal ``jit``'s bit for bit."""
    compiled = jit(fn)

    def run(*args: Any) -> Any:
        # (traced for an eager program of a library composite: staged as the eager call runs it, compiled)
        return compiled(*args) if is_eager() or _eager_programs.building() else fn(*args)

    run.__name__ = getattr(fn, "__name__", "special")
    return run


def _any(mask: Any) -> Any:
    """Whether any element of a boolean array is set (a scalar)."""
    return lax.reduce_or(mask, tuple(range(len(mask.shape))))


def _full_shape(ops: tuple) -> tuple:
    """Rank-0 operands broadcast to the others' shape (after ``_broadcast_ones``), as JAX's n-ary special
    functions take ``lax.igamma(2., x)``: the implementations below select elementwise over one shape."""
    shapes = {tuple(shape_of(v)) for v in ops} - {()}
    if len(shapes) != 1:
        return ops
    shape = shapes.pop()
    return tuple(S.broadcast_in_dim_p.bind(v, shape=shape, broadcast_dimensions=()) if not shape_of(v) else v
                 for v in ops)


def _weak_as(out: Any, *ops: Any) -> Any:
    """JAX's weak-type rule for n-ary ops: the result is weakly typed when every operand is."""
    d, weak = dtype_weak(out)
    if not weak and all(dtype_weak(v)[1] for v in ops):
        return S.convert_element_type_p.bind(out, new_dtype=d, weak_type=True)
    return out


def _float_pair(name: str, a: Any, b: Any) -> tuple[Any, Any]:
    a, b = _full_shape(lax._broadcast_ones(name, *lax._same_dtype_operands(name, (a, b))))
    for i, v in enumerate((a, b)):
        d = dtype_weak(v)[0]
        if not dtypes.is_float(d):
            raise FtransTypeError(
                f"{name} does not accept dtype {d.name} at position {i}. Accepted dtypes at position {i} are "
                "subtypes of floating."
            )
    if dtype_weak(a)[0] != dtype_weak(b)[0]:
        raise FtransTypeError(f"lax.{name}: operands must have one dtype, got {dtype_weak(a)[0].name} and "
                              f"{dtype_weak(b)[0].name}")
    return a, b


def _operands(name: str, a: Any, x: Any) -> tuple[Any, Any, np.dtype]:
    a, x = _float_pair(name, a, x)
    return a, x, dtype_weak(a)[0]


def _both(a: Any, x: Any) -> tuple[Any, Any]:
    """(P(a, x), Q(a, x)) of arrays of one shape and float dtype."""
    d = dtype_weak(a)[0]
    calc = np.dtype(np.float32) if d in (dtypes.bfloat16, dtypes.float16) else d
    if calc != d:
        a, x = lax.convert_element_type(a, calc), lax.convert_element_type(x, calc)
    eps = float(np.finfo(calc).eps)
    tiny = float(np.finfo(calc).tiny) * 1e4
    one, zero = full_like(a, 1.0), full_like(a, 0.0)
    use_series = lax.lt(x, lax.add(a, one))
    # each method sees inputs it converges on; the other method's elements get harmless stand-ins
    good = lax.bitwise_and(lax.gt(a, zero), lax.gt(x, zero))
    sa = lax.select(good, a, one)
    xs = lax.select(lax.bitwise_and(good, use_series), x, lax.mul(sa, full_like(a, 0.5)))
    xc = lax.select(lax.bitwise_and(good, lax.bitwise_not(use_series)), x, lax.add(sa, full_like(a, 2.0)))

    def log_prefactor(xv: Any) -> Any:
        return lax.sub(lax.sub(lax.mul(sa, lax.log(xv)), xv), lax.lgamma(sa))

    # series: P = x^a e^-x / Gamma(a) * sum_n x^n / (a (a+1) ... (a+n))
    # Each element stops at its own convergence and keeps its state while its batch-mates go on, so its
    # value does not depend on them (jax 0.12's loops; jax 0.10/0.11 iterate every element to the slowest).
    def s_cond(c: tuple) -> Any:
        return lax.bitwise_and(lax.lt(c[0], _MAX_ITERATIONS), _any(c[3]))

    def s_body(c: tuple) -> tuple:
        n, term, total, live = c
        term2 = lax.mul(term, lax.div(xs, lax.add(sa, lax.convert_element_type(n, calc))))
        total2 = lax.add(total, term2)
        live2 = lax.bitwise_and(live, lax.gt(lax.abs(term2), lax.mul(lax.abs(total2), full_like(total2, eps))))
        return n + 1, lax.select(live, term2, term), lax.select(live, total2, total), live2

    first = lax.div(one, sa)
    _, _, total, _ = while_loop(s_cond, s_body, (np.int32(1), first, first, full_like(first, True, np.bool_)))
    p_series = lax.mul(total, lax.exp(log_prefactor(xs)))

    # continued fraction: Q = x^a e^-x / Gamma(a) * 1 / (x + 1 - a - 1 (1 - a) / (x + 3 - a - ...))
    # An integer a makes a partial numerator 0: the fraction's value is then exact, every later delta 1,
    # but its derivative in a (igamma_grad_a, forward mode through this loop) still needs the tail. Such an
    # element runs until a shadow fraction at a + 1/2 (same convergence rate, no zero numerator) converges.
    integer_a = lax.eq(sa, lax.floor(sa))
    half = full_like(a, 0.5)

    def c_cond(c: tuple) -> Any:
        return lax.bitwise_and(lax.lt(c[0], _MAX_ITERATIONS), _any(c[-1]))

    def guard(v: Any) -> Any:
        return lax.select(lax.lt(lax.abs(v), full_like(v, tiny)), full_like(v, tiny), v)

    def lentz(an: Any, b: Any, cc: Any, dd: Any) -> tuple:
        dd = lax.div(one, guard(lax.add(lax.mul(an, dd), b)))
        cc = guard(lax.add(b, lax.div(an, cc)))
        return cc, dd, lax.mul(dd, cc)

    def c_body(c: tuple) -> tuple:
        n, b0_, cc0, dd0, h0, cs0, ds0, live = c
        nf = lax.convert_element_type(n, calc)
        b = lax.add(b0_, full_like(b0_, 2.0))
        cc, dd, delta = lentz(lax.neg(lax.mul(nf, lax.sub(nf, sa))), b, cc0, dd0)
        cs, ds, delta_s = lentz(lax.neg(lax.mul(nf, lax.sub(nf, lax.add(sa, half)))), lax.sub(b, half), cs0, ds0)
        going = lax.gt(lax.abs(lax.sub(delta, one)), full_like(delta, eps))
        shadow_going = lax.gt(lax.abs(lax.sub(delta_s, one)), full_like(delta, eps))
        going = lax.bitwise_or(going, lax.bitwise_and(integer_a, shadow_going))
        pairs = ((b, b0_), (cc, cc0), (dd, dd0), (lax.mul(h0, delta), h0), (cs, cs0), (ds, ds0))
        return (n + 1, *[lax.select(live, new, old) for new, old in pairs], lax.bitwise_and(live, going))

    b0 = lax.sub(lax.add(xc, one), sa)
    d0 = lax.div(one, b0)
    big = full_like(a, 1.0 / tiny)
    init = (np.int32(1), b0, big, d0, d0, big, lax.div(one, lax.sub(b0, half)), full_like(a, True, np.bool_))
    h = while_loop(c_cond, c_body, init)[4]
    q_cf = lax.mul(h, lax.exp(log_prefactor(xc)))

    p = lax.select(use_series, p_series, lax.sub(one, q_cf))
    q = lax.select(use_series, lax.sub(one, p_series), q_cf)
    nan = full_like(a, np.nan)
    bad = lax.bitwise_or(lax.bitwise_or(lax.lt(a, zero), lax.lt(x, zero)),
                         lax.bitwise_or(lax.ne(a, a), lax.ne(x, x)))
    x_zero, a_zero, x_inf = lax.eq(x, zero), lax.eq(a, zero), lax.eq(x, full_like(x, np.inf))
    p = lax.select(x_zero, zero, lax.select(lax.bitwise_or(a_zero, x_inf), one, p))
    q = lax.select(x_zero, one, lax.select(lax.bitwise_or(a_zero, x_inf), zero, q))
    p, q = lax.select(bad, nan, p), lax.select(bad, nan, q)
    if calc != d:
        p, q = lax.convert_element_type(p, d), lax.convert_element_type(q, d)
    return p, q


def _density(a: Any, x: Any) -> Any:
    """dP/dx = x^(a-1) e^-x / Gamma(a)."""
    one = full_like(a, 1.0)
    return lax.exp(lax.sub(lax.sub(lax.mul(lax.sub(a, one), lax.log(x)), x), lax.lgamma(a)))


def _make(which: int, sign: float) -> Any:
    @custom_jvp
    def fn(a: Any, x: Any) -> Any:
        return _both(a, x)[which]

    def rule(primals: tuple, tangents: tuple) -> tuple:
        a, x = primals
        ta, tx = tangents
        out = _weak_as(fn(a, x), a, x)
        t = None
        if type(tx) is not SymbolicZero:
            t = lax.mul(tx, _weak_as(lax.mul(_density(a, x), full_like(x, sign)), a, x))
        if type(ta) is not SymbolicZero:
            # dP/da (dQ/da) as a coefficient, as JAX's rule multiplies by igamma_grad_a: the tangent is then
            # linear through one multiply (reverse mode transposes no loop) and keeps the operands' weak type.
            _, da = jvp(lambda a_: _both(a_, x)[which], (a,), (full_like(a, 1.0),))
            ga = lax.mul(ta, _weak_as(da, a, x))
            t = ga if t is None else lax.add(t, ga)
        if t is None:
            t = full_like(out, 0.0)
        return out, t

    fn.defjvp(rule, symbolic_zeros=True)
    return fn


_igamma = _compiled_when_eager(_make(0, 1.0))
_igammac = _compiled_when_eager(_make(1, -1.0))


def igamma(a: Any, x: Any) -> Any:
    """``lax.igamma``: the regularized lower incomplete gamma function ``P(a, x)``."""
    a, x, _ = _operands("igamma", a, x)
    return _weak_as(_igamma(a, x), a, x)


def igammac(a: Any, x: Any) -> Any:
    """``lax.igammac``: the regularized upper incomplete gamma function ``Q(a, x) = 1 - P(a, x)``."""
    a, x, _ = _operands("igammac", a, x)
    return _weak_as(_igammac(a, x), a, x)


# ---------------------------------------------------------------- betainc


def _betainc(a: Any, b: Any, x: Any) -> Any:
    """I_x(a, b) by its continued fraction (modified Lentz), using I_x(a, b) = 1 - I_(1-x)(b, a) where x is past
    the fraction's region of fast convergence, x > (a + 1) / (a + b + 2)."""
    d = dtype_weak(a)[0]
    calc = np.dtype(np.float32) if d in (dtypes.bfloat16, dtypes.float16) else d
    if calc != d:
        a, b, x = (lax.convert_element_type(v, calc) for v in (a, b, x))
    eps = float(np.finfo(calc).eps)
    tiny = float(np.finfo(calc).tiny) * 1e4
    one, zero, two = full_like(a, 1.0), full_like(a, 0.0), full_like(a, 2.0)
    flip = lax.gt(x, lax.div(lax.add(a, one), lax.add(lax.add(a, b), two)))
    good = lax.bitwise_and(lax.bitwise_and(lax.gt(a, zero), lax.gt(b, zero)),
                           lax.bitwise_and(lax.gt(x, zero), lax.lt(x, one)))
    half = full_like(a, 0.5)
    pa = lax.select(good, lax.select(flip, b, a), one)
    pb = lax.select(good, lax.select(flip, a, b), one)
    px = lax.select(good, lax.select(flip, lax.sub(one, x), x), half)

    def guard(v: Any) -> Any:
        return lax.select(lax.lt(lax.abs(v), full_like(v, tiny)), full_like(v, tiny), v)

    def cond(c: tuple) -> Any:
        return lax.bitwise_and(lax.lt(c[0], _MAX_ITERATIONS), _any(c[4]))

    def body(c: tuple) -> tuple:  # converged elements keep their state (see _both)
        n, cc0, dd0, h0, live = c
        cc, dd, h = cc0, dd0, h0
        m = lax.convert_element_type(n, calc)
        m2 = lax.add(m, m)
        even = lax.div(lax.mul(lax.mul(m, lax.sub(pb, m)), px),
                       lax.mul(lax.add(lax.sub(pa, one), m2), lax.add(pa, m2)))
        dd = lax.div(one, guard(lax.add(one, lax.mul(even, dd))))
        cc = guard(lax.add(one, lax.div(even, cc)))
        h = lax.mul(h, lax.mul(dd, cc))
        odd = lax.neg(lax.div(lax.mul(lax.mul(lax.add(pa, m), lax.add(lax.add(pa, pb), m)), px),
                              lax.mul(lax.add(pa, m2), lax.add(lax.add(pa, one), m2))))
        dd = lax.div(one, guard(lax.add(one, lax.mul(odd, dd))))
        cc = guard(lax.add(one, lax.div(odd, cc)))
        delta = lax.mul(dd, cc)
        live2 = lax.bitwise_and(live, lax.gt(lax.abs(lax.sub(delta, one)), full_like(delta, eps)))
        kept = [lax.select(live, new, old) for new, old in ((cc, cc0), (dd, dd0), (lax.mul(h, delta), h0))]
        return (n + 1, *kept, live2)

    d0 = lax.div(one, guard(lax.sub(one, lax.div(lax.mul(lax.add(pa, pb), px), lax.add(pa, one)))))
    h = while_loop(cond, body, (np.int32(1), one, d0, d0, full_like(a, True, np.bool_)))[3]
    log_front = lax.sub(lax.add(lax.mul(pa, lax.log(px)), lax.mul(pb, lax.log1p(lax.neg(px)))),
                        lax.sub(lax.add(lax.lgamma(pa), lax.lgamma(pb)), lax.lgamma(lax.add(pa, pb))))
    val = lax.div(lax.mul(lax.exp(log_front), h), pa)
    out = lax.select(flip, lax.sub(one, val), val)
    # edges, as XLA's: x = 0 -> 0, x = 1 -> 1; a = 0 (b > 0) -> 1, b = 0 (a > 0) -> 0; otherwise out of domain -> nan
    out = lax.select(lax.eq(x, zero), zero, lax.select(lax.eq(x, one), one, out))
    a0, b0 = lax.eq(a, zero), lax.eq(b, zero)
    out = lax.select(lax.bitwise_and(a0, lax.gt(b, zero)), one, lax.select(lax.bitwise_and(b0, lax.gt(a, zero)), zero,
                                                                            out))
    bad = lax.bitwise_or(lax.bitwise_or(lax.lt(a, zero), lax.lt(b, zero)),
                         lax.bitwise_or(lax.lt(x, zero), lax.gt(x, one)))
    bad = lax.bitwise_or(bad, lax.bitwise_or(lax.bitwise_and(a0, b0),
                                             lax.bitwise_or(lax.ne(a, a), lax.bitwise_or(lax.ne(b, b), lax.ne(x, x)))))
    out = lax.select(bad, full_like(out, np.nan), out)
    return lax.convert_element_type(out, d) if calc != d else out


@custom_jvp
def _betainc_fn(a: Any, b: Any, x: Any) -> Any:
    return _betainc(a, b, x)


def _betainc_jvp(primals: tuple, tangents: tuple) -> tuple:
    a, b, x = primals
    ta, tb, tx = tangents
    if type(ta) is not SymbolicZero or type(tb) is not SymbolicZero:
        raise FtransValueError("Betainc gradient with respect to a and b not supported.")
    out = _betainc_fn(a, b, x)
    if type(tx) is SymbolicZero:
        return out, full_like(out, 0.0)
    one = full_like(a, 1.0)
    log_density = lax.sub(lax.add(lax.mul(lax.sub(a, one), lax.log(x)), lax.mul(lax.sub(b, one), lax.log1p(lax.neg(x)))),
                          lax.sub(lax.add(lax.lgamma(a), lax.lgamma(b)), lax.lgamma(lax.add(a, b))))
    return out, lax.mul(tx, lax.exp(log_density))


_betainc_fn.defjvp(_betainc_jvp, symbolic_zeros=True)
_betainc_compiled = _compiled_when_eager(_betainc_fn)


def betainc(a: Any, b: Any, x: Any) -> Any:
    """``lax.betainc``: the regularized incomplete beta function ``I_x(a, b)`` (differentiable in ``x``;
    in ``a`` and ``b`` a ``ValueError``, as in JAX)."""
    ops = lax._same_dtype_operands("betainc", (a, b, x))
    a, b = lax._broadcast_ones("betainc", ops[0], ops[1])
    a, x = lax._broadcast_ones("betainc", a, ops[2])
    b, x = lax._broadcast_ones("betainc", b, x)
    a, b, x = _full_shape((a, b, x))
    for i, v in enumerate((a, b, x)):
        d = dtype_weak(v)[0]
        if not dtypes.is_float(d):
            raise FtransTypeError(
                f"betainc does not accept dtype {d.name} at position {i}. Accepted dtypes at position {i} are "
                "subtypes of floating."
            )
    if len({dtype_weak(v)[0] for v in (a, b, x)}) != 1:
        raise FtransTypeError("lax.betainc: a, b and x must have one dtype")
    return _weak_as(_betainc_compiled(a, b, x), a, b, x)


# ---------------------------------------------------------------- zeta, polygamma

# B_2j / (2j)! for j = 1..8 (Bernoulli numbers over factorials), the Euler-Maclaurin correction terms
_BERNOULLI_OVER_FACTORIAL = [
    (1 / 6) / 2, (-1 / 30) / 24, (1 / 42) / 720, (-1 / 30) / 40320, (5 / 66) / 3628800,
    (-691 / 2730) / 479001600, (7 / 6) / 87178291200, (-3617 / 510) / 20922789888000,
]
_ZETA_TERMS = 9


def _zeta(s: Any, q: Any) -> Any:
    """Hurwitz zeta by Euler-Maclaurin: the first terms summed, the rest as an integral plus Bernoulli
    corrections at ``q + N``; XLA's values at the poles (q a non-positive integer: inf for even integer s,
    else nan) and for s <= 1 (1: inf, below: nan)."""
    d = dtype_weak(s)[0]
    calc = np.dtype(np.float32) if d in (dtypes.bfloat16, dtypes.float16) else d
    if calc != d:
        s, q = lax.convert_element_type(s, calc), lax.convert_element_type(q, calc)
    one, zero = full_like(s, 1.0), full_like(s, 0.0)
    total = zero
    for k in range(_ZETA_TERMS):
        total = lax.add(total, lax.pow(lax.add(q, full_like(q, float(k))), lax.neg(s)))
    a = lax.add(q, full_like(q, float(_ZETA_TERMS)))
    a_s = lax.pow(a, lax.neg(s))
    total = lax.add(total, lax.div(lax.mul(a_s, a), lax.sub(s, one)))  # integral: a^(1-s) / (s-1)
    total = lax.add(total, lax.mul(a_s, full_like(s, 0.5)))
    rising = s                                  # s (s+1) ... (s+2j-2)
    power = lax.div(a_s, a)                     # a^(-s-2j+1)
    inv_a2 = lax.div(one, lax.mul(a, a))
    for j, coef in enumerate(_BERNOULLI_OVER_FACTORIAL, start=1):
        total = lax.add(total, lax.mul(lax.mul(rising, power), full_like(s, coef)))
        rising = lax.mul(rising, lax.mul(lax.add(s, full_like(s, 2.0 * j - 1)), lax.add(s, full_like(s, 2.0 * j))))
        power = lax.mul(power, inv_a2)
    inf, nan = full_like(s, np.inf), full_like(s, np.nan)
    pole = lax.bitwise_and(lax.le(q, zero), lax.eq(q, lax.floor(q)))
    even = lax.bitwise_and(lax.eq(s, lax.floor(s)), lax.eq(lax.rem(s, full_like(s, 2.0)), zero))
    total = lax.select(pole, lax.select(even, inf, nan), total)
    total = lax.select(lax.eq(s, one), inf, lax.select(lax.lt(s, one), nan, total))
    return lax.convert_element_type(total, d) if calc != d else total


_zeta_compiled = _compiled_when_eager(_zeta)


def zeta(x: Any, q: Any) -> Any:
    """``lax.zeta``: the Hurwitz zeta function ``sum_k (q + k)^-x``."""
    x, q = _float_pair("zeta", x, q)
    return _weak_as(_zeta_compiled(x, q), x, q)


def polygamma(m: Any, x: Any) -> Any:
    """``lax.polygamma``: the m-th derivative of the digamma function, ``(-1)^(m+1) m! zeta(m+1, x)`` for
    integer ``m >= 1``, ``digamma`` for ``m = 0``, NaN for other ``m``."""
    m, x = _float_pair("polygamma", m, x)
    return _weak_as(_polygamma_compiled(m, x), m, x)


def _polygamma(m: Any, x: Any) -> Any:
    one = full_like(m, 1.0)
    mm = lax.select(lax.ge(m, one), m, one)  # keep the unused branch finite
    fact = lax.exp(lax.lgamma(lax.add(mm, one)))
    sign = lax.sub(one, lax.mul(full_like(m, 2.0), lax.rem(lax.add(mm, one), full_like(m, 2.0))))  # (-1)^(m+1)
    val = lax.mul(lax.mul(sign, fact), _zeta(lax.add(mm, one), x))
    val = lax.select(lax.eq(m, full_like(m, 0.0)), lax.digamma(x), val)
    ok = lax.bitwise_and(lax.ge(m, full_like(m, 0.0)), lax.eq(m, lax.floor(m)))
    return lax.select(ok, val, full_like(val, np.nan))


def igamma_grad_a(a: Any, x: Any) -> Any:
    """``lax.igamma_grad_a``: dP(a, x)/da, the forward derivative of ``igamma``'s iteration in ``a``."""
    a, x, _ = _operands("igamma_grad_a", a, x)
    return _weak_as(_igamma_grad_a_compiled(a, x), a, x)


def _igamma_grad_a(a: Any, x: Any) -> Any:
    return jvp(lambda a_: _both(a_, x)[0], (a,), (full_like(a, 1.0),))[1]


def random_gamma_grad(a: Any, x: Any) -> Any:
    """``lax.random_gamma_grad``: d x / d a of a Gamma(a) sample ``x`` (implicit differentiation of
    ``P(a, x) = u``): ``-(dP/da) / (dP/dx)``."""
    a, x, _ = _operands("random_gamma_grad", a, x)
    return _weak_as(_random_gamma_grad_compiled(a, x), a, x)


def _random_gamma_grad(a: Any, x: Any) -> Any:
    return lax.neg(lax.div(_igamma_grad_a(a, x), _density(a, x)))


_polygamma_fn = custom_jvp(_polygamma)


def _polygamma_jvp(primals: tuple, tangents: tuple) -> tuple:
    # d/dx psi^(m)(x) = psi^(m+1)(x), as JAX's rule (NaN where m is not a non-negative integer, as the value);
    # m has no derivative (a zero tangent).
    m, x = primals
    _, tx = tangents
    out = _weak_as(_polygamma_fn(m, x), m, x)
    if type(tx) is SymbolicZero:
        return out, full_like(out, 0.0)
    return out, lax.mul(tx, _weak_as(_polygamma_fn(lax.add(m, full_like(m, 1.0)), x), m, x))


_polygamma_fn.defjvp(_polygamma_jvp, symbolic_zeros=True)
_polygamma_compiled = _compiled_when_eager(_polygamma_fn)
_igamma_grad_a_compiled = _compiled_when_eager(_igamma_grad_a)
_random_gamma_grad_compiled = _compiled_when_eager(_random_gamma_grad)
