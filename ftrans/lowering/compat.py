"""The one place ftrans touches jax's runtime internals (``jax._src``).

ftrans uses jax for its PJRT client and device buffers only.  Everything that
reaches past jax's public surface to do that lives here, so a jax release that
moves things (0.10 through 0.12 are supported) is absorbed by editing this file
alone.  Nothing here traces or transforms: it compiles StableHLO text, moves
NumPy arrays to devices and runs executables.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any, NamedTuple

import jax
import numpy as np

try:  # jax >= 0.4.30 spells it jax.extend.backend
    from jax.extend import backend as _backend_api
except ImportError:  # pragma: no cover - older jax is outside the supported range
    _backend_api = None

from jax._src import config as _jconfig
from jax._src import core as _jcore
from jax._src.lib import xla_client as _xc

JAX_VERSION: str = jax.__version__

# The PJRT client's device class (what ``devices()`` returns): ``ftrans.Device`` for isinstance checks.
Device: type = jax.Device


def _register_buffer_type() -> None:
    """Tell core what a device buffer (a jax.Array) is, so it takes them as operands without a copy."""
    from ftrans.core import array as _array

    _array.buffer_type = _xc.ArrayImpl


_register_buffer_type()


def jaxlib_version() -> str:
    """The installed jaxlib's version (the PJRT runtime ftrans runs on)."""
    from jax._src import lib as _lib

    return _lib.version_str


def backend(platform: str | None = None) -> Any:
    """The PJRT client for ``platform`` (the default backend when None)."""
    return _backend_api.get_backend(platform)


def clear_backends() -> None:
    """Drop the runtime's PJRT clients (the next use starts new ones), with what JAX itself compiled for them."""
    from jax._src import api as _api

    _api.clear_backends()


def profiler_runtime() -> Any:
    """The runtime's profiler bindings (sessions, trace annotations, the profiler server) that jaxlib ships."""
    from jax._src.lib import _profiler

    return _profiler


def set_platforms(platforms: str | None) -> None:
    """Hand JAX's ``jax_platforms`` setting (``"cpu"``, ``"cuda,cpu"``) to the runtime, which reads it when it
    starts its backends."""
    import jax

    jax.config.update("jax_platforms", platforms)


def json_to_pprof(profile_json: str) -> bytes:
    """A pprof ``Profile`` protocol buffer (uncompressed) from its JSON form, by jaxlib's converter."""
    from jax._src.lib import _jax

    return _jax.json_to_pprof_profile(profile_json)


def set_num_cpu_devices(n: int) -> None:
    """Hand JAX's ``jax_num_cpu_devices`` setting to the runtime; it raises ``RuntimeError`` once its backends
    have started (the CPU client is made once per process)."""
    import jax

    jax.config.update("jax_num_cpu_devices", n)


def backend_version(client: Any) -> str:
    """What identifies compiled code as reusable: platform, its version, jaxlib's."""
    return f"{client.platform}/{client.platform_version}/jaxlib-{JAX_VERSION}"


def _compile_options(devices: Sequence[Any]) -> Any:
    """Replicas, partitions and the device assignment for a program on ``devices``."""
    opts = _xc.CompileOptions()
    build = opts.executable_build_options
    build.num_replicas = 1
    build.num_partitions = len(devices)
    if len(devices) > 1:
        build.use_spmd_partitioning = True
    # One replica, one partition per device; without an explicit assignment XLA
    # would run on the client's first device.
    build.device_assignment = _xc.DeviceAssignment.create(np.array([[d.id for d in devices]]))
    return opts


# ``compiler_options`` names that are fields of XLA's build options rather than debug options
# (JAX routes them the same way).
_BUILD_OPTION_NAMES = ("exec_time_optimization_effort", "memory_fitting_effort", "optimization_level",
                       "memory_fitting_level")
# jaxlib 0.11's build options dropped the two float effort fields (XLA removed them; jax 0.11 refuses the
# names): ftrans still takes them, and where the field is gone they have no effect (they steer how hard XLA
# works, never the results).
_BUILD_OPTION_FIELDS = frozenset(n for n in _BUILD_OPTION_NAMES
                                 if hasattr(type(_xc.CompileOptions().executable_build_options), n))


def _set_options(opts: Any, options: tuple) -> None:
    """``compiler_options`` onto ``opts``: the build-option fields directly, the rest as debug-option overrides."""
    build = opts.executable_build_options
    rest = []
    for k, v in options:
        if k in _BUILD_OPTION_NAMES:
            if k in _BUILD_OPTION_FIELDS:
                setattr(build, k, getattr(v, "value", v))
        else:
            rest.append((str(k), _option_value(v)))
    if rest:
        opts.env_option_overrides = rest


def compile(client: Any, module_text: str, devices: Sequence[Any], options: tuple = (),
            host_callbacks: Sequence[Any] = ()) -> Any:
    """Compile a StableHLO module (text) for ``devices``; returns a loaded executable.

    ``options`` are ``(name, value)`` pairs of XLA debug options (``jit``'s
    ``compiler_options``); XLA itself rejects a name it does not know.
    ``host_callbacks`` are the Python functions the module's host-callback custom
    calls run (by index); the client takes them only with a parsed module.
    """
    opts = _compile_options(devices)
    if options:
        _set_options(opts, options)
    return _compile_and_load(client, module_text, devices, opts, host_callbacks)


def _compile_and_load(client: Any, module_text: str, devices: Sequence[Any], opts: Any,
                      host_callbacks: Sequence[Any]) -> Any:
    dl = _xc.DeviceList(tuple(devices))
    if not host_callbacks and "_python_cpu_callback" in module_text:  # would crash the process when run
        raise ValueError("compile: the module calls back into Python but no host callbacks were given "
                         "(pass the lowering's host_callbacks)")
    if host_callbacks:
        return client.compile_and_load(_parsed_module(_for_platform(module_text, devices)), dl, opts,
                                       list(host_callbacks))
    return client.compile_and_load(module_text.encode(), dl, opts)


def _for_platform(text: str, devices: Sequence[Any]) -> str:
    """The host-callback custom call's target for the devices' platform (the lowering writes the CPU one)."""
    platform = devices[0].platform
    if platform in ("gpu", "cuda", "rocm"):
        # (both targets: ``xla_ffi_python_cpu_callback`` and ``xla_ffi_partitioned_python_cpu_callback``)
        return str(text).replace("python_cpu_callback", "python_gpu_callback")
    if platform != "cpu":
        raise NotImplementedError(f"host callbacks are supported on CPU and GPU, not on {platform}")
    return str(text)


def _parsed_module(text: str) -> Any:
    """``text`` parsed into an MLIR module in jax's context (where the StableHLO dialects are loaded)."""
    from jax._src.interpreters import mlir as _mlir
    from jax._src.lib.mlir import ir as _ir

    with _mlir.make_ir_context():
        return _ir.Module.parse(text)


