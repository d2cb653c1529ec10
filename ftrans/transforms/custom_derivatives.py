"""``custom_jvp`` and ``custom_vjp``: user-supplied derivative rules.

Both stage the user's function into a jaxpr and bind a call primitive
(``ftrans/core/prims/calls.py``) that carries it together with the user's
rule, so the rule survives staging: a ``jit``-compiled function that calls a
``custom_jvp`` function still uses the custom rule when it is later
differentiated.  Outside any transform the
function is simply called.

* ``custom_jvp_call``: its JVP rule calls the user's JVP (with symbolic zeros
  instantiated unless ``symbolic_zeros=True``); every other rule is the shared
  one of the call primitives (evaluation, lowering as a call), except that
  partial evaluation inlines the staged function (``transforms/ad_rules/calls.py``).
* ``custom_vjp_call``: its JVP rule runs the user's forward function and
  emits the output tangents as one ``custom_lin`` equation of the residuals
  and input tangents.  ``custom_lin`` is linear in the tangents and its
  transpose rule (``transforms/linear_rules/calls.py``) calls the user's
  backward function, which is how ``grad``
  uses the custom VJP; evaluating it forward (``jvp`` of a ``custom_vjp``
  function) is an error, as in JAX.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ftrans.core import ir as _ir
from ftrans.core import pytrees as tree_util
from ftrans.core import ref as _ref_mod
from ftrans.core import trace as _trace
from ftrans.core import traceback_util as _tb
from ftrans.core.array import Array
from ftrans.core.avals import ShapedArray
from ftrans.core.config import config
from ftrans.core.ir import ClosedJaxpr, hoist_consts
from ftrans.core.jaxpr_api import eval_jaxpr
from ftrans.core.prims.calls import custom_jvp_call_p, custom_lin_p, custom_vjp_call_p, linear_call_p
from ftrans.core.trace import Tracer, aval_of, stage
from ftrans.core.wrapping import name_after
from ftrans.errors import FtransTypeError, FtransValueError, UnexpectedTracerError
from ftrans.transforms.ad import (
    JVPTrace,
    JVPTracer,
    Zero,
    float0,
    instantiate,
    is_python_scalar,
    tangent_aval,
)
from ftrans.transforms.ad_rules.calls import custom_vjp_tangents

__all__ = ["custom_jvp", "custom_vjp", "custom_gradient", "closure_convert", "SymbolicZero", "CustomVJPPrimal",
           "custom_vjp_primal_tree_values", "zero_from_primal", "custom_jvp_call_p", "custom_vjp_call_p",
           "custom_lin_p", "linear_call"]

SymbolicZero = Zero  # what a rule registered with symbolic_zeros=True receives for a zero tangent


@dataclasses.dataclass(slots=True)
class CustomVJPPrimal:
    """What a ``custom_vjp`` forward function registered with ``symbolic_zeros=True`` receives for each
    array leaf of its differentiable arguments: the ``value`` and whether it is ``perturbed`` (carries a
    tangent that is not a symbolic zero), as in JAX."""

    value: Any
    perturbed: bool


def custom_vjp_primal_tree_values(tree: Any) -> Any:
    """Replace each :class:`CustomVJPPrimal` leaf of ``tree`` by its value (JAX's helper of the same name)."""

    def value(leaf: Any) -> Any:
        if type(leaf) is not CustomVJPPrimal:
            raise FtransTypeError(f"custom_vjp_primal_tree_values: unexpected leaf type {type(leaf)}")
        return leaf.value

    return tree_util.tree_map(value, tree)


def zero_from_primal(val: Any, symbolic_zeros: bool = False) -> Any:
    """Zero tangents for each leaf of ``val``: :class:`SymbolicZero` objects if ``symbolic_zeros``, else
    zero arrays of the tangent type (float0 for integer and boolean leaves)."""
    from ftrans.transforms.ad import zeros_like_aval

    def zero(x: Any) -> Any:
        z = Zero.from_primal_value(x)
        return z if symbolic_zeros else zeros_like_aval(z.aval)

    return tree_util.tree_map(zero, val)


def _name(f: Any) -> str:
    return getattr(f, "__name__", type(f).__name__)


_SIGNATURES: dict = {}


def _signature(fun: Callable) -> tuple[inspect.Signature | None, int]:
    """``fun``'s signature and, when it has only plain positional parameters, their number (else -1); cached
    (custom functions are called often, and reading a signature is slow)."""
    try:
        return _SIGNATURES[fun]
    except (KeyError, TypeError):
        pass
    try:
        sig = inspect.signature(fun)
    except (TypeError, ValueError):
        return None, -1
    plain = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    params = list(sig.parameters.values())
    n = len(params) if all(p.kind in plain for p in params) else -1
    try:
        if len(_SIGNATURES) > 4096:
            _SIGNATURES.clear()
        _SIGNATURES[fun] = (sig, n)
    except TypeError:  # an unhashable callable
        pass
    return sig, n


def _resolve_kwargs(fun: Callable, args: tuple, kwargs: dict, deco: str = "custom_jvp") -> tuple:
    """Keyword arguments become positional (the rules take positional arguments only), as in JAX; ``deco``
    names the decorator in the error."""
    sig, n_plain = _signature(fun)
    if sig is None:
        if kwargs:
            raise FtransTypeError(f"{_name(fun)}: keyword arguments need a function with a signature") from None
        return args
    if not kwargs and len(args) == n_plain:  # every parameter given positionally: nothing to resolve
        return args
    try:
        bound = sig.bind(*args, **kwargs)
        bound.apply_defaults()
        passed = [k for k in bound.kwargs if k in kwargs]
        if passed:
            raise TypeError(f"The following keyword arguments could not be resolved to positions: {', '.join(passed)}")
    except (TypeError, ValueError) as e:
        raise FtransTypeError(
            f"The input arguments to the {deco}-decorated function {_name(fun)} could not be resolved to "
            f"positional-only arguments. Binding failed with the error:\n{e}"
        ) from None
    return tuple(bound.args)


def _nondiff_positions(api: str, fun: Callable, nums: Sequence[int], names: Sequence[str]) -> tuple[int, ...]:
    """``nondiff_argnums`` together with the positions of the parameters named in ``nondiff_argnames``."""
    out = {int(i) for i in nums}
    if isinstance(names, str):
        names = (names,)
    if names:
        try:
            params = list(inspect.signature(fun).parameters.values())
        except (TypeError, ValueError):
            raise FtransTypeError(f"{api}: nondiff_argnames needs a function with a signature") from None
        positional = [p.name for p in params
                      if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)]
        for n in names:
            if n in positional:
                out.add(positional.index(n))
            elif not any(p.name == n for p in params):
                raise FtransValueError(f"{api}: nondiff_argnames names {n!r}, which is not a parameter of "
                                       f"{_name(fun)}")
    return tuple(sorted(out))


def _has_refs(args: tuple) -> bool:
    return any(isinstance(x, _ref_mod.Ref) for x in tree_util.tree_leaves(args))


