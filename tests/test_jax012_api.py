"""jax 0.11/0.12's public names that ftrans lacked, checked against the installed jax where it has them
(jax 0.10 and 0.11 lack some: then against NumPy, finite differences or the values jax 0.12 gives).

``lax.polynomial`` (jax 0.12's ``polynomial_p`` with every rule), ``jax.get_mesh``/``get_abstract_mesh``/
``use_abstract_mesh`` at the top level, ``jax.Inline`` and ``jax.CompilerEffortLevel`` (what ``jit`` takes),
``sharding.no_collectives``, jax 0.12's deprecation of ``lax.psend``/``lax.precv``, ``lax.psum_scatter_start``,
``export.symbolic_dim_bounds``, ``ffi.abstract_token``, ``debug.DebugEffect``/``OrderedDebugEffect``,
``extend.core.primal_dtype_to_tangent_dtype`` and friends.
"""

from __future__ import annotations

import doctest
import importlib
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ftrans
import ftrans.numpy as fnp
from ftrans import lax as flax

JAX_POLY = hasattr(jax.lax, "polynomial")  # jax 0.12
JAX_011 = hasattr(jax, "Inline")  # jax 0.11 and later


def _same(got, want, rtol=0.0, atol=0.0):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, got.dtype, want.shape, want.dtype)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


def _weak(x) -> bool:
    return bool(getattr(x, "weak_type", False))


def _horner(x, coeffs):
    """NumPy's oracle, in float64 (float32 results compared with a tolerance)."""
    wide = np.complex128 if any(np.iscomplexobj(v) for v in [x, *coeffs]) else np.float64
    y = np.asarray(coeffs[-1], wide)
    for c in reversed(coeffs[:-1]):
        y = y * np.asarray(x, wide) + np.asarray(c, wide)
    return y


# ------------------------------------------------- lax.polynomial and polynomial_p
POLY_CASES = [
    ("python scalars", lambda: (3.0, [1.0, 5.0, 2.0])),
    ("broadcast coefficients", lambda: (np.arange(6, dtype=np.float32).reshape(2, 3),
                                        [np.ones((1, 3), np.float32), 2.0, np.ones((2, 1), np.float32)])),
    ("int x", lambda: (2, [1, 2, 3])),
    ("int8 x", lambda: (np.int8(2), [1, 2, 3])),
    ("no coefficients", lambda: (np.float32(2), [])),
    ("one array coefficient", lambda: (2.0, [np.ones(3, np.float32)])),
    ("float64 coefficients", lambda: (np.ones(3, np.float32), [np.full(3, 0.5), 1.0])),
    ("int32 coefficients", lambda: (np.ones(3, np.float32), [np.arange(3, dtype=np.int32), 1])),
    ("weak x, NumPy scalar coefficient", lambda: (3.0, [np.float32(1), 2.0])),
    ("strong x", lambda: (np.float32(3.0), [1.0, 2.0])),
    ("complex", lambda: (np.complex64(1 + 1j), [1.0, 2j, 3.0])),
    ("infinite x", lambda: (np.float32(np.inf), [1.0, -2.0, 3.0])),
    ("degree 12", lambda: (np.linspace(-1, 1, 7, dtype=np.float32), [1.0 / (k + 1) for k in range(13)])),
]


@pytest.mark.parametrize("name, make", POLY_CASES, ids=[c[0] for c in POLY_CASES])
@pytest.mark.parametrize("jit", [False, True])
def test_polynomial_values_dtypes_and_weak_types(name, make, jit):
    x, coeffs = make()
    f = (lambda v: flax.polynomial(v, coeffs)) if not jit else ftrans.jit(lambda v: flax.polynomial(v, coeffs))
    got = f(x)
    if JAX_POLY:
        g = (lambda v: jax.lax.polynomial(v, coeffs)) if not jit else jax.jit(lambda v: jax.lax.polynomial(v, coeffs))
        want = g(x)
        assert _weak(got) == _weak(want)
        _same(got, np.asarray(want), rtol=2e-6, atol=1e-6)
    if not coeffs:
        want = np.zeros(np.shape(x), got.dtype)
    else:
        want = _horner(x, [np.asarray(c) for c in coeffs]).astype(got.dtype)
        want = np.broadcast_to(want, got.shape)
    np.testing.assert_allclose(np.asarray(got), want, rtol=2e-6, atol=1e-6)


def test_polynomial_weak_types_follow_jax_012():
    """jax 0.12's rule: scalar coefficients take a weakly typed rank-0 ``x``'s weak type; arrays are strong."""
    assert _weak(flax.polynomial(3.0, [1.0, 2.0]))
    assert _weak(flax.polynomial(2, [1, 2]))
    assert not _weak(flax.polynomial(np.float32(3), [1.0, 2.0]))
    assert not _weak(flax.polynomial(3.0, [np.ones(2, np.float32), 2.0]))
    assert _weak(ftrans.grad(lambda x: flax.polynomial(x, [1.0, 2.0, 3.0]))(0.5))
    assert flax.polynomial(2, [1.5, 2]).dtype == np.int32  # coefficients take x's dtype (1.5 -> 1)
    assert int(flax.polynomial(2, [1.5, 2])) == 5


def test_polynomial_infinity_starts_from_the_leading_coefficient():
    """Horner's rule from the leading coefficient: +-inf at an infinite ``x`` (jax 0.12 unrolled lowering's
    answer; its scan, past ``unroll`` terms, starts from zero and gives NaN: ftrans unrolls every term)."""
    for coeffs in ([1.0, -2.0, 3.0], [1.0] * 10):
        for f in (flax.polynomial, lambda x, c: ftrans.jit(flax.polynomial, static_argnums=1)(x, tuple(c))):
            assert float(f(np.float32(np.inf), coeffs)) == np.inf
            assert float(f(np.float32(-np.inf), coeffs)) == (np.inf if len(coeffs) % 2 else -np.inf)


