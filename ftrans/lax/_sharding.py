"""``lax.with_sharding_constraint``: how XLA should lay a value out at this point of a sharded program."""

from __future__ import annotations

from typing import Any

import numpy as np

from ftrans.core import pytrees as tree_util
from ftrans.core import trace as _trace
from ftrans.core.array import Array
from ftrans.core.config import config as _config
from ftrans.core.prims.sharding import sharding_constraint_p
from ftrans.core.sharding import (
    Mesh,
    NamedSharding,
    PartitionSpec,
    Sharding,
    SingleDeviceSharding,
    as_sharding,
    check_divisible,
    check_spec,
    get_mesh,
    spec_mesh,
)
from ftrans.core.trace import Tracer
from ftrans.errors import FtransTypeError, FtransValueError, NoMeshError

__all__ = ["with_sharding_constraint", "with_out_sharding"]


def _resolve(s: Any, what: str, traced: bool = False) -> Any:
    s = as_sharding(s)  # a runtime (jax) sharding: as ftrans's
    if isinstance(s, PartitionSpec):
        mesh = spec_mesh()
        if mesh is None:
            from ftrans.transforms.shard_map import body_mesh

            mesh = body_mesh()  # inside a shard_map body its mesh is the context mesh, as in JAX
        if mesh is None:
            raise NoMeshError(
                f"{what}: got a bare PartitionSpec {s!r} but no mesh is set ({what} requires a non-empty mesh in "
                "context if you are passing `PartitionSpec`s); wrap it in NamedSharding(mesh, spec) "
                "or set a mesh with ftrans.set_mesh(mesh) / ftrans.sharding.use_mesh(mesh)")
        return NamedSharding(mesh, s)
    if not isinstance(s, Sharding):
        raise FtransTypeError(f"{what}: expected a Sharding or a PartitionSpec, got {type(s).__name__}: {s!r}")
    if isinstance(s, NamedSharding) and not isinstance(s.mesh, Mesh) and any(
            t.name == "Manual" for t in s.mesh.axis_types):
        return s  # a partially manual shard_map body's type (``jax.typeof(x).sharding`` there): as it is
    if isinstance(s, NamedSharding) and not isinstance(s.mesh, Mesh):  # over an AbstractMesh: the current mesh
        try:
            s = NamedSharding(s._concrete_mesh(), s.spec, memory_kind=s._memory_kind)
        except FtransValueError:
            if not traced:
                raise
            # staged with no mesh to take devices from (``eval_shape``, ``trace``): the abstract mesh stays,
            # as in JAX's jaxpr; the program takes its devices when it is lowered
    return s


class _Group(list):
    """The shardings a prefix entry gives its subtree's leaves (no pytree node, unlike a list of the user's)."""