def _call_with_refs(fun: Callable, name: str, args: tuple, what: str) -> Any:
    """A custom-derivative function called with mutable refs: as in JAX's fallback path, the function
    itself runs (and is differentiated as written, its custom rule unused); the refs must be distinct
    and none may be returned."""
    from ftrans.transforms import refs

    names = refs._param_names(fun, len(args))
    found = [(names[i] + tree_util.keystr(p), x) for i, a in enumerate(args)
             for p, x in tree_util.tree_flatten_with_path(a)[0] if isinstance(x, _ref_mod.Ref)]
    refs._check_aliases([x for _, x in found], [n for n, _ in found], f"{what} function {name}")
    out = fun(*args)
    _ref_mod.check_no_refs(out, what, name)
    return out


# The staging scopes whose backward pass threads the refs a custom_vjp backward function writes into
# (``transpose.stage_threading_refs``): a jitted function's (its call's transpose) and a scan body's.
def _threading_scope(what: str) -> bool:
    return what.startswith("jit(") or what == "scan"


def _differentiated_refs(args: tuple) -> bool:
    """Whether a custom_vjp called with refs among ``args`` takes JAX's fallback path (its function
    differentiated as written): when a ref holds a value being differentiated (then it is not plumbing),
    or when its backward function, run later, could not reach the refs.  Refs staged by ``jit`` or a
    ``scan`` body are reached when differentiation happens inside that staging, or when they are
    closed over (not arguments of the staged function) and every enclosing staging threads them
    through its backward pass (a jitted function's argument refs are then threaded themselves; see
    docs/differences.md)."""
    refs = []
    others = []
    for x in tree_util.tree_leaves(args):
        if isinstance(x, _ref_mod.Ref):
            # Passing a ref uses it: a staging that does not hold it yet threads it first (NeedsRef), and a
            # checkpoint body then runs as written, as when its body reads a ref.
            x._check("passing to a custom_vjp function")
            if _ref_mod.carries_tangent(x._value):
                return True
            refs.append(x)
        else:
            others.append(x)
    staged = [r for r in refs if r._scope is not None]
    if not staged:
        return False
    level = max(r._level for r in staged)
    if any(_ref_mod.carries_tangent(x, level) for x in others):
        return False  # differentiated inside the staging: the backward function runs while it is traced
    if not all(_threading_scope(sc.what) for sc in _ref_mod._state.scopes):
        return True
    if any(r._arg_name is not None and r._binder is None for r in staged):
        return True  # a loop body's view of its argument ref
    for r in staged:
        if r._binder is not None:  # a jitted function's view of its argument ref: it must thread the ref itself
            raise _ref_mod.BindArgRefs(r._binder)
    return False


def _custom_vjp_with_refs(f: Any, name: str, args: tuple) -> Any:
    """A ``custom_vjp`` function called with mutable refs among its (differentiable-position) arguments:
    the refs are not differentiated but passed through, so ``fwd`` may save them as residuals and ``bwd``
    write into them (JAX's gradient-statistics plumbing).  Built as a custom_vjp of the other arguments
    that closes over the refs; ``bwd``'s cotangents for the refs (None) are dropped."""
    from ftrans.transforms import refs as _refs_mod

    nd = set(f.nondiff_argnums)
    names = _refs_mod._param_names(f.fun, len(args))
    found = [(names[i] + tree_util.keystr(p), x) for i, a in enumerate(args)
             for p, x in tree_util.tree_flatten_with_path(a)[0] if isinstance(x, _ref_mod.Ref)]
    _refs_mod._check_aliases([x for _, x in found], [n for n, _ in found], f"custom_vjp function {name}")
    diff_pos = [i for i in range(len(args)) if i not in nd]
    per_arg = [tree_util.tree_flatten(args[i]) for i in diff_pos]
    kinds = [[isinstance(x, _ref_mod.Ref) for x in leaves] for leaves, _ in per_arg]
    others = [x for (leaves, _), k in zip(per_arg, kinds) for x, r in zip(leaves, k) if not r]

    def full_args(vals: Sequence) -> list:
        it = iter(vals)
        out = list(args)
        for i, (leaves, tree), k in zip(diff_pos, per_arg, kinds):
            out[i] = tree_util.tree_unflatten(tree, [x if r else next(it) for x, r in zip(leaves, k)])
        return out

    refs = [x for _, x in found]
    res_box: list = []

    def fun2(*vals: Any) -> Any:
        out = f.fun(*full_args(vals))
        _ref_mod.check_no_refs(out, "custom_vjp", name)
        return out

    def fwd2(*vals: Any) -> Any:
        got = f.fwd(*full_args(vals))
        if not (isinstance(got, (tuple, list)) and len(got) == 2):
            return got  # the usual error, from custom_vjp itself
        out, res = got
        _ref_mod.check_no_refs(out, "custom_vjp fwd function", name)
        leaves, tree = tree_util.tree_flatten(res)
        slots = []
        for k, x in enumerate(leaves):
            if isinstance(x, _ref_mod.Ref):
                j = next((j for j, r in enumerate(refs) if r is x), None)
                if j is None:
                    raise FtransValueError(
                        f"custom_vjp fwd function of {name} returned, among its residuals, a mutable array "
                        f"reference of type {x.aval.str_short()} that is not one of its arguments; a fwd function "
                        "may only save the refs it was given")
                slots.append((k, j))
        res_box[:] = [(tree, slots)]
        return out, tuple(x for k, x in enumerate(leaves) if not any(k == s for s, _ in slots))

    def bwd2(res: Any, g: Any) -> Any:
        tree, slots = res_box[0]
        it = iter(res)
        pos = dict(slots)
        leaves = [refs[pos[k]] if k in pos else next(it) for k in range(tree.num_leaves)]
        nd_vals = [args[i] for i in sorted(nd)]
        cts = f.bwd(*nd_vals, tree_util.tree_unflatten(tree, leaves), g)
        if not isinstance(cts, (tuple, list)) or len(cts) != len(diff_pos):
            raise FtransTypeError(
                f"custom_vjp bwd function of {name} must return a tuple with one cotangent per "
                f"differentiable argument ({len(diff_pos)}), got {type(cts).__name__}")
        out = []
        for ct, (_leaves_i, tree_i), k in zip(cts, per_arg, kinds):
            if ct is None:
                out += [None for r in k if not r]
                continue
            ct_leaves = tree_util.tree_flatten(ct, is_leaf=lambda x: x is None)[0]
            if len(ct_leaves) != len(k):
                raise FtransTypeError(
                    f"custom_vjp bwd function of {name}: a cotangent's structure does not match its argument's "
                    f"({tree_i})")
            out += [c for c, r in zip(ct_leaves, k) if not r]
        return tuple(out)

    g2 = custom_vjp(fun2)
    g2.defvjp(fwd2, bwd2, symbolic_zeros=False)
    return g2(*others)


def _split_nondiff(args: tuple, nondiff: tuple[int, ...]) -> tuple[list, list]:
    nd = [args[i] for i in nondiff]
    diff = [a for i, a in enumerate(args) if i not in nondiff]
    return nd, diff


