"""``jit``: ftrans next to jax in one process -- dispatch latency, tracing, compile time, steady state.

    python benchmarks/jit.py                     # about a minute
    python benchmarks/jit.py --quick             # fewer repeats: a smoke test, noisier figures
    python benchmarks/jit.py --json out.json     # also write the figures as JSON

(1) Dispatch latency of a tiny jitted function, ``lambda a: a + a`` on a
    float32 scalar already on the device (``ftrans.device_put`` /
    ``jax.device_put``), already compiled.  Two figures: the call alone (both
    libraries dispatch asynchronously, so this is the cost the caller's thread
    pays) and the call followed by ``block_until_ready()``.  Each figure is the
    median over several runs of the best of a few ``timeit`` repeats, in
    microseconds per call; the two libraries' runs are interleaved so a burst
    of load on a shared machine hits both alike.  Then ``x * y + 1.0`` on two
    NumPy arrays (transferred on every call) of 16 elements to 1M (16, 32x64,
    256x256, 1024x1024 float32), next to the same call on device arrays.
(2) A forward MLP 784-512-512-10 (relu hidden layers, batch 128, float32,
    parameters passed as a list of ``(w, b)`` tuples, a pytree):
    (a) ``make_jaxpr`` of it, a fresh function object each time so no tracing
        cache can answer (median ms);
    (b) time to first result: a fresh function and a fresh ``jit`` object each
        time, jax's caches cleared (``jax.clear_caches()``) and ftrans's
        in-memory XLA cache cleared, persistent/disk caches off, inputs already
        on the device: trace + lower + compile + run + block (median ms).  The
        script checks that each run really compiled;
    (c) the compiled steady-state call, inputs on the device,
        ``block_until_ready()`` after each call (median of best-of, us).
    The outputs of the two libraries are checked to agree before any timing.

Targets (ratios ftrans / jax): dispatch <= 1.5x, make_jaxpr <= 0.5x, time to
first result <= 0.8x, steady state <= 1.0x.  The script prints whether each is
met but never fails on a miss: timings on a shared machine are noisy.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import statistics
import sys
import time
import timeit
from collections.abc import Callable
from dataclasses import asdict, dataclass
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
from ftrans.lowering import disk_cache as _ftrans_disk_cache  # noqa: E402
from ftrans.lowering import executable as _ftrans_executable  # noqa: E402

TARGETS = {  # ftrans / jax, lower is better
    "dispatch": 1.5,
    "dispatch_numpy": 1.1,
    "make_jaxpr": 0.5,
    "first_result": 0.8,
    "steady": 1.0,
}
MLP_SIZES = (784, 512, 512, 10)
MLP_BATCH = 128


@dataclass
class Figure:
    """One row of the table (and one entry of the JSON file)."""

    key: str
    label: str
    unit: str
    ftrans: float
    jax: float
    target: float | None

    @property
    def ratio(self) -> float:
        return self.ftrans / self.jax

    @property
    def met(self) -> bool | None:
        return None if self.target is None else self.ratio <= self.target


# ----------------------------------------------------------------------------
# Settings that keep the comparison honest


# The clock of the per-call figures (--cpu-time picks the process's CPU time).
PER_CALL_TIMER = time.perf_counter

def disable_persistent_caches() -> None:
    """Both libraries compile for real: ftrans's disk cache and jax's persistent cache are off."""
    ftrans.config.update("enable_compilation_cache", False)
    if _ftrans_disk_cache.cache_dir() is not None:
        raise SystemExit("ftrans's on-disk compilation cache is still on; cannot measure cold compiles")
    try:
        jax.config.update("jax_enable_compilation_cache", False)
    except (AttributeError, KeyError, ValueError):  # an older jax without the switch: no dir set is enough
        pass
    if jax.config.values.get("jax_compilation_cache_dir"):
        jax.config.update("jax_compilation_cache_dir", None)


class JaxCompileCounter:
    """Counts jax's backend compilations (through ``jax.monitoring``), to check a cold run compiled.

    If this jax release no longer reports the event, ``available`` stays False and
    the check is skipped rather than failing.
    """

    EVENT_SUFFIX = "backend_compile_duration"

    def __init__(self) -> None:
        self.count = 0
        self.available = False
        try:
            jax.monitoring.register_event_duration_secs_listener(self._on_event)
        except AttributeError:
            return

    def _on_event(self, event: str, duration: float, **_: Any) -> None:
        if event.endswith(self.EVENT_SUFFIX):
            self.count += 1
            self.available = True


# ----------------------------------------------------------------------------
# Timing helpers


def best_per_call(fn: Callable[[], object], number: int, repeat: int) -> float:
    """The best of ``repeat`` timeit measurements of ``number`` calls, in seconds per call."""
    return min(timeit.Timer(fn, timer=PER_CALL_TIMER).repeat(repeat=repeat, number=number)) / number


def paired_per_call_us(fn_f: Callable[[], object], fn_j: Callable[[], object], number: int, repeat: int,
                       runs: int, warmup: int) -> tuple[float, float]:
    """Median over ``runs`` of best-of-``repeat`` per-call times (us), ftrans's and jax's runs interleaved."""
    for _ in range(warmup):
        fn_f()
        fn_j()
    tf, tj = [], []
    for i in range(runs):
        order = ((fn_f, tf), (fn_j, tj)) if i % 2 == 0 else ((fn_j, tj), (fn_f, tf))
        for fn, acc in order:
            acc.append(best_per_call(fn, number, repeat))
    return statistics.median(tf) * 1e6, statistics.median(tj) * 1e6


def timed_once(fn: Callable[[], object], setup: Callable[[], object] | None = None) -> float:
    """Wall time of one call, in seconds, with ``setup`` and the garbage collector kept out of it."""
    if setup is not None:
        setup()
    gc.collect()
    gc.disable()
    try:
        t0 = timeit.default_timer()
        fn()
        return timeit.default_timer() - t0
    finally:
        gc.enable()


def paired_once_ms(fn_f: Callable[[], object], fn_j: Callable[[], object], runs: int, warmup: int,
                   setup: Callable[[], object] | None = None) -> tuple[float, float]:
    """Median over ``runs`` single timings (ms) of two cold operations, interleaved; ``setup`` runs untimed."""
    for _ in range(warmup):
        for fn in (fn_f, fn_j):
            if setup is not None:
                setup()
            fn()
    tf, tj = [], []
    for i in range(runs):
        order = ((fn_f, tf), (fn_j, tj)) if i % 2 == 0 else ((fn_j, tj), (fn_f, tf))
        for fn, acc in order:
            acc.append(timed_once(fn, setup))
    return statistics.median(tf) * 1e3, statistics.median(tj) * 1e3


# ----------------------------------------------------------------------------
# (1) dispatch latency


def dispatch_figures(number: int, repeat: int, runs: int) -> list[Figure]:
    xn = np.float32(1.5)
    xf = ftrans.device_put(xn)
    xj = jax.device_put(xn)
    f = ftrans.jit(lambda a: a + a)
    g = jax.jit(lambda a: a + a)
    got_f, got_j = np.asarray(f(xf)), np.asarray(g(xj))
    if got_f.dtype != got_j.dtype or got_f.shape != got_j.shape or got_f != got_j:
        raise SystemExit(f"dispatch benchmark: ftrans gives {got_f!r}, jax {got_j!r}")
    if f.cache_info()["misses"] != 1:
        raise SystemExit("dispatch benchmark: ftrans.jit did not cache its executable")

    call_f, call_j = paired_per_call_us(lambda: f(xf), lambda: g(xj), number, repeat, runs, warmup=100)
    blk_f, blk_j = paired_per_call_us(lambda: f(xf).block_until_ready(), lambda: g(xj).block_until_ready(),
                                      number, repeat, runs, warmup=100)
    t = TARGETS["dispatch"]
    return [
        Figure("dispatch_call_us", "dispatch: call (async)", "us", call_f, call_j, t),
        Figure("dispatch_block_us", "dispatch: call + block", "us", blk_f, blk_j, t),
        *numpy_dispatch_figures(number, repeat, runs),
    ]


NUMPY_DISPATCH_SHAPES = ((16,), (32, 64), (256, 256), (1024, 1024))  # 16 elements to 1M


def numpy_dispatch_figures(number: int, repeat: int, runs: int) -> list[Figure]:
    """A jitted call whose two arguments are NumPy arrays (transferred on every call), and the same
    call with device-resident arguments for reference, for each of ``NUMPY_DISPATCH_SHAPES``."""
    return [fig for shape in NUMPY_DISPATCH_SHAPES for fig in _numpy_dispatch(shape, number, repeat, runs)]


def _numpy_dispatch(shape: tuple, number: int, repeat: int, runs: int) -> list[Figure]:
    rng = np.random.default_rng(0)
    a = rng.standard_normal(shape).astype(np.float32)
    b = rng.standard_normal(shape).astype(np.float32)
    f = ftrans.jit(lambda x, y: x * y + 1.0)
    g = jax.jit(lambda x, y: x * y + 1.0)
    got_f, got_j = np.asarray(f(a, b)), np.asarray(g(a, b))
    if got_f.dtype != got_j.dtype or not np.allclose(got_f, got_j, rtol=1e-6):
        raise SystemExit(f"NumPy-argument dispatch benchmark: ftrans and jax disagree for {shape}")
    size = int(np.prod(shape))
    n = max(number * 2048 // size, 20) if size > 2048 else number  # big arrays: fewer calls per timing
    name = "x".join(map(str, shape))
    np_f, np_j = paired_per_call_us(lambda: f(a, b), lambda: g(a, b), n, repeat, runs, warmup=100)
    af, bf = ftrans.device_put(a), ftrans.device_put(b)
    aj, bj = jax.device_put(a), jax.device_put(b)
    dev_f, dev_j = paired_per_call_us(lambda: f(af, bf), lambda: g(aj, bj), n, repeat, runs, warmup=100)
    return [
        Figure(f"dispatch_numpy_{name}_us", f"dispatch: two {name} NumPy args", "us", np_f, np_j,
               TARGETS["dispatch_numpy"]),
        Figure(f"dispatch_resident_{name}_us", f"dispatch: two {name} device args", "us", dev_f, dev_j, None),
    ]


# ----------------------------------------------------------------------------
# (2) the MLP


def mlp(params: list, x: Any, np_mod: Any) -> Any:
    """Forward pass: relu on the hidden layers, a plain affine output layer."""
    *hidden, (w_out, b_out) = params
    for w, b in hidden:
        x = np_mod.maximum(x @ w + b, 0.0)
    return x @ w_out + b_out


def mlp_args(seed: int = 0) -> tuple[list, np.ndarray]:
    rng = np.random.default_rng(seed)
    params = [(rng.standard_normal((m, n)).astype(np.float32) / np.float32(np.sqrt(m)),
               (0.1 * rng.standard_normal(n)).astype(np.float32))
              for m, n in zip(MLP_SIZES[:-1], MLP_SIZES[1:])]
    x = rng.standard_normal((MLP_BATCH, MLP_SIZES[0])).astype(np.float32)
    return params, x


def fresh_mlp(np_mod: Any) -> Callable:
    """A new function object on every call: no cache keyed by the function can answer."""
    def forward(params: list, x: Any) -> Any:
        return mlp(params, x, np_mod)
    return forward


def jit_or_explain(params: Any, x: Any) -> Any:
    """ftrans's first MLP result, with a clear message when a primitive cannot lower yet."""
    try:
        return ftrans.jit(fresh_mlp(fjnp))(params, x)
    except Exception as e:
        if "lowering rule" in str(e):
            raise SystemExit(f"ftrans.jit cannot compile the MLP yet (a primitive has no lowering): {e}") from e
        raise


