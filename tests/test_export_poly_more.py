"""More shape polymorphism in ``export``, against ``jax.export`` on the same programs: JAX's dynamic ops (top_k
with a symbolic k, the rbg PRNGs, reduce_window with symbolic windows), equality constraints as rewrite
rules, symbolic sizes in jnp.pad / split / tril_indices / nonzero / bincount, call-time constraint checks,
serialized round trips and exports over an AbstractMesh. Each program is exported once with symbolic shapes in
both libraries and called at several concrete sizes."""

from __future__ import annotations

import math
import re

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import ftrans
import ftrans.numpy as jnp
from ftrans import export


def _export_both(f_ft, f_jax, specs: list, constraints=()):
    """``f`` exported by each library for arguments of ``specs`` (shape text or None, dtype)."""
    def args(lib):
        out, scope = [], None
        for s, d in specs:
            if isinstance(s, str):  # every argument's variables in the scope of the first one's
                shape = (lib.export.symbolic_shape(s, constraints=constraints) if scope is None else
                         lib.export.symbolic_shape(s, scope=scope))
                scope = next((x.scope for x in shape if not isinstance(x, int)), scope)
            else:
                shape = s
            out.append(lib.ShapeDtypeStruct(shape, d))
        return out

    ef = export.export(ftrans.jit(f_ft))(*args(ftrans))
    ej = jax.export.export(jax.jit(f_jax))(*args(jax))
    assert [str(a) for a in ef.out_avals] == [str(a) for a in ej.out_avals]
    return ef, ej


def _same(ef, ej, *xs, rtol=1e-6, exact=False):
    rf, rj = ef.call(*xs), ej.call(*xs)
    lf, lj = jax.tree.leaves(rf), jax.tree.leaves(rj)
    assert len(lf) == len(lj)
    for a, b in zip(lf, lj):
        assert np.asarray(a).dtype == np.asarray(b).dtype and np.shape(a) == np.shape(b)
        if exact:
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
        else:
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=rtol)


_rng = np.random.RandomState(0)


def _f32(*shape):
    return _rng.randn(*shape).astype(np.float32)


# ---------------------------------------------------------------- dynamic ops refined at call time
def test_top_k_with_a_symbolic_k_matches_jax_at_several_sizes():
    ef, ej = _export_both(lambda x: ftrans.lax.top_k(x, x.shape[-1] - 1), lambda x: jax.lax.top_k(x, x.shape[-1] - 1),
                          [("3, b", np.float32)])
    for n in (2, 5, 9):
        _same(ef, ej, _f32(3, n), exact=True)
    # through the serialized bytes, and called inside jit
    back = export.deserialize(ef.serialize())
    x = _f32(3, 7)
    np.testing.assert_array_equal(np.asarray(back.call(x)[0]), np.asarray(ej.call(x)[0]))
    np.testing.assert_array_equal(np.asarray(ftrans.jit(back.call)(x)[1]), np.asarray(ej.call(x)[1]))


def test_approx_max_k_without_aggregation_refuses_symbolic_sizes_as_jax():
    spec = ftrans.ShapeDtypeStruct(export.symbolic_shape("b, 16"), np.float32)
    with pytest.raises(NotImplementedError, match="aggregate_to_topk=False"):
        export.export(ftrans.jit(lambda x: ftrans.lax.approx_max_k(x, x.shape[0], aggregate_to_topk=False)))(spec)


@pytest.mark.parametrize("impl", ["unsafe_rbg", "rbg"])
def test_rbg_prngs_of_symbolic_shapes_match_jax(impl):
    def f(lib):
        def g(x):
            k = lib.random.key(3, impl=impl)
            return lib.random.uniform(k, x.shape) + x, lib.random.bits(k, (x.shape[0] * 2,))
        return g

    ef, ej = _export_both(f(ftrans), f(jax), [("b, 3", np.float32)])
    for n in (1, 4, 6):
        _same(ef, ej, np.zeros((n, 3), np.float32), exact=True)


@pytest.mark.parametrize("kind", ["sum", "max", "generic"])
def test_reduce_window_with_a_symbolic_window_matches_jax(kind):
    def f(lax):
        def g(x):
            if kind == "sum":
                return lax.reduce_window(x, np.float32(0), lax.add, (2, x.shape[0]), (1, 1), "VALID")
            if kind == "max":
                return lax.reduce_window(x, -np.inf, lax.max, (x.shape[0], 2), (1, 2), "SAME")
            return lax.reduce_window((x, x), (np.float32(1), np.float32(0)),
                                     lambda a, b: (lax.add(a[0], b[0]), lax.max(a[1], b[1])),
                                     (2, x.shape[0]), (1, 1), "VALID")
        return g

    ef, ej = _export_both(f(ftrans.lax), f(jax.lax), [("b, 8", np.float32)])
    for n in (2, 3, 5):
        _same(ef, ej, _f32(n, 8))


