"""Differential fuzzing of calls inside loops under ``jit``: nested ``jit`` calls whose second result is read or
not, ``checkpoint``, ``scan`` and ``while_loop`` whose accumulating carry is read or not, ``cond``, sequences
and pairs with an unread member, nested four deep, then ``jit``, ``jit(grad)`` (``jit(jacfwd)`` where a
``while_loop`` is involved, which jax cannot reverse) and ``jit(vmap(grad))``, ftrans against jax.

``tests/test_fuzz_control_flow.py`` draws richer control flow but no nested ``jit`` with unread results;
this generator found the dead-code pass dropping a loop carry that a kept call still read
(``tests/test_dce_calls_in_loops.py``): seeds 10, 38, 1002, 1016, 1057 and 1074 failed before that fix
(five of them when run as this file runs them: the dead-code pass memoises across programs).
``python -m tests.test_fuzz_calls_in_loops SEED COUNT`` runs COUNT programs from SEED.
"""

from __future__ import annotations

import random
import sys

import jax
import jax.lax as jlax
import jax.numpy as jjnp
import numpy as np
import pytest

import ftrans
import ftrans.lax as flax
import ftrans.numpy as fjnp
from tests.thorough import THOROUGH

JAX = (jax, jjnp, jlax)
FTRANS = (ftrans, fjnp, flax)


def build(ns: tuple, seed: int, depth: int = 4):
    """The program of ``seed`` against one library's namespace: ``(f(w, x) -> scalar, holds_a_while)``."""
    lib, jnp, lax = ns
    rng = random.Random(seed)
    has_while = [False]

    def leaf():
        op = rng.choice(["sin", "tanh", "sq", "mul", "exp_neg"])
        return {"sin": lambda h, x: jnp.sin(h + x), "tanh": lambda h, x: jnp.tanh(h * 1.1 - x),
                "sq": lambda h, x: h * h * 0.5 + x, "mul": lambda h, x: h * x + 0.1,
                "exp_neg": lambda h, x: jnp.exp(-h * h) + x}[op]

    def gen(d):
        if d <= 0 or rng.random() < 0.25:
            return leaf()
        kind = rng.choice(["call", "remat", "scan", "while", "cond", "pair_unused", "seq"])
        a = gen(d - 1)
        if kind == "call":
            j = lib.jit(lambda h, x: (a(h, x), (h * x).sum()))
            second = rng.random() < 0.5
            return lambda h, x: j(h, x)[0] + (0.01 * j(h, x)[1] if second else 0.0)
        if kind == "remat":
            return lib.checkpoint(a)
        if kind == "seq":
            b = gen(d - 1)
            return lambda h, x: b(a(h, x), x)
        if kind == "pair_unused":
            b = gen(d - 1)
            return lambda h, x: (a(h, x), b(h, x))[0]
        if kind == "scan":
            use_acc, use_ys = rng.random() < 0.5, rng.random() < 0.5

            def scanned(h, x):
                def body(c, xi):
                    hh, acc = c
                    y = a(hh, xi * x)
                    return (y, acc + y.sum()), y.mean()

                (hh, acc), ys = lax.scan(body, (h, 0.0), jnp.linspace(-0.5, 0.5, 3)[:, None] * jnp.ones_like(h))
                return hh + (0.1 * acc if use_acc else 0.0) + (0.1 * ys.sum() if use_ys else 0.0)

            return scanned
        if kind == "while":
            has_while[0] = True
            use_acc = rng.random() < 0.5

            def looped(h, x):
                def body(c):
                    i, hh, acc = c
                    y = a(hh, x)
                    return i + 1, y, acc + y.sum()

                _, hh, acc = lax.while_loop(lambda c: c[0] < 2, body, (0, h, 0.0))
                return hh + (0.1 * acc if use_acc else 0.0)

            return looped
        b = gen(d - 1)  # cond
        return lambda h, x: lax.cond(h.sum() > 0.3, a, b, h, x)

    f = gen(depth)
    return (lambda w, x: f(w, x).sum()), has_while[0]


W = np.linspace(-0.4, 0.6, 3).astype(np.float32)
X = np.float32(0.7)


def results(ns: tuple, seed: int) -> tuple:
    lib = ns[0]
    f, has_while = build(ns, seed)
    d = lib.jacfwd if has_while else lib.grad
    return (np.asarray(lib.jit(f)(W, X)), np.asarray(lib.jit(d(f))(W, X)),
            np.asarray(lib.jit(lib.vmap(d(f), in_axes=(0, None)))(np.stack([W, -W]), X)))


def check(seed: int) -> None:
    want = results(JAX, seed)
    got = results(FTRANS, seed)
    for g, w, what in zip(got, want, ("jit", "jit(grad)", "jit(vmap(grad))")):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5, err_msg=f"seed {seed}: {what}")


FOUND = [10, 38, 1002, 1016, 1057, 1074]  # failed before the dead-code fix
SEEDS = FOUND + [s for s in range(400 if THOROUGH else 24) if s not in FOUND]


@pytest.mark.parametrize("seed", SEEDS)
def test_calls_in_loops_match_jax(seed):
    check(seed)


if __name__ == "__main__":
    start, count = int(sys.argv[1]), int(sys.argv[2])
    failed = []
    for s in range(start, start + count):
        try:
            check(s)
        except AssertionError as e:
            failed.append(s)
            print(f"seed {s}: {str(e).splitlines()[0]}")
    print(f"{count - len(failed)} of {count} agree; failed: {failed}")
