"""``export``: a jitted function as a StableHLO module with its calling conventions (JAX's ``jax.export``).

``export(jit(f))(*args)`` traces ``f`` for the arguments' shapes and dtypes (arrays or
``ShapeDtypeStruct``s), lowers the program for the target platforms with ftrans's lowering
(constants captured by ``f`` inlined in the module, every argument kept) and returns an
:class:`Exported`: the module text, the input and output pytree structures and abstract
values, the platforms and the safety checks that were disabled.

``Exported.call`` runs it from ftrans code, eagerly or inside ``jit``/``vmap``: a
``call_exported`` primitive whose lowering embeds the module in the calling program. The
call is differentiable in reverse mode through the exported VJP: an Exported made by
``export`` can export its VJP on demand (``vjp()``), and ``serialize(vjp_order=n)`` stores
``n`` orders of them, so the deserialized function has ``n`` orders of ``grad``.

A function partitioned over a mesh (``in_shardings``/``out_shardings``, arguments laid out over a
mesh, sharding constraints) exports that program: ``main``'s arguments and results carry their
Shardy shardings, ``nr_devices`` is the mesh's size, and a call must be partitioned over as many
devices (the embedded module's arguments and results are constrained to the exported layouts).

Arguments with symbolic dimensions (``ShapeDtypeStruct(symbolic_shape("b, 4"), ...)``, JAX's shape
polymorphism) export one module for every size: its types have ``?`` dimensions computed from the
arguments' sizes, and a call checks the concrete shapes against the symbolic ones (JAX's shape
assertions and messages) and compiles the module specialised to them by StableHLO's shape refinement.

The module is checked before it is accepted, as JAX checks it: custom calls only to targets
with a compatibility guarantee (jaxlib's LAPACK and GPU solver kernels, ...) unless
``DisabledSafetyCheck.custom_call(name)`` allows one, and no host callbacks (their Python
functions cannot be stored).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ftrans.core import dtypes
from ftrans.core import pytrees as tree_util
from ftrans.core.avals import ShapedArray, ShapeDtypeStruct
from ftrans.core.keys import is_key_dtype
from ftrans.core.platform import tracing_for_platform
from ftrans.core.prims.exported import call_exported_p
from ftrans.core.prims.random import physical_aval, random_unwrap_p, random_wrap_p
from ftrans.core.shape_poly import is_poly_shape, solve_dim_vars, solve_order
from ftrans.core.trace import aval_of
from ftrans.errors import FtransTypeError, FtransValueError
from ftrans.lowering import compat
from ftrans.transforms.ad import float0

__all__ = ["DisabledSafetyCheck", "Exported", "export", "call_exported", "default_export_platform",
           "minimum_supported_calling_convention_version", "maximum_supported_calling_convention_version"]

# The calling conventions of the modules ftrans writes: one ``main`` taking the flattened
# arguments (all of them, in order, constants inlined) and returning the flattened results,
# preceded by the platform index for a module of several platforms whose programs differ (as
# JAX's); no dimension-variable arguments, no tokens. JAX's numbering is kept so code checking
# the versions JAX supports keeps working.
minimum_supported_calling_convention_version = 9
maximum_supported_calling_convention_version = 10
_CALLING_CONVENTION = maximum_supported_calling_convention_version

_PLATFORMS = ("cpu", "cuda", "rocm", "tpu")


class DisabledSafetyCheck:
    """A safety check of ``export``/``Exported.call`` to skip (JAX's ``DisabledSafetyCheck``):
    ``platform()`` lets a module run on a platform it was not exported for, ``custom_call(target)`` lets a
    module call ``target`` although it has no compatibility guarantee, ``shape_assertions()`` is accepted for
    compatibility (ftrans's modules have no shape assertions: ``Exported.call`` checks a shape-polymorphic
    function's argument shapes before it runs)."""

    __slots__ = ("_kind", "_arg")

    def __init__(self, kind: str, arg: str | None = None):
        self._kind = kind
        self._arg = arg

    @classmethod
    def platform(cls) -> DisabledSafetyCheck:
        return cls("platform")

    @classmethod
    def custom_call(cls, target_name: str) -> DisabledSafetyCheck:
        return cls("custom_call", str(target_name))

    @classmethod
    def shape_assertions(cls) -> DisabledSafetyCheck:
        return cls("shape_assertions")

    def is_custom_call(self) -> str | None:
        """The allowed target's name for a ``custom_call`` check, else None."""
        return self._arg if self._kind == "custom_call" else None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DisabledSafetyCheck) and (self._kind, self._arg) == (other._kind, other._arg)

    def __hash__(self) -> int:
        return hash((self._kind, self._arg))

    def __str__(self) -> str:
        return f"custom_call:{self._arg}" if self._kind == "custom_call" else self._kind

    __repr__ = __str__  # (as JAX's: a tuple of them prints their names)

    @classmethod
    def _parse(cls, s: str) -> DisabledSafetyCheck:
        if s.startswith("custom_call:"):
            return cls.custom_call(s[len("custom_call:"):])
        if s not in ("platform", "shape_assertions"):
            raise FtransValueError(f"unknown disabled safety check {s!r}")
        return cls(s)


# Custom-call targets whose behaviour XLA and jaxlib keep stable across releases (what a module that is stored
# and run later may call).
_STABLE_TARGET_PATTERNS = (
    re.compile(r"lapack_[sdcz](potrf|geqrf|orgqr|ungqr|syevd|heevd|geev|gesdd|getrf|sytrd|hetrd|gehrd|gees|"
               r"trsm|gtsv)_ffi"),
    re.compile(r"(cu|hip)solver_(getrf|geqrf|orgqr|potrf|syevd|gesvd|gesvdj|gesdd|sytrd)_ffi"),
)
_STABLE_TARGETS = frozenset({
    "cu_lu_pivots_to_permutation", "hip_lu_pivots_to_permutation", "cusparse_gtsv2_ffi", "Sharding",
    "SPMDFullToShardShape", "SPMDShardToFullShape", "annotate_device_placement", "cu_threefry2x32_ffi",
    "hip_threefry2x32_ffi", "Eigh", "Qr", "ProductOfElementaryHouseholderReflectors", "LuDecomposition",
    "ApproxTopK", "stablehlo.dynamic_approx_top_k", "tpu_custom_call", "AllocateBuffer", "shape_assertion",
    "stablehlo.dynamic_reduce_window", "stablehlo.dynamic_rng_bit_generator", "stablehlo.dynamic_top_k",
})
_TARGET = re.compile(r'call_target_name = "((?:[^"\\]|\\.)*)"')


def _is_stable_target(name: str) -> bool:
    return name in _STABLE_TARGETS or any(p.fullmatch(name) for p in _STABLE_TARGET_PATTERNS)


def _check_module(text: str, disabled: Sequence[DisabledSafetyCheck]) -> None:
    from ftrans.lowering.lower import host_callbacks_of

    if host_callbacks_of(text):
        raise NotImplementedError(
            "export: the function calls back into Python (pure_callback, io_callback, buffer_callback, debug.print "
            "or debug.callback); a host callback's Python function cannot be stored with the module, so such a "
            "function cannot be exported")
    allowed = {c.is_custom_call() for c in disabled} - {None}
    if "ALL" in allowed:
        return
    bad = []
    for line in str(text).splitlines():
        m = _TARGET.search(line)
        if m and not _is_stable_target(m.group(1)) and m.group(1) not in allowed:
            bad.append(line.strip())
    if bad:
        raise FtransValueError(
            "Cannot serialize code with custom calls whose targets have no compatibility guarantees (allow one "
            "with export(..., disabled_checks=[DisabledSafetyCheck.custom_call(target)])). Examples are:\n"
            + "\n".join(bad[:5]))


def default_export_platform() -> str:
    """The platform ``export`` lowers for when none is named: the default device's (``cpu``, ``cuda``,
    ``rocm`` or ``tpu``)."""
    from ftrans.devices import default_device

    return compat.lowering_platform(default_device())


def _canonical_platforms(platforms: Any) -> tuple[str, ...]:
    if platforms is None:
        return (default_export_platform(),)
    if isinstance(platforms, str):
        platforms = (platforms,)
    out = []
    for p in platforms:
        c = compat.canonical_platform(str(p)) if isinstance(p, str) else None
        if c is None and str(p).lower() == "gpu":
            raise FtransValueError("export: platforms=('gpu',) needs a GPU to say whether it is CUDA or ROCm; "
                                   "name the platform: 'cuda' or 'rocm'")
        if not isinstance(p, str) or not p:
            raise FtransValueError(f"export: platforms must be platform names such as {_PLATFORMS}, got {p!r}")
        out.append(c)  # another name (a plugin's platform) is lowered by the rules that do not depend on it
    if len(set(out)) != len(out):
        raise FtransValueError(f"export: platforms={tuple(platforms)!r} names a platform twice")
    return tuple(out)


class ExportedSharding:
    """The sharding of one argument or result of a partitioned exported program (what JAX keeps as an HLO
    sharding): the ``spec`` over a mesh of ``mesh``'s axes (an ``AbstractMesh``: the devices are the calling
    context's), declared in the module as ``@symbol``."""

    __slots__ = ("mesh", "spec", "symbol")

    def __init__(self, mesh: Any, spec: Any, symbol: str = "mesh"):
        self.mesh = mesh
        self.spec = spec
        self.symbol = symbol

    def _key(self) -> tuple:
        return (self.mesh, self.spec, self.symbol)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ExportedSharding) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"ExportedSharding({self.mesh!r}, {self.spec!r})"

    def on(self, mesh: Any) -> Any:
        """The ``NamedSharding`` over ``mesh``, which must have the exported mesh's axis names, sizes and types
        (JAX's requirement too)."""
        from ftrans.core.sharding import NamedSharding, as_mesh

        mesh = as_mesh(mesh)
        am = mesh.abstract_mesh
        if (am.axis_sizes, am.axis_names, am.axis_types) != (self.mesh.axis_sizes, self.mesh.axis_names,
                                                             self.mesh.axis_types):
            raise FtransValueError(f"NamedSharding new mesh {mesh} does not match the mesh used for export "
                                   f"{self.mesh}.")
        return NamedSharding(mesh, self.spec)


