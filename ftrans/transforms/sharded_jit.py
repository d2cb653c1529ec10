"""``jit`` with shardings: ``in_shardings`` / ``out_shardings``, or arguments already spread over a mesh.

A call takes this path when the jitted function was given shardings or when
an argument is an Array laid out over several devices (``device_put`` with a
``NamedSharding``, an earlier sharded result).  As in JAX, an argument with no
sharding given follows its own layout (an Array's ``.sharding``) and is
otherwise replicated; a result with no sharding given gets the layout XLA's
partitioner chose.  The program is compiled once per argument signature and
layout (``lowering/spmd.py``); the results come back as Arrays spread over the
mesh, with ``.sharding`` a ``NamedSharding``.
"""

from __future__ import annotations

import threading
from typing import Any

from ftrans.core import array as _array_mod
from ftrans.core import config as _config_mod
from ftrans.core import pytrees as tree_util
from ftrans.core import sharding as _sh_mod
from ftrans.core import trace as _trace
from ftrans.core.array import DeviceArray, ShardedArray, device_key, sharded_sig
from ftrans.core.avals import ShapeDtypeStruct
from ftrans.core.layout import Format, Layout, as_format, default_layout, requested_layout
from ftrans.core.prims.parallel import pmap_in_program
from ftrans.core.sharding import (
    AbstractMesh,
    NamedSharding,
    PartitionSpec,
    Sharding,
    SingleDeviceSharding,
    as_sharding,
    check_divisible,
    from_runtime,
    get_mesh,
)
from ftrans.core.sharding_rules import typed_aval
from ftrans.errors import FtransRuntimeError as _FtransRuntimeError
from ftrans.errors import FtransTypeError, FtransValueError
from ftrans.lowering.spmd import SpmdExecutable
from ftrans.transforms.jit import (
    GENERAL_PATH,
    Compiled,
    LoweredText,
    _long_type,
    argument_mismatch_error,
    check_laid_layouts,
)


class _DeviceAssignmentError(FtransValueError, RuntimeError):
    """``compile(device_assignment=)`` of the wrong length: jax 0.10 raised ``ValueError``, jax 0.11
    ``RuntimeError``."""


__all__ = ["needs_spmd", "call_sharded", "lower_sharded"]


def constraint_meshes(jaxpr: Any, _seen: set | None = None) -> list:
    """The meshes (of several devices) that sharding constraints (and ``device_put``'s NamedSharding targets)
    anywhere in ``jaxpr`` name.  A body shared by several equations (the nested loops of a higher-order
    gradient share theirs) is read once (``_seen``: ids of the bodies read)."""
    from ftrans.core.ir import ClosedJaxpr, subjaxprs
    from ftrans.core.prims.shard_map import shard_map_p
    from ftrans.core.prims.sharding import device_put_p, sharding_constraint_p

    if _seen is None:
        _seen = set()
    out: list = []
    for eqn in jaxpr.eqns:
        if eqn.primitive is device_put_p:  # a NamedSharding target is a constraint too
            for d in eqn.params["devices"]:
                m = getattr(d, "mesh", None)
                if isinstance(d, NamedSharding) and m.size > 1 and m not in out:
                    out.append(m)
        elif eqn.primitive is sharding_constraint_p or eqn.primitive is shard_map_p:
            m = eqn.params["sharding"].mesh if eqn.primitive is sharding_constraint_p else eqn.params["mesh"]
            if (m.size > 1 or eqn.primitive is shard_map_p) and m not in out:
                out.append(m)
        else:
            for sub in subjaxprs(eqn):
                body = sub.jaxpr if isinstance(sub, ClosedJaxpr) else sub
                if id(body) in _seen:
                    continue
                _seen.add(id(body))  # (the caller's jaxpr keeps every body alive: ids stay unique)
                for m in constraint_meshes(body, _seen):
                    if m not in out:
                        out.append(m)
    return out


def sharded_consts(consts: Any) -> bool:
    """Whether a traced program captured an array laid out over a mesh (a value constrained or placed while
    tracing, before any argument reached it): the program is then partitioned, so the layout survives."""
    return any(type(c) is ShardedArray and isinstance(c.sharding, NamedSharding) for c in consts)


def needs_spmd(owner: Any, leaves: list) -> bool:
    if owner._spmd_always:
        return True
    if getattr(owner, "_device", None) is not None:  # jit(device=d): the arguments are moved to d, as JAX's
        return False
    for x in leaves:
        if type(x) is ShardedArray and isinstance(x.sharding, NamedSharding):
            return True
        if type(x) is ShapeDtypeStruct and isinstance(as_sharding(x.sharding), NamedSharding):
            return True  # lower(ShapeDtypeStruct(..., sharding=s)) as for an argument laid out so
    return context_of(owner) is not None


def context_of(owner: Any) -> Any:
    """The mesh in context that ``owner``'s results are placed on, as JAX's: ``set_mesh``/``use_mesh``'s for
    ``jit``, ``with mesh:``'s for ``pjit``; None when none is open."""
    if not _sh_mod.contexts_open[0] and not _sh_mod.contexts_open[1]:
        return None
    mesh = _sh_mod.legacy_mesh() if getattr(owner, "_api_name", None) == "pjit" else _sh_mod.context_mesh()
    return None if mesh is None or mesh.empty else mesh


def placement(in_shardings: Any, out_shardings: Any) -> tuple[bool, Any]:
    """What jit's ``in_shardings``/``out_shardings`` ask for: (partition over a mesh?, the one device every
    single-device sharding among them names, or None). Shardings that are all single-device (JAX's or ftrans's)
    need no partitioner: the program just runs on that device, as in JAX."""
    from ftrans.core.sharding import PartitionSpec

    devices = set()
    partitioned = False
    for what, tree in (("in_shardings", in_shardings), ("out_shardings", out_shardings)):
        for s in tree_util.tree_leaves(tree, is_leaf=lambda x: _is_sharding_leaf(x) or isinstance(x, PartitionSpec)):
            if requested_layout(s) is not None:  # a layout asked for: XLA compiles for it (a partitioned program)
                partitioned = True
            s = as_sharding(_strip(s))
            if s is None:
                continue
            if isinstance(s, NamedSharding) and getattr(s.mesh, "empty", False):  # JAX's check and words
                raise FtransValueError(f"One of {what} leaf specifications got an empty NamedSharding: {s} which "
                                       "is not allowed.")
            spec = s if isinstance(s, PartitionSpec) else getattr(s, "spec", None)
            if isinstance(spec, PartitionSpec) and PartitionSpec.UNCONSTRAINED in tuple(spec):
                raise FtransValueError(f"jit: Unconstrained dims are not allowed when passed to {what} (only "
                                       f"with_sharding_constraint may leave a dimension UNCONSTRAINED); got {s!r}")
            if isinstance(s, SingleDeviceSharding):
                devices.add(next(iter(s.device_set)))
            else:
                partitioned = True
    if partitioned:
        return True, None
    if len(devices) > 1:
        return True, None  # the partitioner reports the clash
    return False, (devices.pop() if devices else None)


def _strip(x: Any) -> Any:
    """A jit ``in_shardings``/``out_shardings`` entry's sharding: a ``Format`` (ftrans's or JAX's) stands for its
    sharding here; its layout is read by ``requested_layouts``."""
    if type(x).__name__ == "Format" and hasattr(x, "layout") and hasattr(x, "sharding"):
        return x.sharding
    return x


def _is_sharding_leaf(x: Any) -> bool:
    return x is None or type(x).__name__ == "Format" or isinstance(as_sharding(x), Sharding)


def _check_sharding(x: Any, what: str, fname: str) -> Any:
    if type(x).__name__ in ("Layout", "_AutoLayout", "AutoLayoutSingleton") and hasattr(x, "__repr__"):
        raise FtransValueError(
            "`jax.jit` does not accept device-local layouts directly. Create a `Format` instance wrapping this "
            f"device-local layout and pass that to `jit` instead. Got {x}")
    x = as_sharding(x)  # a runtime (jax) sharding: as ftrans's
    if x is None or isinstance(x, NamedSharding):
        return x
    if isinstance(x, SingleDeviceSharding):
        return None
    if isinstance(x, Sharding):
        return x
    if isinstance(x, tuple) and type(x).__name__ == "PartitionSpec":
        from ftrans.errors import NoMeshError

        raise NoMeshError(
            f"{_api.name} requires a non-empty mesh in context if you are passing `PartitionSpec`s to {what}. You "
            "can define a context mesh via `ftrans.set_mesh(mesh)`. Alternatively, provide `Sharding`s to "
            f"{what} and then the mesh context manager is not required. (jit({fname}) got {x!r})")
    raise FtransTypeError(f"jit({fname}): {what} entries must be Shardings (NamedSharding, ...) or None, "
                          f"got {type(x).__name__}: {x!r}")


