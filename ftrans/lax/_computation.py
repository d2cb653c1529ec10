"""The part ``lax.reduce`` and ``lax.reduce_window`` share: operands and init values given as matching
pytrees, and a user ``computation(accumulators, elements)`` staged once on scalars.

Each caller keeps its own checks where JAX's differ between the two (which exception a non-scalar init
or a wrongly shaped result raises), so only the common steps live here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ftrans.core import pytrees as tree_util
from ftrans.core.avals import ShapedArray
from ftrans.core.ir import ClosedJaxpr
from ftrans.core.operands import as_operand, check_arraylike, convert, dtype_weak
from ftrans.core.trace import stage
from ftrans.errors import FtransTypeError, FtransValueError


def flat_operands(name: str, operands: Any, init_values: Any) -> tuple[list, list, Any, Any]:
    """The operands as ftrans operands and the init values flat, with both trees (which must agree)."""
    flat_ops, tree = tree_util.tree_flatten(operands)
    flat_inits, init_tree = tree_util.tree_flatten(init_values)
    if tree != init_tree:
        raise FtransValueError(
            f"{name}: operands must have the same tree structure as init_values: {tree} vs. {init_tree}"
        )
    if not flat_ops:
        raise FtransValueError(f"{name}: no operands to reduce")
    check_arraylike(name, *flat_ops, *flat_inits)
    return [as_operand(o) for o in flat_ops], flat_inits, tree, init_tree


def matching_init(name: str, operand: Any, init: Any) -> Any:
    """``init`` in ``operand``'s dtype: a weakly typed init converts, a strong one of another dtype is an error."""
    od, _ = dtype_weak(operand)
    idt, iweak = dtype_weak(init)
    if idt != od and not iweak:
        raise FtransTypeError(
            f"{name}: operand dtypes should match corresponding initial value dtypes, got operand "
            f"{od.name} and init value {idt.name}"
        )
    return convert(init, od) if idt != od else as_operand(init)


def staged_computation(name: str, computation: Callable, ops: list, tree: Any) -> tuple[ClosedJaxpr, list, Any]:
    """``computation`` staged on scalars of the operands' dtypes (accumulators, then elements), flat.

    Returns the closed program, the scalar avals and the tree the computation returned (the caller checks
    it against ``tree`` with its own error). A computation that closes over arrays is refused.
    """
    scalar = [ShapedArray((), dtype_weak(o)[0], False) for o in ops]
    box: list = []
    n = len(ops)

    def flat_computation(*args: Any) -> list:
        acc = tree_util.tree_unflatten(tree, args[:n])
        elem = tree_util.tree_unflatten(tree, args[n:])
        leaves, out_tree = tree_util.tree_flatten(computation(acc, elem))
        box.append(out_tree)
        return [as_operand(v) for v in leaves]

    closed, _ = stage(flat_computation, scalar + scalar)
    if closed.consts and box[0] == tree:
        raise NotImplementedError(
            f"{name}: the computation closes over array values; it may use only its scalar arguments and "
            "Python constants"
        )
    return closed, scalar, box[0]
