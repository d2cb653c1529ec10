"""``sharding_constraint``: the identity on values that tells XLA's partitioner how to lay a value out.

``sharding_constraint[sharding] x`` is ``x``; in a partitioned program it
lowers to Shardy's ``sdy.sharding_constraint`` so the value between two
operations has ``sharding`` (a ``NamedSharding``).  Outside a partitioned
program (a single-device ``jit``, eager evaluation) it lowers to nothing.
It is linear (its tangent and cotangent carry the same constraint) and a
batched operand's spec gains an unsplit entry at the batch dimension.

``device_put[devices, srcs, copy_semantics] *xs`` is ``xs``, each placed on its
target (JAX's ``device_put_p``); see ``device_put_p`` below.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any

from ftrans.core import trace as _trace
from ftrans.core.avals import ShapedArray
from ftrans.core.primitive import Primitive

__all__ = ["sharding_constraint_p"]

class ConstraintPrimitive(Primitive):
    """``sharding_constraint_p``: applied to concrete values (an eager ``vmap`` of a sharded ``jit``, whose
    constraints stand for its shardings) it lays them out at once through ``device_put``'s runtime rule, as
    JAX's eager constraint does; an UNCONSTRAINED dimension is left unsplit."""

    __slots__ = ()

    def bind(self, *args: Any, **params: Any) -> Any:
        if "unconstrained_dims" not in params:  # JAX's parameter: the dimensions the spec leaves UNCONSTRAINED
            params["unconstrained_dims"] = unconstrained_dims(params.get("sharding"))
        rule = _eager_rule
        if rule is not None and _placeable(params.get("sharding")):
            if _trace.is_eager():
                if not any(isinstance(a, _trace.Tracer) for a in args):
                    return _place(rule, args[0], params["sharding"])
            elif _trace.find_top_trace(args) is _trace.state.base.trace:
                return _place(rule, args[0], params["sharding"])
        return _trace.bind(self, args, params)


def unconstrained_dims(s: Any) -> frozenset:
    """The dimensions a sharding's spec leaves to the partitioner (``P.UNCONSTRAINED`` entries), as JAX's
    ``sharding_constraint`` parameter ``unconstrained_dims``."""
    spec = getattr(s, "spec", None)
    if spec is None:
        return frozenset()
    from ftrans.core.sharding import PartitionSpec

    return frozenset(i for i, e in enumerate(spec) if e is PartitionSpec.UNCONSTRAINED)


def _placeable(s: Any) -> bool:
    mesh = getattr(s, "mesh", None)
    return type(mesh).__name__ == "Mesh" and mesh.size > 1 and not getattr(s.spec, "unreduced", None)


def _place(rule: Callable, x: Any, s: Any) -> Any:
    from ftrans.core.array import Array
    from ftrans.core.sharding import NamedSharding, PartitionSpec

    if not isinstance(x, Array):
        return x
    spec = s.spec
    if PartitionSpec.UNCONSTRAINED in tuple(spec):
        spec = PartitionSpec(*[None if e is PartitionSpec.UNCONSTRAINED else e for e in spec])
        s = NamedSharding(s.mesh, spec, memory_kind=s.memory_kind)
    return rule([x], devices=(s,), srcs=(None,), copy_semantics=(CopySemantics.REUSE_INPUT,))[0]


sharding_constraint_p = ConstraintPrimitive("sharding_constraint")


@sharding_constraint_p.def_abstract_eval
def _abstract_eval(x: ShapedArray, *, sharding: Any, **_: Any) -> ShapedArray:
    return x


@sharding_constraint_p.def_impl
def _impl(x: Any, *, sharding: Any, **_: Any) -> Any:
    return x


# ----------------------------------------------------------------------------
# shard_alike: two values laid out the same way, whichever layout the partitioner picks

_eager_alike_rule: Callable[[Any, Any], list] | None = None


def set_shard_alike_eager_rule(rule: Callable[[Any, Any], list] | None) -> None:
    """Install the runtime's layout of a concrete pair: ``rule(x, y)`` returns them laid out alike."""
    global _eager_alike_rule
    _eager_alike_rule = rule


class ShardAlikePrimitive(Primitive):
    """``shard_alike_p``: on concrete values (no transform above them, as for an eager ``grad``'s primals)
    the runtime's rule lays the pair out alike at once, instead of the NumPy identity."""

    __slots__ = ()

    def bind(self, *args: Any, **params: Any) -> Any:
        rule = _eager_alike_rule
        if rule is not None:
            if _trace.is_eager():
                if not any(isinstance(a, _trace.Tracer) for a in args):
                    return rule(*args)
            elif _trace.find_top_trace(args) is _trace.state.base.trace:
                return rule(*args)
        return _trace.bind(self, args, params)


shard_alike_p = ShardAlikePrimitive("shard_alike", multiple_results=True)
__all__ += ["shard_alike_p", "set_shard_alike_eager_rule"]