def refine_shapes(text: str) -> str:
    """``text`` (a module whose ``main`` has static argument types and whose other types are dynamic, computed
    from them) with every shape made static by StableHLO's shape refinement (the pass jaxlib ships for JAX's
    shape polymorphism); raises ``ValueError`` when a shape cannot be made static."""
    from jax._src.interpreters import mlir as _mlir
    from jax._src.lib import _jax
    from jax._src.lib.mlir import ir as _ir

    with _mlir.make_ir_context():
        module = _ir.Module.parse(text)
        refined = _jax.mlir.refine_polymorphic_shapes(_mlir.module_to_bytecode(module),
                                                      enable_shape_assertions=True, validate_static_shapes=True)
        return str(_ir.Module.parse(refined))


def parsed_module(text: str) -> Any:
    """``Lowered.compiler_ir("stablehlo")``: the module as an MLIR ``ir.Module`` (as JAX returns)."""
    return _parsed_module(text)


def pretty_module_text(text: str, debug_info: bool = False) -> str:
    """``Lowered.as_text()``: the module as MLIR prints it (its custom assembly forms, ``%arg0`` names), with
    locations only when ``debug_info``, as JAX shows it."""
    import io

    from jax._src.interpreters import mlir as _mlir
    from jax._src.lib.mlir import ir as _ir

    out = io.StringIO()
    with _mlir.make_ir_context():
        _ir.Module.parse(text).operation.print(file=out, enable_debug_info=debug_info)
    return out.getvalue()


def xla_computation(text: str) -> Any:
    """``Lowered.compiler_ir("hlo")``: the module converted to XLA's HLO (an ``XlaComputation``)."""
    from jax._src.lib import _jax

    return _jax.mlir.mlir_module_to_xla_computation(str(text), use_tuple_args=False)


def hlo_text(text: str, debug_info: bool = False) -> str:
    """``Lowered.as_text("hlo")``: the HLO text of a StableHLO module, printed as JAX prints it."""
    try:
        from jax._src.lib import hlo as _hlo
    except ImportError:  # pragma: no cover - older jaxlib keeps it on the client module
        _hlo = _xc._xla
    opts = _hlo.HloPrintOptions.short_parsable()
    opts.print_metadata = debug_info
    return xla_computation(text).as_hlo_module().to_string(opts)


def _unimplemented(e: Exception) -> bool:
    msg = e.args[0] if e.args else None
    return type(msg) is str and msg.startswith("UNIMPLEMENTED")


def hlo_cost_analysis(client: Any, text: str) -> dict | None:
    """``Lowered.cost_analysis()``: XLA's cost estimate of the module before optimisation, or None
    where the client cannot estimate an unoptimised module (a PJRT C API plugin such as the GPU's),
    as JAX answers there."""
    from jax._src.lib import _jax

    try:
        return _jax.hlo_module_cost_analysis(client, xla_computation(text).as_hlo_module())
    except _jax.JaxRuntimeError as e:
        if _unimplemented(e):
            return None
        raise


def executable_cost_analysis(xla_exe: Any) -> Any:
    """``Compiled.cost_analysis()``: the loaded executable's cost estimate, or None where the runtime
    has none (JAX answers None there too)."""
    from jax._src.lib import _jax

    if not hasattr(xla_exe, "cost_analysis"):
        return None
    try:
        return xla_exe.cost_analysis()
    except _jax.JaxRuntimeError as e:
        if _unimplemented(e):
            return None
        raise


def execute_fn_sync(executable: Any, out_avals: Sequence[Any], device: Any):
    """``execute_fn`` for a program that calls back into Python: each call waits until the program
    (and so every callback it made) has finished, so a print shows before the call returns and a
    failing callback's exception surfaces here."""
    return _waiting_call(executable.execute_sharded, result_handlers(out_avals, device))


def _waiting_call(run: Any, handlers: list):
    """A call of ``run`` (``execute_sharded``) that returns only when the program and its callbacks are done."""
    def call(buffers: list) -> list:
        results = run(buffers, with_tokens=True)
        token = results.consume_token()
        outs = results.consume_with_handlers(handlers)
        token.block_until_ready()
        for o in outs:
            o.block_until_ready()
        return outs

    return call


def _option_value(v: Any) -> Any:
    # XLA parses strings itself; bool must be tested before int (bool is an int).
    if isinstance(v, (bool, str)):
        return v
    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        return float(v)
    raise TypeError(f"a compiler option value must be a str, bool, int or float, got {type(v).__name__}")


def serialize(client: Any, executable: Any) -> bytes:
    """PJRT's own serialization of a compiled executable (the on-disk cache's payload).

    jaxlib 0.4.3x-0.10 put it on the client; some releases only on the executable.
    """
    if hasattr(client, "serialize_executable"):
        return bytes(client.serialize_executable(executable))
    return bytes(executable.serialize())


def deserialize(client: Any, payload: bytes, devices: Sequence[Any]) -> Any:
    """The loaded executable ``serialize`` produced, bound to ``devices``.

    The compile options mirror ``compile``'s so the program is loaded with the
    partitioning it was built for.  Raises whatever PJRT raises for bytes it
    cannot load (the cache treats any failure as a miss).
    """
    opts = _compile_options(devices)
    payload = bytes(payload)
    try:
        dl = _xc.DeviceList(tuple(devices))
        return client.deserialize_executable(payload, dl, opts)
    except TypeError:  # signatures differ between jaxlib releases
        return client.deserialize_executable(payload, opts)


def execute(executable: Any, buffers: list) -> list:
    """Run on one device; returns one device buffer per output."""
    return [o[0] for o in executable.execute_sharded(buffers).disassemble_into_single_device_arrays()]


def result_handlers(out_avals: Sequence[Any], device: Any) -> list:
    """C++ handlers that turn raw results into device buffers without calling back into Python.

    Handing these to ``consume_with_handlers`` is what makes a call cheap: the
    generic ``disassemble`` path asks Python for each output's sharding.
    """
    sh = _sharding(device)
    return [array_result_handler(_jax_aval(tuple(a.shape), np.dtype(a.dtype)), sh) for a in out_avals]


_HANDLER_TAKES_PYTHON_FLAG: bool | None = None


def array_result_handler(aval: Any, sharding: Any) -> Any:
    """A committed result handler for ``aval`` laid out as ``sharding``.

    jaxlib up to 0.10 takes a fourth flag (the result is a Python-level array); 0.11 dropped it.
    Which form this jaxlib takes is learnt at the first call.
    """
    global _HANDLER_TAKES_PYTHON_FLAG
    if _HANDLER_TAKES_PYTHON_FLAG is None:
        try:
            h = _xc.array_result_handler(aval, sharding, True, True)
        except TypeError:
            h = _xc.array_result_handler(aval, sharding, True)
            _HANDLER_TAKES_PYTHON_FLAG = False
        else:
            _HANDLER_TAKES_PYTHON_FLAG = True
        return h
    if _HANDLER_TAKES_PYTHON_FLAG:
        return _xc.array_result_handler(aval, sharding, True, True)
    return _xc.array_result_handler(aval, sharding, True)


