"""Pytrees as ftrans's own code sees them: jax's ``tree_util`` with typed key arrays opened up.

A typed key array (``random.key``) is one pytree leaf to users, as in JAX: ``PRNGKeyArray`` is not a
registered pytree node, so ``tree_util.tree_leaves(keys) == [keys]`` and ``tree_map`` hands the key array
itself to the user's function.  Every transformation boundary (``jit``, ``vmap``, ``grad``, ``scan``,
``cond``, ``custom_vjp``, ``device_put``, ...) still needs the key array's ``uint32`` data as an array
leaf, and needs to give back a key array for it on the way out.  So ftrans's own code flattens with this
module instead of jax's ``tree_util``: its ``tree_flatten``, ``tree_leaves``, ``tree_map``,
``tree_structure`` and ``tree_flatten_with_path`` treat a key array as a node over its base array (the
implementation as the node data), and ``tree_unflatten`` of such a tree definition wraps the data leaf
back into a key array of that implementation (a ``float0`` tangent leaf into ``float0`` of the key
array's shape; an ``eval_shape`` struct into a key-dtype struct).

How: a key leaf is swapped for a ``_KeyNode`` (a key array of a registered node type) before jax
flattens the tree; trees without keys are flattened once, as by jax.  A key array for which the caller's
``is_leaf`` holds stays a leaf.  Everything else is jax's ``tree_util`` unchanged.
"""

from __future__ import annotations

from typing import Any

from jax import tree_util as _jtu
from jax.tree_util import (  # noqa: F401  (the rest of jax's tree_util, as it is)
    DictKey,
    FlattenedIndexKey,
    GetAttrKey,
    Partial,
    PyTreeDef,
    SequenceKey,
    default_registry,
    keystr,
    register_dataclass,
    register_pytree_node,
    register_pytree_node_class,
    register_pytree_with_keys,
    register_pytree_with_keys_class,
    register_static,
    tree_unflatten,
    treedef_children,
    treedef_is_leaf,
    treedef_tuple,
)

from ftrans.core.keys import PRNGKeyArray, unflatten_key

__all__ = ["tree_flatten", "tree_leaves", "tree_map", "tree_structure", "tree_flatten_with_path",
           "tree_leaves_with_path", "tree_map_with_path", "tree_unflatten", "keystr", "treedef_is_leaf",
           "register_pytree_node", "register_pytree_node_class", "register_dataclass", "Partial", "PyTreeDef",
           "default_registry", "has_keys", "tree_unflatten_wrapped", "user_treedef", "key_node",
           "key_node_type", "has_key_nodes", "user_leaves"]


class _KeyNode(PRNGKeyArray):
    """A key array as a pytree node over its base array (only inside this module's flattening)."""

    __slots__ = ()


def _flatten_node(k: PRNGKeyArray) -> tuple:
    return (k._base_array,), k._impl


def _flatten_node_with_keys(k: PRNGKeyArray) -> tuple:
    return ((FlattenedIndexKey(0), k._base_array),), k._impl


register_pytree_with_keys(_KeyNode, _flatten_node_with_keys, unflatten_key, _flatten_node)


def _box(k: PRNGKeyArray) -> _KeyNode:
    node = object.__new__(_KeyNode)
    node._impl, node._base_array = k._impl, k._base_array
    return node


def key_node_type() -> type:
    """The node type a key array is in this module's tree definitions (export's serialization names it)."""
    return _KeyNode


def key_node(impl: Any, base: Any) -> Any:
    """A key-array node of ``impl`` over ``base`` (its data, or what stands for it: an abstract value), whose
    tree structure is the one this module's flattening gives a key array."""
    node = object.__new__(_KeyNode)
    node._impl, node._base_array = impl, base
    return node


def has_keys(leaves: list) -> bool:
    """Whether a typed key array is among ``leaves`` (jax's leaves of a tree)."""
    return PRNGKeyArray in set(map(type, leaves))


