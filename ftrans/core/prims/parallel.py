"""``pmap``: a call-like primitive mapped over devices.

An equation ``outs = pmap[jaxpr, axis_name, axis_size, in_axes, out_axes, ...] ins``
runs its body once per element of a named axis of size ``axis_size``: operand
``i`` is split along ``in_axes[i]`` (or, for ``None``, given whole to every
element), and result ``j`` stacks the elements' results along ``out_axes[j]``
(``None``: every element computed the same value and one copy is returned).
The body sees one element's values, and collectives in it over ``axis_name``
talk to the other elements.

``pmap_p`` is a :class:`~ftrans.core.prims.calls.CallPrimitive`: every rule
that follows from "this is a call of the body" (JVP, partial evaluation, the
in-jaxpr split, transposition) is the generic one.  What pmap declares:

* its abstract evaluation (operands carry the mapped axis, the body does not);
* ``map_params``: a derived call maps a tangent or cotangent like the value it
  belongs to, leaves hoisted constants unmapped and maps residuals (one per
  element) along axis 0; the cotangent of an unmapped operand is the sum of
  every element's, so the transposed body ``psum``s it, and the cotangent of an
  unmapped result (every element computed it, one copy was returned) is shared
  out equally, as JAX does;
* ``body_env``: the axis name is bound while a rule restages the body, so the
  collectives in it see their axis.

The eager impl compiles and runs on devices, so the lowering layer registers
it (``ftrans/lowering/rules/parallel.py``), as for ``jit_call``; its batching
rule (``transforms/batch_rules/parallel.py``) moves vmap's dimension past the
mapped one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ftrans.core.avals import ShapedArray
from ftrans.core.axis_env import extend_axis_env
from ftrans.core.ir import ClosedJaxpr
from ftrans.core.prims.calls import CallPrimitive
from ftrans.errors import FtransTypeError, FtransValueError

__all__ = ["pmap_p", "unmapped_aval", "mapped_aval"]


def unmapped_aval(aval: ShapedArray, axis: int | None) -> ShapedArray:
    """One element's type of an operand mapped along ``axis`` (the operand itself for ``None``)."""
    if axis is None:
        return aval
    return aval.update(shape=aval.shape[:axis] + aval.shape[axis + 1:])


def mapped_aval(aval: ShapedArray, axis: int | None, size: int) -> ShapedArray:
    """The stacked type of ``size`` elements of type ``aval`` along ``axis`` (``aval`` for ``None``)."""
    if axis is None:
        return aval
    return aval.update(shape=aval.shape[:axis] + (size,) + aval.shape[axis:])


def _abstract_eval(*avals: ShapedArray, jaxpr: ClosedJaxpr, axis_name: Any, axis_size: int, in_axes: tuple,
                   out_axes: tuple, name: str, **_: Any) -> list[ShapedArray]:
    want = jaxpr.in_avals
    if len(avals) != len(want) or len(in_axes) != len(avals) or len(out_axes) != len(jaxpr.out_avals):
        raise FtransTypeError(
            f"pmap {name}: {len(avals)} operands, {len(in_axes)} in_axes and {len(out_axes)} out_axes for a "
            f"body of {len(want)} inputs and {len(jaxpr.out_avals)} outputs")
    for k, (a, ax, w) in enumerate(zip(avals, in_axes, want)):
        if ax is not None:
            if not 0 <= ax < len(a.shape) or a.shape[ax] != axis_size:
                raise FtransValueError(
                    f"pmap {name}: operand {k} of type {a.str_short()} has no axis {ax} of size {axis_size} "
                    f"(axis {axis_name!r})")
        per = unmapped_aval(a, ax)
        if (per.shape, per.dtype) != (w.shape, w.dtype):
            raise FtransTypeError(
                f"pmap {name}: operand {k} of type {a.str_short()} mapped at {ax} gives {per.str_short()}, but "
                f"the body takes {w.str_short()}")
    return [mapped_aval(a, ax, axis_size) for a, ax in zip(jaxpr.out_avals, out_axes)]


