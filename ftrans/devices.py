"""Devices and moving data to and from them (``devices``, ``device_put``, ``device_get``, ...).

Devices are the PJRT client's own device objects (what ``jax.devices()``
returns), so they print and compare as JAX users expect.  The default device is
the first device of the default backend: a GPU or TPU when jax's plugin for it
is installed, else the CPU.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from ftrans.core import array as _core_array
from ftrans.core import config as _config_mod
from ftrans.core import dtypes
from ftrans.core import key_reuse as _key_reuse
from ftrans.core import pytrees as tree_util
from ftrans.core import strings as _strings
from ftrans.core import trace as _trace
from ftrans.core.array import (
    Array,
    DeviceArray,
    ShardedArray,
    device_array,
    jax_array_argument,
    jax_array_argument_error,
    set_default_device_id,
)
from ftrans.core.config import config
from ftrans.core.operands import masked_array_error
from ftrans.core.prims.sharding import CopySemantics, device_put_p, set_eager_rule
from ftrans.core.sharding import NamedSharding, PartitionSpec, as_spec, from_runtime
from ftrans.core.trace import Tracer
from ftrans.errors import FtransRuntimeError, FtransTypeError, FtransValueError
from ftrans.lowering import compat
from ftrans.tree_util import _mismatch_details

__all__ = ["devices", "local_devices", "device_count", "local_device_count", "default_backend",
           "device_put", "device_get", "block_until_ready", "copy_to_host_async", "process_index", "process_count",
           "device_put_sharded", "device_put_replicated", "print_environment_info",
           "process_indices", "host_id", "host_count", "host_ids"]

Device = compat.Device

_PLATFORM_ALIASES = {"cuda": "gpu", "rocm": "gpu"}


class BackendUnavailableError(FtransValueError, RuntimeError):
    """A backend that is not present was asked for (JAX raises ``RuntimeError`` here, which code probing for
    platforms catches)."""


# Called (with no arguments) when the runtime's client of a backend is a new one (JAX's ``clear_backends``
# dropped the old one): every program compiled for the old client's devices is stale. ``transforms/jit.py``
# registers ``clear_caches``; ``lowering/parallel.py`` its pmap programs.
on_new_backend: list[Callable[[], None]] = []
_seen: dict[Any, weakref.ref] = {}


def _client(backend: str | None = None) -> Any:
    try:
        client = compat.backend(_PLATFORM_ALIASES.get(backend, backend) if backend else None)
    except RuntimeError as e:
        raise BackendUnavailableError(f"backend {backend!r} is not available: {e}") from None
    seen = _seen.get(backend)
    if seen is None or seen() is not client:
        _seen[backend] = weakref.ref(client)
        if seen is not None:
            for hook in list(on_new_backend):
                hook()
    return client


def _on_platforms(name: str, value: Any) -> None:
    if name == "platforms":
        compat.set_platforms(value)


config._listeners.append(_on_platforms)


def devices(backend: str | None = None) -> list:
    """All devices of ``backend`` (default: the default backend)."""
    return list(_client(backend).devices())


def local_devices(process_index: int | None = None, backend: str | None = None) -> list:
    """The devices of process ``process_index`` (default: this process)."""
    client = _client(backend)
    if process_index is None:
        return list(client.local_devices())
    return [d for d in client.devices() if d.process_index == process_index]


def device_count(backend: str | None = None) -> int:
    return _client(backend).device_count()


def local_device_count(backend: str | None = None) -> int:
    return _client(backend).local_device_count()


def process_index(backend: str | None = None) -> int:
    return _client(backend).process_index()


def process_count(backend: str | None = None) -> int:
    """How many processes own devices of ``backend`` (one until ftrans joins several processes)."""
    return len({d.process_index for d in _client(backend).devices()})


def process_indices(backend: str | None = None) -> list:
    """The indices of the processes that own devices of ``backend``, in order."""
    return sorted({d.process_index for d in _client(backend).devices()})


def host_id(backend: str | None = None) -> int:
    """JAX's older name for :func:`process_index`."""
    return process_index(backend)


def host_count(backend: str | None = None) -> int:
    """JAX's older name for :func:`process_count`."""
    return process_count(backend)


def host_ids(backend: str | None = None) -> list:
    """JAX's older name for :func:`process_indices`."""
    return process_indices(backend)


