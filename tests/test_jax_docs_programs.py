"""Programs from JAX's documentation (its tutorials and notebooks) that once behaved differently under ftrans,
each run under both libraries and compared: sharded eager broadcasting, the printed types of sharded and
varying values, ..."""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import numpy as np
import pytest

import ftrans
from tests.backend_util import assert_same_samples

needs8 = pytest.mark.skipif(jax.local_device_count() < 8, reason="needs 8 host devices (tests/conftest.py)")


def _both(program):
    return program(ftrans), program(jax)


@needs8
@pytest.mark.parametrize("axis_type", ["Explicit", "Auto"])
def test_eager_broadcasting_of_sharded_arrays(axis_type):
    # docs/sharded-computation: ``arg0 + arg1`` with (4@X, 1) and (1, 8@Y) broadcasts to (4@X, 8@Y)
    def program(m):
        kind = getattr(m.sharding.AxisType, axis_type)
        mesh = m.make_mesh((4, 2), ("X", "Y"), axis_types=(kind, kind))
        a = m.device_put(np.arange(4).reshape(4, 1), m.sharding.NamedSharding(mesh, m.P("X", None)))
        b = m.device_put(np.arange(8).reshape(1, 8), m.sharding.NamedSharding(mesh, m.P(None, "Y")))
        c = m.device_put(np.arange(4.0), m.sharding.NamedSharding(mesh, m.P("X")))
        d = m.device_put(np.arange(4.0), m.sharding.NamedSharding(mesh, m.P("Y")))
        r = a + b
        s = m.numpy.maximum(c[:, None], 2.0 * d)  # rank-1 and rank-2, a weak scalar
        return (np.asarray(r), str(m.typeof(r)) if axis_type == "Explicit" else None,
                np.asarray(s), r.sharding.spec == m.P("X", "Y") if axis_type == "Explicit" else None)

    f, j = _both(program)
    np.testing.assert_array_equal(f[0], j[0])
    np.testing.assert_array_equal(f[2], j[2])
    assert f[1] == j[1] and f[3] == j[3]


@needs8
def test_str_and_repr_of_sharded_and_varying_types():
    def program(m):
        mesh = m.make_mesh((4, 2), ("X", "Y"), axis_types=(m.sharding.AxisType.Explicit,) * 2)
        out = []
        with m.set_mesh(mesh):
            x = m.device_put(np.arange(32.0).reshape(8, 4), m.P("X", "Y"))
            out += [str(m.typeof(x)), repr(m.typeof(x)), str(m.typeof(x.sum(0)))]

            @m.shard_map(in_specs=m.P("X", "Y"), out_specs=m.P("X"))
            def f(b):
                y = m.lax.psum(b, "Y")
                out.extend([str(m.typeof(b)), repr(m.typeof(b)), str(m.typeof(y)),
                            set(m.typeof(y).manual_axis_type.varying)])
                return y

            f(x)
        return out

    f, j = _both(program)
    assert f == j


@needs8
def test_auto_axes_called_outside_jit_drops_the_types_of_its_arguments():
    # docs/sharded-computation: x (4@X, 4) + y (4, 4@X) is illegal in Explicit mode but fine under auto_axes
    def program(m):
        m.set_mesh(m.make_mesh((4, 2), ("X", "Y"), axis_types=(m.sharding.AxisType.Explicit,) * 2))
        try:
            x = m.device_put(np.arange(16).reshape(4, 4), m.P("X", None))
            y = m.device_put(np.arange(16).reshape(4, 4), m.P(None, "X"))
            seen = []

            @m.sharding.auto_axes
            def add2(x, y):
                seen.append((str(m.typeof(x)), str(m.typeof(y))))
                return x + y

            r = add2(x, y, out_sharding=m.P("X", None))
            return np.asarray(r), str(m.typeof(r)), seen
        finally:
            m.set_mesh(None)

    f, j = _both(program)
    np.testing.assert_array_equal(f[0], j[0])
    assert f[1:] == j[1:]


