"""JAX's unreduced and reduced mesh axes in sharding types, against jax on 8 CPU devices.

A value unreduced over mesh axis ``x`` holds, on each device along ``x``, a partial sum still to be added
(``reshard`` to a spec without ``x`` adds them); one reduced over ``x`` is replicated there and its
cotangent is unreduced.  Each check runs one program under both libraries and compares the types, the
result shardings, the blocks each device holds, the values and the errors."""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import ftrans
import ftrans.numpy as fjnp
from ftrans import lax as flax

pytestmark = [
    pytest.mark.skipif(jax.local_device_count() < 8, reason="needs 8 host devices (tests/conftest.py)"),
    # jax 0.11 reworked unreduced axes (PartitionSpec's unreduced_kind, shard_map's out_specs must match the
    # value's unreduced type, reduce_sum's and device_put's unreduced results); ftrans keeps jax 0.10's
    # semantics (docs/differences.md), so these comparisons run against jax 0.10 only
    pytest.mark.skipif(jax.__version_info__ >= (0, 11), reason="jax 0.11 changed unreduced axes; ftrans has 0.10's"),
]

LIBS = {"jax": (jax, jjnp, jax.lax), "ftrans": (ftrans, fjnp, flax)}


def _mesh(lib, shape, names):
    return lib.make_mesh(shape, names, axis_types=(lib.sharding.AxisType.Explicit,) * len(names))


def _shards(arr) -> list:
    return [np.asarray(s.data) for s in arr.addressable_shards]


def _spec(arr) -> tuple:
    s = arr.sharding.spec
    parts = list(s.partitions)
    while parts and parts[-1] is None:  # (P('x') and P('x', None) are one layout)
        parts.pop()
    return tuple(parts), frozenset(s.unreduced), frozenset(s.reduced)


def _both(fn) -> tuple:
    return fn("jax"), fn("ftrans")


def _same(a, b) -> None:
    if isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
    elif isinstance(a, np.ndarray):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    else:
        assert a == b, (a, b)


@pytest.mark.parametrize("x_spec,y_spec,out_spec", [
    (("x", "y"), ("y", None), (("x", None), {"y"})),
    ((None, ("x", "y")), (("x", "y"), None), ((None, None), {"x", "y"})),
])
def test_einsum_unreduced_out_then_add_and_reshard(x_spec, y_spec, out_spec):
    """``einsum(out_sharding=P(..., unreduced=...))``: the partial sums stay on the devices (the blocks are
    compared), an ``add`` of two keeps them, and ``reshard`` adds them up."""
    parts, u = out_spec

    def run(name):
        lib, jnp, _ = LIBS[name]
        P = lib.sharding.PartitionSpec
        inp = np.arange(64.0).reshape(8, 8)
        with lib.set_mesh(_mesh(lib, (2, 2), ("x", "y"))):
            x = lib.device_put(inp, P(*x_spec))
            y = lib.device_put(inp.T, P(*y_spec))
            types = []

            @lib.jit
            def f(x, y):
                m = jnp.einsum("ab,bc->ac", x, y, out_sharding=P(*parts, unreduced=u))
                s = m + m
                types.append(str(lib.typeof(s)))
                return s

            out = f(x, y)
            red = lib.sharding.reshard(out, P(*parts))
            return types, _spec(out), _shards(out), np.asarray(red), _spec(red)

    _same(*_both(run))


def test_reduce_sum_unreduced_and_its_grad():
    def run(name):
        lib, jnp, lax = LIBS[name]
        P = lib.sharding.PartitionSpec
        with lib.set_mesh(_mesh(lib, (2,), ("x",))):
            x = lib.device_put(np.arange(8, dtype=np.float32), P("x"))
            f = lib.jit(lambda x: lax.reduce_sum(x, axes=(0,), out_sharding=P(unreduced={"x"})))
            out = f(x)
            text = f.lower(x).as_text()
            g = lib.jit(lib.grad(f))(x)
            return (_spec(out), _shards(out), float(lib.sharding.reshard(out, P())), text.count('unreduced={"x"}'),
                    _spec(g), np.asarray(g))

    _same(*_both(run))


