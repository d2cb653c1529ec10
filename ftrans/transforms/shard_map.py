"""``shard_map``: write the per-device program of a mesh yourself (JAX's ``jax.shard_map``).

``shard_map(f, mesh=mesh, in_specs=..., out_specs=...)(*args)`` cuts each
argument into blocks as its ``PartitionSpec`` says, runs ``f`` once per
device of the mesh on that device's blocks (inside, ``lax.psum(x, 'x')`` and
the other collectives talk over the mesh axes by name), and puts the results
together from the devices' blocks as ``out_specs`` say.  The body is traced
once on the block types; the call binds ``shard_map_p``
(``core/prims/shard_map.py``), which ``jit`` lowers to Shardy's
``sdy.manual_computation``.  Called outside ``jit`` on concrete arrays, the
body instead runs device by device on concrete blocks, as JAX's eager
shard_map does (``shard_map_eager.py``).
With ``check_vma=True`` (the default) the traced body is checked first: an
output whose ``out_specs`` leave out a mesh axis it may vary over (an input
split over it reaches it, with no ``psum``-like reduction over the axis in
between) raises, as in JAX.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from ftrans.core import pytrees as tree_util
from ftrans.core import trace as _trace
from ftrans.core import traceback_util as _tb
from ftrans.core.config import config
from ftrans.core.ir import hoist_consts
from ftrans.core.prims.collectives import (
    all_gather_reduced_p,
    preduced_p,
    unreduced_psum_p,
    unreduced_reduce_scatter_p,
    vary_unreduced_cast_p,
)
from ftrans.core.prims.shard_map import checked_body_typing as _checked_body_typing
from ftrans.core.prims.shard_map import local_aval, names_of_spec, shard_map_p, with_ur_names
from ftrans.core.sharding import (
    AbstractMesh,
    Mesh,
    PartitionSpec,
    as_mesh,
    as_spec,
    check_spec,
    get_mesh,
    size_one_axes,
    without_axes,
)
from ftrans.core.trace import Tracer, aval_of, stage
from ftrans.errors import FtransTypeError, FtransValueError

__all__ = ["shard_map", "smap"]


class _InferType:
    """JAX's ``Infer``: ``shard_map``'s default ``in_specs``, each argument's spec read from its sharding type."""

    def __repr__(self) -> str:
        return "Infer"


Infer = _INFER = _InferType()


def _is_spec(x: Any) -> bool:
    return x is None or isinstance(as_spec(x), PartitionSpec)


class _Group:
    """The out/in spec of every leaf under one spec leaf (not a pytree node)."""

    __slots__ = ("specs",)

    def __init__(self, specs: list):
        self.specs = specs

    def __iter__(self) -> Any:
        return iter(self.specs)


def _as_specified(outs: list, specs: list, mesh: Mesh, partial: bool = False) -> list:
    """Concrete results of a shard_map called outside jit, each with the sharding JAX's has, on the same
    buffers: a fully manual one's, its out_specs entry as written (size-1 mesh axes, left out of their types
    under ``jax_remove_size_one_mesh_axis_from_type``, and trailing entries as given); a partially manual
    one's (``partial``), as XLA reports it (JAX runs it as a jitted program): size-1 axes and trailing
    unsplit entries left out."""
    from ftrans.core.array import ShardedArray
    from ftrans.core.sharding import NamedSharding

    res = []
    for o, sp in zip(outs, specs):
        if type(o) is ShardedArray and isinstance(sp, PartitionSpec) and not sp.unreduced and not sp.reduced:
            if partial:
                entries = []
                for e in sp:
                    kept = tuple(a for a in ((e,) if isinstance(e, str) else e or ()) if mesh.shape[a] > 1)
                    entries.append(None if not kept else kept[0] if len(kept) == 1 else kept)
                while entries and entries[-1] is None:
                    entries.pop()
                sp = PartitionSpec(*entries)
            have = getattr(o.sharding, "spec", None)
            if not isinstance(have, PartitionSpec) or tuple(have) != tuple(sp) or have.unreduced or have.reduced:
                from ftrans.devices import _put_sharded_leaf

                o = _put_sharded_leaf(o, NamedSharding(mesh, sp))
        res.append(o)
    return res


def _broadcast_specs(fname: str, what: str, specs: Any, tree: Any, n: int, static_ok: bool = False) -> list:
    """One spec per leaf of ``tree``; with ``static_ok`` a ``None`` spec (JAX's static argument) stays ``None``."""
    if _is_spec(specs):
        return [None if static_ok and specs is None else as_spec(specs)] * n
    try:  # each spec leaf becomes a _Group (a leaf to tree_util: the user's own lists stay containers)
        groups = tree_util.tree_map(lambda s, sub: _Group([s] * len(tree_util.tree_leaves(sub))), specs, tree,
                                    is_leaf=_is_spec)
    except (ValueError, TypeError):
        where = _prefix_mismatch(specs, tree)
        raise FtransValueError(
            f"shard_map {what}{where}: the {what} entry here does not match the value's structure. "
            f"shard_map({fname}): {what} must be a PartitionSpec or a tree prefix of the "
            f"{'arguments' if what == 'in_specs' else 'outputs'} with a PartitionSpec at each leaf; got "
            f"{what}={specs!r} for a value of structure {tree_util.tree_structure(tree)}") from None
    out = [None if static_ok and s is None else as_spec(s) for g in tree_util.tree_leaves(groups) for s in g]
    for s in out:
        if not isinstance(s, PartitionSpec) and not (static_ok and s is None):
            raise FtransTypeError(f"shard_map({fname}): {what} leaves must be PartitionSpecs, got {s!r}")
    return out


def _prefix_mismatch(specs: Any, tree: Any, path: str = "") -> str:
    """The key path (``[0]['a']``) of the first place ``specs`` is not a tree prefix of ``tree``."""
    if _is_spec(specs):
        return ""
    if isinstance(specs, (tuple, list)) and isinstance(tree, (tuple, list)) and len(specs) == len(tree):
        for k, (a, b) in enumerate(zip(specs, tree)):
            r = _prefix_mismatch(a, b, f"{path}[{k}]")
            if r != "" or not _is_spec(a) and not _prefix_ok(a, b):
                return r or f"{path}[{k}]"
        return ""
    if isinstance(specs, dict) and isinstance(tree, dict) and set(specs) == set(tree):
        for k in specs:
            r = _prefix_mismatch(specs[k], tree[k], f"{path}[{k!r}]")
            if r != "" or not _is_spec(specs[k]) and not _prefix_ok(specs[k], tree[k]):
                return r or f"{path}[{k!r}]"
        return ""
    return path


def _prefix_ok(specs: Any, tree: Any) -> bool:
    try:
        tree_util.tree_map(lambda s, sub: None, specs, tree, is_leaf=_is_spec)
        return True
    except (ValueError, TypeError):
        return False


def _spec_rank_error(fname: str, what: str, specs: Any, tree: Any, k: int, spec: Any, aval: Any) -> FtransValueError:
    """JAX's error for a spec longer than its value's rank; ``k``: the value's leaf index in ``tree``."""
    keystr = tree_util.keystr
    leaf_paths = [p for p, _ in tree_util.tree_leaves_with_path(tree)]
    lp = leaf_paths[k] if k < len(leaf_paths) else ()
    sk = ""
    if not _is_spec(specs):
        spec_paths = [p for p, _ in tree_util.tree_leaves_with_path(specs, is_leaf=_is_spec)]
        cands = [q for q in spec_paths if tuple(map(str, q)) == tuple(map(str, lp[:len(q)]))]
        sk = keystr(max(cands, key=len)) if cands else ""
    nd = len(aval.shape)
    io = "in" if what == "in_specs" else "out"
    base = f"the passed args{keystr(lp)}" if io == "in" else f"{fname}(*args){keystr(lp)}"
    msg = (f"shard_map applied to the function '{fname}' was given an {what} entry longer than the rank of the "
           f"{io}put value it describes: {what}{sk} is {spec!r} which has length {len(spec)}, but {base} has shape "
           f"{aval.str_short()}, which has rank {nd}. A spec gives at most one entry per dimension of its value: "
           f"shorten the spec, or give the value more axes.")
    if nd == 0:
        msg += (f" For scalar values (rank 0), consider using an {what} entry of `P()` "
                "(P = ftrans.sharding.PartitionSpec)")
        if io == "out":
            msg += ", or give a rank-0 output that varies over the mesh a singleton axis to put it together along"
        msg += "."
    return FtransValueError(msg)


def _all_explicit(mesh: Mesh) -> bool:
    from ftrans.core.sharding import AxisType

    types = tuple(getattr(mesh, "axis_types", ()) or ())
    return bool(types) and all(t == AxisType.Explicit for t in types)