class _Api(threading.local):
    name = "jit"  # "pjit" while a jax.experimental.pjit function's shardings are read (its errors' name)


_api = _Api()


def _bare_spec(x: Any) -> Any:
    from ftrans.core.sharding import PartitionSpec, get_mesh

    x = as_sharding(_strip(x))  # JAX's spec or sharding: as ftrans's
    if isinstance(x, PartitionSpec):
        mesh = get_mesh()
        if mesh is not None:
            return NamedSharding(mesh, x)
    return x


def _flatten_prefix(spec: Any, tree: Any, n: int, what: str, fname: str, as_given: bool = False,
                    layouts: bool = False) -> list:
    """Broadcast a sharding tree prefix to ``tree``'s ``n`` leaves (``as_given``: each entry as the user
    gave it, for ``eval_shape``; else normalised for partitioning: a single-device sharding is None)."""
    from ftrans.core.sharding import PartitionSpec

    def norm(s: Any) -> Any:
        if layouts:  # the layout each leaf asks for (see requested_layouts)
            return requested_layout(s)
        checked = _check_sharding(_bare_spec(s), what, fname)
        if as_given:
            s = as_format(s)
        if as_given and isinstance(s, Format) and isinstance(s.layout, Layout):  # the layout asked for, too
            return Format(s.layout, as_sharding(_bare_spec(s.sharding)))
        return as_sharding(_bare_spec(s)) if as_given else checked

    if spec is None or type(spec).__name__ == "Format" or isinstance(as_sharding(spec), (Sharding, PartitionSpec)):
        return [norm(spec)] * n
    try:
        nested = tree_util.tree_map(
            lambda s, sub: _Group([s] * len(tree_util.tree_leaves(sub))), spec, tree,
            is_leaf=lambda x: _is_sharding_leaf(x) or type(x).__name__ == "PartitionSpec")
    except (ValueError, TypeError) as e:
        from ftrans.tree_util import _mismatch_details

        whose = "arguments" if what.startswith("in") else "outputs"
        details = _mismatch_details(spec, tree, f"{_api.name} {what}",
                                    lambda x: _is_sharding_leaf(x) or type(x).__name__ == "PartitionSpec")
        head = ""
        if type(spec) is type(tree) and isinstance(spec, (list, tuple)) and len(spec) != len(tree):
            # (JAX's first line for a top-level length mismatch)
            head = (f"pytree structure error: different lengths of {type(spec).__name__} at key path\n"
                    f"    {_api.name} {what}\n")
        raise FtransValueError(
            f"{head}jit({fname}): {what} must be a sharding, or a tree prefix of the {whose} with a sharding (or "
            f"None) at each leaf; got {what}={spec!r} for a value of structure {tree_util.tree_structure(tree)} "
            f"({e}). Match {what} to the structure of the {whose}, or give one sharding for all of them{details}"
        ) from None
    out: list = []
    for group in tree_util.tree_leaves(nested, is_leaf=lambda x: type(x) is _Group):
        out.extend(norm(s) for s in group)
    return out


def _has_format(spec: Any) -> bool:
    return spec is not None and any(type(s).__name__ == "Format" for s in tree_util.tree_leaves(
        spec, is_leaf=lambda x: type(x).__name__ in ("Format", "PartitionSpec") or _is_sharding_leaf(x)))


def requested_layouts(owner: Any, args: tuple, leaves: list, out_tree: Any) -> tuple:
    """The layouts a sharded call asks XLA for: per argument leaf and per result, ``Layout.AUTO``, a ``Layout``
    other than the default, or None (JAX's ``in_shardings``/``out_shardings`` Formats; a ShapeDtypeStruct
    argument's own layout); ``((), ())`` when none is asked for."""
    fname = owner.__name__
    ins: list = [None] * len(leaves)
    spec = owner._in_shardings
    if _has_format(spec):
        if isinstance(spec, list):
            spec = tuple(spec)
        flat: list = []
        if isinstance(spec, tuple) and type(spec).__name__ != "PartitionSpec" and len(spec) == len(args):
            for s, a in zip(spec, args):
                flat += _flatten_prefix(s, a, len(tree_util.tree_leaves(a)), "in_shardings", fname, layouts=True)
        else:
            flat = _flatten_prefix(spec, args, len(tree_util.tree_leaves(args)), "in_shardings", fname,
                                   layouts=True)
        ins[:len(flat)] = flat[:len(ins)]
    for k, x in enumerate(leaves):
        if ins[k] is None and type(x) is ShapeDtypeStruct and x._layout is not None and not x._layout.is_default:
            ins[k] = x._layout
    outs: list = [None] * out_tree.num_leaves
    if _has_format(owner._out_shardings):
        dummy = tree_util.tree_unflatten(out_tree, [0] * out_tree.num_leaves)
        outs = _flatten_prefix(owner._out_shardings, dummy, out_tree.num_leaves, "out_shardings", fname,
                               layouts=True)
    if all(lay is None for lay in (*ins, *outs)):
        return (), ()
    return ins, outs


def check_layout_donation(in_avals: list, out_avals: list, donate: tuple, ins: tuple, outs: tuple,
                          in_sh: list) -> None:
    """JAX's errors for a donated argument whose layout is AUTO and the result it would be given to not, or
    the reverse (pairing each donated argument with the first result of its type, as JAX does; an argument
    laid out over a mesh is aliased by its sharding before, as in JAX, so never reaches the check)."""
    if not (ins and outs and any(donate)):
        return
    from ftrans.core.layout import _AutoLayout

    free = list(range(len(out_avals)))
    for i, (a, d) in enumerate(zip(in_avals, donate)):
        if not d or isinstance(in_sh[i], NamedSharding):
            continue
        k = next((k for k in free if out_avals[k].shape == a.shape and out_avals[k].dtype == a.dtype), None)
        if k is None:
            continue
        free.remove(k)
        auto_in, auto_out = isinstance(ins[i], _AutoLayout), isinstance(outs[k], _AutoLayout)
        if auto_in != auto_out:
            which = "output" if auto_in else "input"
            raise FtransValueError(
                f"Input layout being donated was {ins[i]} while output layout was {outs[k]}. Did you mean to set "
                f"the **{which} layout** to **Layout.AUTO**?\nThis will allow for the input and output layout to "
                "be chosen by XLA and not the layout of the " + ("output" if auto_in else "input") +
                " which might not be optimal.")


def check_arg_layouts(fname: str, leaves: list, avals: list, ins: tuple) -> None:
    """A committed array argument laid out otherwise than the concrete layout jit's ``in_shardings`` gives for
    it: JAX's ValueError (jit does not lay a committed argument out anew)."""
    for x, lay, a in zip(leaves, ins, avals):
        if not isinstance(lay, Layout) or not isinstance(x, (ShardedArray, DeviceArray)) or not x._committed:
            continue
        own = x.format.layout
        if own != lay:
            raise FtransValueError(
                f"Layout passed to jit does not match the layout on the respective arg. Got jit layout: {lay},\n"
                f"arg layout: {own} for arg type: {a.str_short() if hasattr(a, 'str_short') else a}. "
                f"(jit({fname}); device_put the argument with that Format first)")


class _Group(list):
    """The shardings of one prefix leaf's values (not a pytree node: a list in the spec itself is one)."""


def check_out_shardings(owner: Any, out_tree: Any) -> None:
    """Raise, as for a partitioned program, when ``out_shardings`` is no tree prefix of the outputs."""
    dummy = tree_util.tree_unflatten(out_tree, [0] * out_tree.num_leaves)
    _flatten_prefix(owner._out_shardings, dummy, out_tree.num_leaves, "out_shardings", owner.__name__)


