"""Numerical checks of ftrans's derivatives: ``check_grads`` (the contract of ``jax.test_util.check_grads``).

Why this exists: every derivative ftrans computes comes from per-primitive JVP
rules, partial evaluation and transpose rules.  A wrong rule gives wrong
numbers silently, so tests need an independent referee.  ``check_grads``
compares

* forward mode: ``jvp(f)`` in a random direction against central finite
  differences of ``f`` itself (which needs no derivative rule at all), and
* reverse mode: ``vjp(f)`` against the forward derivative through the defining
  identity of a transpose, ``<ct, J t> = <J^T ct, t>``, for a random tangent
  ``t`` and cotangent ``ct``.  ``J t`` is taken both from ``jvp`` (an exact
  check of the transpose rules, tight up to rounding) and from finite
  differences (so reverse mode is checked against something that does not
  share the JVP rules it is built from),

and, for ``order > 1``, repeats both checks on the derivative functions
themselves (``(primals, tangents) -> jvp(f, primals, tangents)`` and
``(primals, ct) -> pullback(ct)``), which is what makes ``grad(grad(f))``,
``jacfwd(jacrev(f))`` and Hessian-vector products trustworthy.

The pairing used for complex values is the real bilinear form
``<a, b> = Re(sum(a * b))``, under which ftrans's (and JAX's) transpose rules
are transposes: ``conj`` is its own transpose and ``real`` transposes to
``complex(ct, 0)``.

Finite differences are only as good as the arithmetic they run in, so the
default step and tolerances depend on the least precise floating dtype among
the inputs and outputs of the function being checked: float64 checks are
tight, float32 checks loose, float16/bfloat16 checks very loose.  Pass ``eps``,
``atol`` and ``rtol`` (a number, or a mapping from dtype to number) to override.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ftrans.core import dtypes
from ftrans.core import pytrees as tree_util
from ftrans.core.array import Array
from ftrans.core.trace import Tracer

__all__ = ["check_grads", "check_jvp", "check_vjp", "default_tolerance", "default_eps"]

Tol = float | Mapping[Any, float] | None

# Step of the central difference, by the floating kind of the least precise value involved.  The
# truncation error of a central difference is O(eps**2) and its rounding error O(ulp / eps).  float32
# takes JAX's step (a larger one crosses jumps JAX's tests sit near; differencing along the realised step
# keeps the rounding error within the float32 tolerance); the half-precision steps are larger than JAX's
# because 1e-4 is below their resolution.
_EPS: dict[str, float] = {"float64": 1e-5, "float32": 1e-4, "float16": 3e-2, "bfloat16": 3e-2}
# Default atol = rtol, by the same key.  float32 differences of functions that sum many terms carry
# rounding errors of about 1e-4 relative to the function's magnitude, hence the loose float32 default.
_TOL: dict[str, float] = {"float64": 1e-5, "float32": 1e-2, "float16": 1e-1, "bfloat16": 2e-1}
_RANK = ["bfloat16", "float16", "float32", "float64"]


def _kind(d: np.dtype) -> str:
    """The real floating kind of an inexact dtype (complex64 -> float32)."""
    if d == dtypes.bfloat16:
        return "bfloat16"
    if d.kind == "c":
        return np.dtype(f"f{d.itemsize // 2}").name
    return d.name


def _weakest(dts: Sequence[np.dtype]) -> str:
    kinds = [_kind(d) for d in dts if dtypes.is_inexact(d)]
    if not kinds:
        return "float64"
    return min(kinds, key=_RANK.index)


def default_tolerance(dtype: Any) -> float:
    """The default ``atol`` and ``rtol`` of ``check_grads`` for values of ``dtype``."""
    return _TOL[_kind(np.dtype(dtype))]


def default_eps(dtype: Any) -> float:
    """The default finite-difference step of ``check_grads`` for inputs of ``dtype``."""
    return _EPS[_kind(np.dtype(dtype))]


def _resolve(tol: Tol, kind: str, table: dict[str, float]) -> float:
    if tol is None:
        return table[kind]
    if isinstance(tol, Mapping):
        for k, v in tol.items():
            if _kind(np.dtype(k)) == kind:
                return float(v)
        return table[kind]
    return float(tol)


# ----------------------------------------------------------------------------
# Small helpers on flat lists of leaves


def _to_array(where: str, path: str, x: Any) -> Any:
    """An ftrans array for a leaf (Python scalars get ftrans's default, weakly typed dtype)."""
    if isinstance(x, (Array, Tracer)):
        return x
    from ftrans.core.operands import as_operand

    try:
        return as_operand(x)
    except TypeError:
        raise TypeError(f"{where}: argument leaf {path} of type {type(x).__name__} is not an array") from None


def _np(x: Any) -> np.ndarray:
    return np.asarray(x)


def _wide(x: np.ndarray) -> np.ndarray:
    """A float64/complex128 copy, for accurate comparisons and inner products."""
    x = np.asarray(x)
    return x.astype(np.complex128 if x.dtype.kind == "c" else np.float64)


def _random_like(rng: np.random.Generator, x: Any) -> Array:
    a = _np(x)
    v = rng.standard_normal(a.shape)
    if a.dtype.kind == "c":
        v = v + 1j * rng.standard_normal(a.shape)
    return Array._new(np.asarray(v).astype(a.dtype), False)


def _shift(x: Any, t: Any, step: float) -> Array:
    """``x + step * t`` in ``x``'s own dtype (keeping its weak type)."""
    a = _np(x)
    v = (_wide(a) + step * _wide(_np(t))).astype(a.dtype)
    return Array._new(v, bool(getattr(x, "weak_type", False)))


def _step(plus: Any, minus: Any, eps: float, t: Any) -> Array:
    """The direction a central difference between the rounded points ``plus`` and ``minus`` took (``t``
    where the points are not finite)."""
    a = _np(plus)
    with np.errstate(invalid="ignore"):
        v = (_wide(a) - _wide(_np(minus))) / (2 * eps)
    v = np.where(np.isfinite(a) & np.isfinite(_np(minus)), v, _wide(_np(t))).astype(a.dtype)
    return Array._new(v, False)


def _inexact_out(leaves: list) -> list[bool]:
    return [dtypes.is_inexact(_np(o).dtype) for o in leaves]


def _pair(a: list, b: list) -> tuple[float, float]:
    """``Re(sum(a * b))`` over all leaves, and ``sum(|a| * |b|)`` (the scale its rounding error has)."""
    total, scale = 0.0, 0.0
    for x, y in zip(a, b):
        xw, yw = _wide(_np(x)), _wide(_np(y))
        total += float(np.real(np.sum(xw * yw)))
        scale += float(np.sum(np.abs(xw) * np.abs(yw)))
    return total, scale


def _path_str(tree: Any, i: int) -> str:
    paths = [tree_util.keystr(p) for p, _ in tree_util.tree_flatten_with_path(
        tree_util.tree_unflatten(tree, list(range(tree.num_leaves))))[0]]
    return paths[i] if i < len(paths) and paths[i] else f"leaf {i}"


def _assert_close(what: str, got: list, want: list, out_tree: Any, atol: float, rtol: float) -> None:
    for i, (g, w) in enumerate(zip(got, want)):
        gw, ww = _wide(_np(g)), _wide(_np(w))
        if gw.shape != ww.shape:
            raise AssertionError(f"{what}: output {_path_str(out_tree, i)} has shape {gw.shape}, "
                                 f"expected {ww.shape}")
        # NaN matches NaN and an infinity matches itself, as in numpy's assert_allclose.
        same = (np.isnan(gw) & np.isnan(ww)) | (gw == ww)
        with np.errstate(invalid="ignore"):
            diff = np.where(same, 0.0, np.abs(gw - ww))
            bound = atol + rtol * np.abs(ww)
        bad = ~same & ~(diff <= bound)  # a NaN in only one of them is bad as well
        if np.any(bad):
            worst = float(np.max(np.where(np.isnan(diff), np.inf, diff)))
            rel = float(np.max(np.where(bad, diff / np.maximum(np.abs(ww), 1e-300), 0.0)))
            raise AssertionError(
                f"{what}: output {_path_str(out_tree, i)} (shape {gw.shape}) differs at {int(np.sum(bad))} "
                f"of {bad.size} elements: max abs discrepancy {worst:.3g}, max relative discrepancy "
                f"{rel:.3g} (atol={atol:g}, rtol={rtol:g})\n  got:      {np.array2string(gw, threshold=20)}"
                f"\n  expected: {np.array2string(ww, threshold=20)}"
            )


def _assert_scalar_close(what: str, got: float, want: float, scale: float, atol: float, rtol: float) -> None:
    if got == want or (np.isnan(got) and np.isnan(want)):
        return
    diff = abs(got - want)
    if not diff <= atol + rtol * max(abs(want), scale):
        raise AssertionError(
            f"{what}: inner products differ: {got!r} vs {want!r}, max abs discrepancy {diff:.3g} "
            f"(atol={atol:g}, rtol={rtol:g}, scale of the sum {scale:.3g})"
        )


# ----------------------------------------------------------------------------
# The checks


class _Setup:
    """Flattened, array-converted arguments of one check, and the flat function."""

    def __init__(self, f: Callable, args: Sequence[Any], where: str):
        if not isinstance(args, (tuple, list)):
            raise TypeError(f"{where}: args must be a tuple or list of the function's positional arguments, "
                            f"got {type(args).__name__}")
        paths, self.in_tree = tree_util.tree_flatten_with_path(tuple(args))
        self.leaves = [_to_array(where, "args" + tree_util.keystr(p), x) for p, x in paths]
        for (p, _), x in zip(paths, self.leaves):
            d = _np(x).dtype
            if not dtypes.is_inexact(d):
                raise TypeError(
                    f"{where}: every argument must be floating or complex, but args{tree_util.keystr(p)} "
                    f"has dtype {d.name}; close over integer arguments (functools.partial) instead"
                )
        self.f = f
        self.out_tree: Any = None

    def args(self, leaves: list) -> tuple:
        return tree_util.tree_unflatten(self.in_tree, leaves)

    def call(self, leaves: list) -> list:
        out = self.f(*self.args(leaves))
        flat, self.out_tree = tree_util.tree_flatten(out)
        return flat

    def numerical_jvp(self, tangents: list, eps: float) -> tuple[list, list]:
        """Central differences along ``tangents``: ``(J t', directions t')``.

        The points ``x +- eps * t`` are rounded to the inputs' dtypes, so the difference measures
        the derivative along the step actually taken, ``t' = (x+ - x-) / (2 eps)``, not along ``t``
        (in float32 the two differ by ``ulp(x) / eps``, a few percent of a small ``t``).  ``t'`` is
        returned, and the derivatives under test are taken along it: what is compared then differs
        only by the rounding of ``f``'s outputs and the truncation error of the difference."""
        xs_plus = [_shift(x, t, eps) for x, t in zip(self.leaves, tangents)]
        xs_minus = [_shift(x, t, -eps) for x, t in zip(self.leaves, tangents)]
        # (at an infinite input no step is measurable, inf - inf: the derivative is taken along t itself)
        steps = [_step(p, m, eps, t) for p, m, t in zip(xs_plus, xs_minus, tangents)]
        plus, minus = self.call(xs_plus), self.call(xs_minus)
        return [(_wide(_np(p)) - _wide(_np(m))) / (2 * eps) for p, m in zip(plus, minus)], steps


def _settings(s: _Setup, outs: list, atol: Tol, rtol: Tol, eps: float | None) -> tuple[float, float, float]:
    dts = [_np(x).dtype for x in s.leaves] + [_np(o).dtype for o in outs]
    kind = _weakest(dts)
    in_kind = _weakest([_np(x).dtype for x in s.leaves])
    return (_resolve(atol, kind, _TOL), _resolve(rtol, kind, _TOL),
            float(eps) if eps is not None else _EPS[in_kind])


def check_jvp(f: Callable, args: Sequence[Any], atol: Tol = None, rtol: Tol = None, eps: float | None = None,
              err_msg: str = "forward mode (JVP), order 1", seed: int = 0) -> None:
    """Check ``ftrans.jvp(f)`` in a random direction against central finite differences of ``f``."""
    from ftrans.transforms.ad import jvp

    s = _Setup(f, args, "check_jvp")
    rng = np.random.default_rng(seed)
    want_out = s.call(s.leaves)
    a, r, e = _settings(s, want_out, atol, rtol, eps)
    num, tangents = s.numerical_jvp([_random_like(rng, x) for x in s.leaves], e)
    p_out, t_out = jvp(f, s.args(s.leaves), s.args(tangents))
    p_flat = tree_util.tree_leaves(p_out)
    _assert_close(f"check_grads, {err_msg}: the primal output of jvp differs from f(*args)",
                  p_flat, want_out, s.out_tree, a, r)
    keep = _inexact_out(want_out)
    t_flat = [t for t, k in zip(tree_util.tree_leaves(t_out), keep) if k]
    num = [n for n, k in zip(num, keep) if k]
    _assert_close(f"check_grads, {err_msg}: the JVP differs from central finite differences (eps={e:g})",
                  t_flat, num, _sub_tree(s.out_tree, keep), a, r)


def check_vjp(f: Callable, args: Sequence[Any], atol: Tol = None, rtol: Tol = None, eps: float | None = None,
              err_msg: str = "reverse mode (VJP), order 1", seed: int = 0, use_jvp: bool = True) -> None:
    """Check ``ftrans.vjp(f)`` through ``<ct, J t> = <J^T ct, t>``, with ``J t`` from central finite
    differences and (unless ``use_jvp=False``, for functions with only a reverse-mode rule such as
    ``custom_vjp`` ones) from ``jvp``."""
    from ftrans.transforms.ad import float0 as _float0
    from ftrans.transforms.ad import jvp
    from ftrans.transforms.reverse import vjp

    s = _Setup(f, args, "check_vjp")
    rng = np.random.default_rng(seed + 1)
    want_out = s.call(s.leaves)
    a, r, e = _settings(s, want_out, atol, rtol, eps)
    p_out, pullback = vjp(f, *s.args(s.leaves))
    out_tree = s.out_tree
    _assert_close(f"check_grads, {err_msg}: the primal output of vjp differs from f(*args)",
                  tree_util.tree_leaves(p_out), want_out, out_tree, a, r)
    keep = _inexact_out(want_out)
    cts = [_random_like(rng, o) if k else np.zeros(_np(o).shape, _float0) for o, k in zip(want_out, keep)]
    ct_in = tree_util.tree_leaves(pullback(tree_util.tree_unflatten(out_tree, cts)))
    num_jt, tangents = s.numerical_jvp([_random_like(rng, x) for x in s.leaves], e)
    lhs, scale = _pair(ct_in, tangents)
    kept_cts = [c for c, k in zip(cts, keep) if k]
    if use_jvp:
        _, t_out = jvp(f, s.args(s.leaves), s.args(tangents))
        rhs, rhs_scale = _pair(kept_cts, [t for t, k in zip(tree_util.tree_leaves(t_out), keep) if k])
        scale = max(scale, rhs_scale)
        _assert_scalar_close(f"check_grads, {err_msg}: <vjp(ct), t> differs from <ct, jvp(t)>",
                             lhs, rhs, scale, a, r)
    num, num_scale = _pair(kept_cts, [n for n, k in zip(num_jt, keep) if k])
    _assert_scalar_close(f"check_grads, {err_msg}: <vjp(ct), t> differs from <ct, finite-difference "
                         f"J t> (eps={e:g})", lhs, num, max(scale, num_scale), a, r)


def _sub_tree(tree: Any, keep: list[bool]) -> Any:
    if all(keep):
        return tree
    return tree_util.tree_structure([0] * sum(keep))


def check_grads(f: Callable, args: Sequence[Any], order: int, modes: Sequence[str] = ("fwd", "rev"),
                atol: Tol = None, rtol: Tol = None, eps: float | None = None) -> None:
    """Check the derivatives of ``f`` at ``args`` numerically, up to ``order``, in forward and/or reverse mode.

    ``args`` is the tuple of ``f``'s positional arguments (pytrees of floating or complex arrays).
    ``modes`` holds ``"fwd"`` (``jvp`` against central finite differences) and/or ``"rev"`` (``vjp``
    against the forward derivative, ``<ct, J t> = <J^T ct, t>``).  ``order=2`` also checks the
    derivatives of the derivative functions, and so on.  ``atol``/``rtol`` (a number, or a mapping
    from dtype to number) and the finite-difference step ``eps`` default by dtype (see the module
    docstring).  Raises ``AssertionError`` naming the mode, the order and the largest discrepancy.
    """
    if isinstance(modes, str):
        modes = (modes,)
    bad = [m for m in modes if m not in ("fwd", "rev")]
    if bad or not modes:
        raise ValueError(f"check_grads: modes must be a non-empty subset of ('fwd', 'rev'), got {modes!r}")
    if not isinstance(order, int) or isinstance(order, bool) or order < 1:
        raise ValueError(f"check_grads: order must be a positive int, got {order!r}")
    _check_grads(f, tuple(args), order, tuple(modes), atol, rtol, eps, 1, "", 0)


def _label(mode: str, level: int, chain: str) -> str:
    name = "forward mode (JVP)" if mode == "fwd" else "reverse mode (VJP)"
    of = f" of {chain}" if chain else ""
    return f"{name}{of}, order {level}"


def _check_grads(f: Callable, args: tuple, order: int, modes: tuple, atol: Tol, rtol: Tol,
                 eps: float | None, level: int, chain: str, seed: int) -> None:
    from ftrans.transforms.ad import float0 as _float0
    from ftrans.transforms.ad import jvp
    from ftrans.transforms.reverse import vjp

    n = len(tree_util.tree_leaves(args))
    if "fwd" in modes:
        check_jvp(f, args, atol, rtol, eps, _label("fwd", level, chain), seed)
        if order > 1:
            s = _Setup(f, args, "check_grads")
            rng = np.random.default_rng(seed + 7)
            tangents = [_random_like(rng, x) for x in s.leaves]

            def f_jvp(*primals_and_tangents: Any) -> tuple:
                leaves = tree_util.tree_leaves(primals_and_tangents)
                p_out, t_out = jvp(f, s.args(leaves[:n]), s.args(leaves[n:]))
                ts = [t for t in tree_util.tree_leaves(t_out) if dtypes.is_inexact(_np_dtype(t))]
                return p_out, ts

            _check_grads(f_jvp, (*s.args(s.leaves), *s.args(tangents)), order - 1, modes, atol, rtol, eps,
                         level + 1, "JVP" + (f" of {chain}" if chain else ""), seed + 11)
    if "rev" in modes:
        # jvp is a second referee only where forward mode is being checked too: a rev-only check must
        # work for functions that have no forward-mode rule (custom_vjp).
        check_vjp(f, args, atol, rtol, eps, _label("rev", level, chain), seed, use_jvp="fwd" in modes)
        if order > 1:
            s = _Setup(f, args, "check_grads")
            outs = s.call(s.leaves)
            out_tree = s.out_tree
            keep = _inexact_out(outs)
            rng = np.random.default_rng(seed + 13)
            cts = [_random_like(rng, o) for o, k in zip(outs, keep) if k]

            def f_vjp(*primals_and_cts: Any) -> Any:
                leaves = tree_util.tree_leaves(primals_and_cts)
                _, pullback = vjp(f, *s.args(leaves[:n]))
                it = iter(leaves[n:])
                full = [next(it) if k else np.zeros(_np(o).shape, _float0) for o, k in zip(outs, keep)]
                return pullback(tree_util.tree_unflatten(out_tree, full))

            _check_grads(f_vjp, (*s.args(s.leaves), *cts), order - 1, modes, atol, rtol, eps,
                         level + 1, "VJP" + (f" of {chain}" if chain else ""), seed + 17)


def _np_dtype(x: Any) -> np.dtype:
    if isinstance(x, (Array, Tracer)):
        return np.dtype(x.dtype)
    return np.asarray(x).dtype
