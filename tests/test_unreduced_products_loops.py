"""Unreduced/reduced mesh axes through products, loops, shard_map bodies and export, against jax on 8 CPU
devices: ``jnp.matmul``'s sharded size-1 batch axes, the cotangent of a weight reduced over an axis (a
product typed unreduced, no all-reduce), bfloat16 products left unreduced, scans accumulating them
(minibatch gradient accumulation), the reduced-vs-replicated check inside a ``shard_map`` body, and an
exported function whose result is unreduced.  Each check runs one program under both libraries."""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import ftrans
import ftrans.numpy as fjnp

pytestmark = [
    pytest.mark.skipif(jax.local_device_count() < 8, reason="needs 8 host devices (tests/conftest.py)"),
    # jax 0.11 reworked unreduced axes; ftrans keeps jax 0.10's semantics (docs/differences.md)
    pytest.mark.skipif(jax.__version_info__ >= (0, 11), reason="jax 0.11 changed unreduced axes; ftrans has 0.10's"),
]

LIBS = {"jax": (jax, jjnp), "ftrans": (ftrans, fjnp)}


def _mesh(lib, shape, names):
    return lib.make_mesh(shape, names, axis_types=(lib.sharding.AxisType.Explicit,) * len(names))


def _spec(arr) -> tuple:
    s = arr.sharding.spec
    parts = list(s.partitions)
    while parts and parts[-1] is None:
        parts.pop()
    return tuple(parts), frozenset(s.unreduced), frozenset(s.reduced)


def _both(fn) -> tuple:
    return fn("jax"), fn("ftrans")


def test_matmul_keeps_sharded_unit_batch_axis():
    """A size-1 batch axis typed over a mesh axis stays a batch axis of the product, so the contraction can
    be left unreduced (JAX squeezes only unsharded ones)."""
    def run(name):
        lib, jnp = LIBS[name]
        with lib.set_mesh(_mesh(lib, (1, 2), ("x", "y"))):
            a, b = np.ones((1, 1, 4)), np.arange(8.).reshape(1, 4, 2)
            x = lib.reshard(a, lib.P("x", None, "y"))
            y = lib.reshard(b, lib.P("x", "y", None))
            f = lib.jit(lambda u, v: jnp.matmul(u, v, out_sharding=lib.P("x", unreduced={"y"})))
            z = f(x, y)
            text = f.lower(x, y).compile().as_text()
            return _spec(z), np.asarray(lib.reshard(z, lib.P("x"))), "all-reduce(" in text
    j, f = _both(run)
    assert f[0] == j[0] == (("x",), frozenset({"y"}), frozenset())
    np.testing.assert_allclose(f[1], j[1])
    assert f[2] == j[2] is False


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_unreduced_product_values(dtype):
    """A product left unreduced holds each device's partial sums (bfloat16 too, whose product XLA computes
    wider and converts): summed once by the reshard."""
    def run(name):
        lib, jnp = LIBS[name]
        with lib.set_mesh(_mesh(lib, (2,), ("x",))):
            x = lib.device_put(np.arange(16., dtype=np.float32).reshape(4, 4), lib.P("x", None))

            @lib.jit
            def f(x):
                y = jnp.dot(x.T.astype(dtype), x.astype(dtype), out_sharding=lib.P(unreduced={"x"}))
                return lib.reshard(y, lib.P()).astype(np.float32)
            return np.asarray(f(x))
    j, f = _both(run)
    np.testing.assert_allclose(f, j, rtol=1e-2)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_scan_of_unreduced_products(dtype):
    """A scan whose outputs are unreduced products: its buffer of outputs is unreduced from the start."""
    def run(name):
        lib, jnp = LIBS[name]
        with lib.set_mesh(_mesh(lib, (2,), ("x",))):
            x = lib.device_put(np.ones((4, 4), np.float32), lib.P("x", None))
            s = lib.device_put(np.arange(3., dtype=np.float32), lib.P())

            @lib.jit
            def g(x, s):
                def body(c, si):
                    y = jnp.dot((x * si).T.astype(dtype), x.astype(dtype), out_sharding=lib.P(unreduced={"x"}))
                    return c, y.astype(np.float32)
                _, ys = lib.lax.scan(body, 0., s)
                return lib.reshard(ys, lib.P())
            return np.asarray(g(x, s))
    j, f = _both(run)
    np.testing.assert_allclose(f, j)