def _user_avals(tree: Any, avals: tuple) -> tuple:
    """``avals`` (one per leaf of ``tree``, from ftrans's own flattening) as users' leaves: a typed key array's
    data aval becomes one aval of its key dtype."""
    if tree is None:
        return avals
    return tuple(tree_util.user_leaves(tree, list(avals)))


def _typed_avals(avals: tuple, shardings: tuple) -> tuple:
    """``avals`` with the sharding type of each one whose sharding names an Explicit mesh axis (a
    ``ShardedAval`` over the abstract mesh), the others as they are."""
    if not any(s is not None for s in shardings):
        return avals
    from ftrans.core.avals import ShardedAval
    from ftrans.core.sharding import AxisType, NamedSharding, PartitionSpec

    out = []
    for a, s in zip(avals, shardings):
        if s is not None and isinstance(a, ShapedArray) and not isinstance(a, ShardedAval):
            explicit = {n for n, t in zip(s.mesh.axis_names, s.mesh.axis_types) if t == AxisType.Explicit}
            entries = list(s.spec) + [None] * (len(a.shape) - len(s.spec))
            named = {n for e in entries if e is not None for n in (e if isinstance(e, tuple) else (e,))}
            if explicit and named <= explicit and len(entries) == len(a.shape):
                spec = PartitionSpec(*entries, unreduced=s.spec.unreduced, reduced=s.spec.reduced)
                a = ShardedAval(a.shape, a.dtype, a.weak_type, NamedSharding(s.mesh, spec))
        out.append(a)
    return tuple(out)


