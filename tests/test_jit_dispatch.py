"""The cached call paths of a compiled ``jit``: repeated calls answer like the first one, and like jax.

A sharded call whose arguments are already laid out as the program takes them
is answered by a runner registered after the first call (``sharded_jit._remember_fast``),
keyed by the tree, each leaf's shape, dtype, weak type and layout, and the statics.
These tests call each function several times (the later calls take that path)
and compare values, dtypes and layouts with jax, with outputs fed back as inputs
(a training loop), donation, a layout or a weak type that changes between calls,
and a deleted argument.  NumPy arguments take their own key; a call with NumPy
arguments after a call with device arrays (and back) must not cross the two.
"""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jjnp
import numpy as np
import pytest
from jax.sharding import AxisType as JAxisType
from jax.sharding import NamedSharding as JNamedSharding
from jax.sharding import PartitionSpec as JP

import ftrans
import ftrans.numpy as fjnp
from ftrans.errors import DeletedArrayError
from ftrans.sharding import AxisType, NamedSharding, P

needs8 = pytest.mark.skipif(jax.local_device_count() < 8, reason="needs 8 host devices (tests/conftest.py)")


def _meshes():
    fm = ftrans.make_mesh((2, 4), ("d", "m"), axis_types=(AxisType.Auto,) * 2)
    jm = jax.make_mesh((2, 4), ("d", "m"), axis_types=(JAxisType.Auto,) * 2)
    return fm, jm


def _spec(x) -> tuple:
    t = list(tuple(x.sharding.spec))
    while t and t[-1] is None:
        t.pop()
    return tuple(t)


def _same(a, b) -> None:
    assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, a.shape, b.dtype, b.shape)
    assert getattr(a, "weak_type", False) == getattr(b, "weak_type", False)
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6, atol=1e-6)
    assert _spec(a) == _spec(b)


def _step(lib, np_mod):
    def step(p, x):
        h = np_mod.tanh(x @ p["w"])
        return {"w": p["w"] - 0.1 * (x.T @ h), "b": p["b"] * 2.0}, h.sum()

    return step


@needs8
def test_sharded_step_loop_matches_jax_and_takes_the_registered_path():
    fm, jm = _meshes()
    rng = np.random.default_rng(0)
    w, b, x = (rng.normal(size=s).astype(np.float32) for s in ((8, 8), (8,), (4, 8)))
    fsh = {"w": NamedSharding(fm, P(None, "m")), "b": NamedSharding(fm, P())}
    jsh = {"w": JNamedSharding(jm, JP(None, "m")), "b": JNamedSharding(jm, JP())}
    fx, jx = NamedSharding(fm, P("d")), JNamedSharding(jm, JP("d"))
    f = ftrans.jit(_step(ftrans, fjnp), in_shardings=(fsh, fx), out_shardings=(fsh, NamedSharding(fm, P())))
    g = jax.jit(_step(jax, jjnp), in_shardings=(jsh, jx), out_shardings=(jsh, JNamedSharding(jm, JP())))
    pf = ftrans.device_put({"w": w, "b": b}, fsh)
    pj = jax.device_put({"w": w, "b": b}, jsh)
    xf, xj = ftrans.device_put(x, fx), jax.device_put(x, jx)
    for _ in range(4):  # outputs fed back: the second call on is answered by the registered runner
        pf, vf = f(pf, xf)
        pj, vj = g(pj, xj)
        _same(vf, vj)
        for k in ("w", "b"):
            _same(pf[k], pj[k])
    assert f._spmd_fast, "the sharded call registered no runner"
    assert f.cache_info()["misses"] == 1


@needs8
def test_sharded_registered_path_follows_layout_and_weak_type_changes():
    fm, jm = _meshes()
    f = ftrans.jit(lambda v: v * 2)
    g = jax.jit(lambda v: v * 2)
    x = np.arange(32, dtype=np.float32).reshape(8, 4)
    for fs, js in ((P("d", "m"), JP("d", "m")), (P("m"), JP("m"))):
        a = ftrans.device_put(x, NamedSharding(fm, fs))
        b = jax.device_put(x, JNamedSharding(jm, js))
        for _ in range(2):
            _same(f(a), g(b))
    # A weakly typed scalar spread over the mesh, then a strong one: two keys, jax's result types.
    ws = ftrans.device_put(fjnp.asarray(3.0), NamedSharding(fm, P()))
    wj = jax.device_put(jjnp.asarray(3.0), JNamedSharding(jm, JP()))
    ss = ftrans.device_put(np.float32(3.0), NamedSharding(fm, P()))
    sj = jax.device_put(np.float32(3.0), JNamedSharding(jm, JP()))
    for _ in range(2):
        _same(f(ws), g(wj))
        _same(f(ss), g(sj))


