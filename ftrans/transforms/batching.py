"""``vmap``: the batching trace, its rule table, named axes, and the public API.

A ``BatchTracer`` holds a value of the level below and the position of its
batch dimension (``bdim``), or ``not_mapped`` when the value is the same for
every batch element.  Each primitive applied to batch tracers runs its rule
from ``batching_rules``:

    rule(vals, dims, **params) -> (out, out_dim)      (lists for multiple results)

``vals`` are values of the level below, ``dims`` their batch dimensions (an
int or ``not_mapped``).  Rules move batch dimensions only when the primitive
needs it: elementwise rules keep a shared batch dimension where it is, and a
rule may return its output batched along any dimension.

``vmap(..., axis_name=...)`` also pushes the name on the *axis environment*
(``axis_env`` in ``ftrans/core/axis_env.py``), which collectives (``psum`` and
friends) consult to check their axis names and learn sizes.  When the name is
this trace's, the collective reaches ``BatchTrace.process_collective``, which
applies its batching rule (``batch_rules/collectives.py``).
"""

from __future__ import annotations

import reprlib
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ftrans.core import jaxpr_api as _jaxpr_api
from ftrans.core import key_reuse as _kr
from ftrans.core import pytrees as tree_util
from ftrans.core import ref as _ref_mod
from ftrans.core import traceback_util as _tb
from ftrans.core.array import jax_array_argument, jax_array_argument_error
from ftrans.core.avals import ShapedArray, VaryingAval
from ftrans.core.axis_env import AxisFrame, axis_env, extend_axis_env
from ftrans.core.config import config as _config
from ftrans.core.keys import is_key
from ftrans.core.primitive import Primitive, not_supported, rule_table
from ftrans.core.strings import StringArray
from ftrans.core.trace import (
    Trace,
    Tracer,
    aval_of,
    check_outputs,
    find_top_trace,
    invalid_value_error,
    is_jax_value,
    long_type_str,
    new_main,
    transform_name_stack,
)
from ftrans.core.wrapping import fun_name, wraps
from ftrans.errors import FtransTypeError, FtransValueError
from ftrans.tree_util import _mismatch_details

__all__ = [
    "vmap", "batching_rules", "register_batching", "not_mapped", "BatchTrace", "BatchTracer", "moveaxis",
    "bdim_at_front", "broadcast_batch", "axis_env", "AxisFrame", "batch_jaxpr",
]

batching_rules: dict[Primitive, Callable[..., Any]] = rule_table("batching", owner=__name__)


class _NotMapped:
    """The batch dimension of a value that does not vary over the batch."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "not_mapped"


not_mapped = _NotMapped()


def register_batching(prim: Primitive) -> Callable[[Callable], Callable]:
    def deco(rule: Callable) -> Callable:
        batching_rules[prim] = rule
        return rule

    return deco


# ----------------------------------------------------------------------------
# Named axes


# ``AxisFrame``, ``axis_env`` and ``extend_axis_env`` live in ``ftrans/core/axis_env.py`` (collectives in core
# consult them); they are re-exported here for the rules and tests that reach them through batching.


# ----------------------------------------------------------------------------
# Helpers for rules


def moveaxis(x: Any, src: int, dst: int) -> Any:
    """``x`` with dimension ``src`` moved to ``dst`` (a transpose, or ``x`` itself)."""
    from ftrans.core.prims import structural as S

    if src == dst:
        return x
    nd = len(aval_of(x).shape)
    perm = [d for d in range(nd) if d != src]
    perm.insert(dst, src)
    return S.transpose_p.bind(x, permutation=tuple(perm))


def bdim_at_front(x: Any, d: Any, size: int) -> Any:
    """``x`` with its batch dimension first; an unmapped ``x`` is broadcast along a new leading axis."""
    from ftrans.core.prims import structural as S

    if d is not_mapped:
        shape = tuple(aval_of(x).shape)
        return S.broadcast_in_dim_p.bind(x, shape=(size,) + shape, broadcast_dimensions=tuple(range(1, len(shape) + 1)))
    return moveaxis(x, d, 0)


def broadcast_batch(x: Any, size: int, axis: int) -> Any:
    """An unmapped ``x`` given a batch dimension of ``size`` at ``axis``."""
    from ftrans.core.prims import structural as S

    shape = list(aval_of(x).shape)
    dims = tuple(i if i < axis else i + 1 for i in range(len(shape)))
    shape.insert(axis, size)
    return S.broadcast_in_dim_p.bind(x, shape=tuple(shape), broadcast_dimensions=dims)


# ----------------------------------------------------------------------------
# The trace


class BatchTracer(Tracer):
    """A batch of values: ``val`` (of the level below) with its batch dimension ``bdim``."""

    __slots__ = ("val", "bdim")

    def __init__(self, trace: Trace, val: Any, bdim: Any):
        self._trace = trace
        self.val = val
        self.bdim = bdim

    def _origin_msg(self) -> str:
        """JAX's account of a batched value in a concretization error: the user's line that called the
        vmapped function (found, only when the error is raised, from the frame running this trace)."""
        from ftrans.core.leaks import user_line

        main = self._trace.main
        f = sys._getframe(1)
        while f is not None and not (f.f_code.co_filename == __file__ and f.f_locals.get("main") is main):
            f = f.f_back
        if f is None:
            return ""
        return f"\nThis BatchTracer with object id {id(self)} was created on line:\n  {user_line(f)}"

    @property
    def aval(self) -> ShapedArray:
        a = aval_of(self.val)
        if self.bdim is not_mapped:
            return a
        shape = a.shape[:self.bdim] + a.shape[self.bdim + 1:]
        sh = a.typed_sharding if a.typed_sharding is not None else _explicit_type(self.val)
        if sh is not None:  # a value with a sharding type: each example's type drops the mapped dimension's entry
            from ftrans.core.sharding_rules import spec_of, typed

            spec = spec_of(a) if a.typed_sharding is not None else tuple(sh.spec)
            return typed(ShapedArray(shape, a.dtype, a.weak_type), sh.mesh, spec[:self.bdim] + spec[self.bdim + 1:])
        if type(a) is VaryingAval:  # inside a shard_map body: each example varies as the batch does
            return VaryingAval(ShapedArray(shape, a.dtype, a.weak_type), a.vma)
        return ShapedArray(shape, a.dtype, a.weak_type)

    def _short_repr(self) -> str:
        return f"VmapTracer(aval={long_type_str(self.aval)}, batched={long_type_str(aval_of(self.val))})"

    def full_lower(self) -> Any:
        """The value itself when it is not batched (what a ref outside this vmap may hold)."""
        return self.val if self.bdim is not_mapped else self


def _mapped_axis_spec(ops: list, dims: list) -> tuple | None:
    """The mesh axes (over Explicit axes) the mapped dimension of every mapped argument is split over: they
    must agree, as JAX's vmap requires. None when unsplit."""
    out, seen = None, False
    for x, d in zip(ops, dims):
        if d is not_mapped:
            continue
        sh = aval_of(x).typed_sharding if isinstance(x, Tracer) else _explicit_type(x)
        e = tuple(sh.spec)[d] if sh is not None and d < len(sh.spec) else None
        e = None if e is None else (e if isinstance(e, tuple) else (e,))
        if seen and e != out:
            raise FtransValueError(
                "vmap: Mapped away dimension of inputs passed to vmap should be sharded the same. Got inconsistent "
                f"axis specs: {out} vs {e}; reshard the arguments so their mapped dimensions are split alike")
        out, seen = e, True
    return out


