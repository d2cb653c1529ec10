"""Shardings: how an array's elements are laid out over devices (JAX's ``jax.sharding``).

* :class:`Mesh` — devices arranged in an n-dimensional grid with named axes.
* :class:`PartitionSpec` (``P``) — for each dimension of an array, the mesh
  axis (or axes, or ``None``) it is split over.
* :class:`NamedSharding` — a mesh and a spec: dimension ``d`` of the array is
  cut into as many blocks as the product of the sizes of ``spec[d]``'s axes.
* :class:`SingleDeviceSharding` — the whole array on one device.

These are plain Python values (hashable, compared by content); the lowering
layer turns them into Shardy annotations and into the runtime's own sharding
objects (``lowering/compat.py``).  The *current mesh* (``use_mesh`` /
``set_mesh``) is a thread-local stack read by ``with_sharding_constraint``
and ``reshard`` when given a bare ``PartitionSpec``.
"""

from __future__ import annotations

import collections
import enum
import functools
import itertools
import threading
import weakref
from collections.abc import Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from ftrans.errors import FtransNotImplementedError, FtransTypeError, FtransValueError

__all__ = ["AxisType", "Mesh", "PartitionSpec", "P", "NamedSharding", "SingleDeviceSharding", "Sharding",
           "use_mesh", "set_mesh", "get_mesh", "from_runtime", "as_sharding", "as_spec", "as_mesh", "check_spec",
           "IndivisibleError", "DuplicateSpecError"]


class IndivisibleError(FtransValueError):
    """A sharded dimension's size is not a multiple of the number of blocks its sharding cuts it into (JAX's
    ``IndivisibleError``, a ``ValueError``)."""


class DuplicateSpecError(FtransValueError):
    """A PartitionSpec names one mesh axis more than once (JAX's ``DuplicateSpecError``)."""


class AxisType(enum.Enum):
    """How a mesh axis is sharded: chosen by the compiler (``Auto``), fixed in the types (``Explicit``),
    or handled by the user's per-device code (``Manual``, inside ``shard_map``)."""

    Auto = enum.auto()
    Explicit = enum.auto()
    Manual = enum.auto()

    def __repr__(self) -> str:
        return self.name

    def __eq__(self, other: object) -> bool:
        # JAX's member of the same name is this one (a jax mesh's axis types are its ftrans twin's)
        return self is other or (foreign_axis_type(other) and other.name == self.name)  # type: ignore[attr-defined]

    __hash__ = enum.Enum.__hash__


class _Unconstrained:
    """``PartitionSpec.UNCONSTRAINED``: the compiler may choose this dimension's sharding."""

    _inst = None

    def __new__(cls) -> _Unconstrained:
        if cls._inst is None:
            cls._inst = super().__new__(cls)
        return cls._inst

    def __repr__(self) -> str:
        return "UNCONSTRAINED"


def _canon_entry(e: Any) -> Any:
    if e is None or isinstance(e, (str, _Unconstrained)):
        return e
    if type(e).__name__ == "UnconstrainedSingleton" and type(e).__module__.split(".")[0] == "jax":
        return PartitionSpec.UNCONSTRAINED  # JAX's spec entry, in a spec of JAX's being converted
    if isinstance(e, (tuple, list)):
        for a in e:
            if isinstance(a, (tuple, list)):
                raise FtransValueError(f"A tuple inside PartitionSpec cannot contain a nested tuple: got {a!r} "
                                       f"inside {tuple(e)!r}; list the mesh axes of one dimension flat")
            if not isinstance(a, str):
                raise FtransTypeError(f"PartitionSpec entries must be a mesh axis name (str), a tuple of names, or "
                                      f"None; got {a!r} inside {tuple(e)!r}")
        # As JAX's: () is None and a one-name tuple is that name
        return None if not e else e[0] if len(e) == 1 else tuple(e)
    raise FtransTypeError(f"PartitionSpec entries must be a mesh axis name (str), a tuple of names, or None; "
                          f"got {e!r} of type {type(e).__name__}")


def _no_unreduced(what: str) -> None:
    raise FtransNotImplementedError(
        f"{what}: JAX's unreduced/reduced mesh axes (a value whose blocks along those axes are partial sums "
        "still to be added, or a replicated value whose cotangent will be) are not modelled by ftrans; keep "
        "the result reduced (leave out_sharding's unreduced set empty, or reshard to a spec without one)")


def _check_mesh_unreduced(mesh: Any, spec: Any) -> None:
    """JAX's checks of a sharding's unreduced/reduced axes: axes of the mesh, each of type Explicit."""
    types = dict(zip(mesh.axis_names, getattr(mesh, "axis_types", None) or ()))
    for kind, axes in (("Unreduced", spec.unreduced), ("Reduced", spec.reduced)):
        for u in axes:
            if u not in mesh.axis_names:
                raise FtransValueError(f"{kind} axes {u} is not found in mesh.axis_names={tuple(mesh.axis_names)}. "
                                       f"Got pspec={spec!r}")
            if types.get(u) in (AxisType.Auto, AxisType.Manual):
                raise FtransValueError(
                    f"{kind} axes can only refer to mesh axes that is of type `Explicit`. Got {kind.lower()} axes: "
                    f"{set(axes)} and mesh: {mesh}")


def _spec_entries(x: Any) -> tuple:
    """The entries of a PartitionSpec (ftrans's or JAX's), refusing JAX's unreduced/reduced axes."""
    if getattr(x, "unreduced", None) or getattr(x, "reduced", None):
        _no_unreduced(repr(x))
    return tuple(getattr(x, "partitions", x))


def _ur_set(v: Any, what: str) -> frozenset:
    if isinstance(v, frozenset):
        out = v
    elif isinstance(v, set):
        out = frozenset(v)
    else:
        raise FtransTypeError(f"{what} argument of PartitionSpec should of type `frozenset` or `set`. Got type {v}")
    if None in out:
        raise FtransValueError(f"{what} cannot contain None. All elements in {what} should refer to the mesh axes.")
    return out


def _check_ur(entries: tuple, unreduced: frozenset, reduced: frozenset) -> None:
    """JAX's checks of a spec's unreduced/reduced sets: disjoint, and sharing no axis with the partitions."""
    if unreduced & reduced:
        raise FtransValueError("`unreduced` and `reduced` argument to PartitionSpec cannot overlap. Got unreduced: "
                               f"{unreduced} and reduced: {reduced}")
    for e in entries:
        for a in (e if isinstance(e, tuple) else (e,)):
            if a in unreduced:
                raise FtransValueError(f"partitions cannot overlap with unreduced axes passed to PartitionSpec. Got "
                                       f"partitions: {entries} and unreduced axes: {unreduced}")
            if a in reduced:
                raise FtransValueError(f"partitions cannot overlap with reduced axes passed to PartitionSpec. Got "
                                       f"partitions: {entries} and reduced axes: {reduced}")


_MEMORY_KINDS = ("device", "pinned_host", "unpinned_host")  # the memory kinds JAX names

_specs: dict = {}  # interned PartitionSpecs (without unreduced/reduced axes), by their canonical entries


