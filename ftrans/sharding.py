"""JAX's ``jax.sharding``: meshes of devices, partition specs, and shardings built from them.

``Mesh``, ``PartitionSpec`` (``P``), ``NamedSharding``, ``SingleDeviceSharding``
and ``AxisType`` live in ``ftrans/core/sharding.py``; this module adds the
helpers that reach devices (``make_mesh``) and the current-mesh context.
"""

from __future__ import annotations

import contextlib
import functools
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ftrans.core import sharding as _core_sharding
from ftrans.core.sharding import (
    AbstractDevice,
    AbstractMesh,
    AxisType,
    Mesh,
    NamedSharding,
    P,
    PartitionSpec,
    Sharding,
    SingleDeviceSharding,
    as_mesh,
    foreign_axis_type,
    set_mesh,
    use_mesh,
)
from ftrans.core.sharding import (
    abstract_stack as _abstract_stack,
)
from ftrans.core.sharding import (
    get_mesh as _current_mesh,
)
from ftrans.errors import FtransTypeError, FtransValueError

__all__ = ["AxisType", "Mesh", "NamedSharding", "P", "PartitionSpec", "Sharding", "SingleDeviceSharding",
           "make_mesh", "use_mesh", "set_mesh", "get_mesh", "get_abstract_mesh", "reshard",
           "AbstractMesh", "AbstractDevice", "ManualAxisType", "use_abstract_mesh", "auto_axes", "explicit_axes",
           "make_single_device_sharding"]


def make_mesh(axis_shapes: Sequence[int], axis_names: Sequence[str], axis_types: Any = None, *,
              devices: Sequence[Any] | None = None) -> Mesh:
    """A mesh of ``prod(axis_shapes)`` devices (by default the first of ``ftrans.devices()``) with named axes.

    As in JAX 0.10, ``axis_types`` defaults to ``Explicit`` for every axis (see
    docs/differences.md: ftrans partitions Explicit axes as Auto ones).
    """
    from ftrans.devices import devices as all_devices

    if not all(isinstance(s, (int, np.integer)) for s in axis_shapes):
        raise FtransValueError(f"`axis_shapes` passed to `make_mesh` should be a sequence of ints. Got "
                               f"{axis_shapes}")
    shape = tuple(int(s) for s in axis_shapes)
    names = (axis_names,) if isinstance(axis_names, str) else tuple(axis_names)
    if len(shape) != len(names):
        raise FtransValueError(f"make_mesh: {len(shape)} axis sizes {shape} but {len(names)} axis names {names}; "
                               "give one name per axis")
    devs = list(devices) if devices is not None else all_devices()
    need = int(np.prod(shape)) if shape else 1
    if need > len(devs):
        raise FtransValueError(
            f"make_mesh: a mesh of shape {dict(zip(names, shape))} needs {need} devices, but only {len(devs)} "
            f"are available ({devs[0].platform if devs else 'no'} devices); use a smaller mesh, or start the "
            f"process with XLA_FLAGS=--xla_force_host_platform_device_count={need} to split the CPU")
    if devices is not None and need != len(devs):
        raise FtransValueError(f"make_mesh: devices= lists {len(devs)} devices for a mesh of {need}; they must be "
                               "equal")
    if axis_types is None:
        axis_types = (AxisType.Explicit,) * len(names)
    elif isinstance(axis_types, AxisType) or foreign_axis_type(axis_types):
        axis_types = (axis_types,)
    if len(tuple(axis_types)) != len(names):
        raise FtransValueError(f"Number of axis names should match the number of axis_types. Got axis_names="
                               f"{names} and axis_types={tuple(axis_types)}: give one AxisType per axis")
    # JAX's axis types (from a user's jax code) stand for ftrans's of the same name, as AbstractMesh takes them
    axis_types = tuple(AxisType[t.name] if foreign_axis_type(t) else t for t in axis_types)
    for t in axis_types:
        if not isinstance(t, AxisType):
            raise FtransTypeError(f"make_mesh: axis_types must be AxisType values, got {t!r}")
    arr = np.empty(len(devs[:need]), dtype=object)
    arr[:] = devs[:need]
    return Mesh(arr.reshape(shape), names, tuple(axis_types))


_EMPTY_MESH: list = []


