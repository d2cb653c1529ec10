"""How ``pmap``'s wrapper behaves as a Python object, against jax: a pmapped function in a class body is a
method (the instance is its first, here static, argument), and an empty ``devices`` list is refused."""

from __future__ import annotations

import os
from functools import partial

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import numpy as np
import pytest

import ftrans

pytestmark = pytest.mark.skipif(jax.local_device_count() < 2, reason="needs host devices (tests/conftest.py)")


def _method_result(lib):
    class A:
        scale = 3

        @partial(lib.pmap, static_broadcasted_argnums=(0,))
        def f(self, x):
            return x * self.scale

    a = A()
    return np.asarray(a.f(np.arange(2.0))), A.f is A.__dict__["f"]


def test_pmapped_method_binds_the_instance():
    want = _method_result(jax)
    got = _method_result(ftrans)
    np.testing.assert_array_equal(got[0], want[0])
    assert got[1] == want[1]


def test_empty_devices_refused():
    for lib in (jax, ftrans):
        with pytest.raises(ValueError, match="must be non-empty"):
            lib.pmap(lambda x: x, axis_name="i", devices=[])