def execute_fn(executable: Any, out_avals: Sequence[Any], device: Any):
    """A callable ``buffers -> list of output buffers`` with as little in between as we can.

    Falls back to the generic (slower) result path on a jaxlib without
    ``array_result_handler``, so a release that drops it costs speed, not correctness.
    """
    run = executable.execute_sharded
    try:
        handlers = result_handlers(out_avals, device)
    except (AttributeError, TypeError):
        def slow(buffers: list) -> list:
            return [o[0] for o in run(buffers).disassemble_into_single_device_arrays()]

        return slow

    def call(buffers: list) -> list:
        return run(buffers).consume_with_handlers(handlers)

    return call


def host_execute_fn(executable: Any, out_avals: Sequence[Any], device: Any, shapes: Sequence[tuple],
                    dtypes: Sequence[np.dtype], lead: Sequence[Any] = ()) -> Any:
    """A callable ``tuple of host arrays -> list of output buffers``: transfer, execute, collect in one frame.

    jit's NumPy fast path: the arrays (one per entry of ``shapes``/``dtypes``,
    canonical dtypes) are put on ``device`` by ``batched_device_put`` and run
    after the device buffers ``lead`` (the program's constants). The one- and
    two-argument cases, the common ones, run without a loop or extra call.
    """
    put_all = host_putter_many(shapes, dtypes, device)
    run = execute_fn(executable, out_avals, device)
    lead = list(lead)
    if lead:
        return lambda xs: run(lead + put_all(xs))
    try:
        handlers = result_handlers(out_avals, device)
    except (AttributeError, TypeError):
        return lambda xs: run(put_all(xs))
    execute_sharded = executable.execute_sharded
    avals = [_jax_aval(tuple(s), np.dtype(d)) for s, d in zip(shapes, dtypes)]
    sharding = _sharding(device)
    devices = [device]
    put = _xc.batched_device_put
    if not _put_takes_x64(device) or len(avals) not in (1, 2):
        return lambda xs: execute_sharded(put_all(xs)).consume_with_handlers(handlers)
    if len(avals) == 1:
        (a0,) = avals

        def run1(xs: tuple) -> list:
            return execute_sharded([put(a0, sharding, [xs[0]], devices, True, enable_x64=True)]
                                   ).consume_with_handlers(handlers)

        return run1
    a0, a1 = avals

    def run2(xs: tuple) -> list:
        x0, x1 = xs
        return execute_sharded([put(a0, sharding, [x0], devices, True, enable_x64=True),
                                put(a1, sharding, [x1], devices, True, enable_x64=True)]
                               ).consume_with_handlers(handlers)

    return run2


@functools.lru_cache(maxsize=4096)
def _jax_aval(shape: tuple, dtype: np.dtype) -> Any:
    return _jcore.ShapedArray(shape, dtype)


@functools.lru_cache(maxsize=64)
def _sharding(device: Any) -> Any:
    return _xc.SingleDeviceSharding(device)


def explicit_transfers() -> Any:
    """A context in which the runtime counts host-to-device copies as the user's own (``ftrans.device_put``
    and its kin): the runtime's transfer guard (JAX's ``jax.transfer_guard``, which ftrans shares through
    the runtime) then refuses them only at "disallow_explicit", as JAX's ``device_put``."""
    return _jconfig.explicit_device_put_scope()


def program_constants() -> Any:
    """A context in which the runtime's transfer guard lets host-to-device copies through: those of a
    compiled program's constants, which JAX embeds in the program itself (no guarded transfer)."""
    return _jconfig.transfer_guard_host_to_device("allow")


def device_put(value: np.ndarray, device: Any) -> Any:
    """Copy a (canonically typed) NumPy array to ``device``; returns a device buffer."""
    # ftrans has already canonicalised the dtype; enable_x64 stops jax from narrowing it again.
    aval = _jax_aval(value.shape, value.dtype)
    try:
        return _xc.batched_device_put(aval, _sharding(device), [value], [device], True, enable_x64=True)
    except TypeError:  # a jaxlib whose batched_device_put has no enable_x64 keyword
        return _xc.batched_device_put(aval, _sharding(device), [value], [device], True)


def host_putter_many(shapes: Sequence[tuple], dtypes: Sequence[np.dtype], device: Any) -> Any:
    """A callable ``tuple of ndarrays -> list of device buffers`` for one signature of (canonical) arrays.

    jit's NumPy fast path keeps one per compiled signature, so a call does one
    Python call for all its transfers: the per-argument abstract values,
    sharding and device list are built here, once, and the one- and
    two-argument cases (the common ones) run without a loop.
    """
    avals = [_jax_aval(tuple(s), np.dtype(d)) for s, d in zip(shapes, dtypes)]
    sharding = _sharding(device)
    devices = [device]
    put = _xc.batched_device_put
    if not _put_takes_x64(device):
        def put_x64(aval: Any, s: Any, xs: list, ds: list, committed: bool, enable_x64: bool) -> Any:
            return put(aval, s, xs, ds, committed)
    else:
        put_x64 = put
    if len(avals) == 1:
        (a0,) = avals

        def put1(xs: tuple) -> list:
            return [put_x64(a0, sharding, [xs[0]], devices, True, enable_x64=True)]

        return put1
    if len(avals) == 2:
        a0, a1 = avals

        def put2(xs: tuple) -> list:
            x0, x1 = xs
            return [put_x64(a0, sharding, [x0], devices, True, enable_x64=True),
                    put_x64(a1, sharding, [x1], devices, True, enable_x64=True)]

        return put2

    def put_n(xs: tuple) -> list:
        return [put_x64(a, sharding, [x], devices, True, enable_x64=True) for a, x in zip(avals, xs)]

    return put_n


def host_putter(shape: tuple, dtype: np.dtype, device: Any) -> Any:
    """``host_putter_many`` for one array: a callable ``ndarray -> device buffer`` (the pytree key's leaves)."""
    put = host_putter_many([shape], [dtype], device)
    return lambda x: put((x,))[0]


# -- jaxlib's C++ jit dispatcher (jit's NumPy-argument fast path) -----------------------------------------
#
# jaxlib ships a dispatcher written in C++ (``PjitFunction``): called with host arrays, it computes their
# signature, looks it up, transfers them, runs the executable and builds the output arrays without running
# any Python. On a signature it has not seen it calls back (``miss``), which runs ftrans's own path and hands
# back the outputs plus a description of the compiled program (``CppFastpath``) for the next call. It is a
# runtime service, like ``execute_sharded``: the programs are ftrans's, compiled by ftrans.


class CppFastpath(NamedTuple):
    """What the C++ dispatcher needs to run one compiled signature itself (the field names are the ones
    jaxlib reads)."""

    xla_executable: Any
    out_pytree_def: Any
    in_shardings: list
    out_shardings: list
    out_avals: list
    out_committed: list
    kept_var_bitvec: list
    in_device_local_layouts: list
    const_args: list