@pytest.mark.parametrize("custom_vjp", [False, True])
@pytest.mark.parametrize("layers_in_scan", [False, True])
def test_minibatch_gradient_accumulation(custom_vjp, layers_in_scan):
    """JAX's minibatch pattern: weights reduced over the data axis, their gradients unreduced (no all-reduce
    per step), accumulated over a scan of microbatches and all-reduced once."""
    def run(name):
        lib, jnp = LIBS[name]
        dt = jnp.bfloat16 if layers_in_scan else jnp.float32
        with lib.set_mesh(_mesh(lib, (2,), ("x",))):
            if custom_vjp:
                @lib.custom_vjp
                def f(xs, w):
                    return jnp.dot(xs.astype(dt), w.astype(dt))

                def f_fwd(xs, w):
                    return f(xs, w), (xs, w)

                def f_bwd(res, g):
                    xs, w = res
                    return (jnp.dot(g.astype(dt), w.T.astype(dt)),
                            jnp.dot(xs.T.astype(dt), g.astype(dt), out_sharding=lib.P(unreduced={"x"})))
                f.defvjp(f_fwd, f_bwd)
            else:
                def f(xs, w):
                    return jnp.dot(xs.astype(dt), w.astype(dt))

            if layers_in_scan:
                def model(ws, xs):
                    out, _ = lib.lax.scan(lambda c, w: (f(c, w), None), xs, ws)
                    return jnp.sum(out)
            else:
                def model(ws, xs):
                    for w in ws:
                        xs = f(xs, w)
                    return jnp.sum(xs)

            @lib.jit
            def step(ws, xs):
                def body(acc, xb):
                    grad = lib.grad(model)(ws, xb)
                    return lib.tree.map(jnp.add, acc, grad), None
                acc = lib.reshard(lib.tree.map(jnp.zeros_like, ws), lib.P(unreduced={"x"}))
                acc, _ = lib.lax.scan(body, acc, xs)
                return lib.tree.map(lambda w, g: lib.reshard(w, lib.P()) - lib.reshard(g, lib.P()) * 0.01, ws, acc)

            w0 = np.arange(16., dtype=np.float32).reshape(4, 4) / 16
            ws = tuple(lib.device_put(w0 + i, lib.P(reduced={"x"})) for i in range(3))
            if layers_in_scan:
                ws = jnp.stack(ws)
            xs = lib.device_put(np.ones((2, 4, 4), np.float32).astype(dt), lib.P(None, "x", None))
            out = step(ws, xs)
            n = step.lower(ws, xs).compile().as_text().count("all-reduce(")
            return [np.asarray(o, np.float32) for o in lib.tree.leaves(out)], n
    j, f = _both(run)
    assert f[1] == j[1] == 1
    for a, b in zip(f[0], j[0]):
        np.testing.assert_allclose(a, b, rtol=2e-2)