def _check_unmapped_unsplit(ops: list, dims: list, mapped: tuple) -> None:
    """An unmapped argument may not be split over the Explicit mesh axes the mapped dimension is (JAX's check:
    each example would see only a part of it)."""
    for x, d in zip(ops, dims):
        if d is not not_mapped:
            continue
        sh = x.aval.typed_sharding if isinstance(x, Tracer) else _explicit_type(x)
        if sh is None:
            continue
        used = {a for e in sh.spec if e is not None for a in ((e,) if isinstance(e, str) else e)}
        if used & set(mapped):
            from ftrans.core.sharding_rules import array_aval

            shown = (x.aval if isinstance(x, Tracer) else array_aval(x)).str_short()
            raise FtransValueError(
                "Unmapped values passed to vmap cannot be sharded along the mesh axis you are vmapping over. Got "
                f"type: {shown}, in_axes: None and vmapped mesh axis: {mapped}; reshard the unmapped argument "
                "so it is not split over those axes")


def _explicit_type(val: Any) -> Any:
    """The sharding type of a concrete array laid out over Explicit mesh axes (None otherwise)."""
    from ftrans.core.array import ShardedArray

    if type(val) is not ShardedArray:
        return None
    from ftrans.core.sharding_rules import array_aval

    return array_aval(val).typed_sharding


def _axis_names_used(jaxpr: Any, out: set) -> None:
    from ftrans.core.ir import ClosedJaxpr, subjaxprs
    from ftrans.core.prims.collectives import CollectivePrimitive, names_of

    j = jaxpr.jaxpr if isinstance(jaxpr, ClosedJaxpr) else jaxpr
    for eqn in j.eqns:
        if isinstance(eqn.primitive, CollectivePrimitive):
            out.update(names_of(eqn.params))
        for sub in subjaxprs(eqn):
            _axis_names_used(sub, out)


def to_axis_owner(bodies: Sequence[Any], args: list) -> list:
    """``args`` raised into the trace owning a named axis the bodies' collectives use, when that trace is
    above every operand's (under ``vmap(..., axis_name=...)`` a loop or a jitted call whose operands are all
    unbatched but whose body reads ``axis_index``): the primitive then reaches that trace (which batches it,
    see ``BatchTrace._body_uses_axis``), as the collective alone would."""
    if not any(f.name is not None for f in axis_env.frames):  # no named axis for a body to read
        return args
    names: set = set()
    for b in bodies:
        _axis_names_used(b, names)
    top = find_top_trace(args).main
    owner = top
    for n in names:
        f = axis_env.lookup(n)
        m = f.main if f is not None else None
        if m is not None and m.alive and m.level > owner.level:
            owner = m
    if owner is top:
        return args
    return [owner.trace.full_raise(a) for a in args]


_jaxpr_api.to_axis_owner = to_axis_owner