def _check_explicit_spec(x: Any, spec: Any, a: Any, names: tuple, mesh: Mesh) -> None:
    """Over a mesh whose axes are all Explicit (and all manual here), an argument's in_spec must be its
    sharding type's spec, as JAX requires (a value not laid out over the mesh has ``P()``'s)."""
    from ftrans.core.sharding_rules import array_aval

    try:
        typed = array_aval(x) if not isinstance(x, Tracer) else x.aval
    except TypeError:
        return
    sh = getattr(typed, "typed_sharding", None)
    have = names_of_spec(sh.spec, len(a.shape)) if sh is not None else ((),) * len(a.shape)

    def sets(sp: Any) -> tuple:
        return frozenset(getattr(sp, "unreduced", ()) or ()), frozenset(getattr(sp, "reduced", ()) or ())

    one = size_one_axes(mesh)  # (JAX's jax_remove_size_one_mesh_axis_from_type: the types leave them out)
    if one:
        names = tuple(tuple(x for x in ax if x not in one) for ax in names)
        spec = without_axes(spec, one)
    if tuple(have) == tuple(names) and sets(sh.spec if sh is not None else None) == sets(spec):
        return

    def spec_str(ns: tuple, sp: Any = None) -> str:
        u, r = sets(sp)
        return repr(PartitionSpec(*(None if not ax else ax[0] if len(ax) == 1 else tuple(ax) for ax in ns),
                                  unreduced=u, reduced=r))

    raise FtransValueError(
        f"in_specs passed to shard_map: {spec_str(names, spec)} does not match the specs of the input: "
        f"{spec_str(have, sh.spec if sh is not None else None)} for arg: {typed.str_short()}. Over a mesh whose axes are all Explicit an argument's "
        "in_specs entry must be its sharding type's spec: leave in_specs out (shard_map infers them from the "
        "arguments), or reshard the argument (ftrans.reshard) first")


def _check_known(fname: str, what: str, spec: Any, mesh: Mesh) -> None:
    """Every axis a spec names must be one of the mesh's (JAX's wording: "in_specs refers to 'q'")."""
    for a in spec.axes():
        if a not in mesh.axis_names:
            raise FtransValueError(
                f"shard_map({fname}) {what}: the PartitionSpec {spec!r} names mesh axis {a!r}, but the mesh has "
                f"axes {mesh.axis_names} (shape {mesh.shape}): the shard_map {what} must refer to an axis of the "
                f"mesh marked as manual, but {what} refers to {a!r}")


def _check_manual(fname: str, what: str, spec: Any, names: tuple, auto: set) -> None:
    bad = sorted({a for ax in names for a in ax} & auto, key=str)
    if bad:
        raise FtransValueError(f"shard_map({fname}): {what} {spec!r} splits over mesh axes {bad}, which are not in "
                               "axis_names (axes left automatic cannot appear in the specs): the shard_map "
                               f"{what} must refer to axes marked as manual, but {what} refers to {bad[0]!r}")


def _check_unreduced(what: str, mesh: Mesh, manual: Any, spec: Any) -> None:
    """JAX's checks of a spec's unreduced/reduced sets: only in a fully manual shard_map, and only over
    Explicit mesh axes."""
    from ftrans.core.sharding import AxisType

    ur, rd = frozenset(getattr(spec, "unreduced", ())), frozenset(getattr(spec, "reduced", ()))
    if not ur and not rd:
        return
    prefix = "in" if what == "in_specs" else "out"
    if manual and frozenset(manual) != frozenset(mesh.axis_names):
        raise NotImplementedError(
            f"unreduced/reduced can only be passed to {prefix}_specs when shard_map is in full manual mode. Got "
            f"mesh axis names {mesh.axis_names}, manual_axes: {frozenset(manual)}, specs: {spec!r}")
    types = dict(zip(mesh.axis_names, tuple(getattr(mesh, "axis_types", ()) or ())))
    for kind, axes in (("unreduced", ur), ("reduced", rd)):
        if not all(types.get(u) == AxisType.Explicit for u in axes):
            raise FtransValueError(
                f"{kind} in {prefix}_specs {spec!r} can only be used when the mesh passed to shard_map contains "
                f"axis names all of type `Explicit`. Got mesh {mesh!r}")


