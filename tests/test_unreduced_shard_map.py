"""JAX's unreduced and reduced mesh axes at a ``shard_map``'s boundary, against jax on 8 CPU devices.

An ``out_specs`` entry ``P(..., unreduced={'y'})`` leaves each device's block as it is (a partial sum over
``y``) and types the result unreduced there; an argument unreduced over ``x`` enters the body as those
partial sums.  Each check runs one program under both libraries and compares the result's spec, the blocks
each device holds, the values and the errors."""

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
    # jax 0.11 reworked unreduced axes (PartitionSpec's unreduced_kind, shard_map's out_specs must match the
    # value's unreduced type, reduce_sum's and device_put's unreduced results); ftrans keeps jax 0.10's
    # semantics (docs/differences.md), so these comparisons run against jax 0.10 only
    pytest.mark.skipif(jax.__version_info__ >= (0, 11), reason="jax 0.11 changed unreduced axes; ftrans has 0.10's"),
]

LIBS = {"jax": (jax, jjnp), "ftrans": (ftrans, fjnp)}


@pytest.mark.parametrize("in_specs,out_spec", [
    ((("x", "y"), ("y", None)), (("x", None), {"y"})),
    (((None, "x"), ("x", None)), ((), {"x"})),
    (((None, ("x", "y")), (("x", "y"), None)), ((), {"x", "y"})),
])
def test_out_specs_unreduced_keeps_partial_sums(in_specs, out_spec):
    """A matmul's partial products returned with ``out_specs`` unreduced over the contracted axes: each
    device keeps its block, the type says unreduced, and ``reshard`` adds them up."""
    parts, u = out_spec

    def run(name):
        lib, jnp = LIBS[name]
        P = lib.sharding.PartitionSpec
        a = np.arange(32.0).reshape(4, 8)
        b = np.arange(16.0).reshape(8, 2)
        with lib.set_mesh(_mesh(lib, (2, 2), ("x", "y"))):
            x = lib.device_put(a, P(*in_specs[0]))
            y = lib.device_put(b, P(*in_specs[1]))
            f = lib.jit(lib.shard_map(lambda p, q: jnp.dot(p, q), out_specs=P(*parts, unreduced=u)))
            out = f(x, y)
            red = lib.sharding.reshard(out, P(*parts))
            return _spec(out), _shards(out), np.asarray(red), _spec(red)

    _same(run("jax"), run("ftrans"))


@pytest.mark.parametrize("check_vma", [True, False])
def test_unreduced_in_and_out_roundtrip(check_vma):
    """A value unreduced over ``x`` goes into a shard_map as its partial sums: returned unreduced it keeps
    them, and ``psum`` over ``x`` adds them."""

    def run(name):
        lib, jnp = LIBS[name]
        P = lib.sharding.PartitionSpec
        with lib.set_mesh(_mesh(lib, (2,), ("x",))):
            arr = lib.device_put(np.arange(4, dtype=np.int32), P("x"))
            bitcast = lib.jit(lib.shard_map(lambda v: v, in_specs=P("x"), out_specs=P(unreduced={"x"})))
            out = bitcast(arr)
            g1 = lib.jit(lib.shard_map(lambda v: lib.lax.psum(v, "x"), in_specs=P(unreduced={"x"}),
                                       out_specs=P()))
            back = lib.jit(lib.shard_map(lambda v: v, in_specs=P(unreduced={"x"}),
                                         out_specs=P(unreduced={"x"}), check_vma=check_vma))
            s = g1(out)
            r = back(out)
            return _spec(out), _shards(out), _spec(s), _shards(s), _spec(r), _shards(r)

    _same(run("jax"), run("ftrans"))


