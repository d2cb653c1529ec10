"""Programs from JAX's documentation (second pass: the JEPs, the FAQ and reference pages, docstring examples of
custom_derivatives, checkify, debugging, dtypes, random, state, ...) that once behaved differently under ftrans,
each run under both libraries and compared."""

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
    """A value's printed form with its weak type (``repr`` of an Array shows ``weak_type=True``)."""
    return repr(x).replace("ftrans", "jax")


@pytest.mark.parametrize("primal", [1.0, np.float32(1.0), 3])
def test_linear_transpose_traces_on_weak_primals(primal):
    # custom_derivatives.linear_call's docstring: transpose(lambda x: x + x / 3., 1.)(18.) is weakly typed,
    # since the function is traced on the weak input 1.0 as JAX does
    def program(m):
        fs = [lambda x: x + x / 3, lambda x: x * 2, lambda x: x + x, lambda x: 3 * x - x]
        out = []
        for f in fs:
            for ct in (18.0, np.float32(18.0), 18):
                try:
                    out.append(_typed(m.linear_transpose(f, primal)(ct)))
                except TypeError:  # an integer cotangent for a float output, in both
                    out.append("TypeError")
        sds = m.ShapeDtypeStruct((), np.float32)
        out.append(_typed(m.linear_transpose(lambda x: 2 * x, sds)(1.0)))
        return out

    f, j = _both(program)
    assert f == j
