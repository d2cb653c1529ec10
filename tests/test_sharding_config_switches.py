"""JAX's sharding switches, each against jax: ``jax_remove_size_one_mesh_axis_from_type`` (mesh axes of size 1
left out of sharding types and of the manual axes a value varies along), ``jax_auto_pcast`` (implicit ``pvary``
in shard_map bodies) and ``jax_disable_vmap_shmap_error`` (vmap's spmd_axis_name in a shard_map's specs), set
as a user would: ``config.update``, the context manager, the environment variable.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from functools import partial

import jax
import jax.numpy as jjnp
import numpy as np
import pytest
from jax.sharding import AxisType as JAxisType
from jax.sharding import NamedSharding as JNamedSharding
from jax.sharding import PartitionSpec as JP

import ftrans
import ftrans.numpy as fjnp
from ftrans.sharding import AxisType, NamedSharding, P

pytestmark = pytest.mark.needs_devices(4)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@contextlib.contextmanager
def both(name: str, value):
    """Option ``name`` set to ``value`` in jax and in ftrans (by ``config.update``) for the block."""
    jbefore, fbefore = getattr(jax.config, name), ftrans.config.read(name)
    jax.config.update(name, value)
    ftrans.config.update(name, value)
    try:
        yield
    finally:
        jax.config.update(name, jbefore)
        ftrans.config.update(name, fbefore)


def _spec(s) -> tuple:
    """A spec's entries as plain tuples, comparable across the two libraries."""
    return tuple(None if e is None else e if isinstance(e, str) else tuple(e) for e in s)


def _layout(s) -> tuple:
    """A result's spec without its trailing unsplit entries (``P()`` is ``P(None, None)``'s layout)."""
    t = _spec(s)
    while t and t[-1] is None:
        t = t[:-1]
    return t


# --------------------------------------------------------------------------------------------------------
# jax_remove_size_one_mesh_axis_from_type: sharding types


@pytest.mark.parametrize("arr_spec", [("x", "y"), (("x", "y"),), ("y",)])
@pytest.mark.parametrize("how", ["context", "update"])
def test_types_leave_out_size_one_axes_like_jax(arr_spec, how):
    def run(lib, jnp_, P_, mesh, ctx):
        seen = {}
        with ctx, lib.set_mesh(mesh):
            arr = lib.device_put(np.arange(16).reshape(8, 2), P_(*arr_spec))

            @lib.jit
            def f(x):
                seen["in"] = _spec(x.aval.sharding.spec)
                out = x * 2
                seen["mid"] = _spec(out.aval.sharding.spec)
                return lib.lax.with_sharding_constraint(out, P_(*arr_spec))  # an assert over Explicit axes

            out = f(arr)
            seen["typeof"] = _spec(lib.typeof(arr).sharding.spec)
        return seen, _spec(out.sharding.spec), np.asarray(out)

    fm = ftrans.make_mesh((2, 1), ("x", "y"), axis_types=(AxisType.Explicit,) * 2)
    jm = jax.make_mesh((2, 1), ("x", "y"), axis_types=(JAxisType.Explicit,) * 2)
    if how == "context":
        f_res = run(ftrans, fjnp, P, fm, ftrans.remove_size_one_mesh_axis_from_type(True))
        j_res = run(jax, jjnp, JP, jm, jax.remove_size_one_mesh_axis_from_type(True))
    else:
        with both("jax_remove_size_one_mesh_axis_from_type", True):
            f_res = run(ftrans, fjnp, P, fm, contextlib.nullcontext())
            j_res = run(jax, jjnp, JP, jm, contextlib.nullcontext())
    assert f_res[0] == j_res[0]
    assert f_res[1] == j_res[1]
    np.testing.assert_array_equal(f_res[2], j_res[2])
    assert "y" not in {a for e in f_res[0]["in"] if e for a in (e if isinstance(e, tuple) else (e,))}


