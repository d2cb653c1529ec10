"""``pmap(f).lower(...)`` and its ``compile()``: the executable runs, checks its arguments' structure and
types, takes compiler options, and reports costs, against jax on 8 host devices."""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import numpy as np
import pytest

import ftrans

pytestmark = pytest.mark.skipif(jax.local_device_count() < 8, reason="needs 8 host devices (tests/conftest.py)")


def _f(lib):
    return lib.pmap(lambda x, y: (x - lib.lax.pmean(y, "i"), y * 2), axis_name="i")


X = np.arange(32, dtype=np.float32).reshape(8, 4)


@pytest.mark.parametrize("options", [None, {"xla_embed_ir_in_executable": True}])
def test_lower_compile_runs_like_jax(options):
    want = _f(jax).lower(X, X).compile(compiler_options=options)
    lowered = _f(ftrans).lower(X, X)
    got = lowered.compile(compiler_options=options)
    for a, b in zip(got(X, X), want(X, X)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b))
    for obj in (lowered, got):
        assert obj.in_tree == want.in_tree
        assert obj._no_kwargs is False
        ((a1, a2), kw) = obj.in_avals
        assert kw == {} and (a1.shape, a1.dtype) == (a2.shape, a2.dtype) == (X.shape, X.dtype)
    assert isinstance(lowered.cost_analysis(), dict)
    assert got.cost_analysis() is not None and got.memory_analysis() is not None
    assert got.runtime_executable() is not None and isinstance(got.as_text(), str)


@pytest.mark.parametrize("call", ["tree", "dtype"])
def test_compiled_rejects_other_arguments_like_jax(call):
    for lib in (jax, ftrans):
        exe = _f(lib).lower(X, X).compile()
        args = ([X], X) if call == "tree" else (X.astype(np.int32), X)
        with pytest.raises(TypeError, match="input pytree" if call == "tree" else "(?i)argument"):
            exe(*args)


@pytest.mark.parametrize("options", [{"invalid_key": "v"}, {"xla_embed_ir_in_executable": "invalid_value"}])
def test_bad_compiler_options_raise_runtime_error_like_jax(options):
    for lib in (jax, ftrans):
        lowered = _f(lib).lower(X, X)
        with pytest.raises(lib.errors.JaxRuntimeError):
            lowered.compile(compiler_options=options)
