"""JAX's ``jax.interpreters.partial_eval``: ``dce_jaxpr``, the dead-code elimination of a jaxpr for people
writing their own passes (ftrans's own dead-code elimination, the ``dce`` pass's, which prunes control flow
through its bodies)."""

from __future__ import annotations

from collections.abc import Sequence

from ftrans.core.ir import Jaxpr
from ftrans.errors import FtransValueError

__all__ = ["dce_jaxpr"]


def dce_jaxpr(jaxpr: Jaxpr, used_outputs: Sequence[bool],
              instantiate: bool | Sequence[bool] = False) -> tuple[Jaxpr, list[bool]]:
    """JAX's ``dce_jaxpr``: ``jaxpr`` keeping only the outputs ``used_outputs`` marks and what computes them
    (effectful equations stay), and which inputs that still reads. As in JAX, the returned jaxpr takes only
    those inputs (plus the ones ``instantiate`` keeps: a bool for all, or one per input) and returns only the
    used outputs; nested jaxprs (scan, cond, while, calls) are pruned by their primitives' rules."""
    used_outputs = [bool(u) for u in used_outputs]
    if len(used_outputs) != len(jaxpr.outvars):
        raise FtransValueError(f"dce_jaxpr: used_outputs has {len(used_outputs)} entries for a jaxpr with "
                               f"{len(jaxpr.outvars)} outputs")
    n_in = len(jaxpr.invars)
    keep = [bool(instantiate)] * n_in if isinstance(instantiate, bool) else [bool(i) for i in instantiate]
    if len(keep) != n_in:
        raise FtransValueError(f"dce_jaxpr: instantiate has {len(keep)} entries for a jaxpr with {n_in} inputs")
    from ftrans.transforms.passes.dce import dce

    new, used_inputs = dce(jaxpr, used_outputs)
    used_inputs = [u or k for u, k in zip(used_inputs, keep)]
    return Jaxpr(new.constvars, [v for v, u in zip(jaxpr.invars, used_inputs) if u], new.eqns,
                 new.outvars), used_inputs