_cpp_cache: Any = None
_out_node: list = []  # the pytree node type whose unflattening wraps a runtime output (registered once)


def cpp_dispatcher(name: str, call: Any, miss: Any) -> Any:
    """A C++ dispatcher (jaxlib's ``PjitFunction``) for one jitted function, or None on a jaxlib without one.

    ``miss(*args)`` answers a signature the dispatcher cannot run: it returns
    ``(outputs, CppFastpath or None, False)``; None makes the dispatcher call
    ``miss`` again for every call of that signature. ``call(*args)`` is what
    runs while the runtime's own ``disable_jit`` is set. Each dispatcher gets
    its own cache of signatures (keyed by the identity of ``call``).
    """
    global _cpp_cache
    try:
        from jax._src import tree_util as _jtree
        from jax._src.lib import _jax

        if _cpp_cache is None:
            _cpp_cache = _jax.PjitFunctionCache(capacity=4096)
        return _jax.pjit(name, call, miss, [], [], ("ftrans", name), _jtree.dispatch_registry,
                         _shard_arg_fallback, _cpp_cache)
    except (ImportError, AttributeError, TypeError):  # another jaxlib: jit keeps its Python fast path
        return None


def _shard_arg_fallback(x: Any, sharding: Any, layout: Any) -> Any:
    # Only reached for a program not on one device, which ftrans never hands to the dispatcher.
    x = np.asarray(x)
    return _xc.batched_device_put(_jax_aval(x.shape, x.dtype), sharding, [x], list(sharding.device_set), True)


def cpp_output_tree(out_tree: Any, auxes: Sequence[Any], unflatten: Any) -> Any:
    """The output structure the C++ dispatcher rebuilds: ``out_tree`` with each leaf a node that
    ``unflatten(aux, (runtime array,))`` turns into the caller's array (``auxes``: one per leaf).
    ``unflatten`` is registered on the first call and must be the same function on every call."""
    if not _out_node:
        class _Out:
            __slots__ = ("aux",)

            def __init__(self, aux: Any):
                self.aux = aux

        jax.tree_util.register_pytree_node(_Out, lambda o: ((0,), o.aux), unflatten)
        _out_node.append(_Out)
    node = _out_node[0]
    return jax.tree_util.tree_structure(jax.tree_util.tree_unflatten(out_tree, [node(a) for a in auxes]))


_leaf_def: list = []  # the output structure of a program returning one array (a bare leaf)


def cpp_fastpath(executable: Any, device: Any, out_avals: Sequence[Any], kept: Sequence[bool],
                 const_bufs: Sequence[Any], out_treedef: Any) -> CppFastpath:
    """The C++ dispatcher's description of a single-device program run on host arrays: ``kept`` says
    which argument leaves the program reads; ``const_bufs`` (device buffers) lead its arguments.

    ``out_treedef`` None: the program returns one array, which the dispatcher then hands back as the
    runtime array itself (no output structure to rebuild, no Python call); the caller wraps it. The
    runtime array carries the output's weak type."""
    sh = _sharding(device)
    n_in = len(const_bufs) + sum(1 for k in kept if k)
    if out_treedef is None:
        if not _leaf_def:
            _leaf_def.append(jax.tree_util.tree_structure(0))
        out_treedef = _leaf_def[0]
        (a,) = out_avals
        avals = [_jcore.ShapedArray(tuple(a.shape), np.dtype(a.dtype), weak_type=bool(a.weak_type))]
    else:
        avals = [_jax_aval(tuple(a.shape), np.dtype(a.dtype)) for a in out_avals]
    return CppFastpath(executable, out_treedef, [sh] * n_in, [sh] * len(avals), avals, [True] * len(avals),
                       [True] * len(const_bufs) + [bool(k) for k in kept], [None] * n_in, list(const_bufs))


def runtime_x64() -> bool:
    """The runtime's own 64-bit switch (JAX's ``jax_enable_x64``; the C++ dispatcher narrows 64-bit host
    arrays while it is off)."""
    return bool(_jconfig.enable_x64.value)


@functools.lru_cache(maxsize=64)
def _put_takes_x64(device: Any) -> bool:
    """Whether this jaxlib's ``batched_device_put`` takes ``enable_x64`` (asked once, with a scalar)."""
    try:
        _xc.batched_device_put(_jax_aval((), np.dtype(np.float32)), _sharding(device), [np.zeros((), np.float32)],
                               [device], True, enable_x64=True)
    except TypeError:
        return False
    return True


def copy_to_device(buf: Any, device: Any) -> Any:
    """Move a device buffer to another device (through the runtime, not Python)."""
    if buf_device(buf) == device:
        return buf
    return jax.device_put(buf, device)


def copy_buffer(buf: Any) -> Any:
    """A new buffer with ``buf``'s contents laid out as it is (never an alias of it)."""
    return jax.device_put(buf, buf.sharding, may_alias=False)


def buf_device(buf: Any) -> Any:
    return next(iter(buf.devices()))


def to_numpy(buf: Any) -> np.ndarray:
    """The host value of a device buffer (waits for it; zero-copy on the CPU)."""
    return np.asarray(buf)


def block_until_ready(buf: Any) -> None:
    buf.block_until_ready()


def block_until_ready_all(bufs: list) -> None:
    """Wait for several (live) buffers in one runtime call."""
    _xc.batched_block_until_ready(bufs)


def is_deleted(buf: Any) -> bool:
    return buf.is_deleted()


# ----------------------------------------------------------------------------
# Which platform a program is lowered for


_PLATFORM_OF: dict[str, str] = {"cpu": "cpu", "cuda": "cuda", "rocm": "rocm", "tpu": "tpu"}


def lowering_platform(device: Any) -> str:
    """The platform name the lowering rules key on for ``device``: ``cpu``, ``cuda``, ``rocm`` or ``tpu``.

    A PJRT GPU device reports its platform as ``gpu``; which vendor's libraries
    it runs (CUDA's cuSOLVER or ROCm's hipSOLVER) is the client's
    ``platform_version`` (``"cuda 12080"``, ``"rocm 60300"``).
    """
    plat = device.platform
    out = _PLATFORM_OF.get(plat)
    if out is None:
        version = str(getattr(device.client, "platform_version", "")).lower()
        out = "rocm" if ("rocm" in version or "hip" in version) else ("cuda" if plat == "gpu" else plat)
        _PLATFORM_OF[plat] = out
    return out


def canonical_platform(name: str) -> str | None:
    """``name`` as a lowering platform (``gpu`` becomes the GPU platform present); None if no GPU is."""
    name = name.lower()
    if name != "gpu":
        return name
    for plat in ("cuda", "rocm"):
        try:
            client = backend(plat)
        except Exception:  # that plugin is not installed
            continue
        return lowering_platform(client.devices()[0])
    try:
        client = backend("gpu")
    except Exception:
        return None
    return lowering_platform(client.devices()[0])