class BatchTrace(Trace):
    """Interprets each primitive by its batching rule; ``main.payload`` is the AxisFrame."""

    __slots__ = ()
    outer_refs_read_only = True  # a ref made outside the vmap cannot be written inside it (core/ref.py)

    def pure(self, val: Any) -> BatchTracer:
        return BatchTracer(self, val, not_mapped)

    lift = pure

    @property
    def axis(self) -> AxisFrame:
        return self.main.payload

    def process_primitive(self, prim: Primitive, tracers: list, params: dict) -> Any:
        vals = [t.val for t in tracers]
        dims = [t.bdim for t in tracers]
        if all(d is not_mapped for d in dims) and not (prim.higher_order and self.axis.name is not None
                                                       and self._body_uses_axis(params)):
            return prim.bind(*vals, **params)
        rule = batching_rules.get(prim)
        if rule is None:
            reason = not_supported.get((prim, "batching"))
            raise NotImplementedError(
                f"vmap of `{prim.name}` is not supported" + (f": {reason}" if reason else "")
            )
        out, out_dim = rule(vals, dims, frame=self.axis, **params)
        if prim.multiple_results:
            return [BatchTracer(self, o, d) for o, d in zip(out, out_dim)]
        return BatchTracer(self, out, out_dim)

    def _body_uses_axis(self, params: dict) -> bool:
        """Whether a body in ``params`` holds a collective over this trace's axis: then the primitive is
        batched even with no batched operand (``axis_index`` in a loop condition makes it per-element)."""
        from ftrans.core.ir import ClosedJaxpr, Jaxpr
        from ftrans.core.prims.collectives import CollectivePrimitive, names_of

        def uses(j: Any) -> bool:
            j = j.jaxpr if isinstance(j, ClosedJaxpr) else j
            for eqn in j.eqns:
                if isinstance(eqn.primitive, CollectivePrimitive) and any(
                        (f := axis_env.lookup(n)) is not None and f.main is self.main for n in names_of(eqn.params)):
                    return True
                if eqn.primitive.higher_order and self._body_uses_axis(eqn.params):
                    return True
            return False

        for v in params.values():
            if isinstance(v, (ClosedJaxpr, Jaxpr)):
                if uses(v):
                    return True
            elif isinstance(v, (tuple, list)) and v and isinstance(v[0], (ClosedJaxpr, Jaxpr)):
                if any(uses(b) for b in v):
                    return True
        return False

    def process_collective(self, prim: Primitive, args: Sequence[Any], params: dict) -> Any:
        """A collective over this trace's own axis: its batching rule computes it here, even when no operand
        is batched (``psum(1.0, 'i')``, ``axis_index('i')``); values of enclosing levels are the same for every
        element of the axis."""
        vals, dims = [], []
        for a in args:
            if isinstance(a, BatchTracer) and a._trace.main is self.main:
                vals.append(a.val)
                dims.append(a.bdim)
            else:
                vals.append(a)
                dims.append(not_mapped)
        out, out_dim = batching_rules[prim](vals, dims, frame=self.axis, **params)
        return BatchTracer(self, out, out_dim)


# ----------------------------------------------------------------------------
# Batching a jaxpr (for jit_call and other call-like primitives)


def run_batched(fun: Callable, args: Sequence[Any], dims: Sequence[Any], axis: AxisFrame,
                force_front: bool = False, lift_unmapped: bool = False, reuse: bool = False) -> tuple[list, list]:
    """Run ``fun`` (flat list -> flat list) on batched values under a new batch trace for ``axis``.

    Returns the outputs' values and batch dimensions (all 0 with ``force_front``;
    unmapped outputs are then broadcast).  Symbolic zero tangents pass through.

    ``reuse``: while the batch trace that owns ``axis`` is still running (a batching rule's own rule
    functions called during that ``vmap``), run ``fun`` under that same trace instead of a new one, as JAX
    does: a user's rule that closes over that ``vmap``'s batched values then sees them as its own.
    """
    owner = axis.main
    if (reuse and owner is not None and owner.alive and getattr(owner, "trace_type", None) is BatchTrace
            and not any(isinstance(a, Tracer) and a._trace.main.level >= owner.level for a in args)):
        return _run_in(owner, fun, args, dims, force_front, lift_unmapped)
    frame = AxisFrame(axis.name, axis.size, None, axis.spmd_name, getattr(axis, "explicit", None))
    try:
        with new_main(BatchTrace, frame) as main:
            frame.main = main
            with extend_axis_env(axis.name, frame.size, main, frame.explicit):
                return _run_in(main, fun, args, dims, force_front, lift_unmapped)
    finally:
        frame.main = None  # the frame and its MainTrace refer to each other: no cycle outlives the vmap


def _run_in(main: Any, fun: Callable, args: Sequence[Any], dims: Sequence[Any], force_front: bool,
            lift_unmapped: bool) -> tuple[list, list]:
    from ftrans.transforms.ad import Zero

    frame = main.payload
    trace = main.trace
    ins = []
    for a, d in zip(args, dims):
        if type(a) is Zero:
            # A zero is the same for every batch element: inside, it has the unbatched type (so that a rule
            # that instantiates it gets zeros of one element's shape).
            ins.append(a if d is not_mapped else Zero(_unbatched_aval(a.aval, d)))
        elif d is not_mapped and not lift_unmapped:
            ins.append(a)
        else:  # ``lift_unmapped``: unbatched inputs too, so a body reading the axis reaches this trace
            ins.append(BatchTracer(trace, a, d))
    outs = fun(*ins)
    res, odims = [], []
    for o in outs:
        if isinstance(o, BatchTracer) and o._trace.main is main and o.bdim is not not_mapped:
            v, d = o.val, o.bdim
        else:
            v, d = (o.val if isinstance(o, BatchTracer) and o._trace.main is main else o), not_mapped
        if force_front:
            if type(v) is Zero:
                v = Zero(_batched_aval(v.aval, 0, frame.size))  # the caller expects every output batched at 0
            else:
                v = bdim_at_front(v, d, frame.size)
            d = 0
        res.append(v)
        odims.append(d)
    return res, odims


def _unbatched_aval(aval: ShapedArray, d: int) -> ShapedArray:
    return ShapedArray(aval.shape[:d] + aval.shape[d + 1:], aval.dtype, aval.weak_type)


def _batched_aval(aval: ShapedArray, d: int, size: int) -> ShapedArray:
    return ShapedArray(aval.shape[:d] + (size,) + aval.shape[d:], aval.dtype, aval.weak_type)