def _opened(tree: Any, is_leaf: Any) -> tuple[Any, list, Any]:
    """``(tree', leaves, treedef)``: ``tree'`` is ``tree`` with its key leaves boxed (``tree`` itself
    when it holds none, then ``leaves``/``treedef`` are jax's flattening of it, else None)."""
    leaves, treedef = _jtu.tree_flatten(tree, is_leaf)
    if not has_keys(leaves):
        return tree, leaves, treedef
    boxed = [_box(x) if type(x) is PRNGKeyArray and (is_leaf is None or not is_leaf(x)) else x for x in leaves]
    return _jtu.tree_unflatten(treedef, boxed), None, None


def tree_flatten(tree: Any, is_leaf: Any = None) -> tuple[list, PyTreeDef]:
    opened, leaves, treedef = _opened(tree, is_leaf)
    if leaves is not None:
        return leaves, treedef
    return _jtu.tree_flatten(opened, is_leaf)


def tree_leaves(tree: Any, is_leaf: Any = None) -> list:
    leaves = _jtu.tree_leaves(tree, is_leaf)
    if not has_keys(leaves):
        return leaves
    return [x._base_array if type(x) is PRNGKeyArray and (is_leaf is None or not is_leaf(x)) else x
            for x in leaves]


def tree_structure(tree: Any, is_leaf: Any = None) -> PyTreeDef:
    return tree_flatten(tree, is_leaf)[1]


def tree_map(f: Any, tree: Any, *rest: Any, is_leaf: Any = None) -> Any:
    opened, leaves, treedef = _opened(tree, is_leaf)
    if leaves is None:  # keys in ``tree``: those of ``rest`` at their places are opened too
        leaves, treedef = _jtu.tree_flatten(opened, is_leaf)
        rest = tuple(_opened(r, is_leaf)[0] for r in rest)
    all_leaves = [leaves, *(treedef.flatten_up_to(r) for r in rest)]
    return treedef.unflatten(f(*xs) for xs in zip(*all_leaves))


def tree_flatten_with_path(tree: Any, is_leaf: Any = None) -> tuple[list, PyTreeDef]:
    return _jtu.tree_flatten_with_path(_opened(tree, is_leaf)[0], is_leaf)


def tree_leaves_with_path(tree: Any, is_leaf: Any = None) -> list:
    return _jtu.tree_leaves_with_path(_opened(tree, is_leaf)[0], is_leaf)


def tree_map_with_path(f: Any, tree: Any, *rest: Any, is_leaf: Any = None) -> Any:
    opened = _opened(tree, is_leaf)[0]
    rest = tuple(_opened(r, is_leaf)[0] for r in rest)
    return _jtu.tree_map_with_path(f, opened, *rest, is_leaf=is_leaf)


def tree_unflatten_wrapped(treedef: PyTreeDef, leaves: list, wrap: Any) -> Any:
    """The tree ``treedef`` (from this module's flattening) over ``leaves``, with each leaf as users see
    it wrapped: ``wrap(i, leaf)`` for its ``i``-th leaf, a key array (rebuilt from its data leaf) rather
    than the data for a key.  (``custom_vjp``'s ``CustomVJPPrimal`` holds a whole key array, as JAX's.)"""
    plain, user_def = _jtu.tree_flatten(tree_unflatten(treedef, list(leaves)))
    return _jtu.tree_unflatten(user_def, [wrap(i, x) for i, x in enumerate(plain)])


def has_key_nodes(treedef: PyTreeDef) -> bool:
    """Whether ``treedef`` (from this module's flattening) has a typed key array among its nodes."""
    return "_KeyNode" in str(treedef)


def user_leaves(treedef: PyTreeDef, leaves: list) -> list:
    """``leaves`` (one per leaf of ``treedef``, from this module's flattening) as users' leaves: a key
    array's data leaf becomes what stands for the key array (for an abstract value, one of the key dtype)."""
    if not has_key_nodes(treedef):
        return list(leaves)
    return _jtu.tree_leaves(tree_unflatten(treedef, list(leaves)))


def user_treedef(treedef: PyTreeDef) -> PyTreeDef:
    """The tree definition users see for ``treedef`` (from this module's flattening): each key array one
    leaf, as in JAX's (``jit(f).lower(...).in_tree``)."""
    if "_KeyNode" not in str(treedef):
        return treedef
    return _jtu.tree_structure(tree_unflatten(treedef, [object() for _ in range(treedef.num_leaves)]))