_gpu_solver_ready = False


def ensure_gpu_solver_targets() -> None:
    """Register the GPU linear-algebra custom-call targets (``cusolver_*``/``hipsolver_*``, ...) with XLA.

    jaxlib's GPU plugin provides them; jax registers them when its
    linear-algebra module is imported.  Without a GPU plugin (lowering for
    ``cuda`` on a CPU-only machine) there is nothing to register, and the
    module text is the same.
    """
    global _gpu_solver_ready
    if _gpu_solver_ready:
        return
    import jax._src.lax.linalg  # noqa: F401  (registers gpu_solver's and gpu_linalg's targets when present)

    _gpu_solver_ready = True


def init_gpu_hybrid_kernels() -> None:
    """Load the host LAPACK (or MAGMA) that the ``*hybrid_eig_*`` GPU kernels call; no-op without a GPU plugin."""
    from jax._src.lib import gpu_solver

    if gpu_solver is not None and hasattr(gpu_solver, "initialize_hybrid_kernels"):
        gpu_solver.initialize_hybrid_kernels()


def cusolver_version() -> int | None:
    """cuSOLVER's version number (``11701`` for 11.7.1) when jaxlib's CUDA plugin is loaded, else None."""
    try:
        from jax._src.lib import cuda_versions
    except ImportError:
        return None
    if cuda_versions is None:
        return None
    try:
        return int(cuda_versions.cusolver_get_version())
    except Exception:  # the plugin is there but no driver
        return None


def gpu_use_magma() -> str:
    """jax's ``gpu_use_magma`` setting (``"auto"``, ``"on"`` or ``"off"``), which the hybrid eig kernel takes."""
    try:
        return str(jax.config.jax_use_magma)
    except AttributeError:  # a jax release that spells it otherwise
        return "auto"


_lapack_ready = False


def ensure_lapack_targets() -> None:
    """Make the LAPACK custom-call targets jaxlib provides (``lapack_?getrf_ffi``, ...) callable.

    jaxlib registers them with XLA's CPU client when jax's linear-algebra
    module is imported, and binds them to SciPy's LAPACK on ``initialize``.
    The linear-algebra lowerings call this before emitting such a call.
    """
    global _lapack_ready
    if _lapack_ready:
        return
    import jax._src.lax.linalg  # noqa: F401  (registers the lapack_* targets with the CPU client)
    from jaxlib import lapack

    lapack._lapack.initialize()
    _lapack_ready = True


# ----------------------------------------------------------------------------
# Several replicas (pmap): one program, run by every device of an assignment


def compile_replicated(client: Any, module_text: str, devices: Sequence[Any], donated: Sequence[int] = (),
                       host_callbacks: Sequence[Any] = (), options: tuple = ()) -> Any:
    """Compile a module of ``len(devices)`` replicas (replica ``r`` runs on ``devices[r]``); ``options`` as
    for ``compile``."""
    opts = _xc.CompileOptions()
    _set_options(opts, options)
    build = opts.executable_build_options
    build.num_replicas = len(devices)
    build.num_partitions = 1
    build.device_assignment = _xc.DeviceAssignment.create(np.array([[d.id] for d in devices]))
    return _compile_and_load(client, module_text, devices, opts, host_callbacks)


def replica_mesh(devices: Sequence[Any], size: int, axis: str = "_internal_pmap_axis_name") -> Any:
    """The devices of a replicated program as a (size, rest) mesh: replica ``r`` sits at ``divmod(r, rest)``
    (a one-axis mesh when ``rest`` is 1).  ``axis`` names the mapped mesh axis: the pmap's axis name, as in
    JAX's pmap results (``P('i')`` for ``axis_name='i'``)."""
    from jax.sharding import Mesh

    rest = len(devices) // size
    if rest == 1:  # no nested pmap: a one-axis mesh, as JAX's pmap results carry
        return Mesh(np.array(devices, dtype=object), (axis,))
    return Mesh(np.array(devices, dtype=object).reshape(size, rest), (axis, "_rest" if axis == "rest" else "rest"))


def mapped_sharding(mesh: Any, axis: int | None, ndim: int) -> Any:
    """An array of rank ``ndim`` split along ``axis`` over the mesh's first axis (replicated for None)."""
    from jax.sharding import NamedSharding, PartitionSpec

    if axis is None:
        return NamedSharding(mesh, PartitionSpec())
    return NamedSharding(mesh, PartitionSpec(*([None] * axis), mesh.axis_names[0]))


def same_layout(a: Any, b: Any, ndim: int) -> bool:
    """Whether two runtime shardings place the same blocks on the same devices (names of mesh axes aside)."""
    try:
        return bool(a.is_equivalent_to(b, ndim))
    except Exception:  # noqa: BLE001 - shardings the runtime cannot compare are not the same layout
        return False


def put_sharded(value: np.ndarray, sharding: Any, axis: int | None, devices: Sequence[Any], size: int) -> Any:
    """Place ``value`` on ``devices`` as ``sharding`` says: each replica gets its block along ``axis``."""
    rest = len(devices) // size
    if axis is None:
        pieces = [value] * len(devices)
    else:
        idx = [slice(None)] * value.ndim
        pieces = []
        for r in range(len(devices)):
            i = r // rest
            idx[axis] = slice(i, i + 1)
            pieces.append(np.ascontiguousarray(value[tuple(idx)]))
    return put_pieces(pieces, value.shape, sharding, devices)


def put_pieces(pieces: Sequence[np.ndarray], shape: tuple, sharding: Any, devices: Sequence[Any]) -> Any:
    """One multi-device buffer of ``shape`` from one (canonically typed) NumPy block per device."""
    aval = _jax_aval(tuple(shape), pieces[0].dtype)
    try:
        return _xc.batched_device_put(aval, sharding, list(pieces), list(devices), True, enable_x64=True)
    except TypeError:  # a jaxlib whose batched_device_put has no enable_x64 keyword
        return _xc.batched_device_put(aval, sharding, list(pieces), list(devices), True)


def assemble(shape: tuple, sharding: Any, bufs: Sequence[Any]) -> Any:
    """One multi-device buffer from single-device buffers (one per device of ``sharding``)."""
    return jax.make_array_from_single_device_arrays(shape, sharding, list(bufs))


