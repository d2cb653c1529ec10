"""Eager operations on arrays spread over several devices run as one-primitive sharded programs.

JAX runs every eager primitive as a small jitted program, so ``x * 2`` on a sharded array comes back
sharded, laid out by XLA's partitioner from the operands' layouts.  ftrans's eager path runs the
NumPy rules on the host: right for host and one-device arrays, but on a sharded array it would
gather every shard to the host and hand back a one-device result, silently undoing the layout a
sharded training loop keeps between its jitted steps (an optimiser update written eagerly, a metric
reduced outside ``jit``).  The device backend (``lowering/device_eager.py``) therefore sends a
primitive with a sharded operand here, where it runs through ``jit`` of that one primitive: the
operands' shardings flow in as for any jitted call, the results come back laid out by XLA (or typed
by the sharding-in-types rules on Explicit mesh axes), and operands on incompatible devices get
``jit``'s error.  One jitted wrapper is kept per (primitive, parameters); ``jit`` caches its
programs per signature, so an eager loop compiles each distinct operation once.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from ftrans.core import array as _array_mod
from ftrans.core import pytrees as tree_util
from ftrans.core import sharding as _sharding
from ftrans.core import trace as _trace
from ftrans.core.array import ShardedArray
from ftrans.core.operands import broadcast_operands
from ftrans.core.primitive import Primitive
from ftrans.core.prims.callbacks import in_host_callback
from ftrans.core.prims.shard_map import eager_body
from ftrans.lowering import device_eager
from ftrans.transforms import sharded_jit
from ftrans.transforms.jit import _leaf_aval, jit

MAX_WRAPPERS = 1024  # (primitive, parameters) pairs kept, least recently used dropped first
_wrappers: OrderedDict[tuple, Any] = OrderedDict()
_lock = threading.Lock()
_local = threading.local()  # ``depth``: a sharded one-primitive program is being traced or run here


def apply(prim: Primitive, args: Any, params: dict) -> Any:
    """``prim`` on ``args`` (one of them sharded), as a jitted one-primitive program; NotImplemented
    (the host rule) where that cannot be one partitioned program."""
    if getattr(_local, "depth", 0):
        # Re-entered while such a program is traced or run: a program holding a ``pmap`` runs its
        # equations one by one (``jit``'s Interpreted), and wrapping those again would never end.
        return NotImplemented
    fn = _wrapper(prim, params)
    leaves = list(args)
    if not sharded_jit.needs_spmd(fn, leaves):  # a layout that is not over a mesh: the host rule
        return NotImplemented
    _local.depth = 1
    try:
        if _trace.is_eager():
            return fn(*args)  # jit's own fast paths
        # Under a transform (these operands are its concrete values), calling ``fn`` would stage a
        # ``jit_call``, which would come back here: run the sharded program directly.
        avals = [_leaf_aval(x) for x in leaves]
        in_tree = tree_util.tree_structure((tuple(args), {}))
        return sharded_jit.call_sharded(fn, tuple(args), {}, tuple(args), {}, (), leaves, avals, in_tree)
    finally:
        _local.depth = 0


def _wrapper(prim: Primitive, params: dict) -> Any:
    key = (prim, device_eager.freeze(params))
    with _lock:
        fn = _wrappers.get(key)
        if fn is not None:
            _wrappers.move_to_end(key)
            return fn

    elementwise = getattr(prim.sharding_rule, "elementwise", False)

    def one_primitive(*xs: Any) -> Any:
        if elementwise:
            # Eagerly an elementwise primitive broadcasts its operands itself (the NumPy rule), so the
            # API layer leaves them unbroadcast; the staged primitive is strict.
            xs = broadcast_operands(prim.name, list(xs))
        return prim.bind(*xs, **params)  # the wrapper holds ``params``: ids in the key stay unique

    one_primitive.__name__ = one_primitive.__qualname__ = prim.name
    fn = jit(one_primitive)
    with _lock:
        _wrappers[key] = fn
        while len(_wrappers) > MAX_WRAPPERS:
            _wrappers.popitem(last=False)
    return fn


def in_context(prim: Primitive, args: Any, params: dict) -> Any:
    """``prim`` under ``set_mesh`` / ``use_mesh``: as in JAX, every eager operation is a program on the context
    mesh, so its result lives there (replicated, or as the sharding-in-types rules type it); NotImplemented
    (the other eager rules) where no context mesh is set in this thread, or for the host-only primitives."""
    if getattr(_local, "depth", 0) or prim.name in device_eager.HOST_ONLY or _sharding.context_mesh() is None \
            or eager_body.depth or in_host_callback():
        # (a shard_map body run device by device: its values are per device; a callback of a running program:
        # a program on its devices would wait for it)
        return NotImplemented
    out = apply(prim, args, params)
    if out is NotImplemented or any(type(a) is ShardedArray and "_loose" not in a.__dict__ for a in args):
        return out
    return [_array_mod.loosen(o) for o in out] if prim.multiple_results else _array_mod.loosen(out)


device_eager.set_sharded_apply(apply)
_trace.set_mesh_backend(in_context)
_array_mod.on_first_sharded_array = device_eager.install