def _map_params(params: dict, rule: str, ins: tuple, outs: tuple) -> dict:
    in_axes, out_axes = params["in_axes"], params["out_axes"]

    def axis_of(origin: Any) -> int | None:
        if origin == "const":
            return None
        if origin == "res":
            return 0
        kind, i = origin
        return in_axes[i] if kind == "in" else out_axes[i]

    new_in = tuple(axis_of(o) for o in ins)
    new_out = tuple(axis_of(o) for o in outs)
    new = {**params, "in_axes": new_in, "out_axes": new_out, "donated_invars": (False,) * len(ins)}
    if rule == "transpose":
        # An unmapped result is every element's (equal) value, read once: its cotangent is shared out
        # equally among the elements.  The cotangent of an operand every element shared is the sum of
        # all elements' cotangents.
        scale = [o != "const" and o[0] == "out" and out_axes[o[1]] is None for o in ins]
        total = [ax is None for ax in new_out]
        if any(scale) or any(total):
            new["jaxpr"] = _share_and_sum(new["jaxpr"], scale, total, params)
    return new


def _share_and_sum(body: ClosedJaxpr, scale: list[bool], total: list[bool], params: dict) -> ClosedJaxpr:
    from ftrans.core.building import mul
    from ftrans.core.jaxpr_api import eval_jaxpr
    from ftrans.core.prims.collectives import psum_p
    from ftrans.core.trace import stage

    name = params["axis_name"]
    share = 1.0 / params["axis_size"]

    def fun(*args: Any) -> list:
        args = [mul(a, share) if s else a for a, s in zip(args, scale)]
        outs = eval_jaxpr(body.jaxpr, list(body.consts), *args)
        return [psum_p.bind(o, axis_name=(name,), axis_index_groups=None) if w else o
                for o, w in zip(outs, total)]

    with extend_axis_env(name, params["axis_size"], None):
        new, _ = stage(fun, list(body.in_avals))
    return new


def _body_env(params: dict) -> Any:
    return extend_axis_env(params["axis_name"], params["axis_size"], None)


def _func_name(params: dict) -> str:
    return f"pmap_{params['name']}"


pmap_p = CallPrimitive("pmap", func_name=_func_name, map_params=_map_params, body_env=_body_env)
pmap_p.def_abstract_eval(_abstract_eval)


def pmap_in_program(jaxpr: Any) -> bool:
    """Whether running ``jaxpr`` (a Jaxpr or ClosedJaxpr) calls a ``pmap`` outside every other ``pmap``: at its
    top level or in any nested body (a ``jit_call``, a loop or branch, a custom-derivative function). Such a
    program cannot be one single-device executable (a pmap is a multi-device program of its own), so a jit of
    it runs equation by equation (``transforms/jit.py``), a loop or branch holding one by its eager rule."""
    from ftrans.core.ir import subjaxprs

    j = jaxpr.jaxpr if isinstance(jaxpr, ClosedJaxpr) else jaxpr
    for eqn in j.eqns:
        if eqn.primitive is pmap_p:
            return True
        if any(pmap_in_program(sub) for sub in subjaxprs(eqn)):
            return True
    return False


def without_pmap_donation(closed: ClosedJaxpr) -> ClosedJaxpr:
    """``closed`` with its top-level pmaps donating nothing: a pmap called inside a jitted function ignores its
    ``donate_argnums``, as in JAX (its operands belong to the enclosing program)."""
    from ftrans.core.ir import Jaxpr

    j = closed.jaxpr
    eqns = [e.replace(params={**e.params, "donated_invars": (False,) * len(e.invars)})
            if e.primitive is pmap_p and any(e.params.get("donated_invars", ())) else e for e in j.eqns]
    return ClosedJaxpr(Jaxpr(j.constvars, j.invars, eqns, j.outvars), closed.consts)


class Interpreted:
    """A program that calls ``pmap`` (``pmap_in_program``): it cannot be one single-device executable, so its
    equations run one by one, each pmap as its own multi-device program and the rest eagerly, as JAX runs a
    pmap inside jit. A nested pmap's donation is ignored, as in JAX."""

    def __init__(self, closed: ClosedJaxpr):
        self.program = without_pmap_donation(closed)
        self.avals = self.program.in_avals

    def run(self, leaves: Sequence[Any]) -> list:
        from ftrans.core.array import Array
        from ftrans.core.jaxpr_api import eval_jaxpr

        args = [x if isinstance(x, Array) else Array._new(np.asarray(x, a.dtype), a.weak_type)
                for x, a in zip(leaves, self.avals)]
        return eval_jaxpr(self.program, list(self.program.consts), *args)