def execute_replicated_fn(executable: Any, out_avals: Sequence[Any], out_shardings: Sequence[Any],
                          sync: bool = False, replicas: bool = False):
    """``buffers -> outputs`` for a replicated or partitioned program: each output one multi-device buffer.
    ``sync`` (a program that calls back into Python): each call waits until every device has finished
    the program, and so every callback it made, as ``execute_fn_sync`` does for one device.
    ``replicas``: a program of several replicas (pmap's), whose results are assembled from their
    per-device pieces on a jaxlib that copies a whole multi-device array to the host in one go (0.12):
    there the result handlers' arrays over a replicated program's outputs cannot be read back."""
    run = executable.execute_sharded
    if replicas and _whole_array_host_copy():
        shapes = [tuple(a.shape) for a in out_avals]

        def assemble_all(results: Any) -> list:
            return [jax.make_array_from_single_device_arrays(s, sh, pieces)
                    for s, sh, pieces in zip(shapes, out_shardings, results.disassemble_into_single_device_arrays())]

        if not sync:
            return lambda buffers: assemble_all(run(buffers))

        def waiting(buffers: list) -> list:  # (as ``_waiting_call``)
            results = run(buffers, with_tokens=True)
            token = results.consume_token()
            outs = assemble_all(results)
            token.block_until_ready()
            for o in outs:
                o.block_until_ready()
            return outs

        return waiting
    handlers = [array_result_handler(_jax_aval(tuple(a.shape), np.dtype(a.dtype)), s)
                for a, s in zip(out_avals, out_shardings)]

    def call(buffers: list) -> list:
        return run(buffers).consume_with_handlers(handlers)

    return _waiting_call(run, handlers) if sync else call


@functools.cache
def _whole_array_host_copy() -> bool:
    """Whether this jaxlib reads a multi-device array back to the host in one runtime call (jaxlib 0.12's
    IFRT path) rather than shard by shard."""
    try:
        from jax._src.lib import ifrt_version, jaxlib_extension_version
    except ImportError:
        return False
    return jaxlib_extension_version >= 495 and ifrt_version >= 71


def shards_of(buf: Any) -> list:
    """``(device, index, single-device buffer)`` for each addressable shard of a buffer."""
    return [(s.device, s.index, s.data) for s in buf.addressable_shards]


def sharding_of(buf: Any) -> Any:
    return buf.sharding


# DLPack device types (the DLDeviceType enum) the PJRT clients can import from.
_DL_PLATFORMS = {1: "cpu", 2: "cuda", 3: "cuda", 10: "rocm"}  # kDLCPU, kDLCUDA, kDLCUDAHost, kDLROCM


def dlpack_device(dl_device: tuple) -> Any:
    """The PJRT device a DLPack ``__dlpack_device__()`` pair names, or None for an unsupported kind."""
    dl_type, dev_id = int(dl_device[0]), int(dl_device[1])
    platform = _DL_PLATFORMS.get(dl_type)
    if platform is None:
        return None
    try:
        return backend(platform).device_from_local_hardware_id(dev_id)
    except RuntimeError:  # no such backend on this machine
        return None


def buffer_from_dlpack(external: Any, device: Any, copy: bool | None) -> Any:
    """A device buffer over a DLPack producer's tensor on ``device`` (PJRT imports it without a copy
    when the memory is aligned and ``copy`` is not True)."""
    from jax._src.lib import _jax, jaxlib_extension_version

    dl_type = int(external.__dlpack_device__()[0])
    stream = None
    if dl_type == 2:  # a CUDA producer makes its work visible on the stream we name
        try:
            stream = device.get_stream_for_external_ready_events()
        except Exception as e:  # noqa: BLE001  (XLA's error type varies by release)
            if "UNIMPLEMENTED" not in str(e):
                raise
    capsule = external.__dlpack__(stream=stream)
    try:
        if jaxlib_extension_version >= 467:
            return _jax.dlpack_managed_tensor_to_buffer(capsule, device, stream, copy, dl_type)
        return _jax.dlpack_managed_tensor_to_buffer(capsule, device, stream, copy)
    except Exception as e:  # noqa: BLE001  (XLA's error type varies by release)
        text = str(e)
        if copy and "HostBufferSemantics" in text and text.startswith("UNIMPLEMENTED"):
            # A PJRT C API plugin (the GPU's) cannot import with a copy: import the tensor in place (a
            # fresh capsule; the refused one was consumed) and copy it on the device.
            return copy_buffer(buffer_from_dlpack(external, device, None))
        if "is not aligned to" not in text:
            raise
        from ftrans.errors import FtransValueError

        # Only a copy can import a buffer whose data the device cannot alias in place.
        raise FtransValueError(
            "from_dlpack: Specified copy=False for an input which requires a copy: the source data buffer "
            f"{text[text.index('is not aligned to'):]} Pass copy=True or copy=None to copy it") from None


# ----------------------------------------------------------------------------
# One SPMD program partitioned over a mesh (sharded jit)


def compile_spmd(client: Any, module_text: str, devices: Sequence[Any], options: tuple = (),
                 host_callbacks: Sequence[Any] = ()) -> Any:
    """Compile a module of ``len(devices)`` partitions whose sharding annotations are Shardy's
    (``sdy.mesh`` / ``sdy.sharding``): XLA's partitioner splits the program; partition ``i`` runs on
    ``devices[i]``."""
    opts = _compile_options(devices)
    build = opts.executable_build_options
    build.use_spmd_partitioning = True
    build.use_shardy_partitioner = True
    if options:
        _set_options(opts, options)
    return _compile_and_load(client, module_text, devices, opts, host_callbacks)


def runtime_sharding(sharding: Any, ndim: int) -> Any:
    """The runtime's sharding object for an ftrans NamedSharding / SingleDeviceSharding."""
    from jax.sharding import AxisType, Mesh, NamedSharding, PartitionSpec

    if not hasattr(sharding, "mesh"):
        return _sharding(next(iter(sharding.device_set)))
    mesh = sharding.mesh
    rt = mesh._runtime
    if rt is None:
        # The twin carries the mesh's axis types: the runtime interns meshes, so an Auto twin of an Explicit
        # mesh would be the very object a user's Auto mesh over the same devices is, and results on one
        # would be reported on the other.
        types = tuple(AxisType.Explicit if getattr(t, "name", "") == "Explicit" else AxisType.Auto
                      for t in (getattr(mesh, "axis_types", None) or ()))
        rt = mesh._runtime = Mesh(mesh.devices, mesh.axis_names,
                                  axis_types=types or (AxisType.Auto,) * len(mesh.axis_names))
        from ftrans.core.sharding import remember_mesh

        remember_mesh(mesh)
    spec = tuple(None if type(e).__name__ == "_Unconstrained" else e for e in sharding.spec)[:ndim]
    ur = (sharding.spec.unreduced, sharding.spec.reduced)
    if ur[0] or ur[1]:  # JAX's unreduced/reduced axes: part of the runtime's layout (and of the cache key)
        spec = (*spec, ur)
    # One object per layout: buffers placed or computed on it carry this very object, so a sharded call can
    # check an argument's layout by identity before comparing.
    cache = mesh._runtime_shardings
    out = cache.get(spec)
    if out is None:
        # Equal ftrans meshes share the runtime's (interned) mesh: they share its layout objects too, so an
        # array placed through one mesh is on the very object a program compiled through the other takes.
        out = _runtime_layouts.get((rt, spec))
        if out is None:
            out = NamedSharding(rt, PartitionSpec(*spec[:-1], unreduced=ur[0], reduced=ur[1]) if ur[0] or ur[1]
                                else PartitionSpec(*spec))
            if len(_runtime_layouts) < 4096:
                _runtime_layouts[(rt, spec)] = out
        if len(cache) < 1024:
            cache[spec] = out
    return out