def test_eager_results_are_laid_out_as_their_types_like_jax():
    def run(lib, jnp_, P_, mesh):
        with lib.remove_size_one_mesh_axis_from_type(True), lib.set_mesh(mesh):
            a = lib.device_put(np.arange(16.0).reshape(8, 2), P_("x", "y"))  # placed as asked; typed without y
            outs = {"device_put": a, "mul": a * 2, "sum": jnp_.sum(a, axis=1),
                    "reshard": lib.sharding.reshard(a, P_("y", "x")),
                    "zeros": jnp_.zeros((8, 2), out_sharding=P_("x", "y"))}
            return {k: (_spec(v.sharding.spec), _spec(lib.typeof(v).sharding.spec), np.asarray(v).tolist())
                    for k, v in outs.items()}

    f = run(ftrans, fjnp, P, ftrans.make_mesh((2, 1), ("x", "y"), axis_types=(AxisType.Explicit,) * 2))
    j = run(jax, jjnp, JP, jax.make_mesh((2, 1), ("x", "y"), axis_types=(JAxisType.Explicit,) * 2))
    assert f == j
    assert f["device_put"][:2] == (("x", "y"), ("x", None))


def test_types_keep_size_one_axes_by_default():
    fm = ftrans.make_mesh((2, 1), ("x", "y"), axis_types=(AxisType.Explicit,) * 2)
    jm = jax.make_mesh((2, 1), ("x", "y"), axis_types=(JAxisType.Explicit,) * 2)
    assert ftrans.config.remove_size_one_mesh_axis_from_type is False
    with ftrans.set_mesh(fm):
        f = ftrans.typeof(ftrans.device_put(np.arange(16).reshape(8, 2), P("x", "y"))).sharding.spec
    with jax.set_mesh(jm):
        j = jax.typeof(jax.device_put(np.arange(16).reshape(8, 2), JP("x", "y"))).sharding.spec
    assert _spec(f) == _spec(j) == ("x", "y")


def test_a_jitted_function_traces_again_when_the_switch_changes():
    fm = ftrans.make_mesh((2, 1), ("x", "y"), axis_types=(AxisType.Explicit,) * 2)
    seen = []

    @ftrans.jit
    def f(x):
        seen.append(_spec(x.aval.sharding.spec))
        return x + 1

    with ftrans.set_mesh(fm):
        arr = ftrans.device_put(np.arange(16).reshape(8, 2), P("x", "y"))
        f(arr)
        with ftrans.remove_size_one_mesh_axis_from_type(True):
            f(arr)
        with both("jax_remove_size_one_mesh_axis_from_type", True):
            f(arr)
        f(arr)
    assert seen == [("x", "y"), ("x", None), ("x", None), ("x", "y")]


@pytest.mark.parametrize("in_spec,out_spec", [(("data", "model", "stage"), ("data", "model")),
                                              (("data", "stage"), "data")])
def test_vmap_spmd_axis_name_of_size_one_axes_like_jax(in_spec, out_spec):
    def run(lib, P_, NS, mesh):
        seen = []
        with lib.set_mesh(mesh):
            arr = lib.device_put(np.arange(16).reshape(4, 2, 2), NS(mesh, P_(in_spec, None)))

            @lib.jit
            @partial(lib.vmap, spmd_axis_name=in_spec)
            def f(x):
                seen.append(_spec(x.aval.sharding.spec))
                return x * 2

            out = f(arr)
        return seen, _spec(out.sharding.spec), np.asarray(out)

    fm = ftrans.make_mesh((2, 2, 1), ("data", "model", "stage"), axis_types=(AxisType.Explicit,) * 3)
    jm = jax.make_mesh((2, 2, 1), ("data", "model", "stage"), axis_types=(JAxisType.Explicit,) * 3)
    with ftrans.remove_size_one_mesh_axis_from_type(True):
        f_res = run(ftrans, P, NamedSharding, fm)
    with jax.remove_size_one_mesh_axis_from_type(True):
        j_res = run(jax, JP, JNamedSharding, jm)
    assert f_res[0] == j_res[0] == [(None, None)]
    assert f_res[1] == j_res[1] == _spec(JP(out_spec, None, None))
    np.testing.assert_array_equal(f_res[2], j_res[2])


# --------------------------------------------------------------------------------------------------------
# jax_remove_size_one_mesh_axis_from_type: varying manual axes


