"""JAX's collectives between a ``shard_map`` body's reduced/unreduced types, against jax on 8 CPU devices.

In a body checked with ``check_vma``, ``all_gather(..., to='reduced')`` is ``all_gather_reduced`` (varying ->
reduced), ``psum_scatter`` of a value unreduced over its axes is ``unreduced_reduce_scatter`` (unreduced ->
varying) and ``psum`` of one is ``unreduced_psum`` (unreduced -> invariant).  The first two transpose to each
other and ``unreduced_psum`` to ``preduced`` (``pcast(to='reduced')``), whose own transpose is
``unreduced_psum``.  Each check runs one program under both libraries and compares the staged primitives, the
body's types, the values, the layouts and the errors."""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import ftrans
import ftrans.numpy as fjnp
from tests.test_unreduced import _mesh, _same, _shards, _spec

pytestmark = [
    pytest.mark.skipif(jax.local_device_count() < 8, reason="needs 8 host devices (tests/conftest.py)"),
    # jax 0.11 reworked unreduced axes; ftrans keeps jax 0.10's semantics (docs/differences.md)
    pytest.mark.skipif(jax.__version_info__ >= (0, 11), reason="jax 0.11 changed unreduced axes; ftrans has 0.10's"),
]

LIBS = {"jax": (jax, jjnp), "ftrans": (ftrans, fjnp)}
UR_PRIMS = ("all_gather_reduced", "unreduced_reduce_scatter", "unreduced_psum", "preduced")


def _mat(x) -> tuple:
    m = x.aval.mat
    return frozenset(m.varying), frozenset(m.unreduced), frozenset(m.reduced)


def _counts(jaxpr) -> dict:
    text = str(jaxpr)
    return {p: text.count(f"{p}[") for p in UR_PRIMS}


def _run_both(run) -> None:
    _same(run("jax"), run("ftrans"))


class _Seen(list):
    """The body types a test records (a set: ftrans may trace a body more often than JAX does)."""

    def __init__(self) -> None:
        super().__init__()
        self.types: set = set()

    def append(self, x) -> None:
        self.types.add(x)

    def result(self) -> list:
        return [self.types, *self]


def test_fsdp_grad_transposes_to_unreduced_collectives():
    """JAX's ``test_shmap_unreduced_fsdp_grad``: ``pcast(to='reduced')`` then ``all_gather(to='reduced')``
    forward; the gradient reduce-scatters (``unreduced_reduce_scatter``) and sums (``unreduced_psum``) the
    unreduced cotangent.  The staged collectives, the body types, the values and the layouts are JAX's."""

    def run(name):
        lib, jnp = LIBS[name]
        P = lib.sharding.PartitionSpec
        seen = _Seen()
        with lib.set_mesh(_mesh(lib, (2, 2), ("data", "seq"))):
            x = lib.device_put(np.arange(64.0).reshape(8, 4, 2), P("data", "seq", None))
            y = lib.device_put(np.arange(12.0).reshape(2, 6), P("seq", None))

            @lib.shard_map(in_specs=P("seq", None), out_specs=P("seq", None, reduced={"data"}))
            def preduced(a):
                out = lib.lax.pcast(a, axis_name="data", to="reduced")
                seen.append(("preduced", _mat(out)))
                return out

            @lib.shard_map(in_specs=P("seq", None, reduced={"data"}),
                           out_specs=P(None, None, reduced={"seq", "data"}))
            def ag(a):
                out = lib.lax.all_gather(a, axis_name="seq", tiled=True, to="reduced")
                seen.append(("gathered", _mat(a), _mat(out)))
                return out

            @lib.jit
            def f(p, q):
                return jnp.einsum("btd,df->btf", p, ag(preduced(q)))

            out = f(x, y)
            gf = lib.jit(lib.grad(lambda p, q: jnp.sin(f(p, q).sum()), argnums=(0, 1)))
            g1, g2 = gf(x, y)
            seen.extend([_spec(out), np.asarray(out), _spec(g1), _spec(g2), np.asarray(g1), np.asarray(g2),
                     _counts(gf.trace(x, y).jaxpr)])
        return seen.result()

    jx, ft = run("jax"), run("ftrans")
    _same(jx, ft)
    assert ft[-1] == {"all_gather_reduced": 1, "unreduced_reduce_scatter": 1, "unreduced_psum": 1, "preduced": 1}