def _in_shardings(owner: Any, args: tuple, kwargs: dict, leaves: list, from_args: list | None = None) -> list:
    """Each argument leaf's layout: its ``in_shardings`` entry, else its own (an Array laid out over a mesh, a
    ShapeDtypeStruct's sharding), else None; ``from_args`` (given) gets, per leaf, whether it is its own."""
    if getattr(owner, "_api_name", None) == "pjit":
        _api.name = "pjit"
        try:
            return _in_shardings_of(owner, args, kwargs, leaves, from_args)
        finally:
            _api.name = "jit"
    return _in_shardings_of(owner, args, kwargs, leaves, from_args)


def _in_shardings_of(owner: Any, args: tuple, kwargs: dict, leaves: list, from_args: list | None) -> list:
    fname = owner.__name__
    n_pos = len(tree_util.tree_leaves(args))
    spec = owner._in_shardings
    if spec is None:
        flat = [None] * len(leaves)
    else:
        if isinstance(spec, list):
            spec = tuple(spec)
        if isinstance(spec, tuple) and hasattr(spec, "_fields") and type(spec).__name__ != "PartitionSpec":
            # a namedtuple is a pytree node, not the tuple of the arguments: a prefix of that tuple, as JAX's
            try:
                _flatten_prefix(spec, args, n_pos, "in_shardings", fname)
            except (FtransValueError, FtransTypeError):
                api = _api.name
                raise FtransValueError(
                    f"{api} in_shardings specification must be a tree prefix of the positional arguments tuple. In "
                    f"particular, {api} in_shardings must either be a Sharding, a PartitionSpec, or a tuple of "
                    f"length equal to the number of positional arguments. But {api} in_shardings is not a tuple: "
                    f"got {type(spec)} instead."
                    + (f" Given the corresponding argument being passed, it looks like {api} in_shardings might "
                       "need to be wrapped in a singleton tuple." if len(args) == 1 else "")
                    + f" (jit({fname}))") from None
        if isinstance(spec, tuple) and type(spec).__name__ != "PartitionSpec" and len(spec) != len(args):
            api = _api.name
            raise FtransValueError(  # (JAX's words)
                f"{api} in_shardings specification must be a tree prefix of the positional arguments tuple. In "
                f"particular, {api} in_shardings must either be a Sharding, a PartitionSpec, or a tuple of length "
                f"equal to the number of positional arguments. But {api} in_shardings is the wrong length: got a "
                f"tuple or list of length {len(spec)} for an args tuple of length {len(args)}. (jit({fname}): give "
                "one sharding (or None) per positional argument, or a single sharding for all of them)")
        if isinstance(spec, tuple) and type(spec).__name__ != "PartitionSpec":
            flat = []
            for s, a in zip(spec, args):
                flat += _flatten_prefix(s, a, len(tree_util.tree_leaves(a)), "in_shardings", fname)
        else:
            flat = _flatten_prefix(spec, args, n_pos, "in_shardings", fname)
        flat += [None] * (len(leaves) - n_pos)
    out = []
    for s, x in zip(flat, leaves):
        if isinstance(s, NamedSharding) and type(x) is ShardedArray:
            _check_committed_arg(fname, s, x)
        given = s is not None
        if s is None and type(x) is ShardedArray:
            own = x.sharding
            s = own if isinstance(own, NamedSharding) else None
        elif s is None and type(x) is ShapeDtypeStruct:
            own = as_sharding(x.sharding)
            s = own if isinstance(own, NamedSharding) else None
        if from_args is not None:
            from_args.append(not given)
        out.append(s)
    return out


def _check_committed_arg(fname: str, s: NamedSharding, x: Any) -> None:
    """An argument laid out over a mesh (committed) that ``in_shardings`` lays out otherwise over the same
    devices: JAX's ValueError (jit moves no committed argument; ``device_put`` it first)."""
    own = x.sharding
    if not isinstance(own, NamedSharding) or own.device_set != s.device_set or own is s:
        return  # other devices: the device assignment check reports it (``_check_devices``)
    if not own.is_equivalent_to(s, len(x.shape)):
        raise FtransValueError(
            "Sharding passed to jit does not match the sharding on the respective arg. "
            f"Got jit sharding: {s},\narg sharding: {own} for arg type: {_long_type(x.aval)} "
            f"(jit({fname}); reshard the argument with device_put first)")


def _ids_str(ids: Any, platform: str) -> str:
    return f"with device ids {list(ids)} on platform {platform}"


def _device_mismatch(fname: str, first: tuple, second: tuple) -> FtransValueError:
    """JAX's device-assignment error: two layouts of one program on different devices.  Each layout is
    ``(kind, device ids, platform, argument name (or a function giving it) or None, aval or None)``, ``kind``
    as JAX names it ("argument", "explicit input sharding", "explicit output sharding", "sharding_constraint inside jit",
    "jit's context mesh", "closed over constant sharding")."""
    def one(t: tuple) -> str:
        kind, ids, plat, name, aval = t
        if kind == "argument":
            name = name() if callable(name) else name
            return f"argument {name} of {fname} with shape {_long_type(aval)} and {_ids_str(ids, plat)}"
        return f"{kind} {_ids_str(ids, plat)}"

    a, b = (second, first) if second[0] == "argument" and first[0] != "argument" else (first, second)
    return FtransValueError(f"Received incompatible devices for jitted computation. Got {one(a)} and {one(b)}")


def _layout_info(kind: str, sharding: Any, name: Any = None, aval: Any = None) -> tuple:
    devs = list(sharding.mesh.devices.flat) if isinstance(sharding, NamedSharding) else list(sharding.device_set)
    return (kind, [d.id for d in devs], devs[0].platform.upper(), name, aval)


def _layouts(owner: Any, full_args: tuple, full_kwargs: dict, leaves: list, avals: list, in_sh: list,
             from_args: list, out_sh: list, const_sh: list, closed: Any) -> list:
    """The layouts a sharded program's devices come from, in JAX's order and with JAX's names for them:
    the arguments' (explicit ``in_shardings``, else an argument's own layout, or the device a committed
    argument is on), the constants', ``out_shardings``, and the sharding constraints inside."""
    names: list = []

    def name(k: int) -> str:
        if not names:
            from ftrans.transforms.jit import _leaf_names

            try:
                names.extend(_leaf_names(owner, full_args, full_kwargs))
            except Exception:  # (a wrapper without jit's signature: positions)
                names.extend(f"args[{i}]" for i in range(len(leaves)))
        return names[k] if k < len(names) else f"args[{k}]"

    out: list = []
    for k, (s, x, own) in enumerate(zip(in_sh, leaves, from_args)):
        if isinstance(s, NamedSharding):
            kind = "argument" if own else "explicit input sharding"  # (an Array's or a ShapeDtypeStruct's)
            out.append(_layout_info(kind, s, lambda k=k: name(k), avals[k]))
        elif type(x) is DeviceArray and x._committed and s is None:
            dev = x.device
            out.append(("argument", [dev.id], dev.platform.upper(), lambda k=k: name(k), avals[k]))
    out += [_layout_info("closed over constant sharding", s) for s in const_sh]
    out += [_layout_info("explicit output sharding", s) for s in out_sh if isinstance(s, NamedSharding)]
    out += [_layout_info(kind, NamedSharding(m, PartitionSpec())) for kind, m in _inner_layouts(closed.jaxpr)]
    return out


def _inner_layouts(jaxpr: Any) -> list:
    """``constraint_meshes`` with what names each mesh, as JAX's device-assignment errors say it: a sharding
    constraint, a ``device_put`` or a ``shard_map`` inside jit, or a jit inside jit (its shardings)."""
    from ftrans.core.ir import ClosedJaxpr, subjaxprs
    from ftrans.core.prims.calls import jit_call_p
    from ftrans.core.prims.shard_map import shard_map_p
    from ftrans.core.prims.sharding import device_put_p

    out: list = []
    for eqn in jaxpr.eqns:
        p = eqn.primitive
        if p is jit_call_p:
            body = eqn.params["jaxpr"]
            found = [("jit inside jit", m)
                     for m in constraint_meshes(body.jaxpr if isinstance(body, ClosedJaxpr) else body)]
        elif p is device_put_p or p is shard_map_p or p.name == "sharding_constraint":
            kind = "jit" if getattr(eqn.params.get("sharding"), "_nested_jit", False) else p.name
            found = [(f"{kind} inside jit", m) for m in constraint_meshes(_one_eqn(jaxpr, eqn))]
        else:
            found = [t for sub in subjaxprs(eqn)
                     for t in _inner_layouts(sub.jaxpr if isinstance(sub, ClosedJaxpr) else sub)]
        out += [t for t in found if all(t[1] is not m for _, m in out)]
    return out


