"""Which XLA options shorten ftrans's compiles without slowing the compiled programs?

    python benchmarks/compile_options.py                 # every candidate, 3 rounds
    python benchmarks/compile_options.py --rounds 5 --json out.json

For each program of ``first_result.py`` (an MLP SGD step, the grad of a
60-layer tanh MLP, the grad of a scan RNN, per-example grads) and each
candidate set of XLA compile options (passed as ``jit(compiler_options=...)``,
so they reach XLA's ``env_option_overrides`` and key every cache), this
measures:

- compile time: lowering + XLA compile of the traced program, the in-memory
  and disk caches bypassed, in CPU seconds of the process (all threads: XLA
  compiles on several) and wall seconds;
- run time: the compiled call on device-resident arguments with
  ``block_until_ready``, best of several repeats, in CPU time.

Rounds interleave the candidates, medians are reported as ratios against the
default options measured in the same run. An option is worth adopting only
if it shortens compiles and keeps every program's run time within 3%.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import timeit

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ["FTRANS_ENABLE_COMPILATION_CACHE"] = "0"
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import first_result  # noqa: E402
import numpy as np  # noqa: E402
from jax import tree_util  # noqa: E402

import ftrans  # noqa: E402
import ftrans.numpy as jnp  # noqa: E402
from ftrans import lax  # noqa: E402
from ftrans.lowering import executable as X  # noqa: E402
from ftrans.transforms import jit as J  # noqa: E402

CANDIDATES = {
    "default": {},
    "opt_level_1": {"xla_backend_optimization_level": 1},
    "opt_level_0": {"xla_backend_optimization_level": 0},
    "no_expensive_llvm": {"xla_llvm_disable_expensive_passes": True},
    "opt1+no_expensive": {"xla_backend_optimization_level": 1, "xla_llvm_disable_expensive_passes": True},
}


def compile_once(program: str, options: dict) -> tuple[float, float, object, tuple]:
    """(cpu s, wall s) of lowering + compiling ``program`` once, the jitted function and its arguments."""
    fn, args = first_result._program(program, ftrans, jnp, lax)
    f = ftrans.jit(fn, compiler_options=options or None)
    leaves, in_tree = tree_util.tree_flatten((args, {}))
    avals = [J._leaf_aval(x) for x in leaves]
    closed, out_tree = f._trace(args, {}, avals, in_tree)
    X._xla_cache.clear()
    before = X.stats["compiles"]
    c0, w0 = time.process_time(), time.perf_counter()
    f._entry_for(closed, out_tree, (False,) * len(avals), ftrans.devices()[0])
    c1, w1 = time.process_time(), time.perf_counter()
    if X.stats["compiles"] != before + 1:
        raise SystemExit(f"{program} {options}: no compile happened")
    return c1 - c0, w1 - w0, f, args


def run_time(f, args, number: int = 5, repeat: int = 5) -> float:
    dargs = ftrans.device_put(args)
    ftrans.block_until_ready(f(*dargs))
    timer = timeit.Timer(lambda: ftrans.block_until_ready(f(*dargs)), timer=time.process_time)
    return min(timer.repeat(repeat=repeat, number=number)) / number


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--programs", default=",".join(first_result.PROGRAMS))
    ap.add_argument("--candidates", default=",".join(CANDIDATES))
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    programs = args.programs.split(",")
    names = args.candidates.split(",")
    samples: dict = {(p, n): {"cpu": [], "wall": [], "run": []} for p in programs for n in names}
    reference: dict = {}
    for r in range(args.rounds):
        for p in programs:
            order = names if r % 2 == 0 else names[::-1]
            for n in order:
                cpu, wall, f, fargs = compile_once(p, CANDIDATES[n])
                s = samples[(p, n)]
                s["cpu"].append(cpu)
                s["wall"].append(wall)
                s["run"].append(run_time(f, fargs))
                out = [np.asarray(v, np.float64) for v in tree_util.tree_leaves(f(*fargs))]
                if n == "default":
                    reference[p] = out
                elif p in reference:
                    for a, b in zip(out, reference[p]):
                        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-4, err_msg=f"{p} {n} disagrees")
    rows = []
    head = f"{'program':<20}{'options':<20}{'compile cpu ms':>15}{'ratio':>7}{'wall ms':>9}{'ratio':>7}" \
           f"{'run us':>10}{'ratio':>7}"
    print(head)
    print("-" * len(head))
    for p in programs:
        base = {k: statistics.median(v) for k, v in samples[(p, "default")].items()}
        for n in names:
            m = {k: statistics.median(v) for k, v in samples[(p, n)].items()}
            row = {"program": p, "options": n, "compile_cpu_ms": m["cpu"] * 1e3, "compile_wall_ms": m["wall"] * 1e3,
                   "run_us": m["run"] * 1e6, "compile_cpu_ratio": m["cpu"] / base["cpu"],
                   "compile_wall_ratio": m["wall"] / base["wall"], "run_ratio": m["run"] / base["run"]}
            rows.append(row)
            print(f"{p:<20}{n:<20}{row['compile_cpu_ms']:15.1f}{row['compile_cpu_ratio']:7.2f}"
                  f"{row['compile_wall_ms']:9.1f}{row['compile_wall_ratio']:7.2f}{row['run_us']:10.1f}"
                  f"{row['run_ratio']:7.2f}")
    print("\nratios against the default options in this run (medians over rounds); adopt an option only if its"
          " compile ratios are < 1 and every run ratio is <= 1.03")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"rounds": args.rounds, "candidates": {n: CANDIDATES[n] for n in names}, "rows": rows}, fh,
                      indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