def print_environment_info(return_string: bool = False) -> str | None:
    """JAX's ``print_environment_info``: ftrans's version and the versions of what it runs on (jax's
    PJRT runtime, jaxlib, NumPy, Python), the devices, the process count, the platform, the
    ``FTRANS_``/``JAX_``/``XLA_`` environment variables and ``nvidia-smi``'s report when there is
    one; useful in a bug report. Printed, or returned with ``return_string=True``."""
    import os
    import platform
    import sys

    import jax

    from ftrans.core.version import __version__

    devs = devices()
    lines = [
        f"ftrans: {__version__}",
        f"jax:    {jax.__version__}",
        f"jaxlib: {compat.jaxlib_version()}",
        f"numpy:  {np.__version__}",
        f"python: {sys.version.replace(chr(10), ' ')}",
        f"device info: {devs[0].device_kind}-{device_count()}, {local_device_count()} local devices",
        f"process_count: {process_count()}",
        f"platform: {platform.uname()}",
    ]
    lines += [f"{k}={v}" for k, v in os.environ.items() if k.startswith(("FTRANS_", "JAX_", "XLA_"))]
    info = "\n".join(lines)
    smi = _nvidia_smi()
    if smi:
        info += "\n\n$ nvidia-smi\n" + smi
    if return_string:
        return info
    print(info)
    return None


def _nvidia_smi() -> str | None:
    import subprocess

    try:
        return subprocess.check_output(["nvidia-smi"], timeout=10, stderr=subprocess.DEVNULL).decode()
    except (OSError, subprocess.SubprocessError):
        return None


def default_backend() -> str:
    """``"cpu"``, ``"gpu"`` or ``"tpu"``."""
    return _client().platform


@functools.lru_cache(maxsize=1)
def _default_device_cached() -> Any:
    return _client().local_devices()[0]


def _forget_devices() -> None:
    from ftrans.core.sharding import forget_runtime_meshes

    _default_device_cached.cache_clear()
    forget_runtime_meshes()


on_new_backend.append(_forget_devices)


def clear_backends() -> None:
    """JAX's ``clear_backends``: drop the runtime's clients, so the next use starts new ones, and every program
    compiled for them (arrays on the old clients' devices can no longer be used)."""
    compat.clear_backends()
    _seen.clear()
    for hook in list(on_new_backend):
        hook()


# The device ``config.default_device`` names (``ftrans.default_device(...)``), resolved; None: none named.
_default_override: Any = None


def _resolve_default(value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, str):
        return _client(value).local_devices()[0]  # a platform name: its first device
    if _is_device(value):
        return value
    raise FtransValueError(
        f"default_device: expected a Device (from ftrans.devices()), a platform name such as 'cpu', or None, "
        f"got {type(value).__name__} {value!r}")


_KNOWN_PLATFORMS = ("cpu", "gpu", "cuda", "rocm", "tpu")


def _check_default(value: Any) -> None:
    """A platform name set before the backends start is only checked to be one (JAX's check): naming it starts
    no backend, so ``jax_num_cpu_devices`` can still follow ``jax_platform_name``."""
    if isinstance(value, str) and not compat.backend_started():
        if value.lower() not in _KNOWN_PLATFORMS:
            raise FtransValueError(
                f"default_device: expected a Device (from ftrans.devices()), a platform name such as 'cpu', or "
                f"None, got str {value!r}")
        return
    _resolve_default(value)


def _on_config(name: str, value: Any = None) -> None:
    global _default_override
    if name == "default_device":
        values = config.values_anywhere("default_device")
        # A context names a device in some thread: each call resolves the calling thread's option.
        if len(values) != 1:
            _default_override = _PER_THREAD
        elif isinstance(values[0], str) and not compat.backend_started():
            _default_override = _LAZY  # its first device, found on first use
        else:
            _default_override = _resolve_default(values[0])
        _core_array.set_placement(_default_override is not None)


_PER_THREAD = object()
_LAZY = object()
config.register_validator("default_device", _check_default)
config._listeners.append(_on_config)


def _set_num_cpu_devices(n: int) -> None:
    # Checked by handing it to the runtime before ftrans stores it: a refused value leaves both unchanged.
    if n == config.num_cpu_devices:
        return
    try:
        compat.set_num_cpu_devices(n)
    except RuntimeError:
        raise FtransRuntimeError(
            f"jax_num_cpu_devices={n!r}: the number of CPU devices can change only before the first operation "
            "starts the backends; set it right after the import (or set JAX_NUM_CPU_DEVICES)") from None


config.register_validator("num_cpu_devices", _set_num_cpu_devices)
_config_mod.scope_listeners.append(_on_config)
if config.default_device is not None:  # JAX_DEFAULT_DEVICE=cpu in the environment
    _on_config("default_device")


