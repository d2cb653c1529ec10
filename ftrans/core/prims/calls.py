"""Call-like primitives: an equation that runs a nested jaxpr (its *body*) on its operands.

``jit_call``, ``remat``, ``custom_jvp_call``, ``custom_vjp_call`` and ``pmap`` (and the
coming ``shard_map``) differ only in a few declared points; every
rule that follows from "this is a call of the body" is written once, in the
``calls`` module of each table's family directory, and installed on every
:class:`CallPrimitive` through :func:`for_each_call_primitive`, including
primitives created after the rule module was imported.  A table whose rule
must differ for one primitive registers that rule explicitly; the generic
installers never overwrite an explicit entry.

Bodies are closed over no constants: whoever builds a call moves the body's
constants to leading operands with :func:`hoist_consts` first, so a body can
be lowered as a private function and compared by identity for caching.

The small ``name`` (a tag for remat policies) and ``optimization_barrier``
primitives live here too: they exist for ``remat``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import numpy as np

from ftrans.core.array import Array
from ftrans.core.avals import ShapedArray
from ftrans.core.ir import ClosedJaxpr, JaxprEqn, dce_rules, hoist_consts, pp_eqn_rules, pp_params_rules
from ftrans.core.primitive import Primitive
from ftrans.errors import FtransTypeError

__all__ = [
    "CallPrimitive", "call_primitives", "for_each_call_primitive", "hoist_consts",
    "jit_call_p", "call_p", "closed_call_p", "remat_p", "custom_jvp_call_p", "custom_vjp_call_p", "custom_vmap_call_p", "custom_dce_call_p",
    "custom_lin_p",
    "name_p", "xla_metadata_value_p", "linear_call_p", "optimization_barrier_p", "composite_p", "HashableAttribute",
]

# Every call primitive, in creation order; installers run on each one, present and future.
call_primitives: list[CallPrimitive] = []
_installers: list[Callable[[CallPrimitive], None]] = []


def _same_params(params: dict, rule: str, num_operands: int) -> dict:
    return params


def _no_env(params: dict) -> Any:
    return contextlib.nullcontext()


class CallPrimitive(Primitive):
    """A primitive whose meaning is "evaluate the body in ``params[body_param]`` on the operands".

    What a call primitive may declare instead of writing rules:

    * ``body_param``: the parameter holding the body (``jaxpr``; the custom
      derivative calls keep JAX's ``call_jaxpr``).
    * ``func_name(params)``: the name of the private function the body lowers
      to (default ``params["name"]``, else the primitive's name).
    * ``update_params(params, rule, num_operands)``: the params of a call a
      rule derives from this one, the body already replaced; ``rule`` is
      ``"jvp"``, ``"transpose"``, ``"batch"``, or ``"known"``/``"unknown"``
      (the two halves partial evaluation makes); ``num_operands`` counts the
      new call's operands.  ``jit_call`` renames the call and resets
      donation here.
    * ``residual_policy(params)``: which of the body's known values
      reverse mode may keep as residuals, as an equation predicate (``None``:
      any); ``remat``'s policy is this.
    * ``inline_known``: whether linearization evaluates the known half of the
      body inline (``remat``: its residuals must stay visible as the values
      the policy chose) rather than as a new call of this primitive.
    * ``map_params(params, rule, ins, outs)``: for a primitive whose operands
      and results are not the body's one for one (``pmap`` maps an axis of
      some of them), the params of a derived call given where each of its
      operands (``ins``) and results (``outs``) comes from: ``("in", i)`` the
      old operand ``i`` (or its tangent or cotangent), ``("out", j)`` the old
      result ``j`` (or its tangent or cotangent), ``"const"`` a value that is
      the same for every element (a hoisted constant), ``"res"`` a new value
      computed per element (a residual).  The generic JVP, partial-evaluation
      and transpose rules pass these; ``None`` (the default) skips the step.
    * ``body_env(params)``: a context manager in effect while a rule stages,
      differentiates or transposes the body (``pmap`` binds its axis name
      there, so collectives in the body find it).
    """

    __slots__ = ("body_param", "func_name", "update_params", "residual_policy", "inline_known", "map_params",
                 "body_env")

    def __init__(self, name: str, *, body_param: str = "jaxpr",
                 func_name: Callable[[dict], str] | None = None,
                 update_params: Callable[[dict, str, int], dict] | None = None,
                 residual_policy: Callable[[dict], Callable[[JaxprEqn], bool] | None] | None = None,
                 inline_known: bool = False,
                 map_params: Callable[[dict, str, tuple, tuple], dict] | None = None,
                 body_env: Callable[[dict], Any] | None = None):
        super().__init__(name, multiple_results=True, higher_order=True)
        self.map_params = map_params
        self.body_env = body_env or _no_env
        self.body_param = body_param
        self.func_name = func_name or (lambda params: str(params.get("name", name)))
        self.update_params = update_params or _same_params
        self.residual_policy = residual_policy or (lambda params: None)
        self.inline_known = inline_known
        self.def_abstract_eval(self._abstract_eval)
        self.def_weak_type(self._weak_types)
        self.def_impl(self._evaluate_body)
        call_primitives.append(self)
        for install in list(_installers):
            install(self)

    def body(self, params: dict) -> ClosedJaxpr:
        return params[self.body_param]

    def with_body(self, params: dict, body: ClosedJaxpr, rule: str, num_operands: int,
                  ins: tuple | None = None, outs: tuple | None = None) -> dict:
        """The params of a call derived by ``rule``: the new body, then the primitive's own updates.

        ``ins``/``outs`` say where the new call's operands and results come from
        (see ``map_params``); rules that do not change the correspondence may omit them.
        """
        new = self.update_params({**params, self.body_param: body}, rule, num_operands)
        if self.map_params is not None and ins is not None:
            new = self.map_params(new, rule, tuple(ins), tuple(outs))
        return new

    def _abstract_eval(self, *avals: ShapedArray, **params: Any) -> list[ShapedArray]:
        body = self.body(params)
        want = body.in_avals
        if len(avals) != len(want):
            raise FtransTypeError(f"Call primitive {self.name} {self.func_name(params)} with {len(avals)} operands "
                                  f"cannot call jaxpr with {len(want)} inputs")
        if any((a.shape, a.dtype) != (w.shape, w.dtype) for a, w in zip(avals, want)):
            got = ", ".join(a.str_short() for a in avals)
            exp = ", ".join(a.str_short() for a in want)
            raise FtransTypeError(
                f"{self.name} {self.func_name(params)}: operands ({got}) do not match the jaxpr's inputs ({exp})")
        return list(body.out_avals)

    def _weak_types(self, weaks: tuple, **params: Any) -> tuple:
        return tuple(a.weak_type for a in self.body(params).out_avals)

    def _evaluate_body(self, *vals: Any, **params: Any) -> list:
        """Eager application: interpret the body on the host values (``jit_call`` compiles instead)."""
        from ftrans.core.jaxpr_api import eval_jaxpr

        body = self.body(params)
        outs = eval_jaxpr(body.jaxpr, list(body.consts), *[Array._new(np.asarray(v), False) for v in vals])
        return [np.asarray(o) for o in outs]


def for_each_call_primitive(install: Callable[[CallPrimitive], None]) -> None:
    """Run ``install`` on every call primitive now and on each one created later."""
    _installers.append(install)
    for prim in list(call_primitives):
        install(prim)


# ----------------------------------------------------------------------------
# The call primitives


def _no_donation(params: dict, rule: str, num_operands: int) -> dict:
    """A derived jit call donates nothing (its operands are the caller's residuals and tangents).

    It keeps the function's name, as JAX's: the transform is recorded in the name stack of the
    equation that calls it (``jvp(foo)``, ``transpose(jvp(foo))``), which the StableHLO locations
    carry (``jit(g)/jvp(foo)/jit(f)/sin``)."""
    if rule == "batch":  # new operands (the batched body's constants) lead; the rest keep their donation
        old = tuple(params["donated_invars"])
        return {**params, "donated_invars": (False,) * (num_operands - len(old)) + old}
    return {**params, "donated_invars": (False,) * num_operands}


# Installed by ``transforms/jit.py``: a ``jit_call`` applied to concrete operands, some of them donated, runs as
# a jitted program donating those (as JAX's jit primitive does eagerly: ``jaxpr_as_fun`` of a donating jit), or
# NotImplemented (the other eager rules).
eager_donating_call: Callable[[Primitive, tuple, dict], Any] | None = None


class _JitCallPrimitive(CallPrimitive):
    __slots__ = ()

    def bind(self, *args: Any, **params: Any) -> Any:
        if eager_donating_call is not None and True in params.get("donated_invars", ()):
            out = eager_donating_call(self, args, params)
            if out is not NotImplemented:
                return out
        return super().bind(*args, **params)


jit_call_p = _JitCallPrimitive("jit_call", update_params=_no_donation)


def _jit_call_printed(eqn: JaxprEqn, context: Any) -> tuple[str, list]:
    """A jitted call as JAX prints one: ``jit[name=f jaxpr={ lambda ... }]``, its ``name`` first and the
    parameters that hold their defaults (nothing donated, ...) left out; the body's inputs and outputs are
    named as the call's operands and results where they can be (unless the body is printed apart)."""
    params = dict(eqn.params)
    name = params.pop("name", None)
    for k, v in list(params.items()):
        if _jit_default(k, v):
            del params[k]
    body = params.get("jaxpr")
    if body is not None and not context.is_shared(body):
        j = body.jaxpr if isinstance(body, ClosedJaxpr) else body
        context.suggest_same_var_names(j.invars, eqn.invars)
        context.suggest_same_var_names(j.outvars, eqn.outvars)
    return "jit", ([("name", name)] if name is not None else []) + sorted(params.items())


def _jit_default(k: str, v: Any) -> bool:
    """Whether a jitted call's parameter holds the value JAX's printer leaves out."""
    if k in ("donated_invars", "keep_unused", "inline", "compiler_options_kvs"):
        return not any(v) if isinstance(v, tuple) else not v
    if k == "ctx_mesh":
        return v is None or bool(getattr(v, "empty", False))
    if k in ("in_shardings", "out_shardings", "in_layouts", "out_layouts"):
        return isinstance(v, tuple) and all(x is None for x in v)
    return False


pp_eqn_rules[jit_call_p] = _jit_call_printed


class _FunCallPrimitive(CallPrimitive):
    """JAX's ``call_p`` / ``closed_call_p``: ``bind(*args, subfuns=(f,))`` stages ``f`` (a function of the
    flat operands returning a flat list, e.g. ``ftrans.extend.linear_util.wrap_init`` of one) on the operands'
    types and calls the staged body; a bind with ``call_jaxpr=`` (as an interpreter re-binds an equation)
    calls that body."""

    __slots__ = ()

    def bind(self, *args: Any, subfuns: tuple = (), **params: Any) -> Any:
        if subfuns:
            from ftrans.core.trace import aval_of, stage

            (fun,) = subfuns
            run = getattr(fun, "call_wrapped", fun)
            avals = [aval_of(x) for x in args]
            # NumPy operands enter with the canonical dtype their type was traced with
            args = tuple(x.astype(a.dtype) if isinstance(x, (np.ndarray, np.generic)) and x.dtype != a.dtype else x
                         for x, a in zip(args, avals))
            body, consts = hoist_consts(stage(lambda *xs: list(run(*xs)), avals)[0])
            args = (*consts, *args)
            params = {**params, self.body_param: body}
        return super().bind(*args, **params)


call_p = _FunCallPrimitive("call", body_param="call_jaxpr")
closed_call_p = _FunCallPrimitive("closed_call", body_param="call_jaxpr")


def _remat_update(params: dict, rule: str, num_operands: int) -> dict:
    """The unknown half of a linearized checkpoint is the differentiated (recomputing) one."""
    return {**params, "differentiated": True} if rule == "unknown" else params


def _remat_policy(params: dict) -> Callable[[JaxprEqn], bool]:
    policy = params["policy"]

    def saveable(eqn: JaxprEqn) -> bool:
        return policy is not None and bool(policy(eqn.primitive, *[a.aval for a in eqn.invars], **eqn.params))

    return saveable


remat_p = CallPrimitive("remat2", func_name=lambda params: "checkpoint", update_params=_remat_update,
                        residual_policy=_remat_policy, inline_known=True)

# The custom-derivative calls: their own JVP, batching and partial-eval rules (ad_rules/batch_rules
# ``calls``) use the user's rules; everything else treats them as plain calls of the user's function.
custom_jvp_call_p = CallPrimitive("custom_jvp_call", body_param="call_jaxpr")
custom_vjp_call_p = CallPrimitive("custom_vjp_call", body_param="call_jaxpr")
# ``custom_batching.custom_vmap``: its batching rule calls the user's vmap rule and its JVP makes a call of
# the JVP whose rule is derived from the user's (batch_rules / ad_rules ``calls``); otherwise a plain call.
custom_vmap_call_p = CallPrimitive("custom_vmap_call", body_param="call_jaxpr")


def _custom_call_printed(params: dict) -> list[tuple[str, Any]]:
    """A custom-derivative call's parameters as printed: its ``name`` first, then the rest by name, without
    ``num_consts`` when it is 0 (as JAX prints them)."""
    rest = sorted((k, getattr(v, "__name__", v) if callable(v) else v) for k, v in params.items()
                  if k != "name" and not (k == "num_consts" and not v))  # the rules by their names (JAX's)
    return ([("name", params["name"])] if "name" in params else []) + rest


pp_params_rules[custom_jvp_call_p] = _custom_call_printed
pp_params_rules[custom_vjp_call_p] = _custom_call_printed


# ``custom_vjp(..., optimize_remat=True)``'s forward function, staged: ``jaxpr`` (the user's ``fwd``) gives the
# ``num_primal`` primal outputs, then the residuals; ``dce_jaxpr`` holds the function itself on the same
# operands.  Where no one reads the residuals (the forward pass of a ``checkpoint``, whose backward pass
# recomputes them), dead-code elimination runs the function instead of ``fwd`` (JAX's ``custom_dce``), so
# the forward work is not done twice.
def _custom_dce_update(params: dict, rule: str, num_operands: int) -> dict:
    """A call a rule derives (its JVP, batched form, halves) computes something else: the function no
    longer stands in for it, and it runs its body whole."""
    return {**params, "dce_jaxpr": ()}


def _custom_dce_prune(eqn: JaxprEqn, used: list[bool]) -> JaxprEqn:
    alt, n = eqn.params["dce_jaxpr"], eqn.params["num_primal"]
    if not alt or any(used[n:]):
        return eqn
    return eqn.replace(outvars=list(eqn.outvars[:n]), params={**eqn.params, "jaxpr": alt[0], "dce_jaxpr": ()})


custom_dce_call_p = CallPrimitive("custom_dce_call", update_params=_custom_dce_update)
dce_rules[custom_dce_call_p] = _custom_dce_prune


# ----------------------------------------------------------------------------
# custom_lin: the output tangents of a custom_vjp call, transposed by the user's bwd


custom_lin_p = Primitive("custom_lin", multiple_results=True)


def _custom_lin_printed(params: dict) -> list[tuple[str, Any]]:
    """``custom_lin`` printed as JAX's: the backward function by name, which inputs' tangents are zero
    (``in_zeros``), ``num_res`` and ``symbolic_zeros``."""
    bwd = params["bwd"]
    return [("bwd", getattr(bwd, "__name__", bwd)), ("in_zeros", [not nz for nz in params["nonzero"]]),
            ("num_res", params["num_res"]), ("symbolic_zeros", params.get("symbolic_zeros", False))]


pp_params_rules[custom_lin_p] = _custom_lin_printed


@custom_lin_p.def_abstract_eval
def _custom_lin_abstract_eval(*avals: ShapedArray, out_avals: tuple, **_: Any) -> list[ShapedArray]:
    return list(out_avals)


def no_forward_error(name: str) -> FtransTypeError:
    return FtransTypeError(
        f"can't apply forward-mode autodiff (jvp) to a custom_vjp function ({name}): it defines only a "
        "reverse-mode rule. Use vjp/grad, or define the function with custom_jvp instead."
    )


@custom_lin_p.def_impl
def _custom_lin_impl(*vals: Any, name: str, **_: Any) -> list:
    raise no_forward_error(name)


# ----------------------------------------------------------------------------
# name: tag a value for the name-based remat policies


name_p = Primitive("name")
name_p.def_abstract_eval(lambda x, *, name: x)
name_p.def_impl(lambda x, *, name: x)
name_p.def_weak_type(lambda weaks, **_: weaks[0])


# ----------------------------------------------------------------------------
# linear_call (``custom_derivatives.linear_call``): ``callee`` (closed over nothing: its ``num_callee_consts``
# constants lead the operands, then ``num_res`` residual operands, then the linear ones) applied to the
# operands; its transpose is a call of the user's transpose function, which ``transpose_thunk()`` stages on
# first need (``(ClosedJaxpr, consts)``), with the callee as that call's transpose in turn.


linear_call_p = Primitive("linear_call", multiple_results=True, higher_order=True)


def _closed_call_types(what: str, avals: tuple, closed: ClosedJaxpr) -> list[ShapedArray]:
    """The result types of a primitive that applies ``closed`` to its operands (checked against its inputs)."""
    want = closed.in_avals
    if len(avals) != len(want) or any((a.shape, a.dtype) != (w.shape, w.dtype) for a, w in zip(avals, want)):
        got = ", ".join(a.str_short() for a in avals)
        exp = ", ".join(a.str_short() for a in want)
        raise FtransTypeError(f"{what}: operands ({got}) do not match its inputs ({exp})")
    return list(closed.out_avals)


def _apply_closed(closed: ClosedJaxpr, vals: tuple) -> list:
    """Eager application of ``closed`` to NumPy operands (a primitive whose meaning is a jaxpr)."""
    from ftrans.core.jaxpr_api import eval_jaxpr

    outs = eval_jaxpr(closed.jaxpr, list(closed.consts), *[Array._new(np.asarray(v), False) for v in vals])
    return [np.asarray(o._value if isinstance(o, Array) else o, a.dtype) for o, a in zip(outs, closed.out_avals)]


@linear_call_p.def_abstract_eval
def _linear_call_abstract_eval(*avals: ShapedArray, callee: ClosedJaxpr, **_: Any) -> list[ShapedArray]:
    return _closed_call_types("linear_call (the linear function)", avals, callee)


linear_call_p.def_weak_type(lambda weaks, *, callee, **_: tuple(a.weak_type for a in callee.out_avals))


@linear_call_p.def_impl
def _linear_call_impl(*vals: Any, callee: ClosedJaxpr, **_: Any) -> list:
    return _apply_closed(callee, vals)


# ----------------------------------------------------------------------------
# xla_metadata_value: ``set_xla_metadata(x, k=v)`` tags the op that produced ``x`` (JAX's identity primitive
# of the same name); ``xla_metadata_kvs`` is the sorted ``(name, value)`` pairs


xla_metadata_value_p = Primitive("xla_metadata_value")
xla_metadata_value_p.def_abstract_eval(lambda x, *, xla_metadata_kvs: x)
xla_metadata_value_p.def_impl(lambda x, *, xla_metadata_kvs: x)
xla_metadata_value_p.def_weak_type(lambda weaks, **_: weaks[0])


# ----------------------------------------------------------------------------
# optimization_barrier: keep XLA from merging recomputation with the forward pass


optimization_barrier_p = Primitive("optimization_barrier", multiple_results=True)
optimization_barrier_p.def_abstract_eval(lambda *avals: list(avals))
optimization_barrier_p.def_impl(lambda *vals: list(vals))
optimization_barrier_p.def_weak_type(lambda weaks, **_: tuple(weaks))


def _optimization_barrier_sharding(mesh: Any, out: Any, *avals: ShapedArray) -> list:
    """Each result keeps its operand's sharding type (an untyped operand, an untyped result)."""
    return [None if a.typed_sharding is None else (mesh, tuple(a.typed_sharding.spec)) for a in avals]


optimization_barrier_p.sharding_rule = _optimization_barrier_sharding


# ----------------------------------------------------------------------------
# composite: a named operation with a decomposition (``stablehlo.composite``)


class HashableAttribute:
    """A NumPy array held as a ``composite`` attribute: hashable and compared by value, so the
    equation's params can be compared and cached."""

    __slots__ = ("val",)

    def __init__(self, val: np.ndarray):
        self.val = val

    def __hash__(self) -> int:
        return hash((self.val.shape, self.val.dtype, self.val.tobytes()))

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, HashableAttribute) and self.val.shape == other.val.shape
                and self.val.dtype == other.val.dtype and bool(np.array_equal(self.val, other.val)))

    def __repr__(self) -> str:
        return repr(self.val)


# ``composite`` runs ``jaxpr`` (the decomposition, closed over nothing: its constants lead the operands) as
# one named operation: ``name``, ``version`` and ``attributes`` (``(key, leaves, treedef)`` per keyword) tell
# a compiler what it computes; one that does not know it runs the decomposition.  It is not a call: passes
# keep it whole (its name is its meaning), and it has no derivative or batching rule, as in JAX.
composite_p = Primitive("composite", multiple_results=True, higher_order=True)


@composite_p.def_abstract_eval
def _composite_abstract_eval(*avals: ShapedArray, jaxpr: ClosedJaxpr, name: str, **_: Any) -> list[ShapedArray]:
    return _closed_call_types(f"composite {name} (the decomposition)", avals, jaxpr)


composite_p.def_weak_type(lambda weaks, *, jaxpr, **_: tuple(a.weak_type for a in jaxpr.out_avals))


@composite_p.def_impl
def _composite_impl(*vals: Any, jaxpr: ClosedJaxpr, **_: Any) -> list:
    """Eager application: the decomposition's meaning."""
    return _apply_closed(jaxpr, vals)
