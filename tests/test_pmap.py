"""``pmap`` on 8 host devices against ``jax.pmap`` running the same programs.

Each program is written once against a ``(transforms, numpy, lax)`` triple and run with ftrans and with
jax on the same inputs: values, gradients, nesting (a 2x4 layout with two axis names), every collective,
``axis_index``, ``out_axes=None``, donation, static arguments, compositions with ``vmap``, ``jit``,
``grad`` and control flow, sharded results, and the errors (each naming the user's line).
"""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jjnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from jax import lax as jlax

import ftrans
import ftrans.numpy as fjnp
from ftrans import lax as flax
from ftrans.core.array import ShardedArray
from ftrans.errors import FtransNameError
from ftrans.lowering import compat

FT, JX = (ftrans, fjnp, flax), (jax, jjnp, jlax)
RNG = np.random.default_rng(0)
HERE = os.path.abspath(__file__)

pytestmark = pytest.mark.skipif(jax.local_device_count() < 8, reason="needs 8 host devices (tests/conftest.py)")


def arr(*shape, dtype=np.float32):
    return RNG.normal(size=shape).astype(dtype)


def assert_tree(got, want, tol=1e-5):
    g, gt = jax.tree_util.tree_flatten(got)
    w, wt = jax.tree_util.tree_flatten(want)
    assert gt == wt, (gt, wt)
    for a, b in zip(g, w):
        a, b = np.asarray(a), np.asarray(b)
        assert a.shape == b.shape, (a.shape, b.shape)
        assert a.dtype == b.dtype, (a.dtype, b.dtype)
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


def both(prog, *args, **kw):
    return prog(FT, *args, **kw), prog(JX, *args, **kw)


# jax's oracle programs are compiled without LLVM's optimizing passes (level 0; the suite's default is 1): less
# compile time, the same values up to float rounding (which the tolerances are for).  ftrans's compile as always.
_ORACLE_OPTIONS = {"xla_backend_optimization_level": 0}


def check(prog, *args, tol=1e-5, jit_oracle=False):
    """ftrans's ``prog`` against jax's on ``args``.  ``jit_oracle``: jax's side runs as one ``jax.jit`` program
    (its value is the eager one's; eager jax would compile each op around the pmap by itself)."""
    if jit_oracle:
        got, want = prog(FT, *args), jax.jit(lambda *a: prog(JX, *a), compiler_options=_ORACLE_OPTIONS)(*args)
    else:
        got, want = both(prog, *args)
    assert_tree(got, want, tol)
    return got


# ----------------------------------------------------------------------------
# Values


