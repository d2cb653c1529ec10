"""The type sharding of values with no sharding type, against jax: ``x.aval.sharding`` and
``typeof(x).sharding`` are never None, as JAX's: each dimension unsplit (``P(None, ...)``) over the abstract mesh
in context (a ``set_mesh`` mesh, a ``use_abstract_mesh`` one, a ``shard_map`` body's, or a partitioned ``jit``'s
arguments' mesh), else over the empty abstract mesh.  ftrans's IR keeps such values untyped
(``aval.typed_sharding`` is None)."""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jjnp
import numpy as np
import pytest
from jax.sharding import NamedSharding as JNamedSharding

import ftrans
import ftrans.numpy as fjnp
from ftrans.sharding import AxisType, NamedSharding, P

pytestmark = pytest.mark.skipif(jax.local_device_count() < 8, reason="needs 8 host devices (tests/conftest.py)")

X = np.arange(16.0, dtype=np.float32).reshape(8, 2)


def _norm(spec) -> tuple:
    return tuple(spec)


def _mesh_key(m) -> tuple:
    return (tuple(m.axis_names), tuple(m.axis_sizes), tuple(t.name for t in m.axis_types))


def _seen(lib, jnp, mesh, f, *args):
    """(mesh key, spec) of ``aval.sharding`` of every value ``f`` reports, traced under ``lib.jit``."""
    out = []

    def report(v):
        sh = v.aval.sharding
        out.append((_mesh_key(sh.mesh), _norm(sh.spec)))

    lib.jit(lambda *a: f(report, jnp, *a))(*args)
    return out


def _program(report, jnp, x):
    y = x * 2
    report(y)
    z = jnp.sin(y) @ jnp.ones((2, 3), y.dtype)
    report(z)
    report(jnp.ones((4,)))
    report(jnp.sum(z))
    return z


@pytest.mark.parametrize("axis_type", ["Auto", "Explicit"])
def test_aval_sharding_under_set_mesh_matches_jax(axis_type):
    fm = ftrans.make_mesh((2, 2), ("x", "y"), axis_types=(getattr(AxisType, axis_type),) * 2)
    jm = jax.make_mesh((2, 2), ("x", "y"), axis_types=(getattr(jax.sharding.AxisType, axis_type),) * 2)
    with ftrans.set_mesh(fm):
        got = _seen(ftrans, fjnp, fm, _program, X)
    with jax.set_mesh(jm):
        want = _seen(jax, jjnp, jm, _program, X)
    assert got == want
    assert got[0] == ((("x", "y"), (2, 2), (axis_type,) * 2), (None, None))


def test_aval_sharding_with_no_mesh_is_over_the_empty_mesh():
    got = _seen(ftrans, fjnp, None, _program, X)
    want = _seen(jax, jjnp, None, _program, X)
    assert got == want == [(((), (), ()), (None, None)), (((), (), ()), (None, None)), (((), (), ()), (None,)),
                           (((), (), ()), ())]
    assert repr(fjnp.ones(3).aval.sharding) == repr(jjnp.ones(3).aval.sharding)


def test_jit_traces_with_its_arguments_mesh_when_none_is_set():
    """No mesh in context: inside a jit of arguments laid out over an Auto mesh, the values' types are over
    that mesh's abstract mesh (JAX's ``test_auto_mode_no_context_mesh``)."""
    fm = ftrans.make_mesh((4, 2), ("x", "y"), axis_types=(AxisType.Auto,) * 2)
    jm = jax.make_mesh((4, 2), ("x", "y"), axis_types=(jax.sharding.AxisType.Auto,) * 2)
    fx = ftrans.device_put(X, NamedSharding(fm, P("x", None)))
    jx = jax.device_put(X, JNamedSharding(jm, jax.P("x", None)))
    seen_f, seen_j = [], []

    def f(seen, x):
        seen.append((x.aval.sharding.mesh, x.aval.sharding.spec))
        a = x * 2
        seen.append((a.aval.sharding.mesh, a.aval.sharding.spec))
        return a

    out_f = ftrans.jit(lambda x: f(seen_f, x))(fx)
    out_j = jax.jit(lambda x: f(seen_j, x))(jx)
    assert [(_mesh_key(m), tuple(s)) for m, s in seen_f] == [(_mesh_key(m), tuple(s)) for m, s in seen_j]
    assert seen_f[0][0] == fm.abstract_mesh and seen_f[0][0] == jm.abstract_mesh  # (a jax mesh compares too)
    np.testing.assert_array_equal(np.asarray(out_f), np.asarray(out_j))