def _merge_nondiff(nd: list, diff: Sequence, nondiff: tuple[int, ...]) -> list:
    out, nd_it, d_it = [], iter(nd), iter(diff)
    for i in range(len(nd) + len(diff)):
        out.append(next(nd_it) if i in nondiff else next(d_it))
    return out


def _operand(name: str, path: str, x: Any) -> Any:
    from ftrans.core.operands import as_operand

    if isinstance(x, (Array, Tracer)):
        return x
    try:
        return as_operand(x)
    except TypeError:
        raise FtransTypeError(
            f"{name}: argument {path} of type {type(x).__name__} is not an array; non-array arguments "
            "must be listed in nondiff_argnums"
        ) from None


def _stage_call(fun: Callable, name: str, nd: list, nondiff: tuple, diff: list, deco: str = "custom_jvp"
                ) -> tuple[list, Any, ClosedJaxpr, list, list]:
    """Flatten the differentiable arguments and stage ``fun`` on them: (leaves, in_tree, body, consts, out_tree box)."""
    leaves_paths, in_tree = tree_util.tree_flatten_with_path(tuple(diff))
    leaves = [_operand(name, "args" + tree_util.keystr(p), x) for p, x in leaves_paths]
    out_tree_box: list = []

    def flat_fun(*ins: Any) -> list:
        full = _merge_nondiff(nd, tree_util.tree_unflatten(in_tree, ins), nondiff)
        out, tree = tree_util.tree_flatten(fun(*full))
        out_tree_box.append(tree)
        return out

    closed, _ = stage(flat_fun, [aval_of(x) for x in leaves])
    body, consts = hoist_consts(closed)
    _ir.check_effects_allowed(body, deco, _ir.custom_derivatives_allowed_effects)
    return leaves, in_tree, body, consts, out_tree_box


def _long(a: ShapedArray) -> str:
    """An abstract value as JAX's messages write it: ``float32[3,4]``."""
    return f"{_dn(a.dtype)}[{','.join(str(d) for d in a.shape)}]"


class _Shown:
    __slots__ = ("text",)

    def __init__(self, text: str):
        self.text = text

    def __repr__(self) -> str:
        return self.text


def _tree_text(tree: Any, avals: list) -> str:
    """A pytree structure with each leaf written as its type (``(float32[], float32[])``)."""
    return str(tree_util.tree_unflatten(tree, [_Shown(_long(a)) for a in avals]))


def _leaf_aval(x: Any) -> ShapedArray:
    return x.aval if type(x) is Zero else aval_of(x)


def _check_primal_outs(intro_tree: str, intro_shape: str, kind: str, deco: str, name: str, tree: Any,
                       want_tree: Any, leaves: list, want_avals: list) -> None:
    """A rule's primal output against the function's: structure, then shapes and dtypes (JAX's wording)."""
    if tree != want_tree:
        raise FtransTypeError(
            f"{intro_tree}, but instead the {kind} rule output's first element had container/pytree structure:\n"
            f"    {_tree_text(tree, [_leaf_aval(x) for x in leaves])}\nwhile the {deco}-decorated function {name} "
            f"had output container/pytree structure:\n    {_tree_text(want_tree, want_avals)}."
        )
    got = [_leaf_aval(x) for x in leaves]
    if any(tuple(g.shape) != tuple(w.shape) or g.dtype != w.dtype for g, w in zip(got, want_avals)):
        bad = next(i for i, (g, w) in enumerate(zip(got, want_avals))
                   if tuple(g.shape) != tuple(w.shape) or g.dtype != w.dtype)
        raise FtransTypeError(
            f"{intro_shape}, but instead the {kind} rule output's first element had shapes/dtypes of:\n"
            f"    {', '.join(_long(g) for g in got)}\nwhile the {deco}-decorated function {name} had output "
            f"shapes/dtypes of:\n    {', '.join(_long(w) for w in want_avals)}\n(at output {bad}: got {kind} "
            f"output type {_long(got[bad])} which doesn't match the function's output type {_long(want_avals[bad])})"
        )


def _check_tangent_outs(rule: str, name: str, tree: Any, want_tree: Any, leaves: list, want_avals: list) -> None:
    """A JVP rule's tangent output against its primal output (JAX's wording)."""
    if tree != want_tree:
        raise FtransTypeError(
            f"Custom JVP rule {rule} for function {name} must produce primal and tangent outputs with equal "
            f"container (pytree) structures, but got {want_tree} and {tree} respectively."
        )
    for x, a in zip(leaves, want_avals):
        want, got = tangent_aval(a), _leaf_aval(x)
        if tuple(got.shape) != tuple(want.shape) or got.dtype != want.dtype:
            raise FtransTypeError(
                f"Custom JVP rule must produce primal and tangent outputs with corresponding shapes and dtypes. "
                f"Expected {_long(want)} (tangent type of {_long(a)}) but got {_long(got)}."
            )


def _dn(d: np.dtype) -> str:
    return "float0" if d == float0 else d.name


# ----------------------------------------------------------------------------
# Applying the rule directly (a JVP trace whose values are concrete: no staging)


def _ftrans_own(f: custom_jvp | custom_vjp) -> bool:
    """Whether ``f`` is one of ftrans's own functions (not a user's, nor the wrapper of one made here)."""
    mod = getattr(f.fun, "__module__", None) or ""
    return mod.startswith("ftrans.") and mod != __name__