def get_mesh() -> Mesh:
    """JAX's ``jax.sharding.get_mesh`` (also ``ftrans.get_mesh``): the mesh in context.

    Returns:
        The mesh of the innermost ``use_mesh`` / ``with mesh:``, else the one ``set_mesh`` installed, else
        the empty mesh (``.empty`` is True; ``set_mesh`` of it sets none).

    Examples:
        >>> import ftrans
        >>> ftrans.get_mesh().empty
        True
        >>> mesh = ftrans.make_mesh((1,), ("x",))
        >>> with ftrans.sharding.use_mesh(mesh):
        ...     print(ftrans.get_mesh().axis_names)
        ('x',)
    """
    mesh = _current_mesh()
    if mesh is not None:
        return mesh
    if not _EMPTY_MESH:
        _EMPTY_MESH.append(Mesh(np.empty((), dtype=object), ()))
    return _EMPTY_MESH[0]


def get_abstract_mesh() -> Any:
    """JAX's ``jax.sharding.get_abstract_mesh`` (also ``ftrans.get_abstract_mesh``): the abstract mesh in
    context.

    Returns:
        The innermost ``use_abstract_mesh`` mesh, else the current mesh's abstract mesh, else an empty
        AbstractMesh (``.empty`` is True), as in JAX; inside a shard_map body, the body's mesh.

    Examples:
        >>> import ftrans
        >>> ftrans.get_abstract_mesh().empty
        True
        >>> with ftrans.sharding.use_mesh(ftrans.make_mesh((1,), ("x",))):
        ...     print(ftrans.get_abstract_mesh().axis_names)
        ('x',)
    """
    from ftrans.transforms.shard_map import body_abstract_mesh, body_depth

    s = _abstract_stack()
    if s and s[-1][1] >= body_depth():  # entered inside the innermost shard_map body (or outside all)
        return s[-1][0]
    body = body_abstract_mesh()  # inside a shard_map body: its mesh, the manual axes typed Manual (as JAX's)
    if body is not None:
        return body
    if s:
        return s[-1][0]
    mesh = _current_mesh()
    return mesh.abstract_mesh if mesh is not None else AbstractMesh((), ())


_core_sharding.current_abstract_mesh = get_abstract_mesh


def reshard(xs: Any, out_shardings: Any) -> Any:
    """Lay ``xs`` out as ``out_shardings`` (a sharding, a bare spec under the current mesh, or a tree of them):
    a copy between devices eagerly, a sharding constraint inside ``jit``."""
    from ftrans.lax import with_sharding_constraint

    return with_sharding_constraint(xs, out_shardings, _what="reshard")


# ----------------------------------------------------------------------------
# Abstract meshes, axis-type scopes, and the rest of JAX's jax.sharding names


class ManualAxisType:
    """The mesh axes along which a value inside ``shard_map`` varies, is unreduced, or is reduced (JAX's
    ``ManualAxisType``): sets of axis names, compared by content (a body value's own is ``typeof(x).mat``);
    ``varying`` may share no axis with the other two.  As JAX's, equal values are one interned object (a
    pickle or a deep copy gives back the same object)."""

    __slots__ = ("varying", "unreduced", "reduced", "__weakref__")
    _interned: weakref.WeakValueDictionary = weakref.WeakValueDictionary()

    def __new__(cls, *, varying: Any = frozenset(), unreduced: Any = frozenset(),
                reduced: Any = frozenset()) -> ManualAxisType:
        varying, unreduced, reduced = frozenset(varying), frozenset(unreduced), frozenset(reduced)
        key = (cls, varying, unreduced, reduced)
        self = cls._interned.get(key)
        if self is not None:
            return self
        for name, other in (("unreduced", unreduced), ("reduced", reduced)):
            if varying & other:
                raise FtransValueError(f"varying and {name} cannot have common mesh axes. Got varying={varying} "
                                       f"and {name}={other}")
        self = object.__new__(cls)
        object.__setattr__(self, "varying", varying)
        object.__setattr__(self, "unreduced", unreduced)
        object.__setattr__(self, "reduced", reduced)
        cls._interned[key] = self
        return self

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("ManualAxisType is immutable; use .update(...)")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("ManualAxisType is immutable; use .update(...)")

    def __reduce__(self) -> tuple:
        return (_manual_axis_type, (type(self), self.varying, self.unreduced, self.reduced))

    def __copy__(self) -> ManualAxisType:
        return self

    def __deepcopy__(self, memo: Any) -> ManualAxisType:
        return self

    def _key(self) -> tuple:
        return (self.varying, self.unreduced, self.reduced)

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, ManualAxisType) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"ManualAxisType(varying={self.varying}, unreduced={self.unreduced}, reduced={self.reduced})"

    def update(self, **kwargs: Any) -> ManualAxisType:
        for k in ("varying", "unreduced", "reduced"):
            kwargs.setdefault(k, getattr(self, k))
        return ManualAxisType(**kwargs)

    def to_ct_mat(self) -> ManualAxisType:
        return self.update(unreduced=self.reduced, reduced=self.unreduced)

    @property
    def empty(self) -> bool:
        return not (self.varying or self.unreduced or self.reduced)

    @property
    def vur(self) -> frozenset:
        return self.varying | self.unreduced | self.reduced


