"""``ftrans.api_util``: the helpers JAX exports as ``jax.api_util`` for writing function transformations:
flattening a :class:`ftrans.extend.linear_util.WrappedFun` over pytree arguments, its debug info, and the
abstract value of an operand."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from ftrans import tree_util
from ftrans.core.trace import aval_of as shaped_abstractify
from ftrans.extend.linear_util import StoreException, WrappedFun

__all__ = ["DebugInfo", "debug_info", "flatten_fun", "flatten_fun_nokwargs", "shaped_abstractify"]


class DebugInfo(NamedTuple):
    """What a traced function was traced for, its source and its argument names (JAX's ``DebugInfo``)."""

    traced_for: str
    func_src_info: str
    arg_names: tuple[str, ...] | None
    result_paths: tuple[str, ...] | Callable[[], tuple[str, ...]] | None

    @property
    def func_name(self) -> str:
        return self.func_src_info.split(" ")[0] if self.func_src_info else "<unknown>"


def debug_info(traced_for: str, fun: Callable, args: Sequence[Any], kwargs: dict[str, Any], *,
               static_argnums: Sequence[int] = (), static_argnames: Sequence[str] = (),
               result_paths_thunk: Callable[[], tuple[str, ...]] | None = None, sourceinfo: str | None = None,
               signature: Any = None) -> DebugInfo:
    """The debug info of ``fun`` traced for ``traced_for`` on ``args``/``kwargs`` (JAX's ``api_util.debug_info``):
    its ``name at file:line`` and the names of its dynamic arguments' leaves."""
    import inspect

    from ftrans.core.trace import function_site

    if sourceinfo is None:
        sourceinfo = function_site(fun)
    if signature is None:
        try:
            signature = inspect.signature(fun)
        except (TypeError, ValueError):
            signature = None
    arg_names: tuple[str, ...] | None = None
    if signature is not None:
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError:
            bound = None
        if bound is not None:
            names = []
            statics = set(static_argnames)
            for i, (name, value) in enumerate(bound.arguments.items()):
                if i in static_argnums or name in statics:
                    continue
                for path, _ in tree_util.tree_flatten_with_path(value)[0]:
                    names.append(f"{name}{tree_util.keystr(path)}")
            arg_names = tuple(names)
    return DebugInfo(traced_for, sourceinfo, arg_names, result_paths_thunk)


def _out_store(fun: WrappedFun, run: Callable) -> tuple[WrappedFun, Callable[[], Any]]:
    box: list = []

    def flat(*leaves: Any) -> list:
        out_leaves, out_tree = tree_util.tree_flatten(run(*leaves))
        if box:
            raise StoreException("Store occupied")
        box.append(out_tree)
        return out_leaves

    def out_tree() -> Any:
        if not box:
            raise StoreException("Store empty")
        return box[0]

    return WrappedFun(flat, (), fun.debug_info), out_tree


def flatten_fun_nokwargs(fun: WrappedFun, in_tree: Any) -> tuple[WrappedFun, Callable[[], Any]]:
    """``fun`` of pytree positional arguments (their structure ``in_tree``) as a function of their flat leaves
    returning its flat outputs, and a thunk giving the outputs' structure once it has run (JAX's name)."""
    return _out_store(fun, lambda *leaves: fun.call_wrapped(*tree_util.tree_unflatten(in_tree, leaves)))


def flatten_fun(fun: WrappedFun, in_tree: Any) -> tuple[WrappedFun, Callable[[], Any]]:
    """As :func:`flatten_fun_nokwargs` for ``in_tree`` the structure of ``(args, kwargs)`` (JAX's name)."""

    def run(*leaves: Any) -> Any:
        args, kwargs = tree_util.tree_unflatten(in_tree, leaves)
        return fun.call_wrapped(*args, **kwargs)

    return _out_store(fun, run)
