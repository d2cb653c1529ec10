"""Reverse mode of ``lax.while_loop`` (checkpointed) against ``lax.scan`` and jax's scan-with-maximum workaround.

    python benchmarks/while_grad.py                     # n = 1e3, 1e4, 1e5, carry 1 MB
    python benchmarks/while_grad.py --carry-kb 64       # a smaller carry (faster on a small CPU)
    python benchmarks/while_grad.py --time-limit-gb 4   # time only programs whose buffers fit in 4 GB

The loop, an ``n``-step recurrence on a float32 carry of ``carry`` bytes::

    y <- sin(y * w) + 0.1 * y        (n times)     loss = sum(y)

and ``jit(grad(loss, argnums=(0, 1)))`` of it written three ways:

* ``while``: ``ftrans.lax.while_loop`` whose predicate reads a traced ``n``
  (the trip count is only known at run time), checkpointed with the default
  ``while_checkpoints`` slots (docs/autodiff.md);
* ``scan``: ftrans ``lax.fori_loop`` with static bounds (a ``scan``, which stores
  one carry per step for the backward pass);
* ``jax max-scan``: jax's usual workaround for a data-dependent loop -- a
  ``scan`` over a static maximum number of steps, each step masked with
  ``where(i < n, ...)``; here the maximum is ``n`` itself (its best case).

For each: XLA's temporary-buffer size of the compiled program
(``compiled.memory_analysis().temp_size_in_bytes``, the peak working memory beyond
arguments and outputs), and the median run time (``block_until_ready``) where the
temporaries fit under ``--time-limit-gb``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jjnp  # noqa: E402
import numpy as np  # noqa: E402

import ftrans  # noqa: E402
import ftrans.numpy as fjnp  # noqa: E402
from ftrans import lax as flax  # noqa: E402


def while_loss(y, w, n):
    def body(c):
        i, y = c
        return i + 1, fjnp.sin(y * w) + 0.1 * y
    return flax.while_loop(lambda c: c[0] < n, body, (0, y))[1].sum()


def scan_loss(n):
    def loss(y, w):
        return flax.fori_loop(0, n, lambda i, y: fjnp.sin(y * w) + 0.1 * y, y).sum()
    return loss


def jax_max_scan_loss(max_steps):
    def loss(y, w, n):
        def step(y, i):
            return jjnp.where(i < n, jjnp.sin(y * w) + 0.1 * y, y), None
        return jax.lax.scan(step, y, jjnp.arange(max_steps))[0].sum()
    return loss


def timed(fn, args, repeats):
    out = fn(*args)
    jax.block_until_ready(out)
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*args))
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--carry-kb", type=int, default=1024)
    ap.add_argument("--ns", default="1000,10000,100000")
    ap.add_argument("--time-limit-gb", type=float, default=4.0)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    size = a.carry_kb * 1024 // 4
    y = np.linspace(0.1, 1.0, size).astype(np.float32)
    w = np.float32(0.7)
    limit = a.time_limit_gb * 2**30
    print(f"carry {a.carry_kb} KB, while_checkpoints={ftrans.config.while_checkpoints}, "
          f"device {jax.devices()[0].platform}")
    print(f"{'n':>8} {'program':<14} {'temp MB':>10} {'time s':>9}  mem vs scan  time vs scan")
    for n in [int(float(s)) for s in a.ns.split(",")]:
        rows = {}
        progs = {
            "while": (ftrans.jit(ftrans.grad(while_loss, argnums=(0, 1))), (y, w, np.int32(n))),
            "scan": (ftrans.jit(ftrans.grad(scan_loss(n), argnums=(0, 1))), (y, w)),
            "jax max-scan": (jax.jit(jax.grad(jax_max_scan_loss(n), argnums=(0, 1))), (y, w, np.int32(n))),
        }
        for name, (fn, args) in progs.items():
            temp = fn.lower(*args).compile().memory_analysis().temp_size_in_bytes
            t = timed(fn, args, a.repeats) if temp <= limit else None
            rows[name] = (temp, t)
        base_m, base_t = rows["scan"]
        for name, (temp, t) in rows.items():
            ts = f"{t:9.3f}" if t is not None else f"{'(skip)':>9}"
            rel_m = f"{base_m / temp:10.1f}x" if temp else "-"
            rel_t = f"{t / base_t:10.2f}x" if t is not None and base_t is not None else "-"
            print(f"{n:>8} {name:<14} {temp / 2**20:10.1f} {ts}  {rel_m}  {rel_t}")


if __name__ == "__main__":
    main()