@shard_alike_p.def_abstract_eval
def _shard_alike_abstract(x: ShapedArray, y: ShapedArray) -> list:
    if tuple(x.shape) != tuple(y.shape):
        from ftrans.errors import FtransValueError

        raise FtransValueError(
            f"The leaves shapes of `x` and `y` should match. Got `x` leaf shape: {tuple(x.shape)} and `y` leaf "
            f"shape: {tuple(y.shape)}.")
    return [x, y]


@shard_alike_p.def_impl
def _shard_alike_impl(x: Any, y: Any) -> list:
    return [x, y]


# ----------------------------------------------------------------------------
# device_put: values placed on devices (or laid out over a mesh)
#
# ``device_put[devices, srcs, copy_semantics] *xs`` returns the operands unchanged in value, type and weak
# type; operand ``i`` is placed on ``devices[i]`` (None: where it already is, a Device, or a NamedSharding)
# and came from ``srcs[i]`` (None when unknown), which is where the transpose puts the cotangent back.
# Applied to concrete values it moves data: the runtime registers that placement (``set_eager_rule``;
# ``ftrans/devices.py``), core never imports it. Under ``jit`` a NamedSharding target is a sharding
# annotation and a Device target is the identity, as in JAX. The NumPy rule is the identity (placement
# changes no value): what a host interpreter of a staged program runs.

__all__ += ["device_put_p", "CopySemantics", "set_eager_rule"]


class CopySemantics(enum.Enum):
    """What ``device_put`` may do with an operand's buffer (JAX's ``ArrayCopySemantics``): alias it
    (``may_alias``), always copy it, or copy it and delete the operand (``donate``)."""

    REUSE_INPUT = 0
    ALWAYS_COPY = 1
    DONATE_INPUT = 2

    def __repr__(self) -> str:
        return f"CopySemantics.{self.name}"


_eager_rule: Callable[..., list] | None = None


def set_eager_rule(rule: Callable[..., list] | None) -> None:
    """Install the runtime's placement of concrete operands: ``rule(xs, devices=, srcs=, copy_semantics=)``."""
    global _eager_rule
    _eager_rule = rule


class DevicePutPrimitive(Primitive):
    """``device_put_p``: applied to concrete values (no transform above them) it places them at once through
    the runtime's rule instead of the NumPy identity, so an eager ``grad``/``vmap``/``jvp`` moves its primal,
    tangent and cotangent values as JAX's does."""

    __slots__ = ()

    def bind(self, *args: Any, **params: Any) -> Any:
        rule = _eager_rule
        if rule is not None:
            if _trace.is_eager():
                if not any(isinstance(a, _trace.Tracer) for a in args):
                    return rule(list(args), **params)
            elif _trace.find_top_trace(args) is _trace.state.base.trace:
                return rule(list(args), **params)
        return _trace.bind(self, args, params)


device_put_p = DevicePutPrimitive("device_put", multiple_results=True)


@device_put_p.def_abstract_eval
def _device_put_abstract(*xs: ShapedArray, devices: tuple, srcs: tuple, copy_semantics: tuple) -> list:
    if not len(devices) == len(srcs) == len(copy_semantics) == len(xs):
        from ftrans.errors import FtransValueError

        raise FtransValueError(
            f"device_put: {len(xs)} operands but {len(devices)} devices, {len(srcs)} srcs and "
            f"{len(copy_semantics)} copy_semantics; give one of each per operand")
    return list(xs)


@device_put_p.def_impl
def _device_put_impl(*xs: Any, devices: tuple, srcs: tuple, copy_semantics: tuple) -> list:
    return list(xs)


@device_put_p.def_weak_type
def _device_put_weak(weaks: tuple, **_: Any) -> tuple:
    return tuple(weaks)  # each result keeps its own operand's weak type


# ----------------------------------------------------------------------------
# Sharding in types: a constraint over Explicit axes is a reshard, the value's new type

from ftrans.core import sharding_rules as _sr  # noqa: E402

sharding_constraint_p.sharding_rule = _sr.sharding_constraint
sharding_constraint_p.sets_sharding = True


def _device_put_rule(mesh: Any, out: Any, *xs: ShapedArray, devices: tuple, **params: Any) -> list:
    """A value put on a NamedSharding over Explicit axes takes that type (as a reshard); one put on a device
    has none; with no target it keeps its own."""
    from ftrans.core.sharding import NamedSharding, Sharding

    res: list = []
    for x, d in zip(xs, devices):
        if d is None or not isinstance(d, Sharding) and type(d).__name__ == "PartitionSpec":
            res.append(None)
        elif isinstance(d, NamedSharding):
            res.append(_sr.sharding_constraint(mesh, None, x, sharding=d))
        else:
            res.append((None, ()))
    return res


device_put_p.sharding_rule = _device_put_rule
device_put_p.sets_sharding = True