@pytest.mark.parametrize("mode", ["eager", "jit"])
def test_polynomial_errors_like_jax(mode):
    def call(lx, x, c):
        return lx.polynomial(x, c) if mode == "eager" else (jax if lx is jax.lax else ftrans).jit(
            lambda v: lx.polynomial(v, c))(x)

    cases = [(np.ones(3, np.float32), [np.ones(2, np.float32), 1.0], "incompatible shapes for broadcasting"),
             (np.ones(3, np.float32), [np.ones((1, 3), np.float32), 1.0], "same number of dimensions"),
             (np.array([True, False]), [True, False], "does not accept dtype bool")]
    for x, c, msg in cases:
        with pytest.raises(TypeError, match=msg):
            call(flax, x, c)
        if JAX_POLY:
            with pytest.raises(TypeError, match=msg):
                call(jax.lax, x, c)
    with pytest.raises(ValueError, match="unroll"):
        flax.polynomial(1.0, [1.0, 2.0], unroll=0)


def test_polynomial_binds_the_primitive_as_jax_012():
    x = np.float32(1.0)
    got = ftrans.make_jaxpr(lambda v: flax.polynomial(v, [1.0, 2.0]))(x)
    got_u = ftrans.make_jaxpr(lambda v: flax.polynomial(v, [1.0, 2.0], unroll=3))(x)
    assert [e.primitive for e in got.jaxpr.eqns] == [flax.polynomial_p]
    assert [e.params for e in got_u.jaxpr.eqns] == [{"unroll": 3}]
    if JAX_POLY:
        assert str(got) == str(jax.make_jaxpr(lambda v: jax.lax.polynomial(v, [1.0, 2.0]))(x))
        assert str(got_u) == str(jax.make_jaxpr(lambda v: jax.lax.polynomial(v, [1.0, 2.0], unroll=3))(x))
    # one coefficient binds no primitive (a_0 broadcast), as in JAX
    one = ftrans.make_jaxpr(lambda v: flax.polynomial(v, [3.0]))(np.ones(3, np.float32))
    assert flax.polynomial_p not in [e.primitive for e in one.jaxpr.eqns]


X = np.linspace(-1.5, 1.5, 7).astype(np.float32)
C = [np.float32(v) for v in (0.5, -1.0, 2.0, 0.25)]


def _deriv(coeffs, x, order):
    """The ``order``-th derivative of the polynomial at ``x`` in float64 (NumPy's polyder)."""
    p = np.polynomial.Polynomial(np.asarray(coeffs, np.float64))
    return p.deriv(order)(np.asarray(x, np.float64))


@pytest.mark.parametrize("order", [1, 2, 3, 4])
def test_polynomial_derivatives_in_x(order):
    g = lambda x: flax.polynomial(x, C)  # noqa: E731
    for _ in range(order):
        g = ftrans.grad(g)
    got = ftrans.vmap(g)(X)
    _same(got, _deriv(C, X, order).astype(np.float32), rtol=1e-5, atol=1e-5)
    if JAX_POLY:
        h = lambda x: jax.lax.polynomial(x, C)  # noqa: E731
        for _ in range(order):
            h = jax.grad(h)
        _same(got, jax.vmap(h)(X), rtol=1e-6, atol=1e-6)


def test_polynomial_derivative_is_a_polynomial_not_a_differentiated_recurrence():
    jaxpr = ftrans.make_jaxpr(ftrans.grad(lambda x: flax.polynomial(x, C)))(np.float32(0.5))
    names = [e.primitive.name for e in jaxpr.jaxpr.eqns]
    assert names.count("polynomial") == 2 and "add" not in names, names


def test_polynomial_gradients_in_coefficients_and_transpose():
    x = np.arange(6, dtype=np.float32).reshape(2, 3) / 4
    a0 = np.float32(0.5)
    a1 = np.ones(3, np.float32)

    def f(mod, lax):
        def fn(a0, a1):
            return lax.polynomial(x, [a0, a1[None, :] * np.ones((2, 1), np.float32), 2.0]).sum()
        return mod.grad(fn, argnums=(0, 1))(a0, a1)

    g0, g1 = f(ftrans, flax)
    _same(g0, np.float32(x.size))
    _same(g1, x.sum(0), rtol=1e-6)
    if JAX_POLY:
        j0, j1 = f(jax, jax.lax)
        _same(g0, j0)
        _same(g1, j1, rtol=1e-6)
    # linear_transpose in the coefficients (x known)
    t = ftrans.linear_transpose(lambda c: flax.polynomial(x, list(c)), [np.float32(0)] * 3)
    (ct,) = t(np.ones_like(x))
    _same(np.stack(ct), np.stack([np.float32(x.size), x.sum(), (x * x).sum()]), rtol=1e-6)
    with pytest.raises(NotImplementedError, match="linear only in its coefficients"):
        ftrans.linear_transpose(lambda v: flax.polynomial(v, [1.0, 2.0]), np.float32(0))(np.float32(1))