def with_sharding_constraint(x: Any, shardings: Any, _what: str = "with_sharding_constraint") -> Any:
    """``x`` unchanged, laid out as ``shardings`` (a tree prefix of ``x``): inside a sharded ``jit`` it pins
    the partitioner's choice; on concrete arrays it moves them (as ``device_put``)."""
    leaves, tree = tree_util.tree_flatten(x)
    is_leaf = lambda s: isinstance(as_sharding(s), (Sharding, PartitionSpec))  # noqa: E731
    if shardings is None:
        raise FtransValueError(
            f"One of {_what} arguments got sharding None which is not allowed: give a NamedSharding or a "
            f"PartitionSpec (P() to replicate) for a value of structure {tree}")
    if is_leaf(shardings):
        flat = [shardings] * len(leaves)
    else:
        try:
            groups = tree_util.tree_map(lambda s, sub: _Group([s] * len(tree_util.tree_leaves(sub))), shardings,
                                        x, is_leaf=is_leaf)
        except (ValueError, TypeError):
            raise FtransValueError(
                f"{_what}: shardings must be a sharding or a tree prefix of the value; got {shardings!r} for a "
                f"value of structure {tree}") from None
        flat = [s for g in tree_util.tree_leaves(groups, is_leaf=lambda g: type(g) is _Group) for s in g]
    out = []
    for leaf, s in zip(leaves, flat):
        # A concrete value is placed at once, inside a transform too (a constant of the program being traced
        # keeps its layout: a jitted program that captures it is partitioned, sharded_jit.sharded_consts).
        traced = isinstance(leaf, Tracer) or (not _trace.is_eager() and not isinstance(leaf, Array))
        if not traced and _what == "with_sharding_constraint":
            s = _eager_over_abstract(leaf, as_sharding(s))
        s = _resolve(s, _what, traced)
        shape = tuple(getattr(leaf, "shape", ()))
        if isinstance(s, NamedSharding) and _what == "with_sharding_constraint":
            _check_auto(s)
        if isinstance(s, NamedSharding) and not traced:  # in a program the partitioner pads uneven blocks
            check_divisible(s, shape, _what)
        elif isinstance(s, NamedSharding):  # the spec must fit the value's rank (JAX's check, its words)
            check_spec(s.spec, s.mesh, f"{_what} (One of {_what} arguments; Sharding {s!r})", len(shape), shape)
        if traced:
            if isinstance(s, NamedSharding):
                _check_not_manual(_what, s)
                if _what == "with_sharding_constraint":
                    if _assert_as_typed(leaf.aval if isinstance(leaf, Tracer) else None, s):
                        out.append(leaf)  # (JAX's: an assert only, no equation)
                        continue
                    s = _with_type_axes(leaf.aval if isinstance(leaf, Tracer) else None, s)
                else:  # a reshard, an ``out_sharding=``: the value's new type (JAX lowers it as one)
                    s = NamedSharding(s.mesh, s.spec, memory_kind=s.memory_kind)
                    s._type_cast = True
                    s._what = _what  # (the operation ``no_collectives``' errors name)
                out.append(sharding_constraint_p.bind(leaf, sharding=s))
            else:
                _check_spmd_batched(leaf, s)
                out.append(leaf)
        elif not isinstance(s, (NamedSharding, SingleDeviceSharding)):
            out.append(leaf)
        else:  # eagerly, as JAX's: placed there (on one device too), and committed to it
            from ftrans.devices import device_put

            if _what == "with_sharding_constraint" and isinstance(s, NamedSharding) and isinstance(leaf, Array):
                from ftrans.core.sharding_rules import array_aval

                _assert_as_typed(array_aval(leaf), s)
            if _what == "with_sharding_constraint" and isinstance(s, NamedSharding):
                _check_same_devices(leaf, s)
            if _what != "with_sharding_constraint" and _config.no_collectives and isinstance(s, NamedSharding) \
                    and isinstance(leaf, Array):
                from ftrans.core.sharding_rules import array_aval, check_reshard_no_collectives

                check_reshard_no_collectives(array_aval(leaf), s, _what)
            if _what != "with_sharding_constraint" and isinstance(s, NamedSharding) and \
                    _config.remove_size_one_mesh_axis_from_type:
                s = _as_type_laid(s)  # (reshard, out_sharding=: the result's sharding is its type's, as JAX's)
            out.append(device_put(leaf, s))
    return tree_util.tree_unflatten(tree, out)


def _as_type_laid(s: NamedSharding) -> NamedSharding:
    """JAX's ``jax_remove_size_one_mesh_axis_from_type``: ``s`` without the Explicit mesh axes of size 1, which
    the value's type leaves out (an eager ``reshard`` lays its result out as its type says)."""
    from ftrans.core.sharding import size_one_axes, without_axes

    one = size_one_axes(s.mesh) & frozenset(getattr(s.mesh, "explicit_axes", ()) or ())
    return s.update(spec=without_axes(s.spec, one)) if one else s


def _check_spmd_batched(x: Any, s: Any) -> None:
    """A constraint other than a NamedSharding on a value batched by ``vmap(spmd_axis_name=...)``: JAX's
    batching rule cannot add the spmd axes to it."""
    t = x
    while isinstance(t, Tracer):
        main = getattr(t._trace, "main", None)
        if getattr(getattr(main, "payload", None), "spmd_name", None):
            raise FtransValueError(
                "If you are using spmd_axis_name parameter of jax.vmap, please make sure to run your jitted function "
                "inside the mesh context manager. Only `jax.lax.with_sharding_constraint` with "
                "`jax.sharding.NamedSharding` as an input can be transformed with spmd_axis_name batching rules "
                f"outside of an explicit mesh context. Got {type(s).__name__}")
        t = getattr(t, "val", None)


