"""JAX's deprecated ``jax.experimental.pjit.pjit``: ``jit`` with ``in_shardings``/``out_shardings``.

Reading ``pjit`` warns (``DeprecationWarning``), as in JAX; it is ``ftrans.jit`` with the same arguments.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

from ftrans.errors import FtransTypeError, user_stacklevel

__all__: list[str] = []


_POSITIONAL = ("in_shardings", "out_shardings", "static_argnums", "static_argnames", "donate_argnums",
               "donate_argnames", "keep_unused", "device", "backend", "inline", "compiler_options")


def _has_none(tree: Any) -> bool:
    from ftrans import tree_util

    return any(x is None for x in tree_util.tree_leaves(tree, is_leaf=lambda x: x is None))


def _none_replicated(tree: Any) -> Any:
    from ftrans import tree_util
    from ftrans.core.sharding import PartitionSpec

    return tree_util.tree_map(lambda x: PartitionSpec() if x is None else x, tree, is_leaf=lambda x: x is None)


class _MeshPjit:
    """A ``pjit`` whose ``in_shardings``/``out_shardings`` name ``None``: as in JAX, ``None`` is the replicated
    layout when a mesh is current at the call (``P()`` over it) and unspecified otherwise, so the jitted
    function is made per current mesh."""

    def __init__(self, fun: Callable, kwargs: dict):
        import functools

        self._fun, self._kwargs, self._by_mesh = fun, kwargs, {}
        functools.update_wrapper(self, fun)

    def _jitted(self) -> Any:
        from ftrans.core.sharding import spec_mesh
        from ftrans.transforms.jit import jit

        mesh = spec_mesh()
        mesh = None if mesh is None or mesh.empty else mesh
        f = self._by_mesh.get(mesh)
        if f is None:
            kw = dict(self._kwargs)
            if mesh is not None:
                for k in ("in_shardings", "out_shardings"):
                    if k in kw:
                        kw[k] = _none_replicated(kw[k])
            f = self._by_mesh[mesh] = jit(self._fun, **kw)
            f._api_name = "pjit"  # (its errors name pjit, and it places on ``with mesh:``'s mesh, as JAX's)
        return f

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._jitted()(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self._jitted(), name)

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        import functools

        return self if obj is None else functools.partial(self, obj)


def _pjit(fun: Callable | None = None, *args: Any, **kwargs: Any) -> Any:
    """``ftrans.jit(fun, ...)``: sharded when ``in_shardings``/``out_shardings`` or the arguments say so
    (``pjit(in_shardings=...)`` without the function is a decorator, as ``jit``'s is).  A ``None`` among the
    shardings is replicated over the mesh current at the call (JAX's ``pjit``; ``jit`` leaves it unspecified)."""
    from ftrans.transforms.jit import jit

    if args:  # JAX's pjit takes its options positionally too
        if len(args) > len(_POSITIONAL):
            raise FtransTypeError(f"pjit takes at most {len(_POSITIONAL) + 1} positional arguments, got "
                                  f"{len(args) + 1}")
        kwargs = {**dict(zip(_POSITIONAL, args)), **kwargs}
        args = ()
    if fun is None:
        return lambda f: _pjit(f, **kwargs)
    if not args and any(k in kwargs and _has_none(kwargs[k]) for k in ("in_shardings", "out_shardings")):
        return _MeshPjit(fun, kwargs)
    for k in ("in_shardings", "out_shardings"):
        if k in kwargs:
            _check_leaves(k, kwargs[k])
    out = jit(fun, *args, **kwargs)
    out._api_name = "pjit"  # (its errors name pjit, as JAX's)
    return out


def _check_leaves(what: str, tree: Any) -> None:
    """JAX's check of pjit's shardings when it is applied: each leaf a PartitionSpec, a Sharding or None."""
    from ftrans import tree_util
    from ftrans.core.sharding import PartitionSpec, Sharding, as_sharding

    def ok(x: Any) -> bool:
        return x is None or type(x).__name__ in ("PartitionSpec", "Format", "UnspecifiedValue") or isinstance(
            as_sharding(x), (Sharding, PartitionSpec))

    for leaf in tree_util.tree_leaves(tree, is_leaf=lambda x: x is None or type(x).__name__ in (
            "PartitionSpec", "Format")):
        if not ok(leaf):
            raise FtransTypeError(f"{what} leaf specifications are expected to be PartitionSpec instances or None, "
                                  f"but got {leaf}")


_pjit.__name__ = _pjit.__qualname__ = "pjit"


def __getattr__(name: str) -> Any:
    if name == "pjit":
        warnings.warn("jax.experimental.pjit.pjit has been deprecated. Please use `ftrans.jit` instead.",
                      DeprecationWarning, stacklevel=user_stacklevel())
        return _pjit
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
