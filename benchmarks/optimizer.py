"""The IR optimiser: ftrans with and without its passes, next to jax, in one process.

    python benchmarks/optimizer.py            # about a minute
    python benchmarks/optimizer.py --quick    # fewer repeats

(1) StableHLO ops handed to XLA (``stablehlo.`` operations in the lowered module) with the
    passes off (``optimizations="none"``) and on, and jax's count, for an MLP train step
    (784-512-512-10, batch 128, SGD update) and the gradient of a 60-layer tanh network.
(2) XLA compile time (``lower(...).compile()``, first compile, one sample) of the same programs,
    passes off / on (ms).
(3) Elman RNN forward, 200 steps, input 256, hidden 256, batch 32, and a 2-layer LSTM step
    (batch 32, hidden 256): compiled steady state, ftrans / jax.  Targets: RNN <= 0.7x and LSTM
    <= 0.9x jax -- they need the scan-hoisting and merged-matmul passes, which are not built yet
    (see docs/optimizer.md), so the script reports the ratios without them.
"""

from __future__ import annotations

import argparse
import functools
import re
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

import ftrans
import ftrans.numpy as fnp
from ftrans import lax as flax


def n_ops(text: str) -> int:
    return len(re.findall(r"\bstablehlo\.[a-z_]+", text))


def mlp_step(m, grad):
    def loss(params, x, y):
        h = x
        for w, b in params[:-1]:
            h = m.maximum(h @ w + b, 0.0)
        w, b = params[-1]
        return m.mean((h @ w + b - y) ** 2)

    def step(params, x, y):
        g = grad(loss)(params, x, y)
        return [(w - 0.01 * gw, b - 0.01 * gb) for (w, b), (gw, gb) in zip(params, g)]
    return step


def tanh60(m, grad):
    def f(ws, x):
        for w in ws:
            x = m.tanh(x @ w)
        return m.sum(x)
    return grad(f)


def timed(fn, reps):
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def _run_blocked(f, a):
    """One call of ``f(*a)``, waiting for every output."""
    return jax.tree_util.tree_map(lambda v: v.block_until_ready(), f(*a))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    reps = 3 if args.quick else 7
    rng = np.random.default_rng(0)
    sizes = [784, 512, 512, 10]
    params = [(rng.normal(size=(a, b)).astype(np.float32) * 0.05, np.zeros(b, np.float32))
              for a, b in zip(sizes[:-1], sizes[1:])]
    x, y = rng.normal(size=(128, 784)).astype(np.float32), rng.normal(size=(128, 10)).astype(np.float32)
    ws = [rng.normal(size=(32, 32)).astype(np.float32) * 0.2 for _ in range(60)]
    xt = rng.normal(size=(8, 32)).astype(np.float32)
    cases = [("MLP train step", mlp_step, (params, x, y)), ("60-layer tanh grad", tanh60, (ws, xt))]
    print("(1)/(2) StableHLO ops and XLA compile time, passes off -> on (jax)")
    for name, make, a in cases:
        f_off = ftrans.jit(make(fnp, ftrans.grad), optimizations="none")
        f_on = ftrans.jit(make(fnp, ftrans.grad))
        lo_off, lo_on = f_off.lower(*a), f_on.lower(*a)
        j = jax.jit(make(jnp, jax.grad)).lower(*a).as_text()
        c_off = timed(lo_off.compile, 1) * 1e3  # once: a second compile would hit the XLA cache
        c_on = timed(lo_on.compile, 1) * 1e3
        print(f"  {name:20s} ops {n_ops(lo_off.as_text()):5d} -> {n_ops(lo_on.as_text()):5d} (jax {n_ops(j)});"
              f"  compile {c_off:7.1f} -> {c_on:7.1f} ms")

    print("(3) recurrent programs, compiled steady state (ftrans / jax)")
    Wx = rng.normal(size=(256, 256)).astype(np.float32) * 0.05
    Wh = rng.normal(size=(256, 256)).astype(np.float32) * 0.05
    xs = rng.normal(size=(200, 32, 256)).astype(np.float32)

    def rnn(m, scan):
        def f(Wx, Wh, xs):
            def cell(h, x_t):
                h = m.tanh(x_t @ Wx + h @ Wh)
                return h, h
            return scan(cell, m.zeros((32, 256), m.float32), xs)[1]
        return f

    Ws = [rng.normal(size=(256, 256)).astype(np.float32) * 0.05 for _ in range(16)]

    def lstm(m, sig):
        def f(Ws, x, h, c):
            for layer in range(2):
                W = Ws[8 * layer: 8 * layer + 8]
                i = sig(x @ W[0] + h @ W[1])
                fg = sig(x @ W[2] + h @ W[3])
                o = sig(x @ W[4] + h @ W[5])
                g = m.tanh(x @ W[6] + h @ W[7])
                c = fg * c + i * g
                h = o * m.tanh(c)
                x = h
            return h, c
        return f

    h0 = rng.normal(size=(32, 256)).astype(np.float32)
    progs = [("Elman RNN 200 steps", rnn(fnp, flax.scan), rnn(jnp, jax.lax.scan), (Wx, Wh, xs), 0.7),
             ("2-layer LSTM step", lstm(fnp, ftrans.nn.sigmoid), lstm(jnp, jax.nn.sigmoid), (Ws, h0, h0, h0), 0.9)]
    for name, ff, fj, a, target in progs:
        fa, ja, fo = ftrans.jit(ff), jax.jit(fj), ftrans.jit(ff, optimizations="none")
        np.testing.assert_allclose(np.asarray(jax.tree_util.tree_leaves(fa(*a))[0]),
                                   np.asarray(jax.tree_util.tree_leaves(ja(*a))[0]), rtol=2e-3, atol=2e-3)
        tf = timed(functools.partial(_run_blocked, fa, a), reps * 3)
        tj = timed(functools.partial(_run_blocked, ja, a), reps * 3)
        to = timed(functools.partial(_run_blocked, fo, a), reps * 3)
        print(f"  {name:20s} ftrans {tf * 1e3:8.2f} ms (passes off {to * 1e3:8.2f})  jax {tj * 1e3:8.2f} ms"
              f"  ratio {tf / tj:5.2f}"
              f"  (target <= {target}: {'met' if tf / tj <= target else 'not met'})")


if __name__ == "__main__":
    main()