def check_mlp_agrees(params: list, x: np.ndarray, pf: Any, xf: Any, pj: Any, xj: Any) -> None:
    """ftrans's and jax's jitted MLP give the same (float32, (128, 10)) result, close to NumPy's."""
    out_f = np.asarray(jit_or_explain(pf, xf))
    out_j = np.asarray(jax.jit(fresh_mlp(jjnp))(pj, xj))
    ref = mlp([(w.astype(np.float64), b.astype(np.float64)) for w, b in params], x.astype(np.float64), np)
    want_shape = (MLP_BATCH, MLP_SIZES[-1])
    for name, out in (("ftrans", out_f), ("jax", out_j)):
        if out.dtype != np.float32 or out.shape != want_shape:
            raise SystemExit(f"MLP: {name} returned {out.dtype}{list(out.shape)}, expected float32{list(want_shape)}")
    np.testing.assert_allclose(out_f, out_j, rtol=1e-4, atol=1e-4, err_msg="MLP: ftrans and jax disagree")
    np.testing.assert_allclose(out_f, ref, rtol=1e-3, atol=1e-3, err_msg="MLP: ftrans disagrees with NumPy")


def make_jaxpr_figure(params: list, x: np.ndarray, runs: int) -> Figure:
    def trace_f() -> None:
        ftrans.make_jaxpr(fresh_mlp(fjnp))(params, x)

    def trace_j() -> None:
        jax.make_jaxpr(fresh_mlp(jjnp))(params, x)

    n_f = len(ftrans.make_jaxpr(fresh_mlp(fjnp))(params, x).eqns)
    n_j = len(jax.make_jaxpr(fresh_mlp(jjnp))(params, x).eqns)
    t_f, t_j = paired_once_ms(trace_f, trace_j, runs, warmup=2)
    return Figure("mlp_make_jaxpr_ms", f"MLP make_jaxpr ({n_f} / {n_j} eqns)", "ms", t_f, t_j,
                  TARGETS["make_jaxpr"])