def default_device() -> Any:
    """The device ``jit`` runs on and ``device_put`` places on when nothing else says: the one
    ``ftrans.default_device(...)`` names, else the default backend's first device."""
    global _default_override
    d = _default_override
    if d is _PER_THREAD:
        d = _resolve_default(config.default_device)
    elif d is _LAZY:
        d = _default_override = _resolve_default(config.default_device)
    return d if d is not None else _default_device_cached()


set_default_device_id(lambda: _core_array.device_key(default_device()))  # core's committed check asks where the default is
_core_array.set_unplaced_device(_default_device_cached)  # where an unplaced host array says it is
_core_array.set_placement(False, lambda: default_device() if config.default_device is not None else None)


def _is_device(d: Any) -> bool:
    return hasattr(d, "platform") and hasattr(d, "id") and hasattr(d, "client")


def _explicit_transfer_guard(x: Any) -> None:
    """JAX's transfer guard for ``device_put`` of host values (an explicit host-to-device transfer): raised
    under "disallow_explicit", logged under "log_explicit"."""
    from ftrans.core.config import config

    level = config.transfer_level("host_to_device")
    if level not in ("disallow_explicit", "log_explicit"):
        return
    for leaf in tree_util.tree_leaves(x):
        if isinstance(leaf, (np.ndarray, np.generic, bool, int, float, complex)):
            from ftrans.errors import JaxRuntimeError, user_location

            msg = (f"Disallowed explicit host-to-device transfer: a {type(leaf).__name__} of shape {np.shape(leaf)} "
                   f"given to device_put (at {user_location()}); the transfer guard is {level!r}")
            if level == "disallow_explicit":
                raise JaxRuntimeError(f"INVALID_ARGUMENT: {msg}")
            import logging

            logging.getLogger("ftrans").warning(msg)


def _explicit(fn: Callable) -> Callable:
    """``fn``'s transfers are the user's explicit ones for the runtime's transfer guard (JAX's): allowed
    under "disallow", refused only under "disallow_explicit", as JAX's ``device_put``."""
    @functools.wraps(fn)
    def put(*args: Any, **kwargs: Any) -> Any:
        with compat.explicit_transfers():
            return fn(*args, **kwargs)

    return put


@_explicit
def device_put(x: Any, device: Any = None, *, src: Any = None, donate: Any = False,
               may_alias: Any = None) -> Any:
    """Place every array leaf of the pytree ``x`` on ``device`` (default: the default device).

    Leaves become device-resident ``ftrans.Array``s; Python scalars keep their
    weak type, as in JAX. ``device`` is a Device, a Sharding, a
    ``PartitionSpec`` (over the mesh ``set_mesh`` set) or a pytree prefix of
    ``x`` of these. As in JAX, ``donate`` and ``may_alias`` are bools or
    pytree prefixes of ``x``: ``may_alias=False`` always copies (``None``
    aliases an array already on ``device`` unless it is donated), and a
    donated device array is deleted once its copy exists. ``src``, where
    given, says where the arrays come from (a Device or Sharding, or a pytree
    prefix): as in JAX it is not checked, and reverse mode sends the
    cotangents there.

    Under a transform (``jit``, ``grad``, ``vmap``) it is the primitive
    ``device_put``, with JAX's rules: the tangent is placed as the value, the
    cotangent goes back where the value came from (``src``, else the concrete
    value's own placement), and inside ``jit`` a NamedSharding target is a
    sharding annotation while a Device target changes nothing (the program's
    placement decides).
    """
    _explicit_transfer_guard(x)
    leaves, treedef = tree_util.tree_flatten(x)
    n = len(leaves)
    laid = None
    if type(device).__name__ == "Format" and hasattr(device, "layout"):
        _check_format_target(device, leaves)
        from ftrans.core.layout import Layout, as_layout

        lay = as_layout(device.layout)
        if isinstance(lay, Layout) and not lay.is_default and _trace.is_eager() and not any(
                isinstance(leaf, Tracer) for leaf in leaves):
            laid, device = lay, device.sharding  # placed as its sharding says, then laid out (_lay_out)
    targets = _flat_targets("device", device, x, n)
    srcs = [None] * n if src is None else _flat_targets("src", src, x, n)
    copies = _copy_semantics(donate, may_alias, x, n)
    if _trace.is_eager() and not any(isinstance(leaf, Tracer) for leaf in leaves):
        out = [_place(leaf, t, c) for leaf, t, c in zip(leaves, targets, copies)]
        if laid is not None:
            out = [_lay_out(o, laid) for o in out]
    else:
        from ftrans.core.prims.shard_map import eager_body

        if eager_body.depth:
            for t in targets:
                if _is_device(t):
                    raise FtransValueError(
                        "device_put with explicit device not allowed within shard_map-decorated functions, but "
                        f"got device {t} (the body of a shard_map called outside jit runs on every device of "
                        "its mesh); leave the device out, or jit the shard_map (there device_put is ignored)")
        for leaf, t in zip(leaves, targets):
            if not isinstance(leaf, Tracer):
                _check_operand(leaf)
            if isinstance(t, NamedSharding):
                from ftrans.core.sharding import check_divisible

                check_divisible(t, _trace.aval_of(leaf).shape, "device_put")
        srcs = [_placement_of(leaf) if s is None else s for leaf, s in zip(leaves, srcs)]
        out = device_put_p.bind(*leaves, devices=tuple(targets), srcs=tuple(srcs), copy_semantics=tuple(copies))
    result = tree_util.tree_unflatten(treedef, out)
    if _key_reuse.hot:  # key-reuse checking: a key put on a device is the same key (JAX's device_put forwards)
        _key_reuse.alias_leaves(x, result)
    return result