class _ShardMapped:
    def __init__(self, fun: Callable, mesh: Mesh | None, in_specs: Any, out_specs: Any, check_vma: bool,
                 axis_names: frozenset = frozenset()):
        self._fun = fun
        self._axis_names = axis_names
        self.__name__ = getattr(fun, "__name__", "f")
        functools.update_wrapper(self, fun, updated=())
        self._mesh = mesh
        self._in_specs = in_specs
        self._out_specs = out_specs
        self._check_vma = check_vma
        self._smap_axis: Any = None  # set by smap: its axis name (for its in_axes errors)

    @_tb.api_boundary
    def __call__(self, *args: Any) -> Any:
        from ftrans.core.ref import Ref

        if any(isinstance(x, Ref) for x in tree_util.tree_leaves(args)):
            return self._call_with_refs(args)
        if self._has_static():  # static arguments (None in_specs) cannot cross jit: bind here
            return self._bind(*args)
        if _trace.eager_unchecked and _trace.is_eager() and not self._explicit_auto() and not any(
                isinstance(x, Tracer) for x in tree_util.tree_leaves(args)):
            # Concrete arguments: the body runs device by device on concrete blocks, as JAX's eager shard_map.
            from ftrans.transforms.shard_map_eager import eager_shard_map

            return eager_shard_map(self, args)
        return self._bind(*args)

    def _explicit_auto(self) -> bool:
        """A partially manual shard_map (``axis_names=`` a subset) over a mesh with Explicit axes left
        automatic: its body's values are typed over those axes, so it runs staged (each operation typed as
        under ``jit``), not device by device."""
        if not self._axis_names:
            return False
        from ftrans.core.sharding import AxisType

        mesh = self._mesh if self._mesh is not None else (_BODY.stack[-1] if _BODY.stack else get_mesh())
        return any(t == AxisType.Explicit and n not in self._axis_names
                   for n, t in zip(getattr(mesh, "axis_names", ()), getattr(mesh, "axis_types", ()) or ()))

    def _call_with_refs(self, args: tuple) -> Any:
        """Refs among the arguments (JAX's mutable arrays): each device's body gets a ref of its block of the
        ref's value (split as its spec says), and the blocks the body leaves there are written back whole."""
        from ftrans.core.ref import Ref, new_ref

        leaves, tree = tree_util.tree_flatten(args)
        pos = [i for i, x in enumerate(leaves) if isinstance(x, Ref)]
        vals = [x[...] if isinstance(x, Ref) else x for x in leaves]
        fname = self.__name__
        if self._in_specs is _INFER:
            specs: list = [None] * len(leaves)
        else:
            specs = _broadcast_specs(fname, "in_specs", self._in_specs, args, len(leaves), static_ok=True)
        ref_specs = []
        for i in pos:
            if specs[i] is None and self._in_specs is not _INFER:
                raise FtransValueError(f"shard_map({fname}): a ref argument (leaf {i}) cannot be static "
                                       "(an in_specs entry of None): give it a PartitionSpec")
            ref_specs.append(specs[i] if specs[i] is not None else _inferred_spec(
                fname, i, vals[i], self._mesh if self._mesh is not None else (
                    _BODY.stack[-1] if _BODY.stack else get_mesh()), self._axis_names))
        fun = self._fun

        def body(*a: Any) -> Any:
            from ftrans.core.prims.shard_map import eager_body

            ls, t = tree_util.tree_flatten(a)
            prev, eager_body.allow_refs = eager_body.allow_refs, True
            try:
                ls = [new_ref(v) if i in pos else v for i, v in enumerate(ls)]
            finally:
                eager_body.allow_refs = prev
            out = fun(*tree_util.tree_unflatten(t, ls))
            return out, [ls[i][...] for i in pos]

        functools.update_wrapper(body, fun, updated=())
        inner = _ShardMapped(body, self._mesh, self._in_specs, (self._out_specs, ref_specs), self._check_vma,
                             self._axis_names)
        inner._smap_axis = self._smap_axis
        out, new_vals = inner(*tree_util.tree_unflatten(tree, vals))
        for i, v in zip(pos, new_vals):
            leaves[i][...] = v
        return out

    def _has_static(self) -> bool:
        return self._in_specs is None or any(
            s is None for s in tree_util.tree_leaves(self._in_specs, is_leaf=lambda x: x is None))

    def _bind(self, *args: Any) -> Any:
        fname, mesh, manual, auto, specs, avals, all_leaves, dyn, in_tree, leaves = self._prepare(args)
        enclosing = _enclosing_manual(mesh)
        if enclosing:
            outer = manual_axes_here()
            new = frozenset(manual or mesh.axis_names) - outer
            if outer != frozenset(mesh.axis_names) and new and not _eager_body_values(leaves):
                # The enclosing body is partially manual: this one is a shard_map of its own, manual over the
                # axes the enclosing one left automatic (a nested manual computation, as JAX's).
                for (_, names), s in zip(avals, specs):
                    _check_not_enclosing(fname, "in_specs", s, names, enclosing)
                return self._stage_and_bind(fname, mesh, new, set(mesh.axis_names) - new - outer, avals,
                                            all_leaves, dyn, in_tree, leaves, outer)
            return self._inline(fname, mesh, enclosing, auto, specs, avals, all_leaves, dyn, in_tree)
        return self._stage_and_bind(fname, mesh, manual, auto, avals, all_leaves, dyn, in_tree, leaves)

    def _prepare(self, args: tuple) -> tuple:
        """The mesh, the manual and automatic axes and each argument leaf's spec and type (checked)."""
        fname = self.__name__
        body_meshes = _BODY.stack
        if self._mesh is not None and body_meshes:
            raise FtransValueError(
                f"shard_map({fname}) is called inside the body of another shard_map, whose context mesh (over "
                f"{body_meshes[-1].axis_names}, manual there) should match the mesh passed to shard_map: leave "
                "mesh= out in a nested shard_map (it takes the enclosing one's mesh)")
        if self._mesh is not None and not tuple(getattr(self._mesh, "axis_names", ("?",))):
            raise FtransValueError(f"shard_map requires a non-empty mesh; shard_map({fname}) got {self._mesh!r}, "
                                   "which has no axes (JAX's empty mesh)")
        mesh = (as_mesh(self._mesh) if self._mesh is not None  # a jax mesh: as ftrans's
                else body_meshes[-1] if body_meshes else get_mesh())
        if isinstance(mesh, AbstractMesh):  # its devices: the arguments' mesh, else the current mesh's
            mesh = _concrete_mesh(fname, mesh, tree_util.tree_leaves(args))
        if mesh is None:
            raise FtransValueError(f"shard_map({fname}): no mesh was passed and the context mesh cannot be empty "
                                   "(The context mesh cannot be empty): pass mesh=, or set one with "
                                   "ftrans.set_mesh(mesh) / ftrans.sharding.use_mesh")
        if not isinstance(mesh, Mesh):
            raise FtransTypeError(f"shard_map({fname}): mesh must be an ftrans.sharding.Mesh, got "
                                  f"{type(mesh).__name__}")
        manual = self._axis_names
        if manual and not manual <= set(mesh.axis_names):
            raise FtransValueError(f"shard_map({fname}): axis_names {sorted(manual, key=str)} must name axes of the "
                                   f"mesh, whose axes are {mesh.axis_names}")
        from ftrans.core.axis_env import vmapped_explicit_axes

        vmapped = vmapped_explicit_axes() & set(mesh.axis_names)
        if vmapped:  # under a vmap over Explicit-split arguments: those axes stay automatic, as JAX's
            rest = frozenset(mesh.axis_names) - vmapped
            if manual and not manual <= rest:
                raise FtransValueError(
                    f"jax.shard_map requires axis_names={set(manual)} to be a subset of mesh.axis_names={set(rest)} "
                    f"(shard_map({fname}) is under a vmap whose mapped dimension is split over the Explicit mesh "
                    f"axes {sorted(vmapped, key=str)}, which it leaves out of the mesh)")
            manual = manual or rest
        # Mesh axes left automatic: the specs may not split over them, so every device along them holds the
        # same blocks and computes the same results; the body runs manual over them too (same values).
        auto = set(mesh.axis_names) - manual if manual else set()
        leaves, in_tree = tree_util.tree_flatten(args)
        in_specs = self._in_specs
        if isinstance(in_specs, list):
            in_specs = tuple(in_specs)
        if isinstance(in_specs, tuple) and not isinstance(in_specs, PartitionSpec) and len(in_specs) != len(args):
            raise FtransValueError(
                f"shard_map({fname}): in_specs has {len(in_specs)} entries but the function was called with "
                f"{len(args)} positional arguments; give one PartitionSpec (or tree of them) per argument")
        if in_specs is _INFER:  # JAX's Infer: each argument's spec is its sharding type (Explicit mesh axes)
            _check_inferable(fname, mesh, manual or frozenset(mesh.axis_names), self._smap_axis)
            specs = [_inferred_spec(fname, k, x, mesh, manual) for k, x in enumerate(leaves)]
        else:  # a None spec: the leaf is static, handed to the body as it is (JAX's in_specs None)
            specs = _broadcast_specs(fname, "in_specs", in_specs, args, len(leaves), static_ok=True)
        dyn = [s is not None for s in specs]
        all_leaves, leaves = leaves, [x for x, d in zip(leaves, dyn) if d]
        specs = [s for s in specs if s is not None]
        avals = []
        dyn_index = [i for i, d in enumerate(dyn) if d]
        for k, (x, s) in enumerate(zip(leaves, specs)):
            try:
                a = aval_of(x)
            except TypeError:
                raise FtransTypeError(f"shard_map({fname}): argument leaf {k} of type {type(x).__name__} is not "
                                      "an array") from None
            if len(s) > len(a.shape):
                raise _spec_rank_error(fname, "in_specs", self._in_specs, args, dyn_index[k], s, a)
            _check_known(fname, "in_specs", s, mesh)
            _check_unreduced("in_specs", mesh, manual, s)
            check_spec(s, mesh, f"shard_map({fname}) in_specs", len(a.shape), a.shape)
            names = names_of_spec(s, len(a.shape))
            _check_manual(fname, "in_specs", s, names, auto)
            for d, (n, ax) in enumerate(zip(a.shape, names)):
                parts = int(np.prod([mesh.shape[x] for x in ax])) if ax else 1
                if n % parts:
                    lp = tree_util.tree_leaves_with_path(args)[dyn_index[k]][0]
                    axis = f"axes {ax}" if len(ax) > 1 else f"axis {ax[0]!r}"
                    raise FtransValueError(
                        f"shard_map applied to the function '{fname}' was given argument arrays with axis sizes "
                        f"that are not evenly divisible by the corresponding mesh axis sizes: the passed "
                        f"args{tree_util.keystr(lp)} of shape {a.str_short()} corresponds to in_specs of value "
                        f"{s!r}, which maps array axis {d} (of size {n}) to mesh {axis} (of "
                        f"{'total ' if len(ax) > 1 else ''}size {parts}), but {parts} does not evenly divide {n} "
                        f"(the mesh has shape {tuple(mesh.axis_sizes)} with axis names {mesh.axis_names}). Pad "
                        "the argument, or split it over other mesh axes")
            avals.append((a, with_ur_names(names, s)))
        if in_specs is not _INFER and not auto and not body_meshes and _all_explicit(mesh):
            for x, s, (a, names) in zip(leaves, specs, avals):
                _check_explicit_spec(x, s, a, names, mesh)
        return fname, mesh, manual, auto, specs, avals, all_leaves, dyn, in_tree, leaves

    def _stage_and_bind(self, fname: str, mesh: Mesh, manual: frozenset, auto: set, avals: list, all_leaves: list,
                        dyn: list, in_tree: Any, leaves: list, outer: frozenset = frozenset()) -> Any:
        """``outer``: the axes an enclosing (partially manual) body is manual over; ``manual``: this one's."""
        out_box: list = []

        def flat_fun(*xs: Any) -> list:
            it = iter(xs)
            xs = [next(it) if d else x for x, d in zip(all_leaves, dyn)]
            with _body_mesh(mesh, manual, bool(self._check_vma)):
                out = self._fun(*tree_util.tree_unflatten(in_tree, xs))
                flat, tree = tree_util.tree_flatten(out)
                if self._check_vma and config.auto_pcast:  # a result the out_specs split over axes it does
                    # not vary along: pvary'd
                    flat = _pvary_outs(fname, self._out_specs, out, flat)
            # the manual axes each result's type varies along (a pcast'ed value is its operand's variable)
            # (and those it is reduced along: not the same as a replicated value unless out_specs say reduced)
            out_box.append((out, tree, [getattr(a, "vma", _EMPTY) | getattr(a, "reduced", _EMPTY)
                                        for a in (getattr(o, "aval", None) for o in flat)]))
            return flat

        from ftrans.core.prims.shard_map import _body_env

        with _body_env({"mesh": mesh}, manual):
            body_axes = frozenset(manual or mesh.axis_names) if self._check_vma else frozenset()
            blocks = [local_aval(a, ns, mesh) for a, ns in avals]
            if auto:  # partially manual: a block keeps its type over the Explicit axes left automatic
                blocks = _auto_typed_blocks(mesh, manual | outer, leaves, blocks)
            # (nested: a block also varies along the enclosing body's axes its argument varies along)
            # (checked: a block unreduced/reduced over axes its spec names is typed so, JAX's ``mat``)
            if config.remove_size_one_mesh_axis_from_type:  # (JAX's switch: no value varies along them)
                body_axes -= size_one_axes(mesh)
            closed, _ = stage(flat_fun, [_with_vma(b, frozenset(x for ax in ns for x in ax) & body_axes | (
                vma_of(x) if outer and isinstance(x, Tracer) else _EMPTY), *_spec_ur(ns, body_axes))
                for b, (_, ns), x in zip(blocks, avals, leaves)])
        out, out_tree, out_vma = out_box[0]
        out_specs = _broadcast_specs(fname, "out_specs", self._out_specs, out, len(closed.out_avals))
        out_names = []
        for k, (s, a) in enumerate(zip(out_specs, closed.out_avals)):
            if len(s) > len(a.shape):
                raise _spec_rank_error(fname, "out_specs", self._out_specs, out, k, s, a)
            _check_known(fname, "out_specs", s, mesh)
            _check_unreduced("out_specs", mesh, manual, s)
            check_spec(s, mesh, f"shard_map({fname}) out_specs", len(a.shape), a.shape)
            out_names.append(with_ur_names(names_of_spec(s, len(a.shape)), s))
            _check_manual(fname, "out_specs", s, out_names[-1], auto)
            _check_not_enclosing(fname, "out_specs", s, out_names[-1], set(outer))
        if self._check_vma:
            _check_out_vma(fname, mesh, manual or set(mesh.axis_names), closed, [ns for _, ns in avals],
                           out_specs, out_names, out_vma, not any(map(_unreduced_in, leaves)))
        if not (set(auto) & set(mesh.explicit_axes)):  # (the body's mesh is all Manual or Auto, as JAX's check)
            for c in closed.consts:
                check_closed_over(c)
        body, consts = hoist_consts(closed)
        in_names = tuple(((),) * len(np.shape(c)) for c in consts) + tuple(ns for _, ns in avals)
        outs = shard_map_p.bind(*consts, *leaves, jaxpr=body, mesh=mesh, in_names=in_names,
                                newly_manual_axes=frozenset(manual or mesh.axis_names),
                                out_names=tuple(out_names), check_vma=bool(self._check_vma), name=fname)
        if not outer and not (auto and mesh.explicit_axes):  # (partially manual over Explicit axes: typed results)
            outs = _as_specified(outs, out_specs, mesh, bool(auto))
        return tree_util.tree_unflatten(out_tree, outs)

    def _inline(self, fname: str, mesh: Mesh, enclosing: set, auto: set, specs: list, avals: list,
                all_leaves: list, dyn: list, in_tree: Any) -> Any:
        """A shard_map inside the body of another over the same mesh: the enclosing one's program is already
        manual over every mesh axis (its automatic axes run manual with the same values on every device
        along them), so this one is its body run inline: each argument's block cut out at this device's
        index along the axes its spec names, and each result put together along its out_specs' axes with
        a tiled ``all_gather``."""
        from contextlib import ExitStack

        from ftrans.core.axis_env import extend_axis_env

        for (_, names), s in zip(avals, specs):
            _check_not_enclosing(fname, "in_specs", s, names, enclosing)
        with ExitStack() as stack:
            for n, size in zip(mesh.axis_names, mesh.axis_sizes):
                if n not in enclosing:
                    stack.enter_context(extend_axis_env(n, size, None))
            with _body_mesh(mesh, enclosing | (set(mesh.axis_names) - auto), bool(self._check_vma)):
                # cut in the body: a block split over a newly manual axis varies along it (JAX's in types)
                it = iter([_block(x, a, names, mesh) for x, (a, names) in zip(
                    [x for x, d in zip(all_leaves, dyn) if d], avals)])
                xs = [next(it) if d else x for x, d in zip(all_leaves, dyn)]
                out = self._fun(*tree_util.tree_unflatten(in_tree, xs))
            flat, out_tree = tree_util.tree_flatten(out)
            out_specs = _broadcast_specs(fname, "out_specs", self._out_specs, out, len(flat))
            res = []
            for o, s in zip(flat, out_specs):
                a = aval_of(o)
                check_spec(s, mesh, f"shard_map({fname}) out_specs", len(a.shape), a.shape)
                names = names_of_spec(s, len(a.shape))
                _check_manual(fname, "out_specs", s, names, auto)
                _check_not_enclosing(fname, "out_specs", s, names, enclosing)
                res.append(_gather(o, names, bool(self._check_vma)))
        return tree_util.tree_unflatten(out_tree, res)