def _eager_over_abstract(x: Any, s: Any) -> Any:
    """Eagerly, a target over an AbstractMesh takes its devices from the array (JAX's rule and checks): the
    array must be laid out over a mesh of the same axis names and sizes."""
    if not (isinstance(s, NamedSharding) and not isinstance(s.mesh, Mesh)):
        return s
    from ftrans.core.sharding_rules import array_aval

    short = array_aval(x).str_short() if isinstance(x, Array) else f"{getattr(x, 'dtype', '')}{list(np.shape(x))}"
    if not isinstance(x, Array):
        raise FtransValueError(
            "Target sharding contains a `jax.sharding.AbstractMesh` which requires the input passed should be a "
            f"`jax.Array`. Got {type(x)} with shape {short}")
    own = x.sharding
    if not isinstance(own, NamedSharding) or not own.mesh.axis_names:
        raise FtransTypeError(
            "The sharding on the input must be a `NamedSharding` since the target sharding has an `AbstractMesh` "
            f"in it. Got sharding type {type(own)} for shape {short}")
    if own.mesh.shape_tuple != s.mesh.shape_tuple:
        raise FtransValueError(
            f"Mesh shape of the input {own.mesh.shape_tuple} does not match the mesh shape of the target sharding "
            f"{s.mesh.shape_tuple} for shape {short}")
    return NamedSharding(own.mesh, s.spec)


def _check_same_devices(x: Any, s: NamedSharding) -> None:
    """Eagerly a constraint is a jitted program too: an array laid out over a mesh of other devices (or of the
    same devices in another order) is JAX's device-assignment error, not moved."""
    from ftrans.core.array import ShardedArray

    own = getattr(x, "sharding", None) if type(x) is ShardedArray else None
    if not isinstance(own, NamedSharding):
        return
    have, want = [d.id for d in own.mesh.devices.flat], [d.id for d in s.mesh.devices.flat]
    if have != want:
        plat = s.mesh.devices.flat[0].platform.upper()
        shape = f"{x.dtype.name}[{','.join(map(str, x.shape))}]"
        raise FtransValueError(
            f"Received incompatible devices for jitted computation. Got argument x of with_sharding_constraint "
            f"with shape {shape} and with device ids {have} on platform {plat} and sharding_constraint inside jit "
            f"with device ids {want} on platform {plat}; move the array with device_put instead")


def _check_auto(s: NamedSharding) -> None:
    """JAX's rule where no mesh of only Explicit axes is current: a constraint names Auto mesh axes only (an
    Explicit axis's layout is the value's type, changed with ``reshard``)."""
    from ftrans.core.sharding import AxisType

    cur = get_mesh()
    if cur is not None and cur.axis_types and all(t == AxisType.Explicit for t in cur.axis_types):
        return  # JAX checks there that the value already has that sharding type
    types = dict(zip(s.mesh.axis_names, s.mesh.axis_types))
    if any(types.get(a, AxisType.Auto) != AxisType.Auto for a in s.spec.axes()):
        raise FtransValueError(
            "The spec of NamedSharding passed to with_sharding_constraint can only refer to Auto axes of the mesh. "
            f"Got spec={s.spec!r} and mesh={s.mesh.abstract_mesh!r}. You probably meant to use `reshard` API?")