class Exported:
    """A function exported as a StableHLO module (JAX's ``jax.export.Exported``).

    ``fun_name``; ``in_tree``/``out_tree`` (pytree structures of ``(args, kwargs)`` and of the result);
    ``in_avals``/``out_avals`` (their leaves' abstract values); ``in_shardings_hlo``/``out_shardings_hlo``
    (per leaf, an :class:`ExportedSharding` for one a partitioned program was given a sharding for, else None);
    ``nr_devices`` (the devices the program is partitioned over); ``platforms``; ``disabled_safety_checks``;
    ``mlir_module_serialized`` (the module, UTF-8 text); ``calling_convention_version``.
    """

    def __init__(self, *, fun_name: str, in_tree: Any, in_avals: tuple, out_tree: Any, out_avals: tuple,
                 platforms: tuple, module_text: str, disabled_safety_checks: tuple = (),
                 calling_convention_version: int = _CALLING_CONVENTION, nr_devices: int = 1,
                 get_vjp: Callable[[Exported], Exported] | None = None, uses_global_constants: bool = False,
                 in_shardings_hlo: tuple | None = None, out_shardings_hlo: tuple | None = None,
                 calls_polymorphic: bool = False):
        self.fun_name = fun_name
        # As the program sees them (a typed key array as its uint32 data); ``in_tree``/``in_avals`` and
        # ``out_tree``/``out_avals`` show them as users see them (a key array one leaf of a key dtype), as JAX's.
        self._in_tree = in_tree
        self._in_avals = tuple(in_avals)
        self._out_tree = out_tree
        self._out_avals = tuple(out_avals)
        self.in_shardings_hlo = tuple(in_shardings_hlo) if in_shardings_hlo is not None else \
            (None,) * len(self._in_avals)
        self.out_shardings_hlo = tuple(out_shardings_hlo) if out_shardings_hlo is not None else \
            (None,) * len(self._out_avals)
        self.nr_devices = nr_devices
        self.platforms = tuple(platforms)
        self.ordered_effects = ()
        self.unordered_effects = ()
        self.disabled_safety_checks = tuple(disabled_safety_checks)
        self.calling_convention_version = calling_convention_version
        self.module_kept_var_idx = tuple(range(len(self._in_avals)))
        # main takes the platform's index first (a module for several platforms whose programs differ)
        self._indexed = bool(uses_global_constants)
        # shape polymorphism: the arguments have symbolic dimensions (the module has dynamic shapes)
        self._poly = any(is_poly_shape(a.shape) for a in self._in_avals) or bool(calls_polymorphic)
        self._specialized: dict = {}  # concrete argument shapes -> the module refined for them
        self._module_text = str(module_text)
        self._get_vjp = get_vjp
        self._vjp: Exported | None = None

    @property
    def in_tree(self) -> Any:
        """The pytree structure of ``(args, kwargs)``: each typed key array one leaf, as JAX's."""
        return tree_util.user_treedef(self._in_tree)

    @property
    def out_tree(self) -> Any:
        """The pytree structure of the result: each typed key array one leaf, as JAX's."""
        return tree_util.user_treedef(self._out_tree)

    @property
    def in_avals(self) -> tuple:
        """The abstract values of the ``in_tree`` leaves (a typed key array's of its key dtype, ``key<fry>[]``);
        a leaf laid out over Explicit mesh axes has that sharding type, over the abstract mesh, as JAX's."""
        return _user_avals(self._in_tree, _typed_avals(self._in_avals, self.in_shardings_hlo))

    @property
    def out_avals(self) -> tuple:
        """The abstract values of the ``out_tree`` leaves (a typed key array's of its key dtype), with their
        sharding types as ``in_avals``'."""
        return _user_avals(self._out_tree, _typed_avals(self._out_avals, self.out_shardings_hlo))

    @property
    def uses_global_constants(self) -> bool:
        """Whether the module computes with values the caller must supply (a platform index for a module of
        several platforms whose programs differ, or the dimension variables of a shape-polymorphic one)."""
        return self._indexed or self._poly

    @property
    def mlir_module_serialized(self) -> bytes:
        return self._module_text.encode("utf-8")

    def mlir_module(self) -> str:
        """The StableHLO module, as text."""
        return self._module_text

    def in_shardings_jax(self, mesh: Any) -> tuple:
        """The arguments' shardings over ``mesh`` (``NamedSharding``s; None for an argument with none)."""
        return tuple(None if s is None else s.on(mesh) for s in self.in_shardings_hlo)

    def out_shardings_jax(self, mesh: Any) -> tuple:
        """The results' shardings over ``mesh`` (``NamedSharding``s; None for a result with none)."""
        return tuple(None if s is None else s.on(mesh) for s in self.out_shardings_hlo)

    def has_vjp(self) -> bool:
        """Whether the VJP is available (always after ``export``; after ``deserialize``, if it was serialized)."""
        return self._get_vjp is not None

    def vjp(self) -> Exported:
        """The exported VJP: takes the primal arguments' leaves then one cotangent per result leaf (booleans
        standing for the ``float0`` cotangents of non-float results) and returns one cotangent per argument
        leaf (booleans for non-float arguments)."""
        if self._get_vjp is None:
            raise FtransValueError("No VJP is available")
        if self._vjp is None:
            self._vjp = self._get_vjp(self)
        return self._vjp

    def serialize(self, vjp_order: int = 0) -> bytearray:
        """ftrans's versioned serialization (not JAX's flatbuffer format): the module, the calling conventions
        and ``vjp_order`` orders of the VJP."""
        from ftrans.export._serialization import serialize

        return serialize(self, vjp_order=vjp_order)

    def call(self, *args: Any, **kwargs: Any) -> Any:
        """Run the exported function on arguments of the exported structure, shapes and dtypes."""
        return call_exported(self)(*args, **kwargs)

    def __str__(self) -> str:
        return f"Exported(fun_name={self.fun_name!r}, platforms={self.platforms})"

    __repr__ = __str__

    def _arg_name(self, leaf: int) -> str:
        """``args[0]``, ``kwargs['b']``: the leaf's place in ``(args, kwargs)``."""
        dummy = tree_util.tree_unflatten(self._in_tree, list(range(self._in_tree.num_leaves)))
        for path, v in tree_util.tree_flatten_with_path(dummy)[0]:
            if v == leaf:
                head = "args" if getattr(path[0], "idx", 0) == 0 else "kwargs"
                return head + tree_util.keystr(tuple(path[1:]))
        return f"argument {leaf}"


_LIBRARIES = ("ftrans.numpy", "ftrans.lax", "ftrans.nn", "ftrans.scipy", "ftrans.random", "ftrans.image")


def _as_jitted(fun: Any) -> Any:
    from ftrans.transforms.jit import JitWrapped, jit

    if isinstance(fun, JitWrapped):
        return fun
    # ftrans's own library functions (ftrans.numpy.sin, ...) stand for JAX's, which are jitted functions.
    module = str(getattr(fun, "__module__", "") or "")
    if module.startswith(_LIBRARIES) and getattr(sys.modules.get(module), getattr(fun, "__name__", "<"), None) is fun:
        return jit(fun)  # the library's own function (not a transformed wrapper that took its name)
    raise FtransValueError(f"Function to be exported must be the result of `jit` but is: {fun!r}")