def check_closed_over(x: Any) -> None:
    """JAX's refusal of a value a ``shard_map`` body closes over (rather than takes as an argument) that is
    sharded over a mesh with Explicit axes: the body's mesh types its values over Manual axes only."""
    if isinstance(x, Tracer):
        sh = aval_of(x).typed_sharding
    else:
        from ftrans.core.array import Array

        sh = x.sharding if isinstance(x, Array) else None
    m = getattr(sh, "mesh", None)
    if m is not None and getattr(m, "explicit_axes", None):
        a = aval_of(x)
        raise NotImplementedError(
            "Closing over inputs to shard_map where the input is sharded on `Explicit` axes is not implemented. "
            "As a workaround, please pass those inputs as an argument to shard_map. Got input with shape "
            f"{a.str_short()}({{Explicit: {tuple(m.explicit_axes)}}})")


def _eager_body_values(leaves: list) -> bool:
    """Whether ``leaves`` hold values of a shard_map body run eagerly, device by device (a nested shard_map
    there runs inline)."""
    from ftrans.core.prims.shard_map import eager_body

    if not eager_body.depth:
        return False
    from ftrans.transforms.shard_map_eager import EagerShardMapTracer

    return any(isinstance(x, EagerShardMapTracer) for x in leaves)


class _BodyMeshes(threading.local):
    def __init__(self) -> None:
        self.stack: list = []  # the meshes of the shard_map bodies being traced in this thread, innermost last
        self.manual: list = []  # for each, the mesh axes manual in it (an enclosing body's included)


_BODY = _BodyMeshes()


@contextlib.contextmanager
def _body_mesh(mesh: Mesh, manual: Any = frozenset(), check_vma: bool = True) -> Any:
    """While the user's body runs: a nested shard_map without mesh= takes this one (JAX's context mesh);
    ``manual``: the mesh axes the body is manual over (all of them when empty).  With ``check_vma`` the
    values staged there carry the manual axes they vary along (``typeof(x).vma``)."""
    outer = _BODY.manual[-1] if _BODY.manual else frozenset()
    _BODY.stack.append(mesh)
    _BODY.manual.append(outer | frozenset(manual or mesh.axis_names))
    st = _trace.state
    prev, st.vma_hook = st.vma_hook, (_vma_hook if check_vma else None)
    prev_insert, st.vma_insert = st.vma_insert, (_vma_insert if check_vma else None)
    try:
        yield
    finally:
        st.vma_hook = prev
        st.vma_insert = prev_insert
        _BODY.stack.pop()
        _BODY.manual.pop()


def _restaged_body(mesh: Mesh, manual: Any) -> Any:
    return _body_mesh(mesh, manual or frozenset(), True)


if not _checked_body_typing:
    _checked_body_typing.append(_restaged_body)


def _auto_typed_blocks(mesh: Mesh, manual: frozenset, leaves: list, blocks: list) -> list:
    """The blocks of a partially manual body (``axis_names`` a subset of the mesh's axes), typed as JAX's:
    over the body's mesh (its manual axes of type Manual), each keeps the entries of its argument's sharding
    type that name Explicit axes left automatic.  Untyped when no such axis exists."""
    from ftrans.core.sharding import AxisType
    from ftrans.core.sharding_rules import array_aval, typed

    explicit = [n for n, t in zip(mesh.axis_names, mesh.axis_types) if t == AxisType.Explicit and n not in manual]
    if not explicit:
        return blocks
    bmesh = AbstractMesh(mesh.axis_sizes, mesh.axis_names, tuple(
        AxisType.Manual if n in manual else t for n, t in zip(mesh.axis_names, mesh.axis_types)))
    out = []
    for x, b in zip(leaves, blocks):
        try:
            sh = (x.aval if isinstance(x, Tracer) else array_aval(x)).typed_sharding
        except TypeError:
            sh = None
        entries = tuple(sh.spec) if sh is not None else ()
        entries += (None,) * (len(b.shape) - len(entries))
        spec = []
        for e in entries[:len(b.shape)]:
            kept = tuple(a for a in names_of_spec(PartitionSpec(e), 1)[0] if a in explicit)
            spec.append(None if not kept else kept[0] if len(kept) == 1 else kept)
        out.append(typed(b, bmesh, spec))
    return out


def _spec_ur(names: Any, body_axes: frozenset) -> tuple:
    """The unreduced and reduced axes (of a checked body's ``body_axes``) a spec's names carry."""
    if not body_axes:
        return _EMPTY, _EMPTY
    return (frozenset(getattr(names, "unreduced", _EMPTY)) & body_axes,
            frozenset(getattr(names, "reduced", _EMPTY)) & body_axes)


def _with_vma(aval: Any, vma: frozenset, unreduced: frozenset = frozenset(), reduced: frozenset = frozenset()) -> Any:
    """``aval`` as a value varying along ``vma`` (and unreduced/reduced along those axes; a non-array aval stays
    as it is)."""
    from ftrans.core.avals import ShapedArray, ShardedAval, VaryingAval, VaryingShardedAval

    if config.remove_size_one_mesh_axis_from_type and _BODY.stack and (vma or unreduced or reduced):
        one = size_one_axes(_BODY.stack[-1])  # JAX's switch: mesh axes of size 1 are no part of the type
        vma, unreduced, reduced = vma - one, unreduced - one, reduced - one
    if type(aval) in (ShardedAval, VaryingShardedAval):  # a partially manual body's typed value
        if aval.vma == vma:
            return aval
        return VaryingShardedAval(aval, vma) if vma else ShardedAval(aval.shape, aval.dtype, aval.weak_type,
                                                                     aval.typed_sharding)
    if type(aval) not in (ShapedArray, VaryingAval) or (
            aval.vma == vma and aval.unreduced == unreduced and aval.reduced == reduced):
        return aval
    if vma or unreduced or reduced:
        return VaryingAval(aval, vma, unreduced, reduced)
    return ShapedArray(aval.shape, aval.dtype, aval.weak_type)


def _vma_hook(prim: Any, avals: list, out: Any, params: dict) -> Any:
    """Staging inside a ``shard_map`` body: the results' manual axes, from the operands' (the check_vma rules),
    and their unreduced/reduced axes (JAX's ``mat``)."""
    outs = out if prim.multiple_results else [out]
    sets, urs = body_types(prim, params, avals, len(outs), manual_axes_here())
    if urs is not None:
        res = [_with_vma(a, v, u, r) for a, v, (u, r) in zip(outs, sets, urs)]
    else:
        res = [_with_vma(a, v) for a, v in zip(outs, sets)]
    return res if prim.multiple_results else res[0]


def body_types(prim: Any, params: dict, avals: list, n_out: int, axes: frozenset) -> tuple[list, Any]:
    """The manual axes each of an equation's ``n_out`` results varies along, given its operands' types
    ``avals``, and (None when no set is involved) the axes each is unreduced/reduced along."""
    sets = _vma_eqn(prim, params, [getattr(a, "vma", _EMPTY) for a in avals], n_out, axes)
    if prim in _UR_CASTS or any(getattr(a, "unreduced", None) or getattr(a, "reduced", None) for a in avals) \
            or _params_have_jaxprs(params):
        urs = _ur_eqn(prim, params, avals, n_out, axes)
        if prim is _UR_CASTS[1]:  # vary_unreduced_cast: varying -> unreduced
            sets = [v - frozenset(params["axes"]) for v in sets]
        return sets, urs
    return sets, None


