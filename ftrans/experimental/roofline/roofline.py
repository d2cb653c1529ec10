"""The roofline interpreter: walks a traced program and adds up, equation by equation, what each primitive's
rule says it costs (FLOPs, bytes moved to and from HBM, bytes and hops over the inter-chip interconnect), and
the most bytes live at once.  JAX's ``jax.experimental.roofline``, over ftrans's IR.

Each rule takes a :class:`RooflineRuleContext` (the equation's primitive, input and output types, the mesh),
the inputs as :class:`RooflineShape` and the equation's params, and returns a :class:`RooflineResult`.  The
built-in rules live in ``rooflines.py``; :func:`register_roofline` adds one for another primitive.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import wraps
from typing import Any, Protocol

import numpy as np

from ftrans.core.avals import ShapedArray
from ftrans.core.ir import EMPTY_NAME_STACK, ClosedJaxpr, Jaxpr, Literal, NameStack
from ftrans.core.keys import KeyDtype
from ftrans.core.primitive import Primitive
from ftrans.core.traceback_util import api_boundary
from ftrans.errors import FtransTypeError

__all__ = ["RooflineRuleContext", "RooflineShape", "RooflineResult", "roofline", "roofline_and_grad",
           "register_roofline", "register_standard_roofline"]

_log = logging.getLogger("ftrans.experimental.roofline")


@dataclass(frozen=True, slots=True, kw_only=True)
class RooflineRuleContext:
    """What a roofline rule knows about the equation besides its inputs and params."""

    name_stack: NameStack
    primitive: Primitive
    avals_in: Sequence[Any]
    avals_out: Sequence[Any]
    jaxpr_eqn_ctx: Any
    mesh: Any
    pin_lhs_in_vmem: bool
    pin_rhs_in_vmem: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class RooflineShape:
    """An array's shape and dtype (a numpy dtype or a PRNG key dtype), with its element count and bytes."""

    shape: tuple[int, ...]
    dtype: Any

    @classmethod
    def from_aval(cls, aval: Any) -> RooflineShape:
        if not isinstance(aval, ShapedArray):
            raise TypeError(f"Expected ShapedArray, got {type(aval)}.")
        if not isinstance(aval.dtype, (np.dtype, KeyDtype)):
            raise TypeError(f"Expected numpy or prng.KeyTy dtype, got {type(aval.dtype)}.")
        return cls(shape=tuple(aval.shape), dtype=aval.dtype)

    @property
    def size(self) -> int:
        n = 1
        for d in self.shape:
            n *= int(d)
        return n

    @property
    def bytes(self) -> int:
        return int(self.size * self.dtype.itemsize)

    @classmethod
    def total_bytes(cls, avals: Sequence[Any]) -> int:
        return sum(cls.from_aval(a).bytes for a in avals)