def _lay_out(arr: Any, lay: Any) -> Any:
    """``arr`` (just placed on its devices) copied by XLA into layout ``lay`` (``device_put`` with a Format)."""
    from ftrans.core.array import laid_out
    from ftrans.core.sharding import Mesh
    from ftrans.lowering import spmd

    aval = arr.aval
    if type(arr) is ShardedArray and isinstance(arr.sharding, NamedSharding):
        sharding = arr.sharding
        return spmd.wrap_laid(spmd.relayout(arr._sharded, aval, sharding, None, lay), aval, sharding, lay)
    dev = arr.device
    devs = np.empty(1, dtype=object)
    devs[0] = dev
    sharding = NamedSharding(Mesh(devs, ("_device",)), PartitionSpec())

    def one(buf: Any, src: Any, dst: Any) -> Any:  # through a one-device program, back to one device's buffer
        return compat.shards_of(spmd.relayout(buf, aval, sharding, src, dst))[0][2]

    buf = arr._buf if type(arr) is DeviceArray else compat.device_put(np.asarray(arr), dev)
    new = one(buf, None, lay)
    out = device_array(new, aval, (aval.shape, aval.dtype, aval.weak_type, _core_array.device_key(dev)))
    out._commit = True
    return laid_out(out, new, lay, lambda b: one(b, lay, None))


def _check_format_target(fmt: Any, leaves: list) -> None:
    """A ``Format`` target (ftrans's or JAX's) places values only with a concrete layout of their rank (or
    none); ``Layout.AUTO`` is for ``jit``'s compiler to choose, as in JAX."""
    lay = fmt.layout
    if lay is None:
        return
    if not hasattr(lay, "major_to_minor"):
        raise FtransValueError(
            f"device_put: the sharding and layout in {fmt} should be concrete: Layout.AUTO (or no sharding) "
            "leaves the choice to jit's compiler; give a Layout (or None) and a sharding")
    for leaf in leaves:
        ndim = len(_trace.aval_of(leaf).shape)
        if len(lay.major_to_minor) != ndim:
            raise FtransValueError(
                "device_put: Length of major_to_minor and the rank of the value should match. Got "
                f"major_to_minor={tuple(lay.major_to_minor)} for a value of rank {ndim}")


def _target_leaf(d: Any) -> bool:
    return d is None or _is_device(d) or isinstance(d, (NamedSharding, PartitionSpec)) or hasattr(d, "device_set")


def _flat_prefix(prefix: Any, x: Any, is_leaf: Any) -> list:
    """One entry of ``prefix`` (a pytree prefix of ``x``) per leaf of ``x``, in ``x``'s leaf order."""
    out: list = []
    tree_util.tree_map(lambda p, sub: out.extend([p] * len(tree_util.tree_leaves(sub))), prefix, x,
                       is_leaf=is_leaf)
    return out


def _flat_targets(what: str, spec: Any, x: Any, n: int) -> list:
    """``device``/``src`` as one target per leaf of ``x``: None, a Device or a NamedSharding."""
    if spec is None:
        return [None] * n
    if isinstance(spec, (dict, list, tuple)) and not _target_leaf(spec):  # a tree prefix of x, as in JAX
        details = _mismatch_details(spec, x, f"device_put {what}", _target_leaf)
        if details:
            raise FtransValueError(f"device_put {what} specification must be a tree prefix of the corresponding "
                                   f"value (x); got {tree_util.tree_structure(spec, is_leaf=_target_leaf)} for "
                                   f"x of structure {tree_util.tree_structure(x)}.{details}")
        try:
            flat = _flat_prefix(spec, x, _target_leaf)
        except ValueError as e:
            raise FtransValueError(f"device_put: the tree of {what}s must be a tree prefix of x ({e})") from None
        memo: dict = {}
        out = []
        for d in flat:
            k = id(d)
            if k not in memo:
                memo[k] = _as_target(what, d)
            out.append(memo[k])
        return out
    return [_as_target(what, spec)] * n