def _direct(f: custom_jvp | custom_vjp, name: str, nd: list, nondiff: tuple, diff: list) -> tuple | None:
    """Apply ``f``'s rule at once when differentiating concrete values; ``(result,)``, or None if not.

    When the innermost transform of the arguments is a JVP (``jvp``, ``grad`` and friends outside ``jit``)
    and every argument has a concrete value, the function is not staged: as in JAX, the user's rule runs on
    the primals and tangents, so the function and its rule may use Python control flow on their inputs.
    Under ``jit``, ``vmap`` or ``make_jaxpr`` the function is staged as before (and such control flow raises
    the usual concretization error).
    """
    leaves_paths, in_tree = tree_util.tree_flatten_with_path(tuple(diff))
    leaves = [_operand(name, "args" + tree_util.keystr(p), x) for p, x in leaves_paths]
    trace = _trace.find_top_trace(leaves)
    if type(trace) is _trace.EvalTrace:
        # Concrete arguments, no staging: a transform is active but not on these values (e.g. the
        # rule calling the function on its primals), so the function simply runs.
        return (_check_not_closed_over(name, f.fun(*_merge_nondiff(nd, diff, nondiff))),)
    if type(trace) is not JVPTrace:
        return None
    from ftrans.transforms.batching import BatchTrace

    if any(m.trace_type is BatchTrace for m in _trace.state.stack[trace.main.level + 1:]):
        # A vmap inside the differentiation is active: the function or its rule may close over its batched
        # values, which the staged call sees as operands and the rule (run under that vmap) as its own.
        return None
    for x in leaves:
        if isinstance(x, Tracer) and x.to_concrete_value() is None:
            return None
    tracers = [trace.full_raise(x) for x in leaves]
    # What the user's function and rules see: a Python scalar as given (an argument, or a value a jvp/vjp
    # was given and that reaches here untouched), as in JAX; otherwise the primal and tangent arrays.
    # ftrans's own custom-derivative functions (scipy.special, nn, ...) see arrays: as in JAX, where they
    # promote their operands to arrays before the call.
    own = _ftrans_own(f)
    givens = [None if own else (x, None) if is_python_scalar(x) else
              (x.given if isinstance(x, JVPTracer) and x._trace.main is trace.main else None)
              for _, x in leaves_paths]
    primals = [t.primal if g is None else g[0] for t, g in zip(tracers, givens)]
    tangents = [t.tangent if g is None or g[1] is None else g[1] for t, g in zip(tracers, givens)]
    if all(type(t.tangent) is Zero for t in tracers):
        # Nothing to differentiate at this level: the call happens at the level below.
        return (_check_not_closed_over(name, f(*_merge_nondiff(nd, tree_util.tree_unflatten(in_tree, primals),
                                                                nondiff))),)
    box: list = []
    if isinstance(f, custom_jvp):
        rule = _flat_jvp(f.jvp, name, nd, nondiff, in_tree, None, None, f.symbolic_zeros, 0, box)
        p_out, t_out = rule(primals, tangents)
    else:
        fwd = _flat_fwd(f.fwd, name, nd, nondiff, in_tree, None, None, 0, box, f.symbolic_zeros)
        p_out, res_dyn, res_info = fwd(primals, [type(t.tangent) is not Zero for t in tracers])
        bwd = _flat_bwd(f.bwd, name, nd, in_tree, box[0], [aval_of(x) for x in leaves], f.symbolic_zeros, f.fun)
        t_out = custom_vjp_tangents(p_out, res_dyn, res_info, [t.tangent for t in tracers], bwd, name,
                                    f.symbolic_zeros)
    level = trace.main.level
    if any(isinstance(p, Tracer) and p._trace.main.level >= level for p in p_out):
        kind = "custom_jvp rule" if isinstance(f, custom_jvp) else "custom_vjp forward function"
        raise UnexpectedTracerError(
            f"the {kind} of {name} returned a value that depends on a value being differentiated which is "
            f"not one of its arguments (the function closes over it). Pass that value as an argument of {name} "
            "instead (as in JAX, custom-derivative functions must not close over differentiated values)."
        )
    outs = [_rule_output(trace, p, t) for p, t in zip(p_out, t_out)]
    return (tree_util.tree_unflatten(box[0], outs),)


def _check_not_closed_over(name: str, out: Any) -> Any:
    """``out``, unless it depends on a value of the innermost differentiation that the call did not take as
    an argument: as in JAX, which runs a custom function with no tangents below that differentiation, a
    custom function closing over such a value raises ``UnexpectedTracerError``."""
    stack = _trace.state.stack
    if not stack or stack[-1].trace_type is not JVPTrace:
        return out
    top = stack[-1]
    if any(isinstance(x, Tracer) and x._trace.main is top for x in tree_util.tree_leaves(out)):
        raise UnexpectedTracerError(
            f"custom function {name} closes over a value being differentiated (a tracer of the innermost "
            "jvp/grad) that is not one of its arguments, and its result depends on it. As in JAX, a custom_jvp "
            f"or custom_vjp function must take every differentiated value as an argument: pass it to {name} "
            "(and to the function its rule calls) explicitly."
        )
    return out


def _rule_output(trace: JVPTrace, p: Any, t: Any) -> JVPTracer:
    """A tracer for one output of a custom rule applied directly: arrays inside, and a Python scalar the
    rule returned kept as given (handed back unchanged if the output is returned untouched)."""
    given = None
    if is_python_scalar(p):
        given = (p, t if is_python_scalar(t) else None)
        p = _operand("custom rule", "output", p)
    if is_python_scalar(t):
        t = _operand("custom rule", "tangent output", t)
    return JVPTracer(trace, p, t, given)


# ----------------------------------------------------------------------------
# custom_jvp


def _forward_attr(self: Any, name: str) -> Any:
    """Attributes the wrapper lacks come from the wrapped function (as in JAX), so ``custom_vjp`` around a
    ``custom_vmap`` function still offers ``def_vmap``."""
    fun = self.__dict__.get("fun")
    if fun is None or name.startswith("__"):
        raise AttributeError(name)
    return getattr(fun, name)


class custom_jvp:  # noqa: N801 - JAX's name
    """JAX's ``custom_jvp``: a function with a user-defined JVP rule (``defjvp`` or ``defjvps``)."""

    def __init__(self, fun: Callable, nondiff_argnums: Sequence[int] = (), nondiff_argnames: Sequence[str] = ()):
        if not callable(fun):
            raise FtransTypeError(f"custom_jvp: expected a function, got {type(fun).__name__}")
        functools.update_wrapper(self, fun)
        name_after(self, fun)
        self.fun = fun
        self.nondiff_argnums = _nondiff_positions("custom_jvp", fun, nondiff_argnums, nondiff_argnames)
        self.jvp: Callable | None = None
        self.symbolic_zeros = False

    def defjvp(self, jvp: Callable, symbolic_zeros: bool = False) -> Callable:
        """Register ``jvp(*nondiff_args, primals, tangents) -> (primal_out, tangent_out)``."""
        self.jvp = jvp
        self.symbolic_zeros = symbolic_zeros
        return jvp

    def defjvps(self, *jvps: Callable | None) -> None:
        """One rule per argument, ``rule(g, ans, *primals) -> tangent contribution`` (or ``None``); summed."""
        if self.nondiff_argnums:
            raise FtransTypeError("custom_jvp.defjvps is not supported with nondiff_argnums; use defjvp")

        def jvp(primals: tuple, tangents: tuple) -> tuple:
            ans = self(*primals)
            total = None
            for rule, t in zip(jvps, tangents):
                if rule is None:
                    continue
                term = rule(t, ans, *primals)
                total = term if total is None else tree_util.tree_map(lambda a, b: a + b, total, term)
            if total is None:
                total = tree_util.tree_map(lambda a: instantiate(Zero.from_primal_value(a)), ans)
            return ans, total

        self.defjvp(jvp)

    @_tb.api_boundary
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        name = _name(self.fun)
        if self.jvp is None:
            raise AttributeError(f"No JVP defined for custom_jvp function {name} using defjvp.")
        args = _resolve_kwargs(self.fun, args, kwargs)
        if _ref_mod.created and _has_refs(args):
            return _call_with_refs(self.fun, name, args, "custom_jvp")
        if _trace.is_eager():
            return self.fun(*args)
        nondiff = self.nondiff_argnums
        nd, diff = _split_nondiff(args, nondiff)
        if any(isinstance(x, Tracer) for x in tree_util.tree_leaves(nd)):
            return self._call_traced_nondiff(name, nd, diff)
        direct = _direct(self, name, nd, nondiff, diff)
        if direct is not None:
            return direct[0]
        leaves, in_tree, body, consts, out_tree_box = _stage_call(self.fun, name, nd, nondiff, diff)
        out_tree = out_tree_box[0]
        flat_jvp = _flat_jvp(self.jvp, name, nd, nondiff, in_tree, out_tree, list(body.out_avals),
                             self.symbolic_zeros, len(consts))
        outs = custom_jvp_call_p.bind(*consts, *leaves, call_jaxpr=body, jvp=flat_jvp, num_consts=len(consts),
                                      symbolic_zeros=self.symbolic_zeros, name=name)
        return tree_util.tree_unflatten(out_tree, outs)


    def _call_traced_nondiff(self, name: str, nd: list, diff: list) -> Any:
        """Traced values among the ``nondiff_argnums`` arguments (a ``vmap``'s batched value, say): as in JAX
        they are constants of the function and its rule, with no tangent.  They become leading operands of
        an inner ``custom_jvp`` function, so every transform sees them (batching them, for one), and its rule
        drops their tangents."""
        nondiff = self.nondiff_argnums
        nd_leaves, nd_tree = tree_util.tree_flatten(nd)
        pos = [i for i, x in enumerate(nd_leaves) if isinstance(x, Tracer)]

        def rebuild(vals: Sequence) -> list:
            leaves = list(nd_leaves)
            for i, v in zip(pos, vals):
                leaves[i] = v
            return tree_util.tree_unflatten(nd_tree, leaves)

        def fun(traced: list, *rest: Any) -> Any:
            return self.fun(*_merge_nondiff(rebuild(traced), rest, nondiff))

        def jvp(primals: tuple, tangents: tuple) -> Any:
            return self.jvp(*rebuild(primals[0]), tuple(primals[1:]), tuple(tangents[1:]))

        fun.__name__, jvp.__name__ = name, _name(self.jvp)
        inner = custom_jvp(fun)
        inner.defjvp(jvp, symbolic_zeros=self.symbolic_zeros)
        return inner([nd_leaves[i] for i in pos], *diff)


