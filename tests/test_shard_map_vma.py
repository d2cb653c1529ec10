"""shard_map's check_vma: an output whose out_specs leave out a mesh axis it may vary over is an error.

Each program is traced under ftrans and ``jax.shard_map`` with the same mesh and specs; both must raise a
``ValueError`` at trace time, or both accept it.
"""

from __future__ import annotations

import jax
import jax.numpy as jjnp
import numpy as np
import pytest
from jax.sharding import AxisType as JAxisType
from jax.sharding import PartitionSpec as JP

import ftrans
import ftrans.numpy as fjnp
from ftrans import lax as flax
from ftrans.errors import FtransValueError
from ftrans.sharding import AxisType, P

pytestmark = pytest.mark.needs_devices(4)


def _meshes():
    fm = ftrans.make_mesh((2, 2), ("x", "y"), axis_types=(AxisType.Auto,) * 2)
    jm = jax.make_mesh((2, 2), ("x", "y"), axis_types=(JAxisType.Auto,) * 2)
    return fm, jm


def _programs(lax_, np_):
    def cond_branches(a):  # a branch of a varying value: the output varies as the union of the branches
        return lax_.cond(np_.sum(a) > 0, lambda b: b * 2, lambda b: lax_.psum(b, "y"), a)

    def cond_pred(a):  # a predicate varying over x and y does not make the (replicated) branches vary
        return lax_.cond(np_.sum(a) > 0, lambda b: b, lambda b: b * 2, lax_.psum(a, ("x", "y")))

    def cond_plain(a):
        return lax_.cond(np_.sum(a) > 0, lambda b: b * 2, lambda b: b + 1, a)

    def cond_pcast(a):  # both branches return a value pcast to vary along y too (one is the operand's variable)
        return lax_.cond(True, lambda b: lax_.pcast(b, "y", to="varying"),
                         lambda b: lax_.pcast(b + 1, "y", to="varying"), a)

    def scan_carry(a):  # the carry picks up the axes of the value added to it
        return lax_.scan(lambda c, _: (c + a, None), np_.zeros_like(a), None, length=3)[0]

    def scan_psum(a):
        return lax_.scan(lambda c, _: (c + lax_.psum(a, "x"), None), np_.zeros(a.shape), None, length=3)[0]

    const = np.arange(8, dtype=np.float32).reshape(2, 4)

    def closure(a):  # a closed-over array is the same on every device
        return a * const

    return {
        # name: (body, in_spec, out_spec, jax raises)
        "unreduced": (lambda a: a * 2, ("x", "y"), (None, "y"), True),
        "psum": (lambda a: lax_.psum(a, "x"), ("x", "y"), (None, "y"), False),
        "pmean_pmax": (lambda a: lax_.pmean(a, "x") + lax_.pmax(a, ("x", "y")), ("x", "y"), (None, "y"), False),
        "mentioned": (lambda a: a + 1, ("x", "y"), ("x", "y"), False),
        "all_gather_mentioned": (lambda a: lax_.all_gather(a, "x", tiled=True), ("x", "y"), ("x", "y"), False),
        "all_gather_unmentioned": (lambda a: lax_.all_gather(a, "x", tiled=True), ("x", "y"), (None, "y"), True),
        "axis_index": (lambda a: a + lax_.axis_index("x"), (None, "y"), (None, "y"), True),
        "closure": (closure, ("x", None), ("x",), False),
        "closure_bad": (closure, ("x", None), (), True),
        "replicated_input": (lambda a: a * 3, (None, "y"), (None, "y"), False),
        "cond_branches": (cond_branches, ("x", None), ("x",), False),
        "cond_branches_bad": (cond_plain, ("x", "y"), ("x",), True),
        "cond_pred": (cond_pred, ("x", "y"), (), False),
        "scan_carry_bad": (scan_carry, ("x", None), (), True),
        "scan_psum": (scan_psum, ("x", None), (), False),
        "pcast_varying": (lambda a: lax_.pcast(a, "x", to="varying"), (), (), True),
        "zeros_like_varying": (lambda a: np_.zeros_like(a), ("x", None), (), True),
        "zeros_like_mentioned": (lambda a: np_.zeros_like(a), ("x", None), ("x",), False),
        "cond_pcast_branches": (cond_pcast, ("x", None), ("x", "y"), False),
        "cond_pcast_branches_bad": (cond_pcast, ("x", None), ("x",), True),
    }


