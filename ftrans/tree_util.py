"""Pytrees: jax's ``tree_util`` re-exported (a well-kept library; see docs/architecture.md)."""

from jax.tree_util import (  # noqa: F401
    DictKey,
    FlattenedIndexKey,
    GetAttrKey,
    KeyEntry,
    KeyPath,
    Partial,
    PyTreeDef,
    SequenceKey,
    all_leaves,
    default_registry,
    flatten_one_level,
    flatten_one_level_with_keys,
    is_tree_node,
    keystr,
    register_dataclass,
    register_pytree_node,
    register_pytree_node_class,
    register_pytree_with_keys,
    register_pytree_with_keys_class,
    register_static,
    tree_all,
    tree_broadcast,
    tree_flatten,
    tree_flatten_with_path,
    tree_leaves,
    tree_leaves_with_path,
    tree_map,
    tree_map_with_path,
    tree_reduce,
    tree_reduce_associative,
    tree_structure,
    tree_transpose,
    tree_unflatten,
    treedef_children,
    treedef_is_leaf,
    treedef_tuple,
)


def _prefix_mismatches(prefix, full, name: str, is_leaf=None) -> list[str]:
    """Every place where ``prefix`` is not a tree prefix of ``full``, one description each (the key path
    under ``name``, and what differs: the node types, the number of children, or the node metadata such as
    dict keys); an empty list when it is a prefix. ``is_leaf`` marks further prefix leaves (``None`` in an
    in_axes spec). For an error message: JAX lists its "Mismatch details" the same way."""
    out: list[str] = []

    def node(x):
        if (is_leaf is not None and is_leaf(x)) or treedef_is_leaf(tree_structure(x)):
            return None
        children, aux = flatten_one_level_with_keys(x)
        return list(children), aux

    def walk(p, f, path):
        pn = node(p)
        if pn is None:
            return  # a prefix leaf stands for the whole subtree
        where = f"{name}{keystr(tuple(path))}"
        fn = None if treedef_is_leaf(tree_structure(f)) else node(f)
        if fn is None or type(p) is not type(f):
            out.append(f"different types at key path {where}: the prefix has a subtree of type {type(p)}, the full "
                       f"pytree one of type {type(f)}")
            return
        (pc, pa), (fc, fa) = pn, fn
        if len(pc) != len(fc):
            out.append(f"different numbers of children at key path {where}: the prefix's {type(p).__name__} has "
                       f"{len(pc)}, the full pytree's {len(fc)}")
            return
        if [k for k, _ in pc] != [k for k, _ in fc] or pa != fa:
            out.append(f"different pytree metadata at key path {where}: the prefix's {type(p).__name__} has "
                       f"{pa if pa is not None else [k for k, _ in pc]!r}, the full pytree's "
                       f"{fa if fa is not None else [k for k, _ in fc]!r}")
            return
        for (k, pv), (_, fv) in zip(pc, fc):
            walk(pv, fv, [*path, k])

    walk(prefix, full, [])
    return out


def _mismatch_details(prefix, full, name: str, is_leaf=None) -> str:
    """``_prefix_mismatches`` as the text that ends an error message ("Mismatch details (N found): ...")."""
    found = _prefix_mismatches(prefix, full, name, is_leaf)
    if not found:
        return ""
    return f"\n  Mismatch details ({len(found)} found):" + "".join(f"\n    {m}" for m in found)
