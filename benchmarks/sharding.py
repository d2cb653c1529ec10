"""Sharded ``jit``: a data x model parallel MLP step and a tiny sharded call, ftrans next to jax in one process.

    python benchmarks/sharding.py            # about half a minute
    python benchmarks/sharding.py --quick    # fewer repeats: a smoke test, noisier figures

On a CPU the host is split into 8 XLA devices, a (data=2, model=4) mesh.

(a) step: ``value_and_grad`` of a 256-1024-256 MLP's squared error plus an SGD
    update, compiled once with ``in_shardings``/``out_shardings`` (the batch of
    256 over ``data``; the first matrix split by columns and the second by rows
    over ``model``), steady state with ``block_until_ready`` (median, ms);
(b) dispatch: ``x * 2.0`` on a (8, 128) array split over both axes, fed its own
    previous result (median, us per call);
(c) first result: a fresh sharded ``jit`` of the step, traced, partitioned,
    compiled and run once, both libraries' in-memory caches cleared (median, ms).
The two libraries' results are checked to agree first.  Printed, never enforced.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")
if "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8").strip()
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import AxisType as JAxisType  # noqa: E402
from jax.sharding import NamedSharding as JNS  # noqa: E402
from jax.sharding import PartitionSpec as JP  # noqa: E402

import ftrans  # noqa: E402
from ftrans.sharding import AxisType, NamedSharding, P  # noqa: E402


def setup(lib, NS, Pc, mesh):
    def loss(p, x, y):
        h = lib.numpy.tanh(x @ p["w1"])
        return ((h @ p["w2"] - y) ** 2).mean()

    def step(p, x, y):
        v, g = lib.value_and_grad(loss)(p, x, y)
        return {k: p[k] - 0.01 * g[k] for k in p}, v

    ps = {"w1": NS(mesh, Pc(None, "model")), "w2": NS(mesh, Pc("model", None))}
    bs = NS(mesh, Pc("data"))
    return lambda: lib.jit(step, in_shardings=(ps, bs, bs), out_shardings=(ps, NS(mesh, Pc()))), ps


def median_time(fn, repeats: int) -> float:
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer repeats")
    a = ap.parse_args()
    reps = 5 if a.quick else 30
    rng = np.random.default_rng(0)
    params = {"w1": (rng.normal(size=(256, 1024)) / 16).astype(np.float32),
              "w2": (rng.normal(size=(1024, 256)) / 32).astype(np.float32)}
    x = rng.normal(size=(256, 256)).astype(np.float32)
    y = rng.normal(size=(256, 256)).astype(np.float32)
    fm = ftrans.make_mesh((2, 4), ("data", "model"), axis_types=(AxisType.Auto,) * 2)
    jm = jax.make_mesh((2, 4), ("data", "model"), axis_types=(JAxisType.Auto,) * 2)
    rows = []
    results = {}
    for name, lib, NS, Pc, mesh in (("ftrans", ftrans, NamedSharding, P, fm), ("jax", jax, JNS, JP, jm)):
        make, ps = setup(lib, NS, Pc, mesh)
        f = make()
        p = lib.device_put(params, ps)
        xs = lib.device_put(x, NS(mesh, Pc("data")))
        ys = lib.device_put(y, NS(mesh, Pc("data")))
        out = f(p, xs, ys)
        results[name] = (np.asarray(out[0]["w1"]), float(out[1]))

        def run_step(f=f, p=p, xs=xs, ys=ys):
            f(p, xs, ys)[1].block_until_ready()

        step_ms = median_time(run_step, reps) * 1e3
        tiny = lib.jit(lambda v: v * 2.0)
        v = lib.device_put(np.ones((8, 128), np.float32), NS(mesh, Pc("data", "model")))
        v = tiny(v)
        n = 200 if a.quick else 2000
        t0 = time.perf_counter()
        for _ in range(n):
            v = tiny(v)
        v.block_until_ready()
        dispatch_us = (time.perf_counter() - t0) / n * 1e6

        def first(make=make, p=p, xs=xs, ys=ys):
            from ftrans.lowering import executable

            executable._xla_cache.clear()  # both libraries compile from scratch
            jax.clear_caches()
            g = make()
            out = g(p, xs, ys)
            out[1].block_until_ready()

        first_ms = median_time(first, 3 if a.quick else 5) * 1e3
        rows.append((name, step_ms, dispatch_us, first_ms))
    np.testing.assert_allclose(results["ftrans"][0], results["jax"][0], rtol=1e-4, atol=1e-5)
    assert abs(results["ftrans"][1] - results["jax"][1]) < 1e-4 * max(1.0, abs(results["jax"][1]))
    print(f"{'':8s} {'step (ms)':>10s} {'dispatch (us)':>14s} {'first result (ms)':>18s}")
    for name, s, d, f in rows:
        print(f"{name:8s} {s:10.2f} {d:14.1f} {f:18.1f}")
    (_, s0, d0, f0), (_, s1, d1, f1) = rows
    print(f"{'ratio':8s} {s0 / s1:10.2f} {d0 / d1:14.2f} {f0 / f1:18.2f}   (ftrans / jax)")


if __name__ == "__main__":
    main()