def like_vma(proto: Any, out: Any) -> Any:
    """``out`` (made in ``proto``'s likeness: ``zeros_like``, ``full_like``, ...) varying along the manual
    axes ``proto`` varies along, as JAX's: a value built to match one device's block is that device's."""
    from ftrans.core.avals import ShapeDtypeStruct

    if not config.auto_pcast:  # (JAX's auto_pcast off: no cast, the operation using it says they differ)
        return out
    vma = getattr(getattr(proto, "aval", None), "vma", None) if isinstance(proto, Tracer) else (
        proto.vma if isinstance(proto, ShapeDtypeStruct) else None)  # (eval_shape's result in a body)
    return pvary_tracer(out, tuple(vma)) if vma else out


def pvary_tracer(x: Any, names: tuple) -> Any:
    """``x`` typed as varying along the manual axes ``names`` too (``lax.pcast(to='varying')``, JAX's
    ``pvary``): the same value, a new type, through a ``pvary`` equation over the axes of ``names`` it does
    not vary along yet; outside a ``shard_map`` body checked with ``check_vma``, ``x``."""
    if _trace.state.vma_hook is None:
        return x
    axes = frozenset(names) & manual_axes_here()
    if axes and config.remove_size_one_mesh_axis_from_type:
        axes -= size_one_axes(_BODY.stack[-1])  # (JAX's switch: a pvary over them is none)
    if not axes:
        return x
    axes -= vma_of(x)
    if not axes:
        return x
    return _cast_varying(x, axes)


def collective_pvary(x: Any, names: tuple, what: str) -> Any:
    """A collective ``what``'s operand cast to vary along the manual axes ``names`` (JAX's implicit pvary,
    ``insert_collective_pvary``); with ``jax_auto_pcast`` off it must vary along them already, as JAX's
    check says (``psum``: along one of them at least)."""
    if config.auto_pcast:
        return pvary_tracer(x, names)
    if _trace.state.vma_hook is None:
        return x
    have = vma_of(x)
    axes = tuple(n for n in names if n in manual_axes_here())
    if what == "psum" and axes and not set(axes) & have:
        raise FtransValueError(
            "psum is a variant->invariant collective. This means that the axis names mentioned in `axes` passed "
            f"to `psum` must be present in `jax.typeof(inp).mat.varying`. Got axes={axes} and "
            f"jax.typeof(inp).mat.varying={set(have) or '{}'} (jax_auto_pcast is off, so no pvary is inserted: "
            "cast it first with lax.pcast(x, axes, to='varying'))")
    if what != "psum" and any(a not in have for a in axes):
        raise FtransValueError(
            f"Collective {what} must be applied to a device-varying type, but got {set(have) or '{}'} for "
            f"collective acting over axis name {axes} (jax_auto_pcast is off, so no pvary is inserted: cast it "
            "first with lax.pcast(x, axes, to='varying'))")
    return x


def _cast_varying(x: Any, axes: frozenset, bind: Any = None) -> Any:
    """``x`` cast to vary along ``axes`` too: ``reduced_vary_cast`` over those it is reduced along (its
    cotangent there stays each device's own, unreduced), ``pvary`` over the others (JAX's casts).  ``bind``:
    how to bind a primitive (``(prim, x, axes) -> out``; ``prim.bind`` by default)."""
    from ftrans.core.prims.collectives import pvary_p, reduced_vary_cast_p

    bind = bind or (lambda p, v, a: p.bind(v, axes=a))
    red = frozenset(getattr(aval_of(x), "reduced", _EMPTY)) & axes
    if red:
        x = bind(reduced_vary_cast_p, x, _mesh_order(red))
    rest = axes - red
    return bind(pvary_p, x, _mesh_order(rest)) if rest else x


def _pvary_outs(fname: str, out_specs: Any, out: Any, flat: list) -> list:
    """JAX's casts at the end of a ``check_vma`` body: each result varies along every manual axis its
    out_specs split it over (the transpose then sums a cotangent that is the same on every device back)."""
    specs = _broadcast_specs(fname, "out_specs", out_specs, out, len(flat))
    res = []
    for o, s in zip(flat, specs):
        nd = len(np.shape(o)) if not isinstance(o, Tracer) else len(o.aval.shape)
        if isinstance(s, PartitionSpec) and len(s) <= nd:
            o = pvary_tracer(o, tuple(a for ax in names_of_spec(s, nd) for a in ax))
        res.append(o)
    return res


def vma_of(x: Any) -> frozenset:
    """The manual mesh axes ``x`` varies along (its type's; none for a value from outside the body)."""
    return getattr(aval_of(x), "vma", _EMPTY)


def _mesh_order(axes: Any) -> tuple:
    order = _BODY.stack[-1].axis_names if _BODY.stack else ()
    return tuple(a for a in order if a in axes) + tuple(sorted((a for a in axes if a not in order), key=str))


def vma_checked_names(names: tuple) -> tuple:
    """Of the axis ``names`` a collective names, those of a ``shard_map`` body checked with ``check_vma``
    here (its manual mesh axes): those collectives insert ``pvary`` / bind ``psum_invariant`` as JAX's."""
    if _trace.state.vma_hook is None:
        return ()
    manual = manual_axes_here()
    return tuple(n for n in names if n in manual)


def _vma_insert(trace: Any, prim: Any, tracers: list, params: dict) -> list:
    """Before an equation is staged in a ``check_vma`` body: an operand varying along fewer manual axes than
    the others is cast with ``pvary`` over the missing ones first (JAX's implicit pvary), so that its
    transpose sums the cotangents where an invariant value met a varying one.  Collectives and higher-order
    primitives are left alone (the collectives cast in their own API, the bodies are traced cast)."""
    vmas = [getattr(t.aval, "vma", _EMPTY) for t in tracers]
    union = frozenset().union(*vmas)
    if not union or all(v == union for v in vmas):
        return tracers
    if not _NO_INSERT:
        from ftrans.core.prims import collectives as C
        from ftrans.core.prims.calls import custom_lin_p

        _NO_INSERT.update(C.ALL)
        _NO_INSERT.add(custom_lin_p)  # (its operands keep their types: the residuals and the input tangents)
    if prim in _NO_INSERT or _params_have_jaxprs(params):
        return tracers
    if not config.auto_pcast:  # JAX's standard_vma_rule: no implicit pvary, the operands' types must agree
        _raise_vma_mismatch(prim, vmas)
    from ftrans.core.avals import ShapedArray, ShardedAval, VaryingAval, VaryingShardedAval

    out = []
    for t, v in zip(tracers, vmas):
        if v != union and type(t.aval) in (ShapedArray, VaryingAval, ShardedAval, VaryingShardedAval):
            t = _cast_varying(t, union - v, lambda p, x, a: trace.process_primitive(p, [x], {"axes": a}))
        out.append(t)
    return out


def check_vma_match(prim: Any, params: dict, avals: list) -> None:
    """With ``jax_auto_pcast`` off, in a ``check_vma`` body run eagerly: the operands of an operation that
    would have had ``pvary`` inserted must vary along the same manual axes (JAX's ``standard_vma_rule``)."""
    vmas = [getattr(a, "vma", _EMPTY) for a in avals]
    if not vmas or all(v == vmas[0] for v in vmas):
        return
    if not _NO_INSERT:
        from ftrans.core.prims import collectives as C

        _NO_INSERT.update(C.ALL)
    if prim not in _NO_INSERT and not _params_have_jaxprs(params):
        _raise_vma_mismatch(prim, vmas)


def _raise_vma_mismatch(prim: Any, vmas: list) -> None:
    raise FtransValueError(
        f"Primitive {prim.name} requires varying manual axes to match, but got {list(vmas)}. With "
        "jax_auto_pcast off no pvary is inserted: cast the operands with lax.pcast(x, axes, to='varying') "
        "first, or turn jax_auto_pcast on")


_NO_INSERT: set = set()  # the collectives (filled on first use)
_UR_CASTS = (preduced_p, vary_unreduced_cast_p, all_gather_reduced_p)  # (and a collective giving reduced sets)


def body_depth() -> int:
    """How many ``shard_map`` bodies are being traced (or run eagerly) on this thread."""
    return len(_BODY.stack)


def body_mesh() -> Mesh | None:
    """The mesh of the innermost ``shard_map`` body on this thread (None outside one): the mesh a bare
    PartitionSpec names there when no mesh is set, as JAX's body takes its mesh as the context mesh."""
    return _BODY.stack[-1] if _BODY.stack else None


def body_abstract_mesh() -> Any:
    """Inside a ``shard_map`` body: its mesh as JAX's body sees it (an AbstractMesh whose manual axes have
    type Manual); None outside."""
    if not _BODY.stack:
        return None
    from ftrans.core.sharding import AxisType

    mesh, manual = _BODY.stack[-1], _BODY.manual[-1]
    types = tuple(AxisType.Manual if n in manual else t for n, t in zip(mesh.axis_names, mesh.axis_types))
    return AbstractMesh(mesh.axis_sizes, mesh.axis_names, types)