_runtime_layouts: dict = {}  # (runtime mesh, spec) -> the runtime's sharding: one object per layout


def _install_runtime_of() -> None:
    from ftrans.core import sharding as _core_sharding

    _core_sharding.runtime_of = runtime_sharding


_install_runtime_of()


def put_global(value: np.ndarray, sharding: Any) -> Any:
    """Place ``value`` (a whole, canonically typed array) on a runtime sharding: each device its block."""
    idx = sharding.addressable_devices_indices_map(value.shape)
    devs = list(idx)
    pieces = [np.array(value[idx[d]], order="C") for d in devs]  # keeps rank 0 (ascontiguousarray would not)
    return put_pieces(pieces, value.shape, sharding, devs)


def reshard_buffer(buf: Any, sharding: Any) -> Any:
    """A multi-device buffer moved to another runtime sharding (through the runtime)."""
    return jax.device_put(buf, sharding)


def _layout_triple(pjrt_layout: Any) -> tuple:
    xla = pjrt_layout._xla_layout()
    return (tuple(xla.minor_to_major())[::-1], tuple(tuple(t) for t in xla.tiling()), int(xla.element_size_in_bits()))


def executable_layouts(executable: Any) -> tuple[list, list]:
    """The layouts XLA compiled a program's arguments and results for: ``(major_to_minor, tiling, element size
    in bits)`` each."""
    return ([_layout_triple(lay) for lay in executable.get_parameter_layouts()],
            [_layout_triple(lay) for lay in executable.get_output_layouts()])


def buffer_layout(buf: Any) -> tuple:
    """A device buffer's layout, as ``executable_layouts`` gives them."""
    lay = buf.format.layout
    return (tuple(lay.major_to_minor), tuple(tuple(t) for t in (lay.tiling or ())),
            int(lay.sub_byte_element_size_in_bits))


def output_hlo_shardings(executable: Any, n_out: int) -> list:
    """The HLO shardings XLA chose for a partitioned program's results (a program on one device reports
    none: each result is then whole, replicated)."""
    shardings = executable.get_output_shardings()
    if shardings is None:
        return [_xc.HloSharding.replicate()] * n_out
    return [_xc.HloSharding.from_proto(s) for s in shardings]


def op_sharding_from_serialized(data: bytes) -> Any:
    """XLA's ``OpSharding`` proto parsed from its serialized bytes."""
    proto = _xc.OpSharding()
    proto.ParseFromString(data)
    return proto


def hlo_sharding_from_serialized(data: bytes) -> Any:
    """XLA's ``HloSharding`` of a serialized ``OpSharding`` proto."""
    return _xc.HloSharding.from_proto(op_sharding_from_serialized(data))


def serialized_hlo_sharding(sharding: Any) -> bytes:
    """The serialized ``OpSharding`` proto of an XLA ``HloSharding``."""
    return sharding.to_proto().SerializeToString()


def hlo_sharding_of(sharding: Any, ndim: int) -> Any:
    """The HLO sharding of a runtime sharding for an array of rank ``ndim``."""
    return sharding._to_xla_hlo_sharding(ndim)


def spec_matching(hlo: Any, mesh: Any, ndim: int) -> Any:
    """A PartitionSpec (as a tuple) over ``mesh`` whose layout is ``hlo``, or None if none is found.

    Tries every assignment of distinct mesh axes (size > 1) to dimensions, replicated first.
    """
    import itertools

    from jax.sharding import NamedSharding, PartitionSpec

    rt = mesh._runtime
    if hlo.is_replicated():
        return ()
    axes = [a for a, s in zip(mesh.axis_names, mesh.devices.shape) if s > 1]
    choices: list = [None]
    for r in range(1, len(axes) + 1):
        for perm in itertools.permutations(axes, r):
            choices.append(perm[0] if r == 1 else perm)
    for spec in itertools.product(choices, repeat=ndim):
        used = [a for e in spec if e is not None for a in ((e,) if isinstance(e, str) else e)]
        if len(used) != len(set(used)):
            continue
        cand = NamedSharding(rt, PartitionSpec(*spec))._to_xla_hlo_sharding(ndim)
        if cand == hlo:
            return spec
    return None


def gspmd_sharding(devices: Sequence[Any], hlo: Any) -> Any:
    """A runtime sharding for an HLO sharding no mesh spec describes."""
    from jax._src.sharding_impls import GSPMDSharding

    return GSPMDSharding(tuple(devices), hlo)


# ----------------------------------------------------------------------------
# Several processes: jax's PJRT distributed runtime (coordination service)


def backend_started() -> bool:
    """Whether the runtime's backends exist already (processes must be joined before)."""
    from jax._src import xla_bridge

    return bool(getattr(xla_bridge, "_backends", None))


def distributed_initialize(coordinator_address: str, num_processes: int, process_id: int,
                           local_device_ids: Any, timeout_s: int) -> None:
    """Join the coordination service (process 0 runs it); CPU collectives between processes use gloo."""
    try:
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
    except Exception:  # a jaxlib without the option: CPU programs stay within a process
        pass
    jax.distributed.initialize(coordinator_address=coordinator_address, num_processes=num_processes,
                               process_id=process_id, local_device_ids=local_device_ids,
                               initialization_timeout=int(timeout_s))


def distributed_shutdown() -> None:
    jax.distributed.shutdown()


def distributed_is_initialized() -> bool:
    from jax._src import distributed

    return distributed.global_state.client is not None


# ----------------------------------------------------------------------------
# Foreign-function (typed FFI) targets: XLA's custom-call registry that jaxlib ships


def register_custom_call_target(name: str, fn: Any, platform: str, api_version: int, **kwargs: Any) -> None:
    """Register a native custom-call target (a PyCapsule, or a dict of them per FFI stage) with XLA."""
    return _xc.register_custom_call_target(name, fn, platform, api_version, **kwargs)


def register_custom_type(name: str, type_registration: Any, platform: str) -> None:
    """Register a custom type that typed-FFI targets take (``type_id``, optional ``type_info``)."""
    return _xc.register_custom_type(name, type_registration, platform=platform)


def register_custom_call_as_batch_partitionable(name: str) -> None:
    """Tell XLA's partitioner that the target's leading axes are batch axes it may split."""
    _xc.register_custom_call_as_batch_partitionable(name)


def ffi_include_dir() -> str:
    """The directory of the XLA FFI headers bundled with jaxlib (``xla/ffi/api/ffi.h``, ...)."""
    import os

    import jaxlib

    base = jaxlib.__file__
    root = os.path.dirname(os.path.abspath(base)) if base is not None else list(jaxlib.__path__)[0]
    return os.path.join(root, "include")