def first_result_figure(pf: Any, xf: Any, pj: Any, xj: Any, runs: int, counter: JaxCompileCounter) -> Figure:
    def cold_f() -> None:
        before = _ftrans_executable.stats["compiles"]
        jit_or_explain(pf, xf).block_until_ready()
        if _ftrans_executable.stats["compiles"] != before + 1:
            raise SystemExit("time to first result: ftrans answered from a cache instead of compiling")

    def cold_j() -> None:
        before = counter.count
        jax.jit(fresh_mlp(jjnp))(pj, xj).block_until_ready()
        if counter.available and counter.count == before:
            raise SystemExit("time to first result: jax answered from a cache instead of compiling")

    def clear_caches() -> None:
        _ftrans_executable._xla_cache.clear()
        jax.clear_caches()

    t_f, t_j = paired_once_ms(cold_f, cold_j, runs, warmup=2, setup=clear_caches)
    return Figure("mlp_first_result_ms", "MLP time to first result", "ms", t_f, t_j, TARGETS["first_result"])


def steady_figure(pf: Any, xf: Any, pj: Any, xj: Any, number: int, repeat: int, runs: int) -> Figure:
    f = ftrans.jit(fresh_mlp(fjnp))
    g = jax.jit(fresh_mlp(jjnp))
    t_f, t_j = paired_per_call_us(lambda: f(pf, xf).block_until_ready(), lambda: g(pj, xj).block_until_ready(),
                                  number, repeat, runs, warmup=5)
    if f.cache_info()["misses"] != 1:
        raise SystemExit("steady state: ftrans.jit recompiled during the timing")
    return Figure("mlp_steady_us", "MLP compiled call + block", "us", t_f, t_j, TARGETS["steady"])


