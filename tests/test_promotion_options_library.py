"""``numpy_rank_promotion='raise'`` and ``numpy_dtype_promotion='strict'`` constrain the user's operands, not
ftrans's library internals.

JAX's own test suite runs with both settings on, and JAX's library is written not to trip them, so a JAX user
can turn them on and still call ``jax.scipy``, ``jax.nn`` or ``jax.experimental.sparse``. ftrans's library
functions build on ``jnp`` and promote implicitly inside: under these settings 51 of them raised (``svd`` of
an int matrix, ``scipy.signal.welch``, ``wofz``, ``multivariate_normal.logpdf``, BCOO indexing, ...). A failing
check is now read against the frames above it (``errors.library_internal``): inside a library function it is
that function's arithmetic; from the user's code (a function the user passes in included) it still raises.
"""

from __future__ import annotations

import importlib
import inspect
import warnings

import numpy as np
import pytest

import ftrans
import ftrans.numpy as jnp
from ftrans import lax
from ftrans.errors import TypePromotionError

MODULES = ["ftrans.scipy.special", "ftrans.nn", "ftrans.scipy.signal", "ftrans.scipy.fft", "ftrans.scipy.linalg",
           "ftrans.numpy.linalg", "ftrans.numpy.fft", "ftrans.scipy.stats.norm", "ftrans.scipy.stats.poisson",
           "ftrans.scipy.stats.multivariate_normal", "ftrans.scipy.integrate", "ftrans.image"]

_RNG = np.random.default_rng(0)
V = _RNG.uniform(0.1, 2.0, (3, 4)).astype(np.float32)
M = (_RNG.normal(size=(4, 4)) + 4 * np.eye(4)).astype(np.float32)
IV = np.arange(1, 13, dtype=np.int32).reshape(3, 4)
ARGS = {1: [(V,), (M,), (IV,)], 2: [(V, V), (M, M), (V, np.float32(0.5)), (IV, IV)], 3: [(V, V, V), (M, M, M)]}


def _run(f, args):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = f(*args)
    except Exception as e:  # noqa: BLE001 - the outcome is what is compared
        return type(e), []
    return None, [np.asarray(leaf) for leaf in ftrans.tree_util.tree_leaves(out) if hasattr(leaf, "shape")]


def _functions(modname):
    mod = importlib.import_module(modname)
    for name in sorted(dir(mod)):
        f = getattr(mod, name)
        if name.startswith("_") or not callable(f) or isinstance(f, type):
            continue
        try:
            params = inspect.signature(f).parameters.values()
        except (TypeError, ValueError):
            continue
        k = len([p for p in params if p.default is inspect._empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)])
        yield name, f, ARGS.get(k, [])


@pytest.mark.parametrize("modname", MODULES)
def test_library_functions_run_as_under_the_default_options(modname):
    tried = 0
    for name, f, argsets in _functions(modname):
        for args in argsets:
            err, want = _run(f, args)
            if err is not None:
                continue  # not this function's kind of argument
            tried += 1
            with ftrans.numpy_rank_promotion("raise"), ftrans.numpy_dtype_promotion("strict"):
                err, got = _run(f, args)
            assert err is None, f"{modname}.{name}{tuple(np.shape(a) for a in args)} raised {err.__name__}"
            assert len(got) == len(want)
            for g, w in zip(got, want):
                assert (g.dtype, g.shape) == (w.dtype, w.shape), f"{modname}.{name}"
                np.testing.assert_array_equal(g, w, err_msg=f"{modname}.{name}")
    assert tried >= 3


def test_sparse_and_spatial_under_the_strict_options():
    from ftrans.experimental import sparse
    from ftrans.scipy.spatial.transform import Rotation

    dense = np.array([[0, 1.0, 0], [2, 0, 3]], np.float32)
    quats = np.array([[0, 0, 0, 1.0], [0, 1, 0, 0]], np.float32)
    cases = [
        lambda: sparse.BCOO.fromdense(dense)[1].todense(),
        lambda: sparse.BCOO.fromdense(dense).sum(0).todense(),
        lambda: (sparse.BCOO.fromdense(dense) * sparse.BCOO.fromdense(dense)).todense(),
        lambda: sparse.BCOO.fromdense(dense).reshape(3, 2).todense(),
        lambda: Rotation.from_quat(quats).inv().as_quat(),
    ]
    for case in cases:
        want = np.asarray(case())
        with ftrans.numpy_rank_promotion("raise"), ftrans.numpy_dtype_promotion("strict"):
            np.testing.assert_array_equal(np.asarray(case()), want)


def _user_rank_cases():
    a, b = np.ones((2, 3), np.float32), np.ones(3, np.float32)
    return [
        ("jnp.add", lambda: jnp.add(a, b)),
        ("operator", lambda: jnp.asarray(a) * jnp.ones(3)),
        ("jit(jnp.add)", lambda: ftrans.jit(jnp.add)(a, b)),
        ("inside the user's scan body", lambda: lax.scan(lambda c, v: (c, v + b), 0.0, np.ones((2, 2, 3), np.float32))),
        ("inside a function passed to lax.map", lambda: lax.map(lambda v: v * a, np.ones((4, 3), np.float32))),
        ("vmap of the user's function", lambda: ftrans.vmap(lambda v: v * a)(np.ones((4, 3), np.float32))),
    ]


@pytest.mark.parametrize("case", range(6))
def test_the_users_own_operands_are_still_checked(case):
    what, f = _user_rank_cases()[case]
    with ftrans.numpy_rank_promotion("raise"), pytest.raises(ValueError, match="numpy_rank_promotion='raise'"):
        f()
    with ftrans.numpy_rank_promotion("warn"), pytest.warns(UserWarning, match="Following NumPy automatic rank promotion for "):
        f()
    with ftrans.numpy_dtype_promotion("strict"), pytest.raises(TypePromotionError, match="strict"):
        jnp.add(np.ones(3, np.int32), 1.5)
    with ftrans.numpy_dtype_promotion("strict"), pytest.raises(TypePromotionError, match="strict"):
        ftrans.jit(lambda x: x * 0.5)(np.ones(3, np.int32))


def test_library_internals_do_not_warn():
    import ftrans.scipy.special as sp

    x = np.linspace(0.1, 1, 16).astype(np.float32)
    with ftrans.numpy_rank_promotion("warn"), warnings.catch_warnings():
        warnings.simplefilter("error")
        sp.bessel_jn(x, v=3)
        sp.multigammaln(x + 3, 2)