@pytest.mark.parametrize("axis,tiled", [(0, True), (1, False)])
def test_all_gather_reduced_over_two_axes(axis, tiled):
    """``all_gather(v, ('x', 'y'), to='reduced')``: one ``all_gather_reduced`` over both names (row-major), its
    result reduced over both; the gradient through an einsum with an argument split over them reduce-scatters
    the unreduced cotangent back to the blocks."""

    def run(name):
        lib, jnp = LIBS[name]
        P = lib.sharding.PartitionSpec
        seen = _Seen()
        with lib.set_mesh(_mesh(lib, (2, 2), ("x", "y"))):
            b = lib.device_put(np.arange(16.0).reshape(8, 2), P(("x", "y")))

            @lib.shard_map(in_specs=P(("x", "y")), out_specs=P(reduced={"x", "y"}))
            def k(v):
                out = lib.lax.all_gather(v, ("x", "y"), axis=axis, tiled=tiled, to="reduced")
                seen.append(_mat(out))
                return out

            out = lib.jit(k)(b)
            if tiled:
                w = lib.device_put(np.arange(16.0).reshape(8, 2) + 1, P(("x", "y")))
                loss = lambda q, p: jnp.sin(jnp.einsum("td,sd->ts", p, k(q)).sum())  # noqa: E731
            else:
                w = lib.device_put(np.arange(16.0).reshape(4, 4) + 1, P(("x", "y")))
                loss = lambda q, p: jnp.sin(jnp.einsum("tb,abc->tac", p, k(q)).sum())  # noqa: E731
            gf = lib.jit(lib.grad(loss))
            g = gf(b, w)
            seen.extend([_spec(out), np.asarray(out), _spec(g), np.asarray(g), _counts(gf.trace(b, w).jaxpr)])
        return seen.result()

    _run_both(run)


def test_unreduced_psum_scatter_over_two_axes_untiled():
    """``psum_scatter`` of a value unreduced over ``('x', 'y')``, untiled: JAX's ``unreduced_reduce_scatter``
    over both names; its transpose gathers the blocks (``all_gather_reduced``)."""

    def run(name):
        lib, jnp = LIBS[name]
        P = lib.sharding.PartitionSpec
        seen = _Seen()
        with lib.set_mesh(_mesh(lib, (2, 2), ("x", "y"))):
            a = lib.device_put(np.arange(12.0).reshape(4, 3), P())

            @lib.shard_map(in_specs=P(), out_specs=P(("x", "y")))
            def rs(v):
                u = lib.lax.pcast(lib.lax.pcast(v, ("x", "y"), to="varying"), ("x", "y"), to="unreduced")
                out = lib.lax.psum_scatter(u, ("x", "y"), tiled=False)
                seen.append((_mat(u), _mat(out)))
                return out

            out = lib.jit(rs)(a)
            gf = lib.jit(lib.grad(lambda v: (rs(v) ** 2).sum()))
            body = lib.make_jaxpr(rs)(a).eqns[0].params["jaxpr"]
            seen.extend([np.asarray(out), _shards(out), np.asarray(gf(a)), [e.primitive.name for e in body.eqns][-1],
                     _counts(gf.trace(a).jaxpr)])
        return seen.result()

    _run_both(run)


def test_psum_of_unreduced_value_and_its_transpose():
    """``psum`` of a value unreduced over ``x`` is ``unreduced_psum`` (invariant result); its transpose is the
    ``preduced`` type cast: no sum on the way back."""

    def run(name):
        lib, jnp = LIBS[name]
        P = lib.sharding.PartitionSpec
        seen = _Seen()
        with lib.set_mesh(_mesh(lib, (2, 2), ("x", "y"))):
            a = lib.device_put(np.arange(8.0), P("x"))

            @lib.shard_map(in_specs=P("x"), out_specs=P())
            def ps(v):
                u = lib.lax.pcast(v, "x", to="unreduced")
                out = lib.lax.psum(u, "x")
                seen.append((_mat(u), _mat(out)))
                return out

            gf = lib.jit(lib.grad(lambda v: (ps(v) ** 2).sum()))
            seen.extend([np.asarray(lib.jit(ps)(a)), np.asarray(gf(a)), _spec(gf(a)), _counts(gf.trace(a).jaxpr)])
        return seen.result()

    _run_both(run)


