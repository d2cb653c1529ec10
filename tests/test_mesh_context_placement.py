"""Where results live under a mesh context, against jax (on the 8 host devices conftest sets up).

Under ``set_mesh(mesh)`` (and ftrans's ``sharding.use_mesh``) JAX places every eager result and every result of
``jit`` called with uncommitted arguments on the context mesh: replicated (``P()``), or, over a mesh of Explicit
axes, typed ``P(None, ...)`` of the result's rank; the deprecated ``with mesh:`` places only ``pjit``'s results.
A committed single-device argument under a mesh of other devices is JAX's incompatible-devices error.  Outside
any mesh context nothing changes (and the eager fast paths are back on)."""

from __future__ import annotations

import os
import warnings
from functools import partial

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
from ftrans.core import trace as ftrace
from ftrans.experimental.pjit import _pjit as fpjit
from ftrans.sharding import AxisType, NamedSharding, P

pytestmark = pytest.mark.skipif(jax.local_device_count() < 8, reason="needs 8 host devices (tests/conftest.py)")

X = np.arange(16.0, dtype=np.float32).reshape(8, 2)


def _where(x) -> tuple:
    """A result's placement, comparable across the two libraries."""
    s = x.sharding
    if type(s).__name__ == "NamedSharding":
        m = s.mesh
        return ("named", tuple(m.axis_names), tuple(m.axis_sizes), tuple(t.name for t in m.axis_types), tuple(s.spec))
    return ("single", next(iter(s.device_set)).id)


def _libs(kind: str):
    fm = ftrans.make_mesh((2,), ("x",), axis_types=(getattr(AxisType, kind),))
    jm = jax.make_mesh((2,), ("x",), axis_types=(getattr(JAxisType, kind),))
    return ((ftrans, fjnp, fm, P, NamedSharding), (jax, jjnp, jm, JP, JNamedSharding))


def _programs(lib, jnp, mesh, PS, NS):
    h = np.arange(4.0, dtype=np.float32)
    s = lib.device_put(X, NS(mesh, PS("x")))
    return {
        "zeros": lambda: jnp.zeros((2, 3)),
        "ones_like_shape": lambda: jnp.ones(5),
        "arange": lambda: jnp.arange(4),
        "eye": lambda: jnp.eye(3),
        "array": lambda: jnp.array([1, 2]),
        "host_op": lambda: jnp.sin(h) * 2,
        "lax_op": lambda: lib.lax.add(h, h),
        "jit_host": lambda: lib.jit(lambda x: x * 2)(h),
        "jit_const": lambda: lib.jit(lambda: 1)(),
        "jit_scalar": lambda: lib.jit(lambda x: x + 1)(3.0),
        "sharded_op": lambda: s * 2,
        "sharded_plus_host": lambda: s + X,
        "sum": lambda: jnp.sum(h),
        "where_filler": lambda: jnp.where(s > 0, s, 0),
        "repeat_noop": lambda: jnp.repeat(np.eye(3), np.array((1, 1, 1)), axis=0),
        "at_add": lambda: jnp.zeros((2, 10)).at[:, jnp.array([1, 3])].add(5.0),
        "device_put_none": lambda: lib.device_put(h),
    }


@pytest.mark.parametrize("kind", ["Explicit", "Auto"])
def test_results_live_on_the_context_mesh_as_jax(kind):
    got = {}
    for lib, jnp, mesh, PS, NS in _libs(kind):
        with lib.set_mesh(mesh):
            progs = _programs(lib, jnp, mesh, PS, NS)
            outs = {k: f() for k, f in progs.items()}  # each program run once (its jit of a fresh lambda compiles)
            got[lib.__name__] = {k: (_where(out), np.asarray(out).tolist()) for k, out in outs.items()}
    assert got["ftrans"] == got["jax"]