def manual_axes_here() -> frozenset:
    """The mesh axes manual where the code now being traced runs: those of the innermost ``shard_map`` body
    being traced (an enclosing body's included); empty outside ``shard_map``."""
    return _BODY.manual[-1] if _BODY.manual else frozenset()


def _enclosing_manual(mesh: Mesh) -> set:
    """The axes of ``mesh`` an enclosing shard_map's body binds here (the same name and size, no owning trace)."""
    from ftrans.core.axis_env import axis_env

    out = set()
    for n, size in zip(mesh.axis_names, mesh.axis_sizes):
        f = axis_env.lookup(n)
        if f is not None and f.main is None and f.size == size:
            out.add(n)
    return out


def _check_not_enclosing(fname: str, what: str, spec: Any, names: tuple, enclosing: set) -> None:
    bad = sorted({a for ax in names for a in ax} & enclosing, key=str)
    if bad:
        raise FtransValueError(f"shard_map({fname}): {what} {spec!r} splits over mesh axes {bad}, which an "
                               "enclosing shard_map already made manual; a nested shard_map may split only over "
                               "the axes still automatic there")


def _linear_index(axes: tuple, mesh: Mesh) -> Any:
    from ftrans.core.prims import elementwise as E
    from ftrans.core.prims.collectives import axis_index_p

    out: Any = None
    for n in axes:
        i = axis_index_p.bind(axis_name=n)
        out = i if out is None else E.add_p.bind(E.mul_p.bind(out, _i32(mesh.shape[n])), i)
    return out


def _i32(v: int) -> Any:
    from ftrans.core.array import Array

    return Array._new(np.asarray(v, np.int32), False)


def _block(x: Any, a: Any, names: tuple, mesh: Mesh) -> Any:
    """This device's block of ``x`` (the whole value here): cut along each dimension its spec splits."""
    from ftrans.core.prims import elementwise as E
    from ftrans.core.prims import structural as S

    if not any(names):
        return x
    starts, sizes = [], []
    for n, ax in zip(a.shape, names):
        if not ax:
            starts.append(_i32(0))
            sizes.append(n)
            continue
        blk = n // int(np.prod([mesh.shape[m] for m in ax]))
        starts.append(E.mul_p.bind(_linear_index(ax, mesh), _i32(blk)))
        sizes.append(blk)
    return S.dynamic_slice_p.bind(x, *starts, slice_sizes=tuple(sizes))


def _gather(o: Any, names: tuple, invariant: bool) -> Any:
    """The whole value from every device's block ``o``: concatenated along each dimension its spec splits.
    ``invariant`` (a ``check_vma`` body, whose blocks were cast varying when cut): JAX's all_gather_invariant,
    whose transpose slices the cotangent (the cut's ``pvary`` sums it back)."""
    from ftrans.core.prims.collectives import all_gather_p

    inv = {"to": "invarying"} if invariant else {}
    for d, ax in enumerate(names):
        for n in reversed(ax):  # the last name varies fastest
            o = all_gather_p.bind(o, axis_name=(n,), axis=d, tiled=True, **inv)
    return o


# ----------------------------------------------------------------------------
# check_vma: which manual mesh axes each value of the body may vary over (JAX's varying-manual-axes types,
# inferred over the staged body instead of carried in the types).  An output whose out_specs leave out an
# axis it may vary over is an error, as in JAX: only one device's block along that axis would be kept.

_EMPTY: frozenset = frozenset()


def _vma_rules() -> dict:
    from ftrans.core.prims import collectives as C

    def names(params: dict) -> frozenset:
        n = params["axis_name"]
        return frozenset(n if isinstance(n, tuple) else (n,))

    def reduce_(ins: list, params: dict) -> frozenset:  # the result is the same on every device of the axes
        if params.get("axis_index_groups") is not None:  # only within each group: it still varies
            return frozenset().union(*ins)
        return frozenset().union(*ins) - names(params)

    def vary(ins: list, params: dict) -> frozenset:  # the result differs along the axes (JAX's pvary first)
        return frozenset().union(*ins) | names(params)

    def gather(ins: list, params: dict) -> frozenset:  # to='invarying': the same on every device of the axes
        return (frozenset().union(*ins) - names(params)) if params.get("to") == "invarying" else vary(ins, params)

    def pvary(ins: list, params: dict) -> frozenset:
        return frozenset().union(*ins) | frozenset(params["axes"])

    def psum_invariant(ins: list, params: dict) -> frozenset:
        return frozenset().union(*ins) - frozenset(params["axes"])

    def same(ins: list, params: dict) -> frozenset:  # (vary_unreduced_cast: unreduced, not the same either)
        return frozenset().union(*ins)

    return {C.preduced_p: same, C.vary_unreduced_cast_p: same, C.reduced_vary_cast_p: pvary, C.psum_p: reduce_, C.pmax_p: reduce_, C.pmin_p: reduce_, C.all_gather_p: gather,
            C.all_to_all_p: vary, C.ppermute_p: vary, C.psum_scatter_p: vary, C.axis_index_p: vary,
            C.ragged_all_to_all_p: vary, C.pvary_p: pvary, C.psum_invariant_p: psum_invariant,
            C.all_gather_reduced_p: reduce_, C.unreduced_reduce_scatter_p: vary, C.unreduced_psum_p: psum_invariant}


_VMA_RULES: dict = {}


def _vma_jaxpr(jaxpr: Any, in_sets: list, axes: frozenset) -> list:
    """The set of mesh axes in ``axes`` each output of ``jaxpr`` may vary over, given its inputs' sets
    (constants vary over none).  One pass over the equations; loops iterate their carries to a fixpoint."""
    from ftrans.core.ir import ClosedJaxpr, Literal

    if isinstance(jaxpr, ClosedJaxpr):
        jaxpr = jaxpr.jaxpr
    env: dict = dict(zip(jaxpr.invars, in_sets))

    def read(v: Any) -> frozenset:
        return _EMPTY if isinstance(v, Literal) else env.get(v, _EMPTY)

    for eqn in jaxpr.eqns:
        outs = _vma_eqn(eqn.primitive, eqn.params, [read(v) for v in eqn.invars], len(eqn.outvars), axes, eqn)
        for v, s in zip(eqn.outvars, outs):
            env[v] = s
    return [read(v) for v in jaxpr.outvars]


def _vma_eqn(prim: Any, params: dict, ins: list, n_out: int, axes: frozenset, eqn: Any = None) -> list:
    """The mesh axes (of ``axes``) each result of one equation may vary along, given its operands'."""
    from ftrans.core.prims.calls import CallPrimitive, custom_lin_p
    from ftrans.core.prims.control_flow import cond_p, scan_p, while_p

    if not _VMA_RULES:
        _VMA_RULES.update(_vma_rules())
    rule = _VMA_RULES.get(prim)
    if rule is not None:
        return [rule(ins, params) & axes] * n_out
    if prim is cond_p:
        outs = [_EMPTY] * n_out
        for br in params["branches"]:  # the index does not count, as in JAX
            outs = [a | b for a, b in zip(outs, _vma_jaxpr(br, ins[1:], axes))]
        return outs
    if prim is while_p:
        nc, nb = params["cond_nconsts"], params["body_nconsts"]
        bconsts, carry = ins[nc:nc + nb], ins[nc + nb:]
        return _vma_fixpoint(params["body_jaxpr"], bconsts, carry, [], axes)[0]
    if prim is scan_p:
        k, c = params["num_consts"], params["num_carry"]
        carry, ys = _vma_fixpoint(params["jaxpr"], ins[:k], ins[k:k + c], ins[k + c:], axes)
        return carry + ys
    if prim is custom_lin_p:  # the output tangents of a custom_vjp call: its outputs' types (JAX's)
        return [getattr(a, "vma", _EMPTY) & axes for a in params["out_avals"]]
    if prim is shard_map_p and params.get("newly_manual_axes"):  # nested in a partially manual body
        new = frozenset(params["newly_manual_axes"])
        if params.get("check_vma"):  # its results vary along the enclosing axes its body's results do
            return [(getattr(a, "vma", _EMPTY) - new) & axes for a in params["jaxpr"].out_avals]
        u = frozenset().union(*ins) if ins else _EMPTY
        return [(u - new) & axes] * n_out
    if isinstance(prim, CallPrimitive) and prim.map_params is None and _arity(prim.body(params)) \
            == (len(ins), n_out):  # a call of its body on its operands (jit, remat, custom_jvp/vjp, ...)
        return _vma_jaxpr(prim.body(params), ins, axes)
    if _has_subjaxprs(eqn) if eqn is not None else _params_have_jaxprs(params):
        return [_EMPTY] * n_out  # not understood: claim nothing, so no error can come from it
    u = frozenset().union(*ins) if ins else _EMPTY
    return [u] * n_out


