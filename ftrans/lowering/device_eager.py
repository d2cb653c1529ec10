"""Eager primitives on accelerator-resident arrays: one-primitive programs, compiled once.

On the host, an eager primitive runs its NumPy rule.  When an operand lives on
a GPU or TPU, copying it to the host for that would be slow and surprising, so
the primitive is staged as a one-equation jaxpr, compiled for the operand's
device and run there; the executable is cached by (primitive, params, operand
types, device), so a training loop written eagerly compiles each distinct op
once.

``install`` registers ``dispatch`` as core's eager device backend; the
runtime calls it when the first accelerator-resident array appears, so a
host-only program never pays for the device check.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

import numpy as np

from ftrans.core import array as _array
from ftrans.core import dtypes
from ftrans.core import trace as _trace
from ftrans.core.array import Array, DeviceArray, ShardedArray, device_key
from ftrans.core.avals import ShapedArray
from ftrans.core.ir import ClosedJaxpr, Jaxpr, JaxprEqn, Var
from ftrans.core.primitive import Primitive, abstract_eval_rules
from ftrans.core.prims import _base as _prims_base
from ftrans.core.prims import structural as _structural
from ftrans.devices import on_new_backend
from ftrans.errors import FtransValueError
from ftrans.lowering.executable import Executable, to_buffer

MAX_PROGRAMS = 1024  # one-primitive programs kept (least recently used dropped first)
_cache: OrderedDict[tuple, Executable] = OrderedDict()
_lock = threading.Lock()
stats = {"compiles": 0, "calls": 0}


def _forget_programs() -> None:
    # (the host-stack programs below and their CPU device belong to the old client too)
    clear()
    _host_device.clear()
    _device_by_key.clear()


on_new_backend.append(_forget_programs)  # keyed by device id, which a new client reuses


def install(accelerator: bool = False) -> None:
    """Make core's eager path send accelerator-resident operands here (idempotent); ``accelerator``: the
    caller made a buffer on an accelerator, so device arrays' operators must not take the host fast path."""
    if accelerator:
        _array.note_accelerator_buffers()
    if _trace.device_backend() is not dispatch:
        _trace.set_device_backend(dispatch)


# Runs a primitive with an operand spread over several devices (``transforms/sharded_eager.py``, which
# sits above this layer and registers itself when ftrans is imported).
_sharded_apply: Any = None


def set_sharded_apply(fn: Any) -> None:
    global _sharded_apply
    _sharded_apply = fn


def dispatch(prim: Primitive, args: Any, params: dict) -> Any:
    """Core's device backend: run on the device the operands are committed to (else on the first
    operand's accelerator), or NotImplemented for the host.

    As in JAX, a result computed from committed operands is committed to their device, and operands
    committed to two different devices are an error.  An operand spread over several devices makes
    the primitive a sharded program, so the result stays spread (``transforms/sharded_eager.py``)."""
    for a in args:
        if type(a) is ShardedArray and _sharded_apply is not None and prim.name not in _HOST_ONLY:
            return _sharded_apply(prim, args, params)
    dev = committed_device(args, prim.name)
    if dev is None:
        dev = on_accelerator(args)
        if dev is None or prim.name in _HOST_ONLY:
            return NotImplemented
        if prim.name in _ELEMENTWISE and len(args) > 1:
            args = broadcast_like_numpy(args)
        return apply(prim, args, params, dev)
    if prim.name in _HOST_ONLY:
        return NotImplemented
    if prim.name in _ELEMENTWISE and len(args) > 1:
        args = broadcast_like_numpy(args)
    res = apply(prim, args, params, dev)
    for r in (res if prim.multiple_results else (res,)):
        if type(r) is DeviceArray:
            r._commit = True
    return res


_ELEMENTWISE = _prims_base.ELEMENTWISE


def broadcast_like_numpy(args: Any) -> Any:
    """The operands of an elementwise primitive broadcast to one shape, as its NumPy rule would take them.

    Eager jnp functions hand such primitives operands of different shapes (the host rule broadcasts them
    for free); the one-primitive program is typed strictly, so the broadcast is made here, on the device.
    Rank-0 operands stay as they are (the primitives take them)."""
    shapes = [np.shape(a) if not isinstance(a, Array) else a.shape for a in args]
    nonscalar = [s for s in shapes if s]
    if all(s == nonscalar[0] for s in nonscalar):
        return args
    target = np.broadcast_shapes(*nonscalar)  # (incompatible shapes: NumPy's ValueError, as the host rule's)
    out = []
    for a, s in zip(args, shapes):
        if s and s != target:
            lead = len(target) - len(s)
            a = _structural.broadcast_in_dim_p.bind(a, shape=target,
                                                    broadcast_dimensions=tuple(range(lead, len(target))))
        out.append(a)
    return type(args)(out) if isinstance(args, tuple) else out