@pytest.mark.parametrize("jit", [True, False])
def test_shard_map_vma_leaves_out_size_one_axes_like_jax(jit):
    def run(lib, jnp_, P_, mesh):
        seen = []
        with lib.set_mesh(mesh):
            arr = lib.device_put(np.arange(16).reshape(8, 2), P_("x", "y"))

            @partial(lib.shard_map, in_specs=P_("x", "y"), out_specs=P_())
            def f(x):
                seen.append(set(lib.typeof(x).mat.varying))
                out = lib.lax.psum(x, "x")
                seen.append(set(lib.typeof(out).mat.varying))
                return out

            out = lib.jit(f)(arr) if jit else f(arr)
        return seen, _layout(out.sharding.spec), np.asarray(out)

    fm = ftrans.make_mesh((2, 1), ("x", "y"), axis_types=(AxisType.Explicit,) * 2)
    jm = jax.make_mesh((2, 1), ("x", "y"), axis_types=(JAxisType.Explicit,) * 2)
    with ftrans.remove_size_one_mesh_axis_from_type(True):
        f_res = run(ftrans, fjnp, P, fm)
    with jax.remove_size_one_mesh_axis_from_type(True):
        j_res = run(jax, jjnp, JP, jm)
    assert f_res[0] == j_res[0] == [{"x"}, set()]
    assert f_res[1] == j_res[1]
    np.testing.assert_array_equal(f_res[2], j_res[2])
    np.testing.assert_array_equal(f_res[2], np.arange(16).reshape(8, 2)[:4] + np.arange(16).reshape(8, 2)[4:])
    with ftrans.set_mesh(fm), pytest.raises(ValueError, match="out_specs"):  # off: it varies along y
        ftrans.jit(ftrans.shard_map(lambda x: ftrans.lax.psum(x, "x"), in_specs=P("x", "y"), out_specs=P()))(
            ftrans.device_put(np.arange(16).reshape(8, 2), P("x", "y")))


def test_psum_and_pcast_over_a_size_one_axis_are_no_ops_like_jax():
    def pcast_jaxpr(lib, jnp_, mesh):  # outside shard_map: no pvary at all (JAX's test_pvary_no_op_...)
        with lib.set_mesh(mesh):
            return str(lib.jit(lambda x: lib.lax.pcast(x, "x", to="varying")).trace(jnp_.arange(8)).jaxpr)

    def psum_run(lib, jnp_, P_, mesh):
        with lib.set_mesh(mesh):
            body = lib.shard_map(lambda x: lib.lax.psum(x, "y") * 2, in_specs=P_("x"), out_specs=P_("x"))
            return (str(lib.make_jaxpr(body)(jnp_.arange(8.))), np.asarray(lib.jit(body)(jnp_.arange(8.))),
                    np.asarray(body(jnp_.arange(8.))))

    fm = ftrans.make_mesh((1, 2), ("x", "y"), axis_types=(AxisType.Explicit,) * 2)
    jm = jax.make_mesh((1, 2), ("x", "y"), axis_types=(JAxisType.Explicit,) * 2)
    fm1 = ftrans.make_mesh((2, 1), ("x", "y"), axis_types=(AxisType.Auto,) * 2)
    jm1 = jax.make_mesh((2, 1), ("x", "y"), axis_types=(JAxisType.Auto,) * 2)
    with ftrans.remove_size_one_mesh_axis_from_type(True):
        fa = pcast_jaxpr(ftrans, fjnp, fm)
        fb, fv, fe = psum_run(ftrans, fjnp, P, fm1)
    with jax.remove_size_one_mesh_axis_from_type(True):
        ja = pcast_jaxpr(jax, jjnp, jm)
        jb, jv, je = psum_run(jax, jjnp, JP, jm1)
    assert "pvary" not in fa and "pvary" not in ja
    assert "psum" not in fb and "psum" not in jb
    np.testing.assert_array_equal(fv, jv)
    np.testing.assert_array_equal(fe, je)
    np.testing.assert_array_equal(fv, np.arange(8.) * 2)


# --------------------------------------------------------------------------------------------------------
# jax_auto_pcast


def _auto_mesh(lib, AT):
    return lib.make_mesh((2,), ("i",), axis_types=(AT.Auto,))