def _ur_eqn(prim: Any, params: dict, avals: list, n: int, axes: frozenset) -> list:
    """Each result's unreduced and reduced manual axes in a checked body, from its operands' (JAX's ur rules:
    the collectives move axes between the sets, the other primitives follow ``core/sharding_rules.py``'s rules
    for sharding types, a call takes its body's)."""
    from ftrans.core import sharding_rules as sr
    from ftrans.core.prims import collectives as C

    us = [getattr(a, "unreduced", _EMPTY) for a in avals]
    rs = [getattr(a, "reduced", _EMPTY) for a in avals]
    if isinstance(prim, C.CollectivePrimitive):
        if prim is C.axis_index_p:
            return [(_EMPTY, _EMPTY)] * n
        names = frozenset(C.names_of(params))
        u, r = frozenset().union(*us), frozenset().union(*rs)
        for a, au, ar in zip(avals, us, rs):
            if prim is C.preduced_p and getattr(a, "vma", _EMPTY) & names:
                raise FtransValueError(
                    "preduced is a Invariant->Reduced collective. This means that the axis names mentioned in "
                    f"`axes` passed to `preduced` must not be present in `jax.typeof(inp).mat.varying`. Got "
                    f"axes={tuple(C.names_of(params))} and jax.typeof(inp).mat.varying={set(a.vma)}")
            if prim in _UR_COLLECTIVES:
                _check_ur_collective(prim, a, names, params)
                continue
            bad = [k for k, s in (("unreduced", au), ("reduced", ar)) if s & names]
            if prim in (C.psum_p, C.psum_invariant_p, C.psum_scatter_p):  # an unreduced value: its partial sums
                bad = [k for k in bad if k != "unreduced"]
            elif prim is C.reduced_vary_cast_p:  # reduced -> varying
                bad = [k for k in bad if k != "reduced"]
            elif prim is C.preduced_p or prim is C.vary_unreduced_cast_p:
                bad = [f"{k} (already)" for k in bad]
            if bad:
                op = {"psum_invariant": "psum", "psum_scatter": "reduce_scatter"}.get(prim.name, prim.name)
                raise FtransValueError(f"{op} cannot accept args which are {bad[0]}. Got {a.str_short()} and "
                                       f"axes={set(names)}")
        if prim in (C.psum_p, C.psum_invariant_p, C.psum_scatter_p, C.unreduced_psum_p, C.unreduced_reduce_scatter_p):
            u = u - names
        elif prim is C.all_gather_reduced_p:
            r = r | names
        elif prim is C.reduced_vary_cast_p:
            r = r - names
        elif prim is C.preduced_p:
            r = r | names
        elif prim is C.vary_unreduced_cast_p:
            u = u | names
        return [(u & axes, r & axes)] * n
    if _params_have_jaxprs(params):  # a call, a loop, a cond: the sets its body gives its results
        from ftrans.core.prims.calls import CallPrimitive
        from ftrans.core.prims.control_flow import cond_p, scan_p, while_p

        body = None
        if prim is cond_p:
            body = params["branches"][0]
        elif prim is scan_p:
            body = params["jaxpr"]
        elif prim is while_p:
            body = params["body_jaxpr"]
        elif isinstance(prim, CallPrimitive) and prim.map_params is None and _arity(prim.body(params)) \
                == (len(avals), n):
            body = prim.body(params)
        body_outs = list(getattr(body, "out_avals", None) or ())
        if prim is while_p or len(body_outs) != n:
            body_outs = (body_outs + [None] * n)[:n] if prim is not while_p else body_outs[-n:] if body_outs \
                else [None] * n
        return [(getattr(a, "unreduced", _EMPTY) & axes, getattr(a, "reduced", _EMPTY) & axes)
                for a in body_outs]
    rule = sr.UR_RULES.get(prim.name)
    if prim.name == "sort":  # each operand's reduced axes (JAX's), no unreduced one
        if any(us):
            raise sr._not_implemented("unreduced", prim.name)
        return [(_EMPTY, r & axes) for r in rs][:n]
    if rule is None or rule is sr._ur_under_out_sharding:
        if getattr(prim.sharding_rule, "elementwise", False) and not prim.multiple_results:
            rule = sr._ur_elementwise
        elif prim.name in sr.UR_RULES and rule is None:  # passes each operand's sets to its result
            return [(u & axes, r & axes) for u, r in zip(us, rs)][:n]
        else:  # no rule: in a fully manual body JAX gives the results no sets (it raises only over Explicit axes)
            return [(_EMPTY, _EMPTY)] * n
    with sr.in_body(axes):
        u, r = rule(prim.name, _BODY.stack[-1] if _BODY.stack else None, (), *avals, **params)
    return [(frozenset(u) & axes, frozenset(r) & axes)] * n


_UR_COLLECTIVES = (all_gather_reduced_p, unreduced_reduce_scatter_p, unreduced_psum_p)


def _check_ur_collective(prim: Any, a: Any, names: frozenset, params: dict) -> None:
    """JAX's checks of the operand of a collective between the reduced/unreduced types: ``all_gather_reduced``
    takes a value varying along (some of) its axes and reduced along none, ``unreduced_reduce_scatter`` and
    ``unreduced_psum`` one unreduced along (some of) them and varying along none."""
    axes = tuple(params["axis_name"] if "axis_name" in params else params["axes"])
    vma, u, r = (frozenset(getattr(a, k, None) or _EMPTY) for k in ("vma", "unreduced", "reduced"))
    if prim is all_gather_reduced_p:
        op, frm, to, have, bad, badk = "all_gather_reduced", "Varying", "Reduced", ("varying", vma), r, "reduced"
    else:
        op = "unreduced_psum" if prim is unreduced_psum_p else "unreduced_psum_scatter"
        frm, to, have, bad, badk = "Unreduced", "Invariant" if op == "unreduced_psum" else "Varying", \
            ("unreduced", u), vma, "varying"
    k, s = have
    if not s:
        raise FtransValueError(f"{op} only accepts inputs that are {k}. Got {a.str_short()}")
    if not s & names:
        raise FtransValueError(
            f"{op} is a {frm} -> {to} collective. This means that the axis_name={axes} passed to `{op}` must be "
            f"present in jax.typeof(x).mat.{k}={set(s) or '{}'} (operand {a.str_short()})")
    if bad & names:
        raise FtransValueError(f"{op}'s input cannot be {badk} across the axis_name provided. Got "
                               f"x={a.str_short()} and axis_name={axes}")


def _params_have_jaxprs(params: dict) -> bool:
    from ftrans.core.ir import ClosedJaxpr, Jaxpr

    def has(v: Any) -> bool:
        if isinstance(v, (Jaxpr, ClosedJaxpr)):
            return True
        return isinstance(v, (tuple, list)) and any(has(x) for x in v)

    return any(has(v) for v in params.values())


def _arity(body: Any) -> tuple:
    from ftrans.core.ir import ClosedJaxpr, Jaxpr

    if isinstance(body, ClosedJaxpr):
        body = body.jaxpr
    return (len(body.invars), len(body.outvars)) if isinstance(body, Jaxpr) else (-1, -1)


def _has_subjaxprs(eqn: Any) -> bool:
    from ftrans.core.ir import subjaxpr_params

    return bool(subjaxpr_params(eqn))


def _vma_fixpoint(body: Any, consts: list, carry: list, xs: list, axes: frozenset) -> tuple[list, list]:
    """A loop body ``consts + carry + xs -> carry + ys``: the carries' sets grow until the body keeps them."""
    n = len(carry)
    while True:
        outs = _vma_jaxpr(body, consts + carry + xs, axes)
        new = [a | b for a, b in zip(carry, outs[:n])]
        if new == carry:
            return carry, outs[n:]
        carry = new


def _unreduced_in(x: Any) -> bool:
    """Whether an argument's sharding type is unreduced or reduced over some mesh axes."""
    from ftrans.core.sharding_rules import array_aval

    try:
        spec = getattr(getattr(array_aval(x) if not isinstance(x, Tracer) else x.aval, "typed_sharding", None), "spec",
                       None)
    except TypeError:
        return False
    return bool(getattr(spec, "unreduced", None) or getattr(spec, "reduced", None))


def _check_out_vma(fname: str, mesh: Mesh, manual: Any, closed: Any, in_names: list, out_specs: list,
                   out_names: list, out_vma: Any = None, check_ur: bool = False) -> None:
    axes = frozenset(manual) - size_one_axes(mesh)  # (JAX's jax_remove_size_one_mesh_axis_from_type)
    in_sets = [frozenset(a for ax in ns for a in ax) & axes for ns in in_names]
    got = _vma_jaxpr(closed.jaxpr, in_sets, axes)  # its constvars (closed-over values) vary over nothing
    # and what the results' types say (a pcast(to='varying') or a zeros_like of a varying value)
    got = [g | (t & axes) for g, t in zip(got, out_vma or [_EMPTY] * len(got))]
    _raise_out_vma(fname, mesh, out_specs, out_names, got, closed.out_avals, check_ur)


