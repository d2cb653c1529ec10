"""Cotangents of another floating dtype than their primal (a ``custom_vjp`` bwd rule returning bf16 for an
f32 or f8 argument, which JAX allows) flow unchanged through the transposes of ``gather``, ``scatter``,
``select_n``, ``dynamic_slice`` and ``dynamic_update_slice``: the zeros those rules combine with the
cotangent take its dtype, so the gradient has the bwd rule's dtype and values, as in JAX (jax's
lax_test ``test_gather_with_asymmetric_dtype``)."""

from __future__ import annotations

import contextlib
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import ftrans
import ftrans.lax as flax
import ftrans.numpy as fjnp
from tests.backend_util import host_oracle


def _to_bf16(lib, np_):
    @lib.custom_vjp
    def f(x):
        return x

    f.defvjp(lambda x: (f(x), ()), lambda res, g: (g.astype(np_.bfloat16),))
    return f


def _cases(lib, np_, lax_):
    f = _to_bf16(lib, np_)
    return {
        "gather": lambda x: f(x.at[np_.array([3, 1, 2, 0])].get()),
        "gather_argsort": lambda x: f(x.at[np_.argsort(x)].get()),
        "scatter_operand": lambda x: f(x.at[np_.array([0, 2])].set(np_.array([1.0, 2.0], np_.float32))),
        "scatter_updates": lambda x: f(np_.zeros(6, np_.float32).at[np_.array([0, 2, 1, 2])].set(x)),
        "select": lambda x: f(lax_.select(x > 1, x, np_.zeros_like(x))),
        "where": lambda x: f(np_.where(x > 1, x, 0.0)),
        "dynamic_update_slice_operand": lambda x: f(
            lax_.dynamic_update_slice(x, np_.ones(2, np_.float32), (np_.array(1),))),
        "dynamic_update_slice_update": lambda x: f(
            lax_.dynamic_update_slice(np_.ones(6, np_.float32), x[:2], (np_.array(1),))),
    }


NAMES = list(_cases(jax, jjnp, jax.lax))


def _grad(lib, np_, lax_, name, x, jit):
    fun = _cases(lib, np_, lax_)[name]
    if jit:
        fun = lib.jit(fun)
    out, pullback = lib.vjp(fun, np_.asarray(x))
    (g,) = pullback(np_.ones_like(out))
    return g


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("name", NAMES)
def test_bf16_cotangent_of_f32_primal(name, jit):
    x = np.arange(4, dtype=np.float32)
    with contextlib.nullcontext() if jit else host_oracle():  # eager ftrans: host arithmetic
        want = _grad(jax, jjnp, jax.lax, name, x, jit)
    got = _grad(ftrans, fjnp, flax, name, x, jit)
    assert got.dtype == want.dtype == jjnp.bfloat16
    np.testing.assert_array_equal(np.asarray(got, np.float32), np.asarray(want, np.float32))


def test_f8_primal_bf16_cotangent_through_argsort_gather():
    x = np.arange(8).astype(jjnp.float8_e4m3fn)
    want = _grad(jax, jjnp, jax.lax, "gather_argsort", x, False)
    got = _grad(ftrans, fjnp, flax, "gather_argsort", x, False)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(np.asarray(got, np.float32), np.asarray(want, np.float32))