def _manual_axis_type(cls: type, varying: frozenset, unreduced: frozenset, reduced: frozenset) -> ManualAxisType:
    return cls(varying=varying, unreduced=unreduced, reduced=reduced)

    def invarying(self, mesh: Any) -> frozenset:
        """The manual axes of ``mesh`` this value is the same along (neither varying, unreduced nor reduced)."""
        return frozenset(getattr(mesh, "manual_axes", ())) - self.vur




def use_abstract_mesh(mesh: Any) -> Any:
    """Make ``mesh`` (an AbstractMesh) what ``get_abstract_mesh()`` returns inside the ``with`` block
    (JAX's ``jax.sharding.use_abstract_mesh``, also ``ftrans.use_abstract_mesh``).

    It names no devices, so a bare PartitionSpec still needs a concrete mesh (``use_mesh``/``set_mesh``) to
    lay values out.  As JAX's, it cannot change the size of the abstract mesh in context (a ValueError on
    entering).

    Args:
        mesh: an ``AbstractMesh`` (a concrete ``Mesh`` stands for its abstract mesh).

    Returns:
        A context manager (usable as a decorator) whose ``with`` value is the abstract mesh.

    Examples:
        >>> import ftrans
        >>> from ftrans.sharding import AbstractMesh
        >>> with ftrans.use_abstract_mesh(AbstractMesh((2,), ("x",))):
        ...     print(ftrans.get_abstract_mesh().axis_sizes)
        (2,)
    """
    mesh = as_mesh(mesh)  # a user's jax mesh or abstract mesh: ftrans's twin
    if isinstance(mesh, Mesh):
        mesh = mesh.abstract_mesh
    if not isinstance(mesh, AbstractMesh):
        raise FtransTypeError(f"use_abstract_mesh: expected an AbstractMesh, got {type(mesh).__name__}")
    return _UseAbstractMesh(mesh)


class _UseAbstractMesh(contextlib.ContextDecorator):
    """``use_abstract_mesh(mesh)``'s context (entered in the user's ``with`` line, which its errors name)."""

    def __init__(self, mesh: AbstractMesh):
        self.mesh = mesh

    def __enter__(self) -> AbstractMesh:
        from ftrans.transforms.shard_map import body_depth

        mesh = self.mesh
        prev = get_abstract_mesh()
        if not prev.empty and not mesh.empty and prev.size != mesh.size:
            raise FtransValueError(
                f"use_abstract_mesh cannot change the size of the mesh. Got new mesh: {mesh} with size={mesh.size} "
                f"and prev mesh: {prev} with size={prev.size}; an abstract mesh may rename or retype the axes of the "
                "mesh in context, not change its number of devices")
        _abstract_stack().append((mesh, body_depth()))
        return mesh

    def __exit__(self, *exc: Any) -> None:
        _abstract_stack().pop()


def make_single_device_sharding(device: Any, *, memory_kind: str | None = None) -> SingleDeviceSharding:
    """``SingleDeviceSharding(device)``: the whole array on ``device`` (only the default memory kind)."""
    if memory_kind not in (None, "device"):
        raise NotImplementedError(f"make_single_device_sharding: memory_kind={memory_kind!r} (ftrans places arrays "
                                  "in the device's default memory only)")
    return SingleDeviceSharding(device)


