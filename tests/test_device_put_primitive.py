"""``device_put`` under transforms is the primitive ``device_put`` with JAX's rules, checked against jax on
8 host devices: the tangent is placed as the value, the cotangent goes back where the value came from
(``src``, else the concrete value's placement), ``vmap`` keeps batch dimensions, and inside ``jit`` a
NamedSharding target is a sharding annotation while a Device target changes nothing."""

from __future__ import annotations

import jax
import jax.numpy as jjnp
import numpy as np
import pytest
from jax.sharding import NamedSharding as JNS
from jax.sharding import PartitionSpec as JP

import ftrans
import ftrans.numpy as fjnp
from ftrans.sharding import Mesh, NamedSharding, PartitionSpec
from ftrans.test_util import check_grads

FD, JD = ftrans.devices(), jax.devices()


def ids(a) -> set:
    return {d.id for d in a.devices()}


def placed(a) -> tuple:
    """Where an array lives and whether it is committed there."""
    return ids(a), bool(a.committed if hasattr(a, "committed") else a._committed)


@pytest.mark.needs_devices(8)
def test_grad_sends_the_cotangent_back_where_the_value_was():
    for src in (None, 2):
        kw, jkw = ({}, {}) if src is None else ({"src": FD[src]}, {"src": JD[src]})
        fy, fg = ftrans.value_and_grad(lambda x: ftrans.device_put(x, FD[1], **kw))(ftrans.device_put(2.0, FD[0]))
        jy, jg = jax.value_and_grad(lambda x: jax.device_put(x, JD[1], **jkw))(jax.device_put(2.0, JD[0]))
        assert (placed(fy), placed(fg)) == (placed(jy), placed(jg)), src
        assert float(fg) == float(jg) == 1.0
    # an integer-free pytree, each leaf to its own device: every cotangent returns to its own leaf's device
    xs = (ftrans.device_put(fjnp.arange(4.0), FD[0]), ftrans.device_put(fjnp.ones(3), FD[3]))
    jxs = (jax.device_put(jjnp.arange(4.0), JD[0]), jax.device_put(jjnp.ones(3), JD[3]))
    fo, fpb = ftrans.vjp(lambda t: ftrans.device_put(t, (FD[1], FD[2])), xs)
    jo, jpb = jax.vjp(lambda t: jax.device_put(t, (JD[1], JD[2])), jxs)
    assert [placed(o) for o in fo] == [placed(o) for o in jo]
    fct, jct = fpb((np.ones(4, np.float32), np.ones(3, np.float32)))[0], jpb((jjnp.ones(4), jjnp.ones(3)))[0]
    assert [placed(c) for c in fct] == [placed(c) for c in jct]


@pytest.mark.needs_devices(8)
def test_jvp_and_vmap_place_like_jax():
    x = ftrans.device_put(fjnp.arange(3.0), FD[0])
    jx = jax.device_put(jjnp.arange(3.0), JD[0])
    fp, ft = ftrans.jvp(lambda v: ftrans.device_put(v, FD[1]), (x,), (x,))
    jp, jt = jax.jvp(lambda v: jax.device_put(v, JD[1]), (jx,), (jx,))
    assert (placed(fp), placed(ft)) == (placed(jp), placed(jt))
    fv = ftrans.vmap(lambda v: ftrans.device_put((v, 2.0), FD[2]))(np.ones((2, 3), np.float32))
    jv = jax.vmap(lambda v: jax.device_put((v, 2.0), JD[2]))(np.ones((2, 3), np.float32))
    assert [placed(o) for o in fv] == [placed(o) for o in jv]
    np.testing.assert_array_equal(fv[1], jv[1])