def _sharding_attrs(m: Any, sharded: Any, closed: Any) -> tuple[list, list]:
    """``main``'s argument and result attributes in a partitioned program's module ``m`` (its meshes declared
    in ``m``, the first as ``@mesh``): the Shardy sharding of each that has a ``NamedSharding``; one with no
    sharding given stays unannotated, as JAX leaves it."""
    from ftrans.core.sharding import NamedSharding
    from ftrans.lowering.sdy import sharding_attr

    mesh, in_sh, out_sh = sharded
    m.meshes[mesh] = "mesh"
    m.device_assignment = list(mesh.devices.flat)

    def attr(s: Any, a: Any) -> str:
        if not isinstance(s, NamedSharding):
            return ""
        return f"sdy.sharding = {sharding_attr(m.mesh_symbol(s.mesh), s.spec, len(a.shape))}"

    return ([attr(s, a) for s, a in zip(in_sh, closed.in_avals)],
            [attr(s, a) for s, a in zip(out_sh, closed.out_avals)])


def _mlir_str(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _labelled_main(main: str, arg_names: Sequence[str], first: int = 0) -> str:
    """``main``'s text with its arguments named ``%arg0``, ``%arg1``, ... (their SSA values are the first
    ``len(arg_names)`` ones, from ``first``), each located at its name in the user's call (``loc("x")``,
    ``loc("params['w']")``), as JAX's exported modules name them."""
    n = len(arg_names)
    main = re.sub(r"%(\d+)(?![\w])",
                  lambda m: f"%arg{int(m.group(1)) - first}" if first <= int(m.group(1)) < first + n
                  else m.group(0), main)
    header, nl, rest = main.partition("\n")
    for i in reversed(range(n)):
        at = header.index(f", %arg{i + 1}: ") if i + 1 < n else header.index(") -> (")
        header = header[:at] + f" loc({_mlir_str(arg_names[i])})" + header[at:]
    return header + nl + rest


def _result_infos(out_tree: Any, out_avals: Sequence[Any]) -> list:
    """``jax.result_info`` of each result leaf: its place in the result (``result``, ``result[0]``, ...)."""
    from ftrans.lowering.lower import result_info_attrs

    return result_info_attrs(out_tree, out_avals)


def _join_attrs(*parts: str) -> str:
    return ", ".join(p for p in parts if p)


_DYNAMIC_TYPE = re.compile(r"tensor<(?:[^>]*x)?\?x")


def _marked(text: str) -> str:
    """The module with JAX's ``jax.uses_shape_polymorphism`` attribute: true when it takes a platform index (it
    calls a function exported for several platforms), which a loader must then give it, or has dynamic shapes
    (shape polymorphism), which a loader must refine, as JAX marks it."""
    from ftrans.lowering.lower import host_callbacks_of

    if host_callbacks_of(text):
        return text  # refused by _check_module, with its host callbacks
    flag = "true" if "jax.global_constant" in text or _DYNAMIC_TYPE.search(text) else "false"
    return text.replace(" attributes {", f" attributes {{jax.uses_shape_polymorphism = {flag}, ", 1)


def _module_text(closed: Any, name: str, platform: str, sharded: Any = None, arg_names: Sequence[str] = (),
                 out_tree: Any = None, donated: Sequence[bool] = ()) -> str:
    """The module of ``closed``: ``main`` takes every argument; captured constants are inlined. ``sharded``
    (a partitioned program: ``(mesh, in_shardings, out_shardings)``) annotates ``main``'s arguments and results
    that have a ``NamedSharding`` with their Shardy shardings, over ``sdy.mesh`` declarations."""
    from ftrans.lowering import mlir_text as mt
    from ftrans.lowering.lower import ModuleLowering

    jaxpr = closed.jaxpr
    arg_attrs: list = []
    res_attrs: list = []
    if sharded is None:
        m = ModuleLowering(f"jit_{name}", platform=platform, scope=f"jit({name})")
    else:
        mesh = sharded[0]
        m = ModuleLowering(f"jit_{name}", num_partitions=mesh.size, platform=platform, scope=f"jit({name})")
        arg_attrs, res_attrs = _sharding_attrs(m, sharded, closed)
    if out_tree is not None:
        infos = _result_infos(out_tree, closed.out_avals)
        res_attrs = [_join_attrs(res_attrs[k] if k < len(res_attrs) else "", infos[k]) for k in range(len(infos))]
    names = list(arg_names) if len(arg_names) == len(jaxpr.invars) else \
        [f"args[{i}]" for i in range(len(jaxpr.invars))]
    if not jaxpr.constvars:
        # donated arguments aliased to results as jit aliases them (``tf.aliasing_output``)
        m.function(jaxpr, "main", public=True, arg_attrs=arg_attrs, result_attrs=res_attrs, donated_args=donated)
        m.main_text = _labelled_main(m.main_text, names)
        return _marked(m.text())
    for c in closed.consts:
        if isinstance(c, ShapeDtypeStruct):
            from ftrans.core.avals import shape_only_constant_error

            raise shape_only_constant_error(c)
    inner = m.function(jaxpr, name, public=False)
    fn = mt.FuncEmitter()
    args = [fn.argument(mt.aval_type(v.aval)) for v in jaxpr.invars]
    consts = [fn.constant(np.ascontiguousarray(np.asarray(c, dtype=v.aval.dtype)))  # (a transposed view too)
              for c, v in zip(closed.consts, jaxpr.constvars)]
    out_types = [mt.aval_type(v.aval) for v in jaxpr.outvars]
    outs = fn.emit("func.call", consts + args, out_types, {"callee": f"@{inner}"}) if out_types or consts or args \
        else []
    fn.emit("func.return", outs, [])

    def with_attr(t: str, k: int, attrs: list) -> str:
        return t + (f" {{{attrs[k]}}}" if k < len(attrs) and attrs[k] else "")

    sig = ", ".join(f"{a}: {with_attr(fn.types[a], k, arg_attrs)}" for k, a in enumerate(args))
    rets = ", ".join(with_attr(t, k, res_attrs) for k, t in enumerate(out_types))
    m.main_text = _labelled_main(f"  func.func public @main({sig}) -> ({rets}) {{\n" + "\n".join(fn.lines) + "\n  }",
                                 names)
    return _marked(m.text())


_LOCATION = re.compile(r" loc\(.*\)$", re.M)


def _without_locations(text: str) -> str:
    """The module without its ops' locations (a trace remembered from another call names other lines)."""
    return _LOCATION.sub("", str(text))


def _on_one_device(jitted: Any) -> bool:
    """Whether every sharding ``jit`` was given names one device (a single-device sharding, a mesh of one device):
    the program is then a single-device one."""
    from ftrans.core.sharding import NamedSharding, SingleDeviceSharding, as_sharding
    from ftrans.transforms.sharded_jit import _is_sharding_leaf

    given = (getattr(jitted, "_in_shardings", None), getattr(jitted, "_out_shardings", None))
    for s in tree_util.tree_leaves(given, is_leaf=_is_sharding_leaf):
        s = as_sharding(s)
        if s is None or isinstance(s, SingleDeviceSharding):
            continue
        if not (isinstance(s, NamedSharding) and s.mesh.size == 1):
            return False
    return True


def _on_one_device_each(leaves: list) -> bool:
    """Whether no argument is laid out (or, a ``ShapeDtypeStruct``, declared) over a mesh of several devices."""
    from ftrans.core.sharding import NamedSharding, as_sharding

    for x in leaves:
        s = as_sharding(getattr(x, "sharding", None))
        if isinstance(s, NamedSharding) and s.mesh.size > 1:
            return False
    return True


def export(fun_jit: Any, *, platforms: Sequence[str] | None = None,
           disabled_checks: Sequence[DisabledSafetyCheck] = (), _override_lowering_rules: Any = None,
           **kwargs: Any) -> Callable[..., Exported]:
    """``export(jit(f), platforms=None, disabled_checks=())(*args, **kwargs)``: the ``Exported`` of ``f`` for
    arguments of the shapes and dtypes of ``args``/``kwargs`` (arrays or ``ShapeDtypeStruct``s)."""
    if _override_lowering_rules is not None:
        raise NotImplementedError("export(_override_lowering_rules=...) replaces rules of JAX's MLIR lowering, "
                                  "which ftrans does not use (its lowering rules are its own)")
    if kwargs:
        raise FtransTypeError(f"export() got unexpected keyword arguments {sorted(kwargs)}")
    jitted = _as_jitted(fun_jit)
    plats = _canonical_platforms(platforms)
    disabled = tuple(disabled_checks)
    for c in disabled:
        if not isinstance(c, DisabledSafetyCheck):
            raise FtransTypeError(f"export: disabled_checks must be DisabledSafetyCheck objects, got {c!r}")

    def do_export(*args: Any, **kw: Any) -> Exported:
        _calling_convention_version()  # checked when exporting, as JAX's
        stand_in = _stand_in_mesh(tree_util.tree_leaves((args, kw)))
        if stand_in is None:
            return do_export_on(*args, **kw)
        from ftrans.core.sharding import use_mesh

        args, kw = tree_util.tree_map(lambda x: _onto(x, stand_in), (args, kw))
        with use_mesh(stand_in):
            return do_export_on(*args, **kw)

    def do_export_on(*args: Any, **kw: Any) -> Exported:
        from ftrans.transforms import sharded_jit

        dargs, dkw, _ = jitted._split(args, kw)
        leaves, in_tree = tree_util.tree_flatten((dargs, dkw))
        _check_scopes([tuple(getattr(x, "shape", ())) for x in leaves], in_tree, jitted.__name__)
        spread = sharded_jit.needs_spmd(jitted, leaves) and not (_on_one_device(jitted) and
                                                                 _on_one_device_each(leaves))
        donated = tuple(jitted._donate_mask(args, kw, len(leaves)))
        if any(donated):
            known = [p for p in plats if p in _PLATFORMS]  # the platforms whose XLA backends take donations
            if known and len(known) != len(plats):
                raise NotImplementedError(
                    "In multi-platform lowering either all or no lowering platforms should support donation. "
                    f"Lowering for {plats} of which only {known} support donation")
            if not known:
                donated = ()
        else:
            donated = ()
        # Traced once per platform (``lax.platform_dependent`` takes that platform's branch).
        texts, closeds, traced, sharded = [], {}, None, None
        for p in plats:
            with tracing_for_platform(p):
                traced = jitted.trace(*args, **kw)
                closed, out_tree = traced.jaxpr, traced.out_tree
                if spread or sharded_jit.constraint_meshes(closed.jaxpr):
                    # A program partitioned over a mesh: its arguments and results keep their shardings (as
                    # jit(f).lower gives them), the module is annotated with them.
                    from ftrans.transforms.jit import _leaf_aval

                    avals = [_leaf_aval(x) for x in leaves]
                    closed, out_tree, mesh, in_sh, out_sh, _ = sharded_jit._prepare(
                        jitted, dargs, dkw, args, kw, leaves, avals, in_tree)
                    sharded = (mesh, in_sh, out_sh)
            closeds[p] = closed
            if len(closeds) == 1 and any(is_poly_shape(a.shape) for a in closed.in_avals):  # before lowering
                _check_polymorphic(closed, in_tree, sharded, donated, jitted.__name__)
            texts.append(_module_text(closed, jitted.__name__, p, sharded, getattr(traced, "_names", None) or (),
                                      out_tree, donated))
        for t in texts:
            _check_module(t, disabled)
        closed = closeds[plats[0]]
        if all(_without_locations(t) == _without_locations(texts[0]) for t in texts[1:]):
            text, indexed = texts[0], False
        else:
            text, indexed = _multi_platform_module(texts, plats, jitted.__name__, closed, sharded,
                                                   getattr(traced, "_names", None) or (), out_tree), True
        return _exported_of(closeds, text, indexed, jitted.__name__, in_tree, out_tree, plats, disabled, sharded)

    return do_export


def _abstract_sharding(x: Any) -> Any:
    from ftrans.core.sharding import AbstractMesh, NamedSharding

    s = getattr(x, "sharding", None) if isinstance(x, ShapeDtypeStruct) else None
    return s if isinstance(s, NamedSharding) and isinstance(s.mesh, AbstractMesh) else None


def _stand_in_mesh(leaves: list) -> Any:
    """For arguments laid out over an ``AbstractMesh`` with no mesh of its axes current: a mesh of the first
    devices of the default backend standing for it while the program is traced and lowered (the module names
    only the mesh's axes, as JAX's; ftrans traces with devices, so it needs as many as the mesh has)."""
    from ftrans.core.sharding import AxisType, Mesh, get_mesh
    from ftrans.devices import local_devices

    am = next((s.mesh for s in map(_abstract_sharding, leaves) if s is not None), None)
    if am is None:
        return None
    cur = get_mesh()
    if cur is not None and (cur.axis_names, cur.axis_sizes) == (am.axis_names, am.axis_sizes):
        return None
    devs = local_devices()
    if len(devs) < am.size:
        raise FtransValueError(
            f"export: the arguments are laid out over {am!r} of {am.size} devices; ftrans traces a partitioned "
            f"program on devices, and only {len(devs)} are available. Export under a mesh of those axes "
            "(ftrans.sharding.use_mesh), or on a backend with enough devices")
    types = tuple(am.axis_types) if am.axis_types else (AxisType.Auto,) * len(am.axis_names)
    return Mesh(np.array(devs[:am.size], dtype=object).reshape(am.axis_sizes), am.axis_names, axis_types=types)


def _onto(x: Any, mesh: Any) -> Any:
    """``x`` (a ``ShapeDtypeStruct`` laid out over an abstract mesh) laid out over ``mesh``."""
    from ftrans.core.sharding import NamedSharding

    s = _abstract_sharding(x)
    if s is None or (s.mesh.axis_names, s.mesh.axis_sizes) != (mesh.axis_names, mesh.axis_sizes):
        return x
    return ShapeDtypeStruct(x.shape, x.dtype, weak_type=x.weak_type,
                            sharding=NamedSharding(mesh, s.spec, memory_kind=s._memory_kind))


def _check_scopes(shapes: list, in_tree: Any, name: str) -> None:
    """The symbolic dimensions of all arguments must belong to one scope (JAX's rule)."""
    from ftrans.core.shape_poly import DimExpr, dim_vars

    if not any(is_poly_shape(s) for s in shapes):
        return
    dummy = tree_util.tree_unflatten(in_tree, list(range(in_tree.num_leaves)))
    where = {v: "args" + tree_util.keystr(tuple(p[1:])) if getattr(p[0], "idx", 0) == 0 else
             "kwargs" + tree_util.keystr(tuple(p[1:])) for p, v in tree_util.tree_flatten_with_path(dummy)[0]}
    scope, first = None, None
    for i, shape in enumerate(shapes):
        for d in shape:
            if not isinstance(d, DimExpr):
                continue
            if scope is None:
                scope, first = d.scope, where.get(i, f"args[{i}]")
            elif d.scope is not scope:
                raise FtransValueError(
                    f"Invalid mixing of symbolic scopes when exporting {name} ({in_tree}). Expected current (from "
                    f"{first}) scope {scope} and found for '{sorted(dim_vars([d]))[0]}' ({where.get(i, i)}) scope "
                    f"{d.scope}. Create the symbolic shapes of all arguments in one scope "
                    "(symbolic_shape(..., scope=...) or symbolic_args_specs)")


def _check_polymorphic(closed: Any, in_tree: Any, sharded: Any, donated: Sequence[bool], name: str = "") -> None:
    """What a shape-polymorphic export needs: the symbolic dimensions of one scope, every dimension variable
    (of the shapes and of the constraints) solvable from the arguments' shapes."""
    from ftrans.core.shape_poly import DimExpr, dim_vars, parse_dim

    scope = next((d.scope for a in closed.in_avals for d in a.shape if isinstance(d, DimExpr)), None)
    known = dim_vars(d for a in closed.in_avals for d in a.shape)
    for c in getattr(scope, "constraints_str", ()):
        for side in c.replace(">=", "|").replace("<=", "|").replace("==", "|").split("|"):
            extra = sorted(dim_vars([parse_dim(side, scope)]) - known)
            if extra:
                raise FtransValueError(f"Encountered dimension variable '{extra[0]}' that is not appearing in the "
                                       f"shapes of the function arguments (in the symbolic constraint {c!r}). "
                                       "Please see https://docs.jax.dev/en/latest/export/shape_poly.html"
                                       "#dimension-variables-must-be-solvable-from-the-input-shapes for more details.")
    try:
        solve_order([a.shape for a in closed.in_avals])
    except ValueError as e:
        raise FtransValueError(str(e)) from None


def _multi_platform_module(texts: list, platforms: tuple, name: str, closed: Any, sharded: Any = None,
                           arg_names: Sequence[str] = (), out_tree: Any = None) -> str:
    """One module for several platforms whose programs differ (JAX's convention): ``main`` takes the platform's
    index in ``platforms`` first (``jax.global_constant = "_platform_index"``), then the arguments, and runs
    that platform's program (each distinct program once, as private functions) in a ``stablehlo.case``."""
    from ftrans.lowering import mlir_text as mt
    from ftrans.lowering.lower import ModuleLowering, _sanitize
    from ftrans.lowering.rules.exported import module_functions

    funcs: list[str] = []
    main_of: dict[str, str] = {}  # a program (its text without locations) -> its function
    mains = []
    for p, t in zip(platforms, texts):
        key = _without_locations(t)
        if key not in main_of:
            # the programs share their meshes' declarations (each platform's names them alike)
            body, main_of[key] = module_functions(t, f"_{_sanitize(p)}_", rename_meshes=False)
            funcs.extend(body)
        mains.append(main_of[key])
    decls = list(dict.fromkeys(ln for f in funcs for ln in f.splitlines() if ln.lstrip().startswith("sdy.mesh ")))
    funcs = ["\n".join(ln for ln in f.splitlines() if not ln.lstrip().startswith("sdy.mesh ")) for f in funcs]
    arg_attrs: list = []
    res_attrs: list = []
    nparts = 1
    if sharded is not None:
        nparts = sharded[0].size
        arg_attrs, res_attrs = _sharding_attrs(ModuleLowering(name, num_partitions=nparts), sharded, closed)
    if out_tree is not None:
        infos = _result_infos(out_tree, closed.out_avals)
        res_attrs = [_join_attrs(res_attrs[k] if k < len(res_attrs) else "", infos[k]) for k in range(len(infos))]
    in_types = [mt.aval_type(a) for a in closed.in_avals]
    names = list(arg_names) if len(arg_names) == len(in_types) else [f"args[{i}]" for i in range(len(in_types))]
    out_types = [mt.aval_type(a) for a in closed.out_avals]
    fn = mt.FuncEmitter()
    fn.types["%arg0"] = "tensor<i32>"
    args = [f"%arg{i + 1}" for i in range(len(in_types))]
    fn.types.update(zip(args, in_types))
    regions = [fn.region([], lambda f, _, s=s: f.emit("func.call", args, out_types, {"callee": f"@{s}"}))
               for s in mains]
    outs = fn.emit("stablehlo.case", ["%arg0"], out_types, regions=regions)
    fn.emit("func.return", outs, [])

    def with_attr(t: str, k: int, attrs: list) -> str:
        return t + (f" {{{attrs[k]}}}" if k < len(attrs) and attrs[k] else "")

    sig = ", ".join(['%arg0: tensor<i32> {jax.global_constant = "_platform_index"}'] +
                    [f"{a}: {with_attr(t, k, arg_attrs)} loc({_mlir_str(names[k])})"
                     for k, (a, t) in enumerate(zip(args, in_types))])
    rets = ", ".join(with_attr(t, k, res_attrs) for k, t in enumerate(out_types))
    main = f"  func.func public @main({sig}) -> ({rets}) {{\n" + "\n".join(fn.lines) + "\n  }"
    attrs = (f"jax.uses_shape_polymorphism = true, mhlo.num_partitions = {nparts} : i32, "
             "mhlo.num_replicas = 1 : i32")
    return mt.strip_symbolic(f"module @jit_{_sanitize(name)} attributes {{{attrs}}} {{\n" +
                             "\n".join([*decls, main, *funcs]) + "\n}\n")


def _calling_convention_version() -> int:
    """The ``export_calling_convention_version`` option's value, checked against the supported range."""
    from ftrans.core.config import config

    version = config.read("export_calling_convention_version")
    if not (minimum_supported_calling_convention_version <= version <= maximum_supported_calling_convention_version):
        raise FtransValueError(
            f"The requested export calling convention version {version} is outside the range of supported versions "
            f"[{minimum_supported_calling_convention_version}..{maximum_supported_calling_convention_version}]")
    return version


def _exported_of(closeds: dict, text: str, indexed: bool, name: str, in_tree: Any, out_tree: Any,
                 platforms: tuple, disabled: tuple, sharded: Any = None) -> Exported:
    closed = closeds[platforms[0]]
    # (the module's types: a key-typed value of the traced program as its uint32 data)
    in_avals = tuple(ShapedArray(p.shape, p.dtype, p.weak_type) for p in map(physical_aval, closed.in_avals))
    out_avals = tuple(ShapedArray(p.shape, p.dtype, p.weak_type) for p in map(physical_aval, closed.out_avals))
    get_vjp = lambda exp: _export_vjp(exp, closeds, name, disabled, sharded)  # noqa: E731
    extra: dict = {}
    if sharded is not None:
        from ftrans.core.sharding import NamedSharding

        mesh, in_sh, out_sh = sharded
        symbols = {mesh: "mesh"}

        def of(s: Any) -> Any:
            if not isinstance(s, NamedSharding):
                return None
            sym = symbols.setdefault(s.mesh, f"mesh_{len(symbols)}")  # as _sharding_attrs names them
            return ExportedSharding(s.mesh.abstract_mesh, s.spec, sym)

        extra = dict(nr_devices=mesh.size, in_shardings_hlo=[of(s) for s in in_sh],
                     out_shardings_hlo=[of(s) for s in out_sh])
    return Exported(fun_name=name, in_tree=in_tree, in_avals=in_avals, out_tree=out_tree, out_avals=out_avals,
                    platforms=platforms, module_text=text, disabled_safety_checks=disabled, get_vjp=get_vjp,
                    uses_global_constants=indexed, calls_polymorphic=_calls_polymorphic(closed.jaxpr),
                    calling_convention_version=_calling_convention_version(), **extra)


def _calls_polymorphic(jaxpr: Any) -> bool:
    """Whether ``jaxpr`` (nested bodies included) calls a shape-polymorphic exported function (its module then
    has dynamic shapes, which a call specialises, as for a polymorphic one)."""
    from ftrans.core.ir import ClosedJaxpr, subjaxprs

    for eqn in jaxpr.eqns:
        if eqn.primitive is call_exported_p and eqn.params["exported"]._poly:
            return True
        for sub in subjaxprs(eqn):
            if _calls_polymorphic(sub.jaxpr if isinstance(sub, ClosedJaxpr) else sub):
                return True
    return False


def _differentiable(dtype: Any) -> bool:
    return dtypes.is_inexact(np.dtype(dtype))


def _export_vjp(primal: Exported, closeds: dict, name: str, disabled: tuple, sharded: Any = None) -> Exported:
    """The VJP of the program exported: ``(primals..., output cotangents...) -> input cotangents``; booleans
    stand in for the ``float0`` cotangents of non-float values. ``closeds`` has the program traced for each
    platform; the VJP is traced for each from that platform's. A partitioned program's VJP is partitioned
    alike: the primals and the input cotangents laid out as the arguments, the output cotangents as the
    results (as JAX exports it)."""
    from ftrans.core.jaxpr_api import eval_jaxpr
    from ftrans.core.platform import platform_override
    from ftrans.transforms.jit import jit
    from ftrans.transforms.reverse import vjp

    n_in = len(primal._in_avals)
    out_avals, in_avals = primal._out_avals, primal._in_avals

    diff_in = [i for i, a in enumerate(in_avals) if _differentiable(a.dtype)]
    diff_out = [k for k, a in enumerate(out_avals) if _differentiable(a.dtype)]

    def fun_vjp(*args: Any) -> tuple:
        # differentiated in its float arguments and results only (the others' cotangents are float0 zeros,
        # stood for by booleans), so no float0 array of a (possibly symbolic) shape is ever made
        from ftrans.numpy import zeros

        primals, cts = args[:n_in], args[n_in:]
        closed = closeds.get(platform_override.get()) or closeds[primal.platforms[0]]

        def diff_fun(*xs: Any) -> list:
            full = list(primals)
            for i, x in zip(diff_in, xs):
                full[i] = x
            # the traced program takes and gives typed keys where the export's types are their data
            full = [random_wrap_p.bind(x, impl=a.dtype._impl) if is_key_dtype(a.dtype) else x
                    for x, a in zip(full, closed.jaxpr.in_avals)]
            outs = eval_jaxpr(closed.jaxpr, closed.consts, *full)
            return [outs[k] for k in diff_out]

        got: list = []
        if diff_in:
            _, pullback = vjp(diff_fun, *[primals[i] for i in diff_in])
            got = list(pullback([cts[k] for k in diff_out]))
        it = iter(got)
        return tuple(next(it) if _differentiable(a.dtype) else zeros(x.shape, np.bool_)
                     for x, a in zip(primals, in_avals))

    fun_vjp.__name__ = f"{name}_vjp"
    specs = [ShapeDtypeStruct(a.shape, a.dtype, weak_type=a.weak_type) for a in in_avals] + [
        ShapeDtypeStruct(a.shape, a.dtype if _differentiable(a.dtype) else np.bool_) for a in out_avals]
    jit_kw: dict = {}
    if sharded is not None:
        _, in_sh, out_sh = sharded
        jit_kw = dict(in_shardings=tuple(in_sh) + tuple(out_sh), out_shardings=tuple(in_sh))
    return export(jit(fun_vjp, **jit_kw), platforms=primal.platforms, disabled_checks=disabled)(*specs)


def _check_args(exported: Exported, leaves: list) -> None:
    for i, (x, want) in enumerate(zip(leaves, exported._in_avals)):
        got = aval_of(x)
        if len(got.shape) != len(want.shape):
            raise FtransValueError(f"Rank mismatch for {exported._arg_name(i)}: expected {want.shape} and called "
                                   f"with {got.shape}")
        if np.dtype(got.dtype) != np.dtype(want.dtype):
            raise FtransValueError(f"Dtype mismatch for {exported._arg_name(i)}: expected {want.dtype} and called "
                                   f"with {got.dtype}")
        for d, (g, w) in enumerate(zip(got.shape, want.shape)):
            if g != w and not is_poly_shape((w,)):
                raise FtransValueError(f"Shape mismatch for {exported._arg_name(i)}.shape[{d}] (expected same "
                                       f"constant): expected {want.shape} and called with {got.shape}")


def _check_dims(exported: Exported, leaves: list) -> None:
    """A shape-polymorphic function's arguments: their sizes must give the dimension variables values that
    satisfy every symbolic dimension and constraint (JAX's shape assertions)."""
    shapes = [tuple(aval_of(x).shape) for x in leaves]
    try:
        solve_dim_vars([a.shape for a in exported._in_avals], shapes,
                       [exported._arg_name(i) for i in range(len(leaves))])
    except ValueError as e:
        raise FtransValueError(str(e)) from None


def _onto_context_mesh(exported: Exported, leaves: list) -> list:
    """The arguments of a partitioned program called eagerly with none laid out over a mesh, under a mesh set
    as the context (``set_mesh``/``use_mesh``) of as many devices: replicated over it, so the call runs there
    (as in JAX, where the context mesh names the call's devices)."""
    from ftrans.core.array import ShardedArray
    from ftrans.core.sharding import NamedSharding, PartitionSpec, get_mesh
    from ftrans.core.trace import Tracer

    if any(isinstance(x, (Tracer, ShardedArray)) for x in leaves):
        return leaves
    mesh = get_mesh()
    if mesh is None or mesh.size != exported.nr_devices:
        return leaves
    from ftrans.devices import device_put

    return [device_put(x, NamedSharding(mesh, PartitionSpec())) for x in leaves]


def call_exported(exported: Exported) -> Callable[..., Any]:
    """The function that runs ``exported`` (``Exported.call``): eagerly, under ``jit``/``vmap``, and under
    ``grad`` through its exported VJP."""
    if not isinstance(exported, Exported):
        raise FtransValueError(f"The exported argument must be an export.Exported. Found {exported}.")
    from ftrans.transforms.custom_derivatives import custom_vjp

    def bind(*flat: Any) -> list:
        return list(call_exported_p.bind(*flat, exported=exported))

    def call_flat(*flat: Any) -> tuple:
        return tuple(bind(*flat))

    call_flat.__name__ = f"call_exported({exported.fun_name})"
    if exported.has_vjp():
        f_flat = custom_vjp(call_flat)

        def fwd(*flat: Any) -> tuple:  # through f_flat, so a higher-order derivative reaches the next VJP
            return f_flat(*flat), flat

        def bwd(res: tuple, cts: Any) -> tuple:
            exp_vjp = exported.vjp()
            fixed = [ct if _differentiable(a.dtype) else np.zeros(np.shape(ct), np.bool_)
                     for ct, a in zip(cts, exported._out_avals)]
            in_cts = call_exported(exp_vjp)(*res, *fixed)
            return tuple(ct if _differentiable(a.dtype) else np.zeros(np.shape(x), float0)
                         for ct, a, x in zip(in_cts, exported._in_avals, res))

        f_flat.defvjp(fwd, bwd)
    else:
        f_flat = call_flat

    def f_imported(*args: Any, **kwargs: Any) -> Any:
        leaves, in_tree = tree_util.tree_flatten((args, kwargs))
        if in_tree != exported._in_tree:
            raise FtransValueError(
                "The invocation args and kwargs must have the same pytree structure as when the function "
                f"'{exported.fun_name}' was exported, but they differ: called with {in_tree}, exported with "
                f"{exported.in_tree}")
        # a typed key traced by ``jit`` is a key-typed value: the module takes its data
        leaves = [random_unwrap_p.bind(x) if is_key_dtype(getattr(aval_of(x), "dtype", None)) else x
                  for x in leaves]
        _check_args(exported, leaves)
        if exported._poly:
            _check_dims(exported, leaves)
        if exported.nr_devices > 1:
            leaves = _onto_context_mesh(exported, leaves)
        outs = f_flat(*leaves)
        return tree_util.tree_unflatten(exported._out_tree, list(outs))

    return f_imported