def test_errors_of_unreduced_collectives():
    """JAX's ValueErrors: ``all_gather(to='reduced')`` of a value varying along none of the axes (or in a
    body traced with ``check_vma=False``, which types no value varying), ``psum`` over axes a value is
    unreduced along only some of."""

    def run(name):
        lib, jnp = LIBS[name]
        P = lib.sharding.PartitionSpec
        out = []
        with lib.set_mesh(_mesh(lib, (2, 2), ("x", "y"))):
            cases = [
                (lambda v: lib.lax.all_gather(v, "x", tiled=True, to="reduced"), P(), P(reduced={"x"}), True,
                 "only accepts inputs that are varying"),
                (lambda v: lib.lax.all_gather(v, "x", tiled=True, to="reduced"), P("x"), P(), False,
                 "only accepts inputs that are varying"),
                (lambda v: lib.lax.psum(lib.lax.pcast(v, "x", to="unreduced"), ("x", "y")), P("x"), P(), True,
                 "can only accept axis_name which corresponds to one of"),
            ]
            for body, in_spec, out_spec, check, msg in cases:
                arr = lib.device_put(np.arange(8.0), in_spec)
                f = lib.jit(lib.shard_map(body, in_specs=in_spec, out_specs=out_spec, check_vma=check))
                with pytest.raises(ValueError, match=msg):
                    f(arr)
                out.append(msg)
        return out

    _run_both(run)


def test_eager_and_lowered_all_gather_reduced():
    """Outside ``jit`` the body runs as JAX's eager shard_map does (the value reduced over ``x``; its gradient
    reduce-scatters); under ``jit`` the lowered collectives are XLA's all-gather, reduce-scatter and
    all-reduce, as JAX lowers them."""

    def run(name):
        lib, jnp = LIBS[name]
        P = lib.sharding.PartitionSpec
        with lib.set_mesh(_mesh(lib, (2,), ("x",))):
            arr = lib.device_put(np.arange(8.0), P("x"))

            @lib.shard_map(out_specs=P(reduced={"x"}))
            def f(v):
                return lib.lax.all_gather(v, "x", tiled=True, to="reduced")

            @lib.shard_map(out_specs=P())
            def h(v):
                return lib.lax.psum(lib.lax.pcast(v, "x", to="unreduced"), "x")

            out = f(arr)
            g = lib.grad(lambda v: (f(v) * 2.0).sum())(arr)
            text = lib.jit(lib.grad(lambda v: (f(v) * 2.0).sum() + h(v).sum())).lower(arr).as_text()
            ops = [op for op in ("all_gather", "reduce_scatter", "all_reduce") if f'"stablehlo.{op}"' in text]
            return _spec(out), np.asarray(out), _spec(g), np.asarray(g), ops

    _run_both(run)


def test_vmap_of_body_with_unreduced_collectives():
    """A ``vmap`` of a shard_map whose body gathers reduced and sums unreduced values: ftrans batches them
    (over another axis than the mesh's), where JAX raises NotImplementedError (docs/differences.md); the
    values are each example's, as a loop over the examples gives them."""
    P = ftrans.sharding.PartitionSpec
    with ftrans.set_mesh(_mesh(ftrans, (2,), ("x",))):
        @ftrans.shard_map(in_specs=P(None, "x"), out_specs=(P(reduced={"x"}), P("x")))
        def g(v):
            full = ftrans.lax.all_gather(v, "x", axis=1, tiled=True, to="reduced")
            part = ftrans.lax.psum_scatter(ftrans.lax.pcast(v, "x", to="unreduced"), "x", scatter_dimension=1,
                                           tiled=True)
            return full, part

        data = np.arange(48.0).reshape(2, 3, 8)
        full, part = ftrans.jit(ftrans.vmap(g))(ftrans.device_put(data, P(None, None, "x")))
        for i in range(2):
            f1, p1 = ftrans.jit(g)(ftrans.device_put(data[i], P(None, "x")))
            np.testing.assert_array_equal(np.asarray(full)[i], np.asarray(f1))
            np.testing.assert_array_equal(np.asarray(part)[i], np.asarray(p1))
        np.testing.assert_array_equal(np.asarray(full), data)


def test_grad_through_a_closed_over_sharded_array_keeps_its_layout():
    """A sharded array the jitted function closes over enters the partitioned program laid out as it is (its
    type says so); it entered replicated, and the gradient's unreduced product then made Shardy abort the
    process (an LLVM check failure) where JAX runs."""

    def run(name):
        lib, jnp = LIBS[name]
        P = lib.sharding.PartitionSpec
        with lib.set_mesh(_mesh(lib, (2, 2), ("x", "y"))):
            b = lib.device_put(np.arange(16.0).reshape(8, 2), P(("x", "y")))
            w = lib.device_put(np.arange(16.0).reshape(4, 4) + 1, P(("x", "y")))

            @lib.shard_map(in_specs=P(("x", "y")), out_specs=P(reduced={"x", "y"}))
            def gather(a):
                return lib.lax.all_gather(a, ("x", "y"), axis=1, tiled=False, to="reduced")

            g = lib.jit(lib.grad(lambda y: jnp.sin(jnp.einsum("tb,abc->tac", w, gather(y)).sum())))
            out = g(b)
            return np.asarray(out), _spec(out)

    _run_both(run)
