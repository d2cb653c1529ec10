"""Control flow: an Elman RNN over 100 steps with ``lax.scan``, ftrans next to jax in one process.

    python benchmarks/control_flow.py                  # about a minute
    python benchmarks/control_flow.py --quick          # fewer repeats: a smoke test, noisier figures
    python benchmarks/control_flow.py --json out.json  # also write the figures as JSON

The model: hidden size 128, batch 16, input dimension 32, 100 steps, float32,
parameters a dict ``{Wxh, Whh, bh, Why}``::

    def step(h, x):
        h = tanh(x @ Wxh + h @ Whh + bh)
        return h, h @ Why
    _, ys = lax.scan(step, zeros((16, 128)), xs)      # xs: (100, 16, 32)
    loss = mean(ys ** 2)

(G) ``jit(grad(loss))`` -- reverse mode through ``scan``:
    (a) time to first result: a fresh loss function and a fresh ``jit`` each
        time, jax's caches cleared (``jax.clear_caches()``), ftrans's in-memory
        XLA cache cleared, persistent/disk caches off, inputs on the device:
        trace + differentiate + lower + compile + run + block (median ms).  The
        script checks that each run really compiled;
    (b) the compiled steady-state step, inputs on the device,
        ``block_until_ready()`` on every gradient after each call (median of
        best-of, us).
    (c) without a target, to show where (a) goes: ``jit(grad(loss)).lower(...)``
        alone -- trace, differentiate and emit StableHLO, no XLA compile (median
        ms).  The rest of (a) is XLA compiling the module, which is the same
        work for both libraries.
(F) ``jit(loss)``, the forward pass alone: the same figures (a) and (b).

Before any timing the script checks that the two libraries' losses and
gradients agree (rtol 1e-4): ``jit(loss)``, eager ``grad`` and ``jit(grad)``.

Targets (ratios ftrans / jax): G.first_result <= 0.8x, G.steady <= 1.0x, and
the same for the forward rows.  The script prints whether each is met but never
fails on a miss: timings on a shared machine are noisy.  The timing helpers,
cache switches and report come from ``jit.py``, the shared checks from ``ad.py``.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import Any

os.environ.setdefault("JAX_PLATFORMS", "cpu")
# The comparison is of cold compiles: neither library may answer from a cache on disk.
os.environ["FTRANS_ENABLE_COMPILATION_CACHE"] = "0"  # ftrans's disk cache is on by default
os.environ.pop("JAX_COMPILATION_CACHE_DIR", None)
# Run from a checkout without installing: put the repository root on the path.
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

TARGETS = {  # ftrans / jax, lower is better
    "G.first_result": 0.8,
    "G.steady": 1.0,
    "F.first_result": 0.8,
    "F.steady": 1.0,
}
STEPS, BATCH, INPUT, HIDDEN = 100, 16, 32, 128

# The two libraries, side by side: (the module with grad/jit/lax, its numpy).
FT = (ftrans, fjnp)
JX = (jax, jjnp)


# ----------------------------------------------------------------------------
# The model


def rnn_args(seed: int = 0) -> tuple[dict, np.ndarray]:
    rng = np.random.default_rng(seed)

    def dense(m: int, n: int) -> np.ndarray:
        return (rng.standard_normal((m, n)) / np.sqrt(m)).astype(np.float32)

    params = {"Wxh": dense(INPUT, HIDDEN), "Whh": dense(HIDDEN, HIDDEN),
              "bh": (0.1 * rng.standard_normal(HIDDEN)).astype(np.float32), "Why": dense(HIDDEN, 1)}
    xs = rng.standard_normal((STEPS, BATCH, INPUT)).astype(np.float32)
    return params, xs


def rnn_loss(lib: Any, np_mod: Any, params: dict, xs: Any) -> Any:
    """Mean squared output of an Elman RNN run over ``xs`` (steps, batch, input) with ``lax.scan``."""
    def step(h: Any, x: Any) -> tuple:
        h = np_mod.tanh(x @ params["Wxh"] + h @ params["Whh"] + params["bh"])
        return h, h @ params["Why"]

    _, ys = lib.lax.scan(step, np_mod.zeros((BATCH, HIDDEN), np.float32), xs)
    return np_mod.mean(ys ** 2)


def fresh_loss(lib_np: tuple) -> Callable:
    """A new loss function object on every call: no cache keyed by the function can answer."""
    lib, np_mod = lib_np

    def loss(params: dict, xs: Any) -> Any:
        return rnn_loss(lib, np_mod, params, xs)

    return loss


def fresh_grad(lib_np: tuple) -> Callable:
    return lib_np[0].grad(fresh_loss(lib_np))


def check_agrees(args_f: tuple, args_j: tuple) -> None:
    """Loss (jitted) and gradients (eager and jitted) of the two libraries agree."""
    assert_trees_close(ftrans.jit(fresh_loss(FT))(*args_f), jax.jit(fresh_loss(JX))(*args_j), "RNN: jit(loss)")
    assert_trees_close(fresh_grad(FT)(*args_f), fresh_grad(JX)(*args_j), "RNN: grad")
    assert_trees_close(ftrans.jit(fresh_grad(FT))(*args_f), jax.jit(fresh_grad(JX))(*args_j), "RNN: jit(grad)")
    loss = float(np.asarray(ftrans.jit(fresh_loss(FT))(*args_f)))
    if not np.isfinite(loss) or not 1e-3 < loss < 10.0:
        raise SystemExit(f"RNN: implausible loss {loss}")


# ----------------------------------------------------------------------------
# Figures


def first_result_figure(make: Callable[[tuple], Callable], key: str, label: str, args_f: tuple, args_j: tuple,
                        runs: int, counter: JaxCompileCounter) -> Figure:
    run_f = cold(ftrans, lambda: block(ftrans, ftrans.jit(make(FT))(*args_f)), counter, label)
    run_j = cold(jax, lambda: block(jax, jax.jit(make(JX))(*args_j)), counter, label)
    t_f, t_j = paired_once_ms(run_f, run_j, runs, warmup=2, setup=clear_caches)
    return Figure(f"{key}_first_result_ms", label, "ms", t_f, t_j, TARGETS[f"{key}.first_result"])


def lower_figure(make: Callable[[tuple], Callable], key: str, label: str, args_f: tuple, args_j: tuple,
                 runs: int) -> Figure:
    t_f, t_j = paired_once_ms(lambda: ftrans.jit(make(FT)).lower(*args_f).as_text(),
                              lambda: jax.jit(make(JX)).lower(*args_j).as_text(), runs, warmup=2)
    return Figure(f"{key}_lower_ms", label, "ms", t_f, t_j, None)


def steady_figure(make: Callable[[tuple], Callable], key: str, label: str, args_f: tuple, args_j: tuple,
                  number: int, repeat: int, runs: int) -> Figure:
    f = ftrans.jit(make(FT))
    g = jax.jit(make(JX))
    t_f, t_j = paired_per_call_us(lambda: block(ftrans, f(*args_f)), lambda: block(jax, g(*args_j)),
                                  number, repeat, runs, warmup=5)
    if f.cache_info()["misses"] != 1:
        raise SystemExit(f"{label}: ftrans.jit recompiled during the timing")
    return Figure(f"{key}_steady_us", label, "us", t_f, t_j, TARGETS[f"{key}.steady"])


# ----------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer repeats (a smoke test, noisier)")
    ap.add_argument("--json", metavar="PATH", help="also write the figures to PATH as JSON")
    args = ap.parse_args(argv)
    if args.quick:
        settings = dict(cold_runs=3, steady=(5, 3, 3))
    else:
        settings = dict(cold_runs=11, steady=(20, 5, 7))

    disable_persistent_caches()
    counter = JaxCompileCounter()
    env = environment()
    print(", ".join(f"{k} {v}" for k, v in env.items()))
    if env["jax_device"] != env["ftrans_device"]:
        print(f"warning: the libraries run on different devices ({env['ftrans_device']} vs {env['jax_device']})")
    print(f"Elman RNN: {STEPS} steps, batch {BATCH}, input {INPUT}, hidden {HIDDEN}, float32")

    rnn_np = rnn_args()
    args_f = tuple(ftrans.device_put(a) for a in rnn_np)
    args_j = tuple(jax.device_put(a) for a in rnn_np)
    check_agrees(args_f, args_j)

    cold_runs, steady = settings["cold_runs"], settings["steady"]
    figures = [
        first_result_figure(fresh_grad, "G", "G. jit(grad) time to first result", args_f, args_j, cold_runs,
                            counter),
        steady_figure(fresh_grad, "G", "G. jit(grad) compiled step + block", args_f, args_j, *steady),
        lower_figure(fresh_grad, "G", "G. jit(grad).lower (no XLA compile)", args_f, args_j, cold_runs),
        first_result_figure(fresh_loss, "F", "F. jit(loss) time to first result", args_f, args_j, cold_runs,
                            counter),
        steady_figure(fresh_loss, "F", "F. jit(loss) compiled call + block", args_f, args_j, *steady),
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
