"""Each public alias in ``ftrans.numpy`` (``acos`` of ``arccos``, ``pow`` of ``power``) is its own function named
as it is spelled, as in JAX (whose tests name generated cases after ``func.__name__``)."""

from __future__ import annotations

import pickle
import types

import jax.numpy as jjnp
import numpy as np

import ftrans.numpy as jnp


def _aliases():
    return [n for n, f in vars(jjnp).items()
            if not n.startswith("_") and callable(f) and getattr(f, "__name__", None) == n
            and type(getattr(jnp, n, None)) is types.FunctionType]


def test_every_function_is_named_as_in_jax():
    names = _aliases()
    assert {"acos", "arccos", "pow", "power", "abs", "absolute", "bitwise_invert", "conj"} <= set(names)
    wrong = {n: getattr(jnp, n).__name__ for n in names if getattr(jnp, n).__name__ != n}
    assert wrong == {}
    assert jnp.acos is not jnp.arccos
    # distinct module-qualified names, as JAX's parameterized tests build them
    spelled = {f"{getattr(jnp, n).__module__}.{getattr(jnp, n).__name__}" for n in names}
    assert len(spelled) == len(names)


def test_an_alias_computes_as_its_original_and_as_jax():
    x = np.float32(0.5)
    for n in ("acos", "asinh", "atan2", "pow", "abs", "mod", "divide", "degrees", "bitwise_invert"):
        args = (np.int32(-5),) if n == "bitwise_invert" else (x, np.float32(2.0)) if n in ("atan2", "pow", "mod", "divide") else (x,)
        np.testing.assert_allclose(np.asarray(getattr(jnp, n)(*args)), np.asarray(getattr(jjnp, n)(*args)), rtol=1e-6)


def test_an_alias_pickles_as_itself():
    assert pickle.loads(pickle.dumps(jnp.acos)) is jnp.acos
