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


def test_lowered_hlo_names_parameters_and_module_as_jax():
    # docs/debugging/xla_metadata.md prints .lower(1.0).as_text("hlo"): the HLO parameters are named after the
    # arguments (x.1, d__a__.1, rest_1_.1, kw__z__.1) and a lambda's module is jit__lambda, as JAX's
    def program(m):
        def f(x, *rest, **kw):
            return m.numpy.sin(x) * rest[1] + kw["z"]

        out = [m.jit(f).lower(1.0, 2.0, 3.0, z=4.0).as_text("hlo"),
               m.jit(lambda d, k: d["a"] * 2 + k).lower({"a": 1.0, "b": 2.0}, k=5.0).as_text("hlo"),
               m.jit(lambda d: d["a"] * 2, keep_unused=False).lower({"a": 1.0, "b": 2.0}).as_text("hlo"),
               m.jit(f).lower(1.0, 2.0, 3.0, z=4.0).as_text().splitlines()[1]]
        text = m.jit(f).lower(1.0, 2.0, 3.0, z=4.0).as_text(debug_info=True)
        out.append([ln for ln in text.splitlines() if "@main" in ln])
        out.append(float(m.jit(f).lower(1.0, 2.0, 3.0, z=4.0).compile()(1.0, 2.0, 3.0, z=4.0)))
        return out

    f, j = _both(program)
    assert f == j


def test_repr_of_jaxpr_variables_and_literals():
    # docs/notebooks/Writing_custom_interpreters_in_Jax.md prints jaxpr.invars and each equation's
    # invars: Var(id=...):int32[] and Literal(1.0), as JAX's (ids differ)
    import re

    def program(m):
        def bar(w, b, x):
            return m.numpy.dot(w, x) + b + m.numpy.ones(5), x

        closed = m.make_jaxpr(bar)(np.ones((5, 10), np.float32), np.ones(5, np.float32), np.ones(10, np.float32))
        j = closed.jaxpr
        lines = [repr(j.invars), repr(j.outvars)]
        lines += [f"{e.invars} {e.outvars}" for e in j.eqns if e.primitive.name in ("add", "broadcast_in_dim")]
        return [re.sub(r"id=\d+", "id=N", ln) for ln in lines]

    f, j = _both(program)
    assert f == j