def _as_target(what: str, device: Any) -> Any:
    """A device/src entry as None, a Device or a NamedSharding (a PartitionSpec over the current mesh, a
    runtime sharding as ftrans's)."""
    device = as_spec(device)  # JAX's PartitionSpec: as ftrans's
    if isinstance(device, NamedSharding) and device._memory_kind not in (None, "device"):
        from ftrans.errors import FtransNotImplementedError  # (over an AbstractMesh, which keeps the kind)

        raise FtransNotImplementedError(f"device_put: memory_kind={device._memory_kind!r}; ftrans places arrays "
                                        "in the device's default memory only (memory_kind='device')")
    if device is None or _is_device(device) or isinstance(device, NamedSharding):
        return device
    if isinstance(device, PartitionSpec):
        from ftrans.core.sharding import get_mesh

        mesh = get_mesh()
        if mesh is None:
            raise FtransValueError(f"device_put: got a bare PartitionSpec {device!r} but no mesh is set. Please set "
                                   "a mesh via `jax.set_mesh` if a PartitionSpec is passed to device_put (ftrans."
                                   "set_mesh(mesh)), or use NamedSharding(mesh, spec)")
        return NamedSharding(mesh, device)
    if hasattr(device, "_device_assignment") or hasattr(device, "device_set"):
        if isinstance(conv := from_runtime(device), NamedSharding):  # JAX's NamedSharding: as ftrans's (as JAX)
            return conv
        ds = getattr(device, "device_set", None)
        if ds is None or len(ds) != 1:
            raise FtransTypeError(f"device_put: cannot place on {device!r}; use a NamedSharding or a Device")
        return next(iter(ds))
    raise FtransValueError(
        f"device_put: Received invalid value {device!r} of type {type(device).__name__} for {what}: it must be "
        "None, a Device (from ftrans.devices()), a Sharding, or a pytree of these"
        + (f" (for the platform, pass ftrans.devices({device!r})[0])" if isinstance(device, str) else ""))


def _copy_semantics(donate: Any, may_alias: Any, x: Any, n: int) -> list:
    """One ``CopySemantics`` per leaf of ``x`` from ``donate`` and ``may_alias`` (bools, or None for
    ``may_alias``, or tree prefixes of ``x`` of them), as JAX maps them."""
    if type(donate) is bool and (may_alias is None or type(may_alias) is bool):  # one flag each: one answer
        return [_copy_of(donate, may_alias)] * n
    flags = []
    for flag, what in ((donate, "donate"), (may_alias, "may_alias")):
        if flag is None or isinstance(flag, bool):
            flags.append([flag] * n)
            continue
        try:
            flat = _flat_prefix(flag, x, lambda v: v is None or isinstance(v, bool))
        except ValueError as e:
            raise FtransValueError(f"device_put: donate / may_alias must be a bool or a tree prefix of x ({e})"
                                   ) from None
        for f in flat:
            if not (f is None or isinstance(f, bool)):
                raise FtransTypeError(f"device_put: {what} must be a bool or a pytree prefix of x of bools, "
                                      f"got {type(f).__name__}")
        flags.append(flat)
    return [_copy_of(d, a) for d, a in zip(*flags)]


def _copy_of(donate: Any, may_alias: Any) -> CopySemantics:
    if donate and may_alias:
        raise FtransValueError("device_put: may_alias and donate cannot be True at the same time (donate=True "
                               "and may_alias=True: a donated array is deleted, so its result cannot alias "
                               "it); leave may_alias=None")
    m = (not donate) if may_alias is None else may_alias
    return CopySemantics.REUSE_INPUT if m else CopySemantics.DONATE_INPUT if donate else CopySemantics.ALWAYS_COPY


def _placement_of(leaf: Any) -> Any:
    """Where the concrete value behind a traced ``leaf`` lives (its Device, or its NamedSharding), or None: an
    autodiff tracer outside ``jit`` carries its concrete primal, which is where a cotangent goes back to,
    as JAX infers ``src``. A host-resident value, or a tracer with no concrete value, names no placement."""
    v = leaf
    while isinstance(v, Tracer):
        v = getattr(v, "primal", None)
    if type(v) is DeviceArray:
        return v.device
    if type(v) is ShardedArray and isinstance(v.sharding, NamedSharding):
        return v.sharding
    return None


