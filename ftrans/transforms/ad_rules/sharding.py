"""JVP of ``sharding_constraint``, ``shard_alike`` and ``device_put``: linear (the tangent is laid out, or
placed, like the value)."""

from __future__ import annotations

from ftrans.core.prims.sharding import device_put_p, shard_alike_p, sharding_constraint_p
from ftrans.transforms.ad import Zero, defjvp_linear, float0, register_jvp

defjvp_linear(sharding_constraint_p)
defjvp_linear(shard_alike_p)  # the tangents are laid out alike too


@register_jvp(device_put_p)
def _device_put_jvp(primals: list, tangents: list, *, devices: tuple, srcs: tuple,
                    copy_semantics: tuple) -> tuple[list, list]:
    """Each primal and each nonzero tangent placed on its target (JAX's rule places the tangents with the
    same parameters); a symbolic zero tangent stays symbolic."""
    outs = device_put_p.bind(*primals, devices=devices, srcs=srcs, copy_semantics=copy_semantics)
    live = [i for i, t in enumerate(tangents) if type(t) is not Zero and getattr(t, "dtype", None) != float0]
    t_out: list = [Zero.from_primal_value(o) for o in outs]
    if live:
        pick = lambda seq: tuple(seq[i] for i in live)  # noqa: E731
        placed = device_put_p.bind(*pick(tangents), devices=pick(devices), srcs=pick(srcs),
                                   copy_semantics=pick(copy_semantics))
        for i, t in zip(live, placed):
            t_out[i] = t
    return outs, t_out
