"""Eager-op latency and tracing speed: ftrans next to jax and NumPy, in one run.

    python benchmarks/eager.py            # about ten seconds
    python benchmarks/eager.py --quick    # fewer repeats, for a smoke test

(a) Latency of one small eager operation (16 float32 elements) on ftrans
    Arrays, jax Arrays and NumPy arrays.  Each figure is the median over
    several runs of the best of a few timeit repeats, per call, in
    microseconds.  jax dispatches asynchronously, so its figures include
    ``block_until_ready()``: the time until the result exists, as for the two
    synchronous libraries.
(b) Tracing speed: ``make_jaxpr`` of a 60-layer tanh MLP (width 32, batch 8,
    weights passed as a list), ftrans against ``jax.make_jaxpr``.  A fresh
    function object is traced each time so that neither library can answer
    from a tracing cache.
(c) Eager operations on device-resident arrays (committed to the default device by ``device_put``: the
    path every jit output takes on a GPU), where both libraries run a one-operation program; ftrans
    against jax, for information (on a GPU the kernel launch and the wait dominate both).

Targets (DESIGN.md: "small eager operations close to NumPy's own speed"):
eager ``x + y`` and ``x * 2.0`` at most 2x NumPy, ``jnp.sin(x)`` and
``jnp.sum(x)`` at most 3x; ``make_jaxpr`` at most 0.5x jax.  ``lax.add`` and ``lax.sin``
(bind's eager path, no fast path in front of it) are shown for information.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
import timeit
from collections.abc import Callable

os.environ.setdefault("JAX_PLATFORMS", "cpu")
# Run from a checkout without installing: put the repository root on the path.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402
import jax.numpy as jjnp  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax as jlax  # noqa: E402

import ftrans  # noqa: E402
import ftrans.numpy as fjnp  # noqa: E402
from ftrans import lax as flax  # noqa: E402

EAGER_TARGETS = {"x + y": 2.0, "x * 2.0": 2.0, "jnp.sin(x)": 3.0, "jnp.sum(x)": 3.0}  # ftrans / NumPy
TRACE_TARGET = 0.5  # ftrans / jax


# The clock of the per-call figures (--cpu-time picks the process's CPU time).
PER_CALL_TIMER = time.perf_counter

def per_call_us(fn: Callable[[], object], number: int, repeat: int, runs: int) -> float:
    """Median over ``runs`` of the best of ``repeat`` timings of ``number`` calls, in us per call."""
    fn()  # warm up caches (jax compiles its one-op programs here)
    timer = timeit.Timer(fn, timer=PER_CALL_TIMER)
    bests = [min(timer.repeat(repeat=repeat, number=number)) / number for _ in range(runs)]
    return statistics.median(bests) * 1e6


def eager_cases():
    rng = np.random.default_rng(0)
    xn = rng.standard_normal(16).astype(np.float32)
    yn = rng.standard_normal(16).astype(np.float32)
    xf, yf = fjnp.asarray(xn), fjnp.asarray(yn)
    xj, yj = jjnp.asarray(xn), jjnp.asarray(yn)
    return [
        ("x + y",
         lambda: xf + yf, lambda: (xj + yj).block_until_ready(), lambda: xn + yn),
        ("jnp.sin(x)",
         lambda: fjnp.sin(xf), lambda: jjnp.sin(xj).block_until_ready(), lambda: np.sin(xn)),
        ("x * 2.0",
         lambda: xf * 2.0, lambda: (xj * 2.0).block_until_ready(), lambda: xn * 2.0),
        ("jnp.sum(x)",
         lambda: fjnp.sum(xf), lambda: jjnp.sum(xj).block_until_ready(), lambda: np.sum(xn)),
        # lax functions bind their primitive: bind's eager path, no jnp fast path in front of it
        ("lax.add(x,y)",
         lambda: flax.add(xf, yf), lambda: jlax.add(xj, yj).block_until_ready(), lambda: xn + yn),
        ("lax.sin(x)",
         lambda: flax.sin(xf), lambda: jlax.sin(xj).block_until_ready(), lambda: np.sin(xn)),
    ]


def device_cases():
    """Eager operations on arrays held by a device (committed to it by ``device_put``: the path a jit output
    on a GPU takes), where both libraries run a one-operation program: ftrans's Python around it."""
    rng = np.random.default_rng(0)
    xn = rng.standard_normal(16).astype(np.float32)
    fdev, jdev = ftrans.devices()[0], jax.devices()[0]
    xf, yf = ftrans.device_put(xn, fdev), ftrans.device_put(xn[::-1].copy(), fdev)
    xj, yj = jax.device_put(xn, jdev), jax.device_put(xn[::-1].copy(), jdev)
    fb = ftrans.block_until_ready
    return [
        ("x + y", lambda: fb(xf + yf), lambda: (xj + yj).block_until_ready()),
        ("x * 0.125", lambda: fb(xf * 0.125), lambda: (xj * 0.125).block_until_ready()),
        ("jnp.sin(x)", lambda: fb(fjnp.sin(xf)), lambda: jjnp.sin(xj).block_until_ready()),
        ("jnp.sum(x)", lambda: fb(fjnp.sum(xf)), lambda: jjnp.sum(xj).block_until_ready()),
    ]


