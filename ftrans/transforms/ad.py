"""Forward-mode autodiff: the JVP trace, its rule table, and ``ftrans.jvp``.

DESIGN.md section 4: every primitive has a JVP rule in ``jvp_rules``; reverse
mode is built later from these rules (linearize, then transpose).  A rule is

    rule(primals: list, tangents: list, **params) -> (primal_out, tangent_out)

(lists of outputs for ``multiple_results`` primitives).  ``primals`` are values
of the enclosing level (Arrays, or tracers of outer transforms); ``tangents``
are values of the same kind or ``Zero(aval)``, a symbolic zero.  Rules compute
with ``prim.bind`` and ``ftrans.core.building`` (transforms sit below ``lax``
and ``numpy`` and never import them), so they run eagerly, under
``jit`` and under ``make_jaxpr`` alike.  Symbolic zeros are kept symbolic as
long as possible: a rule returns ``Zero`` whenever every tangent its output
depends on is zero, so unused derivatives are never materialised.

Integer and boolean values have tangents of dtype ``float0`` (as in JAX);
inside ftrans such tangents are always ``Zero``.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ftrans.core import building, dtypes
from ftrans.core import operands as _operands
from ftrans.core import pytrees as tree_util
from ftrans.core import traceback_util as _tb
from ftrans.core.array import Array, jax_array_argument, jax_array_argument_error
from ftrans.core.avals import ShapedArray
from ftrans.core.ir import ClosedJaxpr
from ftrans.core.jaxpr_api import eval_jaxpr
from ftrans.core.keys import is_user_edtype
from ftrans.core.primitive import Primitive, not_supported, rule_table
from ftrans.core.prims import structural as S
from ftrans.core.trace import (
    Trace,
    Tracer,
    as_concrete_array,
    aval_of,
    check_outputs,
    describe_pair_candidate,
    invalid_value_error,
    is_jax_value,
    new_main,
    short_repr,
    stage,
    transform_name_stack,
)
from ftrans.core.trace import state as _trace_state
from ftrans.errors import FtransTypeError, FtransValueError

__all__ = [
    "Zero", "float0", "instantiate", "jvp_rules", "register_jvp", "defjvp_linear", "defjvp_zero",
    "JVPTrace", "JVPTracer", "jvp", "jvp_jaxpr", "tangent_aval", "zeros_like_aval", "add_tangents",
    "rewritten_primal", "given_scalars", "is_python_scalar",
]

# JAX's dtype for the tangents of integer and boolean values: zero bytes per element.
float0 = np.dtype([("float0", np.void, 0)])

jvp_rules: dict[Primitive, Callable[..., Any]] = rule_table("jvp", owner=__name__)


# ----------------------------------------------------------------------------
# Symbolic zeros


class Zero:
    """A tangent known to be zero everywhere; ``aval`` is the tangent's abstract value."""

    __slots__ = ("aval",)

    def __init__(self, aval: ShapedArray):
        self.aval = aval

    @staticmethod
    def from_primal_value(x: Any) -> Zero:
        if isinstance(x, np.ndarray) and x.dtype == float0:  # a float0 value (a cotangent of an integer)
            return Zero(ShapedArray(x.shape, float0))
        return Zero(tangent_aval(aval_of(x)))

    @property
    def shape(self) -> tuple[int, ...]:
        return self.aval.shape

    @property
    def dtype(self) -> np.dtype:
        return self.aval.dtype

    def __repr__(self) -> str:
        return f"Zero({self.aval.str_short()})"


def tangent_aval(aval: ShapedArray) -> ShapedArray:
    """The abstract value of a tangent of ``aval``: itself if inexact, else float0 (a user-defined extended
    dtype: its rules' ``tangent_dtype``, float0 without one)."""
    if not isinstance(aval.dtype, np.dtype) and is_user_edtype(aval.dtype):
        td = edtype_tangent_dtype(aval.dtype)
        return ShapedArray(aval.shape, td, False)
    if dtypes.is_inexact(aval.dtype):
        return aval
    return ShapedArray(aval.shape, float0, False)


def edtype_tangent_dtype(d: Any) -> Any:
    """The tangent dtype of user-defined extended dtype ``d``: its rules' ``tangent_dtype(d)``, else float0."""
    rule = getattr(d._rules, "tangent_dtype", None)
    if rule is None:
        return float0
    td = rule(d)
    return td if is_user_edtype(td) else np.dtype(td)


