"""The inexact line search of ``ftrans.scipy.optimize``: a step satisfying the strong Wolfe conditions.

Algorithms 3.5 (bracketing) and 3.6 (zoom) of Nocedal and Wright, *Numerical
Optimization* (1999), with the choices JAX makes so the optimisers take the
same steps: the trial step doubles from a start taken from the previous
decrease, zoom interpolates cubically, then quadratically, then bisects, and
every branch is computed and selected with ``where`` (no ``cond``), so the
search is one ``while_loop`` with two nested zoom loops.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from ftrans import lax
from ftrans import numpy as jnp
from ftrans.transforms.reverse import value_and_grad

_HIGHEST = lax.Precision.HIGHEST


def _dot(a: Any, b: Any) -> Any:
    return jnp.dot(a, b, precision=_HIGHEST)


def _cubic_minimiser(a: Any, fa: Any, fpa: Any, b: Any, fb: Any, c: Any, fc: Any) -> Any:
    """The minimiser of the cubic through ``(a, fa)``, ``(b, fb)``, ``(c, fc)`` with slope ``fpa`` at ``a``."""
    d = jnp.result_type(a, fa, fpa, b, fb, c, fc)
    db, dc = b - a, c - a
    denom = (db * dc) ** 2 * (db - dc)
    m = jnp.array([[dc ** 2, -db ** 2], [-dc ** 3, db ** 3]], dtype=d)
    v = jnp.array([fb - fa - fpa * db, fc - fa - fpa * dc], dtype=d)
    p, q = _dot(m, v) / denom
    return a + (-q + jnp.sqrt(q * q - 3.0 * p * fpa)) / (3.0 * p)


def _quadratic_minimiser(a: Any, fa: Any, fpa: Any, b: Any, fb: Any) -> Any:
    """The minimiser of the parabola through ``(a, fa)``, ``(b, fb)`` with slope ``fpa`` at ``a``."""
    db = b - a
    curvature = (fb - fa - fpa * db) / (db ** 2)
    return a - fpa / (2.0 * curvature)


def _pick(mask: Any, state: NamedTuple, **new: Any) -> NamedTuple:
    """``state`` with the named fields replaced by ``new`` where ``mask`` holds."""
    return state._replace(**{k: jnp.where(mask, v, getattr(state, k)) for k, v in new.items()})


class _Zoom(NamedTuple):
    done: Any
    failed: Any
    j: Any
    a_lo: Any
    phi_lo: Any
    dphi_lo: Any
    a_hi: Any
    phi_hi: Any
    dphi_hi: Any
    a_rec: Any
    phi_rec: Any
    a_star: Any
    phi_star: Any
    dphi_star: Any
    g_star: Any
    nfev: Any
    ngev: Any


def _zoom(probe: Callable, too_high: Callable, flat_enough: Callable, a_lo: Any, phi_lo: Any, dphi_lo: Any,
          a_hi: Any, phi_hi: Any, dphi_hi: Any, g_0: Any, skip: Any) -> _Zoom:
    """Shrink the bracket ``[a_lo, a_hi]`` until a step satisfies both Wolfe conditions (Algorithm 3.6).

    ``skip`` (a traced flag) makes it return at once: the caller computes both zooms and keeps one.
    """
    state = _Zoom(done=False, failed=False, j=0, a_lo=a_lo, phi_lo=phi_lo, dphi_lo=dphi_lo, a_hi=a_hi,
                  phi_hi=phi_hi, dphi_hi=dphi_hi, a_rec=(a_lo + a_hi) / 2.0, phi_rec=(phi_lo + phi_hi) / 2.0,
                  a_star=1.0, phi_star=phi_lo, dphi_star=dphi_lo, g_star=g_0, nfev=0, ngev=0)

    def step(s: _Zoom) -> _Zoom:
        width = s.a_hi - s.a_lo
        left, right = jnp.minimum(s.a_hi, s.a_lo), jnp.maximum(s.a_hi, s.a_lo)
        # A bracket this narrow makes no progress: give up (the Wolfe conditions fail, so does the search).
        floor = jnp.where(jnp.finfo(width.dtype).bits < 64, 1e-5, 1e-10)
        s = s._replace(failed=s.failed | (width <= floor))
        cubic = _cubic_minimiser(s.a_lo, s.phi_lo, s.dphi_lo, s.a_hi, s.phi_hi, s.a_rec, s.phi_rec)
        use_cubic = (s.j > 0) & (cubic > left + 0.2 * width) & (cubic < right - 0.2 * width)
        quad = _quadratic_minimiser(s.a_lo, s.phi_lo, s.dphi_lo, s.a_hi, s.phi_hi)
        use_quad = ~use_cubic & (quad > left + 0.1 * width) & (quad < right - 0.1 * width)
        a_j = jnp.where(use_cubic, cubic, s.a_rec)
        a_j = jnp.where(use_quad, quad, a_j)
        a_j = jnp.where(~use_cubic & ~use_quad, (s.a_lo + s.a_hi) / 2.0, a_j)

        phi_j, dphi_j, g_j = probe(a_j)
        phi_j = phi_j.astype(s.phi_lo.dtype)
        dphi_j = dphi_j.astype(s.dphi_lo.dtype)
        g_j = g_j.astype(s.g_star.dtype)
        s = s._replace(nfev=s.nfev + 1, ngev=s.ngev + 1)

        to_hi = too_high(a_j, phi_j) | (phi_j >= s.phi_lo)
        accept = flat_enough(dphi_j) & ~to_hi
        swap = (dphi_j * (s.a_hi - s.a_lo) >= 0.0) & ~to_hi & ~accept
        to_lo = ~to_hi & ~accept

        s = _pick(to_hi, s, a_hi=a_j, phi_hi=phi_j, dphi_hi=dphi_j, a_rec=s.a_hi, phi_rec=s.phi_hi)
        s = _pick(accept, s, a_star=a_j, phi_star=phi_j, dphi_star=dphi_j, g_star=g_j)
        s = s._replace(done=s.done | accept)
        s = _pick(swap, s, a_hi=s.a_lo, phi_hi=s.phi_lo, dphi_hi=s.dphi_lo, a_rec=s.a_hi, phi_rec=s.phi_hi)
        s = _pick(to_lo & ~swap, s, a_rec=s.a_lo, phi_rec=s.phi_lo)
        s = _pick(to_lo, s, a_lo=a_j, phi_lo=phi_j, dphi_lo=dphi_j)
        s = s._replace(j=s.j + 1)
        # JAX allows more zoom steps than SciPy's 10.
        return s._replace(failed=s.failed | (s.j >= 30))

    return lax.while_loop(lambda s: ~s.done & ~skip & ~s.failed, step, state)


class _Search(NamedTuple):
    done: Any
    failed: Any
    i: Any
    a_prev: Any
    phi_prev: Any
    dphi_prev: Any
    nfev: Any
    ngev: Any
    a_star: Any
    phi_star: Any
    dphi_star: Any
    g_star: Any


class LineSearchResults(NamedTuple):
    """The result of :func:`line_search`.

    Attributes:
        failed: True when no step satisfying the strong Wolfe conditions was found.
        nit: the number of bracketing iterations.
        nfev: the number of function evaluations.
        ngev: the number of gradient evaluations.
        k: the final iteration counter (``nit + 1``).
        a_k: the step length.
        f_k: the function value at the step.
        g_k: the gradient at the step.
        status: 0 on success, 1 when zoom failed, 3 when ``maxiter`` was reached.
    """

    failed: Any
    nit: Any
    nfev: Any
    ngev: Any
    k: Any
    a_k: Any
    f_k: Any
    g_k: Any
    status: Any


def line_search(f: Callable, xk: Any, pk: Any, old_fval: Any = None, old_old_fval: Any = None, gfk: Any = None,
                c1: float = 1e-4, c2: float = 0.9, maxiter: int = 20) -> LineSearchResults:
    """An inexact line search along ``pk`` from ``xk`` for a step satisfying the strong Wolfe conditions.

    Args:
        f: the objective, ``f(x) -> scalar`` (differentiated with ``value_and_grad``).
        xk: the current point.
        pk: the search direction (a descent direction).
        old_fval: ``f(xk)``, computed when not given (with ``gfk``).
        old_old_fval: the previous iterate's value, which sets the first trial step.
        gfk: the gradient at ``xk``.
        c1: the sufficient-decrease constant.
        c2: the curvature constant.
        maxiter: the maximum number of bracketing iterations.

    Returns:
        A :class:`LineSearchResults`.
    """
    xk, pk = jnp.asarray(xk), jnp.asarray(pk)
    d = jnp.result_type(xk, pk, 1.0)
    xk, pk = xk.astype(d), pk.astype(d)

    def probe(t: Any) -> tuple[Any, Any, Any]:
        phi, g = value_and_grad(f)(xk + jnp.array(t, dtype=pk.dtype) * pk)
        return phi, jnp.real(_dot(g, pk)), g

    evaluated = old_fval is None or gfk is None
    if evaluated:
        phi_0, dphi_0, gfk = probe(0)
    else:
        phi_0, dphi_0 = old_fval, jnp.real(_dot(gfk, pk))
    if old_old_fval is not None:
        guess = 1.01 * 2 * (phi_0 - old_old_fval) / dphi_0
        first_step = jnp.where(guess > 1, 1.0, guess)
    else:
        first_step = 1

    def too_high(a: Any, phi: Any) -> Any:  # the sufficient-decrease condition fails
        return phi > phi_0 + c1 * a * dphi_0

    def flat_enough(dphi: Any) -> Any:  # the curvature condition holds
        return jnp.abs(dphi) <= -c2 * dphi_0

    state = _Search(done=jnp.array(False), failed=jnp.array(False), i=1, a_prev=0.0, phi_prev=phi_0,
                    dphi_prev=dphi_0, nfev=int(evaluated), ngev=int(evaluated), a_star=0.0, phi_star=phi_0,
                    dphi_star=dphi_0, g_star=gfk)

    def step(s: _Search) -> _Search:
        # Nocedal and Wright start counting at 1 (SciPy at 0); the trial step doubles, as in SciPy.
        a_i = jnp.where(s.i == 1, first_step, s.a_prev * 2.0)
        phi_i, dphi_i, g_i = probe(a_i)
        s = s._replace(nfev=s.nfev + 1, ngev=s.ngev + 1)
        zoom_below = too_high(a_i, phi_i) | ((phi_i >= s.phi_prev) & (s.i > 1))
        accept = flat_enough(dphi_i) & ~zoom_below
        zoom_above = (dphi_i >= 0.0) & ~zoom_below & ~accept

        z1 = _zoom(probe, too_high, flat_enough, s.a_prev, s.phi_prev, s.dphi_prev, a_i, phi_i, dphi_i, gfk,
                   ~zoom_below)
        s = s._replace(nfev=s.nfev + z1.nfev, ngev=s.ngev + z1.ngev)
        z2 = _zoom(probe, too_high, flat_enough, a_i, phi_i, dphi_i, s.a_prev, s.phi_prev, s.dphi_prev, gfk,
                   ~zoom_above)
        s = s._replace(nfev=s.nfev + z2.nfev, ngev=s.ngev + z2.ngev)

        s = _pick(zoom_below, s, a_star=z1.a_star, phi_star=z1.phi_star, dphi_star=z1.dphi_star,
                  g_star=z1.g_star)
        s = s._replace(done=s.done | zoom_below, failed=s.failed | (zoom_below & z1.failed))
        s = _pick(accept, s, a_star=a_i, phi_star=phi_i, dphi_star=dphi_i, g_star=g_i)
        s = s._replace(done=s.done | accept)
        s = _pick(zoom_above, s, a_star=z2.a_star, phi_star=z2.phi_star, dphi_star=z2.dphi_star,
                  g_star=z2.g_star)
        s = s._replace(done=s.done | zoom_above, failed=s.failed | (zoom_above & z2.failed))
        return s._replace(i=s.i + 1, a_prev=a_i, phi_prev=phi_i, dphi_prev=dphi_i)

    state = lax.while_loop(lambda s: ~s.done & (s.i <= maxiter) & ~s.failed, step, state)

    status = jnp.where(state.failed, jnp.array(1), jnp.where(state.i > maxiter, jnp.array(3), jnp.array(0)))
    # Below 64 bits a vanishing step would leave the optimiser stuck: keep it at least 1e-8 in size.
    a_k = jnp.asarray(state.a_star)
    a_k = jnp.where((jnp.finfo(a_k.dtype).bits != 64) & (jnp.abs(a_k) < 1e-8), jnp.sign(a_k) * 1e-8, a_k)
    return LineSearchResults(failed=state.failed | ~state.done, nit=state.i - 1, nfev=state.nfev,
                             ngev=state.ngev, k=state.i, a_k=a_k, f_k=state.phi_star, g_k=state.g_star,
                             status=status)
