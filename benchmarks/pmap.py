"""``pmap``: a data-parallel training step and a tiny pmapped function, ftrans next to jax in one process.

    python benchmarks/pmap.py                    # about half a minute
    python benchmarks/pmap.py --quick            # fewer repeats: a smoke test, noisier figures
    python benchmarks/pmap.py --json out.json    # also write the figures as JSON

On a CPU the host is split into 8 XLA devices (``--xla_force_host_platform_device_count``).
The model is the MLP 64-128-128-10 of ``benchmarks/ad.py`` (tanh hidden layers,
softmax cross-entropy); the step, pmapped over every local device with the
parameters broadcast and the batch (8 examples per device) split, is

    g = grad(loss)(params, x, y); g = pmean(g, "d"); params - 0.01 * g

(a) the compiled step, steady state, with ``block_until_ready()`` (median of best-of, us);
(b) time to first result: a fresh function and a fresh ``pmap`` each time, both
    libraries' in-memory caches cleared, persistent caches off: trace + lower +
    compile + run + block (median ms); each run is checked to have compiled;
(c) dispatch of a tiny pmapped function (``x + 1`` on one float per device) whose
    argument is already spread over the devices (the previous call's result).
The two libraries' results are checked to agree first.

Targets (ftrans / jax): step <= 1.0x, first result <= 0.8x, dispatch <= 1.0x.
Printed, never enforced: timings on a shared machine are noisy.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import Any

os.environ.setdefault("JAX_PLATFORMS", "cpu")
if "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8").strip()
os.environ["FTRANS_ENABLE_COMPILATION_CACHE"] = "0"  # ftrans's disk cache is on by default
os.environ.pop("JAX_COMPILATION_CACHE_DIR", None)
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402
import jax.numpy as jjnp  # noqa: E402
import numpy as np  # noqa: E402

import ftrans  # noqa: E402
import ftrans.numpy as fjnp  # noqa: E402
from benchmarks.ad import assert_trees_close, block, clear_caches, cold, xent_loss  # noqa: E402
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

TARGETS = {"step": 1.0, "first_result": 0.8, "dispatch": 1.0}
SIZES = (64, 128, 128, 10)
PER_DEVICE = 8
FT = (ftrans, fjnp, ftrans.lax)
JX = (jax, jjnp, jax.lax)


def fresh_step(lib_np: tuple) -> Callable:
    """A new ``pmap`` of a new data-parallel SGD step on every call."""
    lib, np_mod, lax = lib_np

    def step(params: list, x: Any, y: Any) -> Any:
        g = lib.grad(xent_loss)(params, x, y, np_mod)
        g = lax.pmean(g, "d")
        return [(w - 0.01 * gw, b - 0.01 * gb) for (w, b), (gw, gb) in zip(params, g)]

    return lib.pmap(step, axis_name="d", in_axes=(None, 0, 0))


def step_args(n: int, seed: int = 0) -> tuple:
    rng = np.random.default_rng(seed)
    params = [((rng.standard_normal((a, b)) / np.sqrt(a)).astype(np.float32), np.zeros(b, np.float32))
              for a, b in zip(SIZES[:-1], SIZES[1:])]
    xs = rng.standard_normal((n, PER_DEVICE, SIZES[0])).astype(np.float32)
    ys = np.eye(SIZES[-1], dtype=np.float32)[rng.integers(0, SIZES[-1], (n, PER_DEVICE))]
    return params, xs, ys


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer repeats (a smoke test, noisier)")
    ap.add_argument("--json", metavar="PATH", help="also write the figures to PATH as JSON")
    opts = ap.parse_args(argv)
    settings = (dict(cold_runs=3, steady=(10, 3, 3), dispatch=(100, 3, 3)) if opts.quick
                else dict(cold_runs=9, steady=(30, 5, 7), dispatch=(500, 5, 7)))

    disable_persistent_caches()
    counter = JaxCompileCounter()
    env = environment()
    n = ftrans.local_device_count()
    if jax.local_device_count() != n:
        raise SystemExit(f"ftrans sees {n} devices, jax {jax.local_device_count()}")
    env["devices"] = n
    print(", ".join(f"{k} {v}" for k, v in env.items()))
    a = step_args(n)
    assert_trees_close(fresh_step(FT)(*a), fresh_step(JX)(*a), "data-parallel step")

    f, g = fresh_step(FT), fresh_step(JX)
    s_f, s_j = paired_per_call_us(lambda: block(ftrans, f(*a)), lambda: block(jax, g(*a)), *settings["steady"],
                                  warmup=3)
    steady = Figure("step_us", f"data-parallel step ({n} devices x {PER_DEVICE}) + block", "us", s_f, s_j,
                    TARGETS["step"])

    run_f = cold(ftrans, lambda: block(ftrans, fresh_step(FT)(*a)), counter, "first result")
    run_j = cold(jax, lambda: block(jax, fresh_step(JX)(*a)), counter, "first result")
    t_f, t_j = paired_once_ms(run_f, run_j, settings["cold_runs"], warmup=1, setup=clear_caches)
    first = Figure("first_result_ms", "data-parallel step first result", "ms", t_f, t_j, TARGETS["first_result"])

    tiny_f = ftrans.pmap(lambda v: v + 1.0)
    tiny_j = jax.pmap(lambda v: v + 1.0)
    xf = tiny_f(np.zeros(n, np.float32))
    xj = tiny_j(np.zeros(n, np.float32))
    assert_trees_close(tiny_f(xf), tiny_j(xj), "tiny pmap")
    d_f, d_j = paired_per_call_us(lambda: block(ftrans, tiny_f(xf)), lambda: block(jax, tiny_j(xj)),
                                  *settings["dispatch"], warmup=5)
    dispatch = Figure("dispatch_us", "tiny pmap (x + 1) on sharded input + block", "us", d_f, d_j,
                      TARGETS["dispatch"])

    figures = [steady, first, dispatch]
    print()
    print_table(figures)
    print("\nratio = ftrans / jax (lower is better); medians over runs, so expect noise on a busy machine")
    if opts.json:
        write_json(opts.json, figures, env, {k: list(v) if isinstance(v, tuple) else v for k, v in settings.items()})
        print(f"figures written to {opts.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