def zeros_like_aval(aval: ShapedArray) -> Any:
    """Zeros of ``aval`` built from a scalar literal, so staging records one broadcast, not a constant."""
    if not isinstance(aval.dtype, np.dtype) and is_user_edtype(aval.dtype):  # its rules' ``zero(dtype)``, as JAX's tangent zeros
        z = aval.dtype._rules.zero(aval.dtype)
        return z if aval.shape == () else building.broadcast_in_dim(z, aval.shape, ())
    if aval.dtype == float0:
        return np.zeros(aval.shape, float0)
    z = Array._new(np.zeros((), aval.dtype), aval.weak_type)
    if aval.shape == ():
        return z
    return building.broadcast_in_dim(z, aval.shape, ())


def instantiate(t: Any) -> Any:
    """Turn a symbolic ``Zero`` into actual zeros; other tangents pass through."""
    if type(t) is Zero:
        z = zeros_like_aval(t.aval)
        sh = t.aval.typed_sharding
        if sh is not None and (sh.spec.unreduced or sh.spec.reduced):  # typed zeros (JAX's unreduced/reduced)
            from ftrans.core.prims.sharding import sharding_constraint_p

            z = sharding_constraint_p.bind(z, sharding=sh)
        return z
    return t


def broadcast_to(t: Any, shape: tuple[int, ...]) -> Any:
    """A rank-0 tangent broadcast to ``shape`` (elementwise primitives accept rank-0 operands)."""
    if type(t) is Zero:
        return Zero(t.aval.update(shape=shape))
    if tuple(aval_of(t).shape) == tuple(shape):
        return t
    return building.broadcast_in_dim(t, shape, ())


def add_tangents(a: Any, b: Any) -> Any:
    """``a + b`` where either may be a symbolic zero (then the other is returned); tangents of a user-defined
    extended dtype add with its rules' ``add(dtype, a, b)``, as JAX's do."""
    if type(a) is Zero:
        return b
    if type(b) is Zero:
        return a
    d = getattr(a, "dtype", None)
    if d is not None and not isinstance(d, np.dtype) and is_user_edtype(d):
        return d._rules.add(d, a, b)
    return building.add(a, b)


# ----------------------------------------------------------------------------
# Registering rules


def register_jvp(prim: Primitive) -> Callable[[Callable], Callable]:
    """Decorator: ``@register_jvp(sin_p)`` over ``rule(primals, tangents, **params)``."""

    def deco(rule: Callable) -> Callable:
        jvp_rules[prim] = rule
        return rule

    return deco


def _zero_like_out(out: Any) -> Any:
    if isinstance(out, (list, tuple)):
        return [Zero.from_primal_value(o) for o in out]
    return Zero.from_primal_value(out)


def defjvp_zero(prim: Primitive) -> None:
    """The outputs have zero derivative (comparisons, rounding, argmax, iota, ...), never an error."""

    def rule(primals: list, tangents: list, **params: Any) -> tuple[Any, Any]:
        out = prim.bind(*primals, **params)
        return out, _zero_like_out(out)

    rule.__name__ = f"{prim.name}_jvp_zero"
    jvp_rules[prim] = rule


def defjvp_linear(prim: Primitive) -> None:
    """The primitive is linear in all operands jointly: the tangent is the primitive of the tangents."""

    def rule(primals: list, tangents: list, **params: Any) -> tuple[Any, Any]:
        out = prim.bind(*primals, **params)
        if all(type(t) is Zero for t in tangents):
            return out, _zero_like_out(out)
        return out, prim.bind(*[instantiate(t) for t in tangents], **params)

    rule.__name__ = f"{prim.name}_jvp_linear"
    jvp_rules[prim] = rule


# ----------------------------------------------------------------------------
# The trace