def _mesh_of(shardings: Any) -> Any:
    from ftrans.core import pytrees as tree_util

    found = None
    for sh in tree_util.tree_leaves(shardings, is_leaf=lambda x: isinstance(x, (NamedSharding, PartitionSpec))):
        if isinstance(sh, NamedSharding):
            if found is not None and found != sh.mesh:
                raise FtransValueError(f"Shardings passed to auto_axes should have the same mesh. Got one mesh "
                                       f"{found} and another {sh.mesh}")
            found = sh.mesh
    return found


def _retyped(what: str, axes: Any, axis_type: AxisType, shardings: Any = None) -> Mesh | None:
    """The context mesh (or the shardings' one) with ``axes`` (default: all) given ``axis_type``."""
    cur, given = _current_mesh(), _mesh_of(shardings)
    if cur is not None and given is not None and cur != given:
        raise FtransValueError(f"Context mesh {cur} must match the mesh passed to shardings {given}. Recommended "
                               "approach is to use `ftrans.set_mesh` context manager.")
    mesh = cur if cur is not None else given
    if mesh is None:
        return None
    axes = mesh.axis_names if axes is None else (axes if isinstance(axes, tuple) else (axes,))
    for a in axes:
        if a not in mesh.axis_names:
            raise FtransValueError(f"{what}: axis {a!r} is not an axis of the mesh {mesh}")
    types = dict(zip(mesh.axis_names, mesh.axis_types))
    from ftrans.transforms.shard_map import manual_axes_here

    manual = manual_axes_here()  # inside a shard_map body: its manual axes
    for a in axes:
        if types[a] == AxisType.Manual or a in manual:
            raise NotImplementedError(
                "Going from `Manual` AxisType to `Auto` or `Explicit` AxisType is not allowed. Please file a bug "
                f"at https://github.com/jax-ml/jax/issues with your use case ({what} to {axis_type.name}: axis "
                f"{a!r} is manual here)")
        types[a] = axis_type
    return Mesh(mesh.devices, mesh.axis_names, tuple(types[n] for n in mesh.axis_names))


def _cast(tree: Any, mesh: Mesh) -> Any:
    """Traced leaves with sharding types retyped over ``mesh`` (same devices and axes, other axis types): the
    entries naming axes that are not Explicit there leave the type (JAX's mesh_cast)."""
    from ftrans.core import pytrees as tree_util
    from ftrans.core.prims.sharding import sharding_constraint_p
    from ftrans.core.trace import Tracer

    def one(x: Any) -> Any:
        if not isinstance(x, Tracer):
            # A concrete array (``auto_axes`` called outside ``jit``): the same layout, named over the retyped
            # mesh, so its type is read from that mesh's axis types.
            from ftrans.core.array import Array

            sh = getattr(x, "sharding", None) if isinstance(x, Array) else None
            if (isinstance(sh, NamedSharding) and sh.mesh != mesh and sh.mesh.axis_names == mesh.axis_names
                    and sh.mesh.devices.shape == mesh.devices.shape and (sh.mesh.devices == mesh.devices).all()):
                from ftrans.devices import device_put

                return device_put(x, NamedSharding(mesh, sh.spec))
            return x
        sh = x.aval.typed_sharding
        if sh is None or sh.mesh == mesh:
            return x
        spec = sh.spec
        if not (spec.unreduced or spec.reduced):  # (the entries naming axes not Explicit there go, as JAX's)
            from ftrans.core.sharding_rules import explicit_spec

            spec = P(*(explicit_spec(spec, mesh, len(x.aval.shape)) or ()))
        target = NamedSharding(mesh, spec)
        target._type_cast = True
        return sharding_constraint_p.bind(x, sharding=target)

    return tree_util.tree_map(one, tree)


def auto_axes(f: Callable | None = None, /, *, axes: Any = None, out_sharding: Any = None) -> Any:
    """Run ``f`` with ``axes`` of the current mesh (default: all) typed ``Auto``, and lay its result out as
    ``out_sharding`` (given here or as the keyword ``out_sharding=`` of the call).  ftrans partitions Explicit
    axes as Auto ones (docs/differences.md), so the values are ``reshard(f(...), out_sharding)``."""
    if f is None:
        return lambda g: auto_axes(g, axes=axes, out_sharding=out_sharding)

    @functools.wraps(f)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        if out_sharding is None:
            if "out_sharding" not in kwargs:
                raise FtransTypeError("Missing required keyword argument: 'out_sharding'")
            target = kwargs.pop("out_sharding")
        else:
            target = out_sharding
        mesh = _retyped("auto_axes", axes, AxisType.Auto, target)
        if mesh is None:
            return f(*args, **kwargs)
        with use_mesh(mesh):
            args, kwargs = _cast((args, kwargs), mesh)  # the axes made Auto leave the values' types
            out = f(*args, **kwargs)
        return reshard(out, target)

    return wrapped


