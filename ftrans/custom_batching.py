"""JAX's ``custom_batching``: functions that say how ``vmap`` batches them.

``custom_vmap(f)`` with ``f.def_vmap(rule)`` stages ``f`` into a
``custom_vmap_call`` equation that carries the rule. Outside ``vmap`` the
equation is a plain call of ``f``; under ``vmap`` its batching rule calls
``rule(axis_size, in_batched, *args)`` with the batched arguments' batch
dimension in front, and the rule returns ``(out, out_batched)``. Forward-mode
derivatives keep the rule (the JVP is again a ``custom_vmap`` call whose rule
is the JVP of the user's). Reverse mode differentiates ``f`` itself (JAX
requires a ``custom_vjp`` around the function there; ftrans needs none).
``sequential_vmap(f)`` is a ``custom_vmap`` whose rule runs ``f`` once per
batch element in a ``lax.map`` loop.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from ftrans.core import pytrees as tree_util
from ftrans.core import trace as _trace
from ftrans.core.ir import hoist_consts
from ftrans.core.prims.calls import custom_vmap_call_p
from ftrans.core.trace import aval_of, stage
from ftrans.core.wrapping import name_after
from ftrans.errors import FtransAttributeError
from ftrans.transforms.custom_derivatives import _forward_attr, _operand, _resolve_kwargs

__all__ = ["custom_vmap", "sequential_vmap"]


class custom_vmap:
    """A function with its own ``vmap`` rule (JAX's ``custom_batching.custom_vmap``).

    The rule, set with :meth:`def_vmap`, is called as ``rule(axis_size,
    in_batched, *args)``: ``in_batched`` is a list with one pytree of bools
    per argument, and each batched argument has its batch dimension first. It
    returns ``(out, out_batched)``, with ``out`` shaped like the function's
    output (plus a leading batch dimension where ``out_batched`` says so).
    """

    def __init__(self, fun: Callable[..., Any]):
        functools.update_wrapper(self, fun)
        name_after(self, fun)
        self.fun = fun
        self.vmap_rule: Callable[..., tuple[Any, Any]] | None = None

    __getattr__ = _forward_attr

    def def_vmap(self, vmap_rule: Callable[..., tuple[Any, Any]]) -> Callable[..., tuple[Any, Any]]:
        """Set the vmap rule; returns it unchanged (so it can be used as a decorator)."""
        self.vmap_rule = vmap_rule
        return vmap_rule

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        name = getattr(self.fun, "__name__", type(self.fun).__name__)
        if self.vmap_rule is None:
            raise FtransAttributeError(f"No batching rule defined for custom_vmap function {name} using "
                                       f"def_vmap: define one with @{name}.def_vmap before calling it")
        args = _resolve_kwargs(self.fun, args, kwargs, "custom_vmap")
        if _trace.is_eager():  # no transform anywhere on this thread: the rule cannot come into play
            return self.fun(*args)
        leaves_paths, in_tree = tree_util.tree_flatten_with_path(args)
        leaves = [_operand(f"custom_vmap function {name}", "args" + tree_util.keystr(p), x)
                  for p, x in leaves_paths]
        out_tree_box: list = []

        def flat_fun(*ins: Any) -> list:
            out, tree = tree_util.tree_flatten(self.fun(*tree_util.tree_unflatten(in_tree, ins)))
            out_tree_box.append(tree)
            return out

        closed, _ = stage(flat_fun, [aval_of(x) for x in leaves])
        body, consts = hoist_consts(closed)
        outs = custom_vmap_call_p.bind(*consts, *leaves, call_jaxpr=body, rule=self.vmap_rule, in_tree=in_tree,
                                       out_tree=out_tree_box[0], num_consts=len(consts), name=name)
        return tree_util.tree_unflatten(out_tree_box[0], outs)


def sequential_vmap(f: Callable[..., Any]) -> custom_vmap:
    """``f`` as a ``custom_vmap`` whose rule runs it once per batch element, in a ``lax.map`` loop (for
    functions that cannot take a batch dimension, such as ones built on callbacks)."""
    from ftrans.lax import map as lax_map

    g = custom_vmap(f)

    @g.def_vmap
    def rule(axis_size: int, in_batched: list, *args: Any) -> tuple[Any, Any]:
        mapped = tree_util.tree_map(lambda b, x: x if b else None, in_batched, list(args))
        fixed = tree_util.tree_map(lambda b, x: None if b else x, in_batched, list(args))

        def one(m: Any) -> Any:
            full = tree_util.tree_map(lambda b, x, y: x if b else y, in_batched, m, fixed,
                                      is_leaf=lambda x: x is None)
            return g(*full)

        out = lax_map(one, mapped)
        return out, tree_util.tree_map(lambda _: True, out)

    return g
