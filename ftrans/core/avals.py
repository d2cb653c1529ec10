"""Abstract values: what the tracer knows about an array (shape, dtype, weak type)."""

from __future__ import annotations

import enum
import math
from typing import Any

import numpy as np

from ftrans.core import dtypes
from ftrans.core.keys import is_extended_dtype, is_key
from ftrans.core.shape_poly import DimExpr


class MemorySpace(enum.Enum):
    """JAX's ``core.MemorySpace`` (public as ``jax.memory.Space``): where a value lives. ftrans's values are all in
    the device's default memory (``Device``); ``Host``/``Any`` name JAX's other spaces."""

    Device = enum.auto()
    Host = enum.auto()
    Any = enum.auto()

    def __repr__(self) -> str:
        return f"MemorySpace.{self.name}"

    __hash__ = object.__hash__  # as JAX's: by identity


class AbstractValue:
    """JAX's ``core.AbstractValue``: the base class of abstract values (ftrans's is :class:`ShapedArray`)."""

    __slots__ = ()


class ShapedArray(AbstractValue):
    """The type of an array in the IR.  Immutable and hashable, so it keys caches.

    It is also JAX's public ``core.ShapedArray``: ``ShapedArray(shape, dtype, weak_type=False,
    sharding=None)`` with ``shape`` any sequence of ints and ``dtype`` anything ``np.dtype`` takes,
    or a key dtype.  A sharding type (``sharding`` not None) is :class:`ShardedAval`'s alone.
    """

    # ``typed_sharding``: the value's layout type over a mesh with Explicit axes (a NamedSharding), or None: not
    # typed (single device, Auto axes: XLA's partitioner chooses). Only a ``ShardedAval`` has one; ftrans's own
    # code asks this (``sharding`` is what a user reads: JAX's type sharding, never None).  (A slot here, so
    # that ``ShapedArray(..., sharding=)`` of a sharding type can make its instance a ShardedAval.)
    __slots__ = ("shape", "dtype", "weak_type", "_hash", "typed_sharding")

    @property
    def sharding(self) -> Any:
        """JAX's ``aval.sharding``: the sharding type, or for an untyped value each dimension unsplit over the
        abstract mesh in context (the empty one outside any), as JAX's types always carry one."""
        ts = self.typed_sharding
        return ts if ts is not None else default_sharding(len(self.shape))
    # Inside a ``shard_map`` body: the manual mesh axes the value may differ along (JAX's varying manual
    # axes). Only ``VaryingAval`` sets it; like ``sharding`` it is not part of equality.
    vma: frozenset = frozenset()
    # Inside a ``shard_map`` body: the manual mesh axes along which the value is unreduced (each device holds
    # a partial sum) or reduced (replicated, its cotangent unreduced). Only ``VaryingAval`` sets them.
    unreduced: frozenset = frozenset()
    reduced: frozenset = frozenset()

    @property
    def mat(self) -> ManualAxisType:
        """JAX's ``aval.mat``: the value's manual axis type (``varying`` is ``vma``)."""
        return ManualAxisType(self.vma, self.unreduced, self.reduced)

    manual_axis_type = mat
    # JAX's ``aval.memory_space``: ftrans keeps every value in the device's default memory (docs/differences.md).
    memory_space: MemorySpace = MemorySpace.Device

    def __init__(self, shape: tuple[int, ...], dtype: np.dtype, weak_type: bool = False, *,
                 sharding: Any = None, memory_space: Any = None):
        if memory_space is not None and memory_space is not MemorySpace.Device:
            _other_memory(memory_space)
        if type(shape) is not tuple:
            shape = tuple(shape)
        if not isinstance(dtype, np.dtype) and not is_extended_dtype(dtype):
            dtype = np.dtype(dtype)
        self.shape = shape
        self.dtype = dtype
        self.weak_type = weak_type
        self._hash = hash((shape, dtype, weak_type))
        self.typed_sharding = None
        if sharding is not None and not _untyped_sharding(sharding):
            self._as_typed(sharding)

    def _as_typed(self, sharding: Any) -> None:
        """JAX's ``ShapedArray(shape, dtype, sharding=...)`` of a sharding type: this value becomes the
        ShardedAval of that type (its spec completed to the rank; each split dimension must divide)."""
        from ftrans.core.sharding import NamedSharding, Sharding, as_spec
        from ftrans.core.sharding_rules import typed_aval
        from ftrans.errors import FtransValueError

        if not isinstance(sharding, Sharding) and getattr(sharding, "spec", None) is not None:
            sharding = NamedSharding(sharding.mesh, as_spec(sharding.spec))  # a jax NamedSharding: its twin
        t = typed_aval(ShapedArray(self.shape, self.dtype, self.weak_type), sharding)
        sh = t.typed_sharding
        if sh is None:
            return
        for dim, (e, n) in enumerate(zip(sh.spec, self.shape)):
            axes = () if e is None else (e,) if isinstance(e, str) else tuple(e)
            size = math.prod(sh.mesh.shape[a] for a in axes)
            if isinstance(n, int) and n % size:
                raise FtransValueError(
                    f"Sharding spec {axes} implies that array axis {dim} is partitioned {size} times, but does not "
                    f"evenly divide the dimension size {n}. Got shape {self.shape} and sharding {sharding}")
        self.__class__ = type(t)
        self.typed_sharding = sh

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, ShapedArray)
            and self.shape == other.shape
            and self.dtype == other.dtype
            and self.weak_type == other.weak_type
        )

    def __hash__(self) -> int:
        return self._hash

    def update(self, shape=None, dtype=None, weak_type=None, sharding=None, memory_space=None) -> ShapedArray:
        if memory_space is not None and memory_space is not MemorySpace.Device:
            _other_memory(memory_space)
        out = ShapedArray(
            self.shape if shape is None else shape,
            self.dtype if dtype is None else dtype,
            self.weak_type if weak_type is None else weak_type,
        )
        if sharding is not None:  # JAX's ``aval.update(sharding=...)``: typed over its Explicit axes only
            from ftrans.core.sharding import NamedSharding, Sharding, as_spec
            from ftrans.core.sharding_rules import typed_aval

            if not isinstance(sharding, Sharding) and getattr(sharding, "spec", None) is not None:
                sharding = NamedSharding(sharding.mesh, as_spec(sharding.spec))  # a jax NamedSharding: its twin
            return typed_aval(out, sharding)
        return out

    def str_short(self) -> str:
        return type_str(self.shape, self.dtype)

    def __repr__(self) -> str:
        w = ", weak_type=True" if self.weak_type else ""
        return f"ShapedArray({_dtype_name(self.dtype)}[{','.join(map(str, self.shape))}]{w})"

    def __str__(self) -> str:
        # JAX's ``str`` of a type (what ``print(jax.typeof(x))`` shows): the full dtype name, ``~`` for a weak
        # type (the IR printer and messages use ``str_short``).
        w = "~" if self.weak_type else ""
        return f"{w}{_dtype_name(self.dtype)}[{','.join(map(str, self.shape))}]"