# ---------------------------------------------------------------- equality constraints
def test_equality_constraints_rewrite_expressions_as_jax():
    for spec, cons, exprs in [
        ("a, b, c, d", ("a * b == c + d",), lambda a, b, c, d: [2 * b * a, a * b * b, a * b, a + c]),
        ("a, b", ("4 * a == b",), lambda a, b: [4 * a, 8 * a, 2 * a, b - 4 * a]),
        ("b, c", ("mod(b, 4) == 0",), lambda b, c: [4 * (b // 4), b % 4, (b * c) // 4]),
        ("a, b", ("floordiv(a, 2) == b + 1",), lambda a, b: [a // 2, 2 * (a // 2) + b]),
    ]:
        fs = export.symbolic_shape(spec, constraints=cons)
        js = jax.export.symbolic_shape(spec, constraints=cons)
        assert [str(e) for e in exprs(*fs)] == [str(e) for e in exprs(*js)]


def test_equality_constraints_inform_comparisons_as_jax():
    (a, b), (ja, jb) = (export.symbolic_shape("a, b", constraints=["4 * a == b"]),
                        jax.export.symbolic_shape("a, b", constraints=["4 * a == b"]))
    for cmp in (lambda a, b: b >= a, lambda a, b: b >= 3 * a, lambda a, b: 5 * a >= b, lambda a, b: 9 * a >= 2 * b,
                lambda a, b: b == 4 * a, lambda a, b: b > 4 * a):
        assert cmp(a, b) == cmp(ja, jb)
    (b,), (jb,) = (export.symbolic_shape("b", constraints=["mod(b, 4) == 0"]),
                   jax.export.symbolic_shape("b", constraints=["mod(b, 4) == 0"]))
    assert (b == 4 * (b // 4), b >= 3 * (b // 4)) == (jb == 4 * (jb // 4), jb >= 3 * (jb // 4))
    specs = export.symbolic_args_specs((np.ones(4), np.ones(4)), ("a*2", "b*2"), constraints=("a==b",))
    jspecs = jax.export.symbolic_args_specs((np.ones(4), np.ones(4)), ("a*2", "b*2"), constraints=("a==b",))
    assert [str(s.shape) for s in specs] == [str(s.shape) for s in jspecs]


def test_bad_equality_constraints_raise_as_jax():
    for cons, pattern in [(["a == 5", "a == 6"], "Unsatisfiable explicit constraint: a == 6"),
                          (["3 == 4"], "Unsatisfiable explicit constraint: 3 == 4"),
                          (["a + b == 4"], "The left-hand-side must be of the form `term \\* coefficient`")]:
        with pytest.raises(ValueError, match=pattern):
            export.symbolic_shape("a, b", constraints=cons)
        with pytest.raises(ValueError, match=pattern.split(":")[0]):
            jax.export.symbolic_shape("a, b", constraints=cons)


def test_programs_that_need_equality_constraints_export_as_jax():
    def sliced(lib):
        return lambda x, y: x[:y.shape[0]] + y[2:]

    ef, ej = _export_both(sliced(ftrans), sliced(jax), [("a", np.int32), ("b", np.int32)],
                          constraints=["b >= 2", "min(a, b) == b - 2"])
    _same(ef, ej, np.arange(16, dtype=np.int32), np.arange(18, dtype=np.int32), exact=True)

    def padded(lib, np_):
        def g(x):
            a, = x.shape
            xp = np_.concatenate([x, np_.zeros((a % 2,), dtype=x.dtype)])
            return x + xp.reshape((2, -1)).reshape((-1,))[:a]
        return g

    ef, ej = _export_both(padded(ftrans, jnp), padded(jax, jjnp), [("a", np.int32)],
                          constraints=["mod(a + mod(a, 2), -2) == 0",
                                       "-2*floordiv(a + mod(a, 2), -2) == a + mod(a, 2)"])
    _same(ef, ej, np.arange(16, dtype=np.int32), exact=True)

    def quarters(lib, np_):
        def g(x):
            b = x.shape[0]
            y = np_.ones((1, 3, 4, b // 4), dtype=x.dtype).reshape((1, 3, -1)) + x.reshape((1, 1, b))
            return np_.sum(y) + np_.sum(lib.lax.slice(x, (0,), (3 * (b // 4),)))
        return g

    ef, ej = _export_both(quarters(ftrans, jnp), quarters(jax, jjnp), [("b", np.int32)],
                          constraints=["mod(b, 4) == 0"])
    for n in (4, 16):
        _same(ef, ej, np.arange(n, dtype=np.int32), exact=True)


def test_constraints_are_checked_at_call_time_with_jax_messages():
    for cons, bad, msg in [(["max(a, b) == b"], (3, 2), "Expected 'max(a, b) - b' to be equal to 0, but found 1"),
                           (["a >= 2", "a <= 4"], (1, 1), "Expected 'a - 2' to be greater or equal to 0, but found -1"),
                           (["a >= 2", "a <= 4"], (5, 1), "Expected '- a + 4' to be greater or equal to 0, but found -1"),
                           (["max(a, b) == 4", "a == b"], (3, 3),
                            "Expected 'max(a, b) - 4' to be equal to 0, but found -1")]:
        ef = export.export(ftrans.jit(lambda x: x))(
            ftrans.ShapeDtypeStruct(export.symbolic_shape("a, b", constraints=cons), np.int32))
        ej = jax.export.export(jax.jit(lambda x: x))(
            jax.ShapeDtypeStruct(jax.export.symbolic_shape("a, b", constraints=cons), np.int32))
        with pytest.raises(ValueError, match=re.escape(msg)):
            ef.call(np.ones(bad, np.int32))
        with pytest.raises(ValueError, match=re.escape(msg)):
            ej.call(np.ones(bad, np.int32))
    ef = export.export(ftrans.jit(lambda x: x))(
        ftrans.ShapeDtypeStruct(export.symbolic_shape("a, b", constraints=["a == b"]), np.int32))
    np.testing.assert_array_equal(np.asarray(ef.call(np.ones((3, 3), np.int32))), np.ones((3, 3)))


# ---------------------------------------------------------------- jnp functions of symbolic sizes
@pytest.mark.parametrize("name", ["tril_indices", "triu_indices"])
def test_triangle_indices_of_a_symbolic_size_match_jax(name):
    ef, ej = _export_both(lambda x: getattr(jnp, name)(x.shape[0]), lambda x: getattr(jjnp, name)(x.shape[0]),
                          [("n, m", np.float32)])
    for n in (1, 3, 6):
        _same(ef, ej, np.zeros((n, 2), np.float32), exact=True)


def test_nonzero_with_a_symbolic_size_matches_jax():
    ef, ej = _export_both(lambda x: jnp.nonzero(x > 0.5, size=x.shape[0], fill_value=-1),
                          lambda x: jjnp.nonzero(x > 0.5, size=x.shape[0], fill_value=-1), [("b, c", np.float32)])
    for s in ((1, 1), (3, 4), (5, 2)):
        _same(ef, ej, np.abs(_f32(*s)), exact=True)


@pytest.mark.parametrize("mode", ["constant", "edge", "wrap", "maximum", "reflect", "symmetric"])
def test_pad_with_symbolic_widths_matches_jax(mode):
    kw = {"stat_length": ((2, 2), (2, 2))} if mode == "maximum" else {}

    def f(np_):
        return lambda x: np_.pad(x, [[x.shape[0] - 1 if mode in ("reflect", "symmetric") else x.shape[0], 0],
                                     [x.shape[1], 1]], mode=mode, **kw)

    ef, ej = _export_both(f(jnp), f(jjnp), [("b, 5", np.float32)], constraints=["b >= 2"])
    for n in (2, 3, 6):
        _same(ef, ej, _f32(n, 5), exact=True)


def test_pad_reflect_that_cannot_be_proven_one_step_raises_as_jax():
    spec = ftrans.ShapeDtypeStruct(export.symbolic_shape("b, 5"), np.float32)
    with pytest.raises(ValueError, match="Shape polymorphism is supported for jnp.pad"):
        export.export(ftrans.jit(lambda x: jnp.pad(x, [[x.shape[0] - 1, 0], [0, 0]], mode="reflect")))(spec)


def test_split_bincount_and_lax_pad_of_symbolic_sizes_match_jax():
    def f(lib, np_):
        def g(x, i):
            a, b = np_.split(x, (x.shape[0] - 2,), axis=0)
            c = np_.bincount(i % 4, length=i.shape[0])
            d = lib.lax.pad(x, np.float32(0), ((x.shape[0], 1, 1),))
            return a, b, c, d
        return g

    ef, ej = _export_both(f(ftrans, jnp), f(jax, jjnp), [("b + 4", np.float32), ("b", np.int32)])
    for n in (1, 5):
        _same(ef, ej, _f32(n + 4), np.arange(n, dtype=np.int32) * 3, exact=True)
    with pytest.raises(ValueError, match="symbolic number of sections is not supported"):
        export.export(ftrans.jit(lambda x: jnp.split(x, x.shape[0] // 2)))(
            ftrans.ShapeDtypeStruct(export.symbolic_shape("2*b"), np.float32))


def test_jvp_of_sort_of_a_symbolic_size_matches_jax():
    ef, ej = _export_both(lambda a: ftrans.jvp(ftrans.lax.sort, (a,), (a,)),
                          lambda a: jax.jvp(jax.lax.sort, (a,), (a,)), [("b", np.float32)])
    for n in (1, 7):
        _same(ef, ej, _f32(n), exact=True)


def test_reshape_that_does_not_divide_raises_jax_error():
    spec = ftrans.ShapeDtypeStruct(export.symbolic_shape("b, 2, 4"), np.float32)
    with pytest.raises(ftrans.errors.InconclusiveDimensionOperation,
                       match=re.escape("Cannot divide evenly the sizes of shapes (b, 2, 4) and (b, -1, 3)")):
        export.export(ftrans.jit(lambda x: x.reshape([x.shape[0], -1, 3])))(spec)


# ---------------------------------------------------------------- serialized round trips
def test_serialized_round_trip_of_a_polymorphic_program_matches_jax():
    def f(lib, np_):
        return lambda x: (np_.sum(lib.lax.top_k(x, x.shape[0] // 2)[0]) * x.shape[0], np_.cumsum(x))

    ef, ej = _export_both(f(ftrans, jnp), f(jax, jjnp), [("2*b", np.float32)])
    back = export.deserialize(ef.serialize())
    assert [str(a) for a in back.in_avals] == [str(a) for a in ej.in_avals]
    for n in (2, 6):
        x = _f32(n)
        for a, b in zip(back.call(x), ej.call(x)):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5)
    with pytest.raises(ValueError, match="Division had remainder 1 when computing the value of 'b'"):
        back.call(_f32(3))


# ---------------------------------------------------------------- an abstract mesh
def test_export_over_an_abstract_mesh_matches_jax():
    if len(ftrans.devices()) < 2:
        pytest.skip("needs 2 devices")
    from ftrans.sharding import AbstractMesh, Mesh, NamedSharding
    from ftrans.sharding import PartitionSpec as P

    # an AbstractMesh's axes are Auto by default, as in jax 0.10 (jax 0.11's are Explicit: docs/differences.md);
    # the Auto ones are named here so that both jax versions build the same program
    assert AbstractMesh((2,), ("x",)).axis_types == (ftrans.sharding.AxisType.Auto,)
    am = AbstractMesh((2,), ("x",), axis_types=(ftrans.sharding.AxisType.Auto,))
    jam = jax.sharding.AbstractMesh((2,), ("x",), axis_types=(jax.sharding.AxisType.Auto,))
    out_f, out_j = NamedSharding(am, P(None, "x")), jax.sharding.NamedSharding(jam, jax.P(None, "x"))
    assert repr(out_f) == repr(out_j) and out_f.memory_kind is None
    ef = export.export(ftrans.jit(lambda a: ftrans.lax.with_sharding_constraint(a @ a.T, out_f)))(
        ftrans.ShapeDtypeStruct((16, 16), np.float32, sharding=NamedSharding(am, P("x", None))))
    ej = jax.export.export(jax.jit(lambda a: jax.lax.with_sharding_constraint(a @ a.T, out_j)))(
        jax.ShapeDtypeStruct((16, 16), np.float32, sharding=jax.sharding.NamedSharding(jam, jax.P("x", None))))
    assert ef.nr_devices == ej.nr_devices == 2
    assert repr(ef.in_shardings_jax(am)) == repr(ej.in_shardings_jax(jam))
    mesh = Mesh(ftrans.devices()[:2], ("x",))
    x = np.arange(256, dtype=np.float32).reshape(16, 16)
    a = ftrans.device_put(x, NamedSharding(mesh, P("x", None)))
    res = ef.call(a)
    np.testing.assert_allclose(np.asarray(res), x @ x.T, rtol=1e-6)
    assert [s.index for s in res.addressable_shards] == [(slice(None), slice(0, 8)), (slice(None), slice(8, 16))]
    assert math.prod(np.shape(res)) == 256


@pytest.mark.parametrize("op", ["cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp"])
@pytest.mark.parametrize("reverse", [False, True])
def test_cumulative_reductions_along_a_symbolic_axis_match_jax(op, reverse):
    def f(lax):
        return lambda x: getattr(lax, op)(x, axis=1, reverse=reverse)

    ef, ej = _export_both(f(ftrans.lax), f(jax.lax), [("2, b", np.float32)])
    for n in (1, 4, 9):
        _same(ef, ej, _f32(2, n) * 0.5, rtol=1e-5)


def test_partitioned_program_with_symbolic_shapes_matches_jax():
    if len(ftrans.devices()) < 4:
        pytest.skip("needs 4 devices")

    def run(lib, ns, p):
        mesh = lib.make_mesh((4,), ("a",), axis_types=(lib.sharding.AxisType.Auto,))
        f = lib.jit(lambda x, y: lib.lax.with_sharding_constraint(x + y, ns(mesh, p("a"))))
        args = (lib.ShapeDtypeStruct((32, 32), np.float32, sharding=ns(mesh, p(None, "a"))),
                lib.ShapeDtypeStruct((32, 32), np.float32, sharding=ns(mesh, p("a"))))
        exp = lib.export.export(f)(*lib.export.symbolic_args_specs(args, shapes_specs=["32, a", "32, a"]))
        outs = [str(exp.in_avals), exp.nr_devices]
        for n in (8, 16):
            a = lib.device_put(np.arange(32 * n, dtype=np.float32).reshape(32, n), ns(mesh, p(None, "a")))
            b = lib.device_put(np.ones((32, n), np.float32), ns(mesh, p("a")))
            r = lib.jit(exp.call, out_shardings=ns(mesh, p("a")))(a, b)
            outs += [np.asarray(r), tuple(r.sharding.spec), np.asarray(exp.call(a, b))]
        return outs

    from ftrans.sharding import NamedSharding, PartitionSpec

    got = run(ftrans, NamedSharding, PartitionSpec)
    want = run(jax, jax.sharding.NamedSharding, jax.sharding.PartitionSpec)
    assert got[:2] == want[:2]
    for g, w in zip(got[2:], want[2:]):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


def test_constraint_over_explicit_axes_raises_as_jax():
    if len(ftrans.devices()) < 4:
        pytest.skip("needs 4 devices")
    from ftrans.sharding import NamedSharding, PartitionSpec

    mesh = ftrans.make_mesh((4,), ("a",))  # Explicit axes, as JAX's default
    jmesh = jax.make_mesh((4,), ("a",))
    msg = "can only refer to Auto axes of the mesh"
    with pytest.raises(ValueError, match=msg):
        ftrans.jit(lambda x: ftrans.lax.with_sharding_constraint(x, NamedSharding(mesh, PartitionSpec("a"))))(
            np.ones(8, np.float32))
    with pytest.raises(ValueError, match=msg):
        jax.jit(lambda x: jax.lax.with_sharding_constraint(x, jax.sharding.NamedSharding(jmesh, jax.P("a"))))(
            np.ones(8, np.float32))
    with pytest.raises(ValueError, match=msg):  # eagerly too, as JAX
        ftrans.lax.with_sharding_constraint(np.ones(8, np.float32), NamedSharding(mesh, PartitionSpec("a")))
    with pytest.raises(ValueError, match=msg):
        jax.lax.with_sharding_constraint(np.ones(8, np.float32), jax.sharding.NamedSharding(jmesh, jax.P("a")))


def test_disabled_checks_print_and_allow_as_jax():
    def f(lib):
        return lambda x: lib.ffi.ffi_call("my_target", lib.ShapeDtypeStruct(x.shape, x.dtype))(x)

    x = np.ones(3, np.float32)
    for lib, exp in ((ftrans, export), (jax, jax.export)):
        with pytest.raises(ValueError, match="Cannot serialize code with custom calls whose targets have no "
                                             "compatibility guarantees"):
            exp.export(lib.jit(f(lib)))(x)
    dc = export.DisabledSafetyCheck.custom_call("my_target")
    jdc = jax.export.DisabledSafetyCheck.custom_call("my_target")
    e = export.export(ftrans.jit(f(ftrans)), disabled_checks=[dc])(x)
    je = jax.export.export(jax.jit(f(jax)), disabled_checks=[jdc])(x)
    assert repr(e.disabled_safety_checks) == repr(je.disabled_safety_checks) == "(custom_call:my_target,)"
    assert str(export.DisabledSafetyCheck.platform()) == str(jax.export.DisabledSafetyCheck.platform())