def _flat_jvp(rule: Callable, name: str, nd: list, nondiff: tuple, in_tree: Any, out_tree: Any,
              out_avals: list | None, symbolic_zeros: bool, num_consts: int, out_tree_box: list | None = None
              ) -> Callable:
    """The user's JVP rule on flat lists.  Without ``out_avals`` (the rule applied directly, the function
    never staged) the tangents are checked against the rule's own primal outputs, whose structure goes
    to ``out_tree_box``."""
    rule_name = _name(rule)
    intro = (f"Custom JVP rule {rule_name} for function {name} must produce a pair (list or tuple of length two) "
             "where the first element represents the primal output")

    def flat(primals: list, tangents: list) -> tuple[list, list]:
        primals, tangents = primals[num_consts:], tangents[num_consts:]
        if not symbolic_zeros:
            tangents = [instantiate(t) for t in tangents]  # float0 zeros too
        p_args = tree_util.tree_unflatten(in_tree, primals)
        t_args = tree_util.tree_unflatten(in_tree, tangents)
        res = rule(*nd, tuple(p_args), tuple(t_args))
        if not (isinstance(res, (tuple, list)) and len(res) == 2):
            raise FtransTypeError(
                f"Custom JVP rule {rule_name} for function {name} must produce a pair (list or tuple of length two) "
                f"representing primal and tangent outputs, but got {res}.")
        p_out, t_out = res
        p_leaves, p_tree = tree_util.tree_flatten(p_out)
        if out_avals is None:
            want_tree, want_avals = p_tree, [aval_of(p) for p in p_leaves]
            out_tree_box.append(p_tree)
        else:
            want_tree, want_avals = out_tree, out_avals
            _check_primal_outs(
                f"{intro} (equal in value to the output of the custom_jvp-decorated function {name}, and in "
                "particular of the same container/pytree structure)",
                f"{intro} (equal in value to the output of the custom_jvp-decorated function {name}, and in "
                "particular with leaves of the same shape/dtype)",
                "JVP", "custom_jvp", name, p_tree, want_tree, p_leaves, want_avals)
        t_leaves, t_tree = tree_util.tree_flatten(t_out, is_leaf=lambda x: type(x) is Zero)
        t_leaves = [_tangent_leaf(t) for t in t_leaves]  # a float0 array (an integer output's tangent) is a zero
        _check_tangent_outs(rule_name, name, t_tree, want_tree, t_leaves, want_avals)
        return p_leaves, t_leaves

    flat.__name__ = _name(rule)
    return flat


def _tangent_leaf(t: Any) -> Any:
    if type(t) is Zero:
        return t
    if isinstance(t, np.ndarray) and t.dtype == float0:
        return Zero(ShapedArray(t.shape, float0, False))
    return t


# ----------------------------------------------------------------------------
# custom_vjp


class custom_vjp:  # noqa: N801 - JAX's name
    """JAX's ``custom_vjp``: a function with a user-defined VJP (``defvjp(fwd, bwd)``)."""

    def __init__(self, fun: Callable, nondiff_argnums: Sequence[int] = (), nondiff_argnames: Sequence[str] = ()):
        if not callable(fun):
            raise FtransTypeError(f"custom_vjp: expected a function, got {type(fun).__name__}")
        functools.update_wrapper(self, fun)
        name_after(self, fun)
        self.fun = fun
        self.nondiff_argnums = _nondiff_positions("custom_vjp", fun, nondiff_argnums, nondiff_argnames)
        self.fwd: Callable | None = None
        self.bwd: Callable | None = None
        self.symbolic_zeros = False
        self.optimize_remat = False

    def defvjp(self, fwd: Callable, bwd: Callable, symbolic_zeros: bool = False,
               optimize_remat: bool = False) -> None:
        """Register ``fwd(*args) -> (out, residuals)`` and ``bwd(*nondiff_args, residuals, ct) -> input cts``.

        ``symbolic_zeros=True``: ``fwd`` receives each array leaf of its differentiable arguments as a
        :class:`CustomVJPPrimal` (``value``, ``perturbed``), and ``bwd`` receives a :class:`SymbolicZero`
        for each output cotangent known to be zero; either way ``bwd`` may give ``None`` (or a
        ``SymbolicZero``) for an argument with a zero cotangent.

        ``optimize_remat=True`` (JAX's remat optimization): where ``fwd`` is staged, a forward pass that
        does not keep its residuals (a ``checkpoint``'s, whose backward pass recomputes them) runs the
        function itself instead of ``fwd``, as JAX does; the primal value then comes from the function.
        """
        if symbolic_zeros and optimize_remat:
            raise NotImplementedError("remat optimization for custom_vjp does not support symbolic zeros")
        self.fwd = fwd
        self.bwd = bwd
        self.symbolic_zeros = bool(symbolic_zeros)
        self.optimize_remat = bool(optimize_remat)

    @_tb.api_boundary
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        name = _name(self.fun)
        if self.fwd is None:
            raise AttributeError(f"No VJP defined for custom_vjp function {name} using defvjp.")
        args = _resolve_kwargs(self.fun, args, kwargs, "custom_vjp")
        if _ref_mod.created and _has_refs(args):
            if _differentiated_refs(args):  # JAX's fallback: the function itself is differentiated
                return _call_with_refs(self.fun, name, args, "custom_vjp")
            return _custom_vjp_with_refs(self, name, args)
        if _trace.is_eager():
            return self.fun(*args)
        nondiff = self.nondiff_argnums
        nd, diff = _split_nondiff(args, nondiff)
        for i in nondiff:
            if any(isinstance(x, Tracer) for x in tree_util.tree_leaves(args[i])):
                raise UnexpectedTracerError(
                    f"custom_vjp function {name}: argument {i} is listed in nondiff_argnums but is a traced value "
                    "(of jit, vmap or a derivative). As in JAX, a custom_vjp function's nondiff_argnums must be "
                    "static Python values; pass array values as ordinary arguments (and return None as their "
                    "cotangent from bwd)."
                )
        direct = _direct(self, name, nd, nondiff, diff)
        if direct is not None:
            return direct[0]
        leaves, in_tree, body, consts, out_tree_box = _stage_call(self.fun, name, nd, nondiff, diff, "custom_vjp")
        out_tree = out_tree_box[0]
        in_avals = [aval_of(x) for x in leaves]
        fwd = _flat_fwd(self.fwd, name, nd, nondiff, in_tree, out_tree, list(body.out_avals), len(consts),
                        symbolic_zeros=self.symbolic_zeros)
        fwd.optimize_remat = self.optimize_remat  # type: ignore[attr-defined]  # (read by the call's JVP)
        bwd = _flat_bwd(self.bwd, name, nd, in_tree, out_tree, in_avals, self.symbolic_zeros, self.fun)
        outs = custom_vjp_call_p.bind(*consts, *leaves, call_jaxpr=body, fwd=fwd, bwd=bwd, num_consts=len(consts),
                                      name=name, symbolic_zeros=self.symbolic_zeros)
        return tree_util.tree_unflatten(out_tree, outs)