def _other_memory(space: Any) -> None:
    from ftrans.errors import FtransNotImplementedError

    raise FtransNotImplementedError(f"ShapedArray(memory_space={space!r}): ftrans keeps every value in the device's "
                                    "default memory (MemorySpace.Device)")


def _untyped_sharding(sharding: Any) -> bool:
    """Whether ``sharding`` gives no sharding type (no dimension split over an Explicit mesh axis): what a plain
    ShapedArray is, so ``ShapedArray(..., sharding=NamedSharding(mesh, P()))`` is one, as JAX's equality sees it."""
    spec, mesh = getattr(sharding, "spec", None), getattr(sharding, "mesh", None)
    if spec is None or mesh is None or getattr(spec, "unreduced", None) or getattr(spec, "reduced", None):
        return False
    types = dict(zip(getattr(mesh, "axis_names", ()), getattr(mesh, "axis_types", ())))
    for e in spec:
        for a in (() if e is None else (e,) if isinstance(e, str) else e):
            if getattr(types.get(a), "name", None) != "Auto":
                return False
    return True


class ManualAxisType:
    """How a value of a ``shard_map`` body relates to the manual mesh axes: ``varying``, the axes along which
    it may differ from device to device; ``unreduced``, those along which each device holds a partial sum;
    ``reduced``, those along which it is replicated with an unreduced cotangent."""

    __slots__ = ("varying", "unreduced", "reduced")

    def __init__(self, varying: frozenset = frozenset(), unreduced: frozenset = frozenset(),
                 reduced: frozenset = frozenset()):
        self.varying = frozenset(varying)
        self.unreduced = frozenset(unreduced)
        self.reduced = frozenset(reduced)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ManualAxisType) and (self.varying, self.unreduced, self.reduced) == (
            other.varying, other.unreduced, other.reduced)

    def __hash__(self) -> int:
        return hash((self.varying, self.unreduced, self.reduced))

    def invarying(self, mesh: object) -> frozenset:
        """The manual axes of ``mesh`` this value is the same along (JAX's ``mat.invarying(mesh)``)."""
        return frozenset(getattr(mesh, "manual_axes", ())) - self.varying - self.unreduced - self.reduced

    def __repr__(self) -> str:
        if not self.unreduced and not self.reduced:
            return f"ManualAxisType(varying={set(self.varying) or '{}'})"
        return (f"ManualAxisType(varying={set(self.varying) or '{}'}, unreduced={set(self.unreduced) or '{}'}, "
                f"reduced={set(self.reduced) or '{}'})")


