"""Eager operations on arrays spread over several devices stay spread, as in JAX: each runs as a
one-primitive sharded program (``transforms/sharded_eager.py``), so its result has the layout XLA's
partitioner (or, on Explicit mesh axes, the sharding-in-types rules) gives it.  Checked against jax
on 8 host devices: values, ``.sharding`` specs and device sets; the operator fast paths never take a
committed or sharded array to the host; a committed one-device operand beside a sharded one is
JAX's error; and under ``grad`` the eager primal computations on sharded values still work."""

from __future__ import annotations

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import ftrans
import ftrans.numpy as fjnp
from ftrans.errors import FtransValueError

FD, JD = ftrans.devices(), jax.devices()
A = np.arange(64, dtype=np.float32).reshape(8, 8) / 7


def _mesh(lib, explicit: bool):
    kind = lib.sharding.AxisType.Explicit if explicit else lib.sharding.AxisType.Auto
    return lib.make_mesh((2, 4), ("data", "model"), axis_types=(kind, kind))


# (name, op) pairs run on both libraries' modules: elementwise with scalars (both operator fast paths),
# with a NumPy array, unary, reductions, a transpose and a reshape.
OPS = [
    ("x*2", lambda np_, x: x * 2),
    ("2.5*x", lambda np_, x: 2.5 * x),
    ("x+x", lambda np_, x: x + x),
    ("x-host", lambda np_, x: x - A),
    ("sin", lambda np_, x: np_.sin(x)),
    ("sum0", lambda np_, x: np_.sum(x, axis=0)),
    ("sum", lambda np_, x: np_.sum(x)),
    ("T", lambda np_, x: x.T),
    ("reshape", lambda np_, x: x.reshape(64)),
    ("where", lambda np_, x: np_.where(x > 1, x, 0.0)),
]


@pytest.mark.parametrize("explicit", [False, True])
@pytest.mark.needs_devices(8)
def test_eager_ops_keep_the_layout_like_jax(explicit):
    fm, jm = _mesh(ftrans, explicit), _mesh(jax, explicit)
    fx = ftrans.device_put(A, ftrans.NamedSharding(fm, ftrans.P("data", "model")))
    jx = jax.device_put(A, jax.NamedSharding(jm, jax.P("data", "model")))
    for name, op in OPS:
        fo, jo = op(fjnp, fx), op(jjnp, jx)
        assert type(fo.sharding).__name__ == "NamedSharding", (name, fo.sharding)
        assert tuple(fo.sharding.spec) == tuple(jo.sharding.spec), (name, fo.sharding, jo.sharding)
        assert {d.id for d in fo.devices()} == {d.id for d in jo.devices()}, name
        assert fo.dtype == jo.dtype and fo.weak_type == jo.weak_type, name
        np.testing.assert_allclose(np.asarray(fo), np.asarray(jo), rtol=1e-6, err_msg=name)
    if not explicit:  # a contraction: the partitioner's layout
        fo, jo = fx @ fx, jx @ jx
        assert tuple(fo.sharding.spec) == tuple(jo.sharding.spec)
        np.testing.assert_allclose(np.asarray(fo), np.asarray(jo), rtol=1e-5)
    else:  # inconsistent contraction shardings are a type error in both
        with pytest.raises(Exception, match="contracting"):
            jx @ jx
        with pytest.raises(ftrans.errors.ShardingTypeError, match="contracting"):
            fx @ fx


@pytest.mark.needs_devices(8)
def test_committed_device_array_operators_stay_on_their_device():
    fd1, jd1 = ftrans.device_put(A[0], FD[1]), jax.device_put(A[0], JD[1])
    for op in (lambda x: x * 2.0, lambda x: 2.0 * x, lambda x: x + x, lambda x: x - 1):
        fo, jo = op(fd1), op(jd1)
        assert {d.id for d in fo.devices()} == {d.id for d in jo.devices()} == {1}
        assert fo.committed and jo.committed
        np.testing.assert_allclose(np.asarray(fo), np.asarray(jo))


@pytest.mark.needs_devices(8)
def test_pmap_results_and_mixed_placements():
    fy = ftrans.pmap(lambda v: v + 1)(A[:, :1])
    jy = jax.pmap(lambda v: v + 1)(A[:, :1])
    assert {d.id for d in (fy * 2).devices()} == {d.id for d in (jy * 2).devices()} == set(range(8))
    assert tuple((fy * 2).sharding.spec) == tuple((jy * 2).sharding.spec) == ("_internal_pmap_axis_name",)
    np.testing.assert_allclose(np.asarray(fjnp.sum(fy)), np.asarray(jjnp.sum(jy)))
    # an uncommitted operand joins the layout; one committed to a single device is JAX's error
    u = ftrans.device_put(np.ones((8, 1), np.float32))
    assert {d.id for d in (fy + u).devices()} == set(range(8))
    d0, jd0 = ftrans.device_put(np.ones((8, 1), np.float32), FD[0]), jax.device_put(np.ones((8, 1), np.float32), JD[0])
    with pytest.raises(ValueError, match="incompatible devices"):
        jy + jd0
    with pytest.raises(FtransValueError, match=r"incompatible devices.*with device ids \[0\] on platform CPU") as e:
        fy + d0
    assert __file__ in str(e.value)  # names the user's line


@pytest.mark.needs_devices(8)
def test_grad_with_sharded_values_outside_jit_matches_jax():
    fm, jm = _mesh(ftrans, False), _mesh(jax, False)
    fx = ftrans.device_put(A, ftrans.NamedSharding(fm, ftrans.P("data", None)))
    jx = jax.device_put(A, jax.NamedSharding(jm, jax.P("data", None)))

    def loss(np_, w):
        return np_.sum(np_.frexp(w * w)[0])

    fg = ftrans.grad(lambda w: loss(fjnp, w))(fx)
    jg = jax.grad(lambda w: loss(jjnp, w))(jx)
    np.testing.assert_allclose(np.asarray(fg), np.asarray(jg), rtol=1e-5)
    assert {d.id for d in fg.devices()} == {d.id for d in jg.devices()}
    # an optimiser step written eagerly keeps the parameters laid out as they were
    new, jnew = fx - 0.1 * fg, jx - 0.1 * jg
    assert new.sharding.spec == jnew.sharding.spec == ftrans.P("data")
    assert {d.id for d in new.devices()} == set(range(8)) and new.committed