def check_results_agree() -> None:
    """The benchmarked expressions compute the same thing in all three libraries."""
    for name, f_ftrans, f_jax, f_np in eager_cases():
        want = np.asarray(f_np())
        for got in (np.asarray(f_ftrans()), np.asarray(f_jax())):
            if got.dtype != want.dtype or not np.allclose(got, want, rtol=1e-5):
                raise SystemExit(f"benchmark case {name!r} disagrees between libraries")


def mlp(params, x, np_mod):
    for w, b in params:
        x = np_mod.tanh(x @ w + b)
    return x


def mlp_args(layers: int = 60, width: int = 32, batch: int = 8):
    rng = np.random.default_rng(0)
    params = [(rng.standard_normal((width, width)).astype(np.float32) / np.sqrt(width),
               np.zeros(width, np.float32)) for _ in range(layers)]
    return params, rng.standard_normal((batch, width)).astype(np.float32)


def trace_ms(make_jaxpr, np_mod, params, x, runs: int) -> tuple[float, int]:
    """Median wall time of one make_jaxpr call in ms, and the equation count."""
    times = []
    n_eqns = 0
    for _ in range(runs):
        def fresh(p, v):  # a new function object every time: no tracing cache can answer
            return mlp(p, v, np_mod)

        t0 = timeit.default_timer()
        closed = make_jaxpr(fresh)(params, x)
        times.append(timeit.default_timer() - t0)
        n_eqns = len(closed.eqns)
    return statistics.median(times) * 1e3, n_eqns


def verdict(ratio: float, target: float) -> str:
    return "meets target" if ratio <= target else "MISSES target"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer repeats (a smoke test, noisier)")
    ap.add_argument("--cpu-time", action="store_true",
                    help="time per-call figures in this process's CPU time (all its threads) instead of wall "
                         "time: steadier on a loaded shared machine, where waiting for a core is not the "
                         "library's cost")
    args = ap.parse_args(argv)
    global PER_CALL_TIMER
    PER_CALL_TIMER = time.process_time if args.cpu_time else time.perf_counter
    number, repeat, runs, trace_runs = (200, 3, 3, 5) if args.quick else (2000, 5, 7, 21)

    print(f"python {platform.python_version()}, numpy {np.__version__}, jax {jax.__version__}, "
          f"ftrans {ftrans.__version__}, {platform.machine()} ({os.cpu_count()} cpus), "
          f"jax backend {jax.default_backend()}")
    check_results_agree()

    print("\n(a) eager latency, 16 x float32, us per call (median of best-of runs)")
    print(f"{'op':<12}{'ftrans':>10}{'jax':>10}{'numpy':>10}{'ftrans/np':>11}{'jax/np':>9}  target")
    for name, f_ftrans, f_jax, f_np in eager_cases():
        t_f = per_call_us(f_ftrans, number, repeat, runs)
        t_j = per_call_us(f_jax, max(number // 10, 20), repeat, runs)
        t_n = per_call_us(f_np, number, repeat, runs)
        target = ""
        if name in EAGER_TARGETS:
            limit = EAGER_TARGETS[name]
            target = f"<= {limit:g}x numpy: {verdict(t_f / t_n, limit)}"
        print(f"{name:<12}{t_f:>10.2f}{t_j:>10.2f}{t_n:>10.2f}{t_f / t_n:>10.2f}x{t_j / t_n:>8.1f}x  {target}")

    params, x = mlp_args()
    t_f, n_f = trace_ms(ftrans.make_jaxpr, fjnp, params, x, trace_runs)
    t_j, n_j = trace_ms(jax.make_jaxpr, jjnp, params, x, trace_runs)
    ratio = t_f / t_j
    print("\n(b) make_jaxpr of a 60-layer tanh MLP (width 32, batch 8), ms per trace (median)")
    print(f"{'':<12}{'ms':>10}{'eqns':>8}")
    print(f"{'ftrans':<12}{t_f:>10.2f}{n_f:>8}")
    print(f"{'jax':<12}{t_j:>10.2f}{n_j:>8}")
    print(f"ftrans/jax = {ratio:.2f}x  (target <= {TRACE_TARGET:g}x: {verdict(ratio, TRACE_TARGET)})")
    print(f"\n(c) eager operations on device-resident arrays (16 x float32 on {ftrans.devices()[0]}), us per call")
    print(f"{'op':<12}{'ftrans':>10}{'jax':>10}{'ftrans/jax':>12}")
    for name, f_ftrans, f_jax in device_cases():
        t_f = per_call_us(f_ftrans, max(number // 10, 20), repeat, runs)
        t_j = per_call_us(f_jax, max(number // 10, 20), repeat, runs)
        print(f"{name:<12}{t_f:>10.2f}{t_j:>10.2f}{t_f / t_j:>11.2f}x")

    return 0


if __name__ == "__main__":
    sys.exit(main())