class VaryingAval(ShapedArray):
    """A ShapedArray inside a ``shard_map`` body that varies along the manual mesh axes ``vma`` (JAX's
    ``typeof(x).vma``), and is ``unreduced``/``reduced`` along others (``typeof(x).mat``).  Staging gives
    results their operands' axes (``transforms/shard_map.py``); ``update`` gives a plain ShapedArray."""

    __slots__ = ("vma", "unreduced", "reduced")

    def __init__(self, aval: ShapedArray, vma: frozenset, unreduced: frozenset = frozenset(),
                 reduced: frozenset = frozenset()):
        ShapedArray.__init__(self, aval.shape, aval.dtype, aval.weak_type)
        self.vma = frozenset(vma)
        self.unreduced = frozenset(unreduced)
        self.reduced = frozenset(reduced)

    def _suffix(self) -> str:
        return _vma_suffix(self.vma, self.unreduced, self.reduced)

    def __str__(self) -> str:
        # JAX's ``str`` of a varying type: ``float32[3]{V:i}`` (``{V:(i,j)}`` for several axes).
        return ShapedArray.__str__(self) + self._suffix()

    def str_short(self, *args: Any, **kwargs: Any) -> str:
        # as JAX's printed jaxprs and messages show a varying type: ``f32[3]{V:i}``
        return ShapedArray.str_short(self, *args, **kwargs) + self._suffix()

    def __repr__(self) -> str:
        w = ", weak_type=True" if self.weak_type else ""
        return f"ShapedArray({_dtype_name(self.dtype)}[{','.join(map(str, self.shape))}]{self._suffix()}{w})"


def _vma_suffix(vma: frozenset, unreduced: frozenset = frozenset(), reduced: frozenset = frozenset()) -> str:
    """JAX's ``{V:i, U:j, R:k}`` (each set's names sorted, several in parentheses)."""
    parts = []
    for k, axes in (("V", vma), ("U", unreduced), ("R", reduced)):
        if axes:
            names = sorted(axes, key=str)
            parts.append(f"{k}:" + (str(names[0]) if len(names) == 1 else f"({','.join(map(str, names))})"))
    return "{" + ", ".join(parts) + "}" if parts else ""