class PartitionSpec(tuple):
    """For each array dimension, the mesh axes it is split over (``None``: not split).

    Trailing dimensions without an entry are not split; ``P('x', None)`` and
    ``P('x')`` describe the same layout and compare equal.
    """

    UNCONSTRAINED = _Unconstrained()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        raise FtransTypeError("Subclassing `jax.P` is prohibited: PartitionSpec is final, as in JAX (wrap one in "
                              f"a class of your own instead of deriving {cls.__name__} from it)")

    def __new__(cls, *entries: Any, unreduced: Any = frozenset(), reduced: Any = frozenset()) -> PartitionSpec:
        canon = tuple(_canon_entry(e) for e in entries)
        plain = not unreduced and not reduced and type(unreduced) is frozenset and type(reduced) is frozenset
        if plain:  # as JAX's: equal specs made over again are one object
            got = _specs.get(canon)
            if got is not None:
                return got
        self = super().__new__(cls, canon)
        if plain:
            if len(_specs) < 4096:
                _specs[canon] = self
            return self
        if unreduced or reduced or type(unreduced) is not frozenset or type(reduced) is not frozenset:
            # JAX's unreduced/reduced axes: kept on the spec (compared, hashed, printed); a sharding made of such
            # a spec is refused where ftrans would lay a value out by it (see NamedSharding)
            unreduced, reduced = _ur_set(unreduced, "unreduced"), _ur_set(reduced, "reduced")
            _check_ur(tuple(self), unreduced, reduced)
            if unreduced:
                self.unreduced = unreduced
            if reduced:
                self.reduced = reduced
        return self

    def _norm(self) -> tuple:
        t = tuple((e[0] if len(e) == 1 else (e or None)) if isinstance(e, tuple) else e for e in self)
        while t and t[-1] is None:
            t = t[:-1]
        return t

    def __eq__(self, other: Any) -> bool:
        if isinstance(other, PartitionSpec):
            return self._norm() == other._norm() and self._ur() == other._ur()
        if isinstance(other, tuple) or type(other).__name__ in ("P", "PartitionSpec"):  # jax's, or a tuple
            try:
                return self == as_spec(other) if not isinstance(other, tuple) else (
                    not self._ur()[0] and not self._ur()[1] and self._norm() == PartitionSpec(*other)._norm())
            except (FtransTypeError, TypeError, NotImplementedError, ValueError):
                return False
        return NotImplemented

    def _ur(self) -> tuple:
        return self.unreduced, self.reduced

    def __ne__(self, other: Any) -> bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __hash__(self) -> int:
        if self.unreduced or self.reduced:
            return hash((self._norm(), self.unreduced, self.reduced))
        return hash(self._norm())

    def __repr__(self) -> str:
        # JAX's form: a one-entry spec keeps its tuple comma, P('x',).
        pr = ", ".join(repr(e) for e in self) + ("," if len(self) == 1 else "")
        if not self.unreduced and not self.reduced:
            return "P(" + pr + ")"
        ur = ", ".join(f"{k}={set(v)!r}" for k, v in (("unreduced", self.unreduced), ("reduced", self.reduced)) if v)
        return "P(" + ("" if not pr else f"{pr} " if pr.endswith(",") else f"{pr}, ") + ur + ")"

    def __reduce__(self) -> Any:
        if self.unreduced or self.reduced:
            return (functools.partial(PartitionSpec, unreduced=self.unreduced, reduced=self.reduced), tuple(self))
        return (PartitionSpec, tuple(self))

    def __add__(self, other: Any) -> Any:
        """JAX's: a spec (the sets joined) or a tuple appended (refused when this spec names sets)."""
        if isinstance(other, PartitionSpec):
            return PartitionSpec(*self, *other, unreduced=self.unreduced | other.unreduced,
                                 reduced=self.reduced | other.reduced)
        if isinstance(other, tuple):
            for kind in ("unreduced", "reduced"):
                if getattr(self, kind):
                    raise FtransTypeError(f"other {other} cannot be of instance `tuple` when self {self!r} has {kind} "
                                          "in `__add__` of PartitionSpec.")
            return PartitionSpec(*self, *other)
        return NotImplemented

    def __radd__(self, other: Any) -> Any:
        if not isinstance(other, tuple):
            return NotImplemented
        for kind in ("unreduced", "reduced"):
            if getattr(self, kind):
                raise FtransTypeError(f"other {other} cannot be of instance `tuple` when self {self!r} has {kind} in "
                                      "`__radd__` of PartitionSpec.")
        return PartitionSpec(*other, *self)

    def update(self, partitions: Any = None, unreduced: Any = None, reduced: Any = None) -> PartitionSpec:
        """A copy with the partitions, the unreduced axes or the reduced axes replaced (JAX's ``P.update``)."""
        return PartitionSpec(*(tuple(self) if partitions is None else partitions),
                             unreduced=self.unreduced if unreduced is None else unreduced,
                             reduced=self.reduced if reduced is None else reduced)

    def to_ct_spec(self) -> PartitionSpec:
        """The cotangent's spec: unreduced and reduced axes swapped (JAX's)."""
        return self.update(unreduced=self.reduced, reduced=self.unreduced) if self.unreduced or self.reduced \
            else self

    @property
    def partitions(self) -> tuple:
        """The entries as a tuple (JAX's ``PartitionSpec.partitions``)."""
        return tuple(self)

    # JAX's unreduced/reduced axes: ftrans's specs name none
    unreduced = frozenset()
    reduced = frozenset()

    def axes(self) -> list[str]:
        """Every mesh axis named, in order."""
        out = []
        for e in self:
            if isinstance(e, str):
                out.append(e)
            elif isinstance(e, tuple):
                out.extend(e)
        return out


P = PartitionSpec


def _mesh_key(devices: Any, axis_names: Any, axis_types: Any) -> tuple | None:
    """The key a Mesh of these arguments is interned under (as its ``_key``), or None where they are not plain
    (the constructor then checks them)."""
    try:
        devs = np.asarray(devices, dtype=object) if not isinstance(devices, np.ndarray) else devices
        names = (axis_names,) if isinstance(axis_names, str) else tuple(axis_names)
        if axis_types is None:
            types = (AxisType.Auto,) * len(names)
        elif isinstance(axis_types, AxisType):
            types = (axis_types,) * len(names)
        else:
            types = tuple(axis_types)
        if not all(isinstance(t, AxisType) for t in types) or devs.ndim != len(names):
            return None
        return (tuple(d.id for d in devs.flat) if devs.ndim else (), devs.shape, names, types)
    except Exception:  # noqa: BLE001 - anything unusual goes to the constructor's checks
        return None


_meshes: weakref.WeakValueDictionary = weakref.WeakValueDictionary()  # interned meshes, by ``_key``