@pytest.mark.parametrize("prog", list(_programs(flax, fjnp)))
def test_check_vma_matches_jax(prog):
    fm, jm = _meshes()
    x = np.arange(16, dtype=np.float32).reshape(4, 4) - 5
    ff, ins, outs, raises = _programs(flax, fjnp)[prog]
    jf = _programs(jax.lax, jjnp)[prog][0]
    f = ftrans.shard_map(ff, mesh=fm, in_specs=P(*ins), out_specs=P(*outs))
    j = jax.shard_map(jf, mesh=jm, in_specs=JP(*ins), out_specs=JP(*outs))
    # The check runs as the body is traced: tracing is enough (test_sharding.py compares values).
    if raises:
        with pytest.raises(ValueError, match="require replication"):
            jax.make_jaxpr(j)(x)
        with pytest.raises(FtransValueError, match="require replication") as e:
            ftrans.make_jaxpr(f)(x)
        assert __file__ in str(e.value)  # names the user's line
        assert "check_vma=False" in str(e.value) and "psum" in str(e.value)
    else:
        jax.make_jaxpr(j)(x)
        ftrans.make_jaxpr(f)(x)


def test_check_vma_false_trusts_out_specs():
    fm, jm = _meshes()
    x = np.arange(16, dtype=np.float32).reshape(4, 4)
    f = ftrans.shard_map(lambda a: a * 2, mesh=fm, in_specs=P("x", "y"), out_specs=P(None, "y"), check_vma=False)
    j = jax.shard_map(lambda a: a * 2, mesh=jm, in_specs=JP("x", "y"), out_specs=JP(None, "y"), check_vma=False)
    np.testing.assert_allclose(np.asarray(f(x)), np.asarray(j(x)))
    g = ftrans.shard_map(lambda a: a * 2, mesh=fm, in_specs=P("x", "y"), out_specs=P(None, "y"), check_rep=False)
    ftrans.make_jaxpr(g)(x)  # the old name of the flag


def test_check_vma_error_names_output_and_axes_under_jit():
    fm, _ = _meshes()
    x = np.ones((4, 4), np.float32)
    f = ftrans.shard_map(lambda a, b: (lax_sum(a), b * 2), mesh=fm, in_specs=(P("x", "y"), P("x")),
                         out_specs=(P(), P()))
    with pytest.raises(FtransValueError) as e:
        ftrans.jit(f).lower(x, x)
    msg = str(e.value)
    assert "output 1" in msg and "f32[2,4]" in msg and "and not {x}" in msg and "output 0" not in msg


def lax_sum(a):
    return flax.psum(a, ("x", "y"))


def test_out_specs_given_as_a_list_of_specs():
    """A list of PartitionSpecs for a list of outputs (JAX's scan/while rep-rule tests write out_specs so)."""
    fm, jm = _meshes()
    x = np.arange(16, dtype=np.float32).reshape(4, 4)

    def body(lax_):
        return lambda a, b: [lax_.psum(a, "x"), b * 2]

    f = ftrans.shard_map(body(flax), mesh=fm, in_specs=(P("x"), P("y")), out_specs=[P(None), P("y")])
    j = jax.shard_map(body(jax.lax), mesh=jm, in_specs=(JP("x"), JP("y")), out_specs=[JP(None), JP("y")])
    for a, b in zip(f(x, x), j(x, x)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b))
    with pytest.raises(FtransValueError, match="output 1"):  # b varies over y
        ftrans.make_jaxpr(ftrans.shard_map(body(flax), mesh=fm, in_specs=(P("x"), P("y")),
                                           out_specs=[P(None), P(None)]))(x, x)


