"""``ftrans.experimental.xla_metadata.set_xla_metadata``: the attributes on staged equations
(``eqn.ctx.xla_metadata``) and on their lowered ops (``mhlo.frontend_attributes``), against JAX's."""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jjnp
import numpy as np
from jax.experimental.xla_metadata import set_xla_metadata as jax_set

import ftrans
import ftrans.numpy as fjnp
from ftrans.experimental.xla_metadata import set_xla_metadata as ft_set

APIS = ((jax, jjnp, jax_set), (ftrans, fjnp, ft_set))


def test_context_manager_marks_equations_and_ops():
    for api, np_, setm in APIS:
        @api.jit
        def f(a, b):
            with setm(a="b"):
                return a + b

        assert all(e.ctx.xla_metadata == {"a": "b"} for e in f.trace(1.0, 2.0).jaxpr.eqns)
        assert 'mhlo.frontend_attributes = {a = "b"}' in f.lower(1.0, 2.0).as_text()
        np.testing.assert_allclose(np.asarray(f(1.0, 2.0)), 3.0)


def test_values_nesting_and_unsetting():
    for api, np_, setm in APIS:
        @api.jit
        def f(x):
            with setm(a=True, n=10):
                y = np_.sin(x)
                with setm(c="d", n=None):
                    return np_.cos(y)

        text = f.lower(1.0).as_text()
        assert 'mhlo.frontend_attributes = {a = "true", n = "10"}' in text, api.__name__
        assert 'mhlo.frontend_attributes = {a = "true", c = "d"}' in text, api.__name__


def test_decorator_and_branches():
    for api, np_, setm in APIS:
        @setm(a="b")
        def g(x):
            return api.lax.cond(x > 0, np_.sin, np_.cos, x)

        lines = api.jit(g).lower(1.0).as_text().splitlines()
        for op in ("stablehlo.sine", "stablehlo.cosine"):
            (line,) = [ln for ln in lines if op in ln]
            assert 'mhlo.frontend_attributes = {a = "b"}' in line, (api.__name__, line)