def test_array_and_asarray_of_a_range():
    # jnp.array / jnp.asarray docstrings: jnp.array(range(5))
    import jax.numpy as jjnp

    import ftrans.numpy as fjnp

    for make in [lambda m: m.array(range(5)), lambda m: m.asarray(range(2, 9, 3), dtype="float32"),
                 lambda m: m.array(range(0)), lambda m: m.array(range(3), ndmin=2), lambda m: m.array(range(4, 0, -1))]:
        f, j = make(fjnp), make(jjnp)
        assert f.dtype == j.dtype and f.shape == j.shape and f.weak_type == j.weak_type
        np.testing.assert_array_equal(np.asarray(f), np.asarray(j))


def test_linspace_from_zero_and_histogram_edges_are_jaxs_to_the_bit():
    # jnp.histogram docstring: the edges of range=(0, 25), bins=5 include 15.0 exactly, so 15 falls in [15, 20)
    import jax.numpy as jjnp

    import ftrans.numpy as fjnp

    a = [1, 2, 3, 10, 11, 15, 19, 25]
    for kw in [dict(range=(0, 25), bins=5), dict(bins=8), dict(range=(0, 30), bins=6)]:
        fc, fe = fjnp.histogram(fjnp.array(a), **kw)
        jc, je = jjnp.histogram(jjnp.array(a), **kw)
        np.testing.assert_array_equal(np.asarray(fc), np.asarray(jc))
        np.testing.assert_array_equal(np.asarray(fe), np.asarray(je))
    rng = np.random.RandomState(0)
    for _ in range(40):
        stop = np.float32(rng.randint(-50, 50) * rng.choice([1, 0.1, 0.37, 7.3]))
        n, endpoint = int(rng.randint(2, 40)), bool(rng.randint(2))
        np.testing.assert_array_equal(np.asarray(fjnp.linspace(0.0, stop, n, endpoint=endpoint)),
                                      np.asarray(jjnp.linspace(0.0, stop, n, endpoint=endpoint)))


def test_fromfunction_maps_the_function_over_scalar_indices():
    # jnp.fromfunction docstring: the function is vmapped (it sees scalars and may return a pytree)
    import jax.numpy as jjnp

    import ftrans.numpy as fjnp

    def run(m):
        seen = []

        def shapes(x, y):
            seen.append((x.shape, y.shape))
            return x + y

        return (m.fromfunction(m.multiply, shape=(3, 6), dtype=int),
                m.fromfunction(lambda x: (x + 1) * m.arange(3), shape=(2,)),
                m.fromfunction(lambda x, y: (x + y, x * y), shape=(3, 5)),
                m.fromfunction(shapes, (2, 3)), seen)

    f, j = run(fjnp), run(jjnp)
    for a, b in zip(jax.tree.leaves(f[:4]), jax.tree.leaves(j[:4])):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert f[4] == j[4] == [((), ())]


