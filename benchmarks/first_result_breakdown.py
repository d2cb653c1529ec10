"""Where a cold ``jit`` call's time goes, ftrans next to jax, for the benchmarks' programs.

    python benchmarks/first_result_breakdown.py            # about a minute
    python benchmarks/first_result_breakdown.py --quick    # fewer repeats

Not a benchmark with targets: it explains the time-to-first-result figures of
``jit.py``, ``ad.py`` and ``control_flow.py``. For each program (the forward
MLP, the SGD step, ``grad`` of the 60-layer tanh MLP, ``grad`` of the Elman RNN
through ``scan``) it times, for each library, the library's own part (trace,
transform, emit StableHLO: ``jit(f).lower(*args)``) and XLA's part (compiling
that module: ``lowered.compile()``), medians over fresh function objects with
the in-memory caches cleared. It also compiles both modules and counts the
kernels (``fusion`` ops) and dots in XLA's optimized HLO, which shows whether
XLA was handed the same work.

When XLA's part is most of the whole and the optimized programs are the same,
the ratio of the two libraries' times to first result cannot fall much below
``(xla_f + own_f) / (xla_j + own_j)`` however fast ftrans's own part gets.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ["FTRANS_ENABLE_COMPILATION_CACHE"] = "0"  # ftrans's disk cache is on by default
os.environ.pop("JAX_COMPILATION_CACHE_DIR", None)
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402

from benchmarks import ad, control_flow, eager  # noqa: E402
from benchmarks import jit as jit_bench  # noqa: E402
from benchmarks.ad import FT, JX, clear_caches  # noqa: E402
from benchmarks.jit import disable_persistent_caches  # noqa: E402


def programs() -> list[tuple[str, Callable[[tuple], Callable], tuple]]:
    """(name, make a fresh function for (lib, np_mod), host arguments)."""
    def mlp_forward(lib_np: tuple) -> Callable:
        return jit_bench.fresh_mlp(lib_np[1])

    return [
        ("MLP forward", mlp_forward, jit_bench.mlp_args()),
        ("SGD step", ad.fresh_step, ad.step_args()),
        ("grad, 60-layer tanh MLP", ad.fresh_tanh_grad, eager.mlp_args()),
        ("grad, RNN through scan", control_flow.fresh_grad, control_flow.rnn_args()),
    ]


def on_device(lib: Any, args: tuple) -> tuple:
    return lib.block_until_ready(lib.device_put(args))


def split_ms(lib_np: tuple, make: Callable[[tuple], Callable], args: tuple, runs: int) -> tuple[float, float]:
    """Median ms of the library's own part (lower) and XLA's part (compile), cold each run."""
    lib = lib_np[0]
    own, xla = [], []
    for _ in range(runs):
        clear_caches()
        t0 = time.perf_counter()
        lowered = lib.jit(make(lib_np)).lower(*args)
        t1 = time.perf_counter()
        lowered.compile()
        t2 = time.perf_counter()
        own.append(t1 - t0)
        xla.append(t2 - t1)
    return statistics.median(own) * 1e3, statistics.median(xla) * 1e3


def optimized_hlo_counts(lib_np: tuple, make: Callable[[tuple], Callable], args: tuple) -> tuple[int, int]:
    """Kernels (fusion ops) and dots in XLA's optimized HLO of the library's module."""
    lib = lib_np[0]
    if lib is jax:
        text = jax.jit(make(lib_np)).lower(*args).compile().as_text()
    else:
        text = _ftrans_optimized_hlo(lib.jit(make(lib_np)).lower(*args).as_text())
    return len(re.findall(r"= \S+ fusion\(", text)), len(re.findall(r"= \S+ dot\(", text))


def _ftrans_optimized_hlo(module_text: str) -> str:
    import ftrans
    from ftrans.lowering import compat

    device = ftrans.devices()[0]
    return compat.compile(device.client, module_text, [device]).hlo_modules()[0].to_string()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="fewer repeats (noisier)")
    opts = p.parse_args(argv)
    runs = 3 if opts.quick else 7
    disable_persistent_caches()
    print(jit_bench.environment())
    print()
    head = (f"{'program':26s} {'lib':7s} {'own ms':>8s} {'XLA ms':>8s} {'XLA share':>9s} "
            f"{'kernels':>7s} {'dots':>5s}")
    print(head)
    print("-" * len(head))
    for name, make, host_args in programs():
        rows = {}
        for lib_np in (FT, JX):
            args = on_device(lib_np[0], host_args)
            split_ms(lib_np, make, args, 1)  # warm up imports and first-use paths
            own, xla = split_ms(lib_np, make, args, runs)
            kernels, dots = optimized_hlo_counts(lib_np, make, args)
            rows[lib_np[0].__name__] = (own, xla)
            print(f"{name:26s} {lib_np[0].__name__:7s} {own:8.1f} {xla:8.1f} {xla / (own + xla):9.0%} "
                  f"{kernels:7d} {dots:5d}")
        (own_f, xla_f), (own_j, xla_j) = rows["ftrans"], rows["jax"]
        print(f"{'':26s} ftrans/jax: own part {own_f / own_j:.2f}x, XLA part {xla_f / xla_j:.2f}x, "
              f"lower + compile {(own_f + xla_f) / (own_j + xla_j):.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