def _one_eqn(jaxpr: Any, eqn: Any) -> Any:
    """A stand-in holding only ``eqn`` (what ``constraint_meshes`` reads of a jaxpr: its equations)."""
    from types import SimpleNamespace

    return SimpleNamespace(eqns=[eqn])


def _check_devices(fname: str, layouts: list) -> None:
    """Every layout of one program must be over the same devices (in the same order), and over the devices of
    the mesh in context when one is set: else JAX's "Received incompatible devices" error."""
    ctx = get_mesh()
    if ctx is not None and getattr(ctx, "devices", None) is not None and ctx.devices.size:
        devs = list(ctx.devices.flat)
        first = ("jit's context mesh", [d.id for d in devs], devs[0].platform.upper(), None, None)
    elif layouts:
        first = layouts[0]
    else:
        return
    for t in layouts:
        if t[1] != first[1]:
            raise _device_mismatch(fname, first, t)


def _mesh_of(fname: str, shardings: list, jaxpr: Any = None) -> Any:
    from ftrans.core.sharding import get_mesh

    mesh = None
    if jaxpr is not None:
        shardings = shardings + [NamedSharding(m, PartitionSpec()) for m in constraint_meshes(jaxpr)]
    for s in shardings:
        if isinstance(s, NamedSharding):
            if mesh is None:
                mesh = s.mesh
            elif [d.id for d in s.mesh.devices.flat] != [d.id for d in mesh.devices.flat]:
                raise FtransValueError(
                    f"jit({fname}): the shardings use different device meshes ({mesh!r} and {s.mesh!r}); every "
                    "argument and result of one program must be laid out over the same devices (move arguments "
                    "with ftrans.device_put first)")
    if mesh is None:
        mesh = get_mesh()
        if mesh is not None:
            mesh = _renamed_by_abstract(mesh)
    if mesh is None:
        raise FtransValueError(f"jit({fname}): no mesh to partition over: give NamedShardings or set a mesh")
    return mesh


def _abstract_top() -> Any:
    """The ``use_abstract_mesh`` mesh entered outside any ``shard_map`` body, innermost, or None."""
    from ftrans.core.sharding import abstract_stack

    stack = abstract_stack()
    return stack[-1][0] if stack and stack[-1][1] == 0 and not stack[-1][0].empty else None


def _renamed_by_abstract(mesh: Any) -> Any:
    """The context ``mesh`` a program that names no layout is partitioned over: inside ``use_abstract_mesh`` of
    as many devices, its devices with the abstract mesh's axes (JAX lays such results out over
    ``mesh.update(axis_names=..., axis_types=...)``)."""
    am = _abstract_top()
    if am is None or am.size != mesh.size or (tuple(am.axis_names), tuple(am.axis_sizes), tuple(am.axis_types)) \
            == (tuple(mesh.axis_names), tuple(mesh.devices.shape), tuple(mesh.axis_types)):
        return mesh
    return mesh_over(am, tuple(mesh.devices.flat))


def _single_mesh(owner: Any, leaves: list) -> Any:
    """A mesh of the one device a program with layouts but no mesh runs on: the device its shardings name, else
    a committed argument's, else the default one."""
    import numpy as np

    from ftrans.core.sharding import Mesh

    dev = getattr(owner, "_sharding_device", None)
    if dev is None:
        dev = next((x.device for x in leaves if type(x) is DeviceArray and x._committed), None)
    if dev is None:
        from ftrans.devices import default_device

        dev = default_device()
    devs = np.empty(1, dtype=object)
    devs[0] = dev
    return Mesh(devs, ("_device",))


def _prepare(owner: Any, args: tuple, kwargs: dict, full_args: tuple, full_kwargs: dict, leaves: list,
             avals: list, in_tree: Any, statics: tuple | None = None) -> tuple:
    fname = owner.__name__
    from_args: list = []
    in_sh = _concrete_shardings(fname, _in_shardings(owner, args, kwargs, leaves, from_args))
    ctx = context_of(owner)  # the mesh in context results are placed on (None: none is)
    for k, (s, a) in enumerate(zip(in_sh, avals)):
        if isinstance(s, NamedSharding):
            check_divisible(s, a.shape, f"jit({fname}): argument {k} (in_shardings; One of pjit arguments)")
    # Arguments laid out over Explicit mesh axes are traced with their sharding types
    avals = [typed_aval(a, s) for a, s in zip(avals, in_sh)]
    from ftrans.core.sharding import args_meshes
    from ftrans.transforms.passes import partitioned

    stack = args_meshes()  # the arguments' mesh stands for an abstract mesh of its axes inside (as JAX's)
    stack.append(next((s.mesh for s in in_sh if isinstance(s, NamedSharding)), None))
    try:
        with partitioned():  # the passes that would add reshards (merge_dots) stay off
            # (given the call's statics, a program already staged for the ordinary path is reused: jit._trace)
            closed, out_tree = owner._trace(full_args, full_kwargs, avals, in_tree, statics)
    finally:
        stack.pop()
    out_sh: list = [None] * len(closed.out_avals)
    if owner._out_shardings is not None:
        spec = owner._out_shardings
        dummy = tree_util.tree_unflatten(out_tree, [0] * out_tree.num_leaves)
        prev, _api.name = _api.name, "pjit" if getattr(owner, "_api_name", None) == "pjit" else _api.name
        try:
            out_sh = _flatten_prefix(spec, dummy, out_tree.num_leaves, "out_shardings", fname)
        finally:
            _api.name = prev
        for k, (s, a) in enumerate(zip(out_sh, closed.out_avals)):
            if isinstance(s, NamedSharding):
                check_divisible(s, a.shape, f"jit({fname}): output {k} (out_shardings; One of pjit outputs)")
    # A result with a sharding type and no out_shardings entry is laid out as its type says (over a mesh with Auto
    # axes too, its type says only the Explicit ones: the partitioner lays the rest out, as JAX's leaves them open)
    out_sh = [s if s is not None or a.typed_sharding is None or _mixed(a.typed_sharding) else a.typed_sharding
              for s, a in zip(out_sh, closed.out_avals)]
    if ctx is not None and len(closed.jaxpr.invars) == len(in_sh):
        # an argument returned as it is keeps its layout (its mesh's axis types too), as JAX's
        pos = {id(v): k for k, v in enumerate(closed.jaxpr.invars)}
        out_sh = [in_sh[pos[id(v)]] if s is None and id(v) in pos and isinstance(in_sh[pos[id(v)]], NamedSharding)
                  else s for s, v in zip(out_sh, closed.jaxpr.outvars)]
    if any(_is_abstract(s) for s in out_sh):
        out_sh = _concrete_shardings(fname, in_sh + out_sh)[len(in_sh):]
    # A captured array laid out over a mesh (a pmap result, a device_put with a NamedSharding) names it too
    const_sh = [c.sharding for c in closed.consts if type(c) is ShardedArray and isinstance(c.sharding, NamedSharding)]
    _check_devices(fname, _layouts(owner, full_args, full_kwargs, leaves, avals, in_sh, from_args, out_sh,
                                   const_sh, closed))
    try:
        mesh = _mesh_of(fname, in_sh + out_sh + const_sh, closed.jaxpr)
    except FtransValueError:
        if not (_has_format(owner._in_shardings) or _has_format(owner._out_shardings)):
            raise
        mesh = _single_mesh(owner, leaves)  # layouts asked for on one device: a one-device program
    dev = getattr(owner, "_device", None)
    if dev is not None and [d.id for d in mesh.devices.flat] != [dev.id]:  # jit(device=...): one device only
        raise FtransValueError(
            f"Received incompatible devices for jitted computation. Got explicit output sharding with device ids "
            f"[{dev.id}] on platform {dev.platform.upper()} (jit({fname}, device=...)) and sharding_constraint inside "
            f"jit with device ids {sorted(d.id for d in mesh.devices.flat)}; drop device= or "
            "lay the values out on that device")
    donate = owner._donate_mask(full_args, full_kwargs, len(avals))
    return closed, out_tree, mesh, in_sh, out_sh, donate


