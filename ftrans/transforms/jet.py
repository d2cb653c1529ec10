"""Taylor-mode automatic differentiation: the jet trace, its rule table, and ``jet``.

``jet(f, primals, series)`` pushes a truncated Taylor polynomial through
``f`` in one pass: the input ``x(t) = x0 + x1 t + x2 t**2/2! + ...`` (``x0``
the primal, ``x1, x2, ...`` the series) gives the output's primal and series
up to the same order.  Order ``K`` costs ``O(K**2)`` operations per
primitive, where nesting ``jvp`` ``K`` times costs ``O(2**K)``.

Each value under the transform is a :class:`JetTracer` holding its primal
and its Taylor coefficients (or :data:`zero_series`).  Inside the trace and
its rules the coefficients are *not* scaled by factorials: term ``k`` is the
coefficient of ``t**k`` (``jet2``'s convention); ``jet`` divides its inputs
by ``k!`` and multiplies its outputs back.  A rule is

    rule(primals: list, series: list[list], **params) -> (primal_out, series_out)

where every input series is a list of ``order`` values (zeros filled in),
and ``series_out`` is a list of ``order`` values, or :data:`zero_series`
(lists of them for multiple-result primitives).  Rules compute with
``prim.bind`` and ``ftrans.core.building`` on values of the enclosing level,
as the JVP rules of ``ftrans.transforms.ad`` do, and often by running
``jet`` again on a composition of simpler primitives (``_jet_flat``).

The table covers the elementwise math, the structural and indexing
primitives, ``dot_general``/``conv_general_dilated``, the reductions and
cumulative reductions that have a Taylor rule; call-like primitives
(``jit_call``, ``remat``, ``custom_jvp_call``, ``custom_vjp_call``) are
evaluated through their bodies (a custom rule is ignored: the Taylor series
of the function is that of its body).  Like JAX's ``jet``, the table is not
complete: a primitive without a rule (the control-flow primitives, sorting,
linear algebra, ...) raises ``NotImplementedError`` naming it.  So this table
is a plain dict, not one of the registered rule tables whose coverage the
registry test enforces.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import numpy as np

from ftrans.core import building, dtypes
from ftrans.core import pytrees as tree_util
from ftrans.core.jaxpr_api import eval_jaxpr
from ftrans.core.operands import as_operand, dtype_weak, shape_of
from ftrans.core.primitive import Primitive
from ftrans.core.prims import calls as C
from ftrans.core.prims import collectives as CO
from ftrans.core.prims import convolution as CV
from ftrans.core.prims import elementwise as E
from ftrans.core.prims import fft as F
from ftrans.core.prims import indexing as I
from ftrans.core.prims import reductions as R
from ftrans.core.prims import sharding as SH
from ftrans.core.prims import sorting as SO
from ftrans.core.prims import structural as S
from ftrans.core.prims import windowed as W
from ftrans.core.trace import Trace, Tracer, as_concrete_array, aval_of, new_main, stage
from ftrans.errors import FtransTypeError, FtransValueError

__all__ = [
    "jet", "jet2", "fact", "zero_series", "zero_term", "ZeroSeries", "ZeroTerm", "jet_rules",
    "register_jet", "defzero", "deflinear", "JetTrace", "JetTracer",
]


class ZeroTerm:
    """One Taylor coefficient known to be zero."""

    def __repr__(self) -> str:
        return "zero_term"


class ZeroSeries:
    """A whole series known to be zero (the value does not depend on the inputs' series)."""

    def __repr__(self) -> str:
        return "zero_series"


zero_term = ZeroTerm()
zero_series = ZeroSeries()
tree_util.register_pytree_node(ZeroTerm, lambda z: ((), None), lambda _, xs: zero_term)
tree_util.register_pytree_node(ZeroSeries, lambda z: ((), None), lambda _, xs: zero_series)

jet_rules: dict[Primitive, Callable[..., Any]] = {}


def register_jet(prim: Primitive) -> Callable[[Callable], Callable]:
    """Decorator: ``@register_jet(sin_p)`` over ``rule(primals, series, **params)``."""

    def deco(rule: Callable) -> Callable:
        jet_rules[prim] = rule
        return rule

    return deco


def fact(n: Any) -> Any:
    """``n!`` as a float array (``exp(lgamma(n + 1))``), JAX's ``jet.fact``."""
    if isinstance(n, (int, float)) and not isinstance(n, bool):
        n1 = as_operand(float(n) + 1.0)  # as JAX's ``n + 1.``: a Python number, no promotion to check
    else:
        n1 = building.add(as_operand(n), 1.0)
    return building.apply(E.exp_p, building.apply(E.lgamma_p, n1))


# ----------------------------------------------------------------------------
# The trace


class JetTracer(Tracer):
    """A value with its Taylor coefficients: ``primal`` (of the enclosing level) and ``terms``."""

    __slots__ = ("primal", "terms")

    def __init__(self, trace: Trace, primal: Any, terms: Any):
        self._trace = trace
        self.primal = primal
        self.terms = terms

    @property
    def aval(self) -> Any:
        return aval_of(self.primal)

    def to_concrete_value(self) -> Any:
        p = self.primal
        if isinstance(p, Tracer):
            return p.to_concrete_value()
        return as_concrete_array(p)


class JetTrace(Trace):
    """Interprets each primitive by its Taylor rule; ``main.payload`` is the order."""

    __slots__ = ()

    def pure(self, val: Any) -> JetTracer:
        return JetTracer(self, val, zero_series)

    lift = pure

    def process_primitive(self, prim: Primitive, tracers: list, params: dict) -> Any:
        order = self.main.payload
        primals = [t.primal for t in tracers]
        series = [t.terms for t in tracers]
        if all(s is zero_series for s in series):
            return prim.bind(*primals, **params)  # nothing to propagate: the level below computes it
        rule = jet_rules.get(prim)
        if rule is None:
            if isinstance(prim, C.CallPrimitive) and prim.map_params is None:
                return self._call(prim, tracers, params)
            raise NotImplementedError(
                f"jet: the primitive '{prim.name}' has no Taylor-mode (jet) rule, so jet cannot propagate "
                "a series through it; rules exist for the elementwise math, structural, indexing, dot and "
                "reduction primitives (see ftrans.experimental.jet.jet_rules)"
            )
        series = [[_zeros_like(p)] * order if s is zero_series else
                  [_zeros_like(p) if t is zero_term else t for t in s]
                  for p, s in zip(primals, series)]
        primal_out, terms_out = rule(primals, series, **params)
        if prim.multiple_results:
            return [JetTracer(self, p, _fit(p, ts)) for p, ts in zip(primal_out, terms_out)]
        return JetTracer(self, primal_out, _fit(primal_out, terms_out))

    def _call(self, prim: C.CallPrimitive, tracers: list, params: dict) -> list:
        """A call-like primitive: the Taylor series of its body.

        A ``jit_call`` stays one compiled call: its body's jet (primals and non-zero series in,
        primals and non-zero series out) is staged once and called.  The other calls (``remat``,
        the custom-derivative calls, whose custom rule does not change the function's Taylor
        series) are evaluated through their bodies on the jet tracers.
        """
        body = prim.body(params)
        if prim is not C.jit_call_p:
            with prim.body_env(params):
                return eval_jaxpr(body.jaxpr, list(body.consts), *tracers)
        order = self.main.payload
        primals = [t.primal for t in tracers]
        has = [t.terms is not zero_series for t in tracers]
        flat_in = primals + [term for t in tracers if t.terms is not zero_series for term in t.terms]
        n = len(primals)
        out_has_box: list = []

        def body_jet(*flat: Any) -> list:
            rest = iter(flat[n:])
            series = [[next(rest) for _ in range(order)] if h else zero_series for h in has]
            outs, out_series = jet_flat(lambda *xs: eval_jaxpr(body.jaxpr, list(body.consts), *xs),
                                        flat[:n], series, order)
            out_has_box.append([s is not zero_series for s in out_series])
            return list(outs) + [t for s in out_series if s is not zero_series for t in s]

        with prim.body_env(params):
            new, _ = stage(body_jet, [aval_of(x) for x in flat_in])
        new, consts = C.hoist_consts(new)
        ops = [*consts, *flat_in]
        outs = prim.bind(*ops, **prim.with_body(params, new, "jet", len(ops)))
        n_out = len(body.out_avals)
        rest = iter(outs[n_out:])
        out_series = [[next(rest) for _ in range(order)] if h else zero_series for h in out_has_box[0]]
        return [JetTracer(self, p, s) for p, s in zip(outs[:n_out], out_series)]


def _zeros_like(x: Any) -> Any:
    d, _ = dtype_weak(x)
    return building.zeros(tuple(shape_of(x)), d)


def _fit(primal: Any, terms: Any) -> Any:
    """A rule's output series, each term with the primal's shape (rank-0 terms broadcast)."""
    if terms is zero_series:
        return terms
    shape = tuple(shape_of(primal))
    return [t if tuple(shape_of(t)) == shape else building.broadcast_in_dim(t, shape, ()) for t in terms]


def _unpack(main: Any, x: Any) -> tuple[Any, Any]:
    """(primal, series) of an output: values not traced at ``main`` have zero series."""
    if isinstance(x, JetTracer) and x._trace.main is main:
        return x.primal, x.terms
    return x, zero_series


def jet_flat(fun: Callable, primals: Sequence[Any], series: Sequence[Any], order: int) -> tuple[list, list]:
    """Run ``fun`` (flat values in, flat list out) on jet tracers: (primals out, series out).

    Series are unscaled (coefficients of ``t**k``); an output series may be ``zero_series``.
    """
    with new_main(JetTrace, order) as main:
        trace = main.trace
        ins = [JetTracer(trace, p, s) for p, s in zip(primals, series)]
        outs = fun(*ins)
        pairs = [_unpack(main, o) for o in outs]
    return [p for p, _ in pairs], [s for _, s in pairs]


def _jet_rule_of(fun: Callable) -> Callable:
    """A rule computing the series of ``fun`` (a composition of primitives on the operands)."""

    def rule(primals: list, series: list, **params: Any) -> tuple[Any, Any]:
        order = len(series[0])
        (out,), (terms,) = jet_flat(lambda *xs: [fun(*xs, **params)], primals, series, order)
        if terms is zero_series:
            terms = [_zeros_like(out)] * order
        return out, terms

    return rule


def _jet_of(fun: Callable, primals: list, series: list) -> tuple[Any, list]:
    """``jet2`` of ``fun`` on unscaled series, zeros instantiated."""
    return _jet_rule_of(fun)(primals, series)


# ----------------------------------------------------------------------------
# The public API


def _operand(what: str, x: Any) -> Any:
    if isinstance(x, (list, tuple, dict)) or not tree_util.treedef_is_leaf(tree_util.tree_structure(x)):
        raise FtransValueError(f"jet: {what} is not an array")
    try:
        return as_operand(x)
    except TypeError:
        raise FtransTypeError(f"jet: {what} of type {type(x).__name__} is not an array") from None


def jet(fun: Callable, primals: Sequence[Any], series: Sequence[Sequence[Any]],
        factorial_scaled: bool = True, **_: Any) -> tuple[Any, Any]:
    """Taylor-mode higher-order differentiation (JAX's ``experimental.jet.jet``).

    ``primals`` holds one array per positional argument of ``fun`` and
    ``series`` one list per argument of its ``K`` higher-order terms (all of
    the same length ``K``).  With ``factorial_scaled`` (the default) term
    ``k`` is the ``k``-th derivative of the input path, ``x(t) = x0 + x1 t +
    x2 t**2/2 + ...``; otherwise terms are the plain Taylor coefficients.
    Returns ``(fun(*primals), series_out)``: ``series_out`` has the output's
    structure, each leaf a list of ``K`` terms in the same convention.

    Primitives without a Taylor rule raise ``NotImplementedError`` naming the
    primitive.
    """
    if not callable(fun):
        raise FtransTypeError(f"jet: expected a function as the first argument, got {type(fun).__name__}")
    if not isinstance(primals, (tuple, list)) or not isinstance(series, (tuple, list)):
        raise FtransTypeError(
            f"jet: primals and series must be tuples or lists (one entry per positional argument of the "
            f"function); found {type(primals).__name__} and {type(series).__name__}"
        )
    if len(primals) != len(series):
        raise FtransValueError(
            f"jet: got {len(primals)} primals but {len(series)} series; give one series per primal"
        )
    lengths = {len(s) for s in series}
    if len(lengths) != 1:
        raise FtransValueError("jet terms have inconsistent lengths for different arguments")
    (order,) = lengths
    ps = [_operand(f"primal value at position {i}", x) for i, x in enumerate(primals)]
    ss = [[_operand(f"term {j} for argument {i}", t) for j, t in enumerate(terms)]
          for i, terms in enumerate(series)]
    if factorial_scaled:
        ss = [[_scale(t, building.div, math.factorial(k + 1))
               for k, t in enumerate(terms)] for terms in ss]
    out_tree_box: list = []

    def flat_fun(*xs: Any) -> list:
        out, tree = tree_util.tree_flatten(fun(*xs))
        out_tree_box.append(tree)
        return out

    outs, out_series = jet_flat(flat_fun, ps, ss, order)
    out_series = [[_zeros_like(p)] * order if s is zero_series else s for p, s in zip(outs, out_series)]
    if factorial_scaled:
        out_series = [[_scale(t, building.mul, math.factorial(k + 1)) for k, t in enumerate(terms)]
                      for terms in out_series]
    tree = out_tree_box[0]
    return tree_util.tree_unflatten(tree, outs), tree_util.tree_unflatten(tree, out_series)


def jet2(fun: Callable, primals: Sequence[Any], series: Sequence[Sequence[Any]], **kw: Any) -> tuple[Any, Any]:
    """``jet`` on plain Taylor coefficients (``factorial_scaled=False``)."""
    return jet(fun, primals, series, factorial_scaled=False, **kw)


def _scale(t: Any, op: Callable, factor: int) -> Any:
    """``op(t, factor)`` (divide or multiply a term by ``k!``) on a float term; nothing for ``1!``."""
    t = _inexact(t)
    return t if factor == 1 else op(t, float(factor))


def _inexact(t: Any) -> Any:
    d, _ = dtype_weak(t)
    if dtypes.is_inexact(d):
        return t
    return building.convert_element_type(t, dtypes.canonicalize(np.dtype(np.float64)))


# ----------------------------------------------------------------------------
# Helpers for the rules (values of the enclosing level)


def _ap(prim: Primitive, *args: Any, **params: Any) -> Any:
    return building.apply(prim, *args, **params)


def _sum(xs: Sequence[Any]) -> Any:
    out = xs[0]
    for x in xs[1:]:
        out = building.add(out, x)
    return out


def _from_derivative(v0: Any, c: list, u: list) -> list:
    """The series of ``y = f(x)`` from ``c``, the series of ``f'(x)`` (order ``K-1`` suffices), and ``u``
    (``[x0, x1, ..., xK]``): ``y' = f'(x) x'`` gives ``k y_k = sum_{j=1..k} j x_j c_{k-j}``."""
    v = [v0]
    for k in range(1, len(u)):
        v.append(building.div(_sum([building.mul(building.mul(u[j], float(j)), c[k - j])
                                    for j in range(1, k + 1)]), float(k)))
    return v[1:]


# ----------------------------------------------------------------------------
# Rules: zero, linear, and call-through


def defzero(prim: Primitive) -> None:
    """Piecewise-constant (comparisons, rounding, bit operations): the output series is zero."""

    def rule(primals: list, series: list, **params: Any) -> tuple[Any, Any]:
        out = prim.bind(*primals, **params)
        return out, ([zero_series] * len(out) if prim.multiple_results else zero_series)

    jet_rules[prim] = rule


def deflinear(prim: Primitive) -> None:
    """Linear in all operands jointly: each term is the primitive applied to the operands' terms."""

    def rule(primals: list, series: list, **params: Any) -> tuple[Any, Any]:
        out = prim.bind(*primals, **params)
        terms = [prim.bind(*ts, **params) for ts in zip(*series)]
        if prim.multiple_results:
            terms = [list(t) for t in zip(*terms)]
        return out, terms

    jet_rules[prim] = rule


def _deflinear_in_first(prim: Primitive, n_linear: int = 1) -> None:
    """Linear in the first ``n_linear`` operands; the rest (indices) are taken from the primals."""

    def rule(primals: list, series: list, **params: Any) -> tuple[Any, Any]:
        out = prim.bind(*primals, **params)
        rest = primals[n_linear:]
        terms = [prim.bind(*ts[:n_linear], *rest, **params) for ts in zip(*series)]
        return out, terms

    jet_rules[prim] = rule


def _scatter_like(prim: Primitive) -> None:
    """``scatter``/``scatter_add(operand, indices, updates)``: linear in operand and updates jointly."""

    def rule(primals: list, series: list, **params: Any) -> tuple[Any, Any]:
        operand, indices, updates = primals
        out = prim.bind(operand, indices, updates, **params)
        terms = [prim.bind(a, indices, b, **params) for a, _, b in zip(*series)]
        return out, terms

    jet_rules[prim] = rule


for _p in (E.le_p, E.lt_p, E.gt_p, E.ge_p, E.eq_p, E.ne_p, E.not_p, E.and_p, E.or_p, E.xor_p, E.floor_p,
           E.ceil_p, E.round_p, E.sign_p, E.stop_gradient_p, E.is_finite_p, E.shift_left_p,
           E.shift_right_arithmetic_p, E.shift_right_logical_p, E.population_count_p, S.bitcast_convert_type_p,
           R.argmax_p, R.argmin_p, E.nextafter_p, R.reduce_and_p, R.reduce_or_p, R.reduce_xor_p):
    defzero(_p)

for _p in (E.neg_p, E.real_p, E.imag_p, E.conj_p, E.complex_p, E.add_p, E.sub_p, E.copy_p,
           S.convert_element_type_p, S.broadcast_in_dim_p, S.concatenate_p, S.pad_p, S.reshape_p, S.squeeze_p,
           S.expand_dims_p, S.rev_p, S.transpose_p, S.slice_p, R.reduce_sum_p, SO.cumsum_p, F.fft_p,
           C.optimization_barrier_p, C.name_p, C.xla_metadata_value_p, W.reduce_window_sum_p, SH.sharding_constraint_p, CO.psum_p,
           CO.pvary_p, CO.psum_invariant_p, CO.preduced_p, CO.vary_unreduced_cast_p,
           CO.reduced_vary_cast_p, CO.all_gather_reduced_p, CO.unreduced_reduce_scatter_p, CO.unreduced_psum_p,
           CO.all_gather_p, E.reduce_precision_p, SH.device_put_p):
    deflinear(_p)

_deflinear_in_first(S.dynamic_slice_p, 1)
_deflinear_in_first(S.dynamic_update_slice_p, 2)
_deflinear_in_first(I.gather_p, 1)
_scatter_like(I.scatter_add_p)
_scatter_like(I.scatter_sub_p)
_scatter_like(I.scatter_p)


# ----------------------------------------------------------------------------
# Rules: products


def _bilinear(prim: Primitive) -> None:
    """``prim`` bilinear in its two operands (``mul``, ``dot_general``, convolution): Cauchy product."""

    def rule(primals: list, series: list, **params: Any) -> tuple[Any, Any]:
        x, y = primals
        u, w = [x, *series[0]], [y, *series[1]]
        out = prim.bind(x, y, **params)
        terms = [_sum([prim.bind(u[j], w[k - j], **params) for j in range(k + 1)]) for k in range(1, len(u))]
        return out, terms

    jet_rules[prim] = rule


_bilinear(E.mul_p)
_bilinear(R.dot_general_p)
_bilinear(CV.conv_general_dilated_p)


@register_jet(E.div_p)
def _div_jet(primals: list, series: list) -> tuple[Any, list]:
    # x = v * y, so x_k = sum_j v_j y_{k-j}: solve for v_k.
    x, y = primals
    u, w = [x, *series[0]], [y, *series[1]]
    v = [_ap(E.div_p, x, y)]
    for k in range(1, len(u)):
        conv = _sum([building.mul(v[j], w[k - j]) for j in range(k)])
        v.append(building.div(building.sub(u[k], conv), y))
    return v[0], v[1:]


# ----------------------------------------------------------------------------
# Rules: exp, log, powers and roots


def _exp_series(v0: Any, u: list) -> list:
    """The series of ``exp(x)`` given ``exp(x0)`` (``y' = y x'``)."""
    v = [v0]
    for k in range(1, len(u)):
        v.append(building.div(_sum([building.mul(building.mul(u[j], float(j)), v[k - j])
                                    for j in range(1, k + 1)]), float(k)))
    return v[1:]


@register_jet(E.exp_p)
def _exp_jet(primals: list, series: list) -> tuple[Any, list]:
    (x,), (s,) = primals, series
    v0 = _ap(E.exp_p, x)
    return v0, _exp_series(v0, [x, *s])


@register_jet(E.expm1_p)
def _expm1_jet(primals: list, series: list) -> tuple[Any, list]:
    (x,), (s,) = primals, series
    v0 = _ap(E.expm1_p, x)
    return v0, _exp_series(building.add(v0, 1.0), [x, *s])


@register_jet(E.exp2_p)
def _exp2_jet(primals: list, series: list) -> tuple[Any, list]:
    (x,), (s,) = primals, series
    v0 = _ap(E.exp2_p, x)
    ln2 = math.log(2.0)
    return v0, _exp_series(v0, [x, *[building.mul(t, ln2) for t in s]])


def _log_series(v0: Any, u: list) -> list:
    """The series of ``log(x)`` (``x y' = x'``)."""
    v = [v0]
    for k in range(1, len(u)):
        conv = _sum([building.mul(building.mul(v[j], float(j)), u[k - j]) for j in range(1, k)]) if k > 1 else None
        num = u[k] if conv is None else building.sub(u[k], building.div(conv, float(k)))
        v.append(building.div(num, u[0]))
    return v[1:]


@register_jet(E.log_p)
def _log_jet(primals: list, series: list) -> tuple[Any, list]:
    (x,), (s,) = primals, series
    return _ap(E.log_p, x), _log_series(_ap(E.log_p, x), [x, *s])


@register_jet(E.log1p_p)
def _log1p_jet(primals: list, series: list) -> tuple[Any, list]:
    (x,), (s,) = primals, series
    v0 = _ap(E.log1p_p, x)
    return v0, _log_series(v0, [building.add(x, 1.0), *s])


@register_jet(E.pow_p)
def _pow_jet(primals: list, series: list) -> tuple[Any, list]:
    # x ** y = exp(y log x): the series of y log x, then exp's recurrence from the primal x ** y.
    x, y = primals
    _, z = _jet_of(lambda a, b: _ap(E.mul_p, b, _ap(E.log_p, a)), primals, series)
    v0 = _ap(E.pow_p, x, y)
    return v0, _exp_series(v0, [None, *z])


def _pow_by_squaring(x: Any, n: int) -> Any:
    if n < 0:
        return _pow_by_squaring(_ap(E.div_p, 1.0, x), -n)
    if n == 1:
        return x
    if n % 2 == 0:
        return _pow_by_squaring(_ap(E.mul_p, x, x), n // 2)
    return _ap(E.mul_p, x, _pow_by_squaring(_ap(E.mul_p, x, x), (n - 1) // 2))


@register_jet(E.integer_pow_p)
def _integer_pow_jet(primals: list, series: list, *, y: int) -> tuple[Any, Any]:
    (x,) = primals
    if y == 0:
        return _ap(E.integer_pow_p, x, y=0), zero_series
    return _jet_of(lambda a: _pow_by_squaring(a, y), primals, series)


@register_jet(E.sqrt_p)
def _sqrt_jet(primals: list, series: list) -> tuple[Any, list]:
    # v * v = x: 2 v0 v_k = x_k - sum_{j=1..k-1} v_j v_{k-j}.
    (x,), (s,) = primals, series
    u = [x, *s]
    v = [_ap(E.sqrt_p, x)]
    two_v0 = building.mul(v[0], 2.0)
    for k in range(1, len(u)):
        rest = [building.mul(v[j], v[k - j]) for j in range(1, k)]
        num = building.sub(u[k], _sum(rest)) if rest else u[k]
        v.append(building.div(num, two_v0))
    return v[0], v[1:]


@register_jet(E.rsqrt_p)
def _rsqrt_jet(primals: list, series: list) -> tuple[Any, list]:
    out, terms = _jet_of(lambda a: _ap(E.div_p, 1.0, _ap(E.sqrt_p, a)), primals, series)
    return _ap(E.rsqrt_p, primals[0]), terms


@register_jet(E.cbrt_p)
def _cbrt_jet(primals: list, series: list) -> tuple[Any, list]:
    # v = x ** r with r = 1/3: x v' = r v x', so k x0 v_k = sum_{j=1..k} (r j - (k - j)) x_j v_{k-j}.
    (x,), (s,) = primals, series
    u = [x, *s]
    r = 1.0 / 3.0
    v = [_ap(E.cbrt_p, x)]
    for k in range(1, len(u)):
        acc = _sum([building.mul(building.mul(u[j], r * j - (k - j)), v[k - j]) for j in range(1, k + 1)])
        v.append(building.div(acc, building.mul(x, float(k))))
    return v[0], v[1:]


# ----------------------------------------------------------------------------
# Rules: logistic, tanh, trigonometric and hyperbolic functions


@register_jet(E.logistic_p)
def _logistic_taylor(primals: Sequence[Any], series: Sequence[list], **_: Any) -> tuple[Any, list]:
    """logistic' = v (1 - v): the series of ``v (1 - v)`` is built alongside ``v``'s."""
    (x,), (s,) = primals, series
    x = as_operand(x)
    u = [x, *[as_operand(t) for t in s]]
    v = [_ap(E.logistic_p, x)]
    one_minus_v0 = building.sub(1.0, v[0])
    e = [building.mul(v[0], one_minus_v0)]
    for k in range(1, len(u)):
        v.append(building.div(_sum([building.mul(building.mul(u[j], float(j)), e[k - j])
                                    for j in range(1, k + 1)]), float(k)))
        e.append(building.sub(building.mul(one_minus_v0, v[k]),
                              _sum([building.mul(v[j], v[k - j]) for j in range(1, k + 1)])))
    return v[0], v[1:]


@register_jet(E.tanh_p)
def _tanh_jet(primals: list, series: list) -> tuple[Any, list]:
    # tanh(x) = 2 logistic(2x) - 1.
    (x,), (s,) = primals, series
    _, terms = _logistic_taylor([building.mul(x, 2.0)], [[building.mul(t, 2.0) for t in s]])
    return _ap(E.tanh_p, x), [building.mul(t, 2.0) for t in terms]


def _sin_cos_series(x: Any, s: list, sin: Primitive, cos: Primitive, sign: float) -> tuple[Any, list, Any, list]:
    """Series of (sin, cos) or (sinh, cosh) together: s' = c x', c' = sign * s x'."""
    u = [x, *s]
    sv, cv = [_ap(sin, x)], [_ap(cos, x)]
    for k in range(1, len(u)):
        sv.append(building.div(_sum([building.mul(building.mul(u[j], float(j)), cv[k - j])
                                     for j in range(1, k + 1)]), float(k)))
        cv.append(building.div(_sum([building.mul(building.mul(u[j], float(j)), sv[k - j])
                                     for j in range(1, k + 1)]), float(k) * sign))
    return sv[0], sv[1:], cv[0], cv[1:]


def _sincos_rule(sin: Primitive, cos: Primitive, sign: float, which: int) -> Callable:
    def rule(primals: list, series: list) -> tuple[Any, list]:
        s0, ss, c0, cs = _sin_cos_series(primals[0], series[0], sin, cos, sign)
        return (s0, ss) if which == 0 else (c0, cs)

    return rule


jet_rules[E.sin_p] = _sincos_rule(E.sin_p, E.cos_p, -1.0, 0)
jet_rules[E.cos_p] = _sincos_rule(E.sin_p, E.cos_p, -1.0, 1)
jet_rules[E.sinh_p] = _sincos_rule(E.sinh_p, E.cosh_p, 1.0, 0)
jet_rules[E.cosh_p] = _sincos_rule(E.sinh_p, E.cosh_p, 1.0, 1)


@register_jet(E.tan_p)
def _tan_jet(primals: list, series: list) -> tuple[Any, list]:
    _, terms = _jet_of(lambda a: _ap(E.div_p, _ap(E.sin_p, a), _ap(E.cos_p, a)), primals, series)
    return _ap(E.tan_p, primals[0]), terms


def _def_deriv(prim: Primitive, deriv: Callable[[Any], Any]) -> None:
    """A rule from the first derivative: the series of ``deriv(x)`` (by jet), then ``_from_derivative``."""

    def rule(primals: list, series: list) -> tuple[Any, list]:
        (x,), (s,) = primals, series
        c0, cs = _jet_of(deriv, primals, [s[:-1] if len(s) > 1 else s])
        v0 = _ap(prim, x)
        return v0, _from_derivative(v0, [c0, *cs], [x, *s])

    jet_rules[prim] = rule


def _sq(x: Any) -> Any:
    return _ap(E.mul_p, x, x)


_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
_def_deriv(E.erf_p, lambda x: _ap(E.mul_p, _ap(E.exp_p, _ap(E.neg_p, _sq(x))), _TWO_OVER_SQRT_PI))
_def_deriv(E.erfc_p, lambda x: _ap(E.mul_p, _ap(E.exp_p, _ap(E.neg_p, _sq(x))), -_TWO_OVER_SQRT_PI))
_def_deriv(E.asinh_p, lambda x: _ap(E.rsqrt_p, _ap(E.add_p, _sq(x), 1.0)))
_def_deriv(E.acosh_p, lambda x: _ap(E.rsqrt_p, _ap(E.sub_p, _sq(x), 1.0)))
_def_deriv(E.atanh_p, lambda x: _ap(E.div_p, 1.0, _ap(E.sub_p, 1.0, _sq(x))))
_def_deriv(E.asin_p, lambda x: _ap(E.rsqrt_p, _ap(E.sub_p, 1.0, _sq(x))))
_def_deriv(E.acos_p, lambda x: _ap(E.neg_p, _ap(E.rsqrt_p, _ap(E.sub_p, 1.0, _sq(x)))))
_def_deriv(E.atan_p, lambda x: _ap(E.div_p, 1.0, _ap(E.add_p, _sq(x), 1.0)))


@register_jet(E.erf_inv_p)
def _erf_inv_jet(primals: list, series: list) -> tuple[Any, list]:
    # y = erf_inv(x): y' = (sqrt(pi)/2) exp(y**2) x'.  The derivative's series depends on y's own
    # lower terms, so y, y**2, exp(y**2) are advanced together one order at a time.
    (x,), (s,) = primals, series
    u = [x, *s]
    half_sqrt_pi = math.sqrt(math.pi) / 2.0
    y = [_ap(E.erf_inv_p, x)]
    sq = [_sq(y[0])]
    ex = [_ap(E.exp_p, sq[0])]
    c = [building.mul(ex[0], half_sqrt_pi)]
    for k in range(1, len(u)):
        y.append(building.div(_sum([building.mul(building.mul(u[j], float(j)), c[k - j])
                                    for j in range(1, k + 1)]), float(k)))
        if k == len(u) - 1:
            break
        sq.append(_sum([building.mul(y[j], y[k - j]) for j in range(k + 1)]))
        ex.append(building.div(_sum([building.mul(building.mul(sq[j], float(j)), ex[k - j])
                                     for j in range(1, k + 1)]), float(k)))
        c.append(building.mul(ex[k], half_sqrt_pi))
    return y[0], y[1:]


@register_jet(E.atan2_p)
def _atan2_jet(primals: list, series: list) -> tuple[Any, list]:
    # atan2(x, y) moves like atan(x / y).
    x, y = primals
    z0, zs = _jet_of(lambda a, b: _ap(E.div_p, a, b), primals, series)
    c0, cs = _jet_of(lambda a: _ap(E.div_p, 1.0, _ap(E.add_p, _sq(a), 1.0)), [z0], [zs[:-1] if len(zs) > 1 else zs])
    v0 = _ap(E.atan2_p, x, y)
    return v0, _from_derivative(v0, [c0, *cs], [z0, *zs])


# ----------------------------------------------------------------------------
# Rules: piecewise functions (abs, max, min, clamp, rem, select)


def _full_shape(x: Any, shape: tuple) -> Any:
    return x if tuple(shape_of(x)) == shape else building.broadcast_in_dim(x, shape, ())


@register_jet(E.abs_p)
def _abs_jet(primals: list, series: list) -> tuple[Any, list]:
    (x,), (s,) = primals, series
    d, _ = dtype_weak(x)
    if not dtypes.is_inexact(d) or np.issubdtype(d, np.complexfloating):
        raise NotImplementedError(f"jet: the primitive 'abs' has no Taylor-mode rule for {d.name} operands")
    sign = building.select(_ap(E.lt_p, x, 0.0), building.full((), -1, d), building.full((), 1, d))
    return _ap(E.abs_p, x), [building.mul(t, sign) for t in s]


def _choose_rule(prim: Primitive, pick_first: Primitive) -> Callable:
    """``max``/``min``: the chosen operand's terms; where the operands tie, their average (as JAX)."""

    def rule(primals: list, series: list) -> tuple[Any, list]:
        x, y = primals
        shape = tuple(np.broadcast_shapes(tuple(shape_of(x)), tuple(shape_of(y))))
        x, y = _full_shape(x, shape), _full_shape(y, shape)
        first = _ap(pick_first, x, y)
        tie = _ap(E.eq_p, x, y)

        def pick(a: Any, b: Any) -> Any:
            a, b = _full_shape(a, shape), _full_shape(b, shape)
            chosen = building.select(first, a, b)
            return building.select(tie, building.div(building.add(a, b), 2.0), chosen)

        return prim.bind(*primals), [pick(a, b) for a, b in zip(*series)]

    return rule


jet_rules[E.max_p] = _choose_rule(E.max_p, E.gt_p)
jet_rules[E.min_p] = _choose_rule(E.min_p, E.lt_p)


@register_jet(S.clamp_p)
def _clamp_jet(primals: list, series: list) -> tuple[Any, list]:
    # clamp(lo, x, hi) = min(max(lo, x), hi), ties averaged as in max and min.
    return _jet_of(lambda lo, x, hi: _ap(E.min_p, *_bcast(_ap(E.max_p, *_bcast(lo, x)), hi)), primals, series)


def _bcast(a: Any, b: Any) -> tuple[Any, Any]:
    shape = tuple(np.broadcast_shapes(tuple(shape_of(a)), tuple(shape_of(b))))
    return _full_shape(a, shape), _full_shape(b, shape)


@register_jet(E.rem_p)
def _rem_jet(primals: list, series: list) -> tuple[Any, list]:
    # rem(x, y) = x - y * trunc(x / y), and trunc is piecewise constant.
    x, y = primals
    q = _ap(E.div_p, x, y)
    trunc = building.select(_ap(E.lt_p, q, 0.0), _ap(E.ceil_p, q), _ap(E.floor_p, q))
    terms = [building.sub(a, building.mul(b, trunc)) for a, b in zip(*series)]
    return _ap(E.rem_p, x, y), terms


@register_jet(S.select_n_p)
def _select_n_jet(primals: list, series: list) -> tuple[Any, list]:
    which, *cases = primals
    return S.select_n_p.bind(which, *cases), [S.select_n_p.bind(which, *ts[1:]) for ts in zip(*series)]


# ----------------------------------------------------------------------------
# Rules: reductions


def _reduce_choose_rule(prim: Primitive) -> Callable:
    """``reduce_max``/``reduce_min``: the terms at the chosen positions (averaged over ties, as JAX)."""

    def rule(primals: list, series: list, *, axes: tuple, **params: Any) -> tuple[Any, list]:
        (x,), (s,) = primals, series
        out = prim.bind(x, axes=axes, **params)
        shape = tuple(shape_of(x))
        kept = [i for i in range(len(shape)) if i not in axes]
        at = building.eq(x, building.broadcast_in_dim(out, shape, kept))
        d, _ = dtype_weak(s[0])
        mask = building.convert_element_type(at, d)
        counts = R.reduce_sum_p.bind(mask, axes=tuple(axes))
        return out, [building.div(R.reduce_sum_p.bind(building.mul(t, mask), axes=tuple(axes)), counts) for t in s]

    return rule


jet_rules[R.reduce_max_p] = _reduce_choose_rule(R.reduce_max_p)
jet_rules[R.reduce_min_p] = _reduce_choose_rule(R.reduce_min_p)


def _prefix_scan(combine: Primitive, identity: float, x: Any, axis: int, reverse: bool) -> Any:
    """Inclusive prefix combination along ``axis`` by doubling (Hillis-Steele), built from slice,
    pad and ``combine`` only, so the jet of it needs no rule for the cumulative primitive itself."""
    shape = tuple(shape_of(x))
    n = shape[axis]
    if reverse:
        x = S.rev_p.bind(x, dimensions=(axis,))
    d, _ = dtype_weak(x)
    if not dtypes.is_inexact(d) and np.isinf(identity):
        info = np.iinfo(d) if d != np.bool_ else None
        identity = (info.min if identity < 0 else info.max) if info is not None else bool(identity > 0)
    fill = building.full((), identity, d)
    step = 1
    while step < n:
        start = [0] * len(shape)
        limit = list(shape)
        limit[axis] = n - step
        head = S.slice_p.bind(x, start_indices=tuple(start), limit_indices=tuple(limit), strides=None)
        config = [(0, 0, 0)] * len(shape)
        config[axis] = (step, 0, 0)
        shifted = S.pad_p.bind(head, fill, padding_config=tuple(config))
        x = _ap(combine, shifted, x)
        step *= 2
    if reverse:
        x = S.rev_p.bind(x, dimensions=(axis,))
    return x


def _cumulative_rule(prim: Primitive, combine: Primitive, identity: float) -> Callable:
    def rule(primals: list, series: list, *, axis: int, reverse: bool) -> tuple[Any, list]:
        _, terms = _jet_of(partial(_prefix_scan, combine, identity, axis=axis, reverse=reverse), primals, series)
        return prim.bind(primals[0], axis=axis, reverse=reverse), terms

    return rule


jet_rules[SO.cumprod_p] = _cumulative_rule(SO.cumprod_p, E.mul_p, 1.0)
jet_rules[SO.cummax_p] = _cumulative_rule(SO.cummax_p, E.max_p, -np.inf)
jet_rules[SO.cummin_p] = _cumulative_rule(SO.cummin_p, E.min_p, np.inf)


def _horner(x: Any, *coeffs: Any, unroll: Any = None) -> Any:
    """``polynomial``'s recurrence in ``mul`` and ``add`` (from the leading coefficient), for its series."""
    y = coeffs[-1]
    for c in reversed(coeffs[:-1]):
        y = E.add_p.bind(E.mul_p.bind(y, x), c)
    return y


def _polynomial_jet(primals: list, series: list, **params: Any) -> tuple[Any, list]:
    _, terms = _jet_of(_horner, primals, series)
    return E.polynomial_p.bind(*primals, **params), terms


jet_rules[E.polynomial_p] = _polynomial_jet