def _check_operand(x: Any) -> None:
    """A leaf ``device_put`` cannot place is refused with the error the eager path gives."""
    if isinstance(x, (Array, bool, int, float, complex, np.generic)):
        return
    if isinstance(x, np.ma.MaskedArray):
        raise masked_array_error("device_put")
    if isinstance(x, np.ndarray) or hasattr(x, "__array__"):
        return
    if jax_array_argument(x):
        raise jax_array_argument_error("device_put")
    raise FtransTypeError(f"device_put: cannot place a {type(x).__name__} on a device; pass arrays")


def _place(leaf: Any, target: Any, copy: CopySemantics) -> Any:
    """One concrete leaf placed on ``target`` (None: where it is, a Device, or a NamedSharding)."""
    donate = copy is CopySemantics.DONATE_INPUT
    may_alias = copy is CopySemantics.REUSE_INPUT
    if isinstance(target, NamedSharding):
        if type(leaf) is _strings.StringArray:  # (its data never goes through the runtime)
            return _strings.place(leaf, target)
        try:
            return _put_sharded_leaf(leaf, target, donate, may_alias)
        except FtransTypeError:
            if not _strings.is_string_array(leaf):  # (a string array's dtype is refused there: placed here)
                raise
            return _strings.place(leaf, target)
    if target is None and type(leaf) is ShardedArray:  # stays laid out as it is
        return _keep_sharded(leaf, leaf._sharded, donate, may_alias)
    if target is None:  # stays where it is, committed only if it already was (as in JAX)
        where = leaf.device if isinstance(leaf, DeviceArray) else default_device()
        commit = isinstance(leaf, DeviceArray) and leaf._committed
    else:
        where, commit = target, True
    try:
        out = _put_leaf(leaf, where, donate, may_alias)
    except FtransTypeError:
        if not _strings.is_string_array(leaf):  # (a string array's dtype is refused there: placed here)
            raise
        return _strings.place(leaf, target)  # (no target: refused, as JAX's device_put refuses one)
    if commit and type(out) is DeviceArray and not getattr(out, "_commit", False):
        if out is leaf:  # the same buffer, now pinned to its device: a new Array, as JAX's device_put
            out = device_array(leaf._buf, leaf._aval, leaf._sig)
        out._commit = True
        _commit_seen()
    return out


def _eager_device_put(xs: list, *, devices: tuple, srcs: tuple, copy_semantics: tuple) -> list:
    """``device_put_p`` applied to concrete values (core's eager rule): each placed on its target. A staged
    program the host interpreter runs while XLA compiles (``calls.host_only``) keeps its values on the host,
    as the NumPy rule does."""
    from ftrans.lowering.rules.calls import host_only_active

    if host_only_active():
        return list(xs)
    return [_place(x, d, c) for x, d, c in zip(xs, devices, copy_semantics)]


set_eager_rule(_eager_device_put)


def _keep_sharded(x: ShardedArray, buf: Any, donate: bool, may_alias: bool) -> Any:
    """``x`` placed as it already is (``buf`` is its own buffer): ``x`` itself where it may alias (as JAX
    returns the same object), else a fresh copy (and ``x`` deleted where donated)."""
    from ftrans.core.array import sharded_array

    if may_alias:
        return x
    out = sharded_array(compat.copy_buffer(buf), x.aval)
    if donate:
        x.delete()
    return out


def _put_sharded_leaf(leaf: Any, sharding: NamedSharding, donate: bool = False, may_alias: bool = True) -> Any:
    """``device_put(leaf, NamedSharding(...))``: the leaf split over the mesh (each device gets its block)."""
    from ftrans.core.array import sharded_array
    from ftrans.core.avals import ShapedArray
    from ftrans.core.sharding import check_divisible
    from ftrans.lowering import spmd

    if isinstance(leaf, Array):
        aval = leaf.aval
        if aval.typed_sharding is not None:  # its type is the new layout's (sharded_array types it), not the old one's
            aval = ShapedArray(aval.shape, aval.dtype, aval.weak_type)
    else:
        _check_operand(leaf)
        arr = np.asarray(leaf)
        canon = dtypes.canonicalize(arr.dtype)
        weak = isinstance(leaf, (bool, int, float, complex))
        if weak:
            canon = dtypes.python_scalar_dtype(leaf)
        leaf = arr.astype(canon) if arr.dtype != canon else arr
        aval = ShapedArray(leaf.shape, leaf.dtype, weak)
    check_divisible(sharding, aval.shape, "device_put")
    buf = spmd.put(leaf, sharding)
    if type(leaf) is ShardedArray and buf is leaf._sharded:  # already laid out so
        return _keep_sharded(leaf, buf, donate, may_alias)
    if not may_alias and isinstance(leaf, (DeviceArray, ShardedArray)):
        buf = compat.copy_buffer(buf)  # the runtime may have moved no data: never share the source's buffer
        if donate:
            leaf.delete()
    return sharded_array(buf, aval)