class Mesh:
    """Devices laid out in a grid whose axes have names (``Mesh(devices_ndarray, ('x', 'y'))``).

    Usable as a context manager (``with mesh:``), which makes it the current mesh.
    """

    def __new__(cls, devices: Any = None, axis_names: Any = (), axis_types: Any = None) -> Mesh:
        # As JAX's: equal meshes made over again are one object (the first, while it lives)
        key = _mesh_key(devices, axis_names, axis_types) if cls is Mesh and devices is not None else None
        if key is not None:
            m = _meshes.get(key)
            if m is not None:
                return m
        return super().__new__(cls)

    def __init__(self, devices: Any, axis_names: Any, axis_types: Any = None):
        if "_key" in self.__dict__:  # an existing mesh handed back by __new__
            return
        devs = np.asarray(devices, dtype=object) if not isinstance(devices, np.ndarray) else devices
        if isinstance(axis_names, str):
            axis_names = (axis_names,)
        axis_names = tuple(axis_names)
        if None in axis_names:
            raise FtransValueError(f"Mesh axis names cannot be None. Got axis_names={axis_names}; name every axis "
                                   "with a str")
        if devs.ndim != len(axis_names):
            raise FtransValueError(
                "Mesh requires the ndim of its first argument (`devices`) to equal the length of its second "
                f"argument (`axis_names`), but got devices.ndim == {devs.ndim} (shape {devs.shape}) and "
                f"len(axis_names) == {len(axis_names)} ({axis_names}); give one name per dimension")
        if len(set(axis_names)) != len(axis_names):
            raise FtransValueError(f"Mesh: axis names must be distinct, got {axis_names}")
        # a 0-d devices array: the empty mesh, as JAX's. Entries that are not devices (stand-ins, as JAX's Mesh
        # takes them: a mesh only laid out, never run on) are keyed by themselves, apart from devices' ids.
        ids = [d.id if hasattr(d, "id") else ("not a device", d) for d in devs.flat] if devs.ndim else []
        if len(set(ids)) != len(ids):
            raise FtransValueError(f"Mesh: a device appears more than once in the mesh (ids {ids})")
        if axis_types is None:
            axis_types = (AxisType.Auto,) * len(axis_names)
        elif isinstance(axis_types, AxisType):
            axis_types = (axis_types,) * len(axis_names)
        axis_types = tuple(axis_types)
        if len(axis_types) != len(axis_names):
            raise FtransValueError(f"Mesh: {len(axis_types)} axis_types for {len(axis_names)} axes")
        self.devices = devs
        self.axis_names = axis_names
        self.axis_types = axis_types
        self._key = (tuple(ids), devs.shape, axis_names, axis_types)
        self._runtime: Any = None  # the runtime's mesh, made once by the lowering layer
        self._runtime_shardings: dict = {}  # spec -> the runtime's sharding over it (one object per layout)
        if type(self) is Mesh:
            _meshes[self._key] = self

    @property
    def shape(self) -> dict:
        # an OrderedDict, as JAX's (what ``print(mesh.shape)`` shows)
        return collections.OrderedDict(zip(self.axis_names, self.devices.shape))

    @property
    def axis_sizes(self) -> tuple:
        return tuple(self.devices.shape)

    @property
    def size(self) -> int:
        return int(self.devices.size) if self.devices.ndim else 0

    @property
    def device_ids(self) -> np.ndarray:
        return np.vectorize(lambda d: d.id, otypes=[int])(self.devices)

    @property
    def devices_flat(self) -> list:
        return list(self.devices.flat)

    @property
    def _flat_devices_tuple(self) -> tuple:
        """The devices in mesh order (JAX's name, which its sharded arrays' ``_device_assignment`` matches)."""
        return tuple(self.devices.flat)

    @property
    def empty(self) -> bool:
        return self.size == 0

    @property
    def abstract_mesh(self) -> AbstractMesh:
        """The mesh's axis sizes, names and types without its devices."""
        am = self.__dict__.get("_abstract")
        if am is None:
            d = self.devices.flat[0] if self.size else None
            dev = AbstractDevice(d.device_kind, getattr(d, "num_cores", None), d.platform) if d is not None else None
            am = self._abstract = AbstractMesh(self.axis_sizes, self.axis_names, self.axis_types, abstract_device=dev)
        return am

    @property
    def shape_tuple(self) -> tuple:
        return tuple(zip(self.axis_names, self.devices.shape))

    def _of_type(self, t: AxisType) -> tuple:
        return tuple(n for n, a in zip(self.axis_names, self.axis_types) if a == t)

    auto_axes = property(lambda self: self._of_type(AxisType.Auto))
    explicit_axes = property(lambda self: self._of_type(AxisType.Explicit))
    manual_axes = property(lambda self: self._of_type(AxisType.Manual))
    are_all_axes_auto = property(lambda self: all(t == AxisType.Auto for t in self.axis_types))
    are_all_axes_explicit = property(lambda self: all(t == AxisType.Explicit for t in self.axis_types))
    are_all_axes_manual = property(lambda self: all(t == AxisType.Manual for t in self.axis_types))

    @property
    def is_scalar(self) -> bool:
        return self.size == 1 and not self.axis_names

    @property
    def local_devices(self) -> list:
        """The mesh's devices that belong to this process."""
        return [d for d in self.devices.flat if _is_local(d)]

    @property
    def is_multi_process(self) -> bool:
        return self.devices.size != len(self.local_devices)

    @property
    def local_mesh(self) -> Mesh:
        """The sub-mesh of this process's devices (they must form a box of the mesh), with the same axes."""
        local = np.vectorize(_is_local, otypes=[bool])(self.devices)
        pos = np.argwhere(local)
        if not len(pos):
            raise FtransValueError(f"{self!r} has none of this process's devices, so it has no local mesh")
        lo, hi = pos.min(axis=0), pos.max(axis=0) + 1
        box = tuple(slice(int(a), int(b)) for a, b in zip(lo, hi))
        if not local[box].all():
            raise FtransValueError(f"this process's devices do not form a box of {self!r}, so it has no local "
                                   "mesh; use make_array_from_callback / make_array_from_single_device_arrays")
        return Mesh(self.devices[box], self.axis_names, self.axis_types)

    def update(self, devices: Any = None, axis_names: Any = None, axis_types: Any = None) -> Mesh:
        return Mesh(self.devices if devices is None else devices,
                    self.axis_names if axis_names is None else axis_names,
                    self.axis_types if axis_types is None else axis_types)

    def __eq__(self, other: Any) -> bool:
        other = as_mesh(other)  # a runtime (jax) mesh equals its ftrans twin
        return isinstance(other, Mesh) and self._key == other._key

    def __hash__(self) -> int:
        return hash(self._key)

    def __str__(self) -> str:
        axes = ", ".join(f"'{n}': {s}" for n, s in zip(self.axis_names, self.devices.shape))
        types = ", ".join(t.name for t in self.axis_types)
        return f"Mesh({axes}, axis_types=({types}{',' if len(self.axis_types) == 1 else ''}))"

    def __repr__(self) -> str:
        # JAX's repr spells the fields out; its str (above) is the short form shardings print.
        types = ", ".join(t.name for t in self.axis_types)
        return (f"Mesh(axis_sizes={tuple(self.devices.shape)}, axis_names={tuple(self.axis_names)}, "
                f"axis_types=({types}{',' if len(self.axis_types) == 1 else ''}))")

    def __enter__(self) -> Mesh:
        _stack().append(self)
        _legacy_stack().append(self)
        _count_contexts(0, 1)
        return self

    def __exit__(self, *exc: Any) -> None:
        _stack().pop()
        _legacy_stack().pop()
        _count_contexts(0, -1)

    def __call__(self, fn: Any) -> Any:
        """As JAX's (a ``contextlib.ContextDecorator``): ``@mesh`` runs ``fn`` with ``mesh`` current."""
        @functools.wraps(fn)
        def inner(*args: Any, **kwargs: Any) -> Any:
            with self:
                return fn(*args, **kwargs)

        return inner


def _is_local(device: Any) -> bool:
    """Whether ``device`` belongs to this process (asked of the runtime client the device comes from)."""
    client = getattr(device, "client", None)
    if client is None:
        return True
    return device.process_index == client.process_index()


class Sharding:
    """Base class of the shardings."""

    _memory_kind: str | None = None

    @property
    def memory_kind(self) -> str | None:
        """The memory the array lives in: the one given, else the devices' default memory ("device"), as JAX
        fills it in when a sharding is made."""
        if self._memory_kind is not None:
            return self._memory_kind
        if isinstance(getattr(self, "mesh", None), AbstractMesh):  # no devices: no default memory (JAX's)
            return None
        for d in self.device_set:
            try:
                return d.default_memory().kind
            except Exception:  # a device without memory spaces (an abstract or foreign one)
                return "device"
        return None

    @memory_kind.setter
    def memory_kind(self, kind: str | None) -> None:
        if isinstance(getattr(self, "mesh", None), AbstractMesh) and kind is not None:
            # a layout over no devices places nothing: JAX's memory kinds are kept (as JAX's, checked by name)
            if kind not in _MEMORY_KINDS:
                raise FtransValueError(f"Got invalid memory kind: {kind}. Valid memory kinds are: "
                                       f"{list(_MEMORY_KINDS)}")
            self._memory_kind = kind
            return
        if kind not in (None, "device"):  # stored and ignored would place the array silently elsewhere
            raise FtransNotImplementedError(f"{type(self).__name__}: memory_kind={kind!r}; ftrans places arrays "
                                            "in the device's default memory only (memory_kind='device')")
        self._memory_kind = kind

    @property
    def addressable_devices(self) -> set:
        """The devices of this sharding that belong to this process."""
        return {d for d in self.device_set if _is_local(d)}

    @property
    def is_fully_addressable(self) -> bool:
        return all(_is_local(d) for d in self.device_set)

    @property
    def has_addressable_devices(self) -> bool:
        return any(_is_local(d) for d in self.device_set)

    def addressable_devices_indices_map(self, global_shape: Sequence[int]) -> dict:
        return {d: i for d, i in self.devices_indices_map(global_shape).items() if _is_local(d)}

    def devices_indices_map(self, global_shape: Sequence[int]) -> dict:
        raise NotImplementedError

    def check_compatible_aval(self, aval_shape: Sequence[int]) -> None:
        """Raises unless this sharding can lay out an array of shape ``aval_shape``."""

    def is_equivalent_to(self, other: Any, ndim: int) -> bool:
        """Whether ``other`` puts the same blocks of any rank-``ndim`` array on the same devices."""
        other = as_sharding(other)
        if not isinstance(other, Sharding):
            return False
        if self == other:  # (also over an abstract mesh, which has no devices to compare)
            return True
        if self.device_set != other.device_set:
            return False
        shape = (self.num_devices * other.num_devices,) * ndim  # divisible by every split

        def norm(m: dict) -> dict:
            return {d: tuple(s.indices(n)[:2] for s, n in zip(idx, shape)) for d, idx in m.items()}

        return norm(self.devices_indices_map(shape)) == norm(other.devices_indices_map(shape))

    def _to_xla_hlo_sharding(self, num_dimensions: int) -> Any:
        """XLA's ``HloSharding`` of this layout for an array of rank ``num_dimensions`` (JAX's method of the
        same name, which tools comparing layouts with XLA's call)."""
        return runtime_of(self, num_dimensions)._to_xla_hlo_sharding(num_dimensions)

    def _to_sdy_sharding(self, num_dimensions: int) -> Any:
        """Shardy's sharding attribute of this layout for an array of rank ``num_dimensions`` (JAX's method)."""
        return runtime_of(self, num_dimensions)._to_sdy_sharding(num_dimensions)

    def with_memory_kind(self, kind: str) -> Sharding:
        if kind not in (None, "device"):
            raise NotImplementedError(f"with_memory_kind({kind!r}): ftrans places arrays in the device's default "
                                      "memory only")
        return self

    @property
    def device_set(self) -> set:
        raise NotImplementedError

    def shard_shape(self, global_shape: Sequence[int]) -> tuple:
        raise NotImplementedError

    @property
    def is_fully_replicated(self) -> bool:
        raise NotImplementedError

    @property
    def num_devices(self) -> int:
        return len(self.device_set)