def explicit_axes(f: Callable | None = None, /, *, axes: Any = None, in_sharding: Any = None) -> Any:
    """Lay ``f``'s arguments out as ``in_sharding`` (given here or as the keyword ``in_sharding=`` of the call)
    and run ``f`` with ``axes`` of the current mesh (default: all) typed ``Explicit``; a current mesh is
    required (``set_mesh``/``use_mesh``)."""
    if f is None:
        return lambda g: explicit_axes(g, axes=axes, in_sharding=in_sharding)

    @functools.wraps(f)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        if in_sharding is None:
            if "in_sharding" not in kwargs:
                raise FtransTypeError("Missing required keyword argument: 'in_sharding'")
            target = kwargs.pop("in_sharding")
        else:
            target = in_sharding
        if _current_mesh() is None:
            raise FtransValueError("Context mesh cannot be empty. Please use `ftrans.set_mesh` API to enter into a "
                                   "mesh context when using `explicit_axes` API.")
        outer = _current_mesh()
        mesh = _retyped("explicit_axes", axes, AxisType.Explicit)
        with use_mesh(mesh):
            args = reshard(args, target)  # typed over the axes made Explicit
            out = f(*args, **kwargs)
        return _cast(out, outer)  # back to the outer mesh's axis types

    return wrapped


class _NoCollectives:
    """``sharding.no_collectives`` (jax 0.12): forbid collectives across some mesh axes in Explicit mode.

    ``with no_collectives({"x"}):`` makes any operation whose sharding types would need communication
    across mesh axis ``x`` raise ``ftrans.errors.ForbiddenCollectiveError`` when it is staged: a reduction or
    reshard that drops ``x`` from the result without marking the result unreduced over ``x``, a reshard
    that moves ``x`` to another dimension, a ``dot_general`` contracting over ``x`` into a result that is
    not unreduced over ``x``, or an operation consuming a value unreduced over ``x`` whose result is not.
    The setting is per thread and part of ``jit``'s cache keys (a function is traced again under it);
    ``no_collectives.value`` is the set in force in the calling thread.

    Examples:
        >>> import numpy as np, ftrans
        >>> from ftrans.sharding import AxisType, NamedSharding, PartitionSpec as P, no_collectives
        >>> mesh = ftrans.make_mesh((1,), ("x",), axis_types=(AxisType.Explicit,))
        >>> x = ftrans.device_put(np.ones((4, 2), np.float32), NamedSharding(mesh, P("x")))
        >>> with ftrans.set_mesh(mesh), no_collectives({"x"}):
        ...     ftrans.jit(lambda v: v * 2)(x).shape  # elementwise: no communication
        (4, 2)
        >>> with ftrans.set_mesh(mesh), no_collectives({"x"}):
        ...     try:
        ...         ftrans.jit(lambda v: v.sum(0))(x)  # the sum over the split dimension drops "x"
        ...     except ftrans.errors.ForbiddenCollectiveError as e:
        ...         print(str(e).splitlines()[0])
        Collective across axis 'x' is forbidden by `no_collectives`, but `reduce_sum` loses sharding axis 'x' in the output without marking it unreduced.
        >>> no_collectives.value
        frozenset()
    """

    def __call__(self, new_val: set | frozenset) -> Any:
        """Forbid collectives across the mesh axes ``new_val`` inside the ``with`` block.

        Args:
            new_val: a set or frozenset of mesh axis names (any other type is a ``TypeError``).

        Returns:
            A context manager.
        """
        from ftrans.core.config import config_context

        return config_context("no_collectives")(new_val)

    @property
    def value(self) -> frozenset:
        from ftrans.core.config import config

        return config.no_collectives

    def __repr__(self) -> str:
        return f"no_collectives(value={self.value!r})"


no_collectives = _NoCollectives()
__all__ += ["no_collectives"]