def batch_jaxpr(closed: Any, dims: Sequence[Any], axis: AxisFrame, force_front: bool = False) -> tuple[Any, list]:
    """A jaxpr computing ``closed`` on batched inputs (batch dims ``dims``), and its outputs' batch dims.

    Batched inputs keep their shapes with the batch dimension at ``dims[i]``;
    outputs come out batched at the returned dimensions (or unmapped), or all
    batched at dimension 0 with ``force_front``.
    """
    from ftrans.core.jaxpr_api import eval_jaxpr
    from ftrans.core.trace import stage

    in_avals = []
    for a, d in zip(closed.in_avals, dims):
        if d is not_mapped:
            in_avals.append(a)
        else:
            shape = list(a.shape)
            shape.insert(d, axis.size)
            in_avals.append(ShapedArray(tuple(shape), a.dtype, a.weak_type))
    out_dims_box: list = []

    def fun(*args: Any) -> list:
        # Under a named axis, unbatched inputs enter the batch trace too: an equation whose body reads the axis
        # (a loop on unbatched operands whose condition calls axis_index) must reach its batching rule.
        res, odims = run_batched(lambda *ins: eval_jaxpr(closed.jaxpr, list(closed.consts), *ins), args, dims,
                                 axis, force_front, lift_unmapped=axis.name is not None)
        out_dims_box.append(odims)
        return res

    new, _ = stage(fun, in_avals)
    return new, out_dims_box[0]


# ----------------------------------------------------------------------------
# The public API


class _Spread:
    """One axis-spec leaf and the number of value leaves it covers (an opaque pytree leaf)."""

    __slots__ = ("axis", "count")

    def __init__(self, axis: Any, count: int):
        self.axis = axis
        self.count = count


def _axis_entry(what: str, ax: Any, owner: str = "vmap") -> Any:
    """An axis-spec leaf: an int or None (bools, numpy integers and other types are rejected, as in JAX)."""
    if ax is not None and type(ax) is not int:
        raise FtransTypeError(f"{owner.split('(')[0]} {what} entries must be ints or None, got {ax!r}")
    return ax


def flatten_axes(what: str, spec: Any, tree_arg: Any, n_leaves: int, owner: str = "vmap", at: str = "") -> list:
    """Broadcast an axis spec (a pytree prefix of ``tree_arg`` with int/None leaves) to its leaves.

    Shared by ``vmap`` and ``pmap``; ``owner`` names the transform in the errors (``"pmap(f)"``), ``at`` the
    spec's place in the whole ``in_axes`` (``"[1]"``).
    A negative axis of a typed key array counts its key axes (not the trailing key-data axes of its leaf).
    """
    return _key_data_axes(tree_arg, _flatten_axes(what, spec, tree_arg, n_leaves, owner, at))


def _key_data_axes(tree_arg: Any, axes: list) -> list:
    """``axes`` (one per leaf of ``tree_arg``) with each negative axis of a key array's data leaf moved
    past the data's trailing key-data axes."""
    if not any(type(a) is int and a < 0 for a in axes):
        return axes
    items = tree_util.tree_leaves(tree_arg, is_leaf=is_key)
    if len(items) != len(axes) or not any(is_key(x) for x in items):
        return axes
    return [a - len(x._impl.key_shape) if is_key(x) and type(a) is int and a < 0 else a
            for a, x in zip(axes, items)]


def _flatten_axes(what: str, spec: Any, tree_arg: Any, n_leaves: int, owner: str = "vmap", at: str = "") -> list:
    if spec is None or type(spec) is int:
        return [spec] * n_leaves
    for ax in tree_util.tree_leaves(spec):
        _axis_entry(what, ax, owner)
    try:
        nested = tree_util.tree_map(lambda ax, sub: _Spread(ax, len(tree_util.tree_leaves(sub))), spec, tree_arg,
                                    is_leaf=lambda x: x is None)
    except (ValueError, TypeError):
        raise FtransValueError(
            f"{owner} {what} specification must be a tree prefix of the corresponding value; got specification "
            f"{spec!r} for value tree {tree_util.tree_structure(tree_arg)}."
            + _mismatch_details(spec, tree_arg, f"{owner.split('(')[0]} {what}{at}", lambda x: x is None)
        ) from None
    out = []
    for leaf in tree_util.tree_leaves(nested):
        out.extend([_axis_entry(what, leaf.axis, owner)] * leaf.count)
    return out


def _in_dims(in_axes: Any, args: tuple, kwargs: dict) -> list:
    if in_axes is None or type(in_axes) is int:
        per_arg = [in_axes] * len(args)
    elif isinstance(in_axes, tuple):
        if len(in_axes) != len(args):
            raise FtransValueError(
                f"vmap in_axes must be an int, None, or a tuple of entries corresponding to the positional "
                f"arguments passed to the function, but got len(in_axes)={len(in_axes)}, len(args)={len(args)}"
            )
        per_arg = list(in_axes)
    else:
        raise FtransTypeError(
            f"vmap in_axes must be an int, None, or a tuple of entries corresponding to the positional "
            f"arguments passed to the function, but got {in_axes!r}"
        )
    dims: list = []
    for i, (spec, a) in enumerate(zip(per_arg, args)):
        at = f"[{i}]" if isinstance(in_axes, tuple) else ""
        dims.extend(flatten_axes("in_axes", spec, a, len(tree_util.tree_leaves(a)), at=at))
    dims.extend([0] * len(tree_util.tree_leaves(kwargs)))  # keyword arguments map over axis 0, as in JAX
    return dims


def _spmd_names(spmd_axis_name: Any) -> tuple | None:
    """``spmd_axis_name`` as a tuple of mesh axis names (JAX takes one name or a tuple of them)."""
    if spmd_axis_name is None:
        return None
    names = tuple(spmd_axis_name) if isinstance(spmd_axis_name, (tuple, list)) else (spmd_axis_name,)
    for n in names:
        if not isinstance(n, str):
            raise FtransTypeError(f"vmap spmd_axis_name must be a mesh axis name (a str) or a tuple of them, "
                                  f"got {spmd_axis_name!r}")
    return names