def _pcast_programs(lib, jnp_, P_):
    sm = lib.shard_map
    return {
        "mix": (sm(lambda a, b: a * b, in_specs=(P_("i"), P_()), out_specs=P_("i")), 2),
        "mix_jit": (lib.jit(sm(lambda a, b: a * b, in_specs=(P_("i"), P_()), out_specs=P_("i"))), 2),
        "zeros_like": (sm(lambda a: a + jnp_.zeros_like(a), in_specs=P_("i"), out_specs=P_("i")), 1),
        "concat": (sm(lambda a, b: jnp_.concatenate([a, b]), in_specs=(P_("i"), P_()), out_specs=P_("i")), 2),
        "psum_invariant": (sm(lambda a: lib.lax.psum(a, "i"), in_specs=P_(), out_specs=P_()), 1),
        "all_gather": (sm(lambda a: lib.lax.all_gather(a, "i"), in_specs=P_(), out_specs=P_("i")), 1),
        "explicit_pcast": (sm(lambda a, b: a * lib.lax.pcast(b, "i", to="varying"), in_specs=(P_("i"), P_()),
                              out_specs=P_("i")), 2),
        "out_spec_invariant": (sm(lambda a: a + 1.0, in_specs=P_(), out_specs=P_("i")), 1),
    }


@pytest.mark.parametrize("name", ["mix", "mix_jit", "zeros_like", "concat", "psum_invariant", "all_gather",
                                  "explicit_pcast", "out_spec_invariant"])
def test_auto_pcast_off_like_jax(name):
    def run(lib, jnp_, P_, AT, ctx):
        fn, nargs = _pcast_programs(lib, jnp_, P_)[name]
        if lib is jax:  # the oracle jitted (one program; jax's eager body compiles op by op), ftrans's as built
            fn = jax.jit(fn)
        args = (jnp_.arange(8.0), jnp_.arange(4.0))[:nargs]
        with lib.set_mesh(_auto_mesh(lib, AT)):
            if ctx is None:
                return np.asarray(fn(*args))
            with ctx:
                try:
                    return np.asarray(fn(*args))
                except ValueError as e:
                    return type(e)

    f_on = run(ftrans, fjnp, P, AxisType, None)
    j_on = run(jax, jjnp, JP, JAxisType, None)
    np.testing.assert_array_equal(f_on, j_on)  # on (the default): pvary inserted, as in jax
    f_off = run(ftrans, fjnp, P, AxisType, ftrans.auto_pcast(False))
    j_off = run(jax, jjnp, JP, JAxisType, jax.auto_pcast(False))
    if isinstance(j_off, type):
        assert isinstance(f_off, type) and issubclass(f_off, ValueError), (name, f_off)
    else:
        np.testing.assert_array_equal(f_off, j_off)


def test_auto_pcast_off_names_the_operation():
    with ftrans.set_mesh(_auto_mesh(ftrans, AxisType)), both("jax_auto_pcast", False):
        f = ftrans.shard_map(lambda a, b: a * b, in_specs=(P("i"), P()), out_specs=P("i"))
        with pytest.raises(ValueError, match="Primitive mul requires varying manual axes to match"):
            f(fjnp.arange(8.0), fjnp.arange(4.0))
        g = ftrans.shard_map(lambda a: ftrans.lax.psum(a, "i"), in_specs=P(), out_specs=P())
        with pytest.raises(ValueError, match="psum is a variant->invariant collective"):
            g(fjnp.arange(8.0))


@pytest.mark.parametrize("jit", [False, True])
def test_smap_auto_pcast_off_like_jax_test(jit):
    """JAX's shard_map_test test_no_auto_pcast_config (and the default's result, against jax's)."""
    def run(lib, jnp_, P_, AT, ctx):
        @partial(lib.smap, in_axes=(0, None), out_axes=0, axis_name="i")
        def f(x, y):
            return x * y

        g = lib.jit(f) if jit else f
        with lib.set_mesh(lib.make_mesh((2,), ("i",), axis_types=(AT.Explicit,))):
            x = lib.device_put(jnp_.arange(4.0).reshape(2, 2), P_("i", None))
            y = lib.device_put(jnp_.arange(4.0).reshape(2, 2), P_())
            out = np.asarray(g(x, y))
            with pytest.raises(ValueError, match="requires varying manual axes to match"):
                with ctx:
                    g(x, y)
        return out

    np.testing.assert_array_equal(run(ftrans, fjnp, P, AxisType, ftrans.auto_pcast(False)),
                                  run(jax, jjnp, JP, JAxisType, jax.auto_pcast(False)))


