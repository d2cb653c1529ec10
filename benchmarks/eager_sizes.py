"""Eager operations as arrays grow: where ftrans's host-NumPy eager path stops paying.

Why it exists: ftrans runs eager operations on default-device arrays with NumPy on the host (see
docs/differences.md, "Arrays"), which beats dispatching a compiled program for small arrays; jax
dispatches every eager operation to the default device.  On a GPU machine the two designs cross
over somewhere as arrays grow; this prints the figures that say where, for an elementwise add, a
reduction and a matrix product, from freshly created arrays (host-resident in ftrans) and from the
outputs of a jitted function (device-resident in both).

    python benchmarks/eager_sizes.py                          # the CPU
    JAX_PLATFORMS=cuda python benchmarks/eager_sizes.py       # a GPU
"""

from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import jax  # noqa: E402
import jax.numpy as jjnp  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import ftrans  # noqa: E402
import ftrans.numpy as fjnp  # noqa: E402


def best_time(fn, block, repeats: int, min_s: float = 0.05) -> float:
    """Best per-call seconds over ``repeats`` rounds, each long enough to time reliably."""
    block(fn())
    n = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            block(fn())
        dt = time.perf_counter() - t0
        if dt >= min_s or n >= 1 << 16:
            break
        n *= 4
    best = dt / n
    for _ in range(repeats - 1):
        t0 = time.perf_counter()
        for _ in range(n):
            block(fn())
        best = min(best, (time.perf_counter() - t0) / n)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer repeats and sizes")
    ap.add_argument("--crossover", action="store_true",
                    help="ftrans's host path against its device path (operands on the device, or moved there first)")
    ap.add_argument("--ops", default="", help="with --crossover: only these operations (comma-separated)")
    args = ap.parse_args()
    if args.crossover:
        return crossover(3 if args.quick else 5, [o for o in args.ops.split(",") if o])
    repeats = 3 if args.quick else 7
    sizes = (16, 256, 2048) if args.quick else (16, 128, 512, 2048, 4096)
    print(f"jax {jax.__version__} on {jax.devices()[0].device_kind}; ftrans {ftrans.__version__}; us per call, best of {repeats}")
    print(f"{'op':<10}{'n':>6}  {'source':<12}{'ftrans':>12}{'jax':>12}{'numpy':>12}{'ftrans/jax':>12}")
    rng = np.random.default_rng(0)
    fblock, jblock = ftrans.block_until_ready, jax.block_until_ready
    for n in sizes:
        a = rng.standard_normal((n, n) if n > 16 else (n,)).astype(np.float32)
        b = rng.standard_normal(a.shape).astype(np.float32)
        ops = {"x + y": lambda m, x, y: x + y, "sum": lambda m, x, y: m.sum(x)}
        if a.ndim == 2:
            ops["x @ y"] = lambda m, x, y: x @ y
        fresh = {"fresh": (fjnp.asarray(a), fjnp.asarray(b), jjnp.asarray(a), jjnp.asarray(b))}
        shift = lambda x: x + 0.5  # noqa: E731  (not an identity: the optimizer cannot forward the argument)
        fj, jj = ftrans.jit(shift), jax.jit(shift)
        fresh["jit output"] = (fj(a), fj(b), jj(a), jj(b))
        if n == sizes[0]:  # where each library holds the operands (ftrans: a host Array or a device buffer)
            for src, (fx, _, jx, _) in fresh.items():
                print(f"# {src}: ftrans {type(fx).__name__} on {fx.device}, jax on {jx.device}")
        for name, op in ops.items():
            for src, (fx, fy, jx, jy) in fresh.items():
                tf = best_time(lambda op=op, fx=fx, fy=fy: op(fjnp, fx, fy), fblock, repeats)
                tj = best_time(lambda op=op, jx=jx, jy=jy: op(jjnp, jx, jy), jblock, repeats)
                tn = best_time(lambda op=op, a=a, b=b: op(np, a, b), lambda r: r, repeats) if src == "fresh" else float("nan")
                print(f"{name:<10}{n:>6}  {src:<12}{tf * 1e6:12.1f}{tj * 1e6:12.1f}{tn * 1e6:12.1f}{tf / tj:11.2f}x",
                      flush=True)


def crossover(repeats: int, only: list[str]) -> None:
    """Where running an eager operation on the default accelerator beats ftrans's host rule.

    For each operation and size: the host rule on host Arrays; the one-primitive device program on
    operands already on the device; and the same after moving both host operands there (what a size
    threshold sending large host operations to the device would pay the first time).  jax's eager
    figure on device-resident operands is printed beside them."""
    dev = ftrans.devices()[0]
    print(f"crossover on {dev.device_kind} ({dev.platform}); us per call, best of {repeats}")
    print(f"{'op':<8}{'elements':>10}{'flops':>12}  {'host':>10}{'dev':>10}{'put+dev':>10}{'put':>10}{'jax':>10}")
    rng = np.random.default_rng(0)
    fblock, jblock = ftrans.block_until_ready, jax.block_until_ready
    ew = [1 << k for k in range(8, 25, 2)]
    cases = [("add", (n,), lambda m, x, y: x + y, n) for n in ew]
    cases += [("mul", (n,), lambda m, x, y: x * y, n) for n in ew[2::2]]
    cases += [("sin", (n,), lambda m, x, y: m.sin(x), 20 * n) for n in ew[2::2]]
    cases += [("sum", (n,), lambda m, x, y: m.sum(x), n) for n in ew]
    cases += [("matmul", (n, n), lambda m, x, y: x @ y, 2 * n ** 3) for n in (16, 32, 64, 128, 256, 512, 1024, 2048)]
    cases += [("matvec", (n, n), lambda m, x, y: x @ y[0], 2 * n ** 2) for n in (64, 256, 1024, 4096)]
    for name, shape, op, flops in cases:
        if only and name not in only:
            continue
        a = rng.standard_normal(shape).astype(np.float32)
        b = rng.standard_normal(shape).astype(np.float32)
        fa, fb = fjnp.asarray(a), fjnp.asarray(b)
        da, db = ftrans.device_put(a, dev), ftrans.device_put(b, dev)
        ja, jb = jax.device_put(a), jax.device_put(b)
        th = best_time(lambda op=op, x=fa, y=fb: op(fjnp, x, y), fblock, repeats)
        td = best_time(lambda op=op, x=da, y=db: op(fjnp, x, y), fblock, repeats)
        tpd = best_time(lambda op=op, x=fa, y=fb: op(fjnp, ftrans.device_put(x, dev), ftrans.device_put(y, dev)), fblock, repeats)
        tp = best_time(lambda x=fa: ftrans.device_put(x, dev), fblock, repeats)
        tj = best_time(lambda op=op, x=ja, y=jb: op(jjnp, x, y), jblock, repeats)
        print(f"{name:<8}{a.size:>10}{flops:>12.3g}  {th * 1e6:10.1f}{td * 1e6:10.1f}{tpd * 1e6:10.1f}"
              f"{tp * 1e6:10.1f}{tj * 1e6:10.1f}", flush=True)


if __name__ == "__main__":
    main()
