"""JAX's ``jax.interpreters.xla``: ``apply_primitive`` runs one primitive compiled (its lowering rule)."""

from __future__ import annotations

from typing import Any

from ftrans.core.primitive import Primitive

__all__ = ["apply_primitive"]


def apply_primitive(prim: Primitive, *args: Any, **params: Any) -> Any:
    """``prim`` applied to ``args`` through its lowering, compiled (an impl rule may be just this)."""
    import numpy as np

    from ftrans.transforms.jit import jit

    out = jit(lambda *xs: prim.bind(*xs, **params))(*args)
    if prim.multiple_results:
        return [np.asarray(o) for o in out]
    return np.asarray(out)