def test_polynomial_jvp_and_check_grads():
    from ftrans.test_util import check_grads

    with ftrans.enable_x64(True):
        x = np.linspace(-1, 1, 5)
        c = [0.3, -1.2, 0.7, 2.0]
        check_grads(lambda x, a, b: flax.polynomial(x, [a, 1.0, b, c[3]]), (x, 0.3, 0.7), order=2,
                    modes=["fwd", "rev"])
    p, t = ftrans.jvp(lambda x, a: flax.polynomial(x, [a, 2.0, a]), (X, np.float32(1)), (X, np.float32(2)))
    _same(p, (1 + 2 * X + X * X).astype(np.float32), rtol=1e-6, atol=1e-6)
    _same(t, (X * (2 + 2 * X) + 2 * (1 + X * X)).astype(np.float32), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("in_axes", [(0, 0), (1, 1), (None, 0), (0, None)])
def test_polynomial_under_vmap(in_axes):
    x = np.arange(12, dtype=np.float32).reshape(3, 4) / 7
    c = np.linspace(0, 1, 12).astype(np.float32).reshape(3, 4)
    if in_axes[0] is None:
        x = x[0]
    if in_axes[1] is None:
        c = c[0]

    def fn(lax):
        return lambda x, c: lax.polynomial(x, [c, 2.0, c, -1.0])

    got = ftrans.vmap(fn(flax), in_axes=in_axes)(x, c)
    got_jit = ftrans.jit(ftrans.vmap(fn(flax), in_axes=in_axes))(x, c)
    xs = [np.take(x, i, in_axes[0]) if in_axes[0] is not None else x for i in range(got.shape[0])]
    cs = [np.take(c, i, in_axes[1]) if in_axes[1] is not None else c for i in range(got.shape[0])]
    want = np.stack([_horner(a, [b, 2.0, b, -1.0]) for a, b in zip(xs, cs)]).astype(np.float32)
    _same(got, want, rtol=1e-6, atol=1e-6)
    _same(got_jit, want, rtol=1e-6, atol=1e-6)
    if JAX_POLY:
        _same(got, jax.vmap(fn(jax.lax), in_axes=in_axes)(x, c), rtol=1e-6, atol=1e-6)


def test_polynomial_p_bound_directly():
    x = np.linspace(0, 1, 4).astype(np.float32)
    ops = (x, np.float32(1), np.float32(2), np.float32(3))
    want = _horner(x, [1, 2, 3]).astype(np.float32)
    _same(flax.polynomial_p.bind(*ops), want, rtol=1e-6)
    _same(ftrans.jit(lambda *o: flax.polynomial_p.bind(*o))(*ops), want, rtol=1e-6)
    if JAX_POLY:
        _same(flax.polynomial_p.bind(*ops), jax.lax.polynomial_p.bind(*ops), rtol=1e-6)


# ------------------------------------------------- top-level names, Inline, CompilerEffortLevel
def test_mesh_functions_at_the_top_level():
    assert ftrans.get_mesh is ftrans.sharding.get_mesh
    assert ftrans.get_abstract_mesh is ftrans.sharding.get_abstract_mesh
    assert ftrans.use_abstract_mesh is ftrans.sharding.use_abstract_mesh
    assert ftrans.get_mesh().empty and jax.sharding.get_mesh().empty
    assert ftrans.get_abstract_mesh().empty
    mesh = ftrans.make_mesh((1,), ("x",))
    with ftrans.sharding.use_mesh(mesh):
        assert ftrans.get_mesh().axis_names == ("x",)
        assert ftrans.get_abstract_mesh().axis_names == ("x",)
    with ftrans.use_abstract_mesh(ftrans.sharding.AbstractMesh((2,), ("y",))):
        assert ftrans.get_abstract_mesh().axis_sizes == (2,)
    if JAX_011:
        assert jax.get_mesh is jax.sharding.get_mesh


def test_version_module():
    assert ftrans.version.__version__ == ftrans.__version__
    assert ftrans.__version_info__ == ftrans.version.__version_info__
    assert ftrans.__version_info__ == tuple(int(p) for p in ftrans.__version__.split("."))
    if hasattr(jax, "version"):
        assert {"__version__", "__version_info__"} <= set(dir(jax.version))


def test_inline_enum_like_jax():
    names = [m.name for m in ftrans.Inline]
    assert names == ["JAX_EARLY", "JAX_LATE", "XLA_EARLY", "XLA_LATE", "AUTO"]
    if JAX_011:
        assert [(m.name, m.value) for m in ftrans.Inline] == [(m.name, m.value) for m in jax.Inline]
    x = np.ones(3, np.float32)
    for member in ftrans.Inline:
        f = ftrans.jit(lambda v: fnp.sin(v) * 2, inline=member)
        names = [e.primitive.name for e in ftrans.make_jaxpr(lambda v: f(v) + 1)(x).jaxpr.eqns]
        if JAX_011:
            jm = getattr(jax.Inline, member.name)
            g = jax.jit(lambda v: jnp.sin(v) * 2, inline=jm)
            jnames = [e.primitive.name for e in jax.make_jaxpr(lambda v: g(v) + 1)(x).jaxpr.eqns]
            assert ("jit" in jnames) == ("jit_call" in names), (member, names, jnames)
        assert ("jit_call" in names) == (member is not ftrans.Inline.JAX_EARLY)
        _same(ftrans.jit(lambda v: f(v) + 1)(x), np.sin(x) * 2 + 1, rtol=1e-6)
    with pytest.raises(ValueError, match="Invalid inline option"):
        ftrans.jit(lambda v: v, inline="sometimes")
    if JAX_011:
        with pytest.raises(ValueError, match="Invalid inline option"):
            jax.jit(lambda v: v, inline="sometimes")(1.0)


@pytest.mark.parametrize("level", ["O0", "O1", "O2", "O3", "UNKNOWN"])
def test_compiler_effort_level_in_compiler_options(level):
    L = ftrans.CompilerEffortLevel
    assert L(level) is getattr(L, level) and L(getattr(L, level).value) is getattr(L, level)
    if JAX_011:
        assert getattr(L, level).value == getattr(jax.CompilerEffortLevel, level).value
    x = np.linspace(0, 1, 8, dtype=np.float32)
    for v in (getattr(L, level), level, getattr(L, level).value):
        opts = {"optimization_level": v, "memory_fitting_level": v}
        _same(ftrans.jit(lambda a: fnp.exp(a) * 3, compiler_options=opts)(x), np.exp(x) * 3, rtol=1e-6)
        _same(ftrans.jit(lambda a: a + 1).lower(x).compile(opts)(x), x + 1)
        if JAX_011:
            jv = getattr(jax.CompilerEffortLevel, level) if isinstance(v, L) else v
            jopts = {"optimization_level": jv, "memory_fitting_level": jv}
            _same(jax.jit(lambda a: jnp.exp(a) * 3, compiler_options=jopts)(x), np.exp(x) * 3, rtol=1e-6)


def test_compiler_effort_level_refuses_other_values():
    with pytest.raises(ValueError, match="not a valid CompilerEffortLevel"):
        ftrans.jit(lambda a: a, compiler_options={"optimization_level": "O9"})
    if JAX_011:
        with pytest.raises(ValueError, match="not a valid CompilerEffortLevel"):
            jax.jit(lambda a: a, compiler_options={"optimization_level": "O9"})(1.0)


# ------------------------------------------------- lax.psend / lax.precv: deprecated as in jax 0.12
@pytest.mark.parametrize("name", ["psend", "precv"])
def test_psend_precv_are_deprecated_as_in_jax_012(name):
    with pytest.warns(DeprecationWarning, match=f"{name} is deprecated"):
        fn = getattr(flax, name)
    assert callable(fn) and name not in dir(flax)
    with pytest.warns(DeprecationWarning):
        exec(f"from ftrans.lax import {name}", {})
    if jax.__version_info__ >= (0, 12):
        assert name not in dir(jax.lax)
        with pytest.warns(DeprecationWarning, match=f"{name} is deprecated"):
            getattr(jax.lax, name)
    with pytest.raises(AttributeError, match="no_such_name"):
        flax.no_such_name  # noqa: B018


# ------------------------------------------------- lax.psum_scatter_start
def test_psum_scatter_start_matches_psum_scatter():
    from ftrans.sharding import AxisType
    from ftrans.sharding import PartitionSpec as P

    mesh = ftrans.make_mesh((1,), ("i",), axis_types=(AxisType.Auto,))
    x = np.arange(8, dtype=np.float32).reshape(2, 4)

    def body(a):
        fut = flax.psum_scatter_start({"a": a}, "i", tiled=True)["a"]
        assert fut.shape == (2, 4) and fut.dtype == np.float32 and fut.ndim == 2
        return fut.done() * 2

    got = ftrans.jit(ftrans.shard_map(body, mesh=mesh, in_specs=P("i"), out_specs=P("i")))(x)
    _same(got, x * 2)
    with pytest.raises(NotImplementedError, match="tiled=True"):
        ftrans.jit(ftrans.shard_map(lambda a: flax.psum_scatter_start(a, "i").done(), mesh=mesh, in_specs=P("i"),
                                    out_specs=P("i")))(x)
    with pytest.raises(TypeError):  # a future is not an array
        ftrans.jit(ftrans.shard_map(lambda a: flax.psum_scatter_start(a, "i", tiled=True) + 1, mesh=mesh,
                                    in_specs=P("i"), out_specs=P("i")))(x)
    g = ftrans.vmap(lambda a: flax.psum_scatter_start(a, "b", tiled=True).done(), axis_name="b")
    _same(g(np.ones((2, 4), np.float32)), np.full((2, 2), 2, np.float32))


# ------------------------------------------------- sharding.no_collectives
NO_COLLECTIVES_CASES = {
    "sin": (lambda m, x: m.numpy.sin(x), None),
    "sum over the split dimension": (
        lambda m, x: x.sum(0),
        "`reduce_sum` loses sharding axis 'x' in the output without marking it unreduced"),
    "sum over the other dimension": (lambda m, x: x.sum(1), None),
    "reshard to replicated": (
        lambda m, x: m.sharding.reshard(x, m.sharding.PartitionSpec()),
        "`reshard` loses sharding axis 'x' in the output without marking it unreduced"),
    "reshard moving the axis": (
        lambda m, x: m.sharding.reshard(x, m.sharding.PartitionSpec(None, "x")),
        "`reshard` changes the sharded dimension of axis 'x'"),
    "reshard adding an axis": (lambda m, x: m.sharding.reshard(x, m.sharding.PartitionSpec("x", "y")), None),
    "matmul": (lambda m, x: x @ m.numpy.ones((4, 3)), None),
    "transpose": (lambda m, x: x.T, None),
    "reshape": (lambda m, x: x.reshape(2, 4, 4), None),
    "grad of a sum over the split dimension": (
        lambda m, x: m.grad(lambda v: (v.sum(0) ** 2).sum())(x),
        "`reduce_sum` loses sharding axis 'x'"),
}


@pytest.mark.needs_devices(8)
@pytest.mark.parametrize("case", list(NO_COLLECTIVES_CASES))
@pytest.mark.parametrize("axes", [frozenset(), frozenset({"x"}), frozenset({"y"})], ids=["none", "x", "y"])
@pytest.mark.parametrize("jit", [True, False])
def test_no_collectives_like_jax_012(case, axes, jit):
    from ftrans.errors import ForbiddenCollectiveError

    fn, msg = NO_COLLECTIVES_CASES[case]
    msg = msg if "x" in axes else None

    def run(m):
        S = m.sharding
        mesh = m.make_mesh((2, 4), ("x", "y"), axis_types=(S.AxisType.Explicit,) * 2)
        x = m.device_put(np.arange(32, dtype=np.float32).reshape(8, 4), S.NamedSharding(mesh, S.PartitionSpec("x")))
        with m.set_mesh(mesh), S.no_collectives(set(axes)):
            out = (m.jit(lambda v: fn(m, v)) if jit else (lambda v: fn(m, v)))(x)
            return str(m.typeof(out))

    if msg is None:
        got = run(ftrans)
    else:
        with pytest.raises(ForbiddenCollectiveError, match="Collective across axis 'x' is forbidden by "
                                                           "`no_collectives`, but " + msg.replace("(", r"\(")):
            run(ftrans)
    if hasattr(jax.sharding, "no_collectives"):
        if msg is None:
            assert got == run(jax)
        else:
            with pytest.raises(Exception, match=msg) as e:
                run(jax)
            assert type(e.value).__name__ == "ForbiddenCollectiveError"


@pytest.mark.needs_devices(8)
def test_no_collectives_is_in_jits_cache_key_and_scoped():
    from ftrans.errors import ForbiddenCollectiveError
    from ftrans.sharding import AxisType, NamedSharding, no_collectives
    from ftrans.sharding import PartitionSpec as P

    mesh = ftrans.make_mesh((2, 4), ("x", "y"), axis_types=(AxisType.Explicit,) * 2)
    x = ftrans.device_put(np.ones((8, 4), np.float32), NamedSharding(mesh, P("x")))
    f = ftrans.jit(lambda v: v.sum(0))
    with ftrans.set_mesh(mesh):
        _same(f(x), np.full(4, 8, np.float32))  # traced without the setting
        with no_collectives({"x"}):
            assert no_collectives.value == frozenset({"x"})
            with pytest.raises(ForbiddenCollectiveError):
                f(x)  # traced again: the setting is in the key
        assert no_collectives.value == frozenset()
        _same(f(x), np.full(4, 8, np.float32))


def test_no_collectives_takes_only_sets():
    from ftrans.sharding import no_collectives

    for bad in (["x"], "x", ("x",)):
        with pytest.raises(TypeError, match="Expected axis name"):
            with no_collectives(bad):
                pass
        if hasattr(jax.sharding, "no_collectives"):
            with pytest.raises(TypeError, match="Expected axis name"):
                with jax.sharding.no_collectives(bad):
                    pass
    with no_collectives(frozenset({"a"})):
        assert no_collectives.value == frozenset({"a"})


# ------------------------------------------------- export.symbolic_dim_bounds
def test_symbolic_dim_bounds():
    from ftrans import export as fe

    b, = fe.symbolic_shape("b")
    c, = fe.symbolic_shape("c", constraints=("c >= 4", "c <= 10"))
    cases = [lambda b, c: 5, lambda b, c: b, lambda b, c: 2 * b - 3, lambda b, c: -b, lambda b, c: c,
             lambda b, c: c // 2, lambda b, c: c * c + 1, lambda b, c: np.int32(3)]
    want = [(5, 5), (1, np.inf), (-1, np.inf), (-np.inf, -1), (4, 10), (2, 5), (17, 101), (3, 3)]
    got = [fe.symbolic_dim_bounds(f(b, c)) for f in cases]
    assert got == want
    assert all(type(v) is int for pair in got for v in pair if np.isfinite(v))
    if hasattr(jax.export, "symbolic_dim_bounds"):
        jb, = jax.export.symbolic_shape("b")
        jc, = jax.export.symbolic_shape("c", constraints=("c >= 4", "c <= 10"))
        assert [jax.export.symbolic_dim_bounds(f(jb, jc)) for f in cases] == want
    for bad in (2.5, "b", None):
        with pytest.raises(TypeError):
            fe.symbolic_dim_bounds(bad)


# ------------------------------------------------- small names
def test_ffi_abstract_token():
    from ftrans.core.tokens import AbstractToken

    assert isinstance(ftrans.ffi.abstract_token, AbstractToken)
    assert ftrans.extend.core.AbstractToken is AbstractToken
    with pytest.raises(NotImplementedError, match="token result"):
        ftrans.ffi.ffi_call("some_target", ftrans.ffi.abstract_token)


@pytest.mark.parametrize("ordered", [False, True])
def test_debug_effect_classes(ordered):
    def kinds(m):
        j = m.make_jaxpr(lambda x: m.debug.print("{}", x, ordered=ordered))(1.0)
        effs = list(j.effects) or list(j.jaxpr.effects)
        return [(isinstance(e, m.debug.DebugEffect), isinstance(e, m.debug.OrderedDebugEffect)) for e in effs]

    assert kinds(ftrans) == [(not ordered, ordered)]
    if hasattr(jax.debug, "DebugEffect"):
        assert kinds(ftrans) == kinds(jax)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "complex64", "int32", "bool", "uint8"])