@pytest.mark.needs_devices(4)
def test_named_sharding_under_vmap_and_grad_like_jax():
    fm, jm = Mesh(np.array(FD[:4]), ("x",)), jax.make_mesh((4,), ("x",), devices=JD[:4], axis_types=(jax.sharding.AxisType.Auto,))
    fs, js = NamedSharding(fm, PartitionSpec("x")), JNS(jm, JP("x"))
    a = np.arange(32, dtype=np.float32).reshape(4, 8)
    # JAX's rule keeps the spec as given (checked against one element), so under vmap it splits the batched
    # value's first dimension, the batch dimension
    fo = ftrans.vmap(lambda v: ftrans.device_put(v, fs))(a)
    jo = jax.vmap(lambda v: jax.device_put(v, js))(a)
    assert tuple(fo.sharding.spec) == tuple(jo.sharding.spec) and ids(fo) == ids(jo)
    np.testing.assert_array_equal(fo, jo)
    # a cotangent goes back to the sharding the value had
    xs, jxs = ftrans.device_put(a[:, 0] + 1, fs), jax.device_put(a[:, 0] + 1, js)
    fg = ftrans.grad(lambda v: (ftrans.device_put(v, FD[5]) ** 2).sum())(xs)
    jg = jax.grad(lambda v: (jax.device_put(v, JD[5]) ** 2).sum())(jxs)
    assert tuple(fg.sharding.spec) == tuple(jg.sharding.spec) and ids(fg) == ids(jg)
    np.testing.assert_allclose(fg, jg)
    x0 = ftrans.device_put(a[:, 1], FD[0])
    check_grads(lambda v: (ftrans.device_put(v, fs, src=FD[0]) ** 3).sum(), (x0,), order=2, modes=("rev",))


@pytest.mark.needs_devices(8)
def test_inside_jit_a_named_sharding_is_an_annotation_and_a_device_is_not():
    fm = Mesh(np.array(FD[:4]), ("x",))
    fs = NamedSharding(fm, PartitionSpec("x"))
    x = np.arange(8, dtype=np.float32)
    f = ftrans.jit(lambda v: ftrans.device_put(v * 2, fs) + 1)
    assert 'sdy.sharding_constraint %1 <@mesh, [{"x"}]>' in f.lower(x).as_text()
    np.testing.assert_array_equal(f(x), x * 2 + 1)
    g = ftrans.jit(lambda v: ftrans.device_put(v * 2, FD[1]) + 1)
    assert "sharding_constraint" not in g.lower(x).as_text()
    jg = jax.jit(lambda v: jax.device_put(v * 2, JD[1]) + 1)
    assert placed(g(x)) == placed(jg(x))  # the program's own placement decides, as in JAX
    gg = ftrans.jit(ftrans.grad(lambda v: ftrans.device_put(v, FD[1]).sum()))(ftrans.device_put(x, FD[0]))
    jgg = jax.jit(jax.grad(lambda v: jax.device_put(v, JD[1]).sum()))(jax.device_put(x, JD[0]))
    assert placed(gg) == placed(jgg)
    # staged with the operand's weak type; the params say where and how
    text = str(ftrans.make_jaxpr(lambda v: ftrans.device_put((v, 3.0), FD[1], may_alias=False))(x))
    assert "device_put[" in text and "CopySemantics.ALWAYS_COPY" in text and "3.0:f32[]" in text
    assert ftrans.jit(lambda v: ftrans.device_put(v, FD[1]))(1.0).weak_type == \
        jax.jit(lambda v: jax.device_put(v, JD[1]))(1.0).weak_type


@pytest.mark.needs_devices(8)
def test_donated_device_put_has_no_transpose_like_jax():
    with pytest.raises(ValueError, match="donate"):
        jax.grad(lambda v: jax.device_put(v, JD[1], donate=True).sum())(jax.device_put(jjnp.ones(3), JD[0]))
    with pytest.raises(ValueError, match="donate=True"):
        ftrans.grad(lambda v: ftrans.device_put(v, FD[1], donate=True).sum())(ftrans.device_put(fjnp.ones(3), FD[0]))
    # forward mode and jit accept it, as in JAX
    np.testing.assert_array_equal(ftrans.jit(lambda v: ftrans.device_put(v, FD[1], donate=True))(np.ones(2)),
                                  np.ones(2))
