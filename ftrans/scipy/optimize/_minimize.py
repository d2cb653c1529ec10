"""``minimize`` and ``OptimizeResults`` of ``ftrans.scipy.optimize``."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from ftrans import numpy as jnp
from ftrans.core.operands import check_arraylike
from ftrans.errors import FtransShapeError, FtransTypeError, FtransValueError
from ftrans.scipy.optimize._bfgs import minimize_bfgs
from ftrans.scipy.optimize._lbfgs import minimize_lbfgs
from ftrans.transforms.jit import jit


class OptimizeResults(NamedTuple):
    """The result of :func:`minimize`.

    Attributes:
        x: the final point.
        success: True when the method converged (and no line search failed).
        status: the method's end state: 0 converged; for BFGS 1 = ``maxiter`` reached, ``2 + s`` = the line
            search failed with status ``s`` (3 zoom failed, 5 its ``maxiter`` reached), -1 undefined; for
            L-BFGS 1 = ``maxiter``, 2 = ``maxfun``, 3 = ``maxgrad`` reached, 4 = too little progress
            (``ftol``), 5 = the line search failed.
        fun: the objective at ``x``.
        jac: the gradient at ``x``.
        hess_inv: the final inverse-Hessian estimate (BFGS), or None (L-BFGS).
        nfev: the number of objective evaluations.
        njev: the number of gradient evaluations.
        nit: the number of iterations.
    """

    x: Any
    success: Any
    status: Any
    fun: Any
    jac: Any
    hess_inv: Any
    nfev: Any
    njev: Any
    nit: Any


_METHODS: dict[str, Callable] = {
    "bfgs": minimize_bfgs,
    "l-bfgs-experimental-do-not-rely-on-this": minimize_lbfgs,
}


def _check_options(method: str, solver: Callable, options: Mapping[str, Any]) -> None:
    known = [p for p in inspect.signature(solver).parameters if p not in ("fun", "x0")]
    unknown = [k for k in options if k not in known]
    if unknown:
        raise FtransTypeError(f"ftrans.scipy.optimize.minimize: unknown option(s) {unknown} for method "
                              f"{method!r}; its options are {known}")


def minimize(fun: Callable, x0: Any, args: tuple = (), *, method: str, tol: float | None = None,
             options: Mapping[str, Any] | None = None) -> OptimizeResults:
    """Minimise a scalar function of one or more variables, as JAX's ``scipy.optimize.minimize``.

    Args:
        fun: the objective, ``fun(x, *args) -> scalar`` for a 1-d ``x``; it must be differentiable
            (the gradient is computed with ``value_and_grad``).
        x0: the starting point, a 1-d array (real; complex for the L-BFGS method).
        args: extra positional arguments of ``fun`` (a tuple).
        method: ``"BFGS"`` or ``"l-bfgs-experimental-do-not-rely-on-this"`` (case-insensitive); required.
        tol: accepted and unused, as in JAX: set ``options["gtol"]`` instead.
        options: the method's options.  BFGS: ``maxiter`` (default ``200 * x0.size``), ``norm`` (the
            order of the gradient norm tested, default inf), ``gtol`` (default 1e-5),
            ``line_search_maxiter`` (default 10).  L-BFGS: ``maxiter``, ``norm``, ``maxcor`` (the history
            length, default 10), ``ftol``, ``gtol``, ``maxfun``, ``maxgrad``, ``maxls``.

    Returns:
        An :class:`OptimizeResults`.

    The whole search is one ``lax.while_loop``, compiled even when called eagerly (as JAX compiles an
    eager loop), and works under ``jit`` and ``vmap``; it is not differentiable.  Results can differ from SciPy's, whose line search differs in details.
    """
    del tol  # JAX accepts and ignores it too.
    if not isinstance(args, tuple):
        raise FtransTypeError(f"args argument to ftrans.scipy.optimize.minimize must be a tuple, got {args!r}")
    if not isinstance(method, str):
        raise FtransTypeError(f"ftrans.scipy.optimize.minimize: method must be a string, got "
                              f"{type(method).__name__}")
    solver = _METHODS.get(method.lower())
    if solver is None:
        raise FtransValueError(f"Method {method} not recognized; ftrans.scipy.optimize.minimize supports "
                               "'BFGS' and 'l-bfgs-experimental-do-not-rely-on-this'")
    options = {} if options is None else dict(options)
    _check_options(method, solver, options)
    check_arraylike("ftrans.scipy.optimize.minimize", x0)
    x0 = jnp.asarray(x0)
    if x0.ndim != 1:
        raise FtransShapeError(f"ftrans.scipy.optimize.minimize: x0 must be a 1-d array, got shape "
                               f"{tuple(x0.shape)}; flatten it (and reshape inside fun)")

    def objective(x: Any) -> Any:
        return fun(x, *args)

    # The search runs compiled, as JAX's eager ``while_loop`` does: its path through line searches that
    # barely succeed or fail depends on rounding, so it must round as JAX's does to take the same steps.
    r = jit(lambda x: solver(objective, x, **options))(x0)
    return OptimizeResults(x=r.x_k, success=r.converged & jnp.logical_not(r.failed), status=r.status, fun=r.f_k,
                           jac=r.g_k, hess_inv=getattr(r, "H_k", None), nfev=r.nfev, njev=r.ngev, nit=r.k)