@pytest.mark.parametrize("shape,orig,un", [
    ((8,), ("x",), ((None,), {"x"})),
    ((4, 4), ("x", "y"), (("x", None), {"y"})),
    ((4, 4), (None, None), ((None, None), {"x", "y"})),
])
def test_reshard_roundtrip_through_unreduced(shape, orig, un):
    """Eager ``reshard`` to an unreduced spec keeps one copy of each block along the axes (zeros on the other
    devices) and back adds them: the value and layout return."""
    parts, u = un

    def run(name):
        lib, jnp, _ = LIBS[name]
        P = lib.sharding.PartitionSpec
        with lib.set_mesh(_mesh(lib, (2, 2), ("x", "y"))):
            arr = lib.device_put(np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape), P(*orig))
            a2 = lib.sharding.reshard(arr, P(*parts, unreduced=u))
            a3 = lib.sharding.reshard(a2, P(*orig))
            return _spec(a2), _shards(a2), a2.sharding.is_fully_replicated, _spec(a3), np.asarray(a3)

    _same(*_both(run))


def test_device_put_and_jit_out_shardings_unreduced():
    def run(name):
        lib, jnp, _ = LIBS[name]
        P = lib.sharding.PartitionSpec
        with lib.set_mesh(_mesh(lib, (2,), ("x",))):
            rep = jnp.arange(4.0)
            a = lib.device_put(rep, P(unreduced={"x"}))
            b = lib.jit(lambda v: v, out_shardings=P(unreduced={"x"}))(rep)
            c = jnp.array(jnp.ones((2, 2)), out_sharding=P(unreduced={"x"}))
            return [(_spec(v), _shards(v)) for v in (a, b, c)]

    _same(*_both(run))


@pytest.mark.parametrize("op", ["add", "mul"])
def test_reduced_inputs_have_unreduced_cotangents(op):
    """A reduced input's gradient is unreduced over the same axes; resharded, it is the replicated
    gradient (through a nested jit, whose cotangent seed is cast to that type)."""

    def run(name):
        lib, jnp, lax = LIBS[name]
        P = lib.sharding.PartitionSpec
        fn = getattr(lax, op)
        with lib.set_mesh(_mesh(lib, (2,), ("x",))):
            a = lib.device_put(np.arange(8.0), P(reduced={"x"}))
            b = lib.device_put(np.arange(8.0) + 1, P(reduced={"x"}))
            f = lib.jit(lambda x, y: fn(x, y).sum())
            g1, g2 = lib.jit(lib.grad(f, argnums=(0, 1)))(a, b)
            return [(_spec(g), _shards(g), np.asarray(lib.sharding.reshard(g, P()))) for g in (g1, g2)]

    _same(*_both(run))


def test_reduced_reshard_to_sharded_transposes_to_unreduced():
    def run(name):
        lib, jnp, _ = LIBS[name]
        P = lib.sharding.PartitionSpec
        with lib.set_mesh(_mesh(lib, (2, 2), ("x", "y"))):
            arr = lib.device_put(np.arange(4.0), P(None, reduced={"x"}))
            f = lib.jit(lambda x: lib.sharding.reshard(x, P("x")))
            g = lib.jit(lib.grad(lambda x: f(x).sum()))(arr)
            return _spec(f(arr)), np.asarray(f(arr)), _spec(g), _shards(g)

    _same(*_both(run))


def test_unreduced_input_gradient_is_reduced():
    def run(name):
        lib, jnp, lax = LIBS[name]
        P = lib.sharding.PartitionSpec
        with lib.set_mesh(_mesh(lib, (2,), ("x",))):
            inp = np.arange(16.0).reshape(4, 4)
            arr = lib.device_put(jnp.asarray(inp), P(unreduced={"x"}))
            f = lib.jit(lambda x: lax.slice(x, (0, 0), (4, 3)))
            out = f(arr)
            g = lib.jit(lib.grad(lambda x: f(x).sum()))(arr)
            return _spec(out), np.asarray(lib.sharding.reshard(out, P())), _spec(g), np.asarray(g)

    _same(*_both(run))