class SingleDeviceSharding(Sharding):
    """The whole array on ``device``."""

    def __init__(self, device: Any, *, memory_kind: str | None = None):
        self._device = device
        if memory_kind is not None:  # JAX's keyword; only the device's default memory is placed in
            self.memory_kind = memory_kind

    @property
    def device_set(self) -> set:
        return {self._device}

    def shard_shape(self, global_shape: Sequence[int]) -> tuple:
        return tuple(global_shape)

    @property
    def is_fully_replicated(self) -> bool:
        return True

    def devices_indices_map(self, global_shape: Sequence[int]) -> dict:
        return {self._device: tuple(slice(None) for _ in global_shape)}

    def __eq__(self, other: Any) -> bool:
        other = as_sharding(other)
        return isinstance(other, SingleDeviceSharding) and other._device == self._device

    def __hash__(self) -> int:
        return hash(("single", self._device.id))

    def __repr__(self) -> str:
        return f"SingleDeviceSharding(device={self._device!r}, memory_kind={self.memory_kind})"


class NamedSharding(Sharding):
    """``mesh`` and ``spec``: dimension ``d`` is split over the mesh axes ``spec[d]`` names."""

    # Set on the target of a ``reshard``/mesh cast inside a program (a copy): JAX lowers those as the result's
    # sharding type (nothing over a mesh whose axes are all Auto), not as a ``with_sharding_constraint``.
    _type_cast = False

    def __init__(self, mesh: Mesh, spec: Any, *, memory_kind: str | None = None, _open_ok: bool = False):
        if spec is None:  # as JAX's: the spec is required (P() is the replicated layout)
            raise FtransTypeError("NamedSharding: Unexpected None for spec; pass a PartitionSpec (P() for a "
                                  "replicated layout)")
        mesh = as_mesh(mesh)
        if isinstance(mesh, AbstractMesh):
            # the current mesh of those axes stands for it; with none, the sharding keeps the abstract mesh (it
            # describes a layout, as an export's argument does) and asks for a mesh only where it needs devices
            # (not a shard_map body's type mesh, whose manual axes have type Manual)
            # (nor one naming another memory kind, which ftrans cannot place values in: it stays a description,
            # as JAX's, and the APIs taking it say so, ``out_sharding=``'s ValueError)
            cur = get_mesh()
            if cur is not None and (cur.axis_names, cur.axis_sizes) == (mesh.axis_names, mesh.axis_sizes) and \
                    AxisType.Manual not in mesh.axis_types and memory_kind in (None, "device"):
                if cur.axis_types != mesh.axis_types:
                    self._given_mesh = mesh  # (the abstract mesh given, for JAX's context-mesh check)
                mesh = cur
        if not isinstance(mesh, (Mesh, AbstractMesh)):
            raise FtransTypeError(f"NamedSharding: mesh must be an ftrans.sharding.Mesh, got {type(mesh).__name__}")
        if not isinstance(spec, PartitionSpec):
            if isinstance(spec, tuple):
                spec = PartitionSpec(*spec)
            elif _is_jax_spec(spec):  # JAX's PartitionSpec (not a tuple): the same entries
                spec = as_spec(spec)
            else:
                raise FtransTypeError(f"NamedSharding: spec must be a PartitionSpec, got {spec!r}")
        check_spec(spec, mesh, "NamedSharding")
        if spec.unreduced or spec.reduced:
            _check_mesh_unreduced(mesh, spec)
        if not _open_ok and PartitionSpec.UNCONSTRAINED in tuple(spec) and \
                AxisType.Auto not in tuple(mesh.axis_types or ()):
            raise FtransValueError(  # (JAX's check: only the partitioner's Auto axes can fill such a dimension)
                f"{spec!r} cannot contain `P.UNCONSTRAINED` when no mesh axis_types are `Auto`. Got mesh axis_types: "
                f"{tuple(mesh.axis_types or ())}")
        self.mesh = mesh
        self.spec = spec
        self.memory_kind = memory_kind

    def _concrete_mesh(self) -> Mesh:
        """The mesh with devices: the sharding's own, or the current one standing for its abstract mesh."""
        return concrete_for(self.mesh) if isinstance(self.mesh, AbstractMesh) else self.mesh

    @property
    def device_set(self) -> set:
        return set(self._concrete_mesh().devices.flat)

    @property
    def _device_assignment(self) -> tuple:
        return tuple(self._concrete_mesh().devices.flat)

    @property
    def num_devices(self) -> int:
        return self.mesh.size

    @property
    def is_fully_replicated(self) -> bool:
        sizes = self.mesh.shape
        if self.spec.unreduced and self.mesh.size != 1:  # partial sums on the devices (JAX's)
            return False
        return all(sizes[a] == 1 for a in self.spec.axes() if a in sizes)

    def _parts(self, ndim: int) -> list[int]:
        sizes = self.mesh.shape
        out = []
        for d in range(ndim):
            e = self.spec[d] if d < len(self.spec) else None
            names = (e,) if isinstance(e, str) else (e if isinstance(e, tuple) else ())
            out.append(int(np.prod([sizes[a] for a in names])) if names else 1)
        return out

    def _check_even(self, global_shape: Sequence[int], parts: list) -> None:
        for d, (n, p) in enumerate(zip(global_shape, parts)):
            if n % p:
                raise FtransValueError(
                    f"Sharding {self!r} implies that array axis {d} is partitioned {p} times, but the dimension "
                    f"size is {n} (full shape: {tuple(global_shape)}, per-dimension tiling factors: {parts} should "
                    "evenly divide the shape)")

    def shard_shape(self, global_shape: Sequence[int]) -> tuple:
        parts = self._parts(len(global_shape))
        self._check_even(global_shape, parts)
        return tuple(s // p for s, p in zip(global_shape, parts))

    def devices_indices_map(self, global_shape: Sequence[int]) -> dict:
        """Each device's block of an array of ``global_shape``, as a tuple of slices."""
        self._check_even(global_shape, self._parts(len(global_shape)))
        mesh = self._concrete_mesh()
        names = list(mesh.axis_names)
        sizes = mesh.devices.shape
        out = {}
        for pos in itertools.product(*[range(s) for s in sizes]):
            dev = mesh.devices[pos]
            idx = []
            for d, n in enumerate(global_shape):
                e = self.spec[d] if d < len(self.spec) else None
                axes = (e,) if isinstance(e, str) else (e if isinstance(e, tuple) else ())
                if not axes:
                    idx.append(slice(None))
                    continue
                block, count = 0, 1
                for a in axes:  # the first named axis is the major one
                    k = names.index(a)
                    block = block * sizes[k] + pos[k]
                    count *= sizes[k]
                step = -(-n // count)
                idx.append(slice(block * step, min(n, (block + 1) * step)))
            out[dev] = tuple(idx)
        return out

    def with_spec(self, spec: Any) -> NamedSharding:
        return NamedSharding(self.mesh, spec)

    def update(self, **kwargs: Any) -> NamedSharding:
        """A copy with ``mesh``, ``spec`` or ``memory_kind`` replaced."""
        unknown = set(kwargs) - {"mesh", "spec", "memory_kind"}
        if unknown:
            raise FtransTypeError(f"NamedSharding.update: unexpected arguments {sorted(unknown)}")
        return NamedSharding(kwargs.get("mesh", self.mesh), kwargs.get("spec", self.spec),
                             memory_kind=kwargs.get("memory_kind", self.memory_kind))

    @property
    def replicated_axes(self) -> frozenset:
        """The mesh axes the spec does not split over (each device along them holds the same block)."""
        return frozenset(n for n in self.mesh.axis_names
                         if n not in self.spec.axes() and n not in self.spec.unreduced and n not in self.spec.reduced)

    def check_compatible_aval(self, aval_shape: Sequence[int]) -> None:
        check_spec(self.spec, self.mesh, f"Sharding {self!r}", len(aval_shape), aval_shape)

    def __eq__(self, other: Any) -> bool:
        other = as_sharding(other)
        return isinstance(other, NamedSharding) and self.mesh == other.mesh and self.spec == other.spec

    def __hash__(self) -> int:
        return hash((self.mesh, self.spec))

    def __repr__(self) -> str:
        mem = "" if self.memory_kind is None else f", memory_kind={self.memory_kind}"  # (JAX's: only when set)
        return f"NamedSharding(mesh={self.mesh}, spec={self.spec!r}{mem})"


def _abstract_of(mesh: Any) -> Any:
    return mesh.abstract_mesh if isinstance(mesh, Mesh) else mesh


class TypeSharding(NamedSharding):
    """A sharding type as ``typeof(x).sharding`` / ``x.aval.sharding`` shows it: as JAX's, its ``mesh`` is the
    value's mesh's ``AbstractMesh``; it keeps the concrete mesh (``_concrete_mesh()``), so it is usable wherever
    a sharding is taken (``as_sharding`` gives the NamedSharding over it), and it equals a NamedSharding of its
    spec over that mesh or over its abstract mesh."""

    @classmethod
    def of(cls, sh: NamedSharding) -> TypeSharding:
        out = cls.__new__(cls)
        out._cmesh, out.spec, out.memory_kind = sh.mesh, sh.spec, sh.memory_kind
        return out

    @property  # type: ignore[override]
    def mesh(self) -> Any:
        return _abstract_of(self._cmesh)

    @mesh.setter
    def mesh(self, mesh: Any) -> None:
        self._cmesh = mesh

    def _concrete_mesh(self) -> Mesh:
        m = self._cmesh
        return m if isinstance(m, Mesh) else concrete_for(m)

    def as_named(self) -> NamedSharding:
        """The NamedSharding over the value's concrete mesh (or its abstract one where it has none)."""
        out = NamedSharding.__new__(NamedSharding)
        out.mesh, out.spec, out.memory_kind = self._cmesh, self.spec, self.memory_kind
        return out

    def with_spec(self, spec: Any) -> NamedSharding:
        return NamedSharding(self._cmesh, spec)

    def update(self, **kwargs: Any) -> NamedSharding:
        return self.as_named().update(**kwargs)

    def __eq__(self, other: Any) -> bool:
        other = as_sharding(other)
        return isinstance(other, NamedSharding) and self.spec == other.spec and \
            self.mesh == _abstract_of(other.mesh)

    def __hash__(self) -> int:
        return hash((self.mesh, self.spec))

    def __repr__(self) -> str:
        return f"NamedSharding(mesh={self.mesh!r}, spec={self.spec!r})"


class DefaultTypeSharding(TypeSharding):
    """The type sharding of an untyped value under a mesh (JAX's ``NamedSharding(abstract mesh, P(None, ...))``):
    ``mesh`` is the abstract mesh; it equals a NamedSharding of that spec over any mesh of those axes (ftrans's
    shardings hold the concrete mesh in context for an abstract one), and lays values out over the mesh in
    context where a sharding is taken."""

    def _concrete_mesh(self) -> Mesh:
        return concrete_for(self._cmesh)

    def as_named(self) -> Any:
        return self  # (over the abstract mesh in context: stands for the concrete mesh there, as before)

    def __eq__(self, other: Any) -> bool:
        other = as_sharding(other)
        if not isinstance(other, NamedSharding):
            return False
        om = other.mesh
        return (om if isinstance(om, AbstractMesh) else om.abstract_mesh) == self.mesh and self.spec == other.spec

    def __hash__(self) -> int:
        return hash((self.mesh, self.spec))


def default_type_sharding(mesh: AbstractMesh, ndim: int) -> Any:
    """The type sharding of an untyped value of rank ``ndim`` over ``mesh`` (an AbstractMesh)."""
    spec = PartitionSpec(*(None,) * ndim)
    if mesh.empty:
        return MeshlessType(spec)
    out = DefaultTypeSharding.__new__(DefaultTypeSharding)
    out.mesh, out.spec, out.memory_kind = mesh, spec, None
    return out


class MeshlessType:
    """``typeof(x).sharding`` of a value on no mesh (one device, no mesh in context): JAX's type sharding over
    the empty abstract mesh, each dimension unsplit.  Given where a sharding is taken it stands for its spec
    (laid out over the current mesh)."""

    __slots__ = ("spec",)
    memory_kind = None

    def __init__(self, spec: PartitionSpec):
        self.spec = spec

    @property
    def mesh(self) -> AbstractMesh:
        return AbstractMesh((), ())

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, MeshlessType) and self.spec == other.spec

    def __hash__(self) -> int:
        return hash(self.spec)

    def __repr__(self) -> str:
        return f"NamedSharding(mesh={self.mesh!r}, spec={self.spec!r})"


def check_spec(spec: PartitionSpec, mesh: Mesh, what: str, ndim: int | None = None,
               shape: Sequence[int] | None = None) -> None:
    """A spec must name axes of ``mesh``, each at most once, and (given ``ndim``) fit the array's rank."""
    seen: set = set()
    for a in spec.axes():
        if a not in mesh.axis_names:
            raise FtransValueError(
                f"{what}: the PartitionSpec {spec!r} names mesh axis {a!r}, but the mesh has axes "
                f"{mesh.axis_names} (shape {mesh.shape}); use one of those names (Resource axis: {a} of {spec!r} is "
                f"not found in mesh: {tuple(mesh.axis_names)}.)")
        if a in seen:
            raise DuplicateSpecError(f"{what}: the PartitionSpec {spec!r} names mesh axis {a!r} more than once (it "
                                   f"has duplicate entries for `{a}`); an axis can split at most one dimension")
        seen.add(a)
    if ndim is not None and len(spec) > ndim:
        raise FtransValueError(
            f"{what}: " + ("For scalars the PartitionSpec should be P(); " if ndim == 0 else "")
            + f"the PartitionSpec {spec!r} is only valid for values of rank at least {len(spec)}, but was applied "
            f"to a value of rank {ndim}" + (f" (shape {tuple(shape)})" if shape is not None else "")
            + f": it has {len(spec)} entries; give at most one entry per dimension")


def check_divisible(sharding: NamedSharding, shape: Sequence[int], what: str) -> None:
    """Each split dimension must be a multiple of the number of blocks it is cut into (JAX requires it)."""
    check_spec(sharding.spec, sharding.mesh, what, len(shape), shape)
    for d, (n, p) in enumerate(zip(shape, sharding._parts(len(shape)))):
        if n % p:
            raise IndivisibleError(
                f"{what}: dimension {d} of an array of shape {tuple(shape)} has size {n}, which the sharding "
                f"{sharding.spec!r} splits into {p} blocks over mesh axes {sharding.spec[d]!r} (mesh "
                f"{sharding.mesh.shape}); {n} is not divisible by {p} (the number of blocks should evenly divide "
                "the shape). Pad the array, or shard another dimension")


def size_one_axes(mesh: Any) -> frozenset:
    """With JAX's ``jax_remove_size_one_mesh_axis_from_type`` on: the axes of ``mesh`` of size 1, which sharding
    types and the manual axes a value varies along leave out (a split over one device is no split); else (or
    with no mesh) none."""
    from ftrans.core.config import config

    if not config.remove_size_one_mesh_axis_from_type or mesh is None:
        return frozenset()
    return frozenset(n for n, k in zip(getattr(mesh, "axis_names", ()), getattr(mesh, "axis_sizes", ())) if k == 1)


def without_axes(spec: Any, axes: frozenset) -> Any:
    """``spec`` (a PartitionSpec, or a sequence of its entries) with the mesh ``axes`` left out of its entries and
    of its unreduced/reduced sets (JAX's ``remove_size_one_mesh_axis``); a PartitionSpec."""
    def keep(e: Any) -> Any:
        if isinstance(e, str):
            return None if e in axes else e
        if isinstance(e, tuple):
            return tuple(a for a in e if a not in axes)
        return e
    return PartitionSpec(*map(keep, spec), unreduced=frozenset(getattr(spec, "unreduced", ()) or ()) - axes,
                         reduced=frozenset(getattr(spec, "reduced", ()) or ()) - axes)


# ----------------------------------------------------------------------------
# The current mesh


_local = threading.local()


def _stack() -> list:
    s = getattr(_local, "stack", None)
    if s is None:
        s = _local.stack = []
    return s


_global_mesh: list = [None]


def get_mesh() -> Mesh | None:
    """The mesh of the innermost ``use_mesh`` / ``with mesh:``, else the one ``set_mesh`` installed."""
    s = _stack()
    return s[-1] if s else _global_mesh[0]


# Where results live under a mesh context, as in JAX: ``set_mesh`` / ``use_mesh`` make the mesh the one
# ``jit`` and eager operations place their results on (JAX's concrete mesh); the deprecated ``with mesh:``
# names the mesh only ``pjit`` places on (JAX's resource env).  The two are kept apart from ``get_mesh``'s
# stack, and counted over all threads so the eager fast paths can tell, by one global, that none is open.

def _concrete_stack() -> list:
    s = getattr(_local, "concrete", None)
    if s is None:
        s = _local.concrete = []
    return s


def _legacy_stack() -> list:
    s = getattr(_local, "legacy", None)
    if s is None:
        s = _local.legacy = []
    return s


def context_mesh() -> Mesh | None:
    """The mesh ``jit`` and eager operations place results on: the innermost ``use_mesh``, else ``set_mesh``'s."""
    s = getattr(_local, "concrete", None)
    return s[-1] if s else _global_mesh[0]


def legacy_mesh() -> Mesh | None:
    """The mesh of the innermost ``with mesh:`` (what ``pjit`` places results on)."""
    s = getattr(_local, "legacy", None)
    return s[-1] if s else None


# Open ``use_mesh`` blocks (plus one while ``set_mesh`` holds a mesh) and ``with mesh:`` blocks, in all threads.
contexts_open = [0, 0]
_contexts_lock = threading.Lock()
# ``fn(concrete: bool, legacy: bool)``, called when either count turns zero or non-zero (the trace module's).
on_contexts: list = []


def _count_contexts(concrete: int, legacy: int) -> None:
    # (the listeners are told under the lock: told after it, a thread closing the last context could tell them
    # "none open" after another thread opening one had told them "open", leaving the fast paths, which place
    # nothing, on inside that thread's ``with mesh:``)
    with _contexts_lock:
        before = (contexts_open[0] > 0, contexts_open[1] > 0)
        contexts_open[0] += concrete
        contexts_open[1] += legacy
        after = (contexts_open[0] > 0, contexts_open[1] > 0)
        if after != before:
            for fn in on_contexts:
                fn(*after)


_abstract_local = threading.local()

# ``() -> AbstractMesh``: the abstract mesh in context (``ftrans.sharding.get_abstract_mesh``, which knows
# ``shard_map`` bodies), installed when ``ftrans.sharding`` is imported.
current_abstract_mesh: Any = None


def abstract_stack() -> list:
    """The meshes of the ``use_abstract_mesh`` blocks entered (innermost last)."""
    s = getattr(_abstract_local, "stack", None)
    if s is None:
        s = _abstract_local.stack = []
    return s


_spec_meshes: dict = {}


def spec_mesh() -> Mesh | None:
    """The mesh a bare PartitionSpec is laid out over: the current mesh, or inside ``use_abstract_mesh`` one with
    the abstract mesh's axes (names, sizes, types) over the current mesh's devices, as JAX's bare specs name
    the abstract mesh in context."""
    mesh = get_mesh()
    s = getattr(_abstract_local, "stack", None)
    if not s:
        return mesh
    am = s[-1][0]  # entries are (abstract mesh, shard_map body depth when entered)
    if am.empty:
        return mesh
    if mesh is not None and (mesh.axis_names, mesh.axis_sizes, mesh.axis_types) == \
            (am.axis_names, am.axis_sizes, am.axis_types):
        return mesh
    if mesh is None or mesh.size != am.size:
        raise FtransValueError(
            f"a bare PartitionSpec inside use_abstract_mesh({am!r}) needs a current mesh of {am.size} devices to "
            f"lay values out on (the current mesh is {mesh!r}); enter one with ftrans.set_mesh / "
            "ftrans.sharding.use_mesh")
    devs = tuple(mesh.devices.flat)
    key = (tuple(d.id for d in devs), am.axis_sizes, am.axis_names, am.axis_types)
    out = _spec_meshes.get(key)
    if out is None:
        arr = np.empty(len(devs), dtype=object)
        arr[:] = devs
        out = _spec_meshes[key] = Mesh(arr.reshape(am.axis_sizes), am.axis_names, am.axis_types)
    return out


@contextmanager
def use_mesh(mesh: Mesh) -> Any:
    """Make ``mesh`` the current mesh inside the ``with`` block."""
    mesh = as_mesh(mesh)
    if not isinstance(mesh, Mesh):
        raise FtransTypeError(f"use_mesh: expected a Mesh, got {type(mesh).__name__}")
    _stack().append(mesh)
    _concrete_stack().append(mesh)
    _count_contexts(1, 0)
    try:
        yield mesh
    finally:
        _stack().pop()
        _concrete_stack().pop()
        _count_contexts(-1, 0)


class _SetMesh:
    """``set_mesh(mesh)``: installs ``mesh`` as the current mesh; as a context manager, restores the previous."""

    def __init__(self, mesh: Mesh | None):
        if (_is_runtime_mesh(mesh) or isinstance(mesh, Mesh)) and not tuple(mesh.axis_names):
            mesh = None  # the empty mesh (``get_mesh()`` with none set; JAX's empty concrete mesh): no mesh
        mesh = as_mesh(mesh)
        if mesh is not None and not isinstance(mesh, Mesh):
            raise FtransTypeError(f"set_mesh: expected a Mesh, got {type(mesh).__name__}")
        if mesh is not None and AxisType.Manual in mesh.axis_types:
            raise FtransValueError(f"set_mesh: the mesh {mesh} contains manual axes, which only shard_map's body "
                                   "may have; give its axes Auto or Explicit types")
        self.prev = _global_mesh[0]
        _set_global(mesh)

    def __enter__(self) -> Mesh | None:
        return _global_mesh[0]

    def __exit__(self, *exc: Any) -> None:
        _set_global(self.prev)


def _set_global(mesh: Mesh | None) -> None:
    was = _global_mesh[0] is not None
    _global_mesh[0] = mesh
    if was != (mesh is not None):
        _count_contexts(1 if mesh is not None else -1, 0)


def set_mesh(mesh: Mesh | None) -> _SetMesh:
    return _SetMesh(mesh)


# ----------------------------------------------------------------------------
# The runtime's shardings (duck-typed: core never imports the runtime)


_mesh_memo: dict = {}

# ``(ftrans sharding, rank) -> the runtime's sharding``: set by the lowering layer (``compat.runtime_sharding``).
runtime_of: Any = None


def _runtime_key(mesh: Any) -> tuple:
    """A runtime mesh's identity: devices, shape, names and axis types (a user's jax mesh with Explicit axes
    must not map to an ftrans mesh remembered under its Auto twin)."""
    types = tuple(getattr(t, "name", str(t)) for t in (getattr(mesh, "axis_types", None) or ()))
    ids = tuple(getattr(d, "id", None) for d in mesh.devices.flat)  # (an empty mesh holds None)
    return (ids, tuple(mesh.devices.shape), tuple(mesh.axis_names), types)


# ftrans meshes by the identity of their runtime twins (each twin is made once and kept by its mesh, so
# an id here is never reused while the entry lives).
_twins: dict[int, Mesh] = {}


def remember_mesh(mesh: Mesh) -> None:
    """Results laid out on ``mesh``'s runtime twin report ``mesh`` itself (its axis types included).

    The twin is matched by identity. The lowering gives every twin Auto axes (ftrans applies Explicit
    axes itself), so an Explicit ftrans mesh must not also be found under its twin's key: a user's
    jax mesh with Auto axes over the same devices has that key and is not the Explicit mesh.
    """
    rt = mesh._runtime
    _twins[id(rt)] = mesh
    ours = tuple(getattr(t, "name", str(t)) for t in (getattr(mesh, "axis_types", None) or ()))
    theirs = tuple(getattr(t, "name", str(t)) for t in (getattr(rt, "axis_types", None) or ()))
    if ours == theirs:
        _mesh_memo.setdefault(_runtime_key(rt), mesh)


_converted: dict = {}


def from_runtime(sh: Any) -> Any:
    """ftrans's sharding for a runtime (jax) sharding object: NamedSharding, single device, or as is."""
    if isinstance(sh, Sharding):
        return sh
    try:
        return _converted[sh]
    except (KeyError, TypeError):
        pass
    out = _from_runtime(sh)
    if len(_converted) < 4096:
        try:
            _converted[sh] = out
        except TypeError:
            pass
    return out


def forget_runtime_meshes() -> None:
    """Drop the memos of runtime meshes and shardings (the runtime's devices are new objects: its client was
    replaced), so a mesh over the new devices is not answered with one over the old."""
    _mesh_memo.clear()
    _converted.clear()
    _twins.clear()
    _spec_meshes.clear()


def _is_runtime_mesh(mesh: Any) -> bool:
    if isinstance(mesh, (Mesh, AbstractMesh)) or type(mesh).__name__ == "AbstractMesh":
        return False
    return hasattr(mesh, "axis_names") and hasattr(mesh, "devices")


def as_mesh(mesh: Any) -> Any:
    """ftrans's mesh for a runtime (jax) mesh, so a user's jax ``Mesh`` works wherever ftrans takes one (as its
    shardings do); anything else as is (the caller reports what is not a mesh)."""
    if type(mesh).__name__ == "AbstractMesh" and not isinstance(mesh, AbstractMesh):  # JAX's: ftrans's twin
        try:
            types = tuple(AxisType[t.name] for t in mesh.axis_types)
        except (KeyError, AttributeError, TypeError):
            types = None
        dev = getattr(mesh, "abstract_device", None)
        if dev is not None:  # its devices' kind, as the abstract mesh of ftrans's twin of a jax Mesh has
            dev = AbstractDevice(dev.device_kind, getattr(dev, "num_cores", None), getattr(dev, "platform", None))
        return AbstractMesh(tuple(mesh.axis_sizes), tuple(mesh.axis_names), types, abstract_device=dev)
    if not _is_runtime_mesh(mesh):
        return mesh
    m = _twins.get(id(mesh))
    if m is not None and m._runtime is mesh:
        return m
    key = _runtime_key(mesh)
    m = _mesh_memo.get(key)
    if m is None:
        types = getattr(mesh, "axis_types", None)
        try:  # the runtime's axis types, by name (Auto, Explicit, Manual)
            types = tuple(AxisType[t.name] for t in types) if types is not None else None
        except (KeyError, AttributeError, TypeError):
            types = None
        m = _mesh_memo[key] = Mesh(np.asarray(mesh.devices), tuple(mesh.axis_names), types)
        m._runtime = mesh
    return m


def _is_jax_spec(x: Any) -> bool:
    t = type(x)
    return t.__name__ in ("PartitionSpec", "P") and t.__module__.split(".")[0] == "jax"


def _unformat(x: Any) -> Any:
    """A ``Format`` (ftrans's or JAX's: a layout and a sharding) stands for its sharding when its layout is one
    ftrans gives (the default, AUTO or None); anything else as is."""
    if type(x) is TypeSharding:  # a value's type sharding (over its abstract mesh): the one over its mesh
        return x.as_named()
    if type(x).__name__ != "Format" or not hasattr(x, "layout") or not hasattr(x, "sharding"):
        return x
    from ftrans.core.layout import Format, Layout, format_sharding

    if not isinstance(x, Format):  # JAX's: its layout as ftrans's
        lay = x.layout
        if lay is not None and hasattr(lay, "major_to_minor"):
            lay = Layout(lay.major_to_minor, lay.tiling, lay.sub_byte_element_size_in_bits)
        elif lay is not None:
            lay = Layout.AUTO
        x = Format(lay, x.sharding)
    return format_sharding(x)


def as_spec(x: Any) -> Any:
    """ftrans's PartitionSpec for JAX's (which is no tuple); anything else as is."""
    x = _unformat(x)
    if not isinstance(x, PartitionSpec) and _is_jax_spec(x):
        return PartitionSpec(*getattr(x, "partitions", x), unreduced=frozenset(getattr(x, "unreduced", ())),
                             reduced=frozenset(getattr(x, "reduced", ())))
    return x


def as_sharding(sh: Any) -> Any:
    """ftrans's sharding for a runtime (jax) sharding object, ftrans's PartitionSpec for JAX's; anything else (an
    ftrans sharding or spec, a value that is no sharding at all) as is, for the caller to check."""
    if isinstance(sh, Sharding) or isinstance(sh, type):
        return sh.as_named() if isinstance(sh, TypeSharding) else sh
    if type(sh).__name__ == "UnspecifiedValue":  # JAX's UNSPECIFIED (jit's default): no sharding given
        return None
    if type(sh) is MeshlessType:
        return sh.spec
    sh = _unformat(sh)
    if getattr(sh, "device_set", None) is None:
        return as_spec(sh)
    return from_runtime(sh)


def _from_runtime(sh: Any) -> Any:
    mesh = getattr(sh, "mesh", None)
    spec = getattr(sh, "spec", None)
    if mesh is not None and spec is not None and hasattr(mesh, "axis_names"):
        if not tuple(mesh.axis_names) and getattr(mesh, "empty", False):
            raise FtransValueError(f"got an empty NamedSharding: {sh!r} (its mesh has no devices), which is not "
                                   "allowed as a sharding")
        return NamedSharding(as_mesh(mesh), as_spec(spec) if _is_jax_spec(spec) else PartitionSpec(*spec))
    ds = getattr(sh, "device_set", None)
    if ds is not None and len(ds) == 1:
        return SingleDeviceSharding(next(iter(ds)))
    named = _from_hlo_sharding(sh)
    return named if named is not None else sh


def _from_hlo_sharding(sh: Any) -> Any:
    """A runtime sharding given by an HLO sharding over a device assignment (JAX's ``GSPMDSharding``) as the
    NamedSharding that lays arrays out alike: a mesh of the tile assignment's shape (axes ``_hlo0``,
    ``_hlo1``, ...; a trailing replication axis last), each array dimension split over its own axis.
    None where it has no such form (a maximal or manual sharding)."""
    hlo, assignment = getattr(sh, "_hlo_sharding", None), getattr(sh, "_device_assignment", None)
    if hlo is None or assignment is None:
        return None
    try:
        if hlo.is_replicated():
            return NamedSharding(Mesh(np.array(list(assignment)), ("_hlo0",)), PartitionSpec())
        if list(hlo.subgroup_types()) or hlo.is_maximal():
            return None
        dims = list(hlo.tile_assignment_dimensions())
        devices = np.array([assignment[i] for i in hlo.tile_assignment_devices()], dtype=object).reshape(dims)
    except (AttributeError, TypeError, ValueError):
        return None
    names = tuple(f"_hlo{i}" for i in range(len(dims)))
    ndata = len(dims) - 1 if hlo.replicate_on_last_tile_dim() else len(dims)
    spec = PartitionSpec(*(names[d] if dims[d] > 1 else None for d in range(ndata)))
    return NamedSharding(Mesh(devices, names), spec)


# ----------------------------------------------------------------------------
# Meshes without devices


class AbstractDevice:
    """What an abstract mesh knows of its devices: their kind, core count and platform."""

    __slots__ = ("device_kind", "num_cores", "platform")

    def __init__(self, device_kind: str, num_cores: int | None = None, platform: str | None = None):
        self.device_kind = device_kind
        self.num_cores = num_cores
        self.platform = platform

    def _key(self) -> tuple:
        return (self.device_kind, self.num_cores, self.platform)

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, AbstractDevice) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def _repr(self) -> str:
        return f"device_kind={self.device_kind}, num_cores={self.num_cores}, platform={self.platform}"

    def __repr__(self) -> str:
        return f"AbstractDevice({self._repr()})"