class ShardedAval(ShapedArray):
    """A ShapedArray with a sharding type (JAX's "sharding in types"): ``sharding`` is a NamedSharding over
    a mesh with Explicit axes whose spec has one entry per dimension and names only Explicit axes.

    Equality and hashing are the plain aval's (shape, dtype, weak type): a typed and an untyped aval of one
    shape agree wherever ftrans checks types (carries, branches), and caches that must tell layouts apart
    key on ``sharding`` as well.  ``update`` gives a plain ShapedArray: the rules that change a type
    (core/sharding_rules.py) set the sharding of their results themselves.
    """

    __slots__ = ()

    def __init__(self, shape: tuple[int, ...], dtype: np.dtype, weak_type: bool, sharding: Any):
        ShapedArray.__init__(self, shape, dtype, weak_type)
        self.typed_sharding = sharding

    @property
    def sharding(self) -> Any:
        """JAX's type sharding: the NamedSharding over the value's mesh's ``AbstractMesh`` (a TypeSharding)."""
        from ftrans.core.sharding import TypeSharding

        ts = self.typed_sharding
        return ts if isinstance(ts, TypeSharding) else TypeSharding.of(ts)

    def str_short(self, short_dtypes: bool = True) -> str:
        short = (dtypes.SHORT_NAMES.get(self.dtype) if short_dtypes else None) or self.dtype.name
        dims = []
        for n, e in zip(self.shape, self.typed_sharding.spec):
            if e is None:
                dims.append(str(n))
            elif isinstance(e, tuple):
                dims.append(f"{n}@({','.join(e)})")
            else:
                dims.append(f"{n}@{e}")
        spec = self.typed_sharding.spec
        if not spec.unreduced and not spec.reduced:
            return f"{short}[{','.join(dims)}]"
        order = list(self.typed_sharding.mesh.axis_names)  # JAX's {U:y, R:x}: the axes in mesh order
        ur = []
        for k, axes in (("U", spec.unreduced), ("R", spec.reduced)):
            if axes:
                names = [a for a in order if a in axes]
                ur.append(f"{k}:" + (names[0] if len(names) == 1 else f"({','.join(names)})"))
        return f"{short}[{','.join(dims)}]{{{', '.join(ur)}}}"

    def __str__(self) -> str:
        # JAX's ``str`` of a sharded type (``print(jax.typeof(x))``): ``float32[8@X,4@Y]``, the full dtype
        # name and ``~`` for a weak type, as for an unsharded one (the IR printer uses ``str_short``).
        return ("~" if self.weak_type else "") + self.str_short(short_dtypes=False)

    def __repr__(self) -> str:
        w = ", weak_type=True" if self.weak_type else ""
        return f"ShapedArray({self.str_short(short_dtypes=False)}{w})"


class VaryingShardedAval(ShardedAval):
    """A typed value of a partially manual ``shard_map`` body (``axis_names=`` a subset of the mesh's) that
    also varies along the manual mesh axes ``vma``: its ``sharding`` is over the body's mesh, whose manual
    axes have type Manual and whose other Explicit axes type it as outside."""

    __slots__ = ("vma",)

    def __init__(self, aval: ShardedAval, vma: frozenset):
        ShardedAval.__init__(self, aval.shape, aval.dtype, aval.weak_type, aval.typed_sharding)
        self.vma = frozenset(vma)

    def str_short(self, *args: Any, **kwargs: Any) -> str:
        return ShardedAval.str_short(self, *args, **kwargs) + _vma_suffix(self.vma)


class ShownAval(ShapedArray):
    """``typeof(x)`` of a value with no sharding type: JAX's types all show a sharding, so this one shows the
    value's layout type as JAX states it (each dimension unsplit, over the value's mesh, the mesh in context,
    or the empty mesh).  Only what ``typeof`` returns; the IR's values stay untyped."""

    __slots__ = ("_shown",)

    def __init__(self, aval: ShapedArray, shown: Any):
        ShapedArray.__init__(self, aval.shape, aval.dtype, aval.weak_type)
        self._shown = shown

    @property  # type: ignore[override]
    def sharding(self) -> Any:
        return self._shown


_default_shardings: dict = {}


def default_sharding(ndim: int) -> Any:
    """The type sharding of an untyped value of rank ``ndim`` (JAX's ``NamedSharding(abstract mesh, P(None,
    ...))``): over the abstract mesh in context, else a partitioned ``jit``'s arguments' mesh while it traces,
    else the empty abstract mesh.  One object per (rank, mesh)."""
    from ftrans.core import sharding as _sh

    find = _sh.current_abstract_mesh  # (``ftrans.sharding.get_abstract_mesh``: it knows shard_map bodies)
    if find is not None:
        mesh = find()
    else:
        cur = _sh.get_mesh()
        mesh = cur.abstract_mesh if cur is not None else _sh.AbstractMesh((), ())
    if mesh.empty:
        s = _sh.args_meshes()
        if s and s[-1] is not None:
            mesh = s[-1].abstract_mesh
    key = (ndim, mesh)
    out = _default_shardings.get(key)
    if out is None:
        if len(_default_shardings) > 1024:
            _default_shardings.clear()
        out = _default_shardings[key] = _sh.default_type_sharding(mesh, ndim)
    return out