def _commit_seen() -> None:
    """An array was committed to a device: from now on eager operations look for committed operands
    (``device_eager.dispatch``), so that they run on those operands' device, as in JAX."""
    from ftrans.lowering import device_eager

    device_eager.install()


def _put_leaf(x: Any, dev: Any, donate: bool = False, may_alias: bool = True) -> Any:
    from ftrans.lowering.executable import sig_of, to_buffer

    if isinstance(x, DeviceArray):
        buf = to_buffer(x, dev)
        if buf is x._buf:
            if may_alias:
                return x
            buf = compat.copy_buffer(buf)
        out = device_array(buf, x._aval, sig_of(x._aval, _core_array.device_key(dev)))
        if donate:
            x.delete()
        return out
    if donate and isinstance(x, Array):
        try:
            del x._buf  # a host Array keeps its value; only its cached device copy is given up
        except AttributeError:
            pass
    if isinstance(x, Array):
        aval = x.aval
        arr = x._value
    elif isinstance(x, (bool, int, float, complex)):
        d = dtypes.python_scalar_dtype(x)
        arr = np.asarray(x, d)
        from ftrans.core.avals import ShapedArray

        aval = ShapedArray((), d, dtypes.is_weak_scalar(x))
    elif isinstance(x, (np.ndarray, np.generic)) or hasattr(x, "__array__"):
        if isinstance(x, np.ma.MaskedArray):
            raise masked_array_error("device_put")
        arr = np.asarray(x)
        canon = dtypes.canonicalize(arr.dtype)
        if arr.dtype != canon:
            arr = arr.astype(canon)
        from ftrans.core.avals import ShapedArray

        aval = ShapedArray(arr.shape, arr.dtype, False)
    elif jax_array_argument(x):
        raise jax_array_argument_error("device_put")
    else:
        raise FtransTypeError(f"device_put: cannot place a {type(x).__name__} on a device; pass arrays")
    buf = compat.device_put(np.asarray(arr, order="C"), dev)
    if dev.platform != "cpu":
        from ftrans.lowering import device_eager

        device_eager.install(accelerator=True)
    return device_array(buf, aval, sig_of(aval, _core_array.device_key(dev)))


def device_get(x: Any) -> Any:
    """Every array leaf of ``x`` as a NumPy array on the host (waits for pending computations)."""
    def get(leaf: Any) -> Any:
        if isinstance(leaf, Tracer):
            raise FtransTypeError("device_get: got a traced value; device_get works on concrete arrays")
        if isinstance(leaf, Array) or hasattr(leaf, "__array__"):  # a jax.Array too, as in JAX
            return np.asarray(leaf)
        return leaf

    return tree_util.tree_map(get, x)


def copy_to_host_async(x: Any) -> Any:
    """Start copying every array leaf of ``x`` to the host (leaves with a ``copy_to_host_async`` method;
    others are left alone); returns ``x``, as JAX's."""
    for leaf in tree_util.tree_leaves(x):
        try:
            start = leaf.copy_to_host_async
        except AttributeError:
            continue
        start()
    return x


def block_until_ready(x: Any) -> Any:
    """Wait until every array leaf of ``x`` is computed; returns ``x``."""
    leaves = tree_util.tree_leaves(x)
    if len(leaves) == 1:
        if hasattr(leaves[0], "block_until_ready"):
            leaves[0].block_until_ready()
        return x
    bufs = []  # the device buffers, waited for in one runtime call (a training step's many outputs)
    for leaf in leaves:
        t = type(leaf)
        buf = leaf._buf if t is DeviceArray else leaf._sharded if t is ShardedArray else None
        if buf is not None:
            bufs.append(buf)
        elif hasattr(leaf, "block_until_ready"):
            leaf.block_until_ready()
    if bufs:
        try:
            compat.block_until_ready_all(bufs)
        except RuntimeError:  # a deleted (donated) buffer has nothing to wait for; a failed computation re-raises
            compat.block_until_ready_all([b for b in bufs if not b.is_deleted()])
    return x


def _host_leaf(x: Any) -> np.ndarray:
    if isinstance(x, Tracer):
        raise FtransTypeError("device_put_sharded/device_put_replicated: got a traced value; they place concrete "
                              "arrays (call them outside jit/grad/vmap)")
    arr = x._value if isinstance(x, Array) else np.asarray(x)
    canon = dtypes.canonicalize(arr.dtype)
    return arr.astype(canon) if arr.dtype != canon else arr