class JVPTracer(Tracer):
    """A value carrying its tangent: ``primal`` (of the enclosing level) and ``tangent`` (or Zero).

    ``given`` is ``None``, or, for a tracer standing for a Python scalar exactly as the user (or a custom
    rule) gave it, ``(primal, tangent)`` with those Python values (``tangent`` ``None`` when only the primal
    was one): as JAX does, ``jvp``/``vjp``/``linearize`` hand such a value back unchanged when the
    function returns it untouched, and a custom rule receives it as given.  Rules see only ``primal`` and
    ``tangent``, which are arrays."""

    __slots__ = ("primal", "tangent", "given")

    def __init__(self, trace: Trace, primal: Any, tangent: Any, given: tuple | None = None):
        self._trace = trace
        self.primal = primal
        self.tangent = tangent
        self.given = given

    @property
    def aval(self) -> ShapedArray:
        return aval_of(self.primal)

    def _short_repr(self) -> str:
        # JAX's two names: a GradTracer while linearizing (grad, vjp: the tangent is a staged linear
        # value, printed as its type), a JVPTracer otherwise.
        t = self.tangent
        if isinstance(t, Tracer) and type(t._trace).__name__ == "LinearizeTrace":
            return f"GradTracer(primal={short_repr(self.primal)}, typeof(tangent)={aval_of(t).str_short()})"
        return f"JVPTracer(primal={short_repr(self.primal)}, tangent={short_repr(t)})"

    def full_lower(self) -> Any:
        """The primal when the tangent is a symbolic zero (or carries nothing, float0): what a mutable
        ref created outside this differentiation may hold (``core/ref.py``)."""
        t = self.tangent
        if type(t) is Zero or getattr(t, "dtype", None) == float0:
            return self.primal
        return self

    def to_concrete_value(self) -> Any:
        # The primal is the value; outside jit it is concrete (an Array), so Python control flow on a
        # value being differentiated follows it, as in JAX (and define-by-run systems).
        p = self.primal
        if isinstance(p, Tracer):
            return p.to_concrete_value()
        return as_concrete_array(p)


class JVPTrace(Trace):
    """Interprets each primitive by its JVP rule on (primal, tangent) pairs."""

    __slots__ = ()

    def pure(self, val: Any) -> JVPTracer:
        return JVPTracer(self, val, Zero.from_primal_value(val))

    lift = pure

    def process_primitive(self, prim: Primitive, tracers: list, params: dict) -> Any:
        primals = [t.primal for t in tracers]
        tangents = [t.tangent for t in tracers]
        if all(type(t) is Zero for t in tangents):
            # Nothing to differentiate: run at the level below (the result's tangent is zero).
            return prim.bind(*primals, **params)
        rule = jvp_rules.get(prim)
        if rule is None:
            reason = not_supported.get((prim, "jvp"))
            if reason is not None:
                raise NotImplementedError(f"differentiation (jvp) of {prim.name}: {reason}")
            raise NotImplementedError(f"Differentiation rule for '{prim.name}' not implemented (the primitive has "
                                      "no JVP rule: register one with ftrans.interpreters.ad.primitive_jvps or "
                                      "ftrans.transforms.ad.register_jvp)")
        primal_out, tangent_out = rule(primals, tangents, **params)
        if prim.multiple_results:
            return [JVPTracer(self, p, t) for p, t in zip(primal_out, tangent_out)]
        return JVPTracer(self, primal_out, tangent_out)


def tangents_as_primals(args: Sequence[Any]) -> Sequence[Any]:
    """``args`` with each value being differentiated whose primal is weakly typed and whose tangent is not
    given a weakly typed tangent: what JAX's jitted library functions see inside (``jvp`` of a jitted function
    types each tangent as its primal). ``args`` itself when there is none (the usual case).

    Only at the innermost level of a nested differentiation whose primal is not itself being differentiated,
    and not from inside a staging context opened within it:
    under an outer ``grad``/``jvp`` the tangent keeps its own type (there JAX's result depends on how its jitted
    function is linearized in turn, which ftrans's inlined library functions do not reproduce)."""
    out = None
    for i, a in enumerate(args):
        if type(a) is not JVPTracer:
            continue
        t = a.tangent
        if type(t) is Zero or type(a.primal) is JVPTracer:
            continue
        if _trace_state.dynamic.level > a._trace.main.level:
            # a staging context (a jit's body) opened inside this differentiation: the conversion would be
            # staged there and its result would escape with this outer tracer; the body's own JVP types it
            continue
        pa = aval_of(a.primal)
        if not pa.weak_type:
            continue
        ta = aval_of(t)
        if ta.weak_type or ta.dtype != pa.dtype:
            continue
        if out is None:
            out = list(args)
        out[i] = JVPTracer(a._trace, a.primal, S.convert_element_type_p.bind(t, new_dtype=ta.dtype, weak_type=True))
    return args if out is None else out