def _merge(a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
    return {k: a.get(k, 0) + b.get(k, 0) for k in set(a) | set(b)}


@dataclass(frozen=True, slots=True, kw_only=True)
class RooflineResult:
    """Costs: ``flops`` (of the matmul-like ops), ``unfused_flops`` (of every op), ``ici_bytes`` and
    ``ici_latency`` per mesh axis, ``hbm_bytes`` / ``unfused_hbm_bytes`` (bytes read and written), and
    ``peak_hbm_bytes`` (the most bytes live at once).  ``+`` adds two (the peak is the larger one); ``*``
    scales by a number."""

    flops: int = 0
    unfused_flops: int = 0
    ici_bytes: dict[str, int] = field(default_factory=dict)
    ici_latency: dict[str, int] = field(default_factory=dict)
    hbm_bytes: int = 0
    peak_hbm_bytes: int = 0
    unfused_hbm_bytes: int = 0

    @classmethod
    def zeros(cls) -> RooflineResult:
        return cls()

    def __add__(self, other: RooflineResult) -> RooflineResult:
        return RooflineResult(
            flops=self.flops + other.flops,
            unfused_flops=self.unfused_flops + other.unfused_flops,
            ici_bytes=_merge(self.ici_bytes, other.ici_bytes),
            ici_latency=_merge(self.ici_latency, other.ici_latency),
            hbm_bytes=self.hbm_bytes + other.hbm_bytes,
            peak_hbm_bytes=max(self.peak_hbm_bytes, other.peak_hbm_bytes),
            unfused_hbm_bytes=self.unfused_hbm_bytes + other.unfused_hbm_bytes,
        )

    def __mul__(self, constant: int | float) -> RooflineResult:
        return RooflineResult(
            flops=int(self.flops * constant),
            unfused_flops=int(self.unfused_flops * constant),
            ici_bytes={k: int(v * constant) for k, v in self.ici_bytes.items()},
            ici_latency={k: int(v * constant) for k, v in self.ici_latency.items()},
            hbm_bytes=int(self.hbm_bytes * constant),
            peak_hbm_bytes=int(self.peak_hbm_bytes * constant),
            unfused_hbm_bytes=int(self.unfused_hbm_bytes * constant),
        )

    def __rmul__(self, constant: int | float) -> RooflineResult:
        return self.__mul__(constant)


class _RooflineRule(Protocol):
    def __call__(self, ctx: RooflineRuleContext, *args: RooflineShape, **kw: Any) -> RooflineResult: ...


_rooflines: dict[Primitive, _RooflineRule] = {}

# The bodies the interpreter adds up in place of a rule (JAX's: an equation's ``jaxpr`` param -- ``jit``,
# ``checkpoint``, ``scan``'s body once, ``shard_map`` -- or else its ``call_jaxpr`` -- the custom-derivative
# calls).  Other higher-order primitives (``cond``, ``while_loop``) go through their rules, zero by default.
_BODY_PARAMS = ("jaxpr", "call_jaxpr")


def _wrap_name(f_name: str, transform: str) -> str:
    return f"{transform}({f_name})"


def _aval(v: Any) -> Any:
    return v.aval


def _last_used(jaxpr: Jaxpr) -> dict[int, Any]:
    """For each variable (by id), the last equation reading it; None for the jaxpr's outputs."""
    last: dict[int, Any] = {id(v): None for v in jaxpr.outvars if not isinstance(v, Literal)}
    for eqn in reversed(jaxpr.eqns):
        for v in eqn.invars:
            if not isinstance(v, Literal) and id(v) not in last:
                last[id(v)] = eqn
    return last


def _body_of(params: dict) -> Any:
    for k in _BODY_PARAMS:
        if k in params:
            b = params[k]
            if isinstance(b, (Jaxpr, ClosedJaxpr)):
                return b
            return None
    return None


def _roofline_interpreter(f_name: str, jaxpr: Jaxpr | ClosedJaxpr, mesh: Any, *, pin_lhs_in_vmem: bool = False,
                          pin_rhs_in_vmem: bool = False) -> RooflineResult:
    name_stack = EMPTY_NAME_STACK + _wrap_name(f_name, "roofline")
    result = RooflineResult.zeros()
    jaxpr = jaxpr.jaxpr if isinstance(jaxpr, ClosedJaxpr) else jaxpr
    env: dict[int, RooflineShape] = {}
    for v in (*jaxpr.constvars, *jaxpr.invars):
        env[id(v)] = RooflineShape.from_aval(v.aval)
    last_used = _last_used(jaxpr)
    current = sum(s.bytes for s in env.values())
    peak = current

    for eqn in jaxpr.eqns:
        info = eqn.source_info
        eqn_names = name_stack + (info.name_stack if info is not None else EMPTY_NAME_STACK)
        body = _body_of(eqn.params)
        if body is not None:
            result += _roofline_interpreter(_wrap_name(f_name, eqn.primitive.name), body, mesh,
                                            pin_lhs_in_vmem=pin_lhs_in_vmem, pin_rhs_in_vmem=pin_rhs_in_vmem)
        else:
            rule = _rooflines.get(eqn.primitive)
            if rule is None:
                if not getattr(eqn.primitive, "ftrans_owned", False):
                    _log.warning("No roofline rule for %s, skipping...", eqn.primitive)
            else:
                args = [RooflineShape.from_aval(v.aval) if isinstance(v, Literal) else env[id(v)]
                        for v in eqn.invars]
                result += rule(
                    RooflineRuleContext(
                        name_stack=eqn_names,
                        primitive=eqn.primitive,
                        avals_in=[_aval(v) for v in eqn.invars],
                        avals_out=[_aval(v) for v in eqn.outvars],
                        jaxpr_eqn_ctx=eqn.ctx,
                        mesh=mesh,
                        pin_lhs_in_vmem=pin_lhs_in_vmem,
                        pin_rhs_in_vmem=pin_rhs_in_vmem,
                    ),
                    *args,
                    **eqn.params,
                )
        # The outputs come alive; the inputs read for the last time die (once per operand position).
        outs = [RooflineShape.from_aval(v.aval) for v in eqn.outvars]
        current += sum(s.bytes for s in outs)
        for v, s in zip(eqn.outvars, outs):
            env[id(v)] = s
        dead = [v for v in eqn.invars if not isinstance(v, Literal) and last_used.get(id(v), 0) is eqn]
        current -= sum(env[id(v)].bytes for v in dead)
        for v in dead:
            env.pop(id(v), None)
        peak = max(peak, current)

    return result + RooflineResult(peak_hbm_bytes=peak)


def _is_spec(x: Any) -> bool:
    return x is None or type(x).__name__ == "PartitionSpec"


def _broadcast_specs(specs: Any, tree: Any) -> list:
    """One spec per leaf of ``tree``: ``specs`` is a prefix of it (a spec stands for its whole subtree)."""
    from ftrans.tree_util import tree_flatten, tree_leaves

    spec_leaves, spec_tree = tree_flatten(specs, is_leaf=_is_spec)
    try:
        subtrees = spec_tree.flatten_up_to(tree)
    except (ValueError, TypeError) as e:
        raise ValueError(f"roofline: out_specs {specs!r} is not a prefix of the outputs' structure: {e}") from None
    out: list = []
    for spec, sub in zip(spec_leaves, subtrees):
        out += [spec] * len(tree_leaves(sub))
    return out


def _f_with_vjp(f: Callable) -> Callable:
    import ftrans
    import ftrans.numpy as fnp

    @wraps(f)
    def wrapped(*args: Any) -> Any:
        primals, f_vjp = ftrans.vjp(f, *args)
        return f_vjp(ftrans.tree_util.tree_map(lambda p: fnp.asarray(p, dtype=fnp.bfloat16), primals))

    return wrapped


def _fun_name(f: Any) -> str:
    return getattr(f, "__qualname__", None) or getattr(f, "__name__", None) or type(f).__name__


def roofline(f: Callable, mesh: Any = None, in_specs: Any = None, out_specs: Any = None, *,
             pin_lhs_in_vmem: bool = False, pin_rhs_in_vmem: bool = False, vjp: bool = False,
             print_jaxpr: bool = False) -> Callable[..., tuple[Any, RooflineResult]]:
    """JAX's ``roofline``: a function that traces ``f`` on its arguments (arrays or ``ShapeDtypeStruct``s)
    and returns ``(output shapes, RooflineResult)``.

    With ``mesh``, ``in_specs`` and ``out_specs``, ``f`` is per-device code run under ``shard_map`` and the
    costs are one device's (collectives cost interconnect bytes by the mesh's axis sizes); the output shapes
    then carry ``NamedSharding(mesh, spec)``.  ``vjp=True`` costs the backward pass of ``f`` (cotangents in
    bfloat16).  ``pin_lhs_in_vmem`` / ``pin_rhs_in_vmem`` leave a matmul's operand out of its HBM bytes.
    ``print_jaxpr`` prints the program costed.
    """
    if not callable(f):
        raise FtransTypeError(f"roofline: expected a callable, got {type(f).__name__} {f!r}")

    @wraps(f)
    @api_boundary
    def wrapped(*args: Any) -> tuple[Any, RooflineResult]:
        import ftrans
        from ftrans.core.prims.shard_map import shard_map_p
        from ftrans.interpreters.partial_eval import dce_jaxpr
        from ftrans.sharding import NamedSharding
        from ftrans.tree_util import tree_flatten, tree_unflatten

        wrapped_f = f
        if in_specs is not None and out_specs is not None and mesh is not None:
            wrapped_f = ftrans.shard_map(wrapped_f, mesh=mesh, in_specs=in_specs, out_specs=out_specs)
        if vjp:
            wrapped_f = _f_with_vjp(wrapped_f)
        closed, out_shapes = ftrans.make_jaxpr(wrapped_f, return_shape=True)(*args)

        if out_specs is not None and mesh is not None:
            specs = _broadcast_specs(out_specs, out_shapes)
            flat, tree = tree_flatten(out_shapes)
            flat = [ftrans.ShapeDtypeStruct(s.shape, s.dtype, sharding=NamedSharding(mesh, spec))
                    for s, spec in zip(flat, specs)]
            out_shapes = tree_unflatten(tree, flat)

        jaxpr, _ = dce_jaxpr(closed.jaxpr, [True] * len(closed.jaxpr.outvars))
        shard_maps = [e for e in jaxpr.eqns if e.primitive is shard_map_p]
        if shard_maps:
            body = shard_maps[-1].params.get("jaxpr")
            if body is None:
                raise ValueError(f"Missing shard_map jaxpr in {jaxpr}.")
            jaxpr = body
        if print_jaxpr:
            print(jaxpr)
        return out_shapes, _roofline_interpreter(_fun_name(f), jaxpr, mesh, pin_lhs_in_vmem=pin_lhs_in_vmem,
                                                 pin_rhs_in_vmem=pin_rhs_in_vmem)

    return wrapped


def register_roofline(prim: Primitive) -> Callable[[_RooflineRule], _RooflineRule]:
    """Decorator: ``rule(ctx, *shapes, **params) -> RooflineResult`` becomes ``prim``'s roofline rule."""
    if not isinstance(prim, Primitive):
        raise FtransTypeError(f"register_roofline: expected a Primitive, got {type(prim).__name__} {prim!r}")

    def register(rule: _RooflineRule) -> _RooflineRule:
        if not callable(rule):
            raise FtransTypeError(f"register_roofline({prim.name}): the rule must be callable, got {rule!r}")
        _rooflines[prim] = rule
        return rule

    return register


def _standard_rule(ctx: RooflineRuleContext, *args: Any, **kwargs: Any) -> RooflineResult:
    return RooflineResult.zeros()


def register_standard_roofline(prim: Primitive) -> None:
    """Give ``prim`` the rule that costs nothing (for data movement the compiler fuses away)."""
    if not isinstance(prim, Primitive):
        raise FtransTypeError(f"register_standard_roofline: expected a Primitive, got {type(prim).__name__} "
                              f"{prim!r}")
    _rooflines[prim] = _standard_rule


def roofline_and_grad(f: Callable, mesh: Any, in_specs: Any, out_specs: Any, *, pin_lhs_in_vmem: bool = False,
                      pin_rhs_in_vmem: bool = False,
                      print_jaxpr: bool = False) -> Callable[..., tuple[Any, RooflineResult, RooflineResult]]:
    """JAX's ``roofline_and_grad``: ``(output shapes, forward costs, backward costs)``; the backward pass is
    costed on bfloat16 copies of the arguments (int32 ones stay int32)."""
    if not callable(f):
        raise FtransTypeError(f"roofline_and_grad: expected a callable, got {type(f).__name__} {f!r}")

    @wraps(f)
    @api_boundary
    def wrapped(*args: Any) -> tuple[Any, RooflineResult, RooflineResult]:
        import ftrans
        import ftrans.numpy as fnp
        from ftrans.tree_util import tree_map

        primal_shapes, fwd = roofline(f, mesh, in_specs, out_specs, pin_lhs_in_vmem=pin_lhs_in_vmem,
                                      pin_rhs_in_vmem=pin_rhs_in_vmem, print_jaxpr=print_jaxpr)(*args)
        bwd_args = tree_map(
            lambda x: ftrans.ShapeDtypeStruct(x.shape, fnp.int32 if x.dtype == fnp.int32 else fnp.bfloat16,
                                              sharding=getattr(x, "sharding", None)), args)
        _, bwd = roofline(f, mesh, in_specs, out_specs, pin_lhs_in_vmem=pin_lhs_in_vmem,
                          pin_rhs_in_vmem=pin_rhs_in_vmem, vjp=True, print_jaxpr=print_jaxpr)(*bwd_args)
        return primal_shapes, fwd, bwd

    return wrapped
