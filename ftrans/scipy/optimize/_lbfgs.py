"""Limited-memory BFGS (Algorithm 7.5 of Nocedal and Wright, 1999), for real or complex variables
(Sorber, Van Barel and De Lathauwer, SIAM J. Optim. 22(3), 2012), for ``minimize``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from ftrans import lax
from ftrans import numpy as jnp
from ftrans.scipy.optimize._line_search import line_search
from ftrans.transforms.reverse import value_and_grad

_HIGHEST = lax.Precision.HIGHEST


def _dot(a: Any, b: Any) -> Any:
    return jnp.dot(a, b, precision=_HIGHEST)


class _LBFGSState(NamedTuple):
    converged: Any
    failed: Any
    k: Any
    nfev: Any
    ngev: Any
    x_k: Any
    f_k: Any
    g_k: Any
    s_history: Any
    y_history: Any
    rho_history: Any
    gamma: Any
    status: Any
    ls_status: Any


def minimize_lbfgs(fun: Callable, x0: Any, maxiter: float | None = None, norm: Any = np.inf, maxcor: int = 10,
                   ftol: float = 2.220446049250313e-09, gtol: float = 1e-05, maxfun: float | None = None,
                   maxgrad: float | None = None, maxls: int = 20) -> _LBFGSState:
    """Minimise ``fun`` from ``x0`` by L-BFGS with the last ``maxcor`` steps as the curvature memory.

    Stops when ``norm(grad, ord=norm) < gtol`` or on a failure ``status``: 1 ``maxiter`` reached,
    2 ``maxfun`` reached, 3 ``maxgrad`` reached, 4 the decrease was below ``ftol``, 5 the line search
    failed.  Without any of ``maxiter``/``maxfun``/``maxgrad``, ``maxiter`` is ``200 * len(x0)``.
    """
    n = len(x0)
    dtype = x0.dtype
    if maxiter is None and maxfun is None and maxgrad is None:
        maxiter = n * 200
    maxiter = np.inf if maxiter is None else maxiter
    maxfun = np.inf if maxfun is None else maxfun
    maxgrad = np.inf if maxgrad is None else maxgrad

    f_0, g_0 = value_and_grad(fun)(x0)
    state = _LBFGSState(converged=jnp.array(False), failed=jnp.array(False), k=0, nfev=1, ngev=1, x_k=x0, f_k=f_0,
                        g_k=g_0, s_history=jnp.zeros((maxcor, n), dtype), y_history=jnp.zeros((maxcor, n), dtype),
                        rho_history=jnp.zeros((maxcor,), dtype), gamma=1.0, status=0, ls_status=0)

    def step(s: _LBFGSState) -> _LBFGSState:
        direction = _direction(s)
        ls = line_search(fun, s.x_k, direction, old_fval=s.f_k, gfk=s.g_k, maxiter=maxls)
        step_x = jnp.asarray(ls.a_k).astype(direction.dtype) * direction
        step_g = ls.g_k - s.g_k
        curvature = jnp.real(_dot(step_g, step_x))
        rho = jnp.reciprocal(curvature).astype(step_g.dtype)
        gamma = curvature / jnp.real(_dot(jnp.conj(step_g), step_g))

        status = jnp.array(0)
        status = jnp.where(s.f_k - ls.f_k < ftol, 4, status)
        status = jnp.where(s.ngev >= maxgrad, 3, status)
        status = jnp.where(s.nfev >= maxfun, 2, status)
        status = jnp.where(s.k >= maxiter, 1, status)
        status = jnp.where(ls.failed, 5, status)
        converged = jnp.linalg.norm(ls.g_k, ord=norm) < gtol
        return s._replace(converged=converged, failed=(status > 0) & ~converged, k=s.k + 1,
                          nfev=s.nfev + ls.nfev, ngev=s.ngev + ls.ngev,
                          x_k=(s.x_k + step_x).astype(s.x_k.dtype), f_k=ls.f_k.astype(s.f_k.dtype),
                          g_k=ls.g_k.astype(s.g_k.dtype), s_history=_push(s.s_history, step_x),
                          y_history=_push(s.y_history, step_g), rho_history=_push(s.rho_history, rho),
                          gamma=gamma.astype(s.g_k.dtype), status=jnp.where(converged, 0, status),
                          ls_status=ls.status)

    return lax.while_loop(lambda s: ~s.converged & ~s.failed, step, state)


def _direction(s: _LBFGSState) -> Any:
    """The two-loop recursion: ``-H g`` for the inverse-Hessian estimate the history stores (the newest
    entry last), scaled initially by ``gamma``."""
    dtype = s.rho_history.dtype
    memory = len(s.rho_history)
    used = jnp.where(s.k < memory, s.k, memory)

    def newest_first(j: Any, carry: tuple) -> tuple:
        q, alphas = carry
        i = memory - 1 - j
        a = s.rho_history[i] * _dot(jnp.conj(s.s_history[i]), q).real.astype(dtype)
        return q - a * jnp.conj(s.y_history[i]), alphas.at[i].set(a)

    q, alphas = lax.fori_loop(0, used, newest_first, (-jnp.conj(s.g_k), jnp.zeros_like(s.rho_history)))
    q = s.gamma * q

    def oldest_first(j: Any, q: Any) -> Any:
        i = memory - used + j
        beta = s.rho_history[i] * _dot(s.y_history[i], q).real.astype(dtype)
        return q + (alphas[i] - beta) * s.s_history[i]

    return lax.fori_loop(0, used, oldest_first, q)


def _push(history: Any, new: Any) -> Any:
    """Drop the oldest entry (the first) and append ``new``."""
    return jnp.roll(history, -1, axis=0).at[-1].set(new)
