"""``enable_x64()`` inside a control-flow body: the 64-bit values it makes keep their dtypes through the
loop's lowering (which runs with x64 off), eagerly and under ``jit``, as in JAX (jax's x64_context_test
``test_scan_with_contextmanager``: scan's output buffers were int32 for an int64 output under ``jit``)."""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import ftrans
import ftrans.lax as flax
import ftrans.numpy as fjnp


def _scan(lib, np_, lax_):
    def g(a):
        def body(c, _):
            with lib.enable_x64():
                y = (c + a).astype(np_.int64)
                z = y.astype(np_.int32)
                w = np_.float64(1.5) * y
            return c, (z, y, w)
        return lax_.scan(body, np_.int32(2), np_.arange(4))
    return g


def _scan_unrolled(lib, np_, lax_):
    def g(a):
        def body(c, x):
            with lib.enable_x64():
                y = (c + x + a).astype(np_.int64) * np_.int64(2**33)
            return c + 1, y
        return lax_.scan(body, np_.int32(0), np_.arange(5), unroll=2)
    return g


def _while(lib, np_, lax_):
    def g(a):
        def body(c):
            with lib.enable_x64():
                y = c[1] + np_.int64(a)
            return (c[0] + 1, y)
        with lib.enable_x64():
            init = (np_.int32(0), np_.int64(5))
        return lax_.while_loop(lambda c: c[0] < 3, body, init)
    return g


def _cond(lib, np_, lax_):
    def g(a):
        def t(x):
            with lib.enable_x64():
                return (x + np_.int64(1)).astype(np_.int64), np_.float64(2.0) * x

        def f(x):
            with lib.enable_x64():
                return (x - np_.int64(1)).astype(np_.int64), np_.float64(3.0) * x
        return lax_.cond(a > 2, t, f, a)
    return g


def _summary(out):
    return jax.tree_util.tree_map(lambda v: (str(v.dtype), np.asarray(v).tolist()), out)


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("make", [_scan, _scan_unrolled, _while, _cond], ids=lambda m: m.__name__[1:])
def test_x64_values_made_in_a_body_keep_their_dtype(make, jit):
    jf = make(jax, jjnp, jax.lax)
    ff = make(ftrans, fjnp, flax)
    if jit:
        jf, ff = jax.jit(jf), ftrans.jit(ff)
    assert _summary(ff(3)) == _summary(jf(3))


@pytest.mark.parametrize("make", [_scan, _scan_unrolled, _while, _cond], ids=lambda m: m.__name__[1:])
def test_x64_values_made_in_a_body_keep_their_dtype_under_disable_jit(make):
    # A Python-run scan stacks its per-step outputs: an int64 made in an enable_x64 block stays int64.
    with jax.disable_jit():
        want = _summary(make(jax, jjnp, jax.lax)(3))
    with ftrans.disable_jit():
        got = _summary(make(ftrans, fjnp, flax)(3))
    assert got == want


def test_config_x64_enabled_follows_the_context():
    assert ftrans.config.x64_enabled is jax.config.x64_enabled is False
    with ftrans.enable_x64(), jax.enable_x64():
        assert ftrans.config.x64_enabled is jax.config.x64_enabled is True
