"""BFGS (Algorithm 6.1 of Nocedal and Wright, *Numerical Optimization*, 1999) for ``minimize``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from ftrans import lax
from ftrans import numpy as jnp
from ftrans.scipy.optimize._line_search import line_search
from ftrans.transforms.reverse import value_and_grad

_HIGHEST = lax.Precision.HIGHEST


class _BFGSState(NamedTuple):
    converged: Any
    failed: Any
    k: Any
    nfev: Any
    ngev: Any
    nhev: Any
    x_k: Any
    f_k: Any
    g_k: Any
    H_k: Any
    old_old_fval: Any
    status: Any
    line_search_status: Any


def minimize_bfgs(fun: Callable, x0: Any, maxiter: int | None = None, norm: Any = np.inf, gtol: float = 1e-5,
                  line_search_maxiter: int = 10) -> _BFGSState:
    """Minimise ``fun`` from ``x0`` by BFGS, keeping a dense inverse-Hessian estimate.

    Stops when ``norm(grad, ord=norm) < gtol``, after ``maxiter`` iterations (default ``200 * x0.size``),
    or when a line search fails.  ``status``: 0 converged, 1 ``maxiter`` reached, ``2 + s`` when the line
    search failed with status ``s``, -1 otherwise.
    """
    if maxiter is None:
        maxiter = np.size(x0) * 200
    n = x0.shape[0]
    f_0, g_0 = value_and_grad(fun)(x0)
    state = _BFGSState(converged=jnp.linalg.norm(g_0, ord=norm) < gtol, failed=False, k=0, nfev=1, ngev=1, nhev=0,
                       x_k=x0, f_k=f_0, g_k=g_0, H_k=jnp.eye(n, dtype=x0.dtype),
                       old_old_fval=f_0 + jnp.linalg.norm(g_0) / 2, status=0, line_search_status=0)

    def keep_going(s: _BFGSState) -> Any:
        return ~s.converged & ~s.failed & (s.k < maxiter)

    def step(s: _BFGSState) -> _BFGSState:
        direction = -jnp.dot(s.H_k, s.g_k, precision=_HIGHEST)
        ls = line_search(fun, s.x_k, direction, old_fval=s.f_k, old_old_fval=s.old_old_fval, gfk=s.g_k,
                         maxiter=line_search_maxiter)
        s = s._replace(nfev=s.nfev + ls.nfev, ngev=s.ngev + ls.ngev, failed=ls.failed,
                       line_search_status=ls.status)
        step_x = ls.a_k * direction
        step_g = ls.g_k - s.g_k
        rho = jnp.reciprocal(jnp.dot(step_g, step_x, precision=_HIGHEST))
        # H <- (I - rho s y^T) H (I - rho y s^T) + rho s s^T, unless the curvature y.s vanished.
        w = jnp.eye(n, dtype=rho.dtype) - rho * jnp.outer(step_x, step_g)
        updated = (jnp.einsum("ij,jk,lk", w, s.H_k, w, precision=_HIGHEST)
                   + rho * step_x[:, None] * step_x[None, :])
        H = jnp.where(jnp.isfinite(rho), updated, s.H_k)
        return s._replace(converged=jnp.linalg.norm(ls.g_k, ord=norm) < gtol, k=s.k + 1, x_k=s.x_k + step_x,
                          f_k=ls.f_k, g_k=ls.g_k, H_k=H, old_old_fval=s.f_k)

    state = lax.while_loop(keep_going, step, state)
    status = jnp.where(state.converged, 0,
                       jnp.where(state.k == maxiter, 1,
                                 jnp.where(state.failed, 2 + state.line_search_status, -1)))
    return state._replace(status=status)