def vmap(fun: Callable, in_axes: Any = 0, out_axes: Any = 0, axis_name: Any = None, axis_size: int | None = None,
         spmd_axis_name: Any = None) -> Callable:
    """JAX's ``vmap``: map ``fun`` over axes of its arguments, with batching rules instead of a loop."""
    if not callable(fun):
        raise FtransTypeError(f"vmap: expected a function, got {type(fun).__name__}")
    spmd_name = _spmd_names(spmd_axis_name)
    if isinstance(in_axes, list):
        in_axes = tuple(in_axes)  # as in JAX: the positional arguments' entries may come as a list
    # Checked when vmap is applied, as JAX does, not at the first call.
    if not (in_axes is None or type(in_axes) is int or isinstance(in_axes, tuple) or type(in_axes) in spec_types):
        raise FtransTypeError(
            "vmap in_axes must be an int, None, or a tuple of entries corresponding to the positional "
            f"arguments passed to the function, but got {in_axes!r}.")
    for what, spec in (("in_axes", in_axes), ("out_axes", out_axes)):
        bad = [leaf for leaf in tree_util.tree_leaves(spec, is_leaf=_is_map_spec) if type(leaf) is not int
               and type(leaf) not in spec_types]
        if bad:
            raise FtransTypeError(
                f"vmap {what} must be an int, None, or (nested) container with those types as leaves: "
                f"vmap {what} entries must be ints or None, got {bad[0]!r} of type {type(bad[0]).__name__}")
    name = fun_name(fun, "fun")

    @wraps(fun)
    @_tb.api_boundary
    def batched(*args: Any, **kwargs: Any) -> Any:
        if vmappables and _uses_vmappables(in_axes, out_axes, args, kwargs):
            return _vmap_vmappables(fun, name, in_axes, out_axes, axis_name, axis_size, args, kwargs)
        leaves_paths, in_tree = tree_util.tree_flatten_with_path((args, kwargs))
        dims = _in_dims(in_axes, args, kwargs)
        size = _axis_size(name, leaves_paths, dims, axis_size, fun, args, kwargs)
        from ftrans.core.operands import as_operand

        ops, norm = [], []
        ref_at: dict[int, Any] = {}  # leaf position -> the caller's ref mapped there (its value is batched)
        if _ref_mod.created:
            ref_at = _mapped_refs(name, leaves_paths, dims)
        for k, ((_path, x), d) in enumerate(zip(leaves_paths, dims)):
            if d is None:
                ops.append(x)
                norm.append(not_mapped)
                continue
            if k in ref_at:
                x = _ref_mod.read_for_thread(x)
            if not isinstance(x, Tracer):
                try:
                    x = as_operand(x)
                except FtransTypeError:
                    if type(x) is not StringArray:  # a string array is mapped as it is (JAX's vmap passes it
                        raise                       # through; an operation on it is refused)
            ops.append(x)
            norm.append(d % len(aval_of(x).shape))
        mapped_spec = _mapped_axis_spec(ops, norm)
        if mapped_spec is not None:
            _check_unmapped_unsplit(ops, norm, mapped_spec)
        spmd = spmd_name
        if spmd is not None and mapped_spec is not None and _config.remove_size_one_mesh_axis_from_type:
            from ftrans.core import sharding as _sh  # as the types do, the mesh axes of size 1 are left out

            one = _sh.size_one_axes(_sh.current_abstract_mesh())
            spmd = tuple(n for n in spmd if n not in one) or None
        if spmd is not None and mapped_spec is not None and tuple(spmd) != mapped_spec:
            raise FtransValueError(
                f"vmap: Only one of spmd_axis_name or arrays sharded on `Explicit` mesh axis type is allowed. Got "
                f"spmd_axis_name={spmd} and arrays sharded on explicit_mesh_axis={mapped_spec} (the mapped "
                "dimension's axes); drop spmd_axis_name, or reshard the arguments")
        frame = AxisFrame(axis_name, size, None, spmd, mapped_spec if spmd is None else None)
        out_tree_box: list = []
        try:
            with new_main(BatchTrace, frame) as main:
                frame.main = main
                trace = main.trace
                tracers = [x if d is not_mapped else BatchTracer(trace, x, d) for x, d in zip(ops, norm)]
                views = {}
                for k, r in ref_at.items():  # the function sees a ref of one example's part of the mapped ref
                    views[k] = tracers[k] = _ref_mod.view_ref(tracers[k], r._origin, tree_util.keystr(leaves_paths[k][0]),
                                                               key_impl=r._key_impl)
                a, kw = tree_util.tree_unflatten(in_tree, tracers)
                if _kr.hot:  # key-reuse checking: a mapped key is the caller's key (consuming it consumes that)
                    _kr.alias_leaves((args, kwargs), (a, kw))
                with extend_axis_env(axis_name, size, main, frame.explicit), transform_name_stack("vmap"):
                    out = fun(*a, **kw)
                if ref_at:
                    _ref_mod.check_no_refs(out, "vmap", name)
                    for k, v in views.items():
                        _ref_mod.write_back(ref_at[k], _out_value(name, main, _ref_mod.read_for_thread(v), norm[k], size,
                                                                  leaves_paths[k][0], axis_name))
                paths_leaves, out_tree = tree_util.tree_flatten_with_path(out)
                if not all(is_jax_value(o) for _, o in paths_leaves):
                    check_outputs(out, fun, "vmap")
                out_tree_box.append(out_tree)
                out_dims = _flatten_out_axes(out_axes, out, len(paths_leaves))
                results = []
                for (path, o), od in zip(paths_leaves, out_dims):
                    results.append(_out_value(name, main, o, od, size, path, axis_name))
        finally:
            frame.main = None  # no frame/MainTrace reference cycle outlives the vmap
        return tree_util.tree_unflatten(out_tree_box[0], results)

    doc = (f"Vectorized version of {name}. Takes similar arguments as {name} but with additional array axes over "
           f"which {name} is mapped.")
    if getattr(fun, "__doc__", None):
        doc += "\n\nOriginal documentation:\n\n" + fun.__doc__
    batched.__doc__ = doc
    return batched