def _vma_trail(lax_, np_, typeof, seen):
    """A body that records ``typeof(v).vma`` of the values it makes (JAX's varying manual axes)."""

    def body(a, b):
        vals = [a, b, a * b, lax_.psum(a, "x"), lax_.psum(a * b, ("x", "y")), lax_.pcast(b, "x", to="varying"),
                np_.zeros_like(a), lax_.all_gather(a, "x", tiled=True, to="invarying"), lax_.axis_index("y") + b]
        seen.extend(set(typeof(v).mat.varying) for v in vals)
        return a

    return body


def test_values_in_the_body_carry_their_varying_manual_axes():
    fm, jm = _meshes()
    x, y = np.ones((4, 4), np.float32), np.ones((2, 2), np.float32)
    got, want = [], []
    ftrans.make_jaxpr(ftrans.shard_map(_vma_trail(flax, fjnp, ftrans.typeof, got), mesh=fm,
                                       in_specs=(P("x", "y"), P()), out_specs=P("x", "y")))(x, y)
    jax.make_jaxpr(jax.shard_map(_vma_trail(jax.lax, jjnp, jax.typeof, want), mesh=jm,
                                 in_specs=(JP("x", "y"), JP()), out_specs=JP("x", "y")))(x, y)
    assert got == want
    got.clear()  # under jit, and through a jitted function inside the body
    ftrans.jit(ftrans.shard_map(ftrans.jit(_vma_trail(flax, fjnp, ftrans.typeof, got)), mesh=fm,
                                in_specs=(P("x", "y"), P()), out_specs=P("x", "y"))).lower(x, y)
    assert got == want
    assert ftrans.typeof(x).mat.varying == frozenset()


def _branches_differ(lax_):
    return lambda a, b: lax_.cond(True, lambda a, b: a, lambda a, b: b, a, b)


def _carry_gains_axes(lax_):
    def f(a, b):
        return lax_.scan(lambda c, _: ((c[1], c[0]), None), (a, b), None, length=2)[0]

    return f


@pytest.mark.parametrize("make", [_branches_differ, _carry_gains_axes])
def test_values_varying_along_other_axes_where_one_type_is_needed_raise_type_error(make):
    """cond's branches, and a loop's carry in and out, must vary along the same manual axes (JAX's
    TypeError, whose advice is a pcast)."""
    fm, jm = _meshes()
    x, y = np.ones((4, 4), np.float32), np.ones((2, 4), np.float32)
    with pytest.raises(TypeError, match="pcast"):
        jax.make_jaxpr(jax.shard_map(make(jax.lax), mesh=jm, in_specs=(JP("x"), JP()), out_specs=JP("x")))(x, y)
    with pytest.raises(TypeError, match=r"lax.pcast\(\.\.\., \('x',\), to='varying'\)"):
        ftrans.make_jaxpr(ftrans.shard_map(make(flax), mesh=fm, in_specs=(P("x"), P()), out_specs=P("x")))(x, y)
    fixed = lambda lax_: lambda a, b: make(lax_)(a, lax_.pcast(b, "x", to="varying"))  # noqa: E731
    jax.make_jaxpr(jax.shard_map(fixed(jax.lax), mesh=jm, in_specs=(JP("x"), JP()), out_specs=JP("x")))(x, y)
    ftrans.make_jaxpr(ftrans.shard_map(fixed(flax), mesh=fm, in_specs=(P("x"), P()), out_specs=P("x")))(x, y)


def test_sharding_constraint_over_a_manual_axis_raises():
    fm, jm = _meshes()
    x = np.ones((4, 4), np.float32)

    def body(wsc, mesh, spec):
        return lambda a: wsc(a * 2, jax.sharding.NamedSharding(mesh, spec("x", "y")) if mesh is jm
                             else ftrans.sharding.NamedSharding(mesh, spec("x", "y")))

    with pytest.raises(ValueError, match="manual"):
        jax.jit(jax.shard_map(body(jax.lax.with_sharding_constraint, jm, JP), mesh=jm, in_specs=JP("x"),
                              out_specs=JP("x"), axis_names={"x"})).lower(x)
    with pytest.raises(FtransValueError, match="contains a manual axes"):
        ftrans.jit(ftrans.shard_map(body(flax.with_sharding_constraint, fm, P), mesh=fm, in_specs=P("x"),
                                    out_specs=P("x"), axis_names={"x"})).lower(x)