def args_meshes() -> list:
    """The stack of meshes that partitioned ``jit``s' arguments are laid out over while they trace: the top one
    stands for an abstract mesh of the same axes when no mesh is current (JAX takes the devices from the
    arguments)."""
    s = getattr(_local, "args_meshes", None)
    if s is None:
        s = _local.args_meshes = []
    return s


def concrete_for(abstract: AbstractMesh) -> Mesh:
    """The current mesh standing for ``abstract`` (same axis names and sizes): a sharding or shard_map over an
    abstract mesh works on the devices of the mesh in context, as JAX does inside ``jit`` under ``set_mesh``."""
    cur = get_mesh()
    if cur is None or (cur.axis_names, cur.axis_sizes) != (abstract.axis_names, abstract.axis_sizes):
        arg = (getattr(_local, "args_meshes", None) or [None])[-1]  # a jit's arguments' mesh, as JAX's
        if isinstance(arg, Mesh) and (arg.axis_names, arg.axis_sizes) == (abstract.axis_names, abstract.axis_sizes):
            return arg
        raise FtransValueError(
            f"A sharding or shard_map over {abstract!r} needs a current mesh with the same axes to take its devices from "
            f"(the current mesh is {cur!r}); enter one with ftrans.sharding.use_mesh / set_mesh, or pass the "
            "Mesh itself")
    return cur