def _unpack(main: Any, x: Any) -> tuple[Any, Any]:
    """(primal, tangent) of an output: values not traced at ``main`` have zero tangent; a Python scalar
    given for it comes back as given."""
    if isinstance(x, JVPTracer) and x._trace.main is main:
        g = x.given
        if g is not None:
            return g[0], (x.tangent if g[1] is None else g[1])
        return x.primal, x.tangent
    return x, Zero.from_primal_value(x)


_PY_SCALARS = (bool, int, float, complex)


def is_python_scalar(x: Any) -> bool:
    """Whether ``x`` is a Python scalar (``bool``/``int``/``float``/``complex`` itself, no subclass)."""
    return type(x) in _PY_SCALARS


def given_scalars(primals: Sequence[Any], tangents: Sequence[Any] | None = None) -> list:
    """Per input leaf, ``(primal, tangent)`` for a Python scalar primal as given (``tangent`` ``None`` unless
    it is a Python scalar too), else ``None``: what :func:`jvp_flat`'s ``given`` takes."""
    ts = tangents if tangents is not None else [None] * len(primals)
    return [(p, t if is_python_scalar(t) else None) if is_python_scalar(p) else None for p, t in zip(primals, ts)]


def _strip(main: Any, x: Any) -> Any:
    return x.primal if isinstance(x, JVPTracer) and x._trace.main is main else x


def jvp_flat(fun: Callable, primals: Sequence[Any], tangents: Sequence[Any],
             given: Sequence[tuple | None] | None = None) -> tuple[list, list, Any]:
    """JVP of ``fun`` on flat lists (tangents may be Zero): primal outs, tangent outs (may be Zero), extra.

    ``fun`` returns ``(flat_outs, extra)``; ``extra`` (auxiliary data) is
    returned with tracers of this level replaced by their primals.  ``given``
    (from :func:`given_scalars`) marks inputs that were Python scalars: an
    output that is such an input untouched comes back as that scalar.
    """
    if given is None:
        given = [None] * len(primals)
    with new_main(JVPTrace) as main:
        trace = main.trace
        ins = [JVPTracer(trace, p, t, g) for p, t, g in zip(primals, tangents, given)]
        outs, extra = fun(*ins)
        pairs = [_unpack(main, o) for o in outs]
        extra = tree_util.tree_map(lambda x: _strip(main, x), extra)
    return [p for p, _ in pairs], [t for _, t in pairs], extra


# ----------------------------------------------------------------------------
# JVP of a jaxpr (the call-like and control-flow rules differentiate their bodies with it)


_jvp_jaxpr_cache: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def jvp_jaxpr(closed: ClosedJaxpr, nonzeros: Sequence[bool],
              instantiate: Sequence[bool] | bool = False) -> tuple[ClosedJaxpr, list[bool]]:
    """A jaxpr computing ``closed``'s outputs and tangents.

    Inputs: all primals, then the tangents of the inputs marked in
    ``nonzeros``.  Outputs: all primal outputs, then the tangents that are not
    symbolically zero, or that ``instantiate`` asks for (as zeros: control-flow
    rules need the same tangent outputs from every branch or iteration); the
    returned list marks which.  The result is cached per (jaxpr, nonzeros,
    instantiate) unless a captured constant is a tracer.
    """
    if isinstance(instantiate, bool):
        instantiate = [instantiate] * len(closed.out_avals)
    inst = tuple(bool(i) for i in instantiate)
    key = (tuple(nonzeros), inst)
    per = _jvp_jaxpr_cache.get(closed)
    if per is not None and key in per:
        return per[key]
    in_avals = list(closed.in_avals)
    tan_avals = [tangent_aval(a) for a, nz in zip(in_avals, nonzeros) if nz]
    out_nz_box: list = []
    n_in = len(in_avals)

    def fun(*args: Any) -> list:
        primals, nz_tangents = args[:n_in], iter(args[n_in:])
        tangents = [next(nz_tangents) if nz else Zero(tangent_aval(a))
                    for a, nz in zip(in_avals, nonzeros)]

        def body(*ins: Any) -> tuple[list, None]:
            return eval_jaxpr(closed.jaxpr, list(closed.consts), *ins), None

        p_out, t_out, _ = jvp_flat(body, primals, tangents)
        t_out = [zeros_like_aval(t.aval) if i and type(t) is Zero and t.aval.dtype != float0 else t
                 for t, i in zip(t_out, inst)]
        out_nz_box.append([type(t) is not Zero for t in t_out])
        return list(p_out) + [t for t in t_out if type(t) is not Zero]

    new, consts = stage(fun, in_avals + tan_avals)
    result = (new, out_nz_box[0])
    if not any(isinstance(c, Tracer) for c in consts):
        _jvp_jaxpr_cache.setdefault(closed, {})[key] = result
    return result