# ----------------------------------------------------------------------------
# Vmappable types (JAX's ``jax.interpreters.batching.register_vmappable``): a container type whose values vmap
# takes apart into batched arrays (``to_elt``) and builds again from them (``from_elt``), with map specs of
# its own spec type in ``in_axes``/``out_axes``.

vmappables: dict[type, tuple[type, type]] = {}  # data type -> (spec type, axis size type)
spec_types: set[type] = set()
to_elt_handlers: dict[type, Callable] = {}
from_elt_handlers: dict[type, Callable] = {}
make_iota_handlers: dict[type, Callable] = {}


def register_vmappable(data_type: type, spec_type: type, axis_size_type: type, to_elt: Callable,
                       from_elt: Callable, make_iota: Callable | None) -> None:
    """Let ``vmap`` map over values of ``data_type`` (as JAX's): ``to_elt(cont, get_idx, x, spec)`` gives the
    per-example value of ``x`` mapped as ``spec`` (an instance of ``spec_type``), calling ``cont(array, axis)``
    for the arrays it holds; ``from_elt(cont, axis_size, elt, spec)`` gives the batched value of a result,
    calling ``cont(axis_size, elt_array, axis)`` for its arrays."""
    vmappables[data_type] = (spec_type, axis_size_type)
    spec_types.add(spec_type)
    to_elt_handlers[data_type] = to_elt
    from_elt_handlers[data_type] = from_elt
    if make_iota is not None:
        make_iota_handlers[axis_size_type] = make_iota


def unregister_vmappable(data_type: type) -> None:
    """Forget ``data_type``'s handlers (its spec type stays known: another type may share it, as in JAX)."""
    vmappables.pop(data_type, None)
    to_elt_handlers.pop(data_type, None)
    from_elt_handlers.pop(data_type, None)


def is_vmappable(x: Any) -> bool:
    return type(x) in vmappables


def _is_map_spec(x: Any) -> bool:
    return type(x) in spec_types


def _is_spec(x: Any) -> bool:
    return x is None or type(x) in spec_types


def _uses_vmappables(in_axes: Any, out_axes: Any, args: tuple, kwargs: dict) -> bool:
    return (any(type(s) in spec_types for s in tree_util.tree_leaves((in_axes, out_axes), is_leaf=_is_map_spec))
            or any(is_vmappable(x) for x in tree_util.tree_leaves((args, kwargs), is_leaf=is_vmappable)))


def _spec_leaves(what: str, spec: Any, tree: Any, name: str) -> list:
    """``spec`` (a prefix of ``tree`` whose leaves are ints, None or map specs) broadcast to the leaves of
    ``tree``, vmappable values being leaves."""
    if spec is None or type(spec) is int or type(spec) in spec_types:
        return [spec] * len(tree_util.tree_leaves(tree, is_leaf=is_vmappable))
    spec_leaves, spec_def = tree_util.tree_flatten(spec, is_leaf=_is_spec)
    try:
        subtrees = spec_def.flatten_up_to(tree)
    except (ValueError, TypeError) as e:
        raise FtransValueError(f"vmap({name}) {what} specification must be a tree prefix of the corresponding "
                               f"value; got specification {spec!r}: {e}") from None
    return [s for s, sub in zip(spec_leaves, subtrees) for _ in tree_util.tree_leaves(sub, is_leaf=is_vmappable)]


