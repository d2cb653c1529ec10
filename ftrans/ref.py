"""JAX's ``jax.ref``: mutable array references.

``new_ref(x)`` makes a :class:`Ref` holding ``x``; ``r[idx]`` reads it, ``r[idx] = v`` and
``r[idx] += v`` write it (the written value must have the indexed part's shape and the ref's dtype),
and ``freeze(r)`` returns its final value.  Refs work eagerly, under ``jit`` (as arguments, closed
over, or created inside), in the bodies of ``scan``, ``fori_loop``, ``while_loop`` and ``cond``,
under ``vmap`` (a ref argument is mapped like an array) and under ``grad`` for refs created inside
the differentiated function; a pullback's ``with_refs`` accumulates cotangents into refs.  See
``ftrans/core/ref.py`` for how staged functions thread them.
"""

from ftrans.core.ref import (
    AbstractRef,
    Ref,
    addupdate,
    empty_ref,
    free_ref,
    freeze,
    get,
    new_ref,
    set,  # noqa: A004 - JAX's name
    swap,
)

__all__ = ["AbstractRef", "Ref", "addupdate", "empty_ref", "free_ref", "freeze", "get", "new_ref", "set", "swap"]