def test_vjp_zero_cotangent_of_reduced_is_unreduced():
    def run(name):
        lib, jnp, _ = LIBS[name]
        P = lib.sharding.PartitionSpec
        with lib.set_mesh(_mesh(lib, (2,), ("x",))):
            a = lib.sharding.reshard(np.arange(8.0), P(reduced={"x"}))
            ct = lib.sharding.reshard(jnp.arange(8.0), P(unreduced={"x"}))
            _, pb = lib.vjp(lib.jit(lambda x, y: y), a, a)
            xb, yb = pb(ct)
            return str(lib.typeof(xb)), str(lib.typeof(yb)), _shards(xb), _shards(yb)

    _same(*_both(run))


def _error(name, fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001
        return type(e).__name__.removeprefix("Ftrans"), str(e).split("\n")[0][:60]
    return None


@pytest.mark.parametrize("case", ["add_mixed", "add_other_axes", "dot_of_unreduced", "contract_mismatch",
                                  "contract_unreduced_other", "mul_reduced_sharded", "mul_unreduced_scalar",
                                  "reduce_sum_unsummed_axis", "reshape_out_unreduced"])
def test_misuse_raises_as_jax(case):
    """JAX's errors for misused unreduced/reduced axes: the same exception type and the same message start."""

    def run(name):
        lib, jnp, lax = LIBS[name]
        P = lib.sharding.PartitionSpec
        inp = np.arange(16.0).reshape(8, 2)
        with lib.set_mesh(_mesh(lib, (2, 2, 2), ("x", "y", "z"))):
            x = lib.device_put(inp, P("x", "y"))
            y = lib.device_put(inp.T, P("y", None))
            a = lib.device_put(inp, P("x", "z"))
            b = lib.device_put(inp.T, P("z", None))
            ein = lambda p, q, s: jnp.einsum("ab,bc->ac", p, q, out_sharding=s)  # noqa: E731
            cases = {
                "add_mixed": lambda: lib.jit(lambda x, y: ein(x, y, P("x", unreduced={"y"})) + ein(x, y, P("x")))(x, y),
                "add_other_axes": lambda: lib.jit(
                    lambda x, y, a, b: ein(x, y, P("x", unreduced={"y"})) + ein(a, b, P("x", unreduced={"z"})))(
                        x, y, a, b),
                "dot_of_unreduced": lambda: lib.jit(
                    lambda x, y: jnp.einsum("ab,bc->ac", ein(x, y, P("x", unreduced={"y"})), x))(x, y),
                "contract_mismatch": lambda: lib.jit(
                    lambda x: ein(x, inp.T, P("x", unreduced={"y"})))(x),
                "contract_unreduced_other": lambda: lib.jit(lambda x, y: ein(x, y, P("x", unreduced={"z"})))(x, y),
                "mul_reduced_sharded": lambda: lib.jit(lambda p, q: p * q)(
                    lib.device_put(np.arange(8.0), P(reduced={"x"})), lib.device_put(np.arange(8.0), P("x"))),
                "mul_unreduced_scalar": lambda: lib.jit(lambda v: v * 2)(
                    lib.sharding.reshard(jnp.arange(8.0), P(unreduced={"x"}))),
                "reduce_sum_unsummed_axis": lambda: lib.jit(
                    lambda v: lax.reduce_sum(v, axes=(0,), out_sharding=P(None, unreduced={"x"})))(
                        lib.device_put(inp, P("y", None))),
                "reshape_out_unreduced": lambda: jnp.reshape(np.arange(8), (4, 2), out_sharding=P(unreduced={"x"})),
            }
            return _error(name, cases[case])

    j, f = _both(run)
    assert j is not None and f is not None, (j, f)
    assert f[1] == j[1], (j, f)