# ----------------------------------------------------------------------------
# Differentiating the program jit will run


def rewritten_primal(flat_fun: Callable, primals: Sequence[Any], out_tree_box: list) -> Callable:
    """``flat_fun`` (flat ins -> ``(flat outs, aux)``), or, while ``jit`` stages a program whose
    passes change values (``stability``), the same function staged, rewritten by those passes
    and replayed: what ``jvp``/``vjp``/``grad``/``linearize`` then differentiate.

    ``jit(grad(f))`` thus differentiates the stable form of ``f`` (``x - logsumexp(x)``, not
    ``log(exp(x) / sum(exp(x)))``), as ``grad(jit(f))`` differentiates ``jit``'s rewritten
    body.  Only inside a ``jit`` trace (``make_jaxpr`` shows what was written, eager runs
    it) and only on traced primals: concrete ones may drive Python control flow in
    ``flat_fun``, which staging on abstract values cannot follow.  ``flat_fun`` runs once
    either way (staged, then the jaxpr is replayed); if staging fails, or the passes
    change nothing, the program as written is what is differentiated.
    """
    rewrite = _trace_state.primal_rewriter
    if rewrite is None or not any(isinstance(p, Tracer) for p in primals):
        return flat_fun
    aux_box: list = []

    def staged(*ins: Any) -> list:
        flat, aux = flat_fun(*ins)
        leaves, tree = tree_util.tree_flatten(aux)
        traced = [i for i, leaf in enumerate(leaves) if isinstance(leaf, Tracer)]
        aux_box.append((len(flat), leaves, tree, traced))
        return list(flat) + [leaves[i] for i in traced]

    try:
        closed, _ = stage(staged, [aval_of(p) for p in primals])
    except Exception:  # noqa: BLE001 - what fails staged fails the same way as written, with its own error
        del out_tree_box[:]
        return flat_fun
    new = rewrite(closed)
    if new is None:
        new = closed
    n, aux_leaves, aux_tree, traced = aux_box[0]

    def replay(*ins: Any) -> tuple[list, Any]:
        outs = eval_jaxpr(new.jaxpr, list(new.consts), *ins)
        leaves = list(aux_leaves)
        for i, v in zip(traced, outs[n:]):
            leaves[i] = v
        return outs[:n], tree_util.tree_unflatten(aux_tree, leaves)

    return replay


# ----------------------------------------------------------------------------
# The public API


def _check_arg_list(name: str, primals: Any, tangents: Any) -> None:
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise FtransTypeError(
            f"primal and tangent arguments to jax.{name} must be tuples or lists; found "
            f"{type(primals).__name__} and {type(tangents).__name__}. (one entry per positional argument of the "
            "function)"
        )


def _tangent_in(path: str, p: Any, t: Any) -> Any:
    """Check one tangent against its primal (JAX's rules) and return it, or Zero for float0."""
    pa = aval_of(p)
    want = tangent_aval(pa).dtype
    t_dtype = np.asarray(t).dtype if isinstance(t, np.ndarray) and t.dtype == float0 else None
    if t_dtype is None:
        try:
            ta = aval_of(t)
        except TypeError:
            raise FtransTypeError(
                f"jvp: tangent {path} of type {type(t).__name__} is not an array"
            ) from None
        t_shape, t_dtype = ta.shape, ta.dtype
    else:
        t_shape = np.shape(t)
    if t_dtype != want:
        extra = ""
        if want == float0:
            extra = (" (an integer or bool primal has tangent dtype float0: pass numpy.zeros(shape, "
                     "dtype=jax.dtypes.float0), the same dtype as ftrans.transforms.ad.float0)")
        raise FtransTypeError(
            f"primal and tangent arguments to jax.jvp do not match; dtypes must be equal, or in case of "
            f"int/bool primal dtype the tangent dtype must be float0. At {path}: the primal has dtype "
            f"{pa.dtype.name}, so the tangent must have dtype {_dname(want)}, but it has dtype "
            f"{_dname(t_dtype)}{extra}"
        )
    if tuple(t_shape) != tuple(pa.shape):
        raise FtransValueError(  # a ValueError, as JAX's
            f"jvp called with different primal and tangent shapes; at {path}: primal shape "
            f"{tuple(pa.shape)}, tangent shape {tuple(t_shape)}"
        )
    if want == float0:
        return Zero(tangent_aval(pa))
    if isinstance(t, (Array, Tracer)):
        return t
    from ftrans.core.operands import as_operand

    return as_operand(t)


