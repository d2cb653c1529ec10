"""Programs from JAX's documentation (the s42 sweep of every runnable page: docs/*.md, *.rst, notebooks, JEPs)
that once behaved differently under ftrans, each reduced to the construct and run under both libraries."""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import numpy as np
import pytest

import ftrans


def _both(program):
    return program(ftrans), program(jax)


def _typed(x):
    return (np.asarray(x).tolist(), str(x.dtype), bool(getattr(x, "weak_type", False)))


def test_grad_through_real_and_imag_of_a_python_complex_is_strongly_typed():
    # docs/complex-differentiation: grad(f)(3. + 4j) with f using jnp.real/jnp.imag prints
    # Array(6.-8.j, dtype=complex64): the transposes of real/imag pair the cotangent with a strong zero
    def program(m):
        jnp = m.numpy
        out = []
        for f, z in [(lambda z: jnp.real(z) ** 2 + jnp.imag(z) ** 2, 3. + 4j), (jnp.real, 3. + 4j),
                     (jnp.imag, 1j), (lambda z: jnp.abs(z) ** 2, 3. + 4j), (jnp.real, np.complex64(2 + 1j)),
                     (lambda x: x ** 2, 3.)]:
            out.append(_typed(m.grad(f)(z)))
            out.append(_typed(m.jit(m.grad(f))(z)))
        return out

    f, j = _both(program)
    assert f == j