def test_use_mesh_places_as_set_mesh():
    fm = ftrans.make_mesh((2,), ("x",), axis_types=(AxisType.Explicit,))
    jm = jax.make_mesh((2,), ("x",), axis_types=(JAxisType.Explicit,))
    with ftrans.sharding.use_mesh(fm):
        f = [_where(fjnp.zeros((4, 2))), _where(ftrans.jit(lambda x: x + 1)(X))]
    with jax.set_mesh(jm):
        j = [_where(jjnp.zeros((4, 2))), _where(jax.jit(lambda x: x + 1)(X))]
    assert f == j


def test_nothing_changes_outside_a_mesh_context():
    fm = ftrans.make_mesh((2,), ("x",), axis_types=(AxisType.Explicit,))
    with ftrans.set_mesh(fm):
        assert not ftrace.eager_everywhere  # the fast paths, which place nothing, step aside
        assert _where(fjnp.ones(3))[0] == "named"
    assert ftrace.eager_everywhere and not ftrace._mesh_eager
    assert _where(fjnp.ones(3)) == ("single", 0)
    assert _where(ftrans.jit(lambda x: x * 2)(X)) == ("single", 0)
    with ftrans.sharding.use_mesh(fm):
        assert _where(fjnp.ones(3))[0] == "named"
    assert ftrace.eager_everywhere and _where(fjnp.ones(3)) == ("single", 0)


def test_legacy_mesh_context_places_only_pjit_results():
    fm = ftrans.make_mesh((4, 2), ("x", "y"), axis_types=(AxisType.Auto,) * 2)
    jm = jax.make_mesh((4, 2), ("x", "y"), axis_types=(JAxisType.Auto,) * 2)
    h = np.arange(4.0, dtype=np.float32)
    res = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from jax.experimental.pjit import pjit as jpjit

        for lib, jnp, mesh, pjit in ((ftrans, fjnp, fm, fpjit), (jax, jjnp, jm, jpjit)):
            with mesh:
                res.append([_where(jnp.zeros(3)), _where(lib.jit(lambda x: x * 2)(h)),
                            _where(pjit(lambda x: x * 2)(h)), _where(pjit(lambda: 1)()),
                            len(pjit(lambda x, jnp=jnp: jnp.sin(x))(h).devices())])
            with lib.set_mesh(mesh):  # set_mesh alone: pjit places nothing (JAX's resource env is empty)
                res[-1].append(_where(pjit(lambda x: x * 2)(h)))
    assert res[0] == res[1]


@pytest.mark.parametrize("n", [2, 1])
def test_committed_argument_off_the_context_mesh_is_an_error_as_jax(n):
    outs = []
    for lib, mesh in ((ftrans, ftrans.make_mesh((n,), ("x",), axis_types=(AxisType.Explicit,))),
                      (jax, jax.make_mesh((n,), ("x",), axis_types=(JAxisType.Explicit,)))):
        d0 = lib.device_put(np.arange(4.0), lib.devices()[0])
        d1 = lib.device_put(np.arange(4.0), lib.devices()[1])
        got = []
        with lib.set_mesh(mesh):
            for f in (lambda: lib.jit(lambda x: x * 2)(d0), lambda: d1 * 2, lambda: d0 * 2):
                try:
                    got.append(_where(f()))
                except ValueError as e:
                    assert "Received incompatible devices" in str(e)
                    got.append("error")
        outs.append(got)
    assert outs[0] == outs[1]


def test_broadcast_like_takes_the_like_arrays_sharding():
    got = []
    for lib, jnp, mesh, PS, NS in _libs("Explicit"):
        with lib.set_mesh(mesh):
            like = lib.device_put(np.arange(16).reshape(8, 2), PS("x", None))
            got.append(_where(lib.lax.broadcast_like(np.arange(2), like)))
            with pytest.raises(ValueError, match="Incompatible types for broadcasting"):
                lib.lax.broadcast_like(lib.device_put(np.arange(2), PS("x")), like)
    assert got[0] == got[1]


def test_vmap_broadcasts_an_unmapped_output_along_its_explicit_mesh_axis():
    got = []
    for lib, jnp, mesh, PS, NS in _libs("Explicit"):
        with lib.set_mesh(mesh):
            arr = lib.device_put(np.arange(8), NS(mesh, PS("x")))
            f = partial(lib.vmap, out_axes=-1)(lambda x: jnp.zeros((4,)))
            got.append([_where(f(arr)), _where(lib.jit(f)(arr)), f(arr).shape])
    assert got[0] == got[1]