@needs8
def test_sharded_registered_path_donates_and_reports_a_deleted_argument():
    fm, jm = _meshes()
    s = NamedSharding(fm, P("d"))
    f = ftrans.jit(lambda v: v + 1.0, donate_argnums=0)
    g = jax.jit(lambda v: v + 1.0, donate_argnums=0)
    x = np.ones((8, 4), np.float32)
    a = ftrans.device_put(x, s)
    b = jax.device_put(x, JNamedSharding(jm, JP("d")))
    for i in range(3):
        old_a, old_b = a, b
        a, b = f(a), g(b)
        _same(a, b)
        # (jax 0.11 does not donate an array _same read into NumPy, whose view holds its buffer; jax 0.10 and
        # ftrans, whose host reads are copies, do)
        assert old_a.is_deleted() and (old_b.is_deleted() or (i > 0 and not jax.__version__.startswith("0.10")))
    # (jax 0.10.2's own call with the deleted sharded array crashes the process, so only ftrans is called.)
    with pytest.raises(DeletedArrayError):
        f(old_a)
    # Without donation: a deleted argument is reported by the registered path's fallback too.
    h = ftrans.jit(lambda v: v - 1.0)
    c = ftrans.device_put(x, s)
    h(c)
    h(c)
    c.delete()
    with pytest.raises(DeletedArrayError):
        h(c)


@needs8
def test_sharded_call_returning_none_runs_once_per_call_as_jax():
    """A sharded program whose function returns None (only effects) runs once per call on the registered
    path too: its None result is not taken for the runner's "ask the general path" answer."""
    fm, jm = _meshes()
    x = np.arange(8, dtype=np.float32)
    seen = {"ftrans": [], "jax": []}
    f = ftrans.jit(lambda v: ftrans.debug.callback(lambda s: seen["ftrans"].append(float(s)), v.sum()))
    g = jax.jit(lambda v: jax.debug.callback(lambda s: seen["jax"].append(float(s)), v.sum()))
    a = ftrans.device_put(x, NamedSharding(fm, P("d")))
    b = jax.device_put(x, JNamedSharding(jm, JP("d")))
    for _ in range(3):
        assert f(a) is None and g(b) is None
        ftrans.effects_barrier()
        jax.effects_barrier()
    assert seen["ftrans"] == seen["jax"] == [28.0] * 3


def test_numpy_and_device_arguments_take_their_own_keys():
    f = ftrans.jit(lambda x, y: x * y + 1.0)
    g = jax.jit(lambda x, y: x * y + 1.0)
    a = np.arange(4, dtype=np.float32)
    b = np.full(4, 2, np.int32)
    for xs in ((a, a), (ftrans.device_put(a), ftrans.device_put(a)), (a, b), (a, ftrans.device_put(a)),
               (ftrans.device_put(a), a)):
        for _ in range(2):
            got = f(*xs)
            want = g(*[np.asarray(v) for v in xs])
            assert got.dtype == want.dtype and got.weak_type == want.weak_type
            np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


@needs8
def test_sharded_registered_path_after_pmap_donation_reports_the_deleted_argument():
    """pmap's donation consumes the buffer in the runtime; a sharded jit called before with that array must
    report it as deleted, as after any other donation (a deleted buffer handed to the runtime is an error in
    the runtime, or a crash)."""
    f = ftrans.jit(lambda v: v + 1)
    y = ftrans.pmap(lambda v: v * 2)(np.ones((8, 4), np.float32))
    yj = jax.pmap(lambda v: v * 2)(np.ones((8, 4), np.float32))
    np.testing.assert_array_equal(np.asarray(f(y)), np.asarray(jax.jit(lambda v: v + 1)(yj)))
    f(y)
    ftrans.pmap(lambda v: v + 0, donate_argnums=0)(y)
    jax.pmap(lambda v: v + 0, donate_argnums=0)(yj)
    assert y.is_deleted() == yj.is_deleted()
    if y.is_deleted():
        with pytest.raises(DeletedArrayError):
            f(y)


@needs8
def test_sharded_registered_path_follows_x64():
    """Switching x64 empties the registered runners: the same sharded int32 argument then gets the program
    traced under x64 (``arange`` is int64 there, as with jax's x64 on)."""
    fm, _ = _meshes()
    f = ftrans.jit(lambda v: v + fjnp.arange(4))
    a = ftrans.device_put(np.arange(8, dtype=np.int32).reshape(2, 4), NamedSharding(fm, P("d")))
    assert f(a).dtype == f(a).dtype == np.int32
    assert f._spmd_fast
    old = ftrans.config.enable_x64
    try:
        ftrans.config.update("enable_x64", not old)
        assert not f._spmd_fast
        for _ in range(2):
            got = f(a)
            assert got.dtype == (np.int32 if old else np.int64)
            np.testing.assert_array_equal(np.asarray(got), np.asarray(a) + np.arange(4))
    finally:
        ftrans.config.update("enable_x64", old)
    assert f(a).dtype == np.int32