# --------------------------------------------------------------------------------------------------------
# jax_disable_vmap_shmap_error


def test_disable_vmap_shmap_error_like_jax():
    def run(lib, jnp_, P_, AT):
        mesh = lib.make_mesh((2,), ("i",), axis_types=(AT.Auto,))

        def f(x, y):
            return lib.shard_map(lambda x, y: x + lib.lax.all_gather(y, "i", tiled=True), mesh=mesh,
                                 in_specs=(P_(None), P_("i")), out_specs=P_(None), check_vma=False)(x, y)

        y, xs = jnp_.arange(8), jnp_.arange(32).reshape(4, 8)
        with pytest.raises(ValueError, match="spmd_axis_name cannot appear in"):
            lib.vmap(f, in_axes=(0, None), spmd_axis_name="i")(xs, y)
        with both("jax_disable_vmap_shmap_error", True):
            return np.asarray(lib.vmap(f, in_axes=(0, None), spmd_axis_name="i")(xs, y))

    np.testing.assert_array_equal(run(ftrans, fjnp, P, AxisType), run(jax, jjnp, JP, JAxisType))


# --------------------------------------------------------------------------------------------------------
# How the options are set


def test_options_read_back_and_refuse_bad_values():
    c = ftrans.config
    assert (c.remove_size_one_mesh_axis_from_type, c.auto_pcast, c.disable_vmap_shmap_error) == (False, True, False)
    for name in ("jax_remove_size_one_mesh_axis_from_type", "jax_auto_pcast", "jax_disable_vmap_shmap_error"):
        before = c.read(name)
        for value, want in ((True, True), ("false", False), (1, True), (np.bool_(False), False)):
            c.update(name, value)
            assert c.read(name) is want
        c.update(name, before)
        for bad in ("maybe", 2, None, [True]):
            with pytest.raises(ValueError, match=f"invalid truth value.*{name}"):
                c.update(name, bad)
        assert c.read(name) == before
    with pytest.raises(ValueError, match="auto_pcast"):
        with ftrans.auto_pcast("sometimes"):
            pass
    with ftrans.auto_pcast(False):
        assert c.auto_pcast is False
        with ftrans.remove_size_one_mesh_axis_from_type(True):
            assert c.jax_remove_size_one_mesh_axis_from_type is True
    assert (c.remove_size_one_mesh_axis_from_type, c.auto_pcast) == (False, True)


def test_options_from_the_environment():
    env = dict(os.environ, JAX_REMOVE_SIZE_ONE_MESH_AXIS_FROM_TYPE="1", JAX_AUTO_PCAST="false",
               JAX_DISABLE_VMAP_SHMAP_ERROR="yes", JAX_PLATFORMS="cpu")
    code = ("import ftrans; c = ftrans.config; "
            "print(c.remove_size_one_mesh_axis_from_type, c.auto_pcast, c.disable_vmap_shmap_error)")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.split() == ["True", "False", "True"]
    env["JAX_AUTO_PCAST"] = "maybe"
    bad = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=ROOT)
    assert bad.returncode != 0 and "invalid truth value 'maybe'" in bad.stderr and "JAX_AUTO_PCAST" in bad.stderr


def test_a_non_boolean_value_is_refused_where_jax_takes_its_truthiness():
    """docs/differences.md, "Configuration options": jax's ``config.update`` turns the switch on for "false"
    (a non-empty string) or 2; ftrans refuses both by name rather than guess."""
    for value in ("false", 2):
        with both("jax_auto_pcast", False):
            jax.config.update("jax_auto_pcast", value)
            assert bool(jax.config.jax_auto_pcast) is True
    with pytest.raises(ValueError, match="invalid truth value 2 for config option 'jax_auto_pcast'"):
        ftrans.config.update("jax_auto_pcast", 2)
    ftrans.config.update("jax_auto_pcast", "false")  # a truth string is read as one
    try:
        assert ftrans.config.auto_pcast is False
    finally:
        ftrans.config.update("jax_auto_pcast", True)