def _assert_as_typed(aval: Any, s: NamedSharding) -> bool:
    """Over a mesh whose axes are all Explicit, JAX's ``with_sharding_constraint`` asserts the value's type
    (``aval``'s) instead of moving it (``reshard`` moves it). True when it asserted it."""
    from ftrans.core.sharding import AxisType, size_one_axes, without_axes

    sh = getattr(aval, "typed_sharding", None)
    if sh is None or not s.mesh.axis_types or any(t != AxisType.Explicit for t in s.mesh.axis_types):
        return False
    n = len(aval.shape)
    want = tuple(s.spec) + (None,) * (n - len(s.spec))
    one = size_one_axes(s.mesh)  # (JAX's jax_remove_size_one_mesh_axis_from_type: they are no part of the type)
    if one:
        want = tuple(without_axes(PartitionSpec(*want, unreduced=s.spec.unreduced, reduced=s.spec.reduced), one))
    if sh.mesh != s.mesh or PartitionSpec(*want[:n]) != sh.spec:
        raise AssertionError(
            "`with_sharding_constraint` acts as an assert when all axes of mesh are of type `Explicit`. The array "
            f"sharding: {sh.spec!r} did not match the sharding provided: {s.spec!r}. Please use "
            "`jax.sharding.reshard` to shard your input to the sharding you want.")
    return s.memory_kind in (None, "device") and not (s.spec.unreduced or s.spec.reduced or sh.spec.unreduced
                                                      or sh.spec.reduced)


def _with_type_axes(aval: Any, s: NamedSharding) -> NamedSharding:
    """Over a mesh of Explicit and Auto axes, a constraint keeps the value's type: each dimension is split over
    the Explicit axes its type names and then the ones the constraint names (JAX's lowering of it)."""
    sh = getattr(aval, "typed_sharding", None)
    types = {t.name for t in s.mesh.axis_types}
    if sh is None or sh.mesh != s.mesh or not ("Explicit" in types and "Auto" in types) or s.spec.unreduced:
        return s
    n = len(aval.shape)
    user = tuple(s.spec) + (None,) * (n - len(s.spec))
    entries = []
    for u, t in zip(user[:n], tuple(sh.spec) + (None,) * (n - len(sh.spec))):
        have = () if t is None else ((t,) if isinstance(t, str) else tuple(t))
        if not have or u is PartitionSpec.UNCONSTRAINED:
            entries.append(u)
            continue
        add = () if u is None else ((u,) if isinstance(u, str) else tuple(u))
        merged = have + tuple(a for a in add if a not in have)
        entries.append(merged[0] if len(merged) == 1 else merged)
    return NamedSharding(s.mesh, PartitionSpec(*entries), memory_kind=s.memory_kind)


def _check_not_manual(what: str, s: NamedSharding) -> None:
    """Inside a ``shard_map`` body the manual mesh axes are the devices' own: a constraint may lay a value out
    only over the axes still automatic there (as JAX, which raises when lowering)."""
    from ftrans.transforms.shard_map import manual_axes_here

    manual = manual_axes_here()
    bad = sorted(set(s.spec.axes()) & manual, key=str) if manual else []
    if bad:
        raise FtransValueError(
            f"{what}: pspec {s.spec!r} contains a manual axes {tuple(sorted(manual, key=str))} of mesh which is "
            f"not allowed (it names {bad}). If you are using a with_sharding_constraint under a shard_map, only "
            "use the mesh axes in the PartitionSpec which are not manual there.")


def check_explicit(what: str, s: NamedSharding) -> None:
    """JAX's rule for the shardings of ``out_sharding=`` and ``reshard``: every mesh axis the spec names must be
    of type Explicit."""
    from ftrans.core.sharding import AxisType

    types = dict(zip(s.mesh.axis_names, s.mesh.axis_types))
    for a in s.spec.axes():
        if types.get(a) != AxisType.Explicit:
            raise FtransValueError(f"PartitionSpec passed to {what} cannot contain axis names that are of type "
                                   f"Auto or Manual. Got {s.spec!r} (axis {a!r} is {types.get(a)})")