def _vmap_vmappables(fun: Callable, name: str, in_axes: Any, out_axes: Any, axis_name: Any, axis_size: Any,
                     args: tuple, kwargs: dict) -> Any:
    """``vmap`` of a function some of whose arguments or results are registered vmappable values."""
    from ftrans.core.operands import as_operand

    if in_axes is None or type(in_axes) is int or type(in_axes) in spec_types:
        per_arg = [in_axes] * len(args)
    elif len(in_axes) != len(args):
        raise FtransValueError(
            f"vmap in_axes must be an int, None, or a tuple of entries corresponding to the positional "
            f"arguments passed to the function, but got len(in_axes)={len(in_axes)}, len(args)={len(args)}")
    else:
        per_arg = list(in_axes)
    specs: list = []
    for spec, a in zip(per_arg, args):
        specs.extend(_spec_leaves("in_axes", spec, a, name))
    specs.extend([0] * len(tree_util.tree_leaves(kwargs, is_leaf=is_vmappable)))
    leaves, in_tree = tree_util.tree_flatten((args, kwargs), is_leaf=is_vmappable)
    size = axis_size
    if size is None:
        sizes = {aval_of(x).shape[d] for x, d in zip(leaves, specs) if type(d) is int and not is_vmappable(x)}
        if len(sizes) != 1:
            raise FtransValueError(f"vmap({name}): give axis_size: the size of the mapped axis cannot be read from "
                                   "the arguments (vmappable values, or arrays mapped with differing sizes)")
        size = sizes.pop()
    frame = AxisFrame(axis_name, size, None, None)
    try:
        with new_main(BatchTrace, frame) as main:
            frame.main = main
            trace = main.trace

            def get_idx() -> Any:
                raise FtransTypeError(f"vmap({name}): the index of the mapped axis is not available to to_elt")

            def to_elt(x: Any, spec: Any) -> Any:
                handler = to_elt_handlers.get(type(x))
                if handler is not None:
                    return handler(to_elt, get_idx, x, spec)
                if spec is None:
                    return x
                if type(spec) is not int:
                    raise FtransTypeError(f"vmap({name}): an array argument got the map spec {spec!r}; arrays "
                                          "take an int or None")
                x = x if isinstance(x, Tracer) else as_operand(x)
                return BatchTracer(trace, x, spec % len(aval_of(x).shape))

            elts = [to_elt(x, d) for x, d in zip(leaves, specs)]
            a, kw = tree_util.tree_unflatten(in_tree, elts)
            with extend_axis_env(axis_name, size, main), transform_name_stack("vmap"):
                out = fun(*a, **kw)
            outs, out_tree = tree_util.tree_flatten(out, is_leaf=is_vmappable)
            if isinstance(out_axes, tuple) and not isinstance(out, tuple) and len(out_axes) == 1:
                out_axes = out_axes[0]
            out_specs = _spec_leaves("out_axes", out_axes, out, name)

            def from_elt(n: int, elt: Any, spec: Any) -> Any:
                handler = from_elt_handlers.get(type(elt))
                if handler is not None:
                    return handler(from_elt, n, elt, spec)
                if spec is not None and type(spec) is not int:
                    raise FtransTypeError(f"vmap({name}): an array output got the map spec {spec!r}; arrays "
                                          "take an int or None")
                return _out_value(name, main, elt, spec, n, (), axis_name)

            results = [from_elt(size, o, d) for o, d in zip(outs, out_specs)]
    finally:
        frame.main = None
    return tree_util.tree_unflatten(out_tree, results)


def _mapped_refs(name: str, leaves_paths: list, dims: list) -> dict:
    """The arguments of a vmapped call that are refs mapped over an axis, by leaf position; a ref passed
    twice is an error (the function would see two refs of one array)."""
    found = {k: x for k, ((_p, x), d) in enumerate(zip(leaves_paths, dims)) if isinstance(x, _ref_mod.Ref)}
    seen: dict[int, str] = {}
    for k, r in found.items():
        where = tree_util.keystr(leaves_paths[k][0])
        if id(r) in seen:
            raise FtransValueError(
                f"vmap({name}): only one reference to a mutable array may be passed as an argument to a function, "
                f"but the mutable array reference of type {r.aval.str_short()} appeared at both {seen[id(r)]} "
                f"and {where}")
        seen[id(r)] = where
    return {k: r for k, r in found.items() if dims[k] is not None}


def _flatten_out_axes(out_axes: Any, out: Any, n: int) -> list:
    if isinstance(out_axes, tuple) and not isinstance(out, tuple) and len(out_axes) == 1:
        out_axes = out_axes[0]
    return flatten_axes("out_axes", out_axes, out, n)


_FLOAT0 = np.dtype([("float0", np.void, 0)])  # the tangent dtype of integers (ftrans.dtypes.float0)


def _out_value(name: str, main: Any, o: Any, od: Any, size: int, path: tuple, axis_name: Any = None) -> Any:
    from ftrans.core.operands import as_operand

    where = f"output {tree_util.keystr(path)}" if path else "the output"
    batched = isinstance(o, BatchTracer) and o._trace.main is main
    if batched and o.bdim is not_mapped:
        o, batched = o.val, False
    if od is None:
        if batched:
            head = (f"vmap has mapped output (axis_name={axis_name}) but out_axes is None" if axis_name is not None
                    else f"at vmap out_axes, got axis spec None but output was batched on axis {o.bdim}")
            raise FtransValueError(
                f"{head}: vmap({name}) has out_axes=None for {where}, but that output is batched (it depends on a "
                "mapped input); give it an out_axes entry or make it independent of the mapped axis"
            )
        return o
    if not batched:
        if isinstance(o, np.ndarray) and o.dtype == _FLOAT0:
            # a float0 output (an integer input's gradient) carries no data: zeros of the batched shape, as JAX
            nd = o.ndim + 1
            _check_out_axis(name, od, nd, where)
            shape = list(o.shape)
            shape.insert(od % nd, size)
            return np.zeros(tuple(shape), _FLOAT0)
        try:
            o = as_operand(o)
        except FtransTypeError:
            raise FtransTypeError(
                f"vmap({name}): {where} of the batched function is {reprlib.repr(o)} of type {type(o).__name__}, which is "
                "not a valid array type; return arrays, NumPy arrays or Python scalars (in any pytree)"
            ) from None
        nd = len(aval_of(o).shape) + 1
        _check_out_axis(name, od, nd, where)
        return _typed_batch(broadcast_batch(o, size, od % nd), o, main.payload, od % nd)
    val, bd = o.val, o.bdim
    nd = len(aval_of(val).shape)
    _check_out_axis(name, od, nd, where)
    return moveaxis(val, bd, od % nd)


def _typed_batch(b: Any, o: Any, frame: Any, axis: int) -> Any:
    """An unmapped output broadcast along the batch dimension: split there over the Explicit mesh axes the
    mapped arguments are (JAX's vmap broadcasts it with its explicit mesh axis), when ``o`` is typed over
    that mesh."""
    axes = getattr(frame, "explicit", None)
    if not axes:
        return b
    from ftrans.core.prims.sharding import sharding_constraint_p
    from ftrans.core.sharding import NamedSharding, PartitionSpec, context_mesh

    own = aval_of(o).typed_sharding if isinstance(o, Tracer) else _explicit_type(o)
    mesh, spec = (own.mesh, tuple(own.spec)) if own is not None else (context_mesh(), ())
    if mesh is None or not set(axes) <= set(mesh.axis_names):  # (a value of no mesh: the rules take it as it is)
        return b
    rank = len(aval_of(b).shape)
    entries = list(spec) + [None] * (rank - 1 - len(spec))
    entries.insert(axis, axes[0] if len(axes) == 1 else tuple(axes))
    return sharding_constraint_p.bind(b, sharding=NamedSharding(mesh, PartitionSpec(*entries[:rank])))