def test_multi_dot_contracts_in_the_cheapest_order():
    # jnp.linalg.multi_dot docstring: cost_analysis of the jitted chain is x @ (y @ z)'s 30000 flops
    import jax.numpy as jjnp

    import ftrans.numpy as fjnp

    rng = np.random.RandomState(0)
    x, y, z = (rng.randn(*s).astype(np.float32) for s in [(200, 5), (5, 100), (100, 10)])
    fl, jl = ftrans.jit(fjnp.linalg.multi_dot).lower([x, y, z]), jax.jit(jjnp.linalg.multi_dot).lower([x, y, z])
    fcost, jcost = fl.cost_analysis(), jl.cost_analysis()
    if jcost is not None:
        assert fcost["flops"] == jcost["flops"] == 30000.0
    else:  # a PJRT C API plugin (the GPU's) estimates only compiled programs: both say None, as JAX
        assert fcost is None
        fcost, jcost = fl.compile().cost_analysis(), jl.compile().cost_analysis()
        assert (fcost is None) == (jcost is None)
        if jcost is not None:
            assert fcost.get("flops") == jcost.get("flops")
    for arrs in ([x, y, z], [x[0], y, z], [x, y, z[:, 0]], [x[0], y, z[:, 0]], [x[0], y[:, 0]]):
        f, j = fjnp.linalg.multi_dot(arrs), jjnp.linalg.multi_dot(arrs)
        assert f.shape == j.shape
        np.testing.assert_allclose(np.asarray(f), np.asarray(j), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("dtype", ["float8_e4m3fn", "float8_e5m2"])
def test_random_samplers_in_8_bit_floats(dtype):
    # jax.nn.scaled_matmul docstring: jax.random.normal(key, shape, dtype=jnp.float8_e4m3fn)
    import jax.numpy as jjnp

    d = getattr(jjnp, dtype)
    for name in ["normal", "uniform", "exponential", "gumbel", "laplace"]:
        f = getattr(ftrans.random, name)(ftrans.random.PRNGKey(1), (3, 128, 8), dtype=d)
        j = getattr(jax.random, name)(jax.random.PRNGKey(1), (3, 128, 8), dtype=d)
        assert f.dtype == j.dtype
        assert_same_samples(f, j, ulps=2)  # bit for bit on the CPU (tests/backend_util.py)


def test_fori_loop_with_a_traced_bound_stages_no_conversion():
    # "Understanding jaxprs" (func10): fori_loop(0, n, ...) with a traced Python-int n converts nothing
    import jax.numpy as jjnp

    import ftrans.numpy as fjnp

    def prims(m, np_mod):
        def func10(arg, n):
            ones = np_mod.ones(arg.shape)
            return m.lax.fori_loop(0, n, lambda i, carry: carry + ones * 3. + arg, arg + ones)

        return [e.primitive.name for e in m.make_jaxpr(func10)(np.ones(16), 5).jaxpr.eqns]

    f, j = prims(ftrans, fjnp), prims(jax, jjnp)
    assert f == j == ["broadcast_in_dim", "add", "while"]


@pytest.mark.parametrize("shape,dtype", [((4, 3), "float32"), ((3, 5), "float32"), ((2, 4, 4), "float32"),
                                         ((5, 3), "complex64"), ((3, 3), "float32")])
def test_qr_raw_mode_and_ormqr(shape, dtype):
    # jax.lax.linalg.ormqr docstring: h, taus = jnp.linalg.qr(a, mode="raw"); ormqr(h.mT, taus, c) == Q c
    import jax.numpy as jjnp

    import ftrans.numpy as fjnp

    rng = np.random.RandomState(0)
    a = rng.randn(*shape).astype(dtype)
    if dtype.startswith("complex"):
        a = a + 1j * rng.randn(*shape).astype(dtype)
    if shape == (3, 3):
        a[1:, 0], a[0, 0] = 0, -2  # a column that needs no reflection (tau 0)
    (fh, ft), (jh, jt) = fjnp.linalg.qr(a, mode="raw"), jjnp.linalg.qr(a, mode="raw")
    assert (fh.shape, ft.shape, fh.dtype, ft.dtype) == (jh.shape, jt.shape, jh.dtype, jt.dtype)
    np.testing.assert_allclose(np.asarray(fh), np.asarray(jh), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(ft), np.asarray(jt), rtol=1e-5, atol=1e-5)
    if len(shape) == 2:
        c = np.eye(shape[0], dtype=dtype)
        q, _ = fjnp.linalg.qr(a, mode="complete")
        np.testing.assert_allclose(np.asarray(ftrans.lax.linalg.ormqr(fh.mT, ft, c)), np.asarray(q), atol=1e-5)
    jitted = ftrans.jit(lambda x: fjnp.linalg.qr(x, mode="raw"))(a)
    np.testing.assert_allclose(np.asarray(jitted[1]), np.asarray(jt), rtol=1e-5, atol=1e-5)