def out_struct_sharding(aval: Any, sharding: Any) -> Any:
    """An output's sharding for its ``ShapeDtypeStruct`` (``out_info``, ``eval_shape``): the one given, else its
    sharding type (over the abstract mesh), or an untyped value's unsplit one over a mesh in context of only
    Explicit (or Manual) axes, as JAX's; else None."""
    if sharding is not None:
        return sharding
    if getattr(aval, "typed_sharding", None) is not None:
        return aval.sharding
    if type(aval) is ShapedArray:
        sh = aval.sharding
        m = sh.mesh
        if not m.empty and all(t.name in ("Explicit", "Manual") for t in m.axis_types):
            return sh
    return None


def _dtype_name(d: Any) -> str:
    """A dtype's name in a printed type: NumPy's, except JAX's ``float0`` (NumPy calls it ``void``)."""
    return "float0" if getattr(d, "names", None) == ("float0",) else d.name


def type_str(shape: tuple[int, ...], dtype: np.dtype) -> str:
    short = dtypes.SHORT_NAMES.get(dtype) or dtype.name  # (NumPy's dtype.name is slow: only when needed)
    return f"{short}[{','.join(map(str, shape))}]"


def shape_only_constant_error(x: Any) -> Exception:
    """A ``ShapeDtypeStruct`` reached a place that needs a value (a jitted call's argument, or a constant
    staged under ``eval_shape``, when the program runs or is lowered)."""
    from ftrans.errors import FtransTypeError

    return FtransTypeError(
        f"A ShapeDtypeStruct does not have a value ({x.dtype}{list(x.shape)}): it can stand for an argument of "
        "jit(f).trace/lower or eval_shape, but cannot be used as an argument or a constant of a program "
        "that runs or is lowered; pass an array of that shape and dtype")


def _check_sharding_rank(sharding: Any, ndim: int) -> None:
    """A sharding (or bare PartitionSpec) with more dimension entries than the rank is refused, as JAX's
    ShapeDtypeStruct refuses it."""
    spec = sharding if type(sharding).__name__ in ("PartitionSpec", "P") else getattr(sharding, "spec", None)
    if spec is None or type(spec).__name__ not in ("PartitionSpec", "P"):
        return
    if len(tuple(spec)) > ndim:
        from ftrans.errors import FtransValueError

        raise FtransValueError(f"ShapeDtypeStruct: the sharding {sharding!r} is only valid for values of rank at "
                               f"least {len(tuple(spec))}, but was applied to a value of rank {ndim}")