def _raise_out_vma(fname: str, mesh: Mesh, out_specs: list, out_names: list, got: list, out_avals: list,
                   check_ur: bool = False) -> None:
    """Raise JAX's error for each result whose out_specs leave out a manual axis it varies along (``got``)."""
    order = {a: i for i, a in enumerate(mesh.axis_names)}
    fails = []
    for k, (s, ns, g, a) in enumerate(zip(out_specs, out_names, got, out_avals)):
        ur = frozenset(getattr(s, "unreduced", ()))
        if check_ur and ur and not g & ur:  # JAX casts a result to its out_specs' unreduced axes (varying -> unreduced)
            raise FtransValueError(
                "vary_unreduced_cast is a Varying->Unreduced collective. This means that the axis names mentioned "
                "in `axes` passed to `vary_unreduced_cast` must be present in `jax.typeof(x).mat.varying`. Got "
                f"axes={tuple(sorted(ur, key=str))} and jax.typeof(x).mat.varying={set(g) or '{}'} (shard_map("
                f"{fname}) output {k} of type {a.str_short()}, out_specs {s!r})")
        # (a result varying along an unreduced axis: partial sums; one reduced along a reduced axis)
        mentioned = {x for ax in ns for x in ax} | ur | frozenset(getattr(s, "reduced", ()))
        bad = sorted(g - mentioned, key=order.__getitem__)
        if bad:
            unmentioned = [x for x in mesh.axis_names if x not in mentioned]
            if len(unmentioned) > 1:
                def braces(axes: Any) -> str:
                    return "{" + ",".join(str(x) for x in sorted(axes, key=order.__getitem__)) + "}"

                fails.append(
                    f"* output {k} (of type {a.str_short()}): its out_specs is {s!r} which implies that the "
                    f"corresponding output value is only varying across mesh axes {braces(mentioned)} and not "
                    f"{braces(bad)}, but it was inferred to be possibly varying over {braces(g)}")
            else:
                fails.append(
                    f"* output {k} (of type {a.str_short()}): its out_specs is {s!r} which implies that the "
                    f"corresponding output value is replicated across mesh axis {unmentioned[0]!r}, but it was "
                    f"inferred to be possibly varying over it (could not infer replication over any axes)")
    if fails:
        raise FtransValueError(
            f"shard_map({fname}) was given out_specs which require replication which can't be statically "
            f"inferred given the mesh (axes {mesh.axis_names} of sizes {tuple(mesh.axis_sizes)}):\n"
            + "\n".join(fails)
            + "\nIf these outputs differ along those axes, mention the axes in their out_specs (the blocks are "
            "then put together along them); if they are meant to be the same, reduce them over those axes "
            "(lax.psum / lax.pmean / lax.pmax ...); if they are the same but that cannot be inferred, pass "
            "check_vma=False to shard_map.")


def _concrete_mesh(fname: str, abstract: AbstractMesh, leaves: list) -> Mesh:
    """The devices a shard_map over an ``AbstractMesh`` runs on: as JAX's, those of the mesh its arguments are
    laid out over (a ``NamedSharding``; each must match the abstract mesh's shape); else, under a transform,
    the current mesh or the default devices; called on concrete arrays none of which has one: an error."""
    from ftrans.core.sharding import NamedSharding

    found = None
    for x in leaves:
        if isinstance(x, Tracer):
            continue
        sh = getattr(x, "sharding", None)
        m = getattr(sh, "mesh", None) if isinstance(sh, NamedSharding) else None
        if isinstance(m, Mesh) and m.size > 1:
            if (m.axis_names, m.axis_sizes) != (abstract.axis_names, abstract.axis_sizes):
                raise FtransValueError(
                    f"shard_map({fname}): Mesh shape of the input {m.shape_tuple} does not match the mesh shape "
                    f"passed to shard_map {abstract.shape_tuple} (for an argument of type "
                    f"{aval_of(x).str_short()}); lay the argument out over a mesh of that shape")
            found = found or m
    if found is not None:
        return found
    cur = get_mesh()
    if cur is not None and (cur.axis_names, cur.axis_sizes) == (abstract.axis_names, abstract.axis_sizes):
        return cur
    from ftrans.core.sharding import args_meshes

    arg = (args_meshes() or [None])[-1]  # under a jit: its arguments' mesh, as JAX takes the devices from them
    if isinstance(arg, Mesh) and (arg.axis_names, arg.axis_sizes) == (abstract.axis_names, abstract.axis_sizes):
        return arg
    if _trace.is_eager() and not any(isinstance(x, Tracer) for x in leaves):
        raise FtransValueError(
            f"shard_map({fname}) over {abstract!r}, which has no devices: Please pass `jax.Array`s with a "
            "`NamedSharding` as input to `shard_map` when passing `AbstractMesh` to the mesh argument (ftrans "
            "Arrays device_put with a NamedSharding over a mesh of that shape), or pass the Mesh itself")
    from ftrans.devices import devices

    n = int(np.prod(abstract.axis_sizes))
    return Mesh(np.array(devices()[:n], dtype=object).reshape(abstract.axis_sizes), abstract.axis_names,
                axis_types=abstract.axis_types)


def _check_inferable(fname: str, mesh: Mesh, manual: Any, smap_axis: Any) -> None:
    """in_specs can be inferred (JAX's Infer) only when every manual axis is Explicit: JAX's TypeError else."""
    from ftrans.core.sharding import AxisType

    types = dict(zip(mesh.axis_names, mesh.axis_types))
    if all(types.get(a) == AxisType.Explicit for a in manual):
        return
    kinds = ", ".join(str(types.get(a)) for a in sorted(manual, key=str))
    if smap_axis is not None:
        raise FtransTypeError(f"smap({fname}): in_axes was not specified when axis_name={set(manual)} was of type "
                              f"{kinds}; in_axes can be inferred from the arguments' sharding types only over an "
                              "Explicit mesh axis: pass in_axes=")
    raise FtransTypeError(
        f"shard_map({fname}): shard_map in_specs argument must be a pytree of `jax.sharding.PartitionSpec` "
        f"instances, but it was `None` when axis_names={set(manual)} are of type {kinds}: in_specs can be "
        "inferred from the arguments' sharding types only when every manual axis is Explicit; pass in_specs=")


def _inferred_spec(fname: str, k: int, x: Any, mesh: Mesh, manual: Any = frozenset()) -> PartitionSpec:
    """The in_spec of argument leaf ``k`` when in_specs is not given: the spec of its sharding type, over the
    manual axes (an argument laid out over no mesh is the same on every device: ``P()``)."""
    from ftrans.core.sharding_rules import array_aval

    try:
        sh = array_aval(x).typed_sharding
    except TypeError:
        sh = None
    if sh is None:
        return PartitionSpec()
    if (sh.mesh.axis_names, sh.mesh.axis_sizes) != (mesh.axis_names, mesh.axis_sizes):
        raise FtransValueError(f"shard_map({fname}): argument leaf {k} is laid out over {sh.mesh!r}, not the "
                               f"shard_map's mesh {mesh!r}; pass in_specs= or reshard it")
    if not manual:
        return sh.spec
    keep = []
    for e in sh.spec:
        names = () if e is None else (e,) if isinstance(e, str) else tuple(e)
        names = tuple(n for n in names if n in manual)
        keep.append(None if not names else names[0] if len(names) == 1 else names)
    return PartitionSpec(*keep)


def shard_map(f: Callable | None = None, /, *, out_specs: Any, in_specs: Any = Infer, mesh: Mesh | None = None,
              axis_names: Any = frozenset(), check_vma: bool = True, check_rep: bool | None = None) -> Any:
    """JAX's ``shard_map``: ``f`` is the per-device program over ``mesh``'s blocks (see the module docstring).

    ``in_specs`` left out (``Infer``) takes each argument's spec from its sharding type; a ``None`` in
    ``in_specs`` (or ``in_specs=None``) marks those arguments static: they reach ``f`` as they are, untraced.
    """
    if check_rep is not None:
        check_vma = check_rep
    if f is None:
        return functools.partial(shard_map, out_specs=out_specs, in_specs=in_specs, mesh=mesh,
                                 axis_names=axis_names, check_vma=check_vma)
    if not callable(f):
        raise FtransTypeError(f"shard_map: expected a function, got {type(f).__name__}")
    return _ShardMapped(f, mesh, in_specs, out_specs, check_vma, frozenset(axis_names))


def experimental_shard_map(f: Callable, mesh: Mesh, in_specs: Any, out_specs: Any, check_rep: bool = True) -> Any:
    """``jax.experimental.shard_map.shard_map``'s positional signature."""
    return shard_map(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs, check_vma=check_rep)




def _axis_spec(axis_name: Any, axis: int | None) -> PartitionSpec:
    return PartitionSpec() if axis is None else PartitionSpec(*([None] * axis), axis_name)


def smap(f: Callable | None = None, /, *, in_axes: Any = _INFER, out_axes: Any, axis_name: Any) -> Any:
    """JAX's ``smap``: ``shard_map`` over the one mesh axis ``axis_name`` of the current mesh, with the
    arguments split along ``in_axes`` and the results put together along ``out_axes`` (``None``: unsplit,
    the same on every device).  The other mesh axes are not split over (every device along them sees the
    same blocks)."""
    if isinstance(axis_name, (list, tuple)):
        raise FtransTypeError(f"smap: axis_name must be a single mesh axis name (a str or other hashable), "
                              f"got {axis_name!r}")
    if in_axes is not None and in_axes is not _INFER and not isinstance(in_axes, (int, tuple)):
        raise FtransTypeError(f"smap: in_axes must be an int, None, or a tuple with one entry per positional "
                              f"argument, got {in_axes!r}")
    for what, axes in (("in_axes", None if in_axes is _INFER else in_axes), ("out_axes", out_axes)):
        leaves = tree_util.tree_leaves(axes)
        if not all(isinstance(a, int) and not isinstance(a, bool) and a >= 0 for a in leaves):
            raise FtransTypeError(f"smap: {what} must be a non-negative int, None, or a (nested) container of "
                                  f"those, got {axes!r}")
    if f is None:
        return functools.partial(smap, in_axes=in_axes, out_axes=out_axes, axis_name=axis_name)
    to_spec = functools.partial(_axis_spec, axis_name)
    in_specs = _INFER if in_axes is _INFER else tree_util.tree_map(to_spec, in_axes, is_leaf=lambda x: x is None)
    out_specs = tree_util.tree_map(to_spec, out_axes, is_leaf=lambda x: x is None)
    out = shard_map(f, in_specs=in_specs, out_specs=out_specs, axis_names={axis_name})
    out._smap_axis = axis_name
    return out