def _flat_fwd(fwd: Callable, name: str, nd: list, nondiff: tuple, in_tree: Any, out_tree: Any,
              out_avals: list | None, num_consts: int, out_tree_box: list | None = None,
              symbolic_zeros: bool = False) -> Callable:
    """The user's forward function on flat lists, ``flat(primals, perturbed)``; without ``out_avals``
    (applied directly, the function never staged) its output structure goes to ``out_tree_box`` instead of
    being checked.  With ``symbolic_zeros`` each argument leaf reaches the function as a
    :class:`CustomVJPPrimal` saying whether it is perturbed."""
    intro = (f"Custom VJP fwd rule {_name(fwd)} for function {name} must produce a pair (list or tuple of length "
             "two) where the first element represents the primal output")
    pair = (f"{intro} (equal to the output of the custom_vjp-decorated function {name}) and the second element "
            "represents residuals (i.e. values stored from the forward pass for use on the backward pass)")

    def flat(primals: list, perturbed: Sequence[bool]) -> tuple[list, list, Any]:
        primals = list(primals[num_consts:])
        if symbolic_zeros:
            flags = [bool(z) for z in list(perturbed)[num_consts:]]
            args = tree_util.tree_unflatten_wrapped(in_tree, primals, lambda i, p: CustomVJPPrimal(p, flags[i]))
        else:
            args = tree_util.tree_unflatten(in_tree, primals)
        full = _merge_nondiff(nd, args, nondiff)
        res = fwd(*full)
        if not (isinstance(res, (tuple, list)) and len(res) == 2):
            raise FtransTypeError(f"{pair}, but instead of a pair the fwd rule {_name(fwd)} produced {res}.")
        out, residuals = res
        o_leaves, o_tree = tree_util.tree_flatten(out)
        if out_avals is None:
            out_tree_box.append(o_tree)
        else:
            _check_primal_outs(pair, pair, "fwd", "custom_vjp", name, o_tree, out_tree, o_leaves, out_avals)
        r_leaves, r_tree = tree_util.tree_flatten(residuals)
        arrays = [isinstance(r, (Array, Tracer, np.ndarray, np.generic, int, float, complex, bool))
                  for r in r_leaves]
        dyn = [r for r, a in zip(r_leaves, arrays) if a]
        static = [r for r, a in zip(r_leaves, arrays) if not a]
        return o_leaves, dyn, (r_tree, tuple(arrays), static)

    flat.__name__ = _name(fwd)  # (what a printed jaxpr shows as the call's fwd)
    return flat


def _flat_bwd(bwd: Callable, name: str, nd: list, in_tree: Any, out_tree: Any, in_avals: list,
              symbolic_zeros: bool = False, primal: Callable | None = None) -> Callable:
    """The user's backward function on flat lists: ``flat(res_info, res_dyn, cts)`` gives one cotangent per
    argument leaf (a :class:`Zero` where the rule gives none).  Zero output cotangents reach the rule as
    :class:`SymbolicZero` objects when ``symbolic_zeros``, else as zero arrays."""
    where = f"Custom VJP bwd rule {_name(bwd)} of {name}"

    def flat(res_info: Any, res_dyn: list, cts: list) -> list:
        r_tree, arrays, static = res_info
        d_it, s_it = iter(res_dyn), iter(static)
        res = tree_util.tree_unflatten(r_tree, [next(d_it) if a else next(s_it) for a in arrays])
        if not symbolic_zeros:
            cts = [instantiate(c) for c in cts]
        ct_tree = tree_util.tree_unflatten(out_tree, cts)
        out = bwd(*nd, res, ct_tree)
        n_args = len(in_tree.children())
        if isinstance(out, list) and len(out) == n_args:
            out = tuple(out)
        if not isinstance(out, tuple) or len(out) != n_args:
            got = f"a {type(out).__name__} of length {len(out)}" if isinstance(out, (tuple, list)) else \
                type(out).__name__
            raise FtransTypeError(
                f"{where} must produce a tuple with one cotangent per differentiable "
                f"argument of {name} ({n_args}), got {got}"
            )
        leaves, paths = _cts_leaves(where, name, out, in_tree)
        result = []
        for c, a, kp in zip(leaves, in_avals, paths):
            want = tangent_aval(a)
            if c is None or want.dtype == float0:
                result.append(Zero(want))
                continue
            if type(c) is Zero:
                if tuple(c.shape) != tuple(want.shape) or c.dtype != want.dtype:
                    raise FtransValueError(
                        f"{where} produced a SymbolicZero with a shape/dtype that does not "
                        f"match the corresponding input tangent shape/dtype: at output{kp} the SymbolicZero had "
                        f"shape/dtype {c.aval.str_short()} while the corresponding input had shape/dtype "
                        f"{want.str_short()}. Consider just returning a None here instead of a SymbolicZero object."
                    )
                result.append(Zero(want))
                continue
            got = aval_of(c)
            if tuple(got.shape) != tuple(want.shape) and not config.disable_bwd_checks:
                # (JAX's ``disable_bwd_checks`` lets the cotangent through as bwd made it)
                from ftrans.core.trace import function_site

                attached = "" if primal is None else f" attached to {function_site(primal)}"
                raise FtransValueError(  # (jax 0.11's words; the rule's name follows)
                    f"Custom VJP bwd rule{attached} must produce an output with the same type as the args tuple of "
                    f"the primal function, but at output{kp} the bwd rule produced an output of type "
                    f"{got.str_short()} corresponding to an input of type {want.str_short()} "
                    f"({where.removeprefix('Custom VJP ')})"
                )
            gv, wv = getattr(got, "vma", frozenset()), getattr(want, "vma", frozenset())
            if gv != wv:
                # in a check_vma shard_map body, JAX's type check of the cotangent: its manual axis types
                fix = []
                if wv - gv:
                    fix.append(f"it does not vary along {_axes(wv - gv)} as the input does (cast it with "
                               f"`jax.lax.pcast(..., {_axes(wv - gv)}, to='varying')`)")
                if gv - wv:
                    fix.append(f"it varies along {_axes(gv - wv)}, where the input is the same on every device "
                               f"(sum it with `jax.lax.psum(..., {_axes(gv - wv)})` if it holds each device's "
                               "part)")
                raise FtransValueError(
                    "Custom VJP bwd rule must produce an output with the same type as the args tuple of the primal "
                    f"function, but at output{kp} the bwd rule produced an output of type {got.str_short()} "
                    f"corresponding to an input of type {want.str_short()}, so the manual axis types do not match: "
                    f"{'; '.join(fix)} ({where.removeprefix('Custom VJP ')})"
                )
            # A cotangent of another floating dtype (f32 for a bf16 argument) passes through as bwd made it,
            # as in JAX (its custom_vjp allows that for inexact arguments): no rounding to the argument's dtype.
            result.append(c)
        return result

    flat.__name__ = _name(bwd)
    return flat