class ShapeDtypeStruct:
    """``jax.ShapeDtypeStruct``: a stand-in argument that has only a shape and dtype."""

    __slots__ = ("shape", "dtype", "weak_type", "_sharding", "_layout", "is_ref", "vma")

    def __init__(self, shape, dtype, *, weak_type: bool = False, sharding=None, is_ref: bool = False, vma=None):
        if dtype is None:
            from ftrans.errors import FtransValueError

            raise FtransValueError(f"ShapeDtypeStruct: dtype must be specified (shape {tuple(shape)!r}, dtype None)")
        self.shape = tuple(d if isinstance(d, DimExpr) else int(d) for d in shape)
        if is_extended_dtype(dtype):  # a key dtype (typed keys) or a user-defined extended dtype
            self.dtype = dtype
        else:
            try:
                canon = dtypes.to_dtype(dtype)
            except TypeError:
                from ftrans.core import strings

                if not strings.is_string_dtype(dtype):
                    raise
                canon = strings.STRING_DTYPE  # a string array's type (eval_shape of one), as JAX's
            # As JAX's: the dtype as given (``np.int64`` stays int64 without x64; ``int`` is int64); an array
            # of it gets the canonical one, but a 64-bit FFI result declared so keeps it.
            try:
                wide = np.dtype(dtype)
            except TypeError:
                wide = canon
            self.dtype = wide if wide != canon and dtypes.canonicalize(wide) == canon else canon
        self.weak_type = weak_type
        self.is_ref = bool(is_ref)  # the type of a ref holding such an array (for jit's ``lower``), as JAX's
        # the manual mesh axes a value of a shard_map body of this type varies along (JAX's ``vma``)
        self.vma = frozenset(vma) if vma else frozenset()
        self._layout = None
        if sharding is not None:
            from ftrans.core.layout import Format, _AutoLayout, as_format

            sharding = as_format(sharding)  # (JAX's Format as ftrans's)
            if isinstance(sharding, Format):  # a layout and a sharding, as JAX's
                if isinstance(sharding.layout, _AutoLayout):
                    from ftrans.errors import FtransTypeError

                    raise FtransTypeError(
                        "ShapeDtypeStruct: `Layout.AUTO` cannot be used in place of a device-local layout in a "
                        f"`ShapeDtypeStruct`. Got {sharding}; give a concrete Layout, or only the sharding")
                self._layout, sharding = sharding.layout, sharding.sharding
            _check_sharding_rank(sharding, len(self.shape))
        self._sharding = sharding

    @property
    def sharding(self) -> Any:
        """The sharding given; a bare PartitionSpec is over the mesh in context when read (as JAX's: none is a
        TypeError)."""
        s = self._sharding
        if type(s).__name__ == "PartitionSpec":
            from ftrans.core.sharding import NamedSharding, get_mesh

            mesh = get_mesh()
            if mesh is None:
                from ftrans.errors import FtransTypeError

                raise FtransTypeError(
                    "When specifying PartitionSpec to `ShapeDtypeStruct`, the context mesh cannot be empty. Please "
                    "use `jax.set_mesh` to set the mesh context.")
            return NamedSharding(mesh, s)
        return s

    @property
    def format(self) -> Any:
        """JAX's ``ShapeDtypeStruct.format``: the ``Format`` of its layout (None when not given) and sharding."""
        from ftrans.core.layout import Format

        return Format(self._layout, self._sharding)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of unsized object: this ShapeDtypeStruct is a scalar (shape ())")
        return self.shape[0]

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, ShapeDtypeStruct)
            and (self.shape, self.dtype, self.weak_type, self.is_ref)
            == (other.shape, other.dtype, other.weak_type, other.is_ref)
        )

    def __hash__(self) -> int:
        return hash((self.shape, self.dtype, self.weak_type, self.is_ref))

    def __repr__(self) -> str:
        w = ", weak_type=True" if self.weak_type else ""
        r = ", is_ref=True" if self.is_ref else ""
        return f"ShapeDtypeStruct(shape={self.shape}, dtype={self.dtype.name}{w}{r})"

    def update(self, *, shape=None, dtype=None, weak_type=None, sharding=None, is_ref=None) -> ShapeDtypeStruct:
        """JAX's ``ShapeDtypeStruct.update``: a copy with the given fields replaced."""
        from ftrans.core.sharding import Sharding

        if self._layout is not None and isinstance(sharding, Sharding):  # (a Format or a bare spec is fine)
            from ftrans.errors import FtransValueError

            raise FtransValueError(
                f"You are updating ShapeDtypeStruct with a {type(sharding)} when the original ShapeDtypeStruct had "
                f"a concrete layout {self.format}. This might lead to bugs. If you want to do this, create a new "
                "ShapeDtypeStruct via the constructor.")
        return ShapeDtypeStruct(self.shape if shape is None else shape, self.dtype if dtype is None else dtype,
                                weak_type=self.weak_type if weak_type is None else weak_type,
                                sharding=(self._sharding if self._layout is None else self.format)
                                if sharding is None else sharding, is_ref=self.is_ref if is_ref is None else is_ref)

    @classmethod
    def like(cls, x: Any) -> ShapeDtypeStruct:
        """JAX's ``ShapeDtypeStruct.like``: the shape, dtype and weak type of an array or scalar ``x``."""
        from ftrans.core.trace import aval_of

        if is_key(x):
            return cls(x.shape, x.dtype)
        a = aval_of(x)
        # As JAX's: a committed array's sharding (an uncommitted one has none); a traced value's sharding type
        sharding = getattr(a, "typed_sharding", None)
        if sharding is None and getattr(x, "_committed", False) is True:
            sharding = x.sharding
        if sharding is None:
            return cls(a.shape, a.dtype, weak_type=a.weak_type)
        return cls(a.shape, a.dtype, weak_type=a.weak_type, sharding=sharding)