def foreign_axis_type(t: Any) -> bool:
    return not isinstance(t, AxisType) and type(t).__name__ == "AxisType" and getattr(t, "name", None) in \
        AxisType.__members__


class AbstractMesh:
    """A mesh's axis sizes, names and types, with no devices (JAX's ``AbstractMesh``): what a traced program
    needs to know of a mesh.  It cannot be entered or asked for devices."""

    def __init__(self, axis_sizes: Sequence[int], axis_names: Any, axis_types: Any = None, *,
                 abstract_device: AbstractDevice | None = None):
        if isinstance(axis_names, str):
            axis_names = (axis_names,)
        axis_sizes, axis_names = tuple(int(s) for s in axis_sizes), tuple(axis_names)
        if len(axis_sizes) != len(axis_names):
            raise FtransValueError(f"AbstractMesh: {len(axis_sizes)} axis sizes {axis_sizes} but {len(axis_names)} "
                                   f"axis names {axis_names}")
        if axis_types is None:  # Auto, as jax 0.10's (jax 0.11's default is Explicit: docs/differences.md)
            axis_types = (AxisType.Auto,) * len(axis_names)
        elif isinstance(axis_types, AxisType) or foreign_axis_type(axis_types):
            axis_types = (axis_types,)
        # JAX's axis types (a JAX mesh's) stand for ftrans's of the same name
        axis_types = tuple(AxisType[t.name] if foreign_axis_type(t) else t for t in axis_types)
        if len(axis_types) != len(axis_names) or not all(isinstance(t, AxisType) for t in axis_types):
            raise FtransValueError(f"AbstractMesh: axis_types must be one AxisType per axis name {axis_names}, got "
                                   f"{axis_types}")
        self.axis_sizes = axis_sizes
        self.axis_names = axis_names
        self.axis_types = axis_types
        self.abstract_device = abstract_device
        self.size = int(np.prod(axis_sizes)) if axis_sizes else 0

    def _key(self) -> tuple:
        return (self.axis_sizes, self.axis_names, self.axis_types, self.abstract_device)

    def __eq__(self, other: Any) -> bool:
        if not isinstance(other, AbstractMesh):
            other = as_mesh(other) if type(other).__name__ == "AbstractMesh" else other  # JAX's: ftrans's twin
        return isinstance(other, AbstractMesh) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        axes = ", ".join(f"'{n}': {s}" for n, s in zip(self.axis_names, self.axis_sizes)) or "()"
        dev = "" if self.abstract_device is None else f", {self.abstract_device._repr()}"
        return f"AbstractMesh({axes}, axis_types={self.axis_types}{dev})"

    @property
    def shape(self) -> dict:
        return collections.OrderedDict(zip(self.axis_names, self.axis_sizes))

    @property
    def shape_tuple(self) -> tuple:
        return tuple(zip(self.axis_names, self.axis_sizes))

    @property
    def empty(self) -> bool:
        return self.size == 0

    @property
    def abstract_mesh(self) -> AbstractMesh:
        return self

    def _of_type(self, t: AxisType) -> tuple:
        return tuple(n for n, a in zip(self.axis_names, self.axis_types) if a == t)

    @property
    def auto_axes(self) -> tuple:
        return self._of_type(AxisType.Auto)

    @property
    def explicit_axes(self) -> tuple:
        return self._of_type(AxisType.Explicit)

    @property
    def manual_axes(self) -> tuple:
        return self._of_type(AxisType.Manual)

    are_all_axes_auto = property(lambda self: all(t == AxisType.Auto for t in self.axis_types))
    are_all_axes_explicit = property(lambda self: all(t == AxisType.Explicit for t in self.axis_types))
    are_all_axes_manual = property(lambda self: all(t == AxisType.Manual for t in self.axis_types))

    def update(self, axis_sizes: Any = None, axis_names: Any = None, axis_types: Any = None,
               **kwargs: Any) -> AbstractMesh:
        kwargs.setdefault("abstract_device", self.abstract_device)
        return AbstractMesh(self.axis_sizes if axis_sizes is None else axis_sizes,
                            self.axis_names if axis_names is None else axis_names,
                            self.axis_types if axis_types is None else axis_types, **kwargs)

    def update_axis_types(self, name_to_type: dict) -> AbstractMesh:
        return self.update(axis_types=tuple(name_to_type.get(n, t) for n, t in zip(self.axis_names,
                                                                                  self.axis_types)))

    def _no(self, what: str) -> Any:
        raise FtransValueError(f"AbstractMesh does not implement {what}: it has no devices; use a Mesh "
                               "(ftrans.make_mesh or ftrans.sharding.Mesh) for that")

    devices = property(lambda self: self._no("devices"))
    device_ids = property(lambda self: self._no("device_ids"))
    local_devices = property(lambda self: self._no("local_devices"))
    local_mesh = property(lambda self: self._no("local_mesh"))
    is_multi_process = property(lambda self: self._no("is_multi_process"))

    def __enter__(self) -> Any:
        return self._no("__enter__ (use ftrans.sharding.use_abstract_mesh)")

    def __exit__(self, *exc: Any) -> None:
        self._no("__exit__")