def _check_out_axis(name: str, od: int, nd: int, where: str) -> None:
    """``od`` must index a dimension of the batched output (rank ``nd``, batch dimension included)."""
    if not -nd <= od < nd:
        raise FtransValueError(
            f"vmap({name}) out_axes={od} is out of range for {where}: its unbatched rank is {nd - 1}, so the "
            f"batch axis must be in [{-nd}, {nd - 1}] (axis {od} is out of bounds for the batched rank {nd})"
        )


def _axis_size(name: str, leaves_paths: list, dims: list, axis_size: int | None, fun: Any = None,
               args: tuple = (), kwargs: dict | None = None) -> int:
    sizes = []
    for (path, x), d in zip(leaves_paths, dims):
        if d is None:
            continue
        if jax_array_argument(x):
            raise jax_array_argument_error(f"vmap({name}): argument {_path(path)}")
        try:
            shape = tuple(x.shape) if isinstance(x, _ref_mod.Ref) else tuple(aval_of(x).shape)
        except TypeError:
            raise invalid_value_error(f"vmap({name}): mapped argument {_path(path)}", x,
                                      "or give it in_axes None to pass it through unmapped") from None
        if not -len(shape) <= d < len(shape) or not shape:
            raise FtransValueError(
                f"vmap was requested to map its argument along axis {d}, which implies that its rank "
                f"should be at least {max(d + 1, -d)}, but is only {len(shape)} (its shape is {shape}); "
                f"argument {_path(path)} of vmap({name})"
            )
        sizes.append((path, shape[d % len(shape)]))
    if not sizes:
        if axis_size is None:
            if not leaves_paths:  # no array at all among the arguments (JAX's wording for this case)
                raise FtransValueError(
                    f"vmap wrapped function must be passed at least one argument containing an array or "
                    f"axis_size must be specified, got empty *args={tuple(args)} and **kwargs={kwargs or {}}; "
                    f"vmap({name}) has nothing to map over"
                )
            raise FtransValueError(
                f"vmap must have at least one non-None value in in_axes, or be given axis_size: vmap({name}) "
                "maps none of its arguments"
            )
        return int(axis_size)
    distinct = {s for _, s in sizes}
    if axis_size is not None:
        distinct.add(int(axis_size))
    if len(distinct) > 1:
        raise _inconsistent_sizes(name, leaves_paths, dims, sizes, axis_size, fun, args, kwargs or {})
    return sizes[0][1]


def _inconsistent_sizes(name: str, leaves_paths: list, dims: list, sizes: list, axis_size: int | None, fun: Any,
                        args: tuple, kwargs: dict) -> FtransValueError:
    """JAX's report of mapped axes that disagree: each size, how many axes have it, and an example
    named by the function's parameter (``argument x``, ``argument b[0]``, ``kwargs['y']``)."""
    import collections
    import inspect

    try:
        inspect.signature(fun).bind(*args, **kwargs)
        params: list | None = list(inspect.signature(fun).parameters)
    except (TypeError, ValueError):
        params = None

    def label(path: tuple, x: Any) -> str:
        head, *rest = path
        if getattr(head, "idx", None) != 0:
            where = "kwargs" + tree_util.keystr(tuple(rest))
        elif params is None or not rest or rest[0].idx >= len(params):
            where = "args" + tree_util.keystr(tuple(rest))
        else:
            where = f"argument {params[rest[0].idx]}" + tree_util.keystr(tuple(rest[1:]))
        try:
            a = aval_of(x)
            ty = f"{a.dtype.name}[{','.join(str(d) for d in a.shape)}]"
        except TypeError:
            ty = "unknown"
        return f"{where} of type {ty}"

    mapped = [(p, x, d) for (p, x), d in zip(leaves_paths, dims) if d is not None]
    counts = collections.Counter(s for _, s in sizes).most_common()
    msg = ["vmap got inconsistent sizes for array axes to be mapped:"]
    if axis_size is not None:
        msg.append(f"  * the `axis_size` argument was {axis_size};")
    for k, (sz, ct) in enumerate(counts):
        i = next(j for j, (_, s) in enumerate(sizes) if s == sz)
        p, x, d = mapped[i]
        if ct == 1:
            msg.append(f"  * one axis had size {sz}: axis {d} of {label(p, x)};")
        else:
            kind = "most" if k == 0 else "some"
            msg.append(f"  * {kind} axes ({ct} of them) had size {sz}, e.g. axis {d} of {label(p, x)};")
    msg[-1] = msg[-1][:-1]
    # then every mapped argument, by its position in the call
    msg.append(f"vmap({name}) got inconsistent sizes for the mapped axis:")
    msg.extend(f"  argument {_path(p)} has size {s} along its mapped axis" for p, s in sizes)
    if axis_size is not None:
        msg.append(f"  axis_size={axis_size}")
    return FtransValueError("\n".join(msg))


def _path(path: tuple) -> str:
    if not path:
        return "args"
    head, *rest = path
    root = "args" if getattr(head, "idx", None) == 0 else "kwargs"
    return root + tree_util.keystr(tuple(rest))


# The rules for every primitive family register themselves on import.
from ftrans.transforms import batch_rules  # noqa: E402, F401
