"""JAX's ``experimental.ode``: ``odeint``, an adaptive Dormand-Prince Runge-Kutta solver.

``odeint(func, y0, t, *args)`` integrates ``dy/dt = func(y, t, *args)`` from
``t[0]`` and returns ``y`` at every time of ``t``.  The method is the
embedded 5(4) pair of Dormand and Prince (Math. Comp. 46, 1986) with the
error-per-step controller and the initial step of Hairer, Norsett and Wanner
(Solving ODEs I, II.4); values between steps come from the method's
4th-order dense output.  The solver is written in ``ftrans.numpy`` and
``ftrans.lax`` control flow (``scan`` over output times, a ``while_loop`` of
steps inside, a ``fori_loop`` over stages), so it runs under ``jit`` and
``vmap`` and takes the same steps as JAX's solver: results agree with JAX to
float rounding.

Reverse-mode derivatives (``grad``, ``vjp``) use the adjoint method of Chen
et al. (Neural ODEs, 2018, appendix C) through ``custom_vjp``: the state, its
cotangent and the cotangents of ``t[0]`` and ``args`` are integrated
backwards in time between consecutive output times by ``odeint`` itself.
Values ``func`` closes over are made explicit arguments by
``closure_convert``, so they are differentiated too.  As in JAX there is no
forward mode (``jvp``, ``jacfwd``): it raises a ``TypeError``.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from functools import partial
from typing import Any

from ftrans import lax
from ftrans import numpy as jnp
from ftrans.core import pytrees as tree_util
from ftrans.core.config import config_context
from ftrans.core.operands import dtype_weak
from ftrans.errors import FtransTypeError
from ftrans.flatten_util import ravel_pytree
from ftrans.transforms.batching import vmap
from ftrans.transforms.custom_derivatives import closure_convert, custom_vjp
from ftrans.transforms.jit import jit
from ftrans.transforms.reverse import vjp

__all__ = ["odeint"]

# The solver's own dot products are computed at full precision (as in JAX), whatever the user's default.
_highest = partial(config_context("default_matmul_precision"), "highest")


def _on_flat_state(func: Callable, unravel: Callable) -> Callable:
    """``func`` over a pytree state, as a function of the flat state vector returning a flat vector."""

    def flat_func(y_flat: Any, *args: Any) -> Any:
        dy, _ = ravel_pytree(func(unravel(y_flat), *args))
        return dy

    return flat_func


# ----------------------------------------------------------------------------
# Dormand-Prince 5(4) tableau, dense output and step-size control

# Nodes c_2..c_7 of the stages after the first (the 7th is the first of the next step: FSAL).
_C = (1 / 5, 3 / 10, 4 / 5, 8 / 9, 1.0, 1.0, 0.0)
# Rows 2..7 of the Runge-Kutta matrix (padded to 7 columns).
_A = (
    (1 / 5, 0, 0, 0, 0, 0, 0),
    (3 / 40, 9 / 40, 0, 0, 0, 0, 0),
    (44 / 45, -56 / 15, 32 / 9, 0, 0, 0, 0),
    (19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729, 0, 0, 0),
    (9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656, 0, 0),
    (35 / 384, 0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84, 0),
)
# 5th-order weights, and their difference from the embedded 4th-order ones (the error estimate).
_B5 = (35 / 384, 0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84, 0)
_B_ERR = (35 / 384 - 1951 / 21600, 0, 500 / 1113 - 22642 / 50085, 125 / 192 - 451 / 720,
          -2187 / 6784 - -12231 / 42400, 11 / 84 - 649 / 6300, -1.0 / 60.0)
# Weights giving y at the step's midpoint (Shampine's dense output), halved.
_B_MID = (6025192743 / 30085553152 / 2, 0, 51252292925 / 65400821598 / 2, -2691868925 / 45128329728 / 2,
          187940372067 / 1594534317056 / 2, -1776094331 / 19743644256 / 2, 11237099 / 235043384 / 2)


def _dopri_step(func: Callable, y0: Any, f0: Any, t0: Any, dt: Any) -> tuple[Any, Any, Any, Any]:
    """One step of size ``dt``: ``(y1, f(y1, t1), error estimate, stage derivatives k[7, n])``."""
    c = jnp.array(_C, dtype=dt.dtype)
    a = jnp.array(_A, dtype=f0.dtype)
    b5 = jnp.array(_B5, dtype=f0.dtype)
    b_err = jnp.array(_B_ERR, dtype=f0.dtype)
    h = dt.astype(f0.dtype)

    def stage(i: Any, k: Any) -> Any:
        ti = t0 + dt * c[i - 1]
        yi = y0 + h * jnp.dot(a[i - 1, :], k)
        return k.at[i, :].set(func(yi, ti))

    k = jnp.zeros((7, f0.shape[0]), f0.dtype).at[0, :].set(f0)
    k = lax.fori_loop(1, 7, stage, k)
    y1 = h * jnp.dot(b5, k) + y0
    return y1, k[-1], h * jnp.dot(b_err, k), k


def _dense_output(y0: Any, y1: Any, k: Any, dt: Any) -> Any:
    """Coefficients (highest power first) of the quartic through the step, on ``s = (t - t0) / dt``.

    The quartic matches y and dy/dt at both ends and y at the midpoint.
    """
    h = dt.astype(y0.dtype)
    y_mid = y0 + h * jnp.dot(jnp.array(_B_MID, dtype=y0.dtype), k)
    dy0, dy1 = h * k[0], h * k[-1]
    return jnp.asarray([
        -2.0 * dy0 + 2.0 * dy1 - 8.0 * y0 - 8.0 * y1 + 16.0 * y_mid,
        5.0 * dy0 - 3.0 * dy1 + 18.0 * y0 + 14.0 * y1 - 32.0 * y_mid,
        -4.0 * dy0 + dy1 - 11.0 * y0 - 5.0 * y1 + 16.0 * y_mid,
        dy0,
        y0,
    ])


def _first_step(func: Callable, t0: Any, y0: Any, order: int, rtol: float, atol: float, f0: Any) -> Any:
    """A starting step size from the norms of y0, f(y0) and a finite-difference second derivative."""
    dtype = jnp.result_type(y0, f0)
    if not jnp.issubdtype(dtype, jnp.inexact):
        dtype = jnp.result_type(dtype, float)
    y0, f0 = y0.astype(dtype), f0.astype(dtype)
    scale = (atol + jnp.abs(y0) * rtol).astype(dtype)
    d0 = jnp.linalg.norm(y0 / scale)
    d1 = jnp.linalg.norm(f0 / scale)
    h0 = jnp.where((d0 < 1e-5) | (d1 < 1e-5), 1e-6, 0.01 * d0 / d1)
    f1 = func(y0 + h0.astype(dtype) * f0, t0 + h0)
    d2 = jnp.linalg.norm((f1 - f0) / scale) / h0
    h1 = jnp.where((d1 <= 1e-15) & (d2 <= 1e-15),
                   jnp.maximum(1e-6, h0 * 1e-3),
                   (0.01 / jnp.maximum(d1, d2)) ** (1.0 / (order + 1.0)))
    return jnp.minimum(100.0 * h0, h1)


def _abs2(x: Any) -> Any:
    if jnp.iscomplexobj(x):
        return x.real ** 2 + x.imag ** 2
    return x ** 2


def _error_ratio(err: Any, rtol: float, atol: float, y0: Any, y1: Any) -> Any:
    """RMS of the error estimate over the mixed absolute/relative tolerance (accept the step when <= 1)."""
    tol = atol + rtol * jnp.maximum(jnp.abs(y0), jnp.abs(y1))
    return jnp.sqrt(jnp.mean(_abs2(err / tol.astype(err.dtype))))


def _next_step(dt: Any, ratio: Any, safety: float = 0.9, ifactor: float = 10.0, dfactor: float = 0.2,
               order: float = 5.0) -> Any:
    """The next step size: grow by at most ``ifactor``, shrink by at most ``dfactor`` after a rejection."""
    dfactor = jnp.where(ratio < 1, 1.0, dfactor)
    factor = jnp.minimum(ifactor, jnp.maximum(ratio ** (-1.0 / order) * safety, dfactor))
    return jnp.where(ratio == 0, dt * ifactor, dt * factor)


def _horner(coeffs: Any, s: Any) -> Any:
    out = jnp.zeros_like(coeffs[0])
    for i in range(coeffs.shape[0]):
        out = out * s + coeffs[i]
    return out


# ----------------------------------------------------------------------------
# The solver and its adjoint


def odeint(func: Callable, y0: Any, t: Any, *args: Any, rtol: float = 1.4e-8, atol: float = 1.4e-8,
           mxstep: float = float("inf"), hmax: float = float("inf")) -> Any:
    """Integrate ``dy/dt = func(y, t, *args)`` with adaptive Dormand-Prince steps (JAX's ``odeint``).

    Args:
      func: the time derivative, ``func(y, t, *args)``, returning a pytree of
        ``y0``'s structure.
      y0: the initial state at ``t[0]``: an array or a pytree of arrays.
      t: strictly increasing float times at which to report the solution.
      *args: extra arguments of ``func`` (arrays, scalars or pytrees of them);
        they are differentiated like ``y0``.
      rtol: relative local error tolerance.
      atol: absolute local error tolerance.
      mxstep: the most steps taken between two consecutive times of ``t``.
      hmax: the largest step size.

    Returns:
      The solution at each time of ``t``: ``y0``'s structure, each leaf with a
      new leading axis of length ``len(t)``.
    """
    for leaf in tree_util.tree_leaves(args):
        try:
            dtype_weak(leaf)
        except TypeError:
            raise FtransTypeError(
                f"The contents of odeint *args must be arrays or scalars, but got {leaf!r}."
            ) from None
    t = jnp.asarray(t)
    if not jnp.issubdtype(t.dtype, jnp.floating):
        raise FtransTypeError(f"t must be an array of floats, but got {t} of dtype {t.dtype}.")
    if t.ndim != 1:
        raise FtransTypeError(f"t must be a rank-1 array of times, but got shape {t.shape}.")
    converted, consts = closure_convert(func, y0, t[0], *args)
    return _odeint_jit(converted, rtol, atol, mxstep, hmax, y0, t, *args, *consts)


@partial(jit, static_argnums=(0, 1, 2, 3, 4))
def _odeint_jit(func: Callable, rtol: float, atol: float, mxstep: float, hmax: float, y0: Any, ts: Any,
                *args: Any) -> Any:
    y0_flat, unravel = ravel_pytree(y0)
    with _highest():
        out = _odeint(_on_flat_state(func, unravel), rtol, atol, mxstep, hmax, y0_flat, ts, *args)
    return vmap(unravel)(out)


def _solve(func: Callable, rtol: float, atol: float, mxstep: float, hmax: float, y0: Any, ts: Any,
           *args: Any) -> Any:
    f = lambda y, t: func(y, t, *args)  # noqa: E731

    def to_next_time(carry: list, target_t: Any) -> tuple[list, Any]:
        def keep_stepping(state: list) -> Any:
            i, _, _, t, dt, _, _ = state
            return (t < target_t) & (i < mxstep) & (dt > 0)

        def step(state: list) -> list:
            i, y, fy, t, dt, last_t, coeffs = state
            y1, f1, err, k = _dopri_step(f, y, fy, t, dt)
            ratio = _error_ratio(err, rtol, atol, y, y1)
            new_coeffs = _dense_output(y, y1, k, dt)
            new_dt = jnp.clip(_next_step(dt, ratio), min=0.0, max=hmax)
            accepted = [i + 1, y1, f1, t + dt, new_dt, t, new_coeffs]
            rejected = [i + 1, y, fy, t, new_dt, last_t, coeffs]
            ok = ratio <= 1.0
            return [jnp.where(ok, a, r) for a, r in zip(accepted, rejected)]

        _, *carry = lax.while_loop(keep_stepping, step, [0] + carry)
        _, _, t, _, last_t, coeffs = carry
        s = (target_t - last_t) / (t - last_t)
        return carry, _horner(coeffs, s.astype(coeffs.dtype))

    f0 = f(y0, ts[0])
    dt = jnp.clip(_first_step(f, ts[0], y0, 4, rtol, atol, f0), min=0.0, max=hmax)
    coeffs = jnp.stack([y0] * 5)
    _, ys = lax.scan(to_next_time, [y0, f0, ts[0], dt, ts[0], coeffs], ts[1:])
    return jnp.concatenate((y0[None], ys))


_odeint = custom_vjp(_solve, nondiff_argnums=(0, 1, 2, 3, 4))


def _odeint_fwd(func: Callable, rtol: float, atol: float, mxstep: float, hmax: float, y0: Any, ts: Any,
                *args: Any) -> tuple[Any, tuple]:
    ys = _odeint(func, rtol, atol, mxstep, hmax, y0, ts, *args)
    return ys, (ys, ts, args)


def _odeint_bwd(func: Callable, rtol: float, atol: float, mxstep: float, hmax: float, res: tuple,
                g: Any) -> tuple:
    ys, ts, args = res

    def adjoint_dynamics(state: tuple, neg_t: Any, *args: Any) -> tuple:
        # Integrated in negated time; (y, a, a_t, a_args) with a = dL/dy.
        y, y_bar, *_ = state
        y_dot, pullback = vjp(func, y, -neg_t, *args)
        return (-y_dot, *pullback(y_bar))

    def back_one_interval(carry: tuple, i: Any) -> tuple[tuple, Any]:
        y_bar, t0_bar, args_bar = carry
        # Moving output time t_i moves y(t_i) along f: its cotangent is <f(y_i, t_i), g_i>.
        t_bar = jnp.dot(func(ys[i], ts[i], *args), g[i]).real
        t0_bar = t0_bar - t_bar
        _, y_bar, t0_bar, args_bar = odeint(
            adjoint_dynamics, (ys[i], y_bar, t0_bar, args_bar), jnp.array([-ts[i], -ts[i - 1]]),
            *args, rtol=rtol, atol=atol, mxstep=mxstep, hmax=hmax)
        y_bar, t0_bar, args_bar = tree_util.tree_map(operator.itemgetter(1), (y_bar, t0_bar, args_bar))
        return (y_bar + g[i - 1], t0_bar, args_bar), t_bar

    init = (g[-1], jnp.zeros((), ts.dtype), tree_util.tree_map(jnp.zeros_like, args))
    with _highest():
        (y_bar, t0_bar, args_bar), rev_ts_bar = lax.scan(
            back_one_interval, init, jnp.arange(len(ts) - 1, 0, -1))
    ts_bar = jnp.concatenate([jnp.reshape(t0_bar, (1,)), rev_ts_bar[::-1]])
    return (y_bar, ts_bar, *args_bar)


_odeint.defvjp(_odeint_fwd, _odeint_bwd)