def _stacked_on(pieces: list, devices: list, axis: str) -> Any:
    from ftrans.core.array import sharded_array
    from ftrans.core.avals import ShapedArray

    n = len(devices)
    shape = (n, *pieces[0].shape)
    sharding = compat.mapped_sharding(compat.replica_mesh(devices, n, axis), 0, len(shape))
    buf = compat.put_pieces([np.ascontiguousarray(p[None]) for p in pieces], shape, sharding, devices)
    return sharded_array(buf, ShapedArray(shape, pieces[0].dtype, False))


def _check_devices(op: str, devices: Any) -> list:
    devices = list(devices)
    if not devices or not all(_is_device(d) for d in devices):
        raise FtransTypeError(f"{op}: devices must be a non-empty sequence of Devices (from ftrans.devices()), "
                              f"got {devices!r}")
    return devices


@_explicit
def device_put_sharded(shards: Any, devices: Any) -> Any:
    """JAX's ``device_put_sharded``: stack ``shards`` (a list of pytrees of one structure, one per device)
    along a new leading axis, each on its device; the result is an Array split over ``devices``."""
    devices = _check_devices("device_put_sharded", devices)
    shards = list(shards)
    if len(shards) != len(devices):
        raise FtransValueError(f"device_put_sharded: got {len(shards)} shards for {len(devices)} devices; "
                               "give one shard per device")
    trees = [tree_util.tree_flatten(s) for s in shards]
    tree0 = trees[0][1]
    for k, (_, t) in enumerate(trees):
        if t != tree0:
            raise FtransValueError(f"device_put_sharded: shard {k} has tree structure {t}, but shard 0 has "
                                   f"{tree0}; every shard must have the same structure")
    out = []
    for i in range(len(trees[0][0])):
        on_device = _on_their_devices([leaves[i] for leaves, _ in trees], devices)
        if on_device is not None:
            out.append(on_device)
            continue
        pieces = [_host_leaf(leaves[i]) for leaves, _ in trees]
        shapes = {(p.shape, p.dtype) for p in pieces}
        if len(shapes) != 1:
            raise FtransValueError(f"device_put_sharded: leaf {i} has differing shapes/dtypes across shards: "
                                   f"{sorted(str(s) for s in shapes)}; shards must agree")
        out.append(_stacked_on(pieces, devices, "_device_put_sharded"))
    return tree_util.tree_unflatten(tree0, out)


def _on_their_devices(xs: list, devices: list) -> Any:
    """The shards stacked without a trip through the host, when each already sits on its device (Arrays that
    ``device_put`` placed there, all of one shape and dtype); None otherwise."""
    from ftrans.core.array import DeviceArray, sharded_array
    from ftrans.core.avals import ShapedArray
    from ftrans.core.prims.structural import reshape_p

    first = xs[0]
    for x, d in zip(xs, devices):
        if type(x) is not DeviceArray or x.shape != first.shape or x.dtype != first.dtype or x.is_deleted() \
                or x.devices() != {d} or dtypes.canonicalize(x.dtype) != x.dtype:
            return None
    n = len(devices)
    shape = (n, *first.shape)
    sharding = compat.mapped_sharding(compat.replica_mesh(devices, n, "_device_put_sharded"), 0, len(shape))
    bufs = [reshape_p.bind(x, new_sizes=(1, *first.shape), dimensions=None)._device_buffer()
            for x in xs]  # each reshaped on its own device
    return sharded_array(compat.assemble(shape, sharding, bufs), ShapedArray(shape, first.dtype, False))


@_explicit
def device_put_replicated(x: Any, devices: Any) -> Any:
    """JAX's ``device_put_replicated``: a copy of ``x`` (a pytree) on each of ``devices``, stacked along a new
    leading axis split over them."""
    devices = _check_devices("device_put_replicated", devices)
    return tree_util.tree_map(lambda leaf: _stacked_on([_host_leaf(leaf)] * len(devices), devices,
                                                       "_device_put_replicated"), x)


def live_arrays(platform: Any = None) -> list:
    """JAX's ``live_arrays``: every ``ftrans.Array`` still alive and not deleted (found by a scan of the
    garbage collector's objects, so meant for debugging, as in JAX), those on ``platform`` when one is
    given ("cpu", "gpu", ...)."""
    import gc

    from ftrans.core.array import Array

    out = []
    for obj in gc.get_objects():
        if isinstance(obj, Array) and not obj.is_deleted():
            if platform is not None and not any(d.platform == platform or (platform == "gpu" and d.platform in (
                    "cuda", "rocm")) for d in obj.devices()):
                continue
            out.append(obj)
    return out