def _error(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 (the class and message are compared)
        return e
    return None


def test_unreduced_spec_errors():
    """JAX's errors: unreduced specs need a fully manual shard_map over Explicit axes, and an out_specs
    unreduced axis the result does not vary along (no partial sums to keep)."""

    def run(name):
        lib, jnp = LIBS[name]
        P = lib.sharding.PartitionSpec
        auto = lib.make_mesh((2, 1), ("x", "y"), axis_types=(lib.sharding.AxisType.Auto,) * 2)
        errs = [
            _error(lambda: lib.shard_map(lambda v: v, mesh=auto, in_specs=P(unreduced={"x"}),
                                         out_specs=P())(np.arange(8.0))),
            _error(lambda: lib.shard_map(lambda v: v, mesh=auto, in_specs=P(unreduced={"x"}), out_specs=P(),
                                         axis_names={"x"})(np.arange(8.0))),
        ]
        with lib.set_mesh(_mesh(lib, (2, 2), ("x", "y"))):
            rep = lib.device_put(np.arange(8.0), P())
            errs.append(_error(lambda: lib.shard_map(lambda v: v, in_specs=P(unreduced={"x"}),
                                                     out_specs=P())(rep)))
            a = lib.device_put(np.arange(8.0).reshape(2, 4), P("x", None))
            b = lib.device_put(np.arange(8.0).reshape(4, 2), P(None, None))
            f = lib.jit(lib.shard_map(lambda p, q: jnp.dot(p, q), out_specs=P("x", None, unreduced={"y"})))
            errs.append(_error(lambda: f(a, b)))
        return errs

    jx, ft = run("jax"), run("ftrans")
    for e_j, e_f in zip(jx, ft):
        assert e_j is not None and e_f is not None, (e_j, e_f)
        assert isinstance(e_f, (ValueError, NotImplementedError)), (e_j, e_f)
        assert isinstance(e_j, NotImplementedError) == isinstance(e_f, NotImplementedError), (e_j, e_f)
    assert "Explicit" in str(ft[0]) and "full manual" in str(ft[1]) and "does not match" in str(ft[2])
    assert "Varying->Unreduced" in str(ft[3])


def test_grad_through_unreduced_out_specs():
    """The cotangent of a result returned unreduced is reduced (the same on every device): the gradients of
    a matmul's partial products summed after a ``reshard`` are the plain matmul's."""

    def run(name):
        lib, jnp = LIBS[name]
        P = lib.sharding.PartitionSpec
        a = np.arange(8.0).reshape(2, 4)
        b = np.arange(8.0).reshape(4, 2)
        with lib.set_mesh(_mesh(lib, (2, 2), ("x", "y"))):
            x = lib.device_put(a, P("x", "y"))
            y = lib.device_put(b, P("y", None))
            f = lib.shard_map(lambda p, q: jnp.einsum("ab,bc->ac", p, q), in_specs=(P("x", "y"), P("y", None)),
                              out_specs=P("x", None, unreduced={"y"}))

            def g(p, q):
                return lib.sharding.reshard(f(p, q), P("x", None)).sum()

            gx, gy = lib.jit(lib.grad(g, argnums=(0, 1)))(x, y)
            return _spec(gx), np.asarray(gx), _spec(gy), np.asarray(gy)

    _same(run("jax"), run("ftrans"))


def test_grad_of_unreduced_times_reduced_arguments():
    """Arguments unreduced and reduced over ``x`` multiplied in a body returned unreduced: the gradients'
    types swap the sets (reduced / unreduced) and their values, summed, are JAX's."""

    def run(name):
        lib, jnp = LIBS[name]
        P = lib.sharding.PartitionSpec
        with lib.set_mesh(_mesh(lib, (2,), ("x",))):
            u = lib.device_put(jnp.arange(8.0), P(unreduced={"x"}))
            r = lib.device_put(jnp.arange(8.0) + 1.0, P(reduced={"x"}))
            f = lib.jit(lib.shard_map(lambda p, q: (p * q).sum(), out_specs=P(unreduced={"x"})))
            out = f(u, r)
            g1, g2 = lib.jit(lib.grad(f, argnums=(0, 1)))(u, r)
            return (_spec(out), float(np.asarray(lib.sharding.reshard(out, P()))), _spec(g1), _spec(g2),
                    np.asarray(lib.sharding.reshard(g1, P())), np.asarray(lib.sharding.reshard(g2, P())))

    _same(run("jax"), run("ftrans"))


def test_pcast_unreduced_and_all_gather_reduced_values_and_grads():
    """``pcast(to='unreduced')`` returned unreduced keeps each device's block (added by ``reshard``);
    ``all_gather(to='reduced')`` returned reduced: the values, types and gradients are JAX's."""

    def run(name):
        lib, jnp = LIBS[name]
        P = lib.sharding.PartitionSpec
        res = []
        with lib.set_mesh(_mesh(lib, (2,), ("x",))):
            arr = lib.device_put(np.arange(8.0), P("x"))
            f = lib.shard_map(lambda v: lib.lax.pcast(v, "x", to="unreduced"), out_specs=P(unreduced={"x"}))
            out = lib.jit(f)(arr)
            g = lib.jit(lib.grad(lambda v: lib.sharding.reshard(f(v), P()).sum()))(arr)
            res += [_spec(out), _shards(out), np.asarray(lib.sharding.reshard(out, P())), _spec(g), np.asarray(g)]
        with lib.set_mesh(_mesh(lib, (2, 2), ("x", "y"))):
            arr = lib.device_put(np.arange(32.0).reshape(8, 4), P("x", "y"))

            @lib.shard_map(out_specs=P(reduced={"y"}))
            def h(v):
                full = lib.lax.all_gather(v, "y", axis=1, tiled=True, to="reduced")
                return lib.lax.psum(jnp.sum(full * full), "x")

            out = lib.jit(h)(arr)
            g = lib.jit(lib.grad(h))(arr)
            res += [_spec(out), float(out), _spec(g), np.asarray(g)]
        return res

    _same(run("jax"), run("ftrans"))


def _mat(x) -> tuple:
    m = x.aval.mat
    return frozenset(m.varying), frozenset(m.unreduced), frozenset(m.reduced)


def test_body_types_carry_unreduced_and_reduced_sets():
    """Inside a checked body the values' types carry JAX's ``mat``: ``in_specs`` sets, ``psum`` of an
    unreduced value (invariant), ``psum_scatter`` of one (varying), ``pcast(to='reduced')``,
    ``all_gather(to='reduced')``, and unary/shape operations keeping a reduced set."""

    def run(name):
        lib, jnp = LIBS[name]
        P = lib.sharding.PartitionSpec
        seen = []
        with lib.set_mesh(_mesh(lib, (2, 2), ("x", "y"))):
            a = lib.device_put(np.arange(32.0).reshape(8, 4), P("x", None))
            b = lib.device_put(np.arange(16.0).reshape(4, 4), P(None, None, reduced={"y"}))

            @lib.jit
            @lib.shard_map(in_specs=(P("x", None), P(None, None, reduced={"y"})), out_specs=P("x", None))
            def f(p, q):
                seen.append(("in", _mat(p), _mat(q)))
                q2 = jnp.reshape(q.astype(jnp.float32).T, (4, 4))
                seen.append(("kept", _mat(q2)))
                r = lib.lax.pcast(jnp.sum(p), "y", to="reduced")
                seen.append(("preduced", _mat(r)))
                g = lib.lax.all_gather(p, "x", tiled=True, to="reduced")
                seen.append(("gathered", _mat(g)))
                return jnp.dot(p, q2)

            out = f(a, b)
            seen.append(np.asarray(out))

            z = lib.device_put(np.arange(16.0).reshape(4, 4), P(None, "x"))
            w = lib.device_put(np.arange(16.0).reshape(4, 4), P("x", None))

            @lib.shard_map(in_specs=P(None, None, unreduced={"x"}), out_specs=(P(), P("x")))
            def s(v):
                t = lib.lax.psum(v, "x")
                sc = lib.lax.psum_scatter(v, "x", tiled=True)
                seen.append(("unreduced", _mat(v), _mat(t), _mat(sc)))
                return t, sc

            t, sc = lib.jit(lambda p, q: s(jnp.einsum("ab,bc->ac", p, q, out_sharding=P(unreduced={"x"}))))(z, w)
            seen += [np.asarray(t), np.asarray(sc)]
        return seen

    _same(run("jax"), run("ftrans"))


def test_grad_of_psum_of_unreduced_argument():
    """The gradient through ``psum`` of a body argument unreduced over ``x`` is the cotangent on every device
    (JAX's ``unreduced_psum`` transposes to a type cast, no sum): the values and layouts are JAX's."""

    def run(name):
        lib, jnp = LIBS[name]
        P = lib.sharding.PartitionSpec
        with lib.set_mesh(_mesh(lib, (2,), ("x",))):
            x = lib.device_put(np.arange(8.0).reshape(2, 4), P(None, "x"))
            y = lib.device_put(np.arange(24.0).reshape(4, 6), P("x", None))
            ar = lib.shard_map(lambda v: lib.lax.psum(v, "x"), in_specs=P(unreduced={"x"}), out_specs=P())

            def f(p, q):
                return ar(jnp.einsum("ab,bc->ac", p, q, out_sharding=P(unreduced={"x"}))).sum()

            out = lib.jit(f)(x, y)
            g1, g2 = lib.jit(lib.grad(f, argnums=(0, 1)))(x, y)
            return float(out), _spec(g1), _spec(g2), np.asarray(g1), np.asarray(g2)

    _same(run("jax"), run("ftrans"))


def test_unreduced_errors_in_body():
    """A non-linear operation (``sin``) on an unreduced value raises in a jitted body and in an eager one: jax
    0.12's ShardingTypeError ("non-linear operation"), which ftrans follows under every jax (jax 0.10/0.11:
    NotImplementedError, "unreduced rule for sin is not implemented"); ``pcast(to='reduced')`` of a varying
    value raises ValueError."""
    import jax

    from ftrans.errors import ShardingTypeError

    def run(name):
        lib, jnp = LIBS[name]
        P = lib.sharding.PartitionSpec
        res = []
        with lib.set_mesh(_mesh(lib, (2,), ("x",))):
            arr = lib.device_put(np.arange(8.0), P("x"))
            sin_u = lib.shard_map(lambda v: jnp.sin(lib.lax.pcast(v, "x", to="unreduced")),
                                  out_specs=P(unreduced={"x"}))
            for fn in (lib.jit(sin_u), sin_u):
                if name == "ftrans":
                    with pytest.raises(ShardingTypeError, match="sin is a non-linear operation and cannot accept "
                                                                "input that is unreduced"):
                        fn(arr)
                elif jax.__version_info__ >= (0, 12):
                    with pytest.raises(Exception, match="sin is a non-linear operation"):
                        fn(arr)
                else:
                    with pytest.raises(NotImplementedError, match="unreduced rule for sin is not implemented"):
                        fn(arr)
                res.append("raised")
            with pytest.raises(ValueError):
                lib.jit(lib.shard_map(lambda v: lib.lax.pcast(v, "x", to="reduced"), out_specs=P("x")))(arr)
            res.append("raised")
        return res

    _same(run("jax"), run("ftrans"))


def test_eager_shard_map_unreduced_in_and_out_with_grads():
    """Eager shard_map (no jit): a body returning ``pcast(to='unreduced')`` and one taking an unreduced
    argument to ``psum_scatter``, with their gradients: types, blocks and values are JAX's."""

    def run(name):
        lib, jnp = LIBS[name]
        P = lib.sharding.PartitionSpec
        res = []
        with lib.set_mesh(_mesh(lib, (2,), ("x",))):
            arr = lib.device_put(np.arange(8.0), P("x"))

            @lib.shard_map(out_specs=P(unreduced={"x"}))
            def f(v):
                y = lib.lax.pcast(v, "x", to="unreduced")
                res.append(_mat(y))
                return y

            out = f(arr)
            res += [_spec(out), np.asarray(lib.sharding.reshard(out, P()))]
            g = lib.grad(lambda v: f(v).sum())(arr)
            res += [_spec(g), np.asarray(g)]
            u = lib.sharding.reshard(jnp.arange(8.0), P(unreduced={"x"}))
            f2 = lib.shard_map(lambda v: lib.lax.psum_scatter(v, "x", tiled=True), out_specs=P("x"))
            out2 = f2(u)
            g2 = lib.grad(lambda v: f2(v).sum())(u)
            res += [_spec(out2), np.asarray(out2), _spec(g2), np.asarray(lib.sharding.reshard(g2, P()))]
        return res

    _same(run("jax"), run("ftrans"))


def test_vmap_of_body_with_reduced_and_unreduced_casts():
    """``vmap`` of a shard_map whose body casts with ``pcast(to='reduced'/'unreduced')`` (JAX's batching
    rules for those casts raise NotImplementedError): each example's result is JAX's unbatched one."""
    P = ftrans.sharding.PartitionSpec
    JP = jax.sharding.PartitionSpec
    xs = np.arange(16.0).reshape(2, 8)

    def body(lib, jnp):
        def f(v):
            r = lib.lax.pcast(jnp.sum(v), "x", to="unreduced")
            return r, lib.lax.pcast(v * 2.0, "x", to="unreduced")

        return f

    with ftrans.set_mesh(_mesh(ftrans, (2,), ("x",))):
        sm = ftrans.shard_map(body(ftrans, fjnp), in_specs=P("x"), out_specs=(P(unreduced={"x"}),) * 2)
        got = ftrans.jit(ftrans.vmap(lambda v: [ftrans.sharding.reshard(o, P()) for o in sm(v)]))(
            ftrans.device_put(xs, P(None, "x")))
        got = [np.asarray(g) for g in got]
    with jax.set_mesh(_mesh(jax, (2,), ("x",))):
        jsm = jax.shard_map(body(jax, jjnp), in_specs=JP("x"), out_specs=(JP(unreduced={"x"}),) * 2)
        want = [np.stack(w) for w in zip(*[[np.asarray(jax.reshard(o, JP())) for o in jax.jit(jsm)(
            jax.device_put(x, JP("x")))] for x in xs])]
    _same(want, got)


def test_reduced_sets_through_operations_and_out_specs_check():
    """A reduced body value keeps its set through the operations JAX's rules keep it through (sum, index,
    sort, exp), loses it where JAX has no rule (take, max, cumsum), and returned with out_specs that leave
    the axis out it is JAX's replication error."""

    def run(name):
        lib, jnp = LIBS[name]
        P = lib.sharding.PartitionSpec
        seen = []
        with lib.set_mesh(_mesh(lib, (2,), ("x",))):
            arr = lib.device_put(np.arange(8.0), P(reduced={"x"}))

            def body(x):
                for fn in (lambda v: jnp.take(v, jnp.array([1, 2])), jnp.max, jnp.sum, lambda v: v[3],
                           jnp.cumsum, jnp.sort, jnp.exp):
                    seen.append(_mat(fn(x)))
                return x.sum()

            out = lib.jit(lib.shard_map(body, out_specs=P(reduced={"x"})))(arr)
            seen += [_spec(out), float(out)]
            with pytest.raises(ValueError, match="replicated across mesh axis 'x'"):
                lib.jit(lib.shard_map(lambda x: x.sum(), out_specs=P()))(arr)
        return seen

    _same(run("jax"), run("ftrans"))


@pytest.mark.parametrize("check_vma", [True, False])
def test_reduced_argument_cotangent_is_unreduced_partial_sums(check_vma):
    """A reduced argument meeting a varying one (the implicit cast is JAX's ``reduced_vary_cast``): its
    gradient is unreduced, each device holding its own partial sum (no sum in the body), as JAX's; the
    blocks, the types and the summed values are JAX's."""

    def run(name):
        lib, jnp = LIBS[name]
        P = lib.sharding.PartitionSpec
        with lib.set_mesh(_mesh(lib, (2, 2), ("x", "y"))):
            a = lib.device_put(np.arange(8.0).reshape(4, 2), P("x", "y"))
            b = lib.device_put(np.arange(12.0).reshape(2, 6), P("y", None, reduced={"x"}))
            f = lib.shard_map(lambda x, y: lib.lax.psum(jnp.dot(x, y), "y"),
                              in_specs=(P("x", "y"), P("y", None, reduced={"x"})), out_specs=P("x", None),
                              check_vma=check_vma)
            out = lib.jit(f)(a, b)
            g1, g2 = lib.jit(lib.grad(lambda x, y: f(x, y).sum(), argnums=(0, 1)))(a, b)
            return (np.asarray(out), _spec(g1), np.asarray(g1), _spec(g2), _shards(g2),
                    np.asarray(lib.sharding.reshard(g2, P("y", None))))

    _same(run("jax"), run("ftrans"))