def committed_device(args: Any, what: str) -> Any:
    """The one device the committed operands among ``args`` live on, or None when none is committed."""
    key = None
    for k, a in enumerate(args):
        if type(a) is DeviceArray and a._committed:
            d = a._sig[3]  # (the device's key: comparing keys reads no device object)
            if key is None:
                key, first = d, k
            elif d != key:
                def one(i: int, x: Any) -> str:  # as JAX's message names each operand
                    return (f"argument args[{i}] of {what} with shape {x.dtype.name}[{','.join(map(str, x.shape))}] "
                            f"and with device ids [{x.device.id}] on platform {x.device.platform.upper()}")

                raise FtransValueError(
                    f"Received incompatible devices for jitted computation. Got {one(first, args[first])} and "
                    f"{one(k, a)}; move them to one device with ftrans.device_put first")
    if key is None:
        return None
    dev = _device_by_key.get(key)
    if dev is None:
        dev = _device_by_key[key] = args[first].device
    return dev


_device_by_key: dict = {}  # a device key (``_sig[3]``) -> its device, for this client

# Primitives that run Python on the host (the callbacks, and checkify's check, which raises a failed check's
# error): eagerly they always take the host rule.
_HOST_ONLY = frozenset({"debug_callback", "debug_print", "pure_callback", "io_callback", "check"})
HOST_ONLY = _HOST_ONLY


def on_accelerator(args: Any) -> Any:
    """The accelerator device of the first accelerator-resident operand, or None."""
    for a in args:
        if type(a) is DeviceArray and a.device.platform != "cpu":
            return a.device
    return None


def _aval(x: Any) -> ShapedArray:
    if isinstance(x, Array):
        return x.aval
    if isinstance(x, (bool, int, float, complex)):
        return ShapedArray((), dtypes.python_scalar_dtype(x), dtypes.is_weak_scalar(x))
    arr = np.asarray(x)
    return ShapedArray(arr.shape, dtypes.canonicalize(arr.dtype), False)