def _axes(axes: frozenset) -> tuple:
    return tuple(sorted(axes, key=str))


def _cts_leaves(where: str, name: str, out: tuple, in_tree: Any) -> tuple[list, list]:
    """Flatten ``bwd``'s output against the arguments' structure, with each leaf's key path.  ``None`` stands
    for a zero subtree, and (as in JAX) a value where the arguments have a subtree serves all its leaves."""
    args_tree = tree_util.tree_unflatten(in_tree, list(range(in_tree.num_leaves)))
    paths = [tree_util.keystr(p) for p, _ in tree_util.tree_flatten_with_path(args_tree)[0]]
    leaves: list = [None] * in_tree.num_leaves

    def put(ct: Any, positions: Any) -> Any:
        if ct is not None:
            for p in tree_util.tree_leaves(positions):
                leaves[p] = ct
        return ct  # (tree_map rebuilds ``out``'s structure from these: the user's own leaves)

    try:
        tree_util.tree_map(put, out, tuple(args_tree), is_leaf=lambda x: x is None or type(x) is Zero)
    except ValueError:
        got = tree_util.tree_structure(out, is_leaf=lambda x: x is None or type(x) is Zero)
        raise FtransTypeError(
            f"{where} must produce an output with the same container (pytree) structure as "
            f"the args tuple of the primal function {name}; expected {in_tree}, received {got}"
        ) from None
    return leaves, paths


# ----------------------------------------------------------------------------
# custom_gradient and closure_convert


class _GradientRule:
    """A ``custom_gradient`` backward function, staged: a jaxpr (static) over its captured values (residuals)."""

    __slots__ = ("jaxpr", "out_tree")

    def __init__(self, jaxpr: ClosedJaxpr, out_tree: Any):
        self.jaxpr, self.out_tree = jaxpr, out_tree


def custom_gradient(fun: Callable) -> Any:
    """JAX's ``custom_gradient``: ``fun(*args)`` returns ``(value, vjp_fn)``; ``vjp_fn(ct)`` gives the
    cotangents of the arguments (a tuple, one per argument; a bare value for a single argument).

    Built on ``custom_vjp``: the forward function stages ``vjp_fn`` on the cotangent types of the value,
    so what it closes over (values computed on the way) become the residuals the backward pass reads.
    As in JAX, ``vjp_fn`` may not branch in Python on those values or on its cotangent.
    """
    if not callable(fun):
        raise FtransTypeError(f"custom_gradient: expected a function, got {type(fun).__name__}")
    name = _name(fun)

    def _pair(out: Any) -> tuple:
        if not (isinstance(out, (tuple, list)) and len(out) == 2 and callable(out[1])):
            raise FtransTypeError(
                f"custom_gradient: {name} must return a pair (value, vjp_fn) with vjp_fn a function of the "
                f"value's cotangent, got {type(out).__name__}"
            )
        return tuple(out)

    def primal(*args: Any) -> Any:
        return _pair(fun(*args))[0]

    primal.__name__ = name
    primal.__qualname__ = getattr(fun, "__qualname__", name)
    wrapped = custom_vjp(primal)

    def fwd(*args: Any) -> tuple:
        ans, rule = _pair(fun(*args))
        ans_leaves, ans_tree = tree_util.tree_flatten(ans)
        ct_avals = [tangent_aval(aval_of(_operand(name, "output", x))) for x in ans_leaves]
        rule_tree: list = []

        def flat_rule(*cts: Any) -> list:
            out = rule(tree_util.tree_unflatten(ans_tree, cts))
            leaves, tree = tree_util.tree_flatten(out)
            rule_tree.append(tree)
            return leaves

        closed, _ = stage(flat_rule, ct_avals)
        body, consts = hoist_consts(closed)
        return ans, (_GradientRule(body, rule_tree[0]), ans_tree, consts)

    def bwd(res: tuple, ct: Any) -> Any:
        rule, ans_tree, consts = res
        ct_leaves, ct_tree = tree_util.tree_flatten(ct)
        if ct_tree != ans_tree:
            raise FtransTypeError(
                f"custom_gradient: the cotangent of {name}'s output has structure {ct_tree}, expected {ans_tree}"
            )
        out = tree_util.tree_unflatten(rule.out_tree, eval_jaxpr(rule.jaxpr, [], *consts, *ct_leaves))
        if not isinstance(out, tuple):
            out = (out,)
        return out

    wrapped.defvjp(fwd, bwd)
    return wrapped


def _maybe_perturbed(x: Any) -> bool:
    """Whether ``x`` may carry a tangent: a tracer of a differentiable (inexact) type."""
    if not isinstance(x, Tracer):
        return False
    if isinstance(x, JVPTracer) and type(x.tangent) is Zero:
        return _maybe_perturbed(x.primal)
    return tangent_aval(x.aval).dtype != float0


