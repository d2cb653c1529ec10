"""Sharding in types: the layouts of values over Explicit mesh axes, known while tracing (JAX's model).

A value laid out over a mesh with ``AxisType.Explicit`` axes has a typed
abstract value (``ShardedAval``): its ``sharding`` is a NamedSharding whose
spec has one entry per dimension, naming Explicit axes only.  Each primitive
that can carry a type has a *sharding rule* beside its shape rule
(``Primitive.sharding_rule``): the result's spec from the operands' specs and
the params.  Elementwise operations need agreeing specs, reductions drop the
reduced dimensions, ``reshape``/``transpose``/``broadcast_in_dim`` move the
entries with the dimensions, and ``dot_general`` contracting a dimension split
on both sides needs an ``out_sharding`` (or raises, as JAX does).

Only staging traces whose inputs are typed pay for this: the builder of a
jaxpr raises its ``typed`` flag when a typed value enters it (an argument, a
captured value, a reshard), and only then does ``process_primitive`` call
``propagate``.  A primitive without a rule gives an untyped result (the
partitioner chooses its layout, as for Auto axes); a higher-order primitive
keeps the types its body gives its results.  The lowering annotates every
typed result with a sharding constraint, so XLA's layouts are the types.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from contextlib import contextmanager
from typing import Any

from ftrans.core.avals import ShapedArray, ShardedAval
from ftrans.core.config import config as _config
from ftrans.core.sharding import AxisType, NamedSharding, PartitionSpec, TypeSharding, abstract_stack
from ftrans.errors import FtransValueError, ShardingTypeError

__all__ = ["typed", "typed_aval", "explicit_spec", "spec_of", "propagate", "elementwise", "same_as_first",
           "out_sharding_override", "lenient"]


# ----------------------------------------------------------------------------
# Typed avals


def _entry(e: Any, explicit: frozenset) -> Any:
    """A spec entry kept to the Explicit axes it names, in canonical form (an axis, a tuple of 2+, or None)."""
    if e is None or isinstance(e, str):
        return e if e is None or e in explicit else None
    if isinstance(e, tuple):
        kept = tuple(a for a in e if a in explicit)
        return None if not kept else (kept[0] if len(kept) == 1 else kept)
    return None  # UNCONSTRAINED: no type


def explicit_spec(spec: Any, mesh: Any, ndim: int) -> tuple | None:
    """``spec`` as a type over ``mesh``: one entry per dimension, Explicit axes only (None: the mesh has none)."""
    explicit = frozenset(mesh.explicit_axes)
    if not explicit:
        return None
    entries = tuple(spec) + (None,) * (ndim - len(spec))
    return tuple(_entry(e, explicit) for e in entries[:ndim])


def typed(aval: ShapedArray, mesh: Any, spec: Sequence) -> ShardedAval:
    """``aval`` typed by ``spec`` over ``mesh`` (a PartitionSpec's unreduced/reduced axes kept)."""
    u, r = getattr(spec, "unreduced", None), getattr(spec, "reduced", None)
    ps = PartitionSpec(*spec, unreduced=u, reduced=r) if u or r else PartitionSpec(*spec)
    if _config.remove_size_one_mesh_axis_from_type:  # JAX's switch: axes of size 1 are no part of the type
        from ftrans.core.sharding import size_one_axes, without_axes

        ps = without_axes(ps, size_one_axes(mesh))
    return ShardedAval(aval.shape, aval.dtype, aval.weak_type, NamedSharding(mesh, ps))


def ur(aval: ShapedArray) -> tuple:
    """An aval's unreduced and reduced mesh axes (JAX's ``getu``/``getr``): empty sets for an untyped one."""
    sh = aval.typed_sharding
    if sh is None:  # (inside a shard_map body: the value's manual unreduced/reduced axes, ``aval.mat``)
        return getattr(aval, "unreduced", _NONE), getattr(aval, "reduced", _NONE)
    return sh.spec.unreduced, sh.spec.reduced


_NONE: frozenset = frozenset()


def with_ur(spec: Sequence, unreduced: Any = frozenset(), reduced: Any = frozenset()) -> Any:
    """``spec`` entries as a PartitionSpec with those unreduced/reduced axes (the plain tuple when none)."""
    if not unreduced and not reduced:
        return tuple(spec)
    return PartitionSpec(*spec, unreduced=frozenset(unreduced), reduced=frozenset(reduced))


def typed_aval(aval: ShapedArray, sharding: Any) -> ShapedArray:
    """``aval`` typed by ``sharding`` when it is a NamedSharding over a mesh with Explicit axes; else as is (a
    value the mesh in context placed, replicated, is not typed: see ``core/array.py``, ``loosen``)."""
    if not isinstance(sharding, NamedSharding) or getattr(sharding, "_loose", False):
        return aval
    spec = explicit_spec(sharding.spec, sharding.mesh, len(aval.shape))
    if spec is None:
        return aval
    return typed(aval, sharding.mesh, with_ur(spec, sharding.spec.unreduced, sharding.spec.reduced))


def array_aval(x: Any) -> ShapedArray:
    """The abstract value of an operand, typed when it is an Array laid out over Explicit mesh axes."""
    from ftrans.core.array import ShardedArray
    from ftrans.core.trace import aval_of

    aval = aval_of(x)
    if type(x) is ShardedArray:
        return typed_aval(aval, x.sharding)
    return aval


def operand_type(x: Any) -> ShapedArray | None:
    """The typed abstract value of an operand (a tracer's, or a concrete array's laid out over Explicit mesh
    axes); None when it has no sharding type.  For the APIs whose JAX primitive checks the layout itself."""
    from ftrans.core.trace import Tracer

    a = x.aval if isinstance(x, Tracer) else array_aval(x)
    return a if a.typed_sharding is not None else None


def check_split(name: str, x: ShapedArray, out_shapes: Sequence[Sequence[int]]) -> None:
    """JAX's rule of ``split``-like primitives: a split dimension whose pieces it does not divide raises."""
    for shape in out_shapes:
        _varying_shape(name, x, shape, x.typed_sharding.mesh)


def spec_of(aval: ShapedArray) -> tuple:
    """An aval's spec entries (all None for an untyped one: replicated as far as the rules are concerned)."""
    sh = aval.typed_sharding
    return tuple(sh.spec) if sh is not None else (None,) * len(aval.shape)


def _axes(e: Any) -> tuple:
    return () if e is None else ((e,) if isinstance(e, str) else tuple(e))


def _size(mesh: Any, e: Any) -> int:
    n = 1
    for a in _axes(e):
        n *= mesh.shape[a]
    return n


def _show(spec: Sequence) -> str:
    return "(" + ", ".join(repr(e) for e in spec) + ("," if len(spec) == 1 else "") + ")"


def _short(aval: ShapedArray) -> str:
    return aval.str_short()


# ----------------------------------------------------------------------------
# Overrides: a result sharding the API was given, and the transposition's leniency


_local = threading.local()


@contextmanager
def out_sharding_override(shape: Sequence[int] | None, spec: Any, mesh: Any = None) -> Any:
    """Inside the block, a typed ``dot_general`` or ``reshape`` whose result has ``shape`` takes ``spec`` as
    its type (the ``out_sharding=`` of ``lax.dot_general``/``jnp.einsum``/``lax.reshape``; the JVP's products
    of the same shape too); one of another shape (an einsum's intermediate) is typed leniently.  With ``mesh``
    (a transposition rule's, as JAX's pass ``out_sharding``), a result of ``shape`` is typed over it even when
    its operands are untyped (a ``broadcast_in_dim`` of a scalar cotangent)."""
    prev = getattr(_local, "out", None)
    _local.out = (None if shape is None else tuple(shape), spec if isinstance(spec, PartitionSpec) else tuple(spec),
                  mesh)
    try:
        yield
    finally:
        _local.out = prev


def overriding() -> bool:
    """Whether an API's ``out_sharding=`` is being applied (its intermediates are typed leniently)."""
    return getattr(_local, "out", None) is not None


def _override(out: ShapedArray) -> tuple[Any, bool]:
    """(the spec the API asked for, or None; whether a product of another shape is being typed for it)."""
    over = getattr(_local, "out", None)
    if over is None:
        return None, False
    if over[0] == tuple(out.shape):
        return over[1], True
    return None, True


# The primitives whose result type an API keyword can set (``out_sharding=``): replaying a recorded equation
# of one (eval_jaxpr under jvp, ...) gives it its recorded type again.
typed_by_api: set = set()


def as_recorded(aval: ShapedArray) -> Any:
    """The recorded type of an equation's result, given again on replay (over its mesh: a transposition rule
    may have typed it though its operands were untyped)."""
    sh = aval.typed_sharding
    spec = sh.spec
    return out_sharding_override(aval.shape, spec if spec.unreduced or spec.reduced else tuple(spec), sh.mesh)


@contextmanager
def lenient() -> Any:
    """Inside transposition rules: a product contracting a dimension split on both sides gives a result
    typed by its free dimensions (the cotangent is then constrained to its primal's type) instead of
    raising, as JAX's transpose rules pass ``out_sharding`` themselves."""
    prev = getattr(_local, "lenient", False)
    _local.lenient = True
    try:
        yield
    finally:
        _local.lenient = prev


# ----------------------------------------------------------------------------
# Propagation


def _check_context_mesh(prim: Any, avals: Sequence[ShapedArray]) -> None:
    """Operands over different meshes, one of them not the mesh in context: JAX's ValueError naming it."""
    from ftrans.core.sharding import get_mesh

    cur = get_mesh()
    if cur is None or cur.empty:
        return
    cur_abs = cur.abstract_mesh
    for a in avals:
        m = a.typed_sharding.mesh if a.typed_sharding is not None else None
        if m is None or m.empty or m.abstract_mesh == cur_abs or any(t.name == "Manual" for t in m.axis_types):
            continue  # (a shard_map body's values: typed over its manual axes)
        if all(t.name == "Auto" for t in m.axis_types) and all(t.name == "Auto" for t in cur.axis_types):
            continue
        raise FtransValueError(
            f"For primitive {prim.name}, context mesh {cur_abs} should match the aval mesh {m.abstract_mesh} for "
            f"shape {a.str_short()}; lay the operands out over the mesh in context (ftrans.reshard / device_put)")


def _check_abstract_context(prim: Any, avals: Sequence[ShapedArray], entry: tuple) -> None:
    cur = entry[0]
    if cur.empty:
        return
    for a in avals:
        m = a.typed_sharding.mesh if a.typed_sharding is not None else None
        if m is None or m.empty or any(t.name == "Manual" for t in m.axis_types):
            continue
        am = m.abstract_mesh
        if am._key()[:3] == cur._key()[:3] or (all(t.name == "Auto" for t in am.axis_types) and all(t.name == "Auto" for t in
                                                                             cur.axis_types)):
            continue
        raise FtransValueError(
            f"For primitive {prim.name}, context mesh {cur} should match the aval mesh {am} for shape "
            f"{a.str_short()}; inside use_abstract_mesh the operands must be typed over that mesh (reshard them, "
            "or use auto_axes / explicit_axes to change the axis types)")


def propagate(prim: Any, avals: Sequence[ShapedArray], out: Any, params: dict) -> Any:
    """The abstract value(s) ``out`` of ``prim`` applied to ``avals``, typed by the primitive's sharding rule."""
    mesh = None
    for a in avals:
        sh = a.typed_sharding
        if sh is not None:
            if mesh is None:
                mesh = sh.mesh
            elif sh.mesh != mesh:
                _check_context_mesh(prim, avals)
                raise ShardingTypeError(f"Mesh for all inputs should be equal. Got one mesh: {mesh} and another "
                                        f"mesh: {sh.mesh}")
    if mesh is not None:
        st = abstract_stack()
        if st and not prim.sets_sharding:  # inside ``use_abstract_mesh``: operands typed over it (JAX's check)
            _check_abstract_context(prim, avals, st[-1])
    rule = prim.sharding_rule
    if rule is None:
        if prim.higher_order or mesh is None:
            return out
        return [_plain(o) for o in out] if prim.multiple_results else _plain(out)
    if mesh is None and not prim.sets_sharding:
        over = getattr(_local, "out", None)
        if over is None or over[2] is None or prim.multiple_results or over[0] != tuple(out.shape):
            return out
        mesh = over[2]  # (typed over the mesh a transposition rule gives its result)
    try:
        res = rule(mesh, out, *avals, **params)
    except ShardingTypeError as e:
        if isinstance(e, _UrError):  # a misuse of unreduced axes: raised even where layouts are lenient
            raise ShardingTypeError(str(e)) from None
        # Inside a transposition rule (or an out_sharding= block's intermediates) a layout the rules cannot
        # state leaves the value untyped: the cotangent (the result) is constrained to its type afterwards.
        if not (getattr(_local, "lenient", False) or (getattr(_local, "out", None) or (0,))[0] is None):
            raise
        return [_plain(o) for o in out] if prim.multiple_results else _plain(out)
    if res is None:
        return out
    if any(a.typed_sharding is not None and (a.typed_sharding.spec.unreduced or a.typed_sharding.spec.reduced) for a in avals) \
            or _res_has_ur(res, prim.multiple_results):
        res = _apply_ur(prim, mesh, avals, res, params)
    if _config.no_collectives:
        check_no_collectives(prim, avals, res, params)
    if prim.multiple_results:
        return [o if s is None else _make(o, s) for o, s in zip(out, res)]
    try:
        return _make(out, res)
    except _DuplicateSpec:  # JAX's wording: the operation, its operands' types and the result's
        shown = ", ".join(a.str_short() for a in avals)
        dims = ",".join(str(n) if e is None else f"{n}@{e}" if isinstance(e, str) else f"{n}@({','.join(e)})"
                        for n, e in zip(out.shape, res[1]))
        short = out.str_short()
        raise ShardingTypeError(f"{prim.name} operation with inputs: {shown} produces an illegally sharded result: "
                                f"{short[:short.index('[')]}[{dims}]") from None


def _spec_axes(spec: Sequence) -> set:
    return {ax for e in spec for ax in _axes(e)}


def _dims_of(spec: Sequence, axis: str) -> list:
    return [i for i, e in enumerate(spec) if axis in _axes(e)]


def check_no_collectives(prim: Any, avals: Sequence[ShapedArray], res: Any, params: dict) -> None:
    """jax 0.12's ``no_collectives``: refuse a typed result that needs a collective across a forbidden axis
    (an operand's split or unreduced axis gone from the result and not unreduced there; a reshard that moves
    an axis to another dimension; a ``dot_general`` contracting over the axis without an unreduced result)."""
    from ftrans.errors import ForbiddenCollectiveError

    forbidden = _config.no_collectives
    ins = [a.typed_sharding.spec for a in avals if a.typed_sharding is not None]
    outs = [r[1] for r in (res if prim.multiple_results else (res,)) if r is not None and r[0] is not None]
    if not ins or not outs:
        return
    name = prim.name
    if name == "sharding_constraint":  # a reshard, or the type an ``out_sharding=`` gives a result
        name = (getattr(params.get("sharding"), "_what", None) or "reshard").rpartition(".")[2]
    in_part = set().union(*(_spec_axes(s) for s in ins))
    in_unreduced = set().union(*(getattr(s, "unreduced", frozenset()) for s in ins))
    out_part = set().union(*(_spec_axes(s) for s in outs))
    out_unreduced = set().union(*(getattr(s, "unreduced", frozenset()) for s in outs))
    for r in sorted(forbidden, key=str):
        what = f"Collective across axis '{r}' is forbidden by `no_collectives`, but `{name}`"
        if r in in_unreduced and r not in out_unreduced:
            raise ForbiddenCollectiveError(f"{what} consumes unreduced axis '{r}' without keeping it unreduced in "
                                           "the output.")
        if "axes" in params and prim.name.startswith(("reduce_", "arg")) and r not in out_unreduced and r in out_part:
            reduced = {ax for a in avals[:1] if a.typed_sharding is not None
                       for d in params["axes"] for ax in _axes(a.typed_sharding.spec[d])}
            if r in reduced:  # (an out_sharding= split over the axis reduced over: jax 0.12's words)
                raise ForbiddenCollectiveError(f"Collective across axis '{r}' is forbidden by `no_collectives`, but "
                                               f"reduction over axis '{r}' does not mark it unreduced in the output.")
            natural = [e for i, e in enumerate(ins[0]) if i not in set(params["axes"])]
            if r in _spec_axes(natural) and _dims_of(natural, r) != _dims_of(outs[0], r):
                raise ForbiddenCollectiveError(f"{what.replace(f'`{name}`', '`reduce`')} changes the sharded "
                                               f"dimension of axis '{r}'.")
        if prim.name == "dot_general" and r not in out_unreduced:
            (lc, rc), _ = params["dimension_numbers"]
            contracted = {ax for a, dims in zip(avals, (lc, rc)) if a.typed_sharding is not None
                          for d in dims for ax in _axes(a.typed_sharding.spec[d])}
            if r in contracted:
                raise ForbiddenCollectiveError(f"{what} contracts over axis '{r}' without marking it unreduced in "
                                               "the output.")
        if r in in_part and r not in out_part and r not in out_unreduced:
            raise ForbiddenCollectiveError(f"{what} loses sharding axis '{r}' in the output without marking it "
                                           "unreduced.")
        if prim.name == "sharding_constraint" and r in in_part and r in out_part and \
                _dims_of(ins[0], r) != _dims_of(outs[0], r):
            raise ForbiddenCollectiveError(f"{what} changes the sharded dimension of axis '{r}'.")


def check_reshard_no_collectives(aval: ShapedArray, sharding: Any, what: str = "reshard") -> None:
    """``no_collectives``' check of an eager ``reshard`` (or ``out_sharding=`` of operation ``what``) of a value
    of type ``aval`` to ``sharding``."""
    from types import SimpleNamespace

    if aval.typed_sharding is None:
        return
    prim = SimpleNamespace(name="sharding_constraint", multiple_results=False)
    tagged = SimpleNamespace(_what=what)
    check_no_collectives(prim, [aval], (sharding.mesh, sharding.spec), {"sharding": tagged})


class _DuplicateSpec(ShardingTypeError):
    pass


class _UrError(ShardingTypeError):
    pass


# ----------------------------------------------------------------------------
# Unreduced and reduced mesh axes (JAX's): a value *unreduced* over axis ``x`` holds, on each device along
# ``x``, a partial sum still to be added (a reshard to a spec without ``x`` adds them: an all-reduce); one
# *reduced* over ``x`` is replicated along ``x`` and its cotangent is unreduced there.  Each primitive's
# ``ur`` rule gives its results' sets; a primitive without one refuses operands that have any.


def _res_has_ur(res: Any, multiple: bool) -> bool:
    for r in (res if multiple else (res,)):
        if r is not None and (getattr(r[1], "unreduced", None) or getattr(r[1], "reduced", None)):
            return True
    return False


def _flat_axes(spec: Sequence) -> frozenset:
    return frozenset(a for e in spec for a in _axes(e) if isinstance(a, str))


@contextmanager
def in_body(manual: frozenset) -> Any:
    """The ur rules applied inside a checked ``shard_map`` body whose manual axes are ``manual``: there an
    operand with no sharding type is replicated over the manual axes it neither varies nor is reduced along."""
    prev = getattr(_local, "body_manual", None)
    _local.body_manual = manual
    try:
        yield
    finally:
        _local.body_manual = prev


def nary_reduced(mesh: Any, *avals: ShapedArray) -> frozenset:
    """JAX's ``default_nary_reduced_rule``: the operands reduced over one set of axes, which no other
    (ranked, typed) operand is replicated or split over."""
    reduced_specs = {r for a in avals if (r := ur(a)[1])}
    if len(reduced_specs) > 1:
        raise ShardingTypeError(f"All inputs should be reduced across the same mesh axes. Got specs: "
                                f"{reduced_specs}")
    if not reduced_specs:
        return frozenset()
    (red,) = reduced_specs
    manual = getattr(_local, "body_manual", None)
    for a in avals:
        if a.typed_sharding is None and red:  # in a checked shard_map body: replicated = invariant, no set
            if manual and (manual - (getattr(a, "vma", _NONE) | ur(a)[0] | ur(a)[1])) & red:
                raise ShardingTypeError(f"Inputs cannot be replicated on the same axes that another input is "
                                        f"reduced on. Got input type: {_short(a)} and reduced spec: {set(red)}")
            continue
        if not a.shape:  # a scalar (JAX reshards those to it)
            continue
        u, r = ur(a)
        split = _flat_axes(spec_of(a))
        replicated = frozenset(mesh.axis_names) - (split | u | r)
        if replicated & red:
            raise ShardingTypeError(f"Inputs cannot be replicated on the same axes that another input is reduced "
                                    f"on. Got input type: {_short(a)} and reduced spec: {set(red)}")
        if split & red:
            raise ShardingTypeError(
                "Inputs cannot be sharded/varying on the same axes that another input is reduced on. Reshard the "
                "input which is reduced to be sharded on the mesh axes it is reduced on via "
                f"`jax.sharding.reshard(inp, jax.P(...))`. Got input type: {_short(a)} and reduced spec: {set(red)}")
    return red


def _not_implemented(what: str, name: str) -> Exception:
    from ftrans.errors import FtransNotImplementedError

    return FtransNotImplementedError(f"{what} rule for {name} is not implemented (as in JAX): reshard the operand "
                                     "to a spec without unreduced/reduced axes first")


def _ur_elementwise(name: str, mesh: Any, out_spec: Any, *avals: ShapedArray, **params: Any) -> tuple:
    red = nary_reduced(mesh, *avals)
    if any(ur(a)[0] for a in avals):  # (jax 0.12's error; jax 0.10/0.11 raised NotImplementedError)
        got = ", ".join(_short(a) for a in avals)
        raise ShardingTypeError(f"{name} is a non-linear operation and cannot accept "
                                f"{'input that is' if len(avals) == 1 else 'inputs that are'} unreduced. Got {got}")
    return frozenset(), red


def _ur_add(name: str, mesh: Any, out_spec: Any, x: ShapedArray, y: ShapedArray, **params: Any) -> tuple:
    """``add`` (and ``sub``, linear too: jax 0.12): operands unreduced along the same axes, or neither."""
    red = nary_reduced(mesh, x, y)
    op = "add" if name == "add_any" else name
    xu, yu = ur(x)[0], ur(y)[0]
    if xu and yu:
        if xu != yu:
            raise ShardingTypeError(f"lhs and rhs to `{op}` must be unreduced along the same mesh axes. Got "
                                    f"lhs={set(xu)}, rhs={set(yu)}")
        return xu, red
    if xu or yu:
        lhs, rhs = ("lhs", "rhs") if xu else ("rhs", "lhs")
        raise ShardingTypeError(f"{lhs} is unreduced while {rhs} is not. `{op}` operation does not allow this "
                                "because there will be implicit communication. Please reduce "
                                f"{lhs} via `reshard` before calling `{op}`.")
    return frozenset(), red


def _ur_mul(name: str, mesh: Any, out_spec: Any, x: ShapedArray, y: ShapedArray, **params: Any) -> tuple:
    red = nary_reduced(mesh, x, y)
    xu, yu = ur(x)[0], ur(y)[0]
    if xu and yu:
        raise ShardingTypeError(f"lhs and rhs to `mul` cannot be unreduced since mul is bilinear. Got "
                                f"lhs={set(xu)}, rhs={set(yu)}")
    if xu and xu != _scalar_as_reduced(y, xu):
        raise ShardingTypeError(f"RHS should be reduced along the same axes LHS is unreduced on. Got "
                                f"lhs={_short(x)} and rhs={_short(y)}")
    if yu and yu != _scalar_as_reduced(x, yu):
        raise ShardingTypeError(f"LHS should be reduced along the same axes RHS is unreduced on. Got "
                                f"lhs={_short(x)} and rhs={_short(y)}")
    u = xu or yu
    return (u, frozenset()) if u else (frozenset(), red)


def _scalar_as_reduced(a: ShapedArray, axes: frozenset) -> frozenset:
    """A rank-0 operand's reduced axes in a transposition: JAX reshards a scalar operand to the reduced axes
    of the others in the forward pass, so the cotangent's product by it is unreduced there."""
    r = ur(a)[1]
    if not r and not a.shape and getattr(_local, "lenient", False) and not ur(a)[0]:
        return axes
    return r


def _ur_dot_general(name: str, mesh: Any, out_spec: Any, lhs: ShapedArray, rhs: ShapedArray, *,
                    dimension_numbers: Any, **params: Any) -> tuple:
    if ur(lhs)[0] or ur(rhs)[0]:
        raise ShardingTypeError(f"lhs or rhs passed to dot_general cannot be unreduced. Got lhs={_short(lhs)} "
                                f"and rhs={_short(rhs)}")
    want = getattr(out_spec, "unreduced", frozenset())
    if not want:
        return frozenset(), frozenset()
    (lc, rc), _ = dimension_numbers
    ls, rs = spec_of(lhs), spec_of(rhs)
    lcs, rcs = tuple(ls[i] for i in lc), tuple(rs[i] for i in rc)
    if lcs != rcs:
        raise ShardingTypeError("lhs and rhs contracting dims should be sharded identically when out_sharding "
                                "provided to dot_general mentions unreduced_axes. Got "
                                f"lhs_contracting_spec={lcs}, rhs_contracting_spec={rcs}")
    if want != _flat_axes(lcs):
        raise ShardingTypeError(f"out_sharding's unreduced axes should be equal to the contracting specs. Got "
                                f"unreduced axes={set(want)} and contracting spec={lcs}")
    return want, frozenset()


def _ur_reduce_sum(name: str, mesh: Any, out_spec: Any, x: ShapedArray, *, axes: Sequence[int],
                   **params: Any) -> tuple:
    want = getattr(out_spec, "unreduced", frozenset())
    u, r = ur(x)
    if want:
        spec = spec_of(x)
        used = _flat_axes([spec[i] for i in axes]) | u
        if not want <= used:
            raise ShardingTypeError(f"out_sharding's unreduced axes should be in operand's specs that were summed "
                                    f"over. Got operand={_short(x)}, axes={tuple(axes)}, unreduced_spec={set(want)}")
        return want, r
    return u, r


def _ur_same(name: str, mesh: Any, out_spec: Any, x: ShapedArray, *rest: Any, **params: Any) -> tuple:
    """The operand's sets (transpose, slice, pad, squeeze, ...), or those the result's given type names (less
    the axes the result is split over: a reduced value is sliced locally)."""
    u, r = ur(x)
    split = _flat_axes(out_spec)
    return ((getattr(out_spec, "unreduced", None) or u) - split), ((getattr(out_spec, "reduced", None) or r) - split)


def _ur_reshape(name: str, mesh: Any, out_spec: Any, x: ShapedArray, **params: Any) -> tuple:
    u, r = ur(x)
    for kind, have, given in (("unreduced", u, getattr(out_spec, "unreduced", frozenset())),
                              ("reduced", r, getattr(out_spec, "reduced", frozenset()))):
        if given and given != have:
            if have:
                raise FtransValueError(f"out_sharding passed to reshape must be {kind} over the same mesh axes as "
                                       f"operand. Got out_sharding: {out_spec!r} and operand type: {_short(x)}")
            raise FtransValueError(f"out_sharding passed to `reshape` cannot contain {kind} axes. Got {out_spec!r}")
    return u, r


def _ur_constraint(name: str, mesh: Any, out_spec: Any, x: ShapedArray, **params: Any) -> tuple:
    """A reshard: the sets its sharding names (an unreduced operand resharded without them is reduced)."""
    return getattr(out_spec, "unreduced", frozenset()), getattr(out_spec, "reduced", frozenset())


def _ur_all_alike(what: str) -> Any:
    def rule(name: str, mesh: Any, out_spec: Any, *avals: ShapedArray, **params: Any) -> tuple:
        us = {u for a in avals if (u := ur(a)[0])}
        rs = {r for a in avals if (r := ur(a)[1])}
        if len(us) > 1:
            raise ShardingTypeError(f"All {what} should be unreduced along the same mesh axes. Got unreduced specs: "
                                    f"{us}")
        if len(rs) > 1:
            raise ShardingTypeError(f"All {what} should be reduced along the same mesh axes. Got reduced specs: "
                                    f"{rs}")
        return (us.pop() if us else frozenset()), (rs.pop() if rs else frozenset())

    return rule


def _ur_select(name: str, mesh: Any, out_spec: Any, which: ShapedArray, *cases: ShapedArray, **params: Any) -> tuple:
    typed_cases = [c for c in cases if c.typed_sharding is not None]
    return ur(typed_cases[0]) if typed_cases else (frozenset(), frozenset())


def _ur_dynamic_slice(name: str, mesh: Any, out_spec: Any, x: ShapedArray, *rest: Any, **params: Any) -> tuple:
    if ur(x)[0]:
        raise _not_implemented("unreduced", name)
    return frozenset(), ur(x)[1]


def _ur_dynamic_update_slice(name: str, mesh: Any, out_spec: Any, x: ShapedArray, update: ShapedArray,
                             *rest: Any, **params: Any) -> tuple:
    if x.typed_sharding is None:  # an untyped buffer (zeros ftrans's transforms stack slices into) takes the slices'
        return ur(update)
    for k, kind in ((0, "unreduced"), (1, "reduced")):
        if ur(x)[k] != ur(update)[k]:
            raise ShardingTypeError(f"dynamic_update_slice operand and update must be {kind} along the same axes. "
                                    f"Got operand sharding {_short(x)} and update sharding {_short(update)}.")
    return ur(x)


def _ur_under_out_sharding(name: str, mesh: Any, out_spec: Any, *avals: ShapedArray, **params: Any) -> tuple:
    """``.at[...].get/set(out_sharding=)``: JAX computes it in auto mode (its operands' types dropped), the
    result taking the type given; without one the sets are not handled (as JAX's)."""
    if getattr(_local, "out", None) is not None:
        return getattr(out_spec, "unreduced", frozenset()), getattr(out_spec, "reduced", frozenset())
    raise _not_implemented("unreduced/reduced", name)


UR_RULES: dict = {
    "dynamic_update_slice": _ur_dynamic_update_slice, "gather": _ur_under_out_sharding,
    "scatter": _ur_under_out_sharding, "scatter-add": _ur_under_out_sharding, "scatter_add": _ur_under_out_sharding,
    "scatter_sub": _ur_under_out_sharding,
    "add": _ur_add, "add_any": _ur_add, "sub": _ur_add, "neg": _ur_same, "mul": _ur_mul, "dot_general": _ur_dot_general,
    "reduce_sum": _ur_reduce_sum, "sharding_constraint": _ur_constraint, "reshape": _ur_reshape,
    "convert_element_type": _ur_same, "transpose": _ur_same, "squeeze": _ur_same, "expand_dims": _ur_same,
    "slice": _ur_same, "pad": _ur_same, "reduce_precision": _ur_same, "copy": _ur_same, "copy_p": _ur_same,
    "split": _ur_same, "broadcast_in_dim": _ur_same, "rev": _ur_same, "concatenate": _ur_all_alike("operands"), "select_n": _ur_select,
    "dynamic_slice": _ur_dynamic_slice, "optimization_barrier": None,
}


def _apply_ur(prim: Any, mesh: Any, avals: Sequence[ShapedArray], res: Any, params: dict) -> Any:
    """``res`` (the sharding rule's result(s)) with the unreduced/reduced axes of the primitive's ur rule."""
    name = prim.name
    if prim.higher_order:  # its results have the types its body gives them
        return res
    rule = UR_RULES.get(name)
    if rule is None:
        if getattr(prim.sharding_rule, "elementwise", False) and not prim.multiple_results:
            rule = _ur_elementwise
        elif name in UR_RULES:  # passes each operand's sets to its result
            if prim.multiple_results:
                return [r if r is None else (r[0], with_ur(r[1], *ur(a))) for r, a in zip(res, avals)]
            return res
        else:
            raise _not_implemented("unreduced/reduced", name)
    if prim.multiple_results:
        outs = []
        for r in res:
            if r is None:
                outs.append(r)
                continue
            u, rd = rule(name, mesh, r[1], *avals, **params)
            outs.append((r[0], with_ur(r[1], u, rd)))
        return outs
    u, rd = rule(name, mesh, res[1], *avals, **params)
    return res[0], with_ur(res[1], u, rd)


def _plain(a: ShapedArray) -> ShapedArray:
    return ShapedArray(a.shape, a.dtype, a.weak_type) if a.typed_sharding is not None else a


def _make(out: ShapedArray, res: Any) -> ShapedArray:
    mesh, spec = res
    if mesh is None:
        return _plain(out)
    seen: set = set()
    for e in spec:
        for ax in _axes(e):
            if ax in seen:
                raise _DuplicateSpec(
                    f"the result type {out.str_short()} with spec {_show(spec)} names mesh axis {ax!r} more than "
                    "once (produces an illegally sharded result); reshard an operand first")
            seen.add(ax)
    return typed(out, mesh, spec)


# ----------------------------------------------------------------------------
# Rules shared by many primitives


def elementwise(name: str) -> Any:
    """Operands of one shape (rank-0 ones excepted): each dimension's entries must agree where both are split
    (JAX's broadcasting rule; size-1 unsplit dimensions are neutral)."""

    def rule(mesh: Any, out: Any, *avals: ShapedArray, **params: Any) -> Any:
        if name == "select_n":  # the cases must agree exactly (JAX's rule; the predicate is not checked)
            cases = [a for a in avals[1:] if a.typed_sharding is not None]
            if any(c.typed_sharding.spec != cases[0].typed_sharding.spec for c in cases[1:]):
                shown = ", ".join(_short(a) for a in avals[1:])
                raise ShardingTypeError(f"select cases must have the same shardings, got [{shown}]; reshard the "
                                        "cases to one layout")
        ranked = [a for a in avals if a.shape]
        if not ranked:
            return mesh, ()
        specs = [spec_of(a) for a in ranked]
        result = []
        for i in range(len(ranked[0].shape)):
            col = [s[i] for s in specs]
            if all(c == col[0] for c in col):
                result.append(col[0])
                continue
            r = None
            for c in col:
                if c is None:
                    continue
                if r is None:
                    r = c
                elif r != c:
                    shown = ", ".join(_show(s) for s in specs)
                    raise ShardingTypeError(f"{name} got incompatible shardings for broadcasting: {shown}.")
            result.append(r)
        if getattr(out, "shape", None) is not None and len(out.shape) != len(result):
            return None
        return mesh, tuple(result)

    rule.elementwise = True  # type: ignore[attr-defined]  # (the sharded eager path broadcasts for it)
    return rule


def same_as_first(mesh: Any, out: Any, x: ShapedArray, *rest: Any, **params: Any) -> Any:
    """The result is laid out as the first operand (an identity on layouts)."""
    return mesh, spec_of(x)


def to_edtype(mesh: Any, out: Any, x: ShapedArray, **params: Any) -> Any:
    """To an extended dtype: laid out as its representation, whose trailing element axes go (JAX's rule)."""
    return mesh, spec_of(x)[:len(out.shape)]


def from_edtype(mesh: Any, out: Any, x: ShapedArray, **params: Any) -> Any:
    """From an extended dtype: its representation laid out as it, the element axes unsplit."""
    return mesh, spec_of(x) + (None,) * (len(out.shape) - len(x.shape))


def rng_bit_generator(mesh: Any, out: Any, key: ShapedArray, *, shape: Sequence[int], **params: Any) -> Any:
    """The new key keeps the key's type; the bits are unsplit (``out_sharding=`` lays them out afterwards)."""
    return [(mesh, spec_of(key)), (mesh, (None,) * len(shape))]


def reduce_axes(mesh: Any, out: Any, x: ShapedArray, *rest: Any, axes: Sequence[int], **params: Any) -> Any:
    """A reduction drops the reduced dimensions' entries (``out_sharding=`` of ``lax.reduce_sum`` aside)."""
    over, _ = _override(out)
    if over is not None:
        return mesh, over
    drop = set(axes)
    return mesh, tuple(e for i, e in enumerate(spec_of(x)) if i not in drop)


def reduce_sum(mesh: Any, out: Any, x: ShapedArray, *, axes: Sequence[int], **params: Any) -> Any:
    """``reduce_sum``: as any reduction; inside an einsum's ``out_sharding=`` naming unreduced axes, a sum over
    dimensions split over them leaves the partial sums unadded (JAX's unreduced result)."""
    res = reduce_axes(mesh, out, x, axes=axes, **params)
    over, inside = _override(out)
    einsum_over = getattr(_local, "out", None) if inside and over is None else None
    want = getattr(einsum_over[1], "unreduced", None) if einsum_over and einsum_over[0] is None else None
    if want:
        spec = spec_of(x)
        used = _flat_axes([spec[i] for i in axes]) | ur(x)[0]
        if want <= used:
            return res[0], with_ur(res[1], want, ur(x)[1])
    return res


def broadcast_in_dim(mesh: Any, out: Any, x: ShapedArray, *dyn: Any, shape: Sequence[int],
                     broadcast_dimensions: Sequence[int], **params: Any) -> Any:
    over, _ = _override(out)
    if over is not None:  # (a transposition rule's: JAX's ``out_sharding`` of the broadcast)
        return mesh, over
    spec = [None] * len(shape)
    for e, d, n in zip(spec_of(x), broadcast_dimensions, x.shape):
        spec[d] = e if n == shape[d] else None
    return mesh, tuple(spec)


def transpose(mesh: Any, out: Any, x: ShapedArray, *, permutation: Sequence[int]) -> Any:
    spec = spec_of(x)
    return mesh, tuple(spec[p] for p in permutation)


def squeeze(mesh: Any, out: Any, x: ShapedArray, *, dimensions: Sequence[int]) -> Any:
    drop = {d % max(x.ndim, 1) for d in dimensions}
    return mesh, tuple(e for i, e in enumerate(spec_of(x)) if i not in drop)


def expand_dims(mesh: Any, out: Any, x: ShapedArray, *, dimensions: Sequence[int]) -> Any:
    it = iter(spec_of(x))
    new = {d % len(out.shape) for d in dimensions}
    return mesh, tuple(None if i in new else next(it) for i in range(len(out.shape)))


def _reshape_error(x: ShapedArray, new_sizes: Sequence[int]) -> ShardingTypeError:
    return ShardingTypeError(
        f"This reshape is not supported. Please specify the sharding of the output via the `out_sharding` "
        f"argument of lax.reshape. Got operand type: {_short(x)}, new sizes: {tuple(new_sizes)}")


def reshape(mesh: Any, out: Any, x: ShapedArray, *, new_sizes: Sequence[int], dimensions: Any = None,
            **params: Any) -> Any:
    """Dimensions are matched in groups of equal products; as in JAX, one group may split a dimension or merge
    several (the others are unchanged, size-1 dimensions aside), and within it the split entries must sit on
    its major dimensions and divide them (JAX's split/merge rules)."""
    over, _ = _override(out)
    if over is not None:
        return mesh, over
    spec = spec_of(x)
    if all(e is None for e in spec):
        return mesh, (None,) * len(new_sizes)
    if dimensions is not None:
        raise _reshape_error(x, new_sizes)
    old = [(n, e) for n, e in zip(x.shape, spec) if n != 1]
    if [n for n, _ in old] == [n for n in new_sizes if n != 1]:  # only size-1 dimensions come or go (JAX's rule)
        kept = iter(e for _, e in old)
        return mesh, tuple(None if n == 1 else next(kept) for n in new_sizes)
    if any(n == 1 and e is not None for n, e in zip(x.shape, spec)):
        raise _reshape_error(x, new_sizes)
    new = [n for n in new_sizes if n != 1]
    out_spec: list = []
    changed = 0  # groups that split or merge dimensions: JAX types a reshape that changes one
    i = j = 0
    while i < len(old) or j < len(new):
        gi, gj = [old[i]] if i < len(old) else [], [new[j]] if j < len(new) else []
        i, j = i + len(gi), j + len(gj)
        po = gi[0][0] if gi else 1
        pn = gj[0] if gj else 1
        while po != pn:
            if po < pn and i < len(old):
                gi.append(old[i])
                po *= old[i][0]
                i += 1
            elif pn < po and j < len(new):
                gj.append(new[j])
                pn *= new[j]
                j += 1
            else:
                raise _reshape_error(x, new_sizes)
        if len(gi) != 1 or len(gj) != 1:
            changed += 1
            if changed > 1 or (len(gi) > 1 and len(gj) > 1):  # two splits/merges, or a split and merge at once
                raise _reshape_error(x, new_sizes)
        axes = [a for _, e in gi for a in _axes(e)]
        if not axes:
            out_spec.extend([None] * len(gj))
            continue
        # split entries must be the leading ones of the group (a merge keeps them major)
        seen_none = False
        for _, e in gi:
            if e is None:
                seen_none = True
            elif seen_none:
                raise _reshape_error(x, new_sizes)
        it = iter(axes)
        pending = next(it, None)
        for n in gj:
            dim_axes = []
            while pending is not None and n > 1:
                size = mesh.shape[pending]
                if n % size:
                    raise _reshape_error(x, new_sizes)
                n //= size
                dim_axes.append(pending)
                pending = next(it, None)
            out_spec.append(None if not dim_axes else (dim_axes[0] if len(dim_axes) == 1 else tuple(dim_axes)))
        if pending is not None:
            raise _reshape_error(x, new_sizes)
    full = iter(out_spec)
    return mesh, tuple(None if n == 1 else next(full) for n in new_sizes)


def _varying_shape(name: str, x: ShapedArray, out_shape: Sequence[int], mesh: Any) -> tuple:
    spec = spec_of(x)
    for n_in, n_out, e in zip(x.shape, out_shape, spec):
        if n_in != n_out and e is not None and n_out % _size(mesh, e):
            raise ShardingTypeError(
                f"{name} on sharded dims where out dim ({n_out}) is not divisible by mesh axes ({_size(mesh, e)}) "
                f"with spec ({e}) is not implemented. Got input type={_short(x)} and output shape="
                f"{tuple(out_shape)}")
    return spec


def slicing(name: str) -> Any:
    """``slice``/``dynamic_slice``/``pad``: the operand's spec, where each changed split dimension still divides."""

    def rule(mesh: Any, out: Any, x: ShapedArray, *rest: Any, **params: Any) -> Any:
        return mesh, _varying_shape(name, x, out.shape, mesh)

    return rule


def concatenate(mesh: Any, out: Any, *xs: ShapedArray, dimension: int) -> Any:
    """Operands laid out alike (JAX's message otherwise); a wholly unsplit operand (untyped or replicated: a
    batching rule's broadcast operand, which JAX's batching types split) joins split ones."""
    specs = [spec_of(x) for x in xs]
    split_specs = {tuple(s) for s in specs if any(e is not None for e in s)}
    if len(split_specs) > 1:
        shown = ", ".join(_show(s) for s in specs)
        raise ShardingTypeError(f"All operands should have the same sharding. Got shardings {shown}")
    result = []
    for col in zip(*specs):
        split = {c for c in col if c is not None}
        if len(split) > 1:
            shown = ", ".join(_show(s) for s in specs)
            raise ShardingTypeError(f"All operands should have the same sharding. Got shardings {shown}")
        result.append(split.pop() if split else None)
    return mesh, tuple(result)


def dot_general(mesh: Any, out: Any, lhs: ShapedArray, rhs: ShapedArray, *, dimension_numbers: Any,
                **params: Any) -> Any:
    over, inside = _override(out)
    if over is not None:
        return mesh, over
    (lc, rc), (lb, rb) = dimension_numbers
    ls, rs = spec_of(lhs), spec_of(rhs)
    lbs, rbs = tuple(ls[i] for i in lb), tuple(rs[i] for i in rb)
    lcs, rcs = tuple(ls[i] for i in lc), tuple(rs[i] for i in rc)
    for l_, r_ in zip(lbs, rbs):
        if l_ is not None and r_ is not None and l_ != r_:
            raise ShardingTypeError(f"dot_general requires lhs batch dimensions and rhs batch dimensions to have the "
                                    f"consistent sharding, got {_show(lbs)} and {_show(rbs)}.")
    loose = inside or getattr(_local, "lenient", False)
    # (jax 0.11 dropped jax 0.10's "requires contracting dimensions to have consistent sharding" check: two
    # differently sharded contracting dimensions are sharded, which the check below reports)
    for l_, r_ in zip(lcs, rcs):
        if l_ is not None and r_ is not None and not loose:
            raise ShardingTypeError(
                "Contracting dimensions are sharded and it is ambiguous how the output should be sharded. Please "
                "specify the output sharding via the `out_sharding` parameter. Got "
                f"lhs_contracting_spec={_show(lcs)} and rhs_contracting_spec={_show(rcs)}")
    einsum_over = getattr(_local, "out", None) if inside else None  # (an einsum's: no result shape given)
    want = getattr(einsum_over[1], "unreduced", None) if einsum_over and einsum_over[0] is None else None
    if want and (_flat_axes(lcs) | _flat_axes(rcs)) & want:  # an einsum's contraction left unreduced
        if lcs != rcs:
            raise _UrError("lhs and rhs contracting dims should be sharded identically when out_sharding "
                                    "provided to dot_general mentions unreduced_axes. Got "
                                    f"lhs_contracting_spec={lcs}, rhs_contracting_spec={rcs}")
        if _flat_axes(lcs) == want:
            batch = tuple(lbs[k] if lbs[k] is not None else rbs[k] for k in range(len(lb)))
            lfree = tuple(e for i, e in enumerate(ls) if i not in set(lc) | set(lb))
            rfree = tuple(e for i, e in enumerate(rs) if i not in set(rc) | set(rb))
            return mesh, with_ur(batch + lfree + rfree, want)
    batch = tuple(lbs[k] if lbs[k] is not None else rbs[k] for k in range(len(lb)))
    lfree = tuple(e for i, e in enumerate(ls) if i not in set(lc) | set(lb))
    rfree = tuple(e for i, e in enumerate(rs) if i not in set(rc) | set(rb))
    spec = batch + lfree + rfree
    if loose:  # a cotangent: an axis named twice is dropped (the cotangent is constrained afterwards)
        seen: set = set()
        kept = []
        for e in spec:
            if any(a in seen for a in _axes(e)):
                kept.append(None)
            else:
                seen.update(_axes(e))
                kept.append(e)
        spec = tuple(kept)
    else:
        seen = set()
        for e in spec:
            for a in _axes(e):
                if a in seen:
                    raise ShardingTypeError(
                        f"dot_general operation with inputs: {_short(lhs)}, {_short(rhs)} produces an illegally "
                        f"sharded result: spec {_show(spec)} names mesh axis {a!r} twice; pass out_sharding= or "
                        "reshard an operand")
                seen.add(a)
    return mesh, spec


def sort(mesh: Any, out: Any, *avals: ShapedArray, dimension: int, **params: Any) -> Any:
    """``sort``: every typed operand unsplit along the sorted dimension, all laid out alike; the results are
    laid out as the operands (an untyped operand, such as ``argsort``'s iota, follows the typed ones)."""
    typed_specs = [spec_of(a) for a in avals if a.typed_sharding is not None]
    for a in avals:
        if a.typed_sharding is not None and spec_of(a)[dimension] is not None:
            raise ShardingTypeError(f"Arguments to sort must be unsharded over the sorting dimension. Got arg "
                                    f"sharding={TypeSharding.of(a.typed_sharding)!r} and sorting dimension={dimension}")
    for sp in typed_specs[1:]:
        if sp != typed_specs[0]:
            raise ShardingTypeError("Arguments to sort must have equal shardings, got: "
                                    + " ".join(_show(t) for t in typed_specs))
    return [(mesh, typed_specs[0])] * len(avals)


def top_k(mesh: Any, out: Any, x: ShapedArray, *, axis: int, **params: Any) -> Any:
    """``top_k``: the operand unsplit along the axis it selects from; both results laid out as it."""
    spec = spec_of(x)
    if spec[axis] is not None:
        raise ShardingTypeError("The input should be unsharded over the axis along which to compute the top_k "
                                f"values. Got input type={_short(x)} and axis={axis}")
    return [(mesh, spec)] * 2


def bitcast_convert_type(mesh: Any, out: Any, x: ShapedArray, *, new_dtype: Any) -> Any:
    """The operand's layout; a narrower result dtype adds an unsplit minor dimension, a wider one drops the
    minor dimension's entry (JAX's rule)."""
    spec = spec_of(x)
    if len(out.shape) > len(spec):
        return mesh, (*spec, None)
    if len(out.shape) < len(spec):
        return mesh, spec[:-1]
    return mesh, spec


def without_dim(aval: ShapedArray, dim: int, sliced: ShapedArray) -> ShapedArray:
    """``sliced`` (``aval`` less dimension ``dim``: a scan's slice, a vmapped example) with ``aval``'s type
    less that dimension's entry; untyped when ``aval`` is."""
    if aval.typed_sharding is None:
        return sliced
    spec = spec_of(aval)
    return typed(sliced, aval.typed_sharding.mesh, with_ur(spec[:dim] + spec[dim + 1:], *ur(aval)))


def stacked(aval: ShapedArray, length: int) -> ShapedArray:
    """``aval`` with a leading (stacking) dimension of ``length`` in front: a scan's stacked value of a
    per-step ``aval``, that dimension unsplit; untyped when ``aval`` is (``without_dim``'s inverse)."""
    out = ShapedArray((length,) + tuple(aval.shape), aval.dtype, aval.weak_type)
    if aval.typed_sharding is None:
        return out
    return typed(out, aval.typed_sharding.mesh, with_ur((None, *spec_of(aval)), *ur(aval)))


def _body_types(avals: Sequence[ShapedArray]) -> list:
    return [(a.typed_sharding.mesh, a.typed_sharding.spec) if a.typed_sharding is not None else None for a in avals]


def cond(mesh: Any, out: Any, index: ShapedArray, *ops: ShapedArray, branches: Any) -> Any:
    """``cond``: the results have the types the branches give them (JAX requires the branches to agree)."""
    return _body_types(branches[0].out_avals)


def while_loop(mesh: Any, out: Any, *avals: ShapedArray, body_jaxpr: Any, **params: Any) -> Any:
    """``while``: the results have the types the body gives its carry."""
    return _body_types(body_jaxpr.out_avals)


def scan(mesh: Any, out: Any, *avals: ShapedArray, jaxpr: Any, num_carry: int, **params: Any) -> Any:
    """``scan``: the carry has the type the body gives it; the stacked outputs are the body's per-step types
    with an unsplit leading (stacking) dimension, as JAX's."""
    outs = _body_types(jaxpr.out_avals)
    return outs[:num_carry] + [None if t is None else (t[0], with_ur((None, *t[1]), t[1].unreduced, t[1].reduced))
                               for t in outs[num_carry:]]


def cumulative(mesh: Any, out: Any, x: ShapedArray, *, axis: int, **params: Any) -> Any:
    """``cumsum`` and friends: the operand unsplit along the scanned axis; the result laid out as it."""
    spec = spec_of(x)
    if spec[axis] is not None:
        raise ShardingTypeError(f"Input should be unsharded over the axis being reduced. Got input type="
                                f"{_short(x)} and axis={axis}")
    return mesh, spec


def sharding_constraint(mesh: Any, out: Any, x: ShapedArray, *, sharding: Any, **params: Any) -> Any:
    """A reshard: the type its sharding names over Explicit axes (the operand's, when the mesh has none)."""
    spec = explicit_spec(sharding.spec, sharding.mesh, len(x.shape))
    if spec is None:  # over a mesh of no Explicit axes (inside auto_axes, say): the partitioner chooses
        return None, ()
    return sharding.mesh, with_ur(spec, sharding.spec.unreduced, sharding.spec.reduced)


def is_explicit(sharding: Any) -> bool:
    return isinstance(sharding, NamedSharding) and AxisType.Explicit in sharding.mesh.axis_types


# ----------------------------------------------------------------------------
# gather / scatter: JAX's rules (a result typed only when no collective is needed to compute it)


def _dn(dn: Any, name: str) -> tuple:
    return tuple(getattr(dn, name, ()) or ())


def gather(mesh: Any, out: Any, operand: ShapedArray, indices: ShapedArray, *, dimension_numbers: Any,
           slice_sizes: Sequence[int], **params: Any) -> Any:
    """A result dimension taken from the operand (a window dimension, sliced whole or unsplit) keeps the
    operand's entry; one taken from the indices keeps theirs (a batch dimension of both: whichever is split,
    which must agree). Sliced operand dimensions and the index vector must be unsplit; otherwise the layout
    is ambiguous and ``.at[...].get(out_sharding=)`` must say it."""
    over, inside = _override(out)
    if over is not None:
        return mesh, over
    ospec, ispec = list(spec_of(operand)), list(spec_of(indices))
    if all(e is None for e in ospec) and all(e is None for e in ispec):
        return mesh, (None,) * len(out.shape)
    offset, collapsed = _dn(dimension_numbers, "offset_dims"), _dn(dimension_numbers, "collapsed_slice_dims")
    start_map = _dn(dimension_numbers, "start_index_map")
    obatch = _dn(dimension_numbers, "operand_batching_dims")
    ibatch = _dn(dimension_numbers, "start_indices_batching_dims")
    ok = all(slice_sizes[d] == operand.shape[d] or ospec[d] is None for d in start_map)
    ok = ok and all(ispec[i] is None or ospec[o] is None or ispec[i] == ospec[o] for o, i in zip(obatch, ibatch))
    ok = ok and all(e is None for k, e in enumerate(ispec) if k not in ibatch)
    if not ok and inside:  # under `.at[...].get(out_sharding=)`: JAX's auto_axes, the result laid out after
        return mesh, (None,) * len(out.shape)
    if not ok:
        raise ShardingTypeError(
            "Use `.at[...].get(out_sharding=)` to provide output PartitionSpec for the gather indexing as out "
            "sharding could not be resolved unambiguously (or would require collectives on inputs). Got "
            f"operand={_short(operand)}, indices={_short(indices)}")
    for o, i in zip(obatch, ibatch):
        ispec[i] = ispec[i] if ispec[i] is not None else ospec[o]
    windows = iter(d for d in range(len(operand.shape)) if d not in collapsed and d not in obatch)
    from_indices = iter(ispec)  # (the index vector dimension, last, is never reached)
    spec = []
    for k in range(len(out.shape)):
        spec.append(ospec[next(windows)] if k in offset else next(from_indices))
    return mesh, tuple(spec)


def _updates_batching_dims(ibatch: tuple, window: tuple, updates_rank: int, indices_rank: int) -> list:
    """The updates dimensions matching the indices' batching dimensions: the updates' scatter dimensions (those
    not window dimensions) follow the indices' dimensions other than the index vector (last), in order."""
    scatter_dims = [d for d in range(updates_rank) if d not in window]
    return [scatter_dims[i] for i in ibatch if i < len(scatter_dims)]


def scatter(mesh: Any, out: Any, operand: ShapedArray, indices: ShapedArray, updates: ShapedArray, *,
            dimension_numbers: Any, **params: Any) -> Any:
    """The operand's layout, its unsplit dimensions taking the updates' (or indices') entries where those
    lay the same slices out; ambiguous layouts need ``.at[...].set(out_sharding=)``."""
    over, inside = _override(out)
    if over is not None:
        return mesh, over
    ospec, ispec, uspec = list(spec_of(operand)), list(spec_of(indices)), list(spec_of(updates))
    if all(e is None for e in ospec + ispec + uspec):
        return mesh, (None,) * len(out.shape)
    window = _dn(dimension_numbers, "update_window_dims")
    inserted = _dn(dimension_numbers, "inserted_window_dims")
    obatch = _dn(dimension_numbers, "operand_batching_dims")
    ibatch = _dn(dimension_numbers, "scatter_indices_batching_dims")
    ubatch = _updates_batching_dims(ibatch, window, len(updates.shape), len(indices.shape))
    owindow = [d for d in range(len(operand.shape)) if d not in inserted and d not in obatch]

    def agree(*es: Any) -> bool:
        split = {e for e in es if e is not None}
        return len(split) <= 1

    ok = all(agree(ospec[o], ispec[i], uspec[u]) for o, i, u in zip(obatch, ibatch, ubatch))
    ok = ok and all((updates.shape[u] == operand.shape[o] and uspec[u] == ospec[o])
                    or (uspec[u] is None and ospec[o] is None) for u, o in zip(window, owindow))
    ok = ok and all(ospec[d] is None for d in inserted)
    ok = ok and all(e is None for k, e in enumerate(uspec) if k not in ubatch and k not in window)
    ok = ok and all(e is None for k, e in enumerate(ispec[:-1]) if k not in ibatch)
    ok = ok and (not ispec or ispec[-1] is None)
    if not ok and inside:  # under `.at[...].set(out_sharding=)` & co.: laid out after, as JAX's auto_axes
        return mesh, (None,) * len(out.shape)
    if not ok:
        raise ShardingTypeError(
            "Use `.at[...].set/add/mul/...(out_sharding=)` to provide output PartitionSpec for the scatter update "
            "as out sharding could not be resolved unambiguously (or would require collectives on inputs). Got "
            f"operand={_short(operand)}, indices={_short(indices)}, updates={_short(updates)}")
    spec = list(ospec)
    for o, i, u in zip(obatch, ibatch, ubatch):
        if spec[o] is None:
            spec[o] = ispec[i] if ispec[i] is not None else uspec[u]
    for u, o in zip(window, owindow):
        if spec[o] is None:
            spec[o] = uspec[u]
    return mesh, tuple(spec)


# ----------------------------------------------------------------------------
# Linear algebra, FFT, convolution: JAX's rules


def linalg(name: str, ranks: Sequence[int]) -> Any:
    """A batched matrix operation: each operand split over its leading (batch) dimensions only, all alike; the
    results keep that batch layout, their matrix dimensions unsplit."""

    def rule(mesh: Any, out: Any, *avals: ShapedArray, **params: Any) -> Any:
        batches = []
        for i, (a, r) in enumerate(zip(avals, ranks)):
            s = spec_of(a)
            b, rest = s[:len(s) - r], s[len(s) - r:]
            if any(e is not None for e in rest):
                raise ShardingTypeError(f"Input {i} to {name} must be unsharded on non-batch dimensions, but got "
                                        f"{PartitionSpec(*s)!r}.")
            batches.append(tuple(b))
        b = _batch_layout(name, batches)
        if isinstance(out, (list, tuple)):
            return [(mesh, b + (None,) * (len(o.shape) - len(b))) for o in out]
        return mesh, b + (None,) * (len(out.shape) - len(b))

    return rule


def _batch_layout(name: str, batches: list) -> tuple:
    """The operands' common batch layout: where one leaves a batch dimension unsplit (an untyped operand, such
    as an identity built for ``inv``) the others' entry is taken; two different splits raise."""
    out = list(batches[0])
    for b in batches[1:]:
        for k, e in enumerate(b):
            if e is not None and out[k] is not None and e != out[k]:
                raise ShardingTypeError(f"All inputs to {name} must have the same batch sharding, but got "
                                        f"{[PartitionSpec(*b) for b in batches]}.")
            out[k] = out[k] if out[k] is not None else e
    return tuple(out)


def triangular_solve(mesh: Any, out: Any, a: ShapedArray, b: ShapedArray, *, left_side: bool,
                     transpose_a: bool, **params: Any) -> Any:
    sa, sb = spec_of(a), spec_of(b)
    batch = _batch_layout("triangular_solve", [tuple(sa[:-2]), tuple(sb[:-2])])
    am, bm = sa[-2:], sb[-2:]
    if am[left_side ^ transpose_a] is not None:
        raise ShardingTypeError(f"triangular solve input `a` must be unsharded on the contracting axis, but got "
                                f"{PartitionSpec(*sa)!r} with left_side={left_side} and transpose_a={transpose_a}.")
    if bm[not left_side] is not None:
        raise ShardingTypeError(f"triangular solve input `b` must be unsharded on the contracting axis, but got "
                                f"{PartitionSpec(*sb)!r} with left_side={left_side} and transpose_a={transpose_a}.")
    tail = (am[transpose_a], bm[1]) if left_side else (bm[0], am[not transpose_a])
    return mesh, batch + tail


def conv(mesh: Any, out: Any, lhs: ShapedArray, rhs: ShapedArray, *, dimension_numbers: Any,
         **params: Any) -> Any:
    """A convolution of a typed input by an unsplit kernel, its feature dimension unsplit: the result laid out
    as the input (each changed dimension must stay divisible by its split); otherwise ``out_sharding=``."""
    over, _ = _override(out)
    if over is not None:
        return mesh, over
    ls = spec_of(lhs)
    lhs_feature = dimension_numbers.lhs_spec[1] if dimension_numbers is not None else 1
    if any(e is not None for e in spec_of(rhs)) or ls[lhs_feature] is not None:
        raise ShardingTypeError("Please specify the output sharding via `out_sharding` parameter of "
                                "`conv_general_dilated`")
    return mesh, _varying_shape("conv_general_dilated", lhs, out.shape, mesh)


def windowed(name: str) -> Any:
    """``reduce_window`` and its monoid forms: the operands' spec, where each changed split dimension still
    divides (JAX's rule); several operands are laid out alike."""

    def rule(mesh: Any, out: Any, *avals: ShapedArray, **params: Any) -> Any:
        if isinstance(out, (list, tuple)):
            n = len(out)
            specs = {spec_of(a) for a in avals[:n] if a.typed_sharding is not None}
            if len(specs) > 1:
                raise ShardingTypeError(f"{name}: all operands must be laid out alike, got "
                                        f"{', '.join(_short(a) for a in avals[:n])}")
            typed = next((a for a in avals[:n] if a.typed_sharding is not None), avals[0])
            return [(mesh, _varying_shape(name, typed, o.shape, mesh)) for o in out]
        return mesh, _varying_shape(name, avals[0], out.shape, mesh)

    return rule
