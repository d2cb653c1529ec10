"""How trace, lower and compile times grow with program size: ftrans next to jax.

    python benchmarks/scaling.py                    # 10, 100 and 1000 layers (1000 takes minutes)
    python benchmarks/scaling.py --max-layers 100   # skip the 1000-layer programs
    python benchmarks/scaling.py --runs 5 --json out.json
    python benchmarks/scaling.py --cpu-time         # process CPU time instead of wall time

The programs are a tanh MLP of N layers (width 16, batch 4), forward
(``sum(mlp(params, x))``) and its gradient with respect to the parameters
(``grad`` of the same). For each library, size and program, a fresh function
object goes through the ahead-of-time API, with in-memory caches cleared and
both libraries' on-disk caches off:

- trace: ``jit(f).trace(*args)`` (staging; for the gradient, differentiation too,
  and ftrans's IR passes);
- lower: ``traced.lower()`` (emitting StableHLO);
- compile: ``lowered.compile()`` (XLA).

Medians over ``--runs`` (the 1000-layer programs run once unless
``--runs-large`` says otherwise). The compiled programs are run once and their
results compared between the libraries. Not a benchmark with targets: it shows
whether any stage grows faster than linearly in ftrans where it does not in
jax, and which stage dominates at each size.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ["FTRANS_ENABLE_COMPILATION_CACHE"] = "0"  # ftrans's disk cache is on by default
os.environ.pop("JAX_COMPILATION_CACHE_DIR", None)
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402
import jax.numpy as jjnp  # noqa: E402
import numpy as np  # noqa: E402

import ftrans  # noqa: E402
import ftrans.numpy as fjnp  # noqa: E402

SIZES = (10, 100, 1000)
WIDTH, BATCH = 16, 4


def args_for(layers: int) -> tuple:
    rng = np.random.default_rng(0)
    params = [((rng.standard_normal((WIDTH, WIDTH)) / np.sqrt(WIDTH)).astype(np.float32),
               np.zeros(WIDTH, np.float32)) for _ in range(layers)]
    return params, rng.standard_normal((BATCH, WIDTH)).astype(np.float32)


def fresh(kind: str, lib, np_mod):
    """A new function object each call: no cache keyed on the function can answer."""
    def forward(params, x):
        for w, b in params:
            x = np_mod.tanh(x @ w + b)
        return np_mod.sum(x)

    return forward if kind == "forward" else lib.grad(forward)


# The clock of the stage times (--cpu-time: the process's CPU time, all threads; XLA compiles in a pool).
CLOCK = time.perf_counter


def stages(lib, np_mod, kind: str, args: tuple) -> tuple[dict, object]:
    """Seconds spent in trace, lower and compile for one fresh function, and the compiled output."""
    lib.clear_caches()
    gc.collect()
    jitted = lib.jit(fresh(kind, lib, np_mod))
    t0 = CLOCK()
    traced = jitted.trace(*args)
    t1 = CLOCK()
    lowered = traced.lower()
    t2 = CLOCK()
    compiled = lowered.compile()
    t3 = CLOCK()
    out = compiled(*args)
    return {"trace": t1 - t0, "lower": t2 - t1, "compile": t3 - t2}, out


def check_close(out_f, out_j, what: str) -> None:
    lf, lj = jax.tree_util.tree_leaves(out_f), jax.tree_util.tree_leaves(out_j)
    if len(lf) != len(lj):
        raise SystemExit(f"{what}: ftrans returns {len(lf)} arrays, jax {len(lj)}")
    for a, b in zip(lf, lj):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-4, atol=2e-5, err_msg=what)


def measure(sizes: list[int], runs: int, runs_large: int) -> list[dict]:
    rows = []
    for n in sizes:
        args = args_for(n)
        for kind in ("forward", "grad"):
            samples = {"ftrans": [], "jax": []}
            outs = {}
            reps = runs if n < 1000 else runs_large
            for r in range(reps):  # interleaved, alternating which library goes first
                order = (("ftrans", ftrans, fjnp), ("jax", jax, jjnp))
                for name, lib, np_mod in (order if r % 2 == 0 else order[::-1]):
                    times, outs[name] = stages(lib, np_mod, kind, args)
                    samples[name].append(times)
            check_close(outs["ftrans"], outs["jax"], f"{kind}, {n} layers")
            row = {"layers": n, "program": kind}
            for name, s in samples.items():
                for stage in ("trace", "lower", "compile"):
                    row[f"{name}_{stage}_ms"] = statistics.median(t[stage] for t in s) * 1e3
            rows.append(row)
            print_row(row)
    return rows


def print_header() -> None:
    head = (f"{'layers':>6} {'program':<8} | {'trace ms':>17} | {'lower ms':>17} | {'compile ms':>19} | "
            f"{'total ratio':>11}")
    print(head)
    print(f"{'':>6} {'':<8} | {'ftrans':>8} {'jax':>8} | {'ftrans':>8} {'jax':>8} | {'ftrans':>9} {'jax':>9} |")
    print("-" * len(head))


def print_row(row: dict) -> None:
    tf = sum(row[f"ftrans_{s}_ms"] for s in ("trace", "lower", "compile"))
    tj = sum(row[f"jax_{s}_ms"] for s in ("trace", "lower", "compile"))
    print(f"{row['layers']:>6} {row['program']:<8} | {row['ftrans_trace_ms']:8.1f} {row['jax_trace_ms']:8.1f} | "
          f"{row['ftrans_lower_ms']:8.1f} {row['jax_lower_ms']:8.1f} | {row['ftrans_compile_ms']:9.1f} "
          f"{row['jax_compile_ms']:9.1f} | {tf / tj:11.2f}", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--max-layers", type=int, default=max(SIZES), help="largest program to run (default 1000)")
    ap.add_argument("--runs", type=int, default=3, help="runs per library for programs under 1000 layers")
    ap.add_argument("--runs-large", type=int, default=1, help="runs per library for the 1000-layer programs")
    ap.add_argument("--json", metavar="PATH", help="also write the figures to PATH as JSON")
    ap.add_argument("--cpu-time", action="store_true",
                    help="time with the process's CPU time instead of wall time (steadier on a loaded machine)")
    args = ap.parse_args(argv)
    if args.cpu_time:
        global CLOCK
        CLOCK = time.process_time
    try:
        jax.config.update("jax_enable_compilation_cache", False)
    except (AttributeError, KeyError, ValueError):
        pass
    sizes = [n for n in SIZES if n <= args.max_layers]
    if not sizes:
        ap.error(f"--max-layers {args.max_layers} leaves no size to run (sizes: {SIZES})")
    print(f"jax {jax.__version__}, ftrans {ftrans.__version__}, device {jax.devices()[0].platform}; "
          f"tanh MLP width {WIDTH}, batch {BATCH}")
    for lib, np_mod in ((ftrans, fjnp), (jax, jjnp)):  # first-use costs (imports, backend start) off the clock
        for kind in ("forward", "grad"):
            stages(lib, np_mod, kind, args_for(2))
    print_header()
    rows = measure(sizes, args.runs, args.runs_large)
    print("\ntotal ratio = ftrans / jax of trace + lower + compile (lower is better)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "width": WIDTH, "batch": BATCH}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