def key_outputs(out_tree: Any) -> tuple[tuple[int, int], ...]:
    """(result index, trailing key axes) of each result that is a key array's data."""
    if not tree_util.has_key_nodes(out_tree):
        return ()
    from ftrans.core.keys import PRNGKeyArray

    marked = tree_util.user_leaves(out_tree, list(range(out_tree.num_leaves)))
    return tuple((k._base_array, len(k._impl.key_shape)) for k in marked if type(k) is PRNGKeyArray)


def _mixed(sharding: Any) -> bool:
    """Whether a type's mesh has Explicit and Auto axes both (and the type names no Explicit axis of size 1,
    which the partitioner's layout, read back, could not state)."""
    mesh = sharding.mesh
    names = {t.name for t in getattr(mesh, "axis_types", ())}
    return "Explicit" in names and "Auto" in names and all(mesh.shape[a] > 1 for a in sharding.spec.axes())


def _is_abstract(s: Any) -> bool:
    return isinstance(s, NamedSharding) and isinstance(s.mesh, AbstractMesh)


def _concrete_shardings(fname: str, in_sh: list) -> list:
    """Shardings over an ``AbstractMesh`` (a ShapeDtypeStruct's) laid over the devices the other arguments (or
    the mesh in context) give, as JAX takes a program's devices from them; with none, JAX's error asking for
    ``lowering_platforms``."""
    if not any(_is_abstract(s) for s in in_sh):
        return in_sh
    concrete = next((s.mesh for s in in_sh if isinstance(s, NamedSharding) and not _is_abstract(s)), None)
    if concrete is None:
        ctx = get_mesh()
        concrete = ctx if ctx is not None and getattr(ctx, "devices", None) is not None and ctx.devices.size \
            else None
    if concrete is None:
        am = next(s.mesh for s in in_sh if _is_abstract(s))
        raise FtransValueError(
            "Passing lowering_platforms via jax.export or jit(f).trace(*args).lower(lowering_platforms=...) is "
            f"required when only AbstractMesh exists in a jitted computation. Got context mesh: {am} "
            f"(jit({fname}): the arguments name no devices)")
    out = []
    for s in in_sh:
        if _is_abstract(s):
            if s.mesh.size != concrete.size:
                raise FtransValueError(
                    f"AbstractMesh size: {s.mesh.size} does not match the device assignment size: {concrete.size} "
                    f"(jit({fname}): {s.mesh} against the devices of {concrete})")
            s = NamedSharding(mesh_over(s.mesh, tuple(concrete.devices.flat)), s.spec, memory_kind=s.memory_kind)
        out.append(s)
    return out


def mesh_over(am: Any, devices: tuple) -> Any:
    """The Mesh with ``am``'s axes (names, sizes, types) over ``devices`` (in order)."""
    import numpy as np

    from ftrans.core.sharding import Mesh

    arr = np.empty(len(devices), dtype=object)
    arr[:] = devices
    return Mesh(arr.reshape(am.axis_sizes), am.axis_names, am.axis_types)


def abstract_lowering_mesh(traced: Any) -> Any:
    """The ``AbstractMesh`` a traced program is partitioned over when nothing names devices (JAX lowers it for
    that many partitions): the abstract meshes its arguments' shardings, ``in_shardings``/``out_shardings`` or
    constraints name, else the one of ``use_abstract_mesh`` in context; None when a concrete mesh is named."""
    from ftrans.core.sharding import abstract_stack

    owner, call = traced._owner, traced._call
    shardings: list = []
    if call is not None:
        dargs, dkw, _ = owner._split(call[0], call[1])
        try:
            shardings = _in_shardings(owner, dargs, dkw, call[2])
        except (FtransValueError, FtransTypeError):
            shardings = []
    if owner._out_shardings is not None:
        try:
            dummy = tree_util.tree_unflatten(traced.out_tree, [0] * traced.out_tree.num_leaves)
            shardings += _flatten_prefix(owner._out_shardings, dummy, traced.out_tree.num_leaves, "out_shardings",
                                         owner.__name__)
        except (FtransValueError, FtransTypeError):
            pass
    shardings += [NamedSharding(m, PartitionSpec()) for m in constraint_meshes(traced.jaxpr.jaxpr)]
    meshes = [s.mesh for s in shardings if isinstance(s, NamedSharding)]
    stack = abstract_stack()
    ctx = stack[-1][0] if stack and not stack[-1][0].empty else None
    if any(not isinstance(m, AbstractMesh) for m in meshes):
        concrete = next(m for m in meshes if not isinstance(m, AbstractMesh))
        if ctx is not None and ctx.size != concrete.size:
            raise FtransValueError(
                f"Context mesh {ctx} should match the mesh of sharding {concrete} in its size "
                f"(jit({owner.__name__}).trace(...).lower: the arguments are laid out over {concrete.size} devices)")
        return None
    abstract = [m for m in meshes if isinstance(m, AbstractMesh)]
    if ctx is not None:
        abstract.insert(0, ctx)
    if not abstract:
        return None
    first = abstract[0]
    for m in abstract[1:]:
        if m.size != first.size:
            raise FtransValueError(
                f"Context mesh {first} should match the mesh of sharding {m} in its size "
                f"(jit({owner.__name__}).trace(...).lower: every abstract mesh of one program must have as many "
                "devices)")
    return first if first.size > 1 or ctx is not None else None


def lower_abstract(traced: Any, mesh: Any, platform: str) -> ShardedLowered:
    """``jit(f).trace(...).lower(lowering_platforms=...)`` over an ``AbstractMesh``: the module for
    ``mesh.size`` partitions; ``compile(device_assignment=...)`` gives it devices."""
    owner, call = traced._owner, traced._call
    closed = traced.jaxpr
    leaves = call[2] if call is not None else []
    in_sh: list = [None] * len(closed.in_avals)
    if call is not None:
        dargs, dkw, _ = owner._split(call[0], call[1])
        in_sh = _in_shardings(owner, dargs, dkw, leaves)
    out_sh: list = [None] * len(closed.out_avals)
    if owner._out_shardings is not None:
        dummy = tree_util.tree_unflatten(traced.out_tree, [0] * traced.out_tree.num_leaves)
        out_sh = _flatten_prefix(owner._out_shardings, dummy, traced.out_tree.num_leaves, "out_shardings",
                                 owner.__name__)
    out_sh = [s if s is not None or a.typed_sharding is None else a.typed_sharding for s, a in zip(out_sh, closed.out_avals)]
    donate = traced._donate or (False,) * len(in_sh)
    out = ShardedLowered(owner, closed, traced.out_tree, mesh, in_sh, out_sh, tuple(donate), traced._in_tree,
                         platform=platform)
    out._names = traced._names
    return out


