"""Sharded ``jit``: the training step of ``examples/sharded_transformer.py``, ftrans next to jax in one process.

    python benchmarks/sharding.py                 # about a minute
    python benchmarks/sharding.py --quick         # fewer repeats: a smoke test, noisier figures
    python benchmarks/sharding.py --json out.json # also write the figures as JSON

On a CPU the host is split into 8 XLA devices (``--xla_force_host_platform_device_count=8``), a
``(data=2, model=4)`` mesh, data x tensor parallel.

(T) The transformer's training step, imported from ``examples/sharded_transformer.py`` (the model, the step --
    ``value_and_grad`` of the loss and an SGD-with-momentum update -- and the layout: the batch over ``data``,
    the attention and MLP matrices Megatron-style over ``model``).  The example is written against the JAX API,
    so jax's twin is the same module loaded a second time with ``ftrans`` bound to ``jax``: the same model, the
    same shardings, the same ``jit(step, in_shardings=..., out_shardings=...)``.
    (a) time to first result: a fresh step function and a fresh ``jit`` each time, both libraries' in-memory
        caches cleared and their persistent caches off (a cold compile, checked), the inputs already placed:
        trace + differentiate + partition + compile + run + block (median ms);
    (b) the compiled step, ``block_until_ready()`` on every output after each call (median of best-of, us);
    (c) without a target: ``jit(step).lower(...)`` alone (trace, differentiate, emit StableHLO), median ms.
(M) The MLP step this benchmark timed first (256-1024-256, ``value_and_grad`` of the squared error plus SGD;
    the batch over ``data``, the first matrix by columns and the second by rows over ``model``): (a) and (b).
(D) Dispatch: ``x * 2.0`` on a (8, 128) array split over both axes, already compiled (us per call + block).

The two libraries' losses and updated parameters are checked to agree before any timing.  Targets (ftrans /
jax): the compiled steps and the times to first result at most 1.0x; the script prints whether each is met
but never fails on a miss (timings on a shared machine are noisy).  Helpers come from ``jit.py``/``ad.py``.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

os.environ.setdefault("JAX_PLATFORMS", "cpu")
if "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8").strip()
# The comparison is of cold compiles: neither library may answer from a cache on disk.
os.environ["FTRANS_ENABLE_COMPILATION_CACHE"] = "0"
os.environ.pop("JAX_COMPILATION_CACHE_DIR", None)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import jax  # noqa: E402
import jax.numpy as jjnp  # noqa: E402
import jax.sharding as jshard  # noqa: E402
import numpy as np  # noqa: E402

import ftrans  # noqa: E402
import ftrans.numpy as fjnp  # noqa: E402
import ftrans.sharding as fshard  # noqa: E402
from benchmarks.ad import assert_trees_close, block, clear_caches, cold  # noqa: E402
from benchmarks.jit import (  # noqa: E402
    Figure,
    JaxCompileCounter,
    disable_persistent_caches,
    environment,
    paired_once_ms,
    paired_per_call_us,
    print_table,
    write_json,
)

TARGETS = {"T.first_result": 1.0, "T.steady": 1.0, "M.first_result": 1.0, "M.steady": 1.0}
EXAMPLE = os.path.join(ROOT, "examples", "sharded_transformer.py")


def load_example(lib: ModuleType, np_mod: ModuleType, shard_mod: ModuleType) -> ModuleType:
    """``examples/sharded_transformer.py`` as a module whose ``ftrans``/``jnp``/sharding names are ``lib``'s."""
    spec = importlib.util.spec_from_file_location(f"sharded_transformer_{lib.__name__}", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.ftrans, mod.jnp = lib, np_mod
    mod.NamedSharding, mod.P, mod.AxisType = shard_mod.NamedSharding, shard_mod.PartitionSpec, shard_mod.AxisType
    return mod


FT = load_example(ftrans, fjnp, fshard)
JX = load_example(jax, jjnp, jshard)
HEADS, LENGTH, WIDTH, BATCH = 4, 8, 64, 64  # the example's defaults


# ----------------------------------------------------------------------------
# (T) the transformer


def transformer_args(ex: ModuleType) -> tuple[Any, tuple]:
    """The mesh's layout and one step's inputs placed by ``ex``'s library (same seed for both)."""
    mesh = ex.make_mesh()
    shard, batch, replicated = ex.shardings(mesh)
    rng = np.random.default_rng(0)
    p0 = ex.init(rng, WIDTH, LENGTH)
    params = {k: ex.put_global(v, shard[k]) for k, v in p0.items()}
    momentum = {k: ex.put_global(np.zeros_like(v), shard[k]) for k, v in p0.items()}
    tokens = rng.integers(0, ex.VOCAB, size=(BATCH, LENGTH)).astype(np.int32)
    args = (params, momentum, ex.put_batch(tokens, batch), ex.put_batch(tokens[:, ::-1].copy(), batch))
    return (shard, batch, replicated), args


def transformer_jit(ex: ModuleType, layout: tuple) -> Callable:
    """A fresh ``jit`` of a fresh step function, sharded as the example shards it."""
    shard, batch, replicated = layout
    return ex.ftrans.jit(ex.make_step(HEADS), in_shardings=(shard, shard, batch, batch),
                         out_shardings=(shard, shard, replicated))


# ----------------------------------------------------------------------------
# (M) the MLP


def mlp_layout(lib: ModuleType, shard_mod: ModuleType, mesh: Any) -> tuple:
    NS, P = shard_mod.NamedSharding, shard_mod.PartitionSpec
    ps = {"w1": NS(mesh, P(None, "model")), "w2": NS(mesh, P("model", None))}
    return ps, NS(mesh, P("data")), NS(mesh, P())


def mlp_jit(lib: ModuleType, np_mod: ModuleType, layout: tuple) -> Callable:
    ps, bs, rep = layout

    def loss(p, x, y):
        h = np_mod.tanh(x @ p["w1"])
        return ((h @ p["w2"] - y) ** 2).mean()

    def step(p, x, y):
        v, g = lib.value_and_grad(loss)(p, x, y)
        return {k: p[k] - 0.01 * g[k] for k in p}, v

    return lib.jit(step, in_shardings=(ps, bs, bs), out_shardings=(ps, rep))


def mlp_args(lib: ModuleType, layout: tuple) -> tuple:
    ps, bs, _ = layout
    rng = np.random.default_rng(0)
    params = {"w1": (rng.normal(size=(256, 1024)) / 16).astype(np.float32),
              "w2": (rng.normal(size=(1024, 256)) / 32).astype(np.float32)}
    x = rng.normal(size=(256, 256)).astype(np.float32)
    y = rng.normal(size=(256, 256)).astype(np.float32)
    return lib.device_put(params, ps), lib.device_put(x, bs), lib.device_put(y, bs)


# ----------------------------------------------------------------------------
# Figures shared by (T) and (M)


def first_result_figure(key: str, label: str, make_f: Callable, make_j: Callable, args_f: tuple, args_j: tuple,
                        runs: int, counter: JaxCompileCounter) -> Figure:
    run_f = cold(ftrans, lambda: block(ftrans, make_f()(*args_f)), counter, label)
    run_j = cold(jax, lambda: block(jax, make_j()(*args_j)), counter, label)
    t_f, t_j = paired_once_ms(run_f, run_j, runs, warmup=1, setup=clear_caches)
    return Figure(f"{key}_first_result_ms", label, "ms", t_f, t_j, TARGETS[f"{key}.first_result"])


def steady_figure(key: str, label: str, make_f: Callable, make_j: Callable, args_f: tuple, args_j: tuple,
                  number: int, repeat: int, runs: int) -> Figure:
    f, g = make_f(), make_j()
    t_f, t_j = paired_per_call_us(lambda: block(ftrans, f(*args_f)), lambda: block(jax, g(*args_j)),
                                  number, repeat, runs, warmup=5)
    if f.cache_info()["misses"] != 1:
        raise SystemExit(f"{label}: ftrans.jit recompiled during the timing")
    return Figure(f"{key}_steady_us", label, "us", t_f, t_j, TARGETS[f"{key}.steady"])


def lower_figure(key: str, label: str, make_f: Callable, make_j: Callable, args_f: tuple, args_j: tuple,
                 runs: int) -> Figure:
    t_f, t_j = paired_once_ms(lambda: make_f().lower(*args_f).as_text(),
                              lambda: make_j().lower(*args_j).as_text(), runs, warmup=1)
    return Figure(f"{key}_lower_ms", label, "ms", t_f, t_j, None)


def dispatch_figure(number: int, repeat: int, runs: int) -> Figure:
    xs = []
    for lib, shard_mod in ((ftrans, fshard), (jax, jshard)):
        mesh = lib.make_mesh((2, 4), ("data", "model"), axis_types=(shard_mod.AxisType.Auto,) * 2)
        x = lib.device_put(np.ones((8, 128), np.float32),
                           shard_mod.NamedSharding(mesh, shard_mod.PartitionSpec("data", "model")))
        f = lib.jit(lambda v: v * 2.0)
        f(x).block_until_ready()
        xs.append((f, x))
    (f, xf), (g, xj) = xs
    np.testing.assert_array_equal(np.asarray(f(xf)), np.asarray(g(xj)))
    t_f, t_j = paired_per_call_us(lambda: f(xf).block_until_ready(), lambda: g(xj).block_until_ready(),
                                  number, repeat, runs, warmup=5)
    return Figure("D_dispatch_us", "D. x * 2 on 8 shards, call + block", "us", t_f, t_j, None)


# ----------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer repeats (a smoke test, noisier)")
    ap.add_argument("--json", metavar="PATH", help="also write the figures to PATH as JSON")
    args = ap.parse_args(argv)
    settings = dict(cold_runs=3, steady=(5, 3, 3), dispatch=(100, 3, 3)) if args.quick else \
        dict(cold_runs=7, steady=(10, 5, 7), dispatch=(500, 5, 7))
    disable_persistent_caches()
    counter = JaxCompileCounter()
    env = environment()
    print(", ".join(f"{k} {v}" for k, v in env.items()))
    if len(ftrans.devices()) != 8 or len(jax.devices()) != 8:
        raise SystemExit(f"needs 8 devices; ftrans has {len(ftrans.devices())}, jax {len(jax.devices())} "
                         "(XLA_FLAGS=--xla_force_host_platform_device_count=8 on a CPU)")
    print(f"transformer: width {WIDTH}, {HEADS} heads, length {LENGTH}, batch {BATCH}; mesh (data=2, model=4)")

    layout_f, targs_f = transformer_args(FT)
    layout_j, targs_j = transformer_args(JX)
    make_tf, make_tj = (lambda: transformer_jit(FT, layout_f)), (lambda: transformer_jit(JX, layout_j))
    assert_trees_close(make_tf()(*targs_f), make_tj()(*targs_j), "transformer step")

    mesh_f = ftrans.make_mesh((2, 4), ("data", "model"), axis_types=(fshard.AxisType.Auto,) * 2)
    mesh_j = jax.make_mesh((2, 4), ("data", "model"), axis_types=(jshard.AxisType.Auto,) * 2)
    mlayout_f, mlayout_j = mlp_layout(ftrans, fshard, mesh_f), mlp_layout(jax, jshard, mesh_j)
    margs_f, margs_j = mlp_args(ftrans, mlayout_f), mlp_args(jax, mlayout_j)
    make_mf, make_mj = (lambda: mlp_jit(ftrans, fjnp, mlayout_f)), (lambda: mlp_jit(jax, jjnp, mlayout_j))
    assert_trees_close(make_mf()(*margs_f), make_mj()(*margs_j), "MLP step")

    cold_runs, steady = settings["cold_runs"], settings["steady"]
    figures = [
        first_result_figure("T", "T. step time to first result", make_tf, make_tj, targs_f, targs_j, cold_runs,
                            counter),
        steady_figure("T", "T. compiled step + block", make_tf, make_tj, targs_f, targs_j, *steady),
        lower_figure("T", "T. jit(step).lower (no XLA compile)", make_tf, make_tj, targs_f, targs_j, cold_runs),
        first_result_figure("M", "M. MLP step time to first result", make_mf, make_mj, margs_f, margs_j, cold_runs,
                            counter),
        steady_figure("M", "M. MLP compiled step + block", make_mf, make_mj, margs_f, margs_j, *steady),
        dispatch_figure(*settings["dispatch"]),
    ]
    print()
    print_table(figures)
    print("\nratio = ftrans / jax (lower is better); figures are medians over runs, so expect noise on a busy machine")
    if args.json:
        write_json(args.json, figures, env, {k: list(v) if isinstance(v, tuple) else v for k, v in settings.items()})
        print(f"figures written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