def test_primal_dtype_to_tangent_dtype(dtype):
    from ftrans.extend.core import primal_dtype_to_tangent_dtype

    d = np.dtype(getattr(fnp, dtype) if dtype == "bfloat16" else dtype)
    got = primal_dtype_to_tangent_dtype(d)
    assert got == (d if d.kind in "fcV" and dtype != "bool" else ftrans.dtypes.float0)
    if hasattr(jax.extend.core, "primal_dtype_to_tangent_dtype"):
        assert got == jax.extend.core.primal_dtype_to_tangent_dtype(d)


def test_extend_core_and_experimental_names():
    from ftrans.core.tokens import Token

    assert ftrans.extend.core.Token is Token
    assert issubclass(ftrans.extend.core.InconclusiveDimensionOperation, Exception)
    assert ftrans.experimental.primal_tangent_dtype is ftrans.dtypes.primal_tangent_dtype
    f = ftrans.custom_jvp(lambda x: x * 2)
    f.defjvp(lambda p, t: (f(p[0]), t[0] * 2))
    eqns = ftrans.make_jaxpr(f)(1.0).jaxpr.eqns
    assert [e.primitive for e in eqns] == [ftrans.custom_derivatives.custom_jvp_call_p]


# ------------------------------------------------- the new names' docstrings: sections, and examples run
DOCUMENTED = ["ftrans.lax.polynomial", "ftrans.Inline", "ftrans.CompilerEffortLevel", "ftrans.sharding.get_mesh",
              "ftrans.sharding.get_abstract_mesh", "ftrans.sharding.use_abstract_mesh",
              "ftrans.sharding.no_collectives", "ftrans.lax.psum_scatter_start", "ftrans.export.symbolic_dim_bounds",
              "ftrans.extend.core.primal_dtype_to_tangent_dtype"]


