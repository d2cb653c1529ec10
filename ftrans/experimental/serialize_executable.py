"""JAX's ``jax.experimental.serialize_executable``: a compiled program as bytes, and back.

``serialize(jit(f).lower(...).compile())`` gives ``(payload, in_tree, out_tree)``; the pytree structures are
returned apart (they are not serialised); ``deserialize_and_load(payload, in_tree, out_tree)`` loads the
program on a device of the same platform and gives a ``Compiled`` that runs it.  The payload holds PJRT's
serialisation of the XLA executable, the program's StableHLO text, the arguments' and results' types and the
values of the constants the program closed over.

.. warning:: loading a payload runs its program and unpickles its data: never load untrusted bytes.
"""

from __future__ import annotations

import io
import pickle
from collections.abc import Sequence
from typing import Any

import numpy as np

from ftrans.errors import FtransValueError

__all__ = ["deserialize_and_load", "serialize"]

_FORMAT = "ftrans-executable-1"


class _Signature:
    """The argument and result types of a loaded program (what ``Compiled`` reads of its jaxpr)."""

    def __init__(self, in_avals: list, out_avals: list):
        self.in_avals, self.out_avals = list(in_avals), list(out_avals)


def serialize(compiled: Any) -> tuple[bytes, Any, Any]:
    """``(payload, in_tree, out_tree)`` of a ``Compiled`` (from ``jit(f).lower(...).compile()``).

    Raises ValueError for a program that cannot be serialised: one taking mutable array refs, one calling
    back into Python, or a multi-device (sharded) one."""
    from ftrans.lowering import compat, lower
    from ftrans.transforms.jit import Compiled
    from ftrans.transforms.refs import _RefStage

    if isinstance(compiled, _RefStage):
        inner = compiled._inner
        _, closed_refs = _ref_parts(inner)
        if closed_refs:
            raise FtransValueError("can't serialize with a closed-over mutable array ref: serialize(...) of a "
                                   "program that closes over a ref; pass the ref as an argument instead")
        raise FtransValueError("Compilation does not support serialization: the program takes mutable array "
                               "refs as arguments")
    if type(compiled) is not Compiled:
        raise FtransValueError(f"Compilation does not support serialization: serialize takes the Compiled of a "
                               f"single-device jit(f).lower(...).compile(), got {type(compiled).__name__}")
    exe = compiled._exe
    if lower.host_callbacks_of(exe.text):
        raise FtransValueError("Compilation does not support serialization: the program calls back into Python "
                               "(a callback, debug.print or breakpoint), which cannot be stored with it")
    info_flat = [(a._aval, a.donated) for a in _leaves(compiled.args_info)]
    xla = exe.xla
    if exe._held.from_disk:  # XLA's CPU runtime cannot serialize a program it loaded: compile it afresh
        from ftrans.lowering.executable import with_default_options

        xla = compat.compile(exe.device.client, exe.text, [exe.device],
                             with_default_options(exe.options, exe.device.platform))
    state = {
        "format": _FORMAT,
        "executable": compat.serialize(exe.device.client, xla),
        "name": exe.name,
        "text": exe.text,
        "platform": exe.device.platform,
        "device_id": exe.device_id,
        "donated": exe.donated,
        "consts": [np.asarray(b) for b in exe.const_bufs],
        "in_avals": list(compiled._closed.in_avals),
        "out_avals": list(compiled._closed.out_avals),
        "kept": compiled._kept,
        "names": compiled._names,
        "args_info": info_flat,
        "donate_argnums": compiled.donate_argnums,
    }
    with io.BytesIO() as f:
        pickle.dump(state, f)
        return f.getvalue(), compiled._in_tree, compiled._out_tree


def deserialize_and_load(serialized: bytes, in_tree: Any, out_tree: Any, backend: Any = None,
                         execution_devices: Sequence[Any] | None = None) -> Any:
    """The ``Compiled`` that ``serialize`` stored, loaded on ``execution_devices[0]`` (by default the device of
    ``backend``, a platform name or a client, with the id it was compiled for, else its first one).

    .. warning:: it unpickles ``serialized``: never pass untrusted bytes."""
    from ftrans.core import pytrees as tree_util
    from ftrans.devices import devices as _devices
    from ftrans.lowering import compat
    from ftrans.lowering.executable import Executable
    from ftrans.transforms.jit import ArgInfo, Compiled

    if backend is None or isinstance(backend, str):
        backend = _devices(backend)[0].client
    if execution_devices is None:
        execution_devices = list(backend.devices())
    else:
        dev_client = execution_devices[0].client
        if dev_client != backend:
            raise FtransValueError(
                "Execution devices belong to a client other than `backend`. Got backend client: "
                f"{(backend.platform, backend.platform_version)} and execution devices client: "
                f"{(dev_client.platform, dev_client.platform_version)}")
    try:
        state = pickle.loads(serialized)  # noqa: S301  (documented: the caller's own trusted payload)
    except pickle.UnpicklingError:  # JAX's payloads, for one, need its own unpickler
        state = None
    if not isinstance(state, dict) or state.get("format") != _FORMAT:
        raise FtransValueError("deserialize_and_load: the bytes are not an executable ftrans's serialize wrote")
    if backend.platform != state["platform"]:
        raise FtransValueError(f"deserialize_and_load: the executable was compiled for {state['platform']}, "
                               f"the backend is {backend.platform}")
    by_id = {d.id: d for d in execution_devices}
    device = by_id.get(state["device_id"], execution_devices[0]) if len(execution_devices) > 1 \
        else execution_devices[0]
    xla = compat.deserialize(backend, state["executable"], [device])
    exe = Executable.loaded(xla, device, state["name"], state["text"], state["in_avals"], state["out_avals"],
                            state["consts"], state["donated"])
    out = Compiled(exe, out_tree, _Signature(state["in_avals"], state["out_avals"]), state["kept"], in_tree,
                   state["names"])
    out.donate_argnums = state["donate_argnums"]
    out._args_info = tree_util.tree_unflatten(in_tree, [ArgInfo(a, d) for a, d in state["args_info"]])
    return out


def _leaves(tree: Any) -> list:
    from ftrans.core import pytrees as tree_util
    from ftrans.transforms.jit import ArgInfo

    return tree_util.tree_leaves(tree, is_leaf=lambda x: isinstance(x, ArgInfo))


def _ref_parts(inner: Any) -> tuple[Any, list]:
    """The dynamic arguments and the closed-over refs' slots of a ref-taking program's twin
    (its arguments are ``(dargs, dkw, closed_vals)``)."""
    from ftrans.core import pytrees as tree_util

    tree = inner._in_tree
    args, _ = tree_util.tree_unflatten(tree, list(range(tree.num_leaves)))
    return args[:2], list(args[2]) if len(args) > 2 else []