def freeze(v: Any) -> Any:
    """``v`` (primitive parameters) as a hashable key; an unhashable leaf stands for itself by ``id``."""
    if isinstance(v, (list, tuple)):
        return tuple(freeze(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((k, freeze(x)) for k, x in v.items()))
    try:
        hash(v)
    except TypeError:
        return ("id", id(v))
    return v


def _signature(x: Any) -> Any:
    """What of an operand keys the program cache: a device array's signature (shape, dtype, weak type and
    device, noted when it was made), a host array's shape, dtype and weak type, else its abstract value."""
    t = type(x)
    if t is DeviceArray:
        return x._sig
    if t is Array:
        v = x._value
        return (v.shape, v.dtype, x.weak_type)
    return _aval(x)


def apply(prim: Primitive, args: Any, params: dict, device: Any) -> Any:
    """Run ``prim`` on ``device`` through a cached one-primitive executable."""
    if params:
        try:  # (the parameters as bound, when all are hashable: the common case, without ``freeze``'s walk)
            fp = tuple(params.items())
            hash(fp)
        except TypeError:
            fp = freeze(params)
    else:
        fp = ()
    key = (prim, fp, tuple([_signature(a) for a in args]), device_key(device))
    with _lock:
        exe = _cache.get(key)
        if exe is not None:
            _cache.move_to_end(key)
    if exe is None:
        avals = [_aval(a) for a in args]
        outs = abstract_eval_rules[prim](*avals, **params)
        outs = list(outs) if prim.multiple_results else [outs]
        weak = prim.weak_type_rule(tuple(a.weak_type for a in avals), **params)
        weaks = weak if isinstance(weak, tuple) else (weak,) * len(outs)
        outs = [o.update(weak_type=bool(w)) for o, w in zip(outs, weaks)]
        invars = [Var(a) for a in avals]
        outvars = [Var(o) for o in outs]
        jaxpr = Jaxpr([], invars, [JaxprEqn(prim, invars, outvars, dict(params), None)], outvars)
        exe = Executable(ClosedJaxpr(jaxpr, []), device, f"eager_{prim.name}")
        stats["compiles"] += 1
        with _lock:
            _cache[key] = exe
            while len(_cache) > MAX_PROGRAMS:
                _cache.popitem(last=False)
    stats["calls"] += 1
    res = exe.wrap(exe.run([_scalar_buffer(a, device) if type(a) is Array and not a._value.ndim
                            else to_buffer(a, device) for a in args]))
    return res if prim.multiple_results else res[0]


MAX_SCALARS = 256  # device copies of host scalars kept (least recently used dropped first)
_scalars: OrderedDict[tuple, Any] = OrderedDict()


def _scalar_buffer(x: Array, device: Any) -> Any:
    """A device copy of a host rank-0 operand, shared by every operation that meets the same value there.

    An optimizer's ``lr * g`` on a device-resident ``g`` makes a new host scalar each step; transferring it
    each time cost more than the operation.  A buffer is never written after it is made, so one copy of a
    value serves every program on that device."""
    v = x._value
    key = (device_key(device), v.dtype, v.tobytes())
    with _lock:
        buf = _scalars.get(key)
        if buf is not None:
            _scalars.move_to_end(key)
            return buf
    buf = to_buffer(x, device)
    with _lock:
        _scalars[key] = buf
        while len(_scalars) > MAX_SCALARS:
            _scalars.popitem(last=False)
    return buf


# ---------------------------------------------------------------- host stacks through the compiled program
#
# An eager linalg factorization of a stack of host matrices (``ftrans.core.prims.linalg``) runs the
# primitive's one-primitive program compiled for the CPU, as JAX's eager ops do: the LAPACK kernel loops over
# the batch in C, where the NumPy rule would call LAPACK from Python once per matrix.  Same kernel, same bits.

MAX_HOST_PROGRAMS = 256
_host_cache: OrderedDict[tuple, tuple] = OrderedDict()
# Signatures seen once: a program is compiled the second time its signature comes, so a one-off call (which
# the per-matrix loop answers in well under a compile's time) never waits for XLA.
_host_seen: OrderedDict[tuple, None] = OrderedDict()
_host_device: list = []
host_stats = {"compiles": 0, "calls": 0}


def _cpu_device() -> Any:
    if not _host_device:
        from ftrans.lowering import compat

        try:
            _host_device.append(compat.backend("cpu").local_devices()[0])
        except Exception:  # no CPU client in this process (the runtime's error types vary by release)
            _host_device.append(None)
    return _host_device[0]


def run_host_stack(prim: Primitive, args: Any, params: dict) -> Any:
    """Run ``prim`` on host (NumPy) operands through its compiled one-primitive CPU program; NumPy results,
    or NotImplemented (the caller's NumPy rule runs) the first time a signature comes or when there is no
    CPU device.  The program is cached by (primitive, params, operand shapes and dtypes)."""
    key = (prim, freeze(params), tuple([(a.shape, a.dtype) for a in args]))
    with _lock:
        entry = _host_cache.get(key)
        if entry is not None:
            _host_cache.move_to_end(key)
    if entry is None:
        with _lock:
            first = key not in _host_seen
            if first:
                _host_seen[key] = None
                while len(_host_seen) > 4 * MAX_HOST_PROGRAMS:
                    _host_seen.popitem(last=False)
        device = _cpu_device()
        if first or device is None or any(dtypes.canonicalize(a.dtype) != a.dtype for a in args):
            return NotImplemented
        try:
            entry = _host_program(prim, args, params, device)
        except Exception:  # no program for this signature (XLA refused it): the NumPy rule answers, as before
            entry = ()
        with _lock:
            _host_cache[key] = entry
            while len(_host_cache) > MAX_HOST_PROGRAMS:
                _host_cache.popitem(last=False)
    if not entry:
        return NotImplemented
    host_stats["calls"] += 1
    res = [np.asarray(b) for b in entry[1](tuple(args))]
    return res if prim.multiple_results else res[0]


def _host_program(prim: Primitive, args: Any, params: dict, device: Any) -> tuple:
    """``(executable, run)``: ``prim`` as a one-equation program compiled for ``device``; ``run`` takes the
    host operands and returns the output buffers (the executable keeps the compiled program alive)."""
    from ftrans.lowering import compat

    avals = [ShapedArray(a.shape, a.dtype, False) for a in args]
    outs = abstract_eval_rules[prim](*avals, **params)
    outs = list(outs) if prim.multiple_results else [outs]
    invars = [Var(a) for a in avals]
    outvars = [Var(o.update(weak_type=False)) for o in outs]
    jaxpr = Jaxpr([], invars, [JaxprEqn(prim, invars, outvars, dict(params), None)], outvars)
    exe = Executable(ClosedJaxpr(jaxpr, []), device, f"eager_{prim.name}")
    run = compat.host_execute_fn(exe.xla, exe.out_avals, device, [a.shape for a in avals],
                                 [a.dtype for a in avals], exe.const_bufs)
    host_stats["compiles"] += 1
    return exe, run


def clear() -> None:
    """Drop the eager one-primitive programs (``ftrans.clear_caches``)."""
    with _lock:
        _cache.clear()
        _scalars.clear()
        _host_cache.clear()
        _host_seen.clear()


def _install_host_stacks() -> None:
    from ftrans.core.prims import linalg

    linalg.set_stack_runner(run_host_stack)


_install_host_stacks()
