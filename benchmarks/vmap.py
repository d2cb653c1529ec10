"""``vmap``: per-example gradients, ftrans next to jax in one process.

    python benchmarks/vmap.py                    # about half a minute
    python benchmarks/vmap.py --quick            # fewer repeats: a smoke test, noisier figures
    python benchmarks/vmap.py --json out.json    # also write the figures as JSON

The model is a small MLP 64-128-128-10 (tanh hidden layers, float32,
parameters a list of ``(w, b)`` tuples) with a softmax cross-entropy loss of
one example.  The per-example gradients of a batch of 64 are

    jit(vmap(grad(loss), in_axes=(None, 0, 0)))(params, xs, ys)

(a) time to first result: a fresh function and a fresh ``jit`` each time,
    both libraries' in-memory caches cleared, persistent caches off, inputs on
    the device: trace + batch + lower + compile + run + block (median ms);
    each run is checked to have compiled;
(b) the compiled steady-state call with ``block_until_ready()`` (median of
    best-of, us).
The two libraries' gradients are checked to agree first.

Targets (ftrans / jax): first result <= 0.8x, steady state <= 1.0x.  Printed,
never enforced: timings on a shared machine are noisy.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import Any

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ["FTRANS_ENABLE_COMPILATION_CACHE"] = "0"  # ftrans's disk cache is on by default
os.environ.pop("JAX_COMPILATION_CACHE_DIR", None)
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402
import jax.numpy as jjnp  # noqa: E402
import numpy as np  # noqa: E402

import ftrans  # noqa: E402
import ftrans.numpy as fjnp  # noqa: E402
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

TARGETS = {"first_result": 0.8, "steady": 1.0}
SIZES = (64, 128, 128, 10)
BATCH = 64
FT = (ftrans, fjnp)
JX = (jax, jjnp)


def per_example_grads(lib_np: tuple) -> Callable:
    """A new ``jit(vmap(grad(loss)))`` built from new function objects on every call."""
    lib, np_mod = lib_np

    def loss(params: list, x: Any, y: Any) -> Any:
        h = x
        for i, (w, b) in enumerate(params):
            h = h @ w + b
            if i < len(params) - 1:
                h = np_mod.tanh(h)
        logits = h - np_mod.max(h)
        return -np_mod.sum(y * (logits - np_mod.log(np_mod.sum(np_mod.exp(logits)))))

    return lib.jit(lib.vmap(lib.grad(loss), in_axes=(None, 0, 0)))


def args(seed: int = 0) -> tuple:
    rng = np.random.default_rng(seed)
    params = [((rng.standard_normal((a, b)) / np.sqrt(a)).astype(np.float32), np.zeros(b, np.float32))
              for a, b in zip(SIZES[:-1], SIZES[1:])]
    xs = rng.standard_normal((BATCH, SIZES[0])).astype(np.float32)
    ys = np.eye(SIZES[-1], dtype=np.float32)[rng.integers(0, SIZES[-1], BATCH)]
    return params, xs, ys


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer repeats (a smoke test, noisier)")
    ap.add_argument("--json", metavar="PATH", help="also write the figures to PATH as JSON")
    opts = ap.parse_args(argv)
    settings = dict(cold_runs=3, steady=(20, 3, 3)) if opts.quick else dict(cold_runs=11, steady=(50, 5, 7))

    disable_persistent_caches()
    counter = JaxCompileCounter()
    env = environment()
    print(", ".join(f"{k} {v}" for k, v in env.items()))
    a = args()
    a_f = jax.tree_util.tree_map(ftrans.device_put, a)
    a_j = jax.tree_util.tree_map(jax.device_put, a)
    assert_trees_close(per_example_grads(FT)(*a_f), per_example_grads(JX)(*a_j), "per-example gradients")

    run_f = cold(ftrans, lambda: block(ftrans, per_example_grads(FT)(*a_f)), counter, "first result")
    run_j = cold(jax, lambda: block(jax, per_example_grads(JX)(*a_j)), counter, "first result")
    t_f, t_j = paired_once_ms(run_f, run_j, settings["cold_runs"], warmup=2, setup=clear_caches)
    first = Figure("first_result_ms", f"per-example grads (batch {BATCH}) first result", "ms", t_f, t_j,
                   TARGETS["first_result"])
    f, g = per_example_grads(FT), per_example_grads(JX)
    s_f, s_j = paired_per_call_us(lambda: block(ftrans, f(*a_f)), lambda: block(jax, g(*a_j)),
                                  *settings["steady"], warmup=5)
    steady = Figure("steady_us", "per-example grads compiled call + block", "us", s_f, s_j, TARGETS["steady"])

    print()
    print_table([first, steady])
    print("\nratio = ftrans / jax (lower is better); medians over runs, so expect noise on a busy machine")
    if opts.json:
        write_json(opts.json, [first, steady], env, {k: list(v) if isinstance(v, tuple) else v
                                                     for k, v in settings.items()})
        print(f"figures written to {opts.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