# ----------------------------------------------------------------------------
# Report


def print_table(figures: list[Figure]) -> None:
    head = f"{'figure':<36}{'unit':>5}{'ftrans':>11}{'jax':>11}{'ratio':>8}{'target':>9}  met?"
    print(head)
    print("-" * len(head))
    for fig in figures:
        target = "" if fig.target is None else f"<= {fig.target:g}x"
        met = "" if fig.met is None else ("yes" if fig.met else "NO")
        print(f"{fig.label:<36}{fig.unit:>5}{fig.ftrans:>11.2f}{fig.jax:>11.2f}{fig.ratio:>7.2f}x{target:>9}  {met}")


def environment() -> dict:
    return {
        "python": platform.python_version(), "numpy": np.__version__, "jax": jax.__version__,
        "ftrans": ftrans.__version__, "machine": platform.machine(), "cpus": os.cpu_count(),
        "jax_backend": jax.default_backend(), "ftrans_backend": ftrans.default_backend(),
        "jax_device": str(jax.devices()[0]), "ftrans_device": str(ftrans.devices()[0]),
    }


def write_json(path: str, figures: list[Figure], env: dict, settings: dict) -> None:
    rows = {}
    for fig in figures:
        row = asdict(fig)
        row.pop("key")
        row["ratio"] = fig.ratio
        row["met"] = fig.met
        rows[fig.key] = row
    with open(path, "w") as fh:
        json.dump({"environment": env, "settings": settings, "figures": rows}, fh, indent=2)
        fh.write("\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer repeats (a smoke test, noisier)")
    ap.add_argument("--cpu-time", action="store_true",
                    help="time per-call figures in this process's CPU time (all its threads) instead of wall "
                         "time: steadier on a loaded shared machine, where waiting for a core is not the "
                         "library's cost")
    ap.add_argument("--json", metavar="PATH", help="also write the figures to PATH as JSON")
    ap.add_argument("--dispatch-only", action="store_true", help="only the dispatch figures (section 1)")
    args = ap.parse_args(argv)
    global PER_CALL_TIMER
    PER_CALL_TIMER = time.process_time if args.cpu_time else time.perf_counter
    if args.quick:
        settings = dict(dispatch=(500, 3, 3), trace_runs=5, cold_runs=3, steady=(10, 3, 3))
    else:
        settings = dict(dispatch=(5000, 5, 7), trace_runs=21, cold_runs=11, steady=(50, 5, 7))

    disable_persistent_caches()
    counter = JaxCompileCounter()
    env = environment()
    print(", ".join(f"{k} {v}" for k, v in env.items()))
    if env["jax_device"] != env["ftrans_device"]:
        print(f"warning: the libraries run on different devices ({env['ftrans_device']} vs {env['jax_device']})")

    params, x = mlp_args()
    pf, xf = ftrans.device_put(params), ftrans.device_put(x)
    pj, xj = jax.device_put(params), jax.device_put(x)
    check_mlp_agrees(params, x, pf, xf, pj, xj)

    figures = dispatch_figures(*settings["dispatch"])
    if args.dispatch_only:
        print()
        print_table(figures)
        return 0
    figures.append(make_jaxpr_figure(params, x, settings["trace_runs"]))
    figures.append(first_result_figure(pf, xf, pj, xj, settings["cold_runs"], counter))
    figures.append(steady_figure(pf, xf, pj, xj, *settings["steady"]))

    print()
    print_table(figures)
    print("\nratio = ftrans / jax (lower is better); figures are medians over runs, so expect noise on a busy machine")
    if args.json:
        write_json(args.json, figures, env, {k: list(v) if isinstance(v, tuple) else v for k, v in settings.items()})
        print(f"figures written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