def call_sharded(owner: Any, args: tuple, kwargs: dict, full_args: tuple, full_kwargs: dict, statics: tuple,
                 leaves: list, avals: list, in_tree: Any) -> Any:
    own = tuple(x._sharded.sharding if type(x) is ShardedArray else None for x in leaves)  # runtime objects
    key = (in_tree, tuple((a.shape, a.dtype, a.weak_type) for a in avals), statics, own,
           _config_mod.config.enable_x64, _config_mod.config.scoped_here(), get_mesh(), context_of(owner),
           _abstract_top())
    entry = owner._spmd_cache.get(key)
    if entry is None:
        if _config_mod.config.explain_cache_misses:
            _explain_miss(owner, key, full_args, full_kwargs, leaves)
        closed, out_tree, mesh, in_sh, out_sh, donate = _prepare(owner, args, kwargs, full_args, full_kwargs,
                                                                  leaves, avals, in_tree, statics)
        if pmap_in_program(closed):  # not one partitioned program: each pmap runs as its own (transforms/jit.py)
            from ftrans.transforms.jit import Interpreted

            exe, donate = Interpreted(closed), ()
        else:
            lay_in, lay_out = requested_layouts(owner, args, leaves, out_tree)
            check_layout_donation(avals, closed.out_avals, donate, lay_in, lay_out, in_sh)
            ctx = context_of(owner)  # over a context mesh of Explicit axes every result has a type of its rank
            exe = SpmdExecutable(closed, owner.__name__, mesh, in_sh, out_sh, donate, owner._compiler_options,
                                 lay_in, lay_out, typed_ranks=ctx is not None and ctx == mesh and all(
                                     t.name == "Explicit" for t in ctx.axis_types), key_outputs=key_outputs(out_tree))
            exe.requested_in = lay_in
        entry = owner._spmd_cache[key] = (exe, out_tree, donate, tuple(device_key(d) for d in mesh.devices.flat))
        owner.misses += 1
    else:
        owner.hits += 1
    exe, out_tree, donate, mesh_ids = entry
    for k, x in enumerate(leaves):
        if type(x) is DeviceArray and x._committed and (len(mesh_ids) != 1 or x._sig[3] != mesh_ids[0]):
            _committed_elsewhere(owner, full_args, full_kwargs, k, x, avals[k], mesh_ids)
    if getattr(exe, "requested_in", None):
        check_arg_layouts(owner.__name__, leaves, avals, exe.requested_in)
    outs = exe.run(leaves)
    if any(donate):
        for x, d in zip(leaves, getattr(exe, "donated_used", donate)):
            if d and hasattr(x, "delete") and type(x) is not type(None):
                try:
                    x.delete()
                except Exception:  # a host value has nothing to delete
                    pass
    if type(exe) is SpmdExecutable and _trace.eager_everywhere and exe.in_layouts is None:
        _remember_fast(owner, in_tree, statics, leaves, exe, out_tree, donate, outs)
    return tree_util.tree_unflatten(out_tree, outs)


def _committed_elsewhere(owner: Any, full_args: tuple, full_kwargs: dict, k: int, x: Any, aval: Any,
                         mesh_ids: tuple) -> None:
    """An argument committed to one device, in a program spread over other devices: JAX's error (moving it
    silently would hide a layout mistake; ``device_put`` it onto the mesh first). ``mesh_ids``: the mesh's
    ``device_key``s."""
    from ftrans.transforms.jit import _leaf_names

    try:
        name = _leaf_names(owner, full_args, full_kwargs)[k]
    except Exception:  # (a wrapper without jit's signature)
        name = f"args[{k}]"
    dev = x.device
    plat = dev.platform.upper()
    raise _device_mismatch(owner.__name__, ("argument", [dev.id], plat, name, aval),
                           ("the program's layout", [i if i >= 0 else -1 - i for i in mesh_ids], plat, None, None))


def _remember_fast(owner: Any, in_tree: Any, statics: tuple, leaves: list, exe: Any, out_tree: Any,
                   donate: tuple, outs: list) -> None:
    """Register a runner for the next call with the same tree, signatures and argument layouts.

    Only a call whose every leaf is a ShardedArray laid out on the very runtime sharding object the program
    takes (``device_put`` and sharded results use one object per mesh and spec) is registered, under the
    key ``_call_plain`` builds: the tree, each leaf's ``_sig`` (shape, dtype, weak type, identity of its
    runtime sharding) and the statics.  Every check the general path
    makes is then settled by the key, except a deleted argument, which the runner hands back to the general
    path (returning ``GENERAL_PATH``) so that it is reported as there.  Not while a transfer guard watches
    calls or a config context is open (the general key holds the thread's context values; the fast key
    does not).
    """
    from ftrans.transforms.jit import _guard_level

    fast = owner._spmd_fast
    if len(fast) >= owner._max or _guard_level() or _config_mod.config.scoped_here() or \
            "enable_x64" in _config_mod._local.values:  # (an x64 context too: the fast key holds no x64 switch)
        return
    k = len(exe.const_bufs)
    if len(leaves) != len(exe._rt_in) - k:
        return
    for x, rt in zip(leaves, exe._rt_in[k:]):
        if type(x) is not ShardedArray:
            return
        if x._sharded.sharding is not rt:
            # Another layout (put() reshards it on every call), or an equal layout object of its own (each pmap
            # result has one): a key per such object would fill the table, so the general path answers.
            return
    key = (in_tree, tuple([x._sig for x in leaves]), statics)
    # The results' signatures, made once: each result buffer carries the sharding object its handler holds
    # (checked on this call's results), which it keeps alive, so the id in the signature stays its own.
    rts = exe.rt_out
    sigs = [sharded_sig(a, rt) if o._sharded.sharding is rt else None
            for a, rt, o in zip(exe.out_avals, rts, outs)]
    # The runner keeps the layout objects whose ids are in its key (and in the results' signatures) alive:
    # while the entry exists no other object can take one of those ids.
    held = (tuple(x._sharded.sharding for x in leaves), tuple(rts))
    fast[key] = _fast_runner(exe, out_tree, donate, sigs, held)


def _layout_text(aval: tuple, sharding: Any) -> str:
    """An argument's type as JAX's cache-miss report shows it: ``f32[8@x]({Auto: ('x',), Explicit: ('y',)})``,
    the mesh's axes by type (``({})``: laid out over no mesh)."""
    from ftrans.core.avals import type_str
    from ftrans.core.sharding import from_runtime

    s = from_runtime(sharding) if sharding is not None else None
    if not isinstance(s, NamedSharding):
        return type_str(aval[0], aval[1]) + "({})"
    mesh = s.mesh
    kinds = {getattr(t, "name", str(t)) for t in mesh.axis_types}
    explicit = {n for n, t in zip(mesh.axis_names, mesh.axis_types) if getattr(t, "name", "") == "Explicit"}
    dims = []
    for k, n in enumerate(aval[0]):
        e = s.spec[k] if k < len(s.spec) else None
        names = [a for a in ((e,) if isinstance(e, str) else (e or ())) if a in explicit]
        dims.append(f"{n}@{names[0]}" if len(names) == 1 else f"{n}@({','.join(names)})" if names else str(n))
    short = type_str((), aval[1])[:-2]
    by_type = ", ".join(f"{kind}: {tuple(n for n, t in zip(mesh.axis_names, mesh.axis_types) if t.name == kind)!r}"
                        for kind in ("Auto", "Explicit", "Manual") if kind in kinds)
    return f"{short}[{','.join(dims)}]({{{by_type}}})"


def _explain_miss(owner: Any, key: tuple, args: tuple, kwargs: dict, leaves: list) -> None:
    """``explain_cache_misses`` for a partitioned call: why ``owner`` is traced and compiled again for ``key``
    (its arguments' layouts, types, statics or the meshes in context), against the closest key it has compiled
    before, as JAX's "TRACING CACHE MISS" report does (JAX's types carry the layouts that ftrans keys here)."""
    from ftrans.lowering import executable as X
    from ftrans.transforms.jit import _call_site, _definition_site, _leaf_names

    head = f"TRACING CACHE MISS at {_call_site(column=True)}:"
    previous = list(owner._spmd_cache.keys())
    if not previous:
        if not owner._cache:  # a function never called before: the ordinary path's report says so
            X.logger.warning("%s\n  never seen function:\n    %s id=%d defined at %s", head, owner.__name__,
                             id(owner._fun), _definition_site(owner._fun))
        return
    try:
        names = _leaf_names(owner, args, kwargs)
    except Exception:  # noqa: BLE001 - naming is best effort
        names = [f"leaf {i}" for i in range(len(key[1]))]
    closest = min(previous, key=lambda old: (old[0] != key[0], sum(a != b for a, b in zip(key[1:], old[1:])),
                                             sum(a != b for a, b in zip(key[3], old[3])) if key[0] == old[0] else 0))
    diffs = []
    if key[0] != closest[0]:
        diffs.append(f"different input pytree:\n  * now {key[0]} and before {closest[0]}")
    elif key[1] != closest[1] or key[3] != closest[3]:
        lines = [f"  * at {n}, now {_layout_text(a, s)} and before {_layout_text(b, t)}"
                 for n, a, b, s, t in zip(names, key[1], closest[1], key[3], closest[3]) if (a, s) != (b, t)]
        diffs.append("different input types:\n" + "\n".join(lines))
    if key[2] != closest[2]:
        diffs.append(f"different static arguments:\n  * now {key[2]} and before {closest[2]}")
    if key[4] != closest[4]:
        diffs.append(f"different enable_x64: now {key[4]} and before {closest[4]}")
    if key[5] != closest[5]:
        diffs.append(f"Tracing context doesn't match, e.g. due to config or context manager: now {key[5]} and "
                     f"before {closest[5]}")
    if key[6:] != closest[6:]:
        diffs.append(f"different mesh in context: now {key[6:]} and before {closest[6:]}")
    X.logger.warning("%s\n  for %s defined at %s\n  all previously seen cache keys differ. For the closest previous "
                     "key:\n  %s", head, owner.__name__, _definition_site(owner._fun), "\n  ".join(diffs))


