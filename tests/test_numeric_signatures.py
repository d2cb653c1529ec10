"""Every public function of the numeric namespaces takes JAX's keyword arguments: for each callable that
``jax.<ns>`` and ``ftrans.<ns>`` both export, each parameter of JAX's that a caller can name
(positional-or-keyword or keyword-only) is a parameter of ftrans's, under the same name."""

from __future__ import annotations

import importlib
import inspect

import pytest

NAMESPACES = ["numpy", "numpy.linalg", "numpy.fft", "scipy.special", "scipy.linalg", "scipy.signal", "scipy.fft",
              "scipy.ndimage", "scipy.integrate", "scipy.interpolate", "scipy.optimize", "scipy.stats", "nn",
              "nn.initializers", "lax", "lax.linalg", "image", "random"]

# Sharding placement (``out_sharding``) is covered by the sharding tests; JAX's ufunc ``__call__`` takes
# ``out``/``where`` only to reject them.
SKIP = {"out_sharding"}
UFUNC_CALL = {"out", "where"}


def _params(fn):
    try:
        return inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return None


def _callables(j, f, label):
    for n in sorted(dir(j)):
        if n.startswith("_"):
            continue
        jf, ff = getattr(j, n), getattr(f, n, None)
        if inspect.ismodule(jf) and inspect.ismodule(ff) and label == "scipy.stats":
            yield from _callables(jf, ff, f"{label}.{n}")
        elif ff is not None and callable(jf) and not isinstance(jf, type):
            yield f"{label}.{n}", jf, ff


@pytest.mark.parametrize("ns", NAMESPACES)
def test_keyword_parameters_as_in_jax(ns):
    j = importlib.import_module(f"jax.{ns}")
    f = importlib.import_module(f"ftrans.{ns}")
    missing = {}
    for name, jf, ff in _callables(j, f, ns):
        jp, fp = _params(jf), _params(ff)
        if jp is None or fp is None or any(p.kind == p.VAR_KEYWORD for p in fp.values()):
            continue
        skip = SKIP | (UFUNC_CALL if type(jf).__name__ == "ufunc" else set())
        want = [k for k, p in jp.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and k not in skip]
        lack = [k for k in want if k not in fp]
        if lack:
            missing[name] = lack
    assert missing == {}


def test_renamed_parameters_compute_as_jax():
    import jax
    import numpy as np

    import ftrans

    x1, x2 = np.float32([1.0, -2.0]), np.float32([2.0, -3.0])
    np.testing.assert_array_equal(np.asarray(ftrans.lax.nextafter(x1=x1, x2=x2)),
                                  np.asarray(jax.lax.nextafter(x1=x1, x2=x2)))
    for fn in ("ppf", "isf"):
        got = getattr(ftrans.scipy.stats.logistic, fn)(x=np.float32([0.2, 0.7]), loc=1.0, scale=2.0)
        want = getattr(jax.scipy.stats.logistic, fn)(x=np.float32([0.2, 0.7]), loc=1.0, scale=2.0)
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)
    assert str(ftrans.random.key_dtype(impl_spec="rbg")) == str(jax.random.key_dtype(impl_spec="rbg"))