@pytest.mark.parametrize("path", DOCUMENTED)
def test_new_names_docstrings_run(path):
    mod, _, attr = path.rpartition(".")
    obj = getattr(importlib.import_module(mod), attr)
    doc = type(obj).__doc__ if path.endswith("no_collectives") else obj.__doc__
    assert "Examples:" in doc
    if path.endswith("no_collectives"):
        assert "Args:" in type(obj).__call__.__doc__ and "Returns:" in type(obj).__call__.__doc__
    elif not isinstance(obj, type):
        assert "Returns:" in doc
    tests = doctest.DocTestParser().get_doctest(doc, {}, path, None, 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        runner.run(tests)
    assert tests.examples and runner.failures == 0


# ------------------------------------------------- jax 0.12's lax fixes, followed under every jax
JAX_012 = jax.__version_info__ >= (0, 12)
Z = np.complex64([3 + 4j, -1 + 0.5j, 1e-3 - 2e-3j, 0j, 2.0, -1j, 1e30 + 1e30j])
TZ = np.complex64([1j, 1 + 1j, 0.5 - 2j, 1j, 1j, 1, 1 - 1j])


def _sign_tangent_oracle(z, t):
    """``i sign(z) Im(conj(sign(z)) t) / |z|`` in complex128 (0 at z = 0)."""
    z, t = z.astype(np.complex128), t.astype(np.complex128)
    mag = np.abs(z)
    s = np.where(mag == 0, 0, z / np.where(mag == 0, 1, mag))
    dtheta = np.imag(np.conj(s) * t) / np.where(mag == 0, 1, mag)
    return (s * 1j * dtheta).astype(np.complex64)


@pytest.mark.parametrize("how", ["eager", "jit", "vmap"])
def test_sign_jvp_of_complex_follows_jax_012(how):
    def jvp(m, lx):
        f = lambda z, t: m.jvp(lx.sign, (z,), (t,))[1]  # noqa: E731
        return {"eager": f, "jit": m.jit(f), "vmap": m.vmap(f)}[how]

    got = jvp(ftrans, flax)(Z, TZ)
    _same(got, _sign_tangent_oracle(Z, TZ), rtol=2e-6, atol=1e-30)
    if JAX_012:
        _same(got, jvp(jax, jax.lax)(Z, TZ), rtol=2e-6, atol=1e-30)
    # real operands: still zero; the reverse mode of the complex rule
    assert float(ftrans.grad(lambda x: flax.sign(x))(2.0)) == 0.0
    g = ftrans.grad(lambda z: fnp.real(flax.sign(z) * np.complex64(1 - 2j)), holomorphic=False)(np.complex64(3 + 4j))
    # d/dz of Re(sign(z) c) by finite differences along x and y
    h = 1e-3
    fd = lambda dz: np.real(np.sign(np.complex128(3 + 4j) + dz) * (1 - 2j))  # noqa: E731
    want = complex((fd(h) - fd(-h)) / (2 * h), -(fd(1j * h) - fd(-1j * h)) / (2 * h))
    np.testing.assert_allclose(complex(g), want, rtol=1e-4)
    if JAX_012:
        jg = jax.grad(lambda z: jnp.real(jax.lax.sign(z) * np.complex64(1 - 2j)))(np.complex64(3 + 4j))
        np.testing.assert_allclose(complex(g), complex(jg), rtol=1e-6)


@pytest.mark.parametrize("how", ["eager", "jit", "grad"])
def test_expm1_derivative_is_exp_as_jax_012(how):
    """jax 0.12 differentiates expm1 as exp(x): at x < -17, expm1(x) + 1 (jax 0.10/0.11) rounds to 0."""
    x = np.float32([-20.0, -80.0, -1e-8, 0.0, 1e-8, 0.5, 10.0, 88.7, 89.0])
    if how == "grad":
        got = ftrans.vmap(ftrans.grad(flax.expm1))(x)
    else:
        f = lambda v: ftrans.jvp(flax.expm1, (v,), (fnp.ones_like(v),))[1]  # noqa: E731
        got = (ftrans.jit(f) if how == "jit" else f)(x)
    with np.errstate(over="ignore"):
        want = np.exp(x.astype(np.float64)).astype(np.float32)
    _same(got, want, rtol=1e-6)
    assert float(got[0]) > 0  # (2.06e-9, not 0)
    if JAX_012:
        _same(got, jax.vmap(jax.grad(jax.lax.expm1))(x), rtol=1e-6)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_asin_under_jit_is_correctly_rounded_as_jax_012(dtype):
    """jax 0.12 lowers a real asin to atan2(x, sqrt((1 - x)(1 + x))); XLA's CPU chlo.asin was an ulp off
    (0.99999994 -> 1.5704511 where the correctly rounded value is 1.5704510)."""
    with ftrans.enable_x64(dtype == "float64"), jax.enable_x64(dtype == "float64"):
        x = np.array([0.0, -0.0, 1e-30, 0.5, 0.99999994, 1.0, -1.0, 0.7071068, -0.3, 2.0, np.nan, -np.inf],
                     dtype)
        rng = np.random.default_rng(0)
        x = np.concatenate([x, rng.uniform(-1, 1, 200).astype(dtype)])
        got = ftrans.jit(flax.asin)(x)
        eager = flax.asin(x)
        with np.errstate(invalid="ignore"):
            want = np.arcsin(x.astype(np.float64)).astype(dtype) if dtype == "float32" else np.arcsin(x)
        assert np.asarray(got).dtype == np.dtype(dtype)
        g = np.asarray(got)
        np.testing.assert_array_equal(np.isnan(g), np.isnan(want))
        ok = ~np.isnan(want)
        assert (np.abs(g[ok] - want[ok]) <= np.spacing(np.abs(want[ok]).astype(dtype))).all()  # (one ulp)
        assert float(np.asarray(got)[4 if dtype == "float32" else 0]) == float(want[4 if dtype == "float32" else 0])
        np.testing.assert_array_equal(np.signbit(np.asarray(got)[:2]), [False, True])  # asin(-0) = -0
        if JAX_012:
            np.testing.assert_array_equal(np.asarray(got), np.asarray(jax.jit(jax.lax.asin)(x)))
        np.testing.assert_allclose(np.asarray(eager), want, rtol=2e-7 if dtype == "float32" else 1e-15)
    c = np.complex64([0.5 + 0.5j, 2 - 1j])
    _same(ftrans.jit(flax.asin)(c), np.arcsin(c.astype(np.complex128)).astype(np.complex64), rtol=1e-6)


# ------------------------------------------------- unreduced values: jax 0.12's linear neg/sub and its errors
UR_CASES = {
    "sin": (lambda jnp, u, u2: jnp.sin(u), "sin is a non-linear operation and cannot accept input that is unreduced"),
    "exp": (lambda jnp, u, u2: jnp.exp(u), "exp is a non-linear operation"),
    "neg": (lambda jnp, u, u2: -u, None),
    "sub": (lambda jnp, u, u2: u - u2, None),
    "add": (lambda jnp, u, u2: u + u2, None),
    "sub with a reduced operand": (lambda jnp, u, u2: u - 1.0, "lhs is unreduced while rhs is not. `sub` operation"),
}


@pytest.mark.needs_devices(2)
@pytest.mark.parametrize("case", list(UR_CASES))
def test_unreduced_operands_like_jax_012(case):
    from ftrans.errors import ShardingTypeError

    fn, msg = UR_CASES[case]

    def run(m, np_mod):
        S = m.sharding
        P = S.PartitionSpec
        mesh = m.make_mesh((2,), ("x",), axis_types=(S.AxisType.Explicit,))
        a = m.device_put(np.arange(8, dtype=np.float32).reshape(4, 2), S.NamedSharding(mesh, P("x")))

        seen = []

        def body(x):
            u = np_mod.einsum("ij,jk->ik", x.T, x, out_sharding=P(None, None, unreduced={"x"}))
            u2 = np_mod.einsum("ij,jk->ik", x.T, 2 * x, out_sharding=P(None, None, unreduced={"x"}))
            out = fn(np_mod, u, u2)
            seen.append(str(m.typeof(out)))
            return S.reshard(out, P())

        with m.set_mesh(mesh):
            out = m.jit(body)(a)
        return np.asarray(out), seen[0]

    if msg is not None:
        with pytest.raises(ShardingTypeError, match=msg.replace("(", r"\(")):
            run(ftrans, fnp)
        if JAX_012:
            with pytest.raises(Exception, match=msg.replace("(", r"\(")):
                run(jax, jnp)
        return
    got, typ = run(ftrans, fnp)
    x = np.arange(8, dtype=np.float64).reshape(4, 2)
    u, u2 = x.T @ x, x.T @ (2 * x)
    want = {"neg": -u, "sub": u - u2, "add": u + u2}[case].astype(np.float32)
    _same(got, want)
    assert "{U:x}" in typ
    if JAX_012:
        jgot, jtyp = run(jax, jnp)
        _same(got, jgot)
        assert jtyp.replace("float32", "f32") == typ.replace("float32", "f32")


@pytest.mark.parametrize("name", ["cholesky", "eigh"])
@pytest.mark.parametrize("shape", [(2, 3), (3,), (2, 3, 4)])
@pytest.mark.parametrize("jit", [False, True])
def test_linalg_square_input_errors_as_jax_012(name, shape, jit):
    msg = rf"The input to linalg.{name} must have shape \[\.\.\., n, n\], got shape {re_shape(shape)}"

    def call(m):
        f = getattr(m.lax.linalg, name)
        return (m.jit(f) if jit else f)(np.ones(shape, np.float32))

    with pytest.raises(ValueError, match=msg):  # (a TypeError too: jax 0.10/0.11 raised TypeErrors)
        call(ftrans)
    with pytest.raises(TypeError):
        call(ftrans)
    if JAX_012:
        with pytest.raises(ValueError, match=msg):
            call(jax)


def re_shape(shape) -> str:
    import re

    return re.escape(str(tuple(shape)))


@pytest.mark.needs_devices(2)
@pytest.mark.parametrize("op", ["psum", "all_gather", "ppermute", "axis_index"])
def test_no_collectives_refuses_collectives_over_its_axes(op):
    from ftrans.errors import ForbiddenCollectiveError

    def run(m):
        S = m.sharding
        P = S.PartitionSpec
        mesh = m.make_mesh((2,), ("x",), axis_types=(S.AxisType.Explicit,))
        body = {"psum": lambda v: m.lax.psum(v, "x"),
                "all_gather": lambda v: m.lax.all_gather(v, "x", tiled=True)[:2],
                "ppermute": lambda v: m.lax.ppermute(v, "x", [(0, 1), (1, 0)]),
                "axis_index": lambda v: v + m.lax.axis_index("x")}[op]
        x = m.device_put(np.arange(4, dtype=np.float32), S.NamedSharding(mesh, P("x")))
        f = m.jit(m.shard_map(body, mesh=mesh, in_specs=P("x"), out_specs=P("x")))
        with S.no_collectives({"x"}):
            return np.asarray(f(x))

    if op == "axis_index":  # (communicates nothing: allowed)
        got = run(ftrans)
        _same(got, np.float32([0, 1, 3, 4]))
        if hasattr(jax.sharding, "no_collectives"):
            _same(got, run(jax))
        return
    with pytest.raises(ForbiddenCollectiveError, match=f"`{op}` acts on axis 'x'"):
        run(ftrans)
    if hasattr(jax.sharding, "no_collectives"):
        with pytest.raises(Exception, match="acts on axis 'x'"):
            run(jax)


@pytest.mark.needs_devices(4)
@pytest.mark.parametrize("jit", [True, False])
def test_pbroadcast_with_an_array_source_as_jax_012(jit):
    def run(m, src):
        S = m.sharding
        P = S.PartitionSpec
        mesh = m.make_mesh((4,), ("x",), axis_types=(S.AxisType.Explicit,))
        x = m.device_put(np.arange(8, dtype=np.float32) * 10, S.NamedSharding(mesh, P("x")))
        f = m.shard_map(lambda v, s: m.lax.pbroadcast(v, "x", s), mesh=mesh, in_specs=(P("x"), P()),
                        out_specs=P("x"))
        return np.asarray((m.jit(f) if jit else f)(x, src))

    for src in (np.int32(2), np.int32(0)):
        got = run(ftrans, src)
        _same(got, np.tile(np.float32([20 * src, 20 * src + 10]), 4))
        if JAX_012:
            try:
                _same(got, run(jax, src))
            except NotImplementedError:  # (jax 0.12 lowers pbroadcast_dynamic for GPU/TPU only)
                pass
    with pytest.raises(TypeError, match="i32"):
        run(ftrans, np.float32(1))
    with pytest.raises(ValueError, match="scalar"):
        run(ftrans, np.int32([1]))


OUT_SHARDING_CASES = {
    "reduce_sum onto the axis": (lambda m, S, x, v: m.lax.reduce_sum(x, (0,), out_sharding=S.PartitionSpec("x")),
                                 "reduction over axis 'x' does not mark it unreduced in the output"),
    "reduce_sum unreduced": (lambda m, S, x, v: m.lax.reduce_sum(
        x, (0,), out_sharding=S.PartitionSpec(None, unreduced={"x"})), None),
    "reduce_sum other dimension": (lambda m, S, x, v: m.lax.reduce_sum(x, (1,), out_sharding=S.PartitionSpec("x")),
                                   None),
    "broadcast_in_dim moving the axis": (
        lambda m, S, x, v: m.lax.broadcast_in_dim(v, (8, 8), (1,), out_sharding=S.PartitionSpec("x", None)),
        "`broadcast_in_dim` changes the sharded dimension of axis 'x'"),
    "broadcast_in_dim keeping it": (
        lambda m, S, x, v: m.lax.broadcast_in_dim(v, (4, 8), (1,), out_sharding=S.PartitionSpec(None, "x")), None),
    "dot_general contracting, unreduced": (lambda m, S, x, v: m.lax.dot_general(
        x, x, (((0,), (0,)), ((), ())), out_sharding=S.PartitionSpec(None, None, unreduced={"x"})), None),
    "dot_general contracting": (lambda m, S, x, v: m.lax.dot_general(
        x, x, (((0,), (0,)), ((), ())), out_sharding=S.PartitionSpec(None, None)),
        "`dot_general` contracts over axis 'x' without marking it unreduced"),
}


@pytest.mark.needs_devices(8)
@pytest.mark.parametrize("case", list(OUT_SHARDING_CASES))
def test_no_collectives_with_out_sharding_like_jax_012(case):
    from ftrans.errors import ForbiddenCollectiveError

    fn, msg = OUT_SHARDING_CASES[case]

    def run(m):
        S = m.sharding
        P = S.PartitionSpec
        mesh = m.make_mesh((2, 4), ("x", "y"), axis_types=(S.AxisType.Explicit,) * 2)
        x = m.device_put(np.arange(32, dtype=np.float32).reshape(8, 4), S.NamedSharding(mesh, P("x", None)))
        v = m.device_put(np.arange(8, dtype=np.float32), S.NamedSharding(mesh, P("x")))
        with m.set_mesh(mesh), S.no_collectives({"x"}):
            return str(m.typeof(m.jit(lambda: fn(m, S, x, v))()))

    if msg is None:
        got = run(ftrans)
        if hasattr(jax.sharding, "no_collectives"):
            assert got.replace("f32", "float32") == run(jax)
        return
    with pytest.raises(ForbiddenCollectiveError, match=msg):
        run(ftrans)
    if hasattr(jax.sharding, "no_collectives"):
        with pytest.raises(Exception, match=msg):
            run(jax)


@pytest.mark.needs_devices(8)
@pytest.mark.parametrize("out, msg", [(("x", None), None), ((None, "x"), "`reduce` changes the sharded dimension")])
def test_no_collectives_reduce_moving_an_axis(out, msg):
    from ftrans.errors import ForbiddenCollectiveError

    def run(m):
        S = m.sharding
        P = S.PartitionSpec
        mesh = m.make_mesh((2, 4), ("x", "y"), axis_types=(S.AxisType.Explicit,) * 2)
        x = m.device_put(np.arange(64, dtype=np.float32).reshape(4, 4, 4), S.NamedSharding(mesh, P("x", None, None)))
        with m.set_mesh(mesh), S.no_collectives({"x"}):
            return str(m.typeof(m.jit(lambda: m.lax.reduce_sum(x, (2,), out_sharding=P(*out)))()))

    if msg is None:
        assert run(ftrans).replace("f32", "float32") == "float32[4@x,4]"
        return
    with pytest.raises(ForbiddenCollectiveError, match=msg):
        run(ftrans)
    if hasattr(jax.sharding, "no_collectives"):
        with pytest.raises(Exception, match=msg):
            run(jax)


def test_polynomial_under_jet():
    from ftrans.experimental import jet

    x = np.linspace(-1, 1, 4).astype(np.float32)
    ones, zeros = np.ones(4, np.float32), np.zeros(4, np.float32)
    f = lambda lx: lambda v: lx.polynomial(v, [v, 2.0, v * v, 4.0])  # noqa: E731
    got_p, got_s = jet.jet(f(flax), (x,), ((ones, ones, zeros),))
    # the same series through the recurrence written with * and +
    want_p, want_s = jet.jet(lambda v: v + v * (2.0 + v * (v * v + v * 4.0)), (x,), ((ones, ones, zeros),))
    _same(got_p, want_p, rtol=1e-6, atol=1e-6)
    for a, b in zip(got_s, want_s):
        _same(a, b, rtol=1e-5, atol=1e-5)
    if JAX_POLY:
        from jax.experimental import jet as jjet

        jp, js = jjet.jet(f(jax.lax), (x,), ((ones, ones, zeros),))
        _same(got_p, jp, rtol=1e-6, atol=1e-6)
        for a, b in zip(got_s, js):
            _same(a, b, rtol=1e-5, atol=1e-5)