def _fast_runner(exe: Any, out_tree: Any, donate: tuple, sigs: list, held: tuple) -> Any:
    """``leaves -> result tree`` for one registered sharded signature (see ``_remember_fast``)."""
    run, consts = exe._run, list(exe.const_bufs)
    parts = [(a, a.weak_type, s) for a, s in zip(exe.out_avals, sigs)]
    used = getattr(exe, "donated_used", donate) if any(donate) else ()
    donated = None if not any(used) else [i for i, d in enumerate(used) if d]
    new, unflatten = object.__new__, tree_util.tree_unflatten

    def runner(leaves: list) -> Any:
        bufs = [x._sharded for x in leaves]
        if _array_mod.buffers_deleted:
            for b in bufs:
                if b.is_deleted():
                    return GENERAL_PATH
        outs = run(consts + bufs if consts else bufs)
        res = []
        for b, (a, w, s) in zip(outs, parts):
            o = new(ShardedArray)
            o._sharded = b
            o._aval = a
            o.weak_type = w
            if s is not None:
                o._sig = s
            res.append(o)
        if donated is not None:
            for i in donated:
                leaves[i].delete()
        return unflatten(out_tree, res)

    runner.held = held  # the layout objects named by id in the key and the results' signatures, kept alive
    return runner


class ShardedLowered(LoweredText):
    """``jit(f, in_shardings=...).lower(...)``: the annotated module; ``compile()`` partitions it."""

    _names: Any = None  # the arguments' names as written (for errors)

    def __init__(self, owner: Any, closed: Any, out_tree: Any, mesh: Any, in_sh: list, out_sh: list,
                 donate: tuple, in_tree: Any = None, lay_in: Any = (), lay_out: Any = (),
                 platform: str | None = None):
        from ftrans.lowering.spmd import lower_spmd

        self._owner = owner
        self._in_tree = in_tree  # (dynamic args, kwargs)
        self._closed = closed
        self.out_tree = out_tree
        self._args = (mesh, in_sh, out_sh, donate)
        self._layouts = (lay_in, lay_out)
        n = len(closed.jaxpr.constvars)
        from ftrans.core.sharding import PartitionSpec

        ins = [NamedSharding(mesh, PartitionSpec())] * n + [
            s if isinstance(s, NamedSharding) else NamedSharding(mesh, PartitionSpec()) for s in in_sh]
        self._text = lower_spmd(closed, owner.__name__, mesh, ins, out_sh,
                                (False,) * n + tuple(donate) if any(donate) else (),
                                [None] * n + list(lay_in) if lay_in else (), lay_out, platform,
                                key_outputs=key_outputs(out_tree))

    @property
    def in_tree(self) -> Any:
        """The pytree structure of ``(args, kwargs)`` (static arguments left out), as JAX's."""
        if self._in_tree is None:
            raise AttributeError("in_tree: this lowering was made without its arguments' structure")
        return tree_util.user_treedef(self._in_tree)

    def compile(self, compiler_options: dict | None = None, *, device_assignment: Any = None) -> ShardedCompiled:
        """The executable; ``device_assignment`` (a sequence of devices, partition order) gives a program
        lowered over an ``AbstractMesh`` its devices, as JAX's (it must match a concrete program's own)."""
        from ftrans.lowering.spmd import SpmdExecutable
        from ftrans.transforms.jit import _compiler_options

        mesh, in_sh, out_sh, donate = self._args
        fname = self._owner.__name__
        if isinstance(mesh, AbstractMesh):
            if device_assignment is None:
                raise _FtransRuntimeError(
                    "device_assignment cannot be `None` during compilation. Please pass a tuple of devices to "
                    f"`.compile(device_assignment=)` (jit({fname}) was lowered over {mesh}, which has no devices)")
            devs = tuple(device_assignment)
            if len(devs) != mesh.size:
                # jax 0.11's RuntimeError and jax 0.10's ValueError (both messages): either's handler catches it
                raise _DeviceAssignmentError(
                    f"Length of device_assignment ({len(devs)}) passed to `.compile()` must be equal to the number "
                    f"of devices the jitted function was lowered with ({mesh.size}): jit({fname}) was lowered over "
                    f"{mesh}. The size of abstract mesh {mesh.size} in {mesh} must match the length of device "
                    f"assignment: {len(devs)}")
            over = {mesh: mesh_over(mesh, devs)}  # each abstract mesh over those devices

            def concrete(s: Any) -> Any:
                if not _is_abstract(s):
                    return s
                if s.mesh not in over:
                    over[s.mesh] = mesh_over(s.mesh, devs)
                return NamedSharding(over[s.mesh], s.spec, memory_kind=s.memory_kind)

            mesh = over[mesh]
            in_sh, out_sh = [concrete(s) for s in in_sh], [concrete(s) for s in out_sh]
        elif device_assignment is not None:
            got, want = [d.id for d in device_assignment], [d.id for d in mesh.devices.flat]
            if got != want:
                raise FtransValueError(
                    "device_assignment passed to `.compile` must match the device_assignment calculated from array "
                    f"shardings and out_shardings. Got device ids passed to compile: {got} on platform "
                    f"{device_assignment[0].platform.upper() if got else ''} and device ids calculated from array "
                    f"shardings and out_shardings: {want} (jit({fname}))")
        options = self._owner._compiler_options
        if compiler_options is not None:
            options = tuple(sorted({**dict(options), **dict(_compiler_options(compiler_options))}.items()))
        exe = SpmdExecutable(self._closed, fname, mesh, in_sh, out_sh, donate, options, *self._layouts,
                             key_outputs=key_outputs(self.out_tree))
        unread = set()
        if not self._owner._keep_unused:
            jaxpr = self._closed.jaxpr
            used = {id(v) for e in jaxpr.eqns for v in e.invars} | {id(v) for v in jaxpr.outvars}
            unread = {i for i, v in enumerate(jaxpr.invars) if id(v) not in used}
        out = ShardedCompiled(exe, self.out_tree, self._in_tree, unread)
        out.donate_argnums = self.donate_argnums
        out._names = self._names
        return out

    def cost_analysis(self) -> Any:
        """XLA's estimate of the unoptimised program's cost (flops, bytes accessed), as JAX's
        ``Lowered.cost_analysis``."""
        from ftrans.lowering import compat

        dev = next(iter(self._args[0].devices.flat))
        return compat.hlo_cost_analysis(dev.client, self._text)

    @property
    def donate_argnums(self) -> tuple:
        """The donated positions among the dynamic (non-static) positional arguments, as JAX's."""
        return self._owner._dynamic_donate_argnums()

    @property
    def out_info(self) -> Any:
        """The outputs as ``ShapeDtypeStruct``s (no sharding before compiling but a sharding type's, over its
        mesh), as JAX's."""
        from ftrans.transforms.jit import out_info

        avals = self._closed.out_avals
        return out_info(self.out_tree, avals, [getattr(a, "typed_sharding", None) for a in avals])

    @property
    def in_avals(self) -> Any:
        """``(args, kwargs)`` with each array leaf's abstract value (typed over Explicit axes), as JAX's."""
        avals = self._closed.in_avals
        return avals if self._in_tree is None else tree_util.tree_unflatten(self._in_tree, avals)