def pytree_node_registered(nodetype: type) -> bool:
    """Whether ``nodetype`` was registered as a pytree node with ``tree_util.register_pytree_node``."""
    from jax._src import tree_util as _tu

    return nodetype in _tu._registry
def jax_test_harness() -> Any:
    """JAX's own test harness module (its ``JaxTestCase``, random-value makers and tolerances).

    Only ``ftrans.experimental.sparse.test_util`` uses it: that module mirrors JAX's sparse test
    utilities, whose test-case class extends JAX's, so that JAX's sparse test files run unchanged
    against ftrans with the oracle's assertions.  Importing it pulls in absl and JAX's test config.
    """
    from jax._src import test_util as jtu
    return jtu


def buffer_callback_types() -> tuple[type, type]:
    """jaxlib's ``Buffer`` (what a buffer callback's arguments are: array-likes over the running program's
    device buffers, with ``__array__``/``__dlpack__`` on the CPU and ``__cuda_array_interface__`` on a GPU)
    and ``ExecutionStage`` (the enum ``ExecutionContext.stage`` gives)."""
    from jax._src.lib import ffi as _ffi_lib

    return _ffi_lib.Buffer, _ffi_lib.ExecutionStage

# --- HLO passes registered with XLA's compiler (``jax.extend.xla`` / ``ftrans.extend.xla``) -------------------
# jaxlib keeps them in its own registry, which it does not let anyone read. ftrans's executable caches must
# know them (a program compiled under a pass is another program), so the registry's entry points are wrapped
# here, once, and every registration and clearing, by JAX's API or ftrans's, is mirrored in
# ``_hlo_passes``: platform -> the registrations in their order (a stage's queue runs in that order).


class HloPass:
    """One registration of an HLO pass; compared by identity, so a key holding it cannot match another."""

    __slots__ = ("name", "stage", "callback", "__weakref__")

    def __init__(self, name: str, stage: int, callback: Any):
        self.name, self.stage, self.callback = name, stage, callback

    def __repr__(self) -> str:
        return f"HloPass({self.name!r}, stage={self.stage})"


_hlo_passes: dict[str, tuple[HloPass, ...]] = {}


def hlo_passes(platform: str | None = None) -> tuple:
    """The HLO passes XLA runs when it compiles for ``platform`` (every platform's when None), in
    registration order; ``()`` when there are none (the usual case: a dict lookup)."""
    if not _hlo_passes:
        return ()
    if platform is None:
        return tuple(p for ps in _hlo_passes.values() for p in ps)
    if platform == "cpu":
        return _hlo_passes.get("cpu", ())
    # jax >= 0.11 registers on a plugin by its PJRT C API handle, which does not name its platform ("*")
    return _hlo_passes.get(platform, ()) + _hlo_passes.get("*", ())


def _pass_registered(platform: str, name: str, stage: int, callback: Any) -> None:
    _hlo_passes[platform] = _hlo_passes.get(platform, ()) + (HloPass(str(name), int(stage), callback),)


def _pass_cleared(platform: str, name: str, stage: int) -> None:
    # XLA removes the first registration of that name at that stage
    ps = list(_hlo_passes.get(platform, ()))
    for i, p in enumerate(ps):
        if p.name == name and p.stage == stage:
            del ps[i]
            break
    if ps:
        _hlo_passes[platform] = tuple(ps)
    else:
        _hlo_passes.pop(platform, None)


def _plugin_platform(client: Any) -> str:
    """The platform a C API registration is for: the client's (jax 0.10), or "*" for a bare plugin handle."""
    platform = getattr(client, "platform", None)
    return platform if isinstance(platform, str) else "*"


def _is_plugin(client: Any) -> bool:
    """Whether ``client`` is a PJRT C API plugin's (where passes are registered through the C API); jax 0.11
    passes the plugin's handle itself."""
    if not hasattr(client, "platform") or hasattr(client, "pjrt_c_api_major_version"):
        return True
    try:
        return "PJRT C API" in str(client.platform_version)
    except Exception:  # a client that cannot say  # noqa: BLE001
        return True


def _track_hlo_passes() -> None:
    try:
        from jax._src.lib import _xla
    except ImportError:  # pragma: no cover - a jaxlib without the extension module
        return
    if _xla is None or not hasattr(_xla, "register_xla_transform"):
        return
    reg, clear = _xla.register_xla_transform, _xla.clear_xla_transform
    reg_c, clear_c = getattr(_xla, "register_xla_transform_c_api", None), getattr(_xla, "clear_xla_transform_c_api",
                                                                                  None)

    @functools.wraps(reg)
    def register_xla_transform(name: Any, stage: Any, callback: Any) -> Any:
        out = reg(name, stage, callback)
        _pass_registered("cpu", name, stage, callback)  # the in-process (CPU) compiler's registry
        return out

    @functools.wraps(clear)
    def clear_xla_transform(name: Any, stage: Any) -> Any:
        out = clear(name, stage)
        if out:
            _pass_cleared("cpu", name, stage)
        return out

    _xla.register_xla_transform, _xla.clear_xla_transform = register_xla_transform, clear_xla_transform
    if reg_c is not None and clear_c is not None:
        @functools.wraps(reg_c)
        def register_xla_transform_c_api(client: Any, name: Any, stage: Any, callback: Any) -> Any:
            out = reg_c(client, name, stage, callback)
            # JAX registers on every client, the in-process CPU one too, where the call is accepted and does
            # nothing (the CPU compiler's passes are the in-process registry's): only a plugin's counts
            if _is_plugin(client):
                _pass_registered(_plugin_platform(client), name, stage, callback)
            return out

        @functools.wraps(clear_c)
        def clear_xla_transform_c_api(client: Any, name: Any, stage: Any) -> Any:
            out = clear_c(client, name, stage)
            if out:
                _pass_cleared(_plugin_platform(client), name, stage)
            return out

        _xla.register_xla_transform_c_api = register_xla_transform_c_api
        _xla.clear_xla_transform_c_api = clear_xla_transform_c_api


_track_hlo_passes()


def hlo_pass_api() -> Any:
    """JAX's ``jax.extend.xla`` (registering HLO passes with XLA's compiler), or None where this jax lacks it."""
    try:
        import jax.extend.xla as _jex_xla
    except ImportError:  # pragma: no cover - jax < 0.10.2
        return None
    return _jex_xla


def inspect_sharding_key(callback: Any) -> bytes:
    """The ``backend_config`` of an ``InspectSharding`` custom call: XLA's partitioner calls ``callback`` with the
    operand's ``HloSharding`` (jaxlib's partitioner for that target). The bytes name ``callback`` without holding
    it: the caller keeps it alive while the module may be compiled."""
    return _xc.encode_inspect_sharding_callback(callback)


def replicated_hlo_sharding() -> Any:
    """The ``HloSharding`` of a value every device holds whole."""
    return _xc.HloSharding.replicate()