@pytest.mark.parametrize("case", ["reduced+replicated", "reduced*scalar", "reduced+reduced", "reduced+sharded"])
def test_shard_map_body_reduced_meets_replicated(case):
    """Inside a shard_map body, an operand replicated (invariant) over an axis another operand is reduced over
    is JAX's ShardingTypeError; a reduced value with itself, or with one varying over the axis, is not."""
    def run(name):
        lib, jnp = LIBS[name]
        fns = {"reduced+replicated": lambda x, y: (x + y).sum(), "reduced*scalar": lambda x, y: (x * 2.).sum(),
               "reduced+reduced": lambda x, y: (x + x).sum(), "reduced+sharded": lambda x, y: (x + y).sum()}
        with lib.set_mesh(_mesh(lib, (2, 2), ("x", "y"))):
            a = lib.device_put(np.arange(8.).reshape(4, 2), lib.P("x", reduced={"y"}))
            other = lib.P("x", "y") if case == "reduced+sharded" else lib.P("x", None)
            b = lib.device_put(np.arange(8.).reshape(4, 2), other)
            try:
                lib.jit(lib.shard_map(fns[case], out_specs=lib.P()))(a, b)
            except Exception as e:  # noqa: BLE001 - the comparison is of the error's type and words
                return type(e).__mro__, str(e).splitlines()[0]
            return None
    j, f = _both(run)
    if "replicated" in case or "scalar" in case:
        assert j is not None and f is not None
        assert "Inputs cannot be replicated on the same axes that another input is reduced on" in j[1]
        assert "Inputs cannot be replicated on the same axes that another input is reduced on" in f[1]
        assert issubclass(f[0][0], TypeError)
    else:  # both raise the out_specs replication error (the result varies), not the reduced check
        assert j is not None and f is not None
        assert "Inputs cannot" not in j[1] and "Inputs cannot" not in f[1]
        assert issubclass(f[0][0], ValueError) and issubclass(j[0][0], ValueError)


def test_exported_unreduced_result():
    """An exported function whose result is unreduced: the serialized export keeps the type, and calling it
    gives each device's partial sums, typed unreduced (JAX's export_test.test_unreduced_einsum_basic)."""
    def run(name):
        lib, jnp = LIBS[name]
        with lib.set_mesh(_mesh(lib, (2,), ("x",))):
            a = np.arange(4).reshape(2, 2)
            x = lib.device_put(a, lib.P(None, "x"))
            y = lib.device_put(a, lib.P("x", None))
            f = lib.jit(lambda x, y: jnp.einsum("ab,bc->ac", x, y, out_sharding=lib.P(None, None, unreduced={"x"})))
            exp = lib.export.export(f)(x, y)
            if name == "ftrans":  # (jax's serialization needs the flatbuffers package)
                exp = lib.export.deserialize(exp.serialize())
            out = exp.call(x, y)
            return (_spec(out), [np.asarray(s.data) for s in out.addressable_shards],
                    np.asarray(lib.reshard(out, lib.P(None, None))))
    j, f = _both(run)
    assert f[0] == j[0] == ((), frozenset({"x"}), frozenset())
    for a, b in zip(f[1], j[1]):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(f[2], j[2])


def test_grad_of_two_unreduced_einsums_sharing_an_operand_compiles():
    """jit(grad) of two products typed unreduced (JAX's test_unreduced_einsum_add_basic): the merge-dots pass
    leaves typed products alone (it used to build an untyped aval for a typed one and crash)."""
    def run(name):
        lib, jnp = LIBS[name]
        np_inp = np.arange(16.).reshape(8, 2)
        with lib.set_mesh(_mesh(lib, (2, 2), ("x", "y"))):
            x = lib.device_put(np_inp, lib.P("x", "y"))
            y = lib.device_put(np_inp.T, lib.P("y", None))
            a = lib.device_put(np_inp, lib.P("x", "y"))
            b = lib.device_put(np_inp.T, lib.P("y", None))

            @lib.jit
            def f(x, y, a, b):
                m1 = jnp.einsum("xy,yz->xz", x, y, out_sharding=lib.P("x", unreduced={"y"}))
                m2 = jnp.einsum("xy,yz->xz", a, b, out_sharding=lib.P("x", unreduced={"y"}))
                return lib.reshard(m1 + m2, lib.P("x"))

            out = np.asarray(f(x, y, a, b))
            assert f.trace(x, y, a, b).lower().as_text().count('unreduced={"y"}') == 3
            f_bar = lib.jit(lib.grad(lambda *a: f(*a).sum(), argnums=(0, 1, 2, 3)))
            g = f_bar(x, y, a, b)
            f_bar.trace(x, y, a, b)
            return [out] + [np.asarray(v) for v in g]
    j, f = _both(run)
    for a, b in zip(f, j):
        np.testing.assert_allclose(a, b)