class ShardedCompiled(Compiled):
    donate_argnums: tuple = ()  # set by ShardedLowered.compile
    _names: Any = None  # the arguments' names as written (for errors), set by ShardedLowered.compile

    def __init__(self, exe: Any, out_tree: Any, in_tree: Any = None, unread: set | None = None):
        self._exe = exe
        self._out_tree = out_tree
        self._in_tree = in_tree
        self._unread = unread or set()  # the arguments the program never reads (keep_unused=False)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        leaves = self._checked_leaves(args, kwargs, self._exe.in_avals[len(self._exe.const_bufs):])
        self._check_layouts(leaves)
        return tree_util.tree_unflatten(self._out_tree, self._exe.run(leaves))

    def _check_layouts(self, leaves: list) -> None:
        """A committed argument laid out otherwise than the program was compiled for: JAX's ValueError (a
        compiled program moves no committed argument)."""
        errors = []
        rts = self._exe.in_shardings[len(self._exe.const_bufs):]
        for k, (x, rt) in enumerate(zip(leaves, rts)):
            if type(x) is not ShardedArray:
                continue
            own = x._sharded.sharding
            if own is rt or own == rt:
                continue
            want = from_runtime(rt)
            if not x.sharding.is_equivalent_to(want, len(x.shape)):
                name = self._names[k] if self._names is not None and k < len(self._names) else f"args[{k}]"
                errors.append(f"Argument {name} with shape {_long_type(x.aval)}:\n  Passed sharding: {x.sharding}\n"
                              f"  Required sharding: {want}")
        if errors:
            raise argument_mismatch_error("shardings", errors)
        self._check_laid_layouts(leaves)

    def _check_laid_layouts(self, leaves: list) -> None:
        k0 = len(self._exe.const_bufs)
        check_laid_layouts(leaves, self._exe.in_layouts[k0:] if self._exe.in_layouts is not None else None,
                           self._names)

    @property
    def in_tree(self) -> Any:
        """The pytree structure of ``(args, kwargs)`` it takes (static arguments left out), as JAX's."""
        return tree_util.user_treedef(self._in_tree)

    @property
    def in_avals(self) -> Any:
        """``(args, kwargs)`` with each array leaf's abstract value, as JAX's."""
        avals = self._exe.in_avals[len(self._exe.const_bufs):]
        return avals if self._in_tree is None else tree_util.tree_unflatten(self._in_tree, avals)

    def as_text(self) -> str:
        return self._exe.compiled_text()

    @property
    def input_shardings(self) -> Any:
        """``(args, kwargs)`` with each array argument's sharding, as JAX's."""
        k = len(self._exe.const_bufs)
        flat = [from_runtime(s) for s in self._exe.in_shardings[k:]]
        if self._in_tree is None or self._in_tree.num_leaves != len(flat):
            return flat
        return tree_util.tree_unflatten(self._in_tree, flat)

    @property
    def input_formats(self) -> Any:
        """``(args, kwargs)`` with each array argument's ``Format`` (its layout, always XLA's default
        row-major one in ftrans, and its sharding; an argument the program never reads has neither when
        ``keep_unused`` is False), as JAX's."""
        k = len(self._exe.const_bufs)
        avals = self._exe.in_avals[k:]
        lays = self._exe.in_layouts[k:] if self._exe.in_layouts is not None else [None] * len(avals)
        flat = [Format(None, None) if i in self._unread else
                Format(default_layout(len(a.shape)) if lay is None else lay, s)
                for i, (a, s, lay) in enumerate(zip(avals, self._exe.in_shardings[k:], lays))]
        return flat if self._in_tree is None else tree_util.tree_unflatten(self._in_tree, flat)

    @property
    def output_formats(self) -> Any:
        """The outputs' ``Format``s (default layout and compiled sharding) in their pytree, as JAX's."""
        lays = self._exe.out_layouts if self._exe.out_layouts is not None else [None] * len(self._exe.out_avals)
        return tree_util.tree_unflatten(self._out_tree, [
            Format(default_layout(len(a.shape)) if lay is None else lay, from_runtime(s))
            for a, s, lay in zip(self._exe.out_avals, self._exe.out_shardings, lays)])

    @property
    def output_shardings(self) -> Any:
        return tree_util.tree_unflatten(self._out_tree, [from_runtime(s) for s in self._exe.out_shardings])

    @property
    def out_info(self) -> Any:
        """The outputs as ``ShapeDtypeStruct``s with the shardings the partitioner gave them, as JAX's."""
        from ftrans.transforms.jit import out_info

        return out_info(self._out_tree, self._exe.out_avals, [from_runtime(s) for s in self._exe.out_shardings])


def lower_sharded(owner: Any, args: tuple, kwargs: dict, full_args: tuple, full_kwargs: dict, leaves: list,
                  avals: list, in_tree: Any) -> ShardedLowered:
    closed, out_tree, mesh, in_sh, out_sh, donate = _prepare(owner, args, kwargs, full_args, full_kwargs, leaves,
                                                              avals, in_tree)
    lay_in, lay_out = requested_layouts(owner, args, leaves, out_tree)
    check_layout_donation(avals, closed.out_avals, donate, lay_in, lay_out, in_sh)
    out = ShardedLowered(owner, closed, out_tree, mesh, in_sh, out_sh, donate, in_tree, lay_in, lay_out)
    from ftrans.transforms.jit import _leaf_names

    try:
        out._names = _leaf_names(owner, full_args, full_kwargs)
    except (TypeError, ValueError, AttributeError, KeyError):  # names only label error messages
        pass
    return out


def check_in_layouts(owner: Any, args: tuple, avals: list) -> None:
    """A ``Format`` among jit's ``in_shardings`` with a concrete layout must have the rank of its argument
    (JAX's check): each positional argument's leaves against the layout given for them."""
    spec = owner._in_shardings
    if spec is None or not any(type(s).__name__ == "Format" for s in tree_util.tree_leaves(
            spec, is_leaf=lambda x: type(x).__name__ in ("Format", "PartitionSpec") or _is_sharding_leaf(x))):
        return
    specs = tuple(spec) if isinstance(spec, (tuple, list)) and type(spec).__name__ != "PartitionSpec" else None
    if specs is not None and len(specs) != len(args):
        return  # _in_shardings reports the count mismatch
    pairs: list = []
    for s, a in (zip(specs, args) if specs is not None else [(spec, args)]):
        n = len(tree_util.tree_leaves(a))
        if type(s).__name__ == "Format" or s is None or isinstance(as_sharding(s), Sharding):
            pairs += [s] * n
        else:
            nested = tree_util.tree_map(
                lambda e, sub: [e] * len(tree_util.tree_leaves(sub)), s, a,
                is_leaf=lambda x: type(x).__name__ in ("Format", "PartitionSpec") or _is_sharding_leaf(x))
            for group in tree_util.tree_leaves(nested, is_leaf=lambda x: isinstance(x, list)):
                pairs.extend(group)
    for s, aval in zip(pairs, avals):
        lay = getattr(s, "layout", None) if type(s).__name__ == "Format" else None
        if lay is not None and hasattr(lay, "major_to_minor"):
            from ftrans.core.layout import Layout

            Layout(lay.major_to_minor).check_compatible_aval(aval.shape)


def constrain_inputs(owner: Any, args: tuple, kwargs: dict, statics: tuple, leaves: list) -> list:
    """Under an enclosing trace: the arguments constrained to ``in_shardings`` (when they can be matched)."""
    if owner._in_shardings is None or statics:
        return leaves
    from ftrans.core.prims.sharding import sharding_constraint_p

    flat = _in_shardings(owner, args, kwargs, leaves)
    return [sharding_constraint_p.bind(x, sharding=_of_nested_jit(s)) if isinstance(s, NamedSharding) else x
            for x, s in zip(leaves, flat)]


def _of_nested_jit(s: NamedSharding) -> NamedSharding:
    """``s`` marked as a jit's own ``in_shardings``/``out_shardings`` entry (a copy, equal to it), so that a
    device-assignment error names it "jit inside jit", as JAX's."""
    import copy

    out = copy.copy(s)
    out._nested_jit = True
    return out


def constrain_outputs(owner: Any, out_tree: Any, outs: list) -> list:
    """Under an enclosing trace: the results constrained to ``out_shardings``."""
    from ftrans.core.prims.sharding import sharding_constraint_p

    dummy = tree_util.tree_unflatten(out_tree, [0] * out_tree.num_leaves)
    flat = _flatten_prefix(owner._out_shardings, dummy, out_tree.num_leaves, "out_shardings", owner.__name__)
    return [sharding_constraint_p.bind(o, sharding=_of_nested_jit(s)) if isinstance(s, NamedSharding) else o
            for o, s in zip(outs, flat)]
