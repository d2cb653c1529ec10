"""Transpose of ``sharding_constraint`` (the cotangent is laid out like the value), ``shard_alike`` and
``device_put`` (the cotangent goes back where the value came from)."""

from __future__ import annotations

from typing import Any

from ftrans.core.prims.sharding import CopySemantics, device_put_p, shard_alike_p, sharding_constraint_p
from ftrans.errors import FtransValueError
from ftrans.transforms.transpose import is_undefined, register_transpose


@register_transpose(sharding_constraint_p)
def _constraint_t(ct: Any, x: Any, *, sharding: Any, unconstrained_dims: Any = None) -> list:
    # Over Explicit axes a constraint that changed the value's type is a reshard: its cotangent goes back to the
    # operand's type (JAX's reshard transpose), e.g. the cotangent of an ``out_sharding=`` result.
    own = getattr(getattr(x, "aval", None), "typed_sharding", None)
    if own is None and getattr(x, "aval", None) is not None and not sharding.spec.unreduced and any(
            t.name == "Explicit" and a in sharding.spec.axes()
            for a, t in zip(sharding.mesh.axis_names, sharding.mesh.axis_types)):
        from ftrans.core.sharding import NamedSharding, PartitionSpec

        own = NamedSharding(sharding.mesh, PartitionSpec())  # an untyped operand: replicated over the mesh
    if own is not None and own.mesh == sharding.mesh and own.spec != sharding.spec and not (
            own.spec.unreduced or own.spec.reduced or sharding.spec.unreduced or sharding.spec.reduced):
        return [sharding_constraint_p.bind(ct, sharding=own)]
    return [sharding_constraint_p.bind(ct, sharding=sharding)]


@register_transpose(shard_alike_p)
def _shard_alike_t(cts: list, x: Any, y: Any) -> list:
    """The cotangents are laid out alike (a symbolic zero on either side leaves both as they are)."""
    from ftrans.transforms.ad import Zero

    ct_x, ct_y = cts
    if type(ct_x) is Zero or type(ct_y) is Zero:
        return [ct_x, ct_y]
    return list(shard_alike_p.bind(ct_x, ct_y))


@register_transpose(device_put_p)
def _device_put_t(cts: list, *xs: Any, devices: tuple, srcs: tuple, copy_semantics: tuple) -> list:
    """Each linear operand's cotangent placed back where the operand came from (``srcs``, the value's own
    placement when ``device_put`` saw a concrete one), always as a copy, as JAX's rule does; a donated
    operand has no transpose."""
    from ftrans.transforms.ad import Zero

    out: list = [None] * len(xs)
    live = []
    for i, (ct, x) in enumerate(zip(cts, xs)):
        if not is_undefined(x):
            continue
        if type(ct) is Zero:
            out[i] = Zero(x.aval)
        else:
            live.append(i)
    if not live:
        return out
    if any(copy_semantics[i] is CopySemantics.DONATE_INPUT for i in live):
        raise FtransValueError(
            "device_put(..., donate=True) cannot be differentiated in reverse mode: its transpose would donate "
            "the cotangent. Donate outside the differentiated function, or pass donate=False")
    placed = device_put_p.bind(*[cts[i] for i in live], devices=tuple(srcs[i] for i in live),
                               srcs=tuple(devices[i] for i in live),
                               copy_semantics=(CopySemantics.ALWAYS_COPY,) * len(live))
    for i, c in zip(live, placed):
        out[i] = c
    return out