def with_out_sharding(what: str, out_sharding: Any, compute: Any, operands: Any = (), shape: Any = None) -> Any:
    """``compute()`` laid out as ``out_sharding`` (the ``out_sharding=`` keyword of ``lax.dot_general``,
    ``jnp.einsum``, ``lax.reshape``, ...).  Over Explicit mesh axes the result's sharding type is the one
    asked for: the products and reshapes of the block (of result shape ``shape``, or all when None) take it
    instead of raising for an ambiguous layout; otherwise it is a sharding constraint (a copy eagerly)."""
    if out_sharding is None:
        return compute()
    s = as_sharding(out_sharding)
    if isinstance(s, PartitionSpec):
        mesh = spec_mesh()
        if mesh is None:  # as JAX's, inside jit too: the operands' mesh is not taken for it
            raise FtransValueError(
                f"{what}: got out_sharding={s!r}, a bare PartitionSpec, but no mesh is set (Using PartitionSpec "
                "when not under a mesh context is not allowed); wrap it in NamedSharding(mesh, spec) or set a "
                "mesh with ftrans.set_mesh(mesh)")
        s = NamedSharding(mesh, s)
    elif isinstance(s, NamedSharding):
        _check_context_mesh(what, s)
    if not isinstance(s, NamedSharding):
        raise FtransTypeError(f"{what}: out_sharding must be a NamedSharding or a PartitionSpec, got {s!r}")
    if not isinstance(s.mesh, Mesh) and s._memory_kind is not None:  # (JAX's check of a type's sharding, its words)
        raise FtransValueError(
            "sharding with memory_kind is not allowed. Please use `jax.device_put` to transfer to different memory "
            f"spaces. Got sharding={s!r} as {what}'s out_sharding (a value's type names no memory kind)")
    from ftrans.core.sharding_rules import out_sharding_override

    check_explicit(what, s)
    if what == "reshape":  # JAX's unreduced/reduced checks of a reshape's out_sharding (eagerly too)
        _check_reshape_ur(s.spec, operands)
    entries = tuple(s.spec)
    entries = entries + (None,) * ((len(shape) if shape is not None else 0) - len(entries))
    if s.spec.unreduced or s.spec.reduced:  # JAX's unreduced/reduced axes: part of the type asked for
        entries = PartitionSpec(*entries, unreduced=s.spec.unreduced, reduced=s.spec.reduced)
    with out_sharding_override(shape, entries):
        out = compute()
    if s.spec.unreduced and shape is None:  # (an einsum's: its contraction must have left them unreduced)
        _check_unreduced_result(out, s.spec)
    if (s.spec.unreduced or s.spec.reduced) and _has_type(out, s):  # (JAX's: the product's type, no reshard)
        return out
    n = len(getattr(out, "shape", ()))
    if isinstance(out, Array) and len(s.spec) < n and not (s.spec.unreduced or s.spec.reduced) and any(
            t.name == "Explicit" for t in s.mesh.axis_types):  # the result's sharding is its type's, of its rank
        s = NamedSharding(s.mesh, PartitionSpec(*(tuple(s.spec) + (None,) * (n - len(s.spec)))),
                          memory_kind=s.memory_kind)
    return with_sharding_constraint(out, s, _what=what)


def _check_context_mesh(what: str, s: NamedSharding) -> None:
    """JAX's rule for an ``out_sharding=`` NamedSharding: its mesh must be the abstract mesh in context (when
    one is, and unless both have only Auto axes)."""
    from ftrans.core import sharding as _sh

    find = _sh.current_abstract_mesh
    cur = find() if find is not None else None
    if cur is None or cur.empty:
        return
    am = getattr(s, "_given_mesh", None) or s.mesh.abstract_mesh
    if am.are_all_axes_auto and cur.are_all_axes_auto:
        return
    if (am.axis_names, am.axis_sizes, am.axis_types) != (cur.axis_names, cur.axis_sizes, cur.axis_types):
        raise FtransValueError(
            f"Context mesh {cur} should match the mesh of sharding {am} passed to {what}; pass a sharding over the "
            "mesh in context (or a bare PartitionSpec)")


def _has_type(out: Any, s: NamedSharding) -> bool:
    sh = getattr(getattr(out, "aval", None), "typed_sharding", None)
    if not isinstance(out, Tracer) or sh is None or sh.mesh != s.mesh:
        return False
    n = len(out.aval.shape)
    return sh.spec == PartitionSpec(*(tuple(s.spec) + (None,) * (n - len(s.spec)))[:n], unreduced=s.spec.unreduced,
                                    reduced=s.spec.reduced)