def test_shard_map_body_values_are_over_the_manual_mesh():
    fm = ftrans.make_mesh((2, 2), ("x", "y"))
    jm = jax.make_mesh((2, 2), ("x", "y"))

    def run(lib, mesh, jnp, spec):
        seen = []

        def body(x):
            y = jnp.sin(x)
            seen.append((y.aval.sharding.mesh.are_all_axes_manual, tuple(y.aval.sharding.spec)))
            return y

        with lib.set_mesh(mesh):
            x = lib.device_put(X, spec)
            lib.jit(lib.shard_map(body, in_specs=spec, out_specs=spec))(x)
        return seen

    assert run(ftrans, fm, fjnp, P("x", "y")) == run(jax, jm, jjnp, jax.P("x", "y")) == [(True, (None, None))]


def test_default_type_sharding_equals_a_named_sharding_of_the_mesh():
    fm = ftrans.make_mesh((2,), ("x",))
    jm = jax.make_mesh((2,), ("x",))
    seen = []
    with ftrans.set_mesh(fm):
        ftrans.jit(lambda x: seen.append(x.aval.sharding) or x)(np.arange(4.0))
        sh = seen[0]
        assert sh == NamedSharding(fm, P(None))
        assert sh == NamedSharding(fm.abstract_mesh, P(None))
        assert sh.mesh == fm.abstract_mesh and sh.mesh == jm.abstract_mesh
        assert hash(sh) == hash(seen[0])
    assert repr(sh) == repr(JNamedSharding(jm.abstract_mesh, jax.P(None))).replace(", memory_kind=device", "")


def test_typed_values_keep_their_sharding_type():
    fm = ftrans.make_mesh((2, 2), ("x", "y"))
    seen = []
    with ftrans.set_mesh(fm):
        x = ftrans.device_put(X, P("x", "y"))

        @ftrans.jit
        def f(x):
            seen.append((x.aval.typed_sharding is not None, tuple(x.aval.sharding.spec)))
            y = fjnp.ones((3,))
            seen.append((y.aval.typed_sharding is not None, tuple(y.aval.sharding.spec)))
            return x * 2

        f(x)
    assert seen == [(True, ("x", "y")), (False, (None,))]


def test_get_mesh_is_the_empty_mesh_outside_set_mesh():
    fm = ftrans.make_mesh((2,), ("x",))
    assert ftrans.sharding.get_mesh().empty and ftrans.sharding.get_mesh() == jax.sharding.get_mesh()
    with ftrans.set_mesh(fm):
        assert ftrans.sharding.get_mesh() == fm
        with ftrans.set_mesh(None):
            assert ftrans.sharding.get_mesh().empty and ftrans.sharding.get_abstract_mesh().empty
            assert fjnp.arange(4).sharding == ftrans.sharding.SingleDeviceSharding(ftrans.devices()[0])
        with ftrans.set_mesh(ftrans.sharding.get_mesh()):  # the same mesh again
            assert ftrans.sharding.get_mesh() == fm
    with ftrans.set_mesh(ftrans.sharding.get_mesh()):  # the empty mesh sets none
        assert ftrans.sharding.get_mesh().empty
        assert fjnp.arange(4).sharding == ftrans.sharding.SingleDeviceSharding(ftrans.devices()[0])