@_tb.api_boundary
def closure_convert(fun: Callable, *example_args: Any) -> tuple[Callable, list]:
    """JAX's ``closure_convert``: ``(converted, consts)`` where ``converted(*args, *consts)`` equals
    ``fun(*args)`` for arguments of the example arguments' types, and ``consts`` are the values ``fun``
    closes over that a transform may differentiate (tracers of inexact type), now explicit arguments.
    """
    leaves_paths, in_tree = tree_util.tree_flatten_with_path(example_args)
    in_avals = [aval_of(_operand("closure_convert", "example_args" + tree_util.keystr(p), x))
                for p, x in leaves_paths]
    out_tree_box: list = []

    def flat_fun(*ins: Any) -> list:
        out, tree = tree_util.tree_flatten(fun(*tree_util.tree_unflatten(in_tree, ins)))
        out_tree_box.append(tree)
        return out

    closed, _ = stage(flat_fun, in_avals)
    body, consts = hoist_consts(closed)
    out_tree = out_tree_box[0]
    hoisted_mask = [_maybe_perturbed(c) for c in consts]
    hoisted = [c for c, m in zip(consts, hoisted_mask) if m]
    kept = [c for c, m in zip(consts, hoisted_mask) if not m]
    n_hoisted = len(hoisted)

    def converted(*args_and_consts: Any) -> Any:
        n_args = len(args_and_consts) - n_hoisted
        args, given = args_and_consts[:n_args], args_and_consts[n_args:]
        leaves, tree = tree_util.tree_flatten(tuple(args))
        if tree != in_tree:
            raise FtransTypeError(
                "The inputs to the closure produced by closure_convert must have the same Pytree structure as the "
                f"example arguments passed when closure_convert was called: expected {in_tree}, got {tree}"
            )
        k_it, g_it = iter(kept), iter(given)
        all_consts = [next(g_it) if m else next(k_it) for m in hoisted_mask]
        return tree_util.tree_unflatten(out_tree, eval_jaxpr(body, [], *all_consts, *leaves))

    converted.__name__ = _name(fun)
    return converted, hoisted


def linear_call(fun: Callable, fun_transpose: Callable, residual_args: Any, linear_args: Any) -> Any:
    """JAX's ``linear_call``: ``fun(residual_args, linear_args)``, a function linear in ``linear_args``, whose
    transpose (what ``linear_transpose``, ``vjp`` and ``grad`` use) is ``fun_transpose(residual_args, ct)``
    rather than the transpose of ``fun``'s own operations; transposing that again gives ``fun``.

    ``fun_transpose`` returns values of the structure of ``linear_args``; the residuals are not
    differentiated (they carry no tangents)."""
    def leaves_of(tree: Any, what: str) -> tuple[list, Any]:
        paths, treedef = tree_util.tree_flatten_with_path(tree)
        return [_operand("linear_call", what + tree_util.keystr(p), x) for p, x in paths], treedef

    res, res_tree = leaves_of(residual_args, "residual_args")
    lin, lin_tree = leaves_of(linear_args, "linear_args")
    n_res = len(res)
    res_avals = [aval_of(x) for x in res]
    out_tree_box: list = []

    def flat_fun(*ins: Any) -> list:
        out = fun(tree_util.tree_unflatten(res_tree, ins[:n_res]), tree_util.tree_unflatten(lin_tree, ins[n_res:]))
        leaves, tree = tree_util.tree_flatten(out)
        out_tree_box.append(tree)
        return leaves

    callee, consts = hoist_consts(stage(flat_fun, res_avals + [aval_of(x) for x in lin])[0])
    out_tree = out_tree_box[0]
    staged: list = []

    def transpose_thunk() -> tuple:
        # the user's transpose, staged on first need for the residuals and the outputs' cotangents
        if not staged:
            def flat_t(*ins: Any) -> list:
                out = fun_transpose(tree_util.tree_unflatten(res_tree, ins[:n_res]),
                                    tree_util.tree_unflatten(out_tree, ins[n_res:]))
                leaves, tree = tree_util.tree_flatten(out)
                if tree != lin_tree:
                    raise FtransTypeError(
                        "transpose output pytree structure must match that of linear inputs, got output structure "
                        f"{tree} and input structure {lin_tree}.")
                return leaves

            t_body, t_consts = hoist_consts(stage(flat_t, res_avals + list(callee.out_avals))[0])
            staged.append((t_body, list(t_consts)))
        return staged[0]

    outs = linear_call_p.bind(*consts, *res, *lin, callee=callee, transpose_thunk=transpose_thunk,
                              num_callee_consts=len(consts), num_res=n_res)
    return tree_util.tree_unflatten(out_tree, list(outs))


custom_jvp.__getattr__ = _forward_attr  # type: ignore[attr-defined]
custom_vjp.__getattr__ = _forward_attr  # type: ignore[attr-defined]



# ----------------------------------------------------------------------------
# Dead-code elimination of the custom-derivative calls (JAX's DCE rules for custom_jvp_call/custom_vjp_call):
# an output nobody reads goes from the call, from its function's body (with the work only it needed) and from
# what the rules give; every operand stays (a rule may read one the pruned body does not).


def _dce_body(body: ClosedJaxpr, used: list[bool]) -> ClosedJaxpr:
    from ftrans.transforms.passes.dce import dce

    new, _ = dce(body.jaxpr, used)
    return body if new is body.jaxpr else ClosedJaxpr(new, body.consts)


def _custom_jvp_call_dce(eqn: Any, used: list[bool]) -> Any:
    if all(used) or not any(used):  # (an unread call is kept only for its effects: whole)
        return eqn
    jvp = eqn.params["jvp"]

    def dce_jvp(primals: list, tangents: list) -> tuple[list, list]:
        p_out, t_out = jvp(primals, tangents)
        return [p for p, u in zip(p_out, used) if u], [t for t, u in zip(t_out, used) if u]

    dce_jvp.__name__ = getattr(jvp, "__name__", "jvp")
    params = dict(eqn.params, call_jaxpr=_dce_body(eqn.params["call_jaxpr"], used), jvp=dce_jvp)
    return eqn.replace(outvars=[v for v, u in zip(eqn.outvars, used) if u], params=params)


def _custom_vjp_call_dce(eqn: Any, used: list[bool]) -> Any:
    if all(used) or not any(used):
        return eqn
    fwd, bwd = eqn.params["fwd"], eqn.params["bwd"]
    out_avals = list(eqn.params["call_jaxpr"].out_avals)

    def dce_fwd(primals: list, perturbed: Sequence[bool]) -> tuple[list, list, Any]:
        outs, res_dyn, res_info = fwd(primals, perturbed)
        return [o for o, u in zip(outs, used) if u], res_dyn, res_info

    def dce_bwd(res_info: Any, res_dyn: list, cts: list) -> list:
        it = iter(cts)  # the unread outputs' cotangents are zeros
        return bwd(res_info, res_dyn, [next(it) if u else Zero(tangent_aval(a)) for a, u in zip(out_avals, used)])

    dce_fwd.__name__ = getattr(fwd, "__name__", "fwd")
    dce_fwd.optimize_remat = getattr(fwd, "optimize_remat", False)  # type: ignore[attr-defined]
    dce_bwd.__name__ = getattr(bwd, "__name__", "bwd")
    params = dict(eqn.params, call_jaxpr=_dce_body(eqn.params["call_jaxpr"], used), fwd=dce_fwd, bwd=dce_bwd)
    return eqn.replace(outvars=[v for v, u in zip(eqn.outvars, used) if u], params=params)


_ir.dce_rules[custom_jvp_call_p] = _custom_jvp_call_dce
_ir.dce_rules[custom_vjp_call_p] = _custom_vjp_call_dce