def test_elementwise_value_and_sharded_result():
    x = arr(8, 3)
    got = check(lambda m, x: m[0].pmap(lambda v: m[1].sin(v) * 2.0 + 1.0)(x), x)
    assert type(got) is ShardedArray
    assert len(got.devices()) == 8
    assert len(got.addressable_shards) == 8
    for k, s in enumerate(got.addressable_shards):
        assert s.data.shape == (1, 3)
        np.testing.assert_allclose(np.asarray(s.data)[0], np.sin(x[k]) * 2 + 1, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("n", [1, 2, 4, 8])
def test_sizes_up_to_device_count(n):
    x = arr(n, 5)
    check(lambda m, x: m[0].pmap(lambda v: m[1].tanh(v) @ m[1].ones((5, 2)), axis_name="i")(x), x)


def test_in_axes_out_axes_pytrees():
    x, y, z = arr(3, 4), arr(3), arr(2, 3, 4)

    def prog(m, x, y, z):
        def f(a, b):
            return {"s": a["x"] * b + a["z"].sum(0), "t": (b, a["x"].sum())}

        return m[0].pmap(f, in_axes=({"x": 1, "z": 2}, None), out_axes={"s": 1, "t": (None, 0)})(
            {"x": x, "z": z}, y)

    check(prog, x, y, z)


def test_kwargs_map_over_axis_0():
    x, y = arr(4, 3), arr(4, 3)
    check(lambda m, x, y: m[0].pmap(lambda a, b: a * b)(x, b=y), x, y)


def test_negative_axes():
    x = arr(3, 4)
    got = ftrans.pmap(lambda a: a * 2, in_axes=-1, out_axes=-1)(x)
    # jax 0.10's pmap mishandles a negative in_axes (it splits axis 0), so the oracle spells the axes out
    assert_tree(got, jax.pmap(lambda a: a * 2, in_axes=1, out_axes=1)(x))


def test_out_axes_none_replicated():
    x = arr(4, 3)
    check(lambda m, x: m[0].pmap(lambda a: m[2].psum(a, "i"), axis_name="i", out_axes=None)(x), x)


def test_static_broadcasted_argnums():
    x = arr(4, 3)

    def prog(m, x):
        f = m[0].pmap(lambda a, k, s: a * k + len(s), static_broadcasted_argnums=(1, 2))
        return f(x, 3.0, "ab"), f(x, 2.0, "abc")

    check(prog, x)


def test_chained_pmaps_reuse_shards(monkeypatch):
    x = arr(8, 4)
    f = ftrans.pmap(lambda a: a * 2.0)
    g = ftrans.pmap(lambda a: a + 1.0)
    y = f(x)
    buf = y._sharded
    put = compat.put_sharded
    calls = []

    def spy(*a, **k):
        calls.append(a)
        return put(*a, **k)

    monkeypatch.setattr(compat, "put_sharded", spy)
    z = g(y)
    # y's buffer was passed as is: nothing was placed, and y was never gathered to the host
    assert calls == []
    assert y._sharded is buf
    with pytest.raises(AttributeError):
        object.__getattribute__(y, "_value")
    np.testing.assert_allclose(np.asarray(z), x * 2 + 1, rtol=1e-6)


def test_sharded_array_gathers_like_jax():
    x = arr(8, 3)
    got, want = both(lambda m, x: m[0].pmap(lambda a: a * 3.0)(x), x)
    assert_tree(got[2], want[2])
    assert_tree(got[1:5:2], want[1:5:2])
    assert_tree(got.sum(0), want.sum(0))
    assert_tree(fjnp.dot(got, np.ones(3, np.float32)), jjnp.dot(want, np.ones(3, np.float32)))
    assert str(got) == str(np.asarray(want))
    assert got.shape == (8, 3) and got.dtype == np.float32


def test_device_put_sharded_and_replicated():
    xs = [arr(3) for _ in range(8)]
    devs = ftrans.local_devices()
    s = ftrans.device_put_sharded(xs, devs)
    assert type(s) is ShardedArray and s.shape == (8, 3)
    np.testing.assert_allclose(np.asarray(s), np.stack(xs))
    r = ftrans.device_put_replicated(xs[0], devs)
    assert r.shape == (8, 3)
    np.testing.assert_allclose(np.asarray(r), np.stack([xs[0]] * 8))
    f = ftrans.pmap(lambda a, b: a + b)
    np.testing.assert_allclose(np.asarray(f(s, r)), np.stack(xs) + xs[0], rtol=1e-6)
    assert ftrans.local_device_count() == jax.local_device_count()


def test_donation_deletes_argument():
    x = ftrans.pmap(lambda a: a * 1.0)(arr(8, 3))
    f = ftrans.pmap(lambda a: a + 1.0, donate_argnums=0)
    y = f(x)
    assert x.is_deleted()
    with pytest.raises(RuntimeError, match="deleted"):
        np.asarray(x)
    jx = jax.pmap(lambda a: a * 1.0)(arr(8, 3))
    jax.pmap(lambda a: a + 1.0, donate_argnums=0)(jx)
    assert jx.is_deleted()
    assert y.shape == (8, 3)


# ----------------------------------------------------------------------------
# Collectives, one axis


def _coll(name):
    def prog(m, x):
        _, jnp, lax = m
        if name == "psum":
            f = lambda a: lax.psum(a, "i")  # noqa: E731
        elif name == "pmean":
            f = lambda a: lax.pmean(a, "i")  # noqa: E731
        elif name == "pmax":
            f = lambda a: lax.pmax(a, "i")  # noqa: E731
        elif name == "pmin":
            f = lambda a: lax.pmin(a, "i")  # noqa: E731
        elif name == "all_gather":
            f = lambda a: lax.all_gather(a, "i")  # noqa: E731
        elif name == "all_gather_axis1":
            f = lambda a: lax.all_gather(a, "i", axis=1)  # noqa: E731
        elif name == "all_gather_tiled":
            f = lambda a: lax.all_gather(a, "i", tiled=True)  # noqa: E731
        elif name == "all_to_all":
            f = lambda a: lax.all_to_all(a, "i", 0, 0)  # noqa: E731
        elif name == "all_to_all_01":
            f = lambda a: lax.all_to_all(a, "i", 0, 1)  # noqa: E731
        elif name == "all_to_all_tiled":
            f = lambda a: lax.all_to_all(a, "i", 1, 0, tiled=True)  # noqa: E731
        elif name == "ppermute":
            f = lambda a: lax.ppermute(a, "i", [(k, (k + 1) % 4) for k in range(4)])  # noqa: E731
        elif name == "ppermute_partial":
            f = lambda a: lax.ppermute(a, "i", [(0, 2), (1, 0)])  # noqa: E731
        elif name == "psum_scatter":
            f = lambda a: lax.psum_scatter(a, "i")  # noqa: E731
        elif name == "psum_scatter_tiled":
            f = lambda a: lax.psum_scatter(a, "i", scatter_dimension=1, tiled=True)  # noqa: E731
        elif name == "axis_index":
            f = lambda a: a * lax.axis_index("i")  # noqa: E731
        return m[0].pmap(f, axis_name="i")(x)

    return prog


COLLECTIVES = ["psum", "pmean", "pmax", "pmin", "all_gather", "all_gather_axis1", "all_gather_tiled",
               "all_to_all", "all_to_all_01", "all_to_all_tiled", "ppermute", "ppermute_partial",
               "psum_scatter", "psum_scatter_tiled", "axis_index"]


@pytest.mark.parametrize("name", COLLECTIVES)
def test_collective_value(name):
    check(_coll(name), arr(4, 4, 8))


# pmax/pmin have no derivative (in JAX neither); jax.pmap cannot transpose all_to_all with concat_axis !=
# split_axis (tests/test_collectives.py checks that adjoint under vmap).
GRAD_COLLECTIVES = ["psum", "pmean", "all_gather", "all_gather_tiled", "all_to_all",
                    "all_to_all_tiled", "ppermute", "ppermute_partial", "psum_scatter", "psum_scatter_tiled",
                    "axis_index"]


@pytest.mark.parametrize("name", GRAD_COLLECTIVES)
def test_grad_through_collective(name):
    x = arr(4, 4, 8)
    w = arr(*jax.eval_shape(lambda a: _coll(name)(JX, a), x).shape)

    def prog(m, x):
        return m[0].grad(lambda x: (_coll(name)(m, x) * w).sum())(x)

    check(prog, x, tol=1e-4, jit_oracle=True)


def test_collectives_on_ints_and_bools():
    x = (np.arange(16).reshape(4, 4) % 3).astype(np.int32)
    check(lambda m, x: m[0].pmap(lambda a: (m[2].psum(a, "i"), m[2].pmax(a, "i"), m[2].pmin(a > 0, "i")),
                                 axis_name="i")(x), x)


def test_psum_of_constant_is_axis_size():
    check(lambda m, x: m[0].pmap(lambda a: a + m[2].psum(1, "i"), axis_name="i")(x), arr(4, 2))


# ----------------------------------------------------------------------------
# Nesting: a 2x4 layout with two axis names.  jax 0.10's pmap cannot nest (its shard_map-based pmap rejects
# the inner mesh), so the oracle is nested jax.vmap with the same axis names: pmap's semantics are vmap's.


def _nest(m, body, _unused=None, **kw):
    if m is JX:
        return jax.vmap(jax.vmap(body, axis_name="j", **kw.get("inner", {})), axis_name="i",
                        **kw.get("outer", {}))
    return ftrans.pmap(ftrans.pmap(body, axis_name="j", **kw.get("inner", {})), axis_name="i",
                       **kw.get("outer", {}))


NESTED = {
    "psum_inner": lambda lax: (lambda a: lax.psum(a, "j")),
    "psum_outer": lambda lax: (lambda a: lax.psum(a, "i")),
    "psum_both": lambda lax: (lambda a: lax.psum(a, ("i", "j"))),
    "pmax_both": lambda lax: (lambda a: lax.pmax(a, ("i", "j"))),
    "index": lambda lax: (lambda a: a + lax.axis_index("i") * 10 + lax.axis_index("j")),
    "index_both": lambda lax: (lambda a: a + lax.axis_index(("i", "j"))),
    "gather_outer": lambda lax: (lambda a: lax.all_gather(a, "i")),
    "gather_inner": lambda lax: (lambda a: lax.all_gather(a, "j", tiled=True)),
    "ppermute_outer": lambda lax: (lambda a: lax.ppermute(a, "i", [(0, 1), (1, 0)])),
    "ppermute_inner": lambda lax: (lambda a: lax.ppermute(a, "j", [(k, (k + 1) % 4) for k in range(4)])),
    "scatter_inner": lambda lax: (lambda a: lax.psum_scatter(a, "j", scatter_dimension=0, tiled=True)),
    "to_all_inner": lambda lax: (lambda a: lax.all_to_all(a, "j", 0, 0, tiled=True)),
}


@pytest.mark.parametrize("name", sorted(NESTED))
def test_nested_pmap(name):
    x = arr(2, 4, 8)

    def prog(m, x):
        return _nest(m, NESTED[name](m[2]), None)(x)

    check(prog, x, jit_oracle=True)


@pytest.mark.parametrize("name", ["psum_inner", "psum_both", "index", "gather_outer", "ppermute_inner"])
def test_grad_of_nested_pmap(name):
    x = arr(2, 4, 8)

    def prog(m, x):
        f = _nest(m, NESTED[name](m[2]), None)
        return m[0].grad(lambda x: (f(x) ** 2).sum())(x)

    check(prog, x, tol=1e-4, jit_oracle=True)


def test_nested_with_in_axes_none_and_out_axes_none():
    x, y = arr(2, 4, 3), arr(3)

    def prog(m, x, y):
        def inner(a, b):
            return m[2].psum(a * b, "j")

        return _nest(m, inner, None, inner={"in_axes": (0, None), "out_axes": None},
                     outer={"in_axes": (0, None)})(x, y)

    check(prog, x, y, jit_oracle=True)


# ----------------------------------------------------------------------------
# Compositions


def test_grad_of_pmap_mapped_and_broadcast():
    x, w = arr(4, 3), arr(3, 2)

    def prog(m, x, w):
        f = m[0].pmap(lambda a, w: m[1].tanh(a @ w), in_axes=(0, None))
        return m[0].grad(lambda x, w: (f(x, w) ** 2).sum(), argnums=(0, 1))(x, w)

    check(prog, x, w, tol=1e-4, jit_oracle=True)


def test_pmap_of_grad_with_pmean():
    x, w = arr(4, 5, 3), arr(3)

    def prog(m, x, w):
        def step(x, w):
            g = m[0].grad(lambda w: ((x @ w) ** 2).mean())(w)
            return m[2].pmean(g, "d")

        return m[0].pmap(step, axis_name="d", in_axes=(0, None))(x, w)

    check(prog, x, w, tol=1e-4)


def test_jvp_of_pmap():
    x, t = arr(4, 3), arr(4, 3)
    check(lambda m, x, t: m[0].jvp(m[0].pmap(lambda a: m[1].sin(m[2].psum(a, "i")), axis_name="i"), (x,), (t,)),
          x, t)


def test_vmap_of_pmap():
    x = arr(3, 4, 2)
    check(lambda m, x: m[0].vmap(m[0].pmap(lambda a: m[2].psum(a, "i") * a, axis_name="i"))(x), x)
    check(lambda m, x: m[0].vmap(m[0].pmap(lambda a: a * 2), in_axes=1)(x), x)


def test_pmap_of_vmap():
    x = arr(4, 3, 2)
    check(lambda m, x: m[0].pmap(m[0].vmap(lambda a: m[2].psum(a, "i") + m[2].psum(a, "v"), axis_name="v"),
                                 axis_name="i")(x), x)


def test_jit_inside_pmap():
    x = arr(4, 3)
    check(lambda m, x: m[0].pmap(m[0].jit(lambda a: m[2].psum(m[1].cos(a), "i")), axis_name="i")(x), x)


def test_control_flow_inside_pmap():
    x = arr(4, 3)

    def prog(m, x):
        _, jnp, lax = m

        def f(a):
            a = lax.cond(a.sum() > 0, lambda b: b * 2.0, lambda b: -b, a)
            c, _ = lax.scan(lambda c, r: (c + lax.psum(r, "i"), None), jnp.zeros(()), a)
            return lax.fori_loop(0, 3, lambda k, v: v * 1.5, a) + c

        return m[0].pmap(f, axis_name="i")(x)

    check(prog, x)


def test_grad_of_pmap_with_out_axes_none():
    x = arr(4, 3)

    def prog(m, x):
        f = m[0].pmap(lambda a: m[2].psum(a ** 2, "i"), axis_name="i", out_axes=None)
        return m[0].grad(lambda x: f(x).sum())(x)

    check(prog, x, tol=1e-4, jit_oracle=True)


def test_make_jaxpr_shows_pmap():
    x = arr(4, 3)
    closed = ftrans.make_jaxpr(ftrans.pmap(lambda a: flax.psum(a, "i"), axis_name="i"))(x)
    text = str(closed)
    assert "pmap" in text and "psum" in text


def test_lowered_text_has_replicas():
    text = ftrans.pmap(lambda a: flax.psum(a, "i"), axis_name="i").lower(arr(4, 3)).as_text()
    assert "mhlo.num_replicas = 4" in text
    assert "stablehlo.all_reduce" in text


# ----------------------------------------------------------------------------
# Errors (each names the user's line)


def _raises(exc_type, fn, match):
    with pytest.raises(exc_type, match=match) as info:
        fn()
    assert HERE in str(info.value), str(info.value)
    return info.value


def test_error_inconsistent_sizes_names_paths():
    f = ftrans.pmap(lambda a, b: a + b["k"])
    e = _raises(ValueError, lambda: f(arr(4, 3), {"k": arr(2, 3)}), "inconsistent sizes")
    assert "args[0]" in str(e) and "args[1]['k']" in str(e) and "size 4" in str(e) and "size 2" in str(e)
    with pytest.raises(ValueError):
        jax.pmap(lambda a, b: a + b["k"])(arr(4, 3), {"k": arr(2, 3)})


def test_error_more_elements_than_devices():
    _raises(ValueError, lambda: ftrans.pmap(lambda a: a)(arr(9, 2)), "requires 9 logical devices")
    with pytest.raises(ValueError):
        jax.pmap(lambda a: a)(arr(9, 2))


def test_error_unbound_axis_name():
    _raises(FtransNameError, lambda: ftrans.pmap(lambda a: flax.psum(a, "k"), axis_name="i")(arr(4, 2)),
            "unbound axis name")
    with pytest.raises(NameError):
        jax.pmap(lambda a: jlax.psum(a, "k"), axis_name="i")(arr(4, 2))


def test_error_in_axes_structure():
    f = ftrans.pmap(lambda a, b: a, in_axes=({"x": 0}, 0))
    _raises(ValueError, lambda: f([arr(4)], arr(4)), "tree prefix")
    _raises(ValueError, lambda: ftrans.pmap(lambda a, b: a, in_axes=(0,))(arr(4), arr(4)), "in_axes")


def test_error_out_axes_structure():
    f = ftrans.pmap(lambda a: (a, a), out_axes=(0, 0, 0))
    _raises(ValueError, lambda: f(arr(4)), "tree prefix")


def test_error_unhashable_static():
    f = ftrans.pmap(lambda a, s: a, static_broadcasted_argnums=1)
    _raises(ValueError, lambda: f(arr(4), [1, 2]), "unhashable")
    with pytest.raises(ValueError):
        jax.pmap(lambda a, s: a, static_broadcasted_argnums=1)(arr(4), [1, 2])


def test_error_static_argument_passed_by_keyword_says_pass_it_positionally():
    msg = "must be passed positionally"
    with pytest.raises(ValueError, match=msg):
        jax.pmap(lambda a, b: a + b, static_broadcasted_argnums=(1,))(arr(1, 1), b=1)
    _raises(ValueError, lambda: ftrans.pmap(lambda a, b: a + b, static_broadcasted_argnums=(1,))(arr(1, 1), b=1),
            r"static_broadcasted_argnums=\(1,\).*called with only 1 positional argument\. .*" + msg)


def test_error_rank_too_small():
    _raises(ValueError, lambda: ftrans.pmap(lambda a: a, in_axes=1)(arr(4)), "rank")


def test_pmap_inside_jit_runs_like_jax():
    """A jitted function calling pmap (alone, among other operations, through a nested jit, under grad and
    vmap) computes what JAX's does; a nested pmap's donation is ignored, as in JAX (jax-ml/jax
    test_pmap_nested_donate_ignored). Only lowering it into one module is refused, naming the line."""
    from ftrans.lowering.rules.parallel import PmapInsideJitError

    x = arr(4, 2)
    progs = [
        (lambda t, a: t.pmap(lambda y: y * 2)(a)),
        (lambda t, a: t.pmap(lambda y: y ** 2, donate_argnums=0)(a) + 1),
        (lambda t, a: t.jit(lambda b: t.pmap(lambda y: t.lax.psum(y, "i"), axis_name="i")(b) * 3)(a).sum()),
    ]
    for prog in progs:
        f = ftrans.jit(lambda a, prog=prog: prog(ftrans, a))
        j = jax.jit(lambda a, prog=prog: prog(jax, a))
        np.testing.assert_allclose(np.asarray(f(x)), np.asarray(j(x)), rtol=1e-6)
        np.testing.assert_allclose(np.asarray(f(x)), np.asarray(j(x)), rtol=1e-6)  # the cached signature
        np.testing.assert_allclose(np.asarray(ftrans.jit(lambda a, prog=prog: prog(ftrans, a).sum())(x)),
                                   np.asarray(jax.jit(lambda a, prog=prog: prog(jax, a).sum())(x)), rtol=1e-6)
    a = ftrans.pmap(lambda v: v)(x)
    out = ftrans.jit(lambda b: progs[1](ftrans, b))(a)
    assert not a.is_deleted()
    np.testing.assert_allclose(np.asarray(out), x ** 2 + 1, rtol=1e-6)
    loss_f = lambda a: progs[2](ftrans, a)  # noqa: E731
    loss_j = lambda a: progs[2](jax, a)  # noqa: E731
    np.testing.assert_allclose(np.asarray(ftrans.grad(ftrans.jit(loss_f))(x)), np.asarray(jax.grad(jax.jit(loss_j))(x)))
    np.testing.assert_allclose(np.asarray(ftrans.jit(ftrans.grad(loss_f))(x)), np.asarray(jax.grad(loss_j)(x)))
    xs = np.stack([x, x + 1])
    np.testing.assert_allclose(np.asarray(ftrans.vmap(ftrans.jit(lambda a: progs[0](ftrans, a)))(xs)),
                               np.asarray(jax.vmap(jax.jit(lambda a: progs[0](jax, a)))(xs)))
    with pytest.raises(NotImplementedError, match="inside a jitted function") as info:
        ftrans.jit(ftrans.pmap(lambda v: v * 2)).lower(x)
    assert isinstance(info.value, PmapInsideJitError)
    assert HERE in str(info.value)


def test_pmap_inside_control_flow_under_jit_runs_like_jax():
    """A cond/while/scan/fori_loop body under jit that calls a pmap computes what JAX's does (jax-ml/jax
    issue 1065); each pmap call runs as its own program."""
    def progs(t):
        pm = t.pmap(lambda y: t.lax.psum(y, "i") * 0.5 + y, axis_name="i")
        return [
            lambda a: t.lax.fori_loop(0, 2, lambda i, s: pm(s), a),
            lambda a: t.lax.while_loop(lambda c: c[0] < 2, lambda c: (c[0] + 1, pm(c[1])), (0, a))[1],
            lambda a: t.lax.cond(a.sum() > 0, pm, lambda b: b - 1, a),
            lambda a: t.lax.scan(lambda c, x: (pm(c) + x, c.sum()), a, np.arange(2.0, dtype=np.float32))[0],
        ]

    x = arr(2, 2)
    for f, j in zip(progs(ftrans), progs(jax)):
        np.testing.assert_allclose(np.asarray(ftrans.jit(f)(x)), np.asarray(jax.jit(j)(x)), rtol=1e-6)


def test_vmap_of_pmap_with_collective_over_the_vmap_axis():
    x = arr(3, 4, 2)
    check(lambda m, x: m[0].vmap(m[0].pmap(lambda a: m[2].psum(a, "v") * m[2].pmax(a, "i"), axis_name="i"),
                                 axis_name="v")(x), x)


def test_devices_argument_places_the_program():
    devs = ftrans.local_devices()[4:]
    y = ftrans.pmap(lambda a: a * 2, devices=devs)(arr(4, 2))
    assert y.devices() == set(devs)
    with pytest.raises(ValueError, match="devices"):
        ftrans.pmap(lambda a: a * 2, devices=devs)(arr(3, 2))


def test_axis_size_without_mapped_arguments():
    # jax 0.10's pmap insists on a mapped argument; ftrans honours axis_size (docs/differences.md)
    got = ftrans.pmap(lambda: flax.axis_index("i"), axis_name="i", axis_size=4)()
    np.testing.assert_array_equal(np.asarray(got), np.arange(4, dtype=np.int32))
    _raises(ValueError, lambda: ftrans.pmap(lambda a: a, in_axes=None)(arr(3)), "axis_size")


def test_out_axes_none_result_is_replicated():
    y = ftrans.pmap(lambda a: flax.psum(a, "i"), axis_name="i", out_axes=None)(arr(8, 3))
    assert y.shape == (3,) and len(y.devices()) == 8
    assert all(s.data.shape == (3,) for s in y.addressable_shards)
    jy = jax.pmap(lambda a: jlax.psum(a, "i"), axis_name="i", out_axes=None)(arr(8, 3))
    assert jy.sharding.spec == y.sharding.spec


def test_pmap_of_pmap_results_chain_and_gather():
    x = arr(2, 4, 3)
    f = ftrans.pmap(ftrans.pmap(lambda a: a * 2.0, axis_name="j"), axis_name="i")
    y = f(x)
    np.testing.assert_allclose(np.asarray(f(y)), x * 4, rtol=1e-6)
    assert len(y.devices()) == 8


@given(n=st.sampled_from([1, 2, 4, 8]), rank=st.integers(1, 3), data=st.data())
def test_random_axes_against_jax(n, rank, data):
    """Random mapped sizes, ranks, in_axes/out_axes (None included): a psum-scaled elementwise program."""
    in_axis = data.draw(st.integers(0, rank - 1), label="in_axis")
    out_axis = data.draw(st.one_of(st.none(), st.integers(0, rank - 1)), label="out_axis")
    shape = [data.draw(st.integers(1, 3), label=f"dim{k}") for k in range(rank)]
    shape[in_axis] = n
    x = arr(*shape)
    y = arr(*[s for k, s in enumerate(shape) if k != in_axis])

    def prog(m, x, y):
        def f(a, b):
            s = m[2].psum(a * b, "i")
            return s if out_axis is None else m[1].cos(a) * s + m[2].axis_index("i")

        return m[0].pmap(f, axis_name="i", in_axes=(in_axis, None), out_axes=out_axis)(x, y)

    check(prog, x, y, tol=1e-4)


def test_grad_through_control_flow_with_collectives_inside_pmap():
    x = arr(4, 3)

    def prog(m, x):
        _, jnp, lax = m

        def f(a):
            a = lax.cond(a.sum() > 0, lambda b: b * 2.0, lambda b: jnp.sin(b), a)
            c, ys = lax.scan(lambda c, r: (c * 0.5 + lax.psum(r * c, "i"), c * r), jnp.ones(()), a)
            return (ys * c).sum()

        p = m[0].pmap(f, axis_name="i")
        return m[0].grad(lambda x: p(x).sum())(x)

    check(prog, x, tol=1e-4)


def test_transforms_of_pmap_reach_a_jit_inside():
    x = arr(2, 4, 3)

    def prog(m, x):
        body = m[0].jit(lambda a: m[1].sin(m[2].psum(a, "i")) * a)
        p = m[0].pmap(body, axis_name="i")
        g = m[0].grad(lambda v: p(v).sum())(x[0])
        return g, m[0].vmap(p)(x)

    check(prog, x, tol=1e-4)


def test_clear_caches_empties_pmap_caches():
    from ftrans.lowering import executable as X

    f = ftrans.pmap(lambda a: a * 3.0 + 1.0)
    x = np.arange(8, dtype=np.float32).reshape(8, 1)
    np.testing.assert_allclose(np.asarray(f(x)), x * 3 + 1)
    n = X.stats["compiles"] + X.stats["disk_hits"]
    f(x)
    assert X.stats["compiles"] + X.stats["disk_hits"] == n  # cached: nothing compiled or loaded
    ftrans.clear_caches()
    np.testing.assert_allclose(np.asarray(f(x)), x * 3 + 1)
    assert X.stats["compiles"] + X.stats["disk_hits"] == n + 1  # the program is built again
