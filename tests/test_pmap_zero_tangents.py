"""A ``pmap`` output whose tangent is a symbolic zero has the mapped (whole-array) type, not one device's
block type, under ``jvp`` and ``jvp``-of-``vjp``, against jax."""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import numpy as np
import pytest

import ftrans

pytestmark = pytest.mark.skipif(jax.local_device_count() < 2, reason="needs host devices (tests/conftest.py)")


def _constant_output(lib):
    f = lib.pmap(lambda x: (x * 2.0, lib.numpy.float32(3.0)), axis_name="i")
    x = np.arange(2.0, dtype=np.float32)
    return lib.jvp(f, (x,), (np.ones(2, np.float32),))


def _jvp_of_vjp(lib):
    def loss(params, meta):
        net, mpo = params
        return meta * mpo * net

    def inner(meta, params):
        grads = lib.lax.psum(lib.grad(loss)(params, meta), axis_name="i")
        return params[1] * (params[0] + grads[0])

    f = lib.pmap(lambda p: lib.grad(inner)(lib.numpy.array(4.0), p), axis_name="i")
    p = (lib.numpy.array([2.0]), lib.numpy.array([3.0]))

    def h(p, ct):
        return lib.vjp(f, p)[1](ct)

    return lib.jvp(h, (p, lib.numpy.ones(1)), (p, lib.numpy.ones(1)))


@pytest.mark.parametrize("case", [_constant_output, _jvp_of_vjp])
def test_zero_tangent_of_pmap_output_has_mapped_shape(case):
    want = case(jax)
    got = case(ftrans)
    wl, gl = jax.tree.leaves(want), jax.tree.leaves(got)
    assert [np.shape(a) for a in gl] == [np.shape(a) for a in wl]
    for a, b in zip(gl, wl):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b))