def _check_reshape_ur(spec: PartitionSpec, operands: Any) -> None:
    from ftrans.core.sharding_rules import array_aval, ur

    ops = tuple(operands) if isinstance(operands, (tuple, list)) else (operands,)
    if not ops:
        return
    x = ops[0]
    aval = x.aval if isinstance(x, Tracer) else array_aval(x) if isinstance(x, Array) else None
    have = ur(aval) if aval is not None else (frozenset(), frozenset())
    for kind, h, given in (("unreduced", have[0], spec.unreduced), ("reduced", have[1], spec.reduced)):
        if h and h != given:
            raise FtransValueError(f"out_sharding passed to reshape must be {kind} over the same mesh axes as "
                                   f"operand. Got out_sharding: {spec!r} and operand type: {aval.str_short()}")
        if given and not h:
            raise FtransValueError(f"out_sharding passed to `reshape` cannot contain {kind} axes. Got {spec!r}")


def _check_unreduced_result(out: Any, spec: PartitionSpec) -> None:
    from ftrans.errors import ShardingTypeError

    for leaf in tree_util.tree_leaves(out):
        sh = getattr(getattr(leaf, "aval", None), "typed_sharding", None)
        if isinstance(leaf, Tracer) and (sh is None or sh.spec.unreduced != spec.unreduced):
            raise ShardingTypeError(
                f"out_sharding's unreduced axes should be equal to the contracting specs. Got unreduced axes="
                f"{set(spec.unreduced)} and a product whose contracting specs leave "
                f"{set(sh.spec.unreduced) if sh is not None else set()} unreduced")


def place_result(what: str, out_sharding: Any, compute: Any) -> Any:
    """``compute()`` laid out as ``out_sharding`` (a sharding, or a bare PartitionSpec under the current mesh),
    its values unchanged: the ``out_sharding=`` of JAX's random samplers, which draw under ``auto_axes`` and
    reshard the result.  Over Explicit mesh axes the result's sharding type is the one asked for."""
    s = _resolve(out_sharding, what)
    return with_sharding_constraint(compute(), s, _what=what)


def under_auto_axes(fn: Any, args: tuple, kwargs: dict, target: Any) -> Any:
    """``fn(*args, **kwargs)`` with the Explicit axes of ``target``'s mesh typed Auto, the arguments' sharding
    types moved onto that mesh (JAX's ``auto_axes`` around a computation given ``out_sharding=``); the caller
    lays the result out as ``target``."""
    from ftrans.core.array import Array
    from ftrans.core.prims.sharding import sharding_constraint_p
    from ftrans.core.sharding import AxisType, use_mesh

    mesh = getattr(target, "mesh", None)
    types = tuple(getattr(mesh, "axis_types", ()) or ())
    if not isinstance(mesh, Mesh) or AxisType.Explicit not in types:
        return fn(*args, **kwargs)
    auto = Mesh(mesh.devices, mesh.axis_names, tuple(AxisType.Auto if t == AxisType.Explicit else t for t in types))

    def cast(x: Any) -> Any:
        sh = x.aval.typed_sharding if isinstance(x, Tracer) else getattr(x, "sharding", None) if isinstance(x, Array) \
            else None
        if not isinstance(sh, NamedSharding) or not isinstance(sh.mesh, Mesh) or sh.mesh == auto \
                or sh.mesh.axis_names != auto.axis_names or sh.mesh.devices.shape != auto.devices.shape \
                or not (sh.mesh.devices == auto.devices).all():  # (an abstract mesh: a shard_map body's types)
            return x
        if isinstance(x, Tracer):
            return sharding_constraint_p.bind(x, sharding=NamedSharding(auto, sh.spec))
        from ftrans.devices import device_put

        return device_put(x, NamedSharding(auto, sh.spec))

    with use_mesh(auto):
        args, kwargs = tree_util.tree_map(cast, (args, kwargs))
        return fn(*args, **kwargs)
