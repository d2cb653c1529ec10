"""Where a jitted call's time goes: ftrans's dispatch cost broken into its parts.

    python benchmarks/profile_dispatch.py            # about twenty seconds
    python benchmarks/profile_dispatch.py --quick    # fewer repeats, noisier

A guide for optimising ``JitWrapped.__call__`` (ftrans/transforms/jit.py), not
a pass/fail benchmark.  It times, for ``jit(lambda a: a + a)`` on a float32
scalar already on the device:

* the floor: an empty Python call, and jax's own jitted call (the reference);
* each step of ftrans's fast path run by hand on the same objects: building the
  cache key from the arguments' signatures, the dictionary lookup, collecting
  the buffers, the raw PJRT call (``execute_sharded``) with each way of taking
  its results apart (``disassemble_into_single_device_arrays`` -- the generic
  path -- and ``consume_with_handlers`` -- the path ftrans uses), and wrapping
  the output buffer in a ``DeviceArray``;
* the whole call, and the remainder the parts do not explain (attribute
  lookups, the try/except, the hit counter, the trace-state check).

A second table does the same for a pytree argument (``f([a, b])``), which
takes the general (slow) path: flattening, abstract values, the key, the
device check, buffers, the call, wrapping and unflattening.

A third table (8 host devices, which the script asks XLA for) times ftrans's
own per-call work for sharded calls -- ``x * 2`` on 8 shards and the training
step of ``examples/sharded_transformer.py`` (20 sharded arguments, 19 results)
-- with the runtime call replaced by a stub that hands back the buffers of a
real earlier call, so no program runs and only Python is timed: the whole
call, and the pieces of the registered sharded path (flatten, signatures, key
lookup, the runner: collect buffers, wrap results, unflatten).

Times are the median over several runs of the best of a few ``timeit``
repeats, in microseconds per call.  The parts are timed in isolation; the
program itself runs on an XLA worker thread, so on a machine with few, busy
cores the whole call can cost more than its parts (the "unexplained" line):
compare it with the same script on an idle machine before chasing it.  The parts read ftrans's private objects, so
the script must follow the code when the code changes.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import timeit
from collections.abc import Callable

os.environ.setdefault("JAX_PLATFORMS", "cpu")
if "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):  # the sharded table
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8").strip()
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402
import numpy as np  # noqa: E402
from jax import tree_util  # noqa: E402

import ftrans  # noqa: E402
from ftrans.core import trace as _trace  # noqa: E402
from ftrans.core.array import Array, DeviceArray, device_array  # noqa: E402
from ftrans.lowering import executable as X  # noqa: E402
from ftrans.transforms import jit as _jit_mod  # noqa: E402


def per_call_us(fn: Callable[[], object], number: int, repeat: int, runs: int) -> float:
    """Median over ``runs`` of the best of ``repeat`` timings of ``number`` calls, in us per call."""
    for _ in range(50):
        fn()
    timer = timeit.Timer(fn)
    return statistics.median(min(timer.repeat(repeat=repeat, number=number)) / number
                             for _ in range(runs)) * 1e6


def fast_entry(f: _jit_mod.JitWrapped, args: tuple) -> _jit_mod._Entry:
    """The cache entry the fast path finds for ``args`` (fails loudly if the fast path is not taken)."""
    key = tuple([a._sig for a in args])
    try:
        return f._fast[key]
    except KeyError:
        raise SystemExit("the call did not register a fast-path entry: the fast path is not being taken") from None


def report(title: str, rows: list[tuple[str, float]], whole: float, parts: list[str]) -> None:
    """Print the rows, then how much of ``whole`` the rows named in ``parts`` explain."""
    print(f"\n{title}")
    for name, us in rows:
        share = f"{100 * us / whole:5.0f}%" if name in parts else ""
        print(f"  {name:<58}{us:8.2f} us {share}")
    explained = sum(us for name, us in rows if name in parts)
    print(f"  {'sum of the parts marked with %':<58}{explained:8.2f} us {100 * explained / whole:5.0f}%")
    print(f"  {'unexplained (interpreter overhead between the parts)':<58}{whole - explained:8.2f} us")


def profile_fast_path(number: int, repeat: int, runs: int) -> None:
    x = ftrans.device_put(np.float32(1.5))
    xj = jax.device_put(np.float32(1.5))
    f = ftrans.jit(lambda a: a + a)
    g = jax.jit(lambda a: a + a)
    f(x)
    f(x)
    g(xj)
    args = (x,)
    entry = fast_entry(f, args)
    if not (entry.single and not entry.exe.const_bufs):
        raise SystemExit("expected the single-output, no-constant fast path")
    from ftrans.lowering import compat

    execute = entry.exe.xla.execute_sharded
    handlers = compat.result_handlers(entry.exe.out_avals, entry.exe.device)
    bufs = [x._buf]
    out_buf = execute(bufs).consume_with_handlers(handlers)[0]
    aval0, sig0 = entry.aval0, entry.sig0
    fast = f._fast
    new = object.__new__

    def wrap_inline() -> DeviceArray:
        out = new(DeviceArray)
        out._buf = out_buf
        out._aval = aval0
        out._sig = sig0
        out.weak_type = aval0.weak_type
        return out

    def noop(a: object) -> None:
        return None

    t = lambda fn: per_call_us(fn, number, repeat, runs)  # noqa: E731
    whole = t(lambda: f(x))
    rows = [
        ("floor: empty Python call noop(x)", t(lambda: noop(x))),
        ("jax: g(x)", t(lambda: g(xj))),
        ("jax: g(x).block_until_ready()", t(lambda: g(xj).block_until_ready())),
        ("key: tuple([a._sig for a in args])", t(lambda: tuple([a._sig for a in args]))),
        ("lookup: fast[key] (key prebuilt)", t(lambda: fast[(x._sig,)])),
        ("trace-state check: _trace.active_anywhere", t(lambda: _trace.active_anywhere)),
        ("buffers: [a._buf for a in args]", t(lambda: [a._buf for a in args])),
        ("raw: execute_sharded(bufs)", t(lambda: execute(bufs))),
        ("raw: execute_sharded + disassemble_into_single_device_arrays",
         t(lambda: execute(bufs).disassemble_into_single_device_arrays())),
        ("raw: execute_sharded + consume_with_handlers", t(lambda: execute(bufs).consume_with_handlers(handlers))),
        ("wrap: inline DeviceArray build (the fast path's)", t(wrap_inline)),
        ("wrap: executable.device_array(buf, aval, sig)", t(lambda: device_array(out_buf, aval0, sig0))),
        ("full: f(x)", whole),
        ("full: f(x).block_until_ready()", t(lambda: f(x).block_until_ready())),
        ("full: ftrans.block_until_ready(f(x)) (pytree walk)", t(lambda: ftrans.block_until_ready(f(x)))),
    ]
    parts = ["key: tuple([a._sig for a in args])", "lookup: fast[key] (key prebuilt)",
             "trace-state check: _trace.active_anywhere", "buffers: [a._buf for a in args]",
             "raw: execute_sharded + consume_with_handlers", "wrap: inline DeviceArray build (the fast path's)"]
    report("fast path: jit(lambda a: a + a)(x), x a float32 scalar on the device (us per call)", rows, whole, parts)


def profile_slow_path(number: int, repeat: int, runs: int) -> None:
    x = ftrans.device_put(np.float32(1.5))
    y = ftrans.device_put(np.float32(2.5))
    xj, yj = jax.device_put(np.float32(1.5)), jax.device_put(np.float32(2.5))
    f = ftrans.jit(lambda p: p[0] + p[1])
    g = jax.jit(lambda p: p[0] + p[1])
    f([x, y])
    g([xj, yj])
    args, kwargs = ([x, y],), {}
    leaves, in_tree = tree_util.tree_flatten((args, kwargs))
    avals = [_jit_mod._leaf_aval(v) for v in leaves]
    device = f._target_device(leaves)
    key = (in_tree, tuple((a.shape, a.dtype, a.weak_type) for a in avals), (), device.id, False,
           ftrans.config.scoped_here())
    entry = f._cache.get(key)
    if entry is None:
        raise SystemExit("the slow-path cache key changed shape: update profile_slow_path to follow jit.py")
    exe = entry.exe
    bufs = [X.to_buffer(v, device) for v in leaves]
    config = ftrans.config

    t = lambda fn: per_call_us(fn, number, repeat, runs)  # noqa: E731
    whole = t(lambda: f([x, y]))
    rows = [
        ("jax: g([x, y])", t(lambda: g([xj, yj]))),
        ("fast-path attempt: tuple([a._sig for a in args]) raises", t(lambda: _try_sig(args))),
        ("statics: _split(args, kwargs)", t(lambda: f._split(args, kwargs))),
        ("flatten: tree_flatten((args, kwargs))", t(lambda: tree_util.tree_flatten((args, kwargs)))),
        ("avals: _leaf_aval per leaf", t(lambda: [_jit_mod._leaf_aval(v) for v in leaves])),
        ("device: _target_device(leaves)", t(lambda: f._target_device(leaves))),
        ("key: build the tuple", t(lambda: (in_tree, tuple((a.shape, a.dtype, a.weak_type) for a in avals), (),
                                            device.id, config.enable_x64))),
        ("lookup: _cache.get + move_to_end under the lock", t(lambda: _locked_get(f, key))),
        ("buffers: to_buffer per leaf", t(lambda: [X.to_buffer(v, device) for v in leaves])),
        ("run: exe.run(bufs)", t(lambda: exe.run(bufs))),
        ("run + wrap: exe.wrap(exe.run(bufs))", t(lambda: exe.wrap(exe.run(bufs)))),
        ("fast-path registration check: all(type(a) is ...)",
         t(lambda: all(type(a) is DeviceArray or type(a) is Array for a in args))),
        ("full: f([x, y])", whole),
    ]
    parts = ["fast-path attempt: tuple([a._sig for a in args]) raises", "statics: _split(args, kwargs)",
             "fast-path registration check: all(type(a) is ...)", "flatten: tree_flatten((args, kwargs))",
             "avals: _leaf_aval per leaf", "device: _target_device(leaves)", "key: build the tuple",
             "lookup: _cache.get + move_to_end under the lock", "buffers: to_buffer per leaf",
             "run + wrap: exe.wrap(exe.run(bufs))"]
    report("slow path: jit(lambda p: p[0] + p[1])([x, y]), a pytree argument (us per call)", rows, whole, parts)


def _stub_runtime(f: _jit_mod.JitWrapped, args: tuple) -> None:
    """After a real call: ``f``'s sharded program hands back that call's buffers instead of running."""
    ftrans.block_until_ready(f(*args))
    (exe, _, _), = f._spmd_cache.values()
    bufs = exe._run(exe.buffers(tree_util.tree_leaves(args)))
    jax.block_until_ready(bufs)
    exe._run = lambda _bufs: list(bufs)
    f._spmd_fast.clear()  # the registered runner holds the real call: register again, with the stub
    f(*args)
    if not f._spmd_fast:
        raise SystemExit("the sharded call registered no runner: update profile_sharded to follow sharded_jit.py")


def profile_sharded(number: int, repeat: int, runs: int) -> None:
    if len(ftrans.devices()) < 8:
        print("\nsharded: skipped (needs 8 devices: XLA_FLAGS=--xla_force_host_platform_device_count=8)")
        return
    from benchmarks import sharding as bench

    mesh = ftrans.make_mesh((2, 4), ("data", "model"), axis_types=(bench.fshard.AxisType.Auto,) * 2)
    x = ftrans.device_put(np.ones((8, 128), np.float32),
                          bench.fshard.NamedSharding(mesh, bench.fshard.PartitionSpec("data", "model")))
    f = ftrans.jit(lambda v: v * 2.0)
    _stub_runtime(f, (x,))
    layout, targs = bench.transformer_args(bench.FT)
    step = bench.transformer_jit(bench.FT, layout)
    _stub_runtime(step, targs)
    leaves, in_tree = tree_util.tree_flatten((targs, {}))
    key = (in_tree, tuple([getattr(v, "_sig", None) for v in leaves]), ())
    runner = step._spmd_fast[key]
    t = lambda fn: per_call_us(fn, number, repeat, runs)  # noqa: E731
    whole = t(lambda: step(*targs))
    rows = [
        ("x * 2 on 8 shards: f(x)", t(lambda: f(x))),
        ("flatten: tree_flatten((args, kwargs))", t(lambda: tree_util.tree_flatten((targs, {})))),
        ("signatures: getattr(leaf, '_sig') per leaf", t(lambda: tuple([getattr(v, "_sig", None) for v in leaves]))),
        ("lookup: _spmd_fast[key] (key prebuilt)", t(lambda: step._spmd_fast.get(key))),
        ("runner: buffers, run (stubbed), wrap 19 results, unflatten", t(lambda: runner(leaves))),
        ("full: step(*args)", whole),
    ]
    parts = ["flatten: tree_flatten((args, kwargs))", "signatures: getattr(leaf, '_sig') per leaf",
             "lookup: _spmd_fast[key] (key prebuilt)", "runner: buffers, run (stubbed), wrap 19 results, unflatten"]
    report("sharded (runtime stubbed): the transformer step, 20 sharded arguments, 19 results (us per call)",
           rows, whole, parts)


def _try_sig(args: tuple) -> None:
    try:
        tuple([a._sig for a in args])
    except AttributeError:
        pass


def _locked_get(f: _jit_mod.JitWrapped, key: tuple) -> object:
    with f._lock:
        e = f._cache.get(key)
        if e is not None:
            f._cache.move_to_end(key)
    return e


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer repeats (a smoke test, noisier)")
    args = ap.parse_args(argv)
    number, repeat, runs = (500, 3, 3) if args.quick else (5000, 5, 5)
    print(f"jax {jax.__version__}, ftrans {ftrans.__version__}, device {ftrans.devices()[0]}, "
          f"{os.cpu_count()} cpus")
    profile_fast_path(number, repeat, runs)
    profile_slow_path(number, repeat, runs)
    profile_sharded(number // 5, repeat, runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