def test_jit_returns_an_argument_with_its_own_mesh():
    got = []
    for kinds in ((AxisType, ftrans, fjnp, P, NamedSharding), (JAxisType, jax, jjnp, JP, JNamedSharding)):
        T, lib, jnp, PS, NS = kinds
        mesh = lib.make_mesh((2,), ("x",), axis_types=(T.Explicit,))
        auto = lib.make_mesh((2,), ("x",), axis_types=(T.Auto,))
        with lib.set_mesh(mesh):
            arr = lib.device_put(X, NS(mesh, PS("x")))
            with lib.set_mesh(auto):
                arr2 = jnp.ones(8)
            out1, out2 = lib.jit(lambda x, y: (x, y))(arr, arr2)
            got.append([_where(arr2), _where(out1), _where(out2)])
    assert got[0] == got[1]


def test_out_sharding_results_state_their_rank_over_explicit_axes():
    got = []
    for lib, jnp, mesh, PS, NS in _libs("Explicit"):
        with lib.set_mesh(mesh):
            a = lib.device_put(jnp.eye(4), PS("x"))
            got.append([_where(jnp.zeros((8, 2), out_sharding=PS("x"))),
                        _where(jnp.repeat(a, 2, axis=0, out_sharding=PS("x"))),
                        _where(lib.reshard(np.arange(4.0), PS("x")))])
    assert got[0] == got[1]


def test_context_placed_replicated_values_are_untyped_for_the_rules():
    """docs/differences.md ("Sharding"): JAX raises where ftrans lays the replicated operand out as ``x``."""
    fm = ftrans.make_mesh((2, 2), ("x", "y"), axis_types=(AxisType.Explicit,) * 2)
    jm = jax.make_mesh((2, 2), ("x", "y"), axis_types=(JAxisType.Explicit,) * 2)
    with jax.set_mesh(jm):
        x = jax.device_put(X, JP("x", "y"))
        z = jjnp.zeros((8, 2))
        assert _where(z)[-1] == (None, None)
        with pytest.raises(Exception, match="select cases must have the same shardings"):
            jjnp.where(x > 0, x, z)
    with ftrans.set_mesh(fm):
        x = ftrans.device_put(X, P("x", "y"))
        z = fjnp.zeros((8, 2))
        assert _where(z)[-1] == (None, None)
        out = fjnp.where(x > 0, x, z)
        assert _where(out)[-1] == ("x", "y")
        np.testing.assert_array_equal(np.asarray(out), np.where(X > 0, X, 0))


def test_eager_operations_inside_a_callback_under_a_mesh_context_stay_on_the_host():
    """A pure_callback of an eager shard_map under set_mesh whose function does ftrans arithmetic: the
    callback runs while the program holds the devices, so its eager operations must not become programs on
    the context mesh (they would wait for the running one: this deadlocked). Values as jax's."""
    import threading

    outs = {}

    def run():
        for lib, jnp in ((ftrans, fjnp), (jax, jjnp)):
            mesh = lib.make_mesh((8,), ("x",), axis_types=(getattr(lib.sharding.AxisType, "Explicit"),))
            with lib.set_mesh(mesh):
                def per_shard(x, lib=lib):
                    spec = lib.ShapeDtypeStruct(x.shape, x.dtype)
                    return lib.pure_callback(lambda a: (a + 1, a * 2.0), (spec, spec), x)

                f = lib.shard_map(per_shard, in_specs=lib.P("x"), out_specs=(lib.P("x"), lib.P("x")))
                x = lib.device_put(np.arange(32, dtype=np.float32).reshape(16, 2), lib.P("x"))
                outs[lib.__name__] = [np.asarray(o) for o in f(x)]

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(120)
    assert not t.is_alive(), "deadlock: eager operations in a callback waited for the running program"
    for a, b in zip(outs["ftrans"], outs["jax"]):
        np.testing.assert_array_equal(a, b)
