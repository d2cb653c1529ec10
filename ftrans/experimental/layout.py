"""JAX's ``jax.experimental.layout``: how an array's elements lie in device memory (``Layout``), paired with a
sharding (``Format``), and ``with_layout_constraint``.

ftrans keeps every array in XLA's default layout (row-major: ``major_to_minor == (0, 1, ..., ndim - 1)``, no
tiling).  ``Layout``, ``Layout.AUTO`` and ``Format`` are accepted and compare as JAX's do;
``with_layout_constraint`` accepts the default layout (the value is returned unchanged) and raises
``NotImplementedError`` for any other, never silently ignoring it (``docs/differences.md``).
"""

from __future__ import annotations

from typing import Any

from ftrans.core import pytrees as tree_util
from ftrans.core.layout import Format, Layout
from ftrans.core.trace import aval_of
from ftrans.errors import FtransValueError

__all__ = ["Format", "Layout", "with_layout_constraint"]


def with_layout_constraint(x: Any, layouts: Any) -> Any:
    """``x`` (a pytree) constrained to ``layouts`` (one ``Layout``, or a tree prefix of ``x`` of them).  Only the
    default layout is supported: the value comes back unchanged; any other raises NotImplementedError."""
    leaves, treedef = tree_util.tree_flatten(x)
    if isinstance(layouts, Layout):
        flat = [layouts] * len(leaves)
    else:
        try:
            flat = treedef.flatten_up_to(layouts)
        except (ValueError, TypeError):
            flat = [layouts] if not leaves else None
        if flat is None or len(flat) != len(leaves):
            raise FtransValueError(f"with_layout_constraint: layouts {layouts!r} do not match the structure {treedef}")
    if any(not isinstance(lay, Layout) for lay in flat):
        raise FtransValueError("layouts passed to `with_layout_constraint` must be of type `Layout`. Got "
                               f"{[type(lay) for lay in flat]}")
    for leaf, lay in zip(leaves, flat):
        shape = aval_of(leaf).shape if hasattr(leaf, "shape") or not isinstance(leaf, (int, float)) else ()
        try:
            lay.check_compatible_aval(shape)
        except FtransValueError as e:
            raise FtransValueError(f"One of with_layout_constraint arguments is incompatible with its layout "
                                   f"annotation {lay}: {e.args[0].splitlines()[0]}") from None
        if not lay.is_default:
            raise NotImplementedError(
                f"with_layout_constraint: {lay} is not the default layout; ftrans lays every array out row-major "
                f"(major_to_minor={tuple(range(len(shape)))}, no tiling), so it supports only that one")
    return x