def _dname(d: np.dtype) -> str:
    return "float0" if d == float0 else d.name


def _operand(x: Any) -> Any:
    from ftrans.core.operands import as_operand

    if isinstance(x, (Array, Tracer)):
        return x
    if jax_array_argument(x):
        raise jax_array_argument_error("jvp: a primal")
    try:
        return as_operand(x)
    except TypeError:
        raise invalid_value_error("jvp: a primal", x) from None


def _output(t: Any) -> Any:
    return instantiate(t)


@_tb.api_boundary
def jvp(fun: Callable, primals: Sequence[Any], tangents: Sequence[Any],
        has_aux: bool = False) -> tuple[Any, ...]:
    """JAX's ``jvp``: ``(fun(*primals), J·tangents)``, plus ``aux`` when ``has_aux``.

    ``primals`` and ``tangents`` are tuples/lists of pytrees with equal
    structure, shapes and (tangent) dtypes; integer and bool primals take
    float0 tangents.
    """
    if not callable(fun):
        raise FtransTypeError(f"jvp: expected a function as the first argument, got {type(fun).__name__}")
    _check_arg_list("jvp", primals, tangents)
    p_leaves_paths, p_tree = tree_util.tree_flatten_with_path(tuple(primals))
    t_leaves, t_tree = tree_util.tree_flatten(tuple(tangents))
    # As JAX's, the containers themselves must match too (a tuple of primals takes a tuple of tangents).
    whole_p, whole_t = tree_util.tree_structure(primals), tree_util.tree_structure(tangents)
    if p_tree != t_tree or whole_p != whole_t:
        raise FtransTypeError(
            f"primal and tangent arguments to jax.jvp must have the same tree structure; primals have "
            f"tree structure {whole_p} whereas tangents have tree structure {whole_t}."
        )
    p_leaves = [_operand(p) for _, p in p_leaves_paths]
    t_in = [_tangent_in("primals" + tree_util.keystr(path), p, t)
            for (path, _), p, t in zip(p_leaves_paths, p_leaves, t_leaves)]
    out_tree_box: list = []
    fname = getattr(fun, "__name__", "fun")

    def flat_fun(*ins: Any) -> tuple[list, Any]:
        args = tree_util.tree_unflatten(p_tree, ins)
        out = fun(*args)
        aux = None
        if has_aux:
            if not (isinstance(out, (tuple, list)) and len(out) == 2):
                raise FtransTypeError(
                    f"jvp({fname}) with has_aux=True: the function must return a pair: a two-element tuple (output, "
                    f"aux), got {describe_pair_candidate(out)}"
                )
            out, aux = out
        flat, tree = tree_util.tree_flatten(out)
        if not all(map(is_jax_value, flat)):
            check_outputs(out, fun, "jvp")
        out_tree_box.append(tree)
        return flat, aux

    given = given_scalars([p for _, p in p_leaves_paths], t_leaves)
    with transform_name_stack("jvp"):
        p_out, t_out, aux = jvp_flat(rewritten_primal(flat_fun, p_leaves, out_tree_box), p_leaves, t_in, given)
    out_tree = out_tree_box[0]
    primals_out = tree_util.tree_unflatten(out_tree, p_out)
    tangents_out = tree_util.tree_unflatten(out_tree, [_output(t) for t in t_out])
    if has_aux:
        return primals_out, tangents_out, aux
    return primals_out, tangents_out


# The rules for every primitive family register themselves on import.
from ftrans.transforms import ad_rules  # noqa: E402, F401

_operands.library_entry = tangents_as_primals
