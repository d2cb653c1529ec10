"""Eager loops that run long are compiled once instead of dispatching a program per step (JAX compiles
every loop it evaluates): results, dtypes and weak types match JAX's on both sides of the threshold."""

from __future__ import annotations

import jax
import jax.numpy as jnp_jax
import numpy as np
import pytest

import ftrans
import ftrans.numpy as jnp
from ftrans.lowering.rules import control_flow as lowered_cf

N = lowered_cf.HOST_LOOP_STEPS


def _step(lib, np_mod):
    @lib.jit
    def step(p, s):
        return p - 0.05 * np_mod.sin(p - 1.0), s + 1

    return step


@pytest.mark.parametrize("length", [3, 4 * N + 1])
def test_eager_scan_matches_jax(length):
    def run(lib, np_mod):
        step = _step(lib, np_mod)

        def body(c, x):
            c = step(*c)
            return c, c[0] * x

        return lib.lax.scan(body, (np_mod.zeros(3), np_mod.asarray(0)), np_mod.arange(length, dtype=np.float32))

    (p, s), ys = run(ftrans, jnp)
    (pj, sj), ysj = run(jax, jnp_jax)
    for a, b in [(p, pj), (s, sj), (ys, ysj)]:
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)
    if length > N:  # ran as one compiled program, kept with the body's jaxpr
        assert any(key[0][0].shape == (3,) for per in lowered_cf._loop_programs.values() for key in per)


@pytest.mark.parametrize("trips", [N // 2, 3 * N + 5])
def test_eager_while_hands_its_carry_to_the_compiled_loop(trips):
    def run(lib):
        return lib.lax.while_loop(lambda c: c[0] < trips, lambda c: (c[0] + 1, c[1] * 0.5 + c[0], c[2] + 1.0),
                                  (0, np.float32(1.0), 0.0))

    out, ref = run(ftrans), run(jax)
    for a, b in zip(out, ref):
        assert a.dtype == b.dtype and a.weak_type == b.weak_type
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6)


def test_eager_scan_weak_carry_and_reverse():
    def run(lib):
        return lib.lax.scan(lambda c, x: (c + x, c * 2.0), 0.0, np.arange(2 * N, dtype=np.float32) / N,
                            reverse=True)

    (c, ys), (cj, ysj) = run(ftrans), run(jax)
    assert c.weak_type == cj.weak_type and c.dtype == cj.dtype and ys.dtype == ysj.dtype
    np.testing.assert_allclose(np.asarray(c), np.asarray(cj), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(ys), np.asarray(ysj), rtol=1e-6)
